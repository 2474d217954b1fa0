"""Stepping from the keyboard at a teacher's pace: every press counts, and the address names the phase shown."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import Watch, settled


def _in_address(page: Page, name: str) -> list[str]:
    """The values of one parameter in the page's address."""
    return parse_qs(urlsplit(page.url).query)[name]


@pytest.mark.parametrize(
    ("keys", "phase"),
    [(["ArrowRight", "ArrowRight", "ArrowRight"], "3"), (["ArrowRight", "ArrowRight", "End", "ArrowLeft"], "19")],
)
def test_keys_pressed_faster_than_a_swap_all_count(
    page: Page, server: str, watch: Watch, keys: list[str], phase: str
) -> None:
    page.goto(f"{server}/?stage=zero3&phase=0")
    page.focus("#step-next")
    for key in keys:
        page.keyboard.press(key)  # no wait between presses: a teacher tapping ahead
    expect(page.locator("#step")).to_have_attribute("data-phase", phase)
    settled(page)
    page.wait_for_timeout(300)  # nothing queued is still to come
    expect(page.locator("#step")).to_have_attribute("data-phase", phase)
    assert _in_address(page, "phase") == [phase]
    watch.assert_clean(page)


def test_double_clicks_never_leave_the_address_behind_the_page(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=dp&phase=4")
    page.dblclick("#step-next")
    settled(page)
    page.wait_for_timeout(300)
    assert _in_address(page, "phase") == [page.locator("#step").get_attribute("data-phase")]
    watch.assert_clean(page)


def test_arrow_keys_still_step_after_pressing_play_and_pause(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero2&phase=5")
    page.click("#step-play")
    page.click("#step-play")  # pause at once; focus stays on the button
    settled(page)
    start = int(page.locator("#step").get_attribute("data-phase") or "0")
    page.keyboard.press("ArrowRight")
    expect(page.locator("#step")).to_have_attribute("data-phase", str(start + 1))
    watch.assert_clean(page)


def test_changing_the_run_while_stepping_stays_at_the_same_phase(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero3&phase=9")
    page.select_option("#f-model", "llama-3-8b")
    expect(page.locator("#f-model option:checked")).to_have_attribute("value", "llama-3-8b")
    page.wait_for_url(lambda url: parse_qs(urlsplit(url).query).get("model") == ["llama-3-8b"])
    settled(page)
    expect(page.locator("#step")).to_have_attribute("data-phase", "9")
    assert _in_address(page, "phase") == ["9"]
    watch.assert_clean(page)


def test_the_step_legend_shows_each_cell_as_the_grid_draws_it(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero3&phase=10")
    styles = page.evaluate(
        """() => ['gathered', 'sent'].map((kind) => [
            getComputedStyle(document.querySelector('.legend .swatch.' + kind)).backgroundImage,
            getComputedStyle(document.querySelector('#grid .cell.' + kind)).backgroundImage,
        ])"""
    )
    for swatch, cell in styles:
        assert "repeating-linear-gradient" in swatch
        assert swatch.split("(")[0] == cell.split("(")[0]
    ring = page.evaluate("getComputedStyle(document.querySelector('.legend .swatch.active')).boxShadow")
    assert ring == page.evaluate("getComputedStyle(document.querySelector('#grid .cell.active')).boxShadow")
    watch.assert_clean(page)


def _slow_network(page: Page, latency_ms: int) -> None:
    # Every request takes this long: a swap is still on its way when the next click comes.
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": latency_ms, "downloadThroughput": -1, "uploadThroughput": -1},
    )


def _ends_on(page: Page, selector: str, attribute: str, value: str) -> None:
    """The swaps settle on `value`, and nothing still queued moves the page on afterwards."""
    expect(page.locator(selector)).to_have_attribute(attribute, value, timeout=10_000)
    settled(page)
    page.wait_for_timeout(800)
    expect(page.locator(selector)).to_have_attribute(attribute, value)


def test_clicks_on_next_during_a_swap_all_count(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero3&phase=0")
    _slow_network(page, 300)
    for _ in range(5):
        page.click("#step-next")
        page.wait_for_timeout(60)
    _ends_on(page, "#step", "data-phase", "5")
    assert _in_address(page, "phase") == ["5"]
    watch.assert_clean(page)


def test_the_last_arrangement_chosen_during_a_swap_wins(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=dp&gpus=22")
    _slow_network(page, 400)
    page.keyboard.press("1")
    page.wait_for_timeout(100)
    page.click("#switch-zero2")  # both while ZeRO-1 is on its way: ZeRO-2 is dropped for ZeRO-3
    page.keyboard.press("3")
    _ends_on(page, "#grid", "data-stage", "zero3")
    assert _in_address(page, "stage") == ["zero3"]
    asked = [parse_qs(urlsplit(r.url).query)["stage"][0] for r in watch.requests if r.resource_type == "xhr"]
    assert asked == ["zero1", "zero3"]
    watch.assert_clean(page)


def _without_htmx_abort_notices(watch: Watch) -> None:
    # htmx logs the request the form's replaced (hx-sync replace) as an error: that is the design here.
    watch.console_errors[:] = [
        e for e in watch.console_errors if not e.startswith(("htmx:afterRequest", "htmx:sendAbort"))
    ]


def test_a_stage_chosen_just_before_a_change_of_the_run_still_counts(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=dp&gpus=16")
    _slow_network(page, 350)
    page.click("#switch-zero3")
    page.select_option("#f-model", "llama-3-8b")  # the form's request replaces the tab's on its way
    expect(page.locator("table.figures caption")).to_contain_text("Llama 3 8B", timeout=10_000)
    _ends_on(page, "#grid", "data-stage", "zero3")
    assert _in_address(page, "stage") == ["zero3"]
    _without_htmx_abort_notices(watch)
    watch.assert_clean(page)


def test_steps_pressed_around_a_change_of_the_run_all_count(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero2&gpus=16&phase=3")
    _slow_network(page, 350)
    page.click("#step-next")
    page.click("#step-next")
    page.fill("#f-gpus", "32")
    page.press("#f-gpus", "Tab")
    expect(page.locator("#grid")).to_have_attribute("data-gpus", "32", timeout=10_000)
    _ends_on(page, "#step", "data-phase", "5")
    assert _in_address(page, "phase") == ["5"]
    _without_htmx_abort_notices(watch)
    watch.assert_clean(page)


def test_a_key_for_the_stage_shown_before_a_swap_still_counts(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=dp&gpus=16")
    _slow_network(page, 350)
    page.keyboard.press("1")
    page.wait_for_timeout(100)
    page.keyboard.press("0")  # data parallelism is marked current on the old page, but ZeRO-1 is coming
    _ends_on(page, "#grid", "data-stage", "dp")
    assert _in_address(page, "stage") == ["dp"]
    watch.assert_clean(page)


def test_a_double_click_on_a_tab_keeps_the_marks_of_what_changed(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=dp")
    page.dblclick("#switch-zero2")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero2")
    settled(page)
    page.wait_for_timeout(500)
    assert page.locator("#grid .cell.changed").count() > 0
    expect(page.locator("#change-note")).not_to_be_empty()
    asked = [parse_qs(urlsplit(r.url).query)["stage"][0] for r in watch.requests if r.resource_type == "xhr"]
    assert asked == ["zero2"]
    watch.assert_clean(page)
