"""Stepping from the keyboard at a teacher's pace: every press counts, and the address names the phase shown."""

from __future__ import annotations

import itertools
import re
import time
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import Page, Route, expect

from tests.browser.conftest import Watch, settled


def _in_address(page: Page, name: str) -> list[str]:
    """The values of one parameter in the page's address."""
    return parse_qs(urlsplit(page.url).query)[name]


@pytest.mark.parametrize(
    ("keys", "phase"),
    [(["ArrowRight", "ArrowRight", "ArrowRight"], "3"), (["ArrowRight", "ArrowRight", "End", "ArrowLeft"], "51")],
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
    page.goto(f"{server}/?stage=zero3&phase=26")  # the backward's compute of column 7: gathered and sent cells
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


def _held(page: Page, stage: str) -> list[Route]:
    """Requests for `stage` wait, unanswered, until the test lets them go: a swap on its way however slow the machine.

    A latency alone is a race: on a loaded machine the click meant for the middle of a swap can come after it.
    """
    held: list[Route] = []

    def hold(route: Route) -> None:
        held.append(route)

    page.route(lambda url: f"stage={stage}" in url, hold)
    return held


def _release(page: Page, held: list[Route]) -> None:
    deadline = time.monotonic() + 10
    while not held:  # the route's handler runs when Playwright next hears from the browser
        assert time.monotonic() < deadline, "the request to hold was never sent"
        page.wait_for_timeout(20)
    for route in held:
        route.continue_()


def test_the_last_arrangement_chosen_during_a_swap_wins(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=dp&gpus=22")
    held = _held(page, "zero1")
    page.keyboard.press("1")
    page.click("#switch-zero2")  # both while ZeRO-1 is on its way: ZeRO-2 is dropped for ZeRO-3
    page.keyboard.press("3")
    _release(page, held)
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


# A presentation clicker sends PageDown and PageUp: they step, as → and ← do, and the page stays put.
@pytest.mark.parametrize(
    ("key", "start", "end"),
    [("PageDown", 4, 5), ("PageUp", 4, 3), ("PageDown", 0, 1), ("PageUp", 19, 18), ("ArrowRight", 4, 5)],
)
def test_a_clicker_steps_without_scrolling_the_page(
    page: Page, server: str, watch: Watch, key: str, start: int, end: int
) -> None:
    page.goto(f"{server}/?stage=zero3&phase={start}")
    page.evaluate("window.scrollTo(0, 200)")
    assert page.evaluate("scrollY") == 200  # tall enough to scroll: a page key would move it
    page.keyboard.press(key)
    expect(page.locator("#step")).to_have_attribute("data-phase", str(end))
    settled(page)
    assert _in_address(page, "phase") == [str(end)]
    assert page.evaluate("scrollY") == 200
    watch.assert_clean(page)


@pytest.mark.parametrize(
    ("keys", "phase"), [(["ArrowRight"], "1"), (["PageDown"], "1"), (["PageDown", "ArrowRight"], "2")]
)
def test_forward_at_rest_starts_the_step_at_its_first_move(
    page: Page, server: str, watch: Watch, keys: list[str], phase: str
) -> None:
    page.goto(f"{server}/?stage=zero3")
    for key in keys:
        page.keyboard.press(key)
    _ends_on(page, "#step", "data-phase", phase)
    assert _in_address(page, "phase") == [phase]
    assert page.evaluate("scrollY") == 0
    watch.assert_clean(page)


@pytest.mark.parametrize(("keys", "start"), [(["ArrowLeft"], 0), (["PageUp"], 0), (["ArrowLeft", "PageUp"], 1)])
def test_back_at_phase_0_leaves_the_step(page: Page, server: str, watch: Watch, keys: list[str], start: int) -> None:
    page.goto(f"{server}/?stage=zero2&phase={start}")
    for key in keys:
        page.keyboard.press(key)  # the second while the first swap is on its way: it counts at phase 0
    expect(page.locator("#watch-step")).to_be_visible()
    expect(page.locator("#step")).to_have_count(0)
    settled(page)
    assert "phase" not in parse_qs(urlsplit(page.url).query)
    watch.assert_clean(page)


def _blanked(page: Page) -> bool:
    # The whole window black, above everything, in full screen too (the overlay is <main>'s).
    cover: dict[str, str] = page.evaluate(
        """() => { const s = getComputedStyle(document.querySelector('main'), '::after');
                   return {content: s.content, position: s.position, background: s.backgroundColor,
                           width: s.width, height: s.height}; }"""
    )
    size = page.viewport_size or {"width": 0, "height": 0}
    full = cover["width"] == f"{size['width']}px" and cover["height"] == f"{size['height']}px"
    return (
        cover["content"] != "none" and cover["position"] == "fixed" and cover["background"] == "rgb(0, 0, 0)" and full
    )


@pytest.mark.parametrize(("blank", "back"), [("b", "b"), (".", "ArrowRight"), ("b", "PageDown"), (".", "click")])
def test_b_blanks_the_screen_and_any_key_or_click_brings_it_back(
    page: Page, server: str, watch: Watch, blank: str, back: str
) -> None:
    page.goto(f"{server}/?stage=zero3&phase=4")
    assert not _blanked(page)
    page.keyboard.press(blank)
    assert _blanked(page)
    if back == "click":
        page.mouse.click(400, 300)
    else:
        page.keyboard.press(back)
    assert not _blanked(page)
    settled(page)
    page.wait_for_timeout(300)
    # The key or click that brings the picture back does nothing else: still the phase shown.
    expect(page.locator("#step")).to_have_attribute("data-phase", "4")
    assert _in_address(page, "phase") == ["4"]
    watch.assert_clean(page)


# The page's clock is Playwright's: Play's wait is read off it, not timed against the wall.
@pytest.mark.parametrize(("speed", "wait_ms"), [("slow", 2400), ("normal", 1400), ("fast", 700)])
def test_play_waits_as_long_as_the_speed_chosen(
    page: Page, server: str, watch: Watch, speed: str, wait_ms: int
) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)
    page.clock.install(time=start)
    page.goto(f"{server}/?stage=zero2&phase=3")
    page.clock.pause_at(start + timedelta(minutes=1))  # from now on the page's time moves only when told
    expect(page.locator("#step-speed")).to_be_visible()
    page.select_option("#step-speed", speed)
    page.click("#step-play")
    page.clock.run_for(wait_ms - 50)
    page.wait_for_timeout(200)  # a request sent now would be back by then
    expect(page.locator("#step")).to_have_attribute("data-phase", "3")
    page.clock.run_for(100)
    expect(page.locator("#step")).to_have_attribute("data-phase", "4")
    watch.assert_clean(page)


def test_the_speed_chosen_outlives_the_swaps(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero3&phase=2")
    expect(page.locator("#step-speed")).to_have_value("normal")
    page.select_option("#step-speed", "fast")
    page.click("#step-next")
    expect(page.locator("#step")).to_have_attribute("data-phase", "3")
    expect(page.locator("#step-speed")).to_have_value("fast")
    page.click("#step-leave")  # the panel goes, and comes back new
    page.click("#watch-step")
    expect(page.locator("#step")).to_have_attribute("data-phase", "0")
    settled(page)
    expect(page.locator("#step-speed")).to_be_visible()
    expect(page.locator("#step-speed")).to_have_value("fast")
    watch.assert_clean(page)


def test_the_list_of_keys_names_the_clicker_the_blank_screen_and_the_speed(
    page: Page, server: str, watch: Watch
) -> None:
    page.goto(f"{server}/?stage=zero1")
    page.keyboard.press("?")
    keys = page.locator("#keys-help")
    expect(keys).to_be_visible()
    for words in ["PageDown", "PageUp", "starts the step at phase 1", "leaves the step", "Blank", "any key or click",
                  "speed"]:  # fmt: skip
        expect(keys).to_contain_text(words)
    watch.assert_clean(page)


# A teacher who last clicked the phase slider or the speed, then picks up the clicker: its keys still step
# one phase, where a slider or a drop-down would take PageDown for itself (a tenth of the step, the last option).
@pytest.mark.parametrize(("focused", "key", "end"), [("#phase-slider", "PageDown", 5), ("#step-speed", "PageUp", 3)])
def test_a_clicker_steps_when_the_steps_own_control_has_the_focus(
    page: Page, server: str, watch: Watch, focused: str, key: str, end: int
) -> None:
    page.goto(f"{server}/?stage=zero3&phase=4")
    page.focus(focused)
    page.keyboard.press(key)
    expect(page.locator("#step")).to_have_attribute("data-phase", str(end))
    settled(page)
    assert _in_address(page, "phase") == [str(end)]
    expect(page.locator("#step-speed")).to_have_value("normal")
    watch.assert_clean(page)


# The slider and the pace are clicked, not typed in: the page's own keys still work from them.
@pytest.mark.parametrize("focused", ["#phase-slider", "#step-speed"])
def test_the_page_keys_work_when_the_steps_own_control_has_the_focus(
    page: Page, server: str, watch: Watch, focused: str
) -> None:
    page.goto(f"{server}/?stage=zero3&phase=4")
    page.focus(focused)
    page.keyboard.press("b")
    expect(page.locator("html")).to_have_class(re.compile(r"\bblanked\b"))
    page.keyboard.press("b")  # any key brings the picture back, and does nothing else
    expect(page.locator("html")).not_to_have_class(re.compile(r"\bblanked\b"))
    page.focus(focused)
    page.keyboard.press("1")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero1")
    watch.assert_clean(page)


def _gib(text: str) -> float:
    """A card's "now 62.9 GiB" as a number of GiB."""
    found = re.search(r"now ([\d,.]+) GiB", text)
    assert found, text
    return float(found.group(1).replace(",", ""))


def test_pressing_right_through_zero3s_step_moves_the_cards_figure_at_every_gather_and_discard(
    page: Page, server: str, watch: Watch
) -> None:
    # The page's default run (the seed's 30B on 8 cards), ZeRO-3: a column's gather adds its layer, 62.9 GiB;
    # the backward's compute its gradients too, 69.8 GiB; every discard drops back to 55.9 GiB at rest.
    page.goto(f"{server}/?stage=zero3&phase=0")
    figure = page.locator("#grid .card-sub").first
    seen = [(0, _gib(figure.inner_text()))]
    page.focus("#step-next")
    for phase in range(1, 53):
        page.keyboard.press("ArrowRight")
        expect(page.locator("#step")).to_have_attribute("data-phase", str(phase))
        settled(page)
        seen.append((phase, _gib(figure.inner_text())))
    moves = list(itertools.pairwise(seen))
    rises = [b for (_, x), (b, y) in moves if y > x]
    falls = [b for (_, x), (b, y) in moves if y < x]
    gathers, discards = list(range(1, 49, 3)), list(range(3, 49, 3))
    assert set(gathers) <= set(rises)
    assert set(discards) == set(falls)
    assert len(rises) >= 16
    assert len(falls) >= 16
    assert {y for b, y in seen if b in gathers} == {62.9}
    assert {y for b, y in seen if b in discards} == {55.9}
    assert max(y for _, y in seen) == 69.8  # the table's peak
    watch.assert_clean(page)
