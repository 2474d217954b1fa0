"""The pipeline's schedule in the step, in Debian's Chromium: on the first screen with the cards, and what axe says.

At 1280×800 and in the projector's view at 1024×768, for 1F1B and interleaved 1F1B.
"""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from tests.browser.conftest import Watch, screenshot

RUN = "/?model=llama-3-8b&gpus=16&tp=2&pp=4&microbatches=8&phase=5"

# The drawing, the first row of cards and the step's heading, each a box in the window's coordinates.
BOXES = """() => {
  const box = (el) => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  return {drawing: box(document.querySelector('#schedule svg')),
          cards: [...document.querySelectorAll('#grid .card')].slice(0, 4).map(box),
          scroll: document.documentElement.scrollWidth, width: innerWidth, height: innerHeight};
}"""


# The smallest text the drawing shows, in CSS pixels: its font size in SVG units times the drawing's width over
# its 600-unit viewBox.
SMALLEST_TEXT = """() => { const svg = document.querySelector('#schedule svg');
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  return Math.min(...[...svg.querySelectorAll('text')].filter(t => t.checkVisibility())
    .map(t => parseFloat(getComputedStyle(t).fontSize) * scale)); }"""
# The projector's back row reads 16 px (issue 45); up close, 10 px: 22 units in a 300 px column.
LEAST_TEXT = {"default": 10.0, "projector": 16.0}


def _inside(b: list[float], width: float, height: float) -> bool:
    left, top, right, bottom = b
    return left >= -0.5 and top >= -0.5 and right <= width + 0.5 and bottom <= height + 0.5


@pytest.mark.slow
@pytest.mark.parametrize("vpp", [1, 2])
@pytest.mark.parametrize(("width", "height", "theme"), [(1280, 800, "default"), (1024, 768, "projector")])
def test_the_schedule_is_on_the_first_screen_with_the_cards(
    page: Page, server: str, watch: Watch, width: int, height: int, theme: str, vpp: int
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}{RUN}&vpp={vpp}&theme={theme}")
    schedule = page.locator("#schedule")
    expect(schedule.locator("svg")).to_be_visible()
    expect(schedule.locator(".stage-row")).to_have_count(4)
    expect(schedule.locator(".stage-row").first.locator("rect.slot")).to_have_count(16 * vpp)
    bubble = "3/8 = 37.5%" if vpp == 1 else "3/(8 · 2) = 3/16 = 18.8%"
    expect(page.locator("#schedule-bubble")).to_contain_text(bubble)
    seen = page.evaluate(BOXES)
    assert _inside(seen["drawing"], width, height), seen["drawing"]
    assert all(_inside(card, width, height) for card in seen["cards"]), seen["cards"]
    assert seen["scroll"] <= width
    # Beside the cards, not under them: the drawing starts right of the first row's last card.
    assert seen["drawing"][0] >= seen["cards"][-1][2]
    assert page.evaluate(SMALLEST_TEXT) >= LEAST_TEXT[theme]
    screenshot(page, f"schedule-vpp{vpp}-{theme}-{width}x{height}")
    watch.assert_clean(page)


@pytest.mark.slow
def test_axe_finds_no_violations_in_the_schedule(page: Page, server: str) -> None:
    page.goto(f"{server}{RUN}&vpp=2")
    results = Axe().run(page, context={"include": [["#schedule"]]})
    assert results.violations_count == 0, results.generate_report()


@pytest.mark.slow
def test_no_pipeline_draws_no_schedule(page: Page, server: str) -> None:
    page.goto(f"{server}/?model=llama-3-8b&gpus=16&phase=5")
    expect(page.locator("#step")).to_be_visible()
    expect(page.locator("#schedule")).to_have_count(0)


DSV3_EMBED = "/embed?model=deepseek-v3&gpus=2048&nodes=256&pp=16&ep=64&stage=zero1&phase=10"
# The schedule drawn in an embed, the drawing and the whole figure, in CSS pixels, and its smallest text.
EMBED_SCHEDULE = """() => { const svg = [...document.querySelectorAll('#schedule svg')].find(s => s.checkVisibility());
  const scale = svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  const figure = document.querySelector('#schedule').getBoundingClientRect().height;
  return {drawing: svg.getBoundingClientRect().height, figure,
          rows: svg.querySelectorAll('.stage-row').length, scroll: document.documentElement.scrollWidth,
          text: Math.min(...[...svg.querySelectorAll('text')].filter(t => t.checkVisibility())
            .map(t => parseFloat(getComputedStyle(t).fontSize) * scale))}; }"""
# The embed's frame is 800 px (embed_view.EMBED_HEIGHT). The first and last three of 16 stages at the drawing's
# 30rem: 482 units × 480/600 = 386 px, under 400; with its heading, bubble, key and what is held, the figure
# stays under 560 px, 70% of the frame, so a course author's iframe shows it whole with the phase's heading
# (every stage at the frame's 730 px was 1,363 px, the figure 1,459).
EMBED_DRAWING_MOST, EMBED_FIGURE_MOST = 400, 560


@pytest.mark.slow
def test_a_16_stage_schedule_stays_compact_in_an_embed_at_760_px(page: Page, server: str, watch: Watch) -> None:
    page.set_viewport_size({"width": 760, "height": 800})
    page.goto(f"{server}{DSV3_EMBED}")
    expect(page.locator("#schedule svg.ends")).to_be_visible()
    expect(page.locator("#schedule svg.roomy")).to_be_hidden()
    expect(page.locator("#schedule .left-out")).to_have_text("⋮ S3 to S12: 10 more stages, left out here")
    seen = page.evaluate(EMBED_SCHEDULE)
    assert seen["rows"] == 6
    assert seen["drawing"] < EMBED_DRAWING_MOST, seen
    assert seen["figure"] < EMBED_FIGURE_MOST, seen
    assert seen["scroll"] <= 760
    assert seen["text"] >= LEAST_TEXT["default"], seen
    screenshot(page, "schedule-embed-760-deepseek-v3")
    watch.assert_clean(page)


@pytest.mark.slow
def test_the_page_draws_every_one_of_16_stages(page: Page, server: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}{DSV3_EMBED.replace('/embed', '/')}")
    expect(page.locator("#schedule svg.roomy .stage-row")).to_have_count(16)
    expect(page.locator("#schedule svg.ends")).to_be_hidden()
