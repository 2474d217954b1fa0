"""Teaching in Chromium: shortcuts, the help dialog, the narration, the marks and /compare."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from tests.browser.conftest import Watch, screenshot, settled

STAGES = {"0": "dp", "1": "zero1", "2": "zero2", "3": "zero3"}


def test_number_keys_switch_the_stage_and_the_narration_says_what_changed(
    page: Page, server: str, watch: Watch
) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server + "/?stage=dp")
    grid, narration = page.locator("#grid"), page.locator("#narration")
    page.locator("#stage-heading").click()
    page.keyboard.press("2")
    expect(grid).to_have_attribute("data-stage", "zero2")
    expect(page).to_have_url(f"{server}/?stage=zero2")
    # Gradients 2 + master 4 + moments 8 = 14 B split 8 ways: 14 × 7/8 = 12.25 of 16 dropped; 16 and
    # 3.75 B × 30e9 weights = 447.0 and 104.8 GiB a card.
    expect(narration).to_have_text(
        "ZeRO-2 splits the bf16 gradients, the fp32 master copy and Adam's two fp32 moments: each card drops "
        "12.25 of its 16.00 bytes per weight (now 3.75). Each GPU keeps 104.8 GiB, was 447.0 GiB."
    )
    expect(page.locator("#grid .cell.changed")).to_have_count(3 * 56)
    expect(page.locator("#change-note")).to_have_text(narration.text_content() or "")
    screenshot(page, "teach-stage-change-dp-to-zero2")
    settled(page)
    for key, stage in [("1", "zero1"), ("3", "zero3"), ("0", "dp")]:
        page.keyboard.press(key)
        expect(grid).to_have_attribute("data-stage", stage)
        expect(page.locator(f"#switch-{stage}")).to_have_attribute("aria-current", "page")
        settled(page)
    # ZeRO-3 on 8 cards keeps 16/8 = 2 B; going back adds 14.
    expect(narration).to_contain_text("each card adds 14.00 to its 2.00 bytes per weight (now 16.00)")
    assert page.evaluate("document.querySelectorAll('[aria-live]').length") == 1
    watch.assert_clean(page)


def test_no_shortcut_while_typing_or_with_a_modifier(page: Page, server: str, watch: Watch) -> None:
    page.goto(server + "/?stage=dp")
    field = page.locator("#f-capacity")
    field.click()
    page.keyboard.type("3?f")
    expect(field).to_have_value("3?f")
    expect(page.locator("#keys-help")).to_be_hidden()
    page.locator("#stage-heading").click()
    page.keyboard.press("Alt+1")
    page.keyboard.press("Control+2")
    # A swap would start at once; give it time to, then check none did.
    page.wait_for_timeout(400)
    expect(page.locator("#grid")).to_have_attribute("data-stage", "dp")
    # Leaving the field sends the run form (stage dp); no switch (whose link names `from`) was asked for.
    assert [r.url for r in watch.requests if "from=" in r.url] == []


def test_question_mark_opens_the_keys_and_focus_comes_back(page: Page, server: str, watch: Watch) -> None:
    page.goto(server + "/?stage=zero1")
    dialog = page.locator("#keys-help")
    expect(page.locator(".keys-hint")).to_be_visible()
    page.locator("#switch-zero1").focus()
    page.keyboard.press("?")
    expect(dialog).to_be_visible()
    expect(dialog.locator("dt")).to_have_count(8)
    # Keys do nothing behind the open dialog.
    page.keyboard.press("2")
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(page.locator("#switch-zero1")).to_be_focused()
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero1")
    page.keyboard.press("?")
    expect(dialog).to_be_visible()
    page.click("#keys-close")
    expect(dialog).to_be_hidden()
    expect(page.locator("#switch-zero1")).to_be_focused()
    watch.assert_clean(page)


HIT = """el => { const b = el.getBoundingClientRect();
  const hit = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2); return el.contains(hit); }"""


@pytest.mark.parametrize(("width", "height", "theme"), [(1280, 800, "default"), (1920, 1080, "projector")])
def test_f_asks_for_full_screen(page: Page, server: str, watch: Watch, width: int, height: int, theme: str) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(server + f"/?stage=zero1&theme={theme}")
    page.locator("#stage-heading").click()
    page.keyboard.press("f")
    expect(page.locator("main:fullscreen")).to_have_count(1)
    # Nothing lies over the tabs: each can be clicked in its middle.
    for tab in page.locator(".switch").all():
        assert tab.evaluate(HIT), tab.get_attribute("id")
    page.locator("#switch-zero3").click()
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero3")
    expect(page.locator("main:fullscreen")).to_have_count(1)
    page.keyboard.press("f")
    expect(page.locator("main:fullscreen")).to_have_count(0)
    watch.assert_clean(page)


def test_a_phase_change_is_said_as_its_title_and_tally(page: Page, server: str, watch: Watch) -> None:
    page.goto(server + "/?stage=zero1&phase=10")
    page.locator("#step-heading").click()
    page.keyboard.press("ArrowRight")
    expect(page.locator("#step")).to_have_attribute("data-phase", "11")
    # ZeRO-1 holds nothing in hand: 5.5 B × 30e9 = 153.7 GiB a card all through the forward pass.
    expect(page.locator("#narration")).to_have_text(
        "Phase 11 of 52: Forward pass, column 3: compute. Traffic so far: 0P of 2P. "
        "Each GPU holds 153.7 GiB, as in the phase before."
    )
    settled(page)
    # A stage change during the step says the change, not the phase.
    page.keyboard.press("2")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero2")
    expect(page.locator("#narration")).to_have_text(
        "ZeRO-2 splits the bf16 gradients too: each card drops 1.75 of its 5.50 bytes per weight (now 3.75). "
        "Each GPU keeps 104.8 GiB, was 153.7 GiB."
    )
    watch.assert_clean(page)


def test_a_new_card_size_is_said_as_the_fit_verdict(page: Page, server: str, watch: Watch) -> None:
    page.goto(server + "/?stage=zero3&capacity=64GiB")
    page.fill("#f-capacity", "80GiB")
    page.locator("#f-capacity").press("Tab")
    # ZeRO-3: 2 B × 30e9 = 60e9 B at rest, and one of the 8 layers (3.75e9 weights) gathered and its
    # gradients computed, 2 B + 2 B each: a peak of 75e9 B. 80 GiB = 85.90e9 B leaves 10.90e9 B = 10.2 GiB.
    expect(page.locator("#narration")).to_have_text("ZeRO-3 fits on 80.0 GiB: 10.2 GiB left for activations.")
    watch.assert_clean(page)


RING = re.compile(r"rgb\(\d+, \d+, \d+\) 0px 0px 0px 4px$")
"""A changed cell's outer ring, in the page's ink: drawn (an invisible ring would be rgba(…, 0))."""


@pytest.mark.parametrize("reduced", ["reduce", "no-preference"])
def test_the_rings_fade_after_a_while_only_without_reduced_motion(page: Page, server: str, reduced: str) -> None:
    page.emulate_media(reduced_motion=reduced)  # type: ignore[arg-type]
    page.goto(server + "/?stage=dp")
    page.click("#switch-zero1")
    cell = page.locator("#grid .cell.changed").first
    expect(cell).to_have_css("box-shadow", RING)
    # The fade's own clock, not the test's: on a loaded machine a second of waiting here can be more
    # than the 1.5 s the rings hold, so the grid's animation is paused and set to a moment.
    fades = page.evaluate("document.getElementById('grid').getAnimations().length")
    if reduced == "reduce":
        assert fades == 0
        page.wait_for_timeout(2600)
        expect(cell).to_have_css("box-shadow", RING, timeout=100)  # held for good
    else:
        assert fades == 1
        expect(page.locator("#grid")).to_have_css("animation-name", "rings-fade-zero1")
        seek = "t => { const a = document.getElementById('grid').getAnimations()[0]; a.pause(); a.currentTime = t; }"
        page.evaluate(seek, 1400)
        expect(cell).to_have_css("box-shadow", RING, timeout=1000)  # still held before 1.5 s
        page.evaluate(seek, 2600)
        expect(cell).to_have_css("box-shadow", re.compile(r"rgba\(0, 0, 0, 0\) 0px 0px 0px 4px$"), timeout=1000)
    # A new arrangement rings its own changes afresh, whatever the last one's fade had reached.
    page.click("#switch-zero2")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero2")
    expect(page.locator("#grid .cell.changed").first).to_have_css("box-shadow", RING)


def test_compare_fits_1280_works_without_javascript_and_passes_axe(page: Page, server: str, watch: Watch) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server + "/?stage=zero1")
    page.click("#compare-link")
    expect(page).to_have_url(f"{server}/compare?left=zero1&right=zero2")
    page.click("#right-zero3")
    expect(page).to_have_url(f"{server}/compare?left=zero1&right=zero3")
    expect(page.locator("#left")).to_have_attribute("data-stage", "zero1")
    expect(page.locator("#right")).to_have_attribute("data-stage", "zero3")
    # Both sides, every card, on one 1280 × 800 screen with no sideways scrolling.
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    box = page.locator(".compare-sides").bounding_box()
    assert box is not None
    assert box["y"] + box["height"] <= 800
    screenshot(page, "teach-compare-1280")
    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()
    watch.assert_clean(page)


def test_the_default_run_shows_zero3_gather_a_layer_use_it_and_discard_it(
    page: Page, server: str, watch: Watch
) -> None:
    # The lesson as the page comes: no option but the stage. The seed's 30B in 8 layers of 3.75e9 weights:
    # at rest 16 B × 30e9 / 8 cards = 60e9 B = 55.9 GiB a card; a layer gathered adds 3.75e9 × 2 B = 7.5e9 B,
    # 67.5e9 B = 62.9 GiB; discarded the phase after its compute, it is 55.9 GiB again.
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?stage=zero3&phase=0")
    now = page.locator("#grid .card").first.locator(".card-sub span").first
    expect(now).to_have_text("now 55.9 GiB")
    for _ in range(5):
        page.keyboard.press("PageDown")
        settled(page)
    expect(page.locator("#step")).to_have_attribute("data-phase", "5")
    expect(now).to_have_text("now 62.9 GiB")
    # The layer in hand on the card's one bar, after its state at rest and on the same scale: its 7.5e9 B
    # of weights, 1/64 of data parallelism's 480e9 B.
    gathered = page.locator("#grid .card").first.locator(".card-bar rect.gathered").bounding_box()
    bar = page.locator("#grid .card").first.locator(".card-bar svg").bounding_box()
    assert gathered is not None
    assert bar is not None
    assert gathered["width"] == pytest.approx(bar["width"] / 64, abs=0.5)
    assert gathered["x"] == pytest.approx(bar["x"] + bar["width"] / 8, abs=0.5)
    # Phase 6 discards the layer used in phase 5: a click of its own, the card's figure falls.
    page.keyboard.press("PageDown")
    expect(page.locator("#step")).to_have_attribute("data-phase", "6")
    expect(now).to_have_text("now 55.9 GiB")
    expect(page.locator("#grid .card").first.locator(".card-bar rect.gathered")).to_have_count(0)
    # After the backward pass (the gradients' sync), nothing is in hand either.
    page.goto(f"{server}/?stage=zero3&phase=49")
    expect(now).to_have_text("now 55.9 GiB")
    expect(page.locator("#grid .card").first.locator(".card-bar rect.gathered")).to_have_count(0)
    watch.assert_clean(page)


@pytest.mark.parametrize("width", [360, 390])
def test_on_a_phone_the_cards_come_first_then_how_to_read_them_then_the_calculator(
    page: Page, server: str, watch: Watch, width: int
) -> None:
    page.set_viewport_size({"width": width, "height": 844})
    page.goto(f"{server}/?stage=zero2")

    def top(selector: str) -> float:
        box = page.locator(selector).first.bounding_box()
        assert box is not None, selector
        return box["y"]

    # The stage's words just under the cards, then their key (issue 45: on a phone the words had started
    # 1,320 px down, under the key); the calculator after both.
    order = ["#switch-zero2", "#grid", ".explanation", ".legend", "#run-form"]
    tops = [top(selector) for selector in order]
    assert tops == sorted(tops), dict(zip(order, tops, strict=True))
    # The first cards are on the first screen, under the switcher.
    assert top("#grid .card") < 844 / 2
    # A tap on another stage changes cells still in view.
    page.click("#switch-zero3")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero3")
    assert 0 <= top("#grid .card") < 844 / 2
    watch.assert_clean(page)
