"""The picture first, on every screen a class uses (issue 33), measured in Debian's Chromium.

The eight cards on the first screen, bars on one scale, the projector's type and band heights.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

SIZES = [(390, 844), (768, 1024), (820, 1180), (1024, 768), (1100, 800), (1280, 720), (1280, 800), (1920, 1080)]
STAGES = ["dp", "zero1", "zero2", "zero3"]
# At rest, then the step's first phase, a forward, a backward and the update.
MOMENTS = [None, 0, 14, 29, 49]

# The lowest a card reaches, and the top of the step's bar at the foot of the window where it is fixed
# there (a card under it would be hidden), else the window's height.
FIRST_SCREEN = """(fit) => {
  const bottom = Math.max(...[...document.querySelectorAll('#grid .card')].slice(0, fit)
    .map(c => c.getBoundingClientRect().bottom));
  const right = Math.max(...[...document.querySelectorAll('#grid .card')].map(c => c.getBoundingClientRect().right));
  const bar = document.querySelector('.step-bar');
  const fixed = bar && getComputedStyle(bar).position === 'fixed';
  return {cards: document.querySelectorAll('#grid .card').length, bottom, right,
          limit: fixed ? bar.getBoundingClientRect().top : innerHeight, width: innerWidth};
}"""


@pytest.mark.parametrize("theme", ["default", "projector"])
@pytest.mark.parametrize(("width", "height"), SIZES)
def test_the_eight_cards_are_on_the_first_screen_at_rest_and_in_the_step(
    browser: Browser, server: str, width: int, height: int, theme: str
) -> None:
    page = browser.new_page(viewport={"width": width, "height": height})
    missed = []
    for stage in STAGES:
        for phase in MOMENTS:
            query = f"/?stage={stage}&theme={theme}" + ("" if phase is None else f"&phase={phase}")
            page.goto(server + query)
            # A phone's step draws its cells at least 12 px tall (issue 45): three rows of cards on its first
            # screen, the fourth a scroll away (tests/browser/test_live_browser.py measures the cells).
            seen = page.evaluate(FIRST_SCREEN, 6 if width < 600 and phase is not None and theme == "default" else 8)
            assert seen["cards"] == 8, query
            if seen["bottom"] > seen["limit"] or seen["right"] > seen["width"]:
                missed.append((query, round(seen["bottom"]), round(seen["limit"])))
    page.close()
    assert missed == []


BAR_LENGTH = """() => [...document.querySelectorAll('#grid .card .card-bar svg')].map(svg =>
  [...svg.querySelectorAll('rect:not(.in-hand)')].reduce((sum, r) => sum + r.getBoundingClientRect().width, 0))"""


@pytest.mark.parametrize(("width", "height"), [(390, 844), (1280, 800)])
def test_a_switch_from_data_parallelism_to_zero3_shrinks_each_bar_to_an_eighth(
    page: Page, server: str, width: int, height: int
) -> None:
    # 16 bytes a weight on every card, then 16/8 = 2: each bar, in pixels, to 12.5% of its length.
    page.set_viewport_size({"width": width, "height": height})
    page.goto(server + "/?stage=dp")
    before = page.evaluate(BAR_LENGTH)
    page.click("#switch-zero3")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero3")
    after = page.evaluate(BAR_LENGTH)
    assert len(before) == len(after) == 8
    for old, new in zip(before, after, strict=True):
        assert new / old == pytest.approx(0.125, abs=0.02)


SIZES_ON_THE_PROJECTOR = """() => {
  const px = (el) => parseFloat(getComputedStyle(el).fontSize);
  const texts = [...document.querySelectorAll(
    '.card-sub, .card-foot, .legend li, .legend h3, .headline, .explanation, .step-explanation, .tally')]
    .filter(el => el.checkVisibility());
  const labels = [...document.querySelectorAll('.axis span, .node-label')].filter(el => el.checkVisibility())
    .map(el => el.getBoundingClientRect().height);
  const lines = [...document.querySelectorAll('.card-sub')].map(el => el.getClientRects().length === 1
    && el.getBoundingClientRect().height < 1.9 * px(el));
  const column = document.querySelector('#grid .card .column:not(.gap)');
  const bands = [...column.querySelectorAll('.cell')].map(c => c.getBoundingClientRect().height);
  return {text: Math.min(...texts.map(px)), labels: Math.min(...labels), lines, bands};
}"""


@pytest.mark.parametrize(("width", "height"), [(1024, 768), (1280, 720)])
@pytest.mark.parametrize("query", ["stage=dp", "stage=zero3&phase=10"])
def test_the_projector_is_read_from_the_back_row(page: Page, server: str, width: int, height: int, query: str) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?{query}&theme=projector")
    seen = page.evaluate(SIZES_ON_THE_PROJECTOR)
    assert seen["text"] >= 16
    # A label's box is its line: 14 px of type is at least 14 px tall.
    assert seen["labels"] >= 14
    assert all(seen["lines"])
    # The four bands at 2 : 2 : 4 : 8 within 10%, by each cell's drawn height (borders included).
    weights, gradients, master, moments = seen["bands"]
    for drawn, share in ((gradients, 1), (master, 2), (moments, 4)):
        assert drawn / weights == pytest.approx(share, rel=0.1)


TWO_NODES = """() => {
  const box = (el) => el.getBoundingClientRect();
  const nodes = [...document.querySelectorAll('#grid > .node-box')].map(n => n.querySelectorAll('.card').length);
  const parts = [...document.querySelectorAll('#grid .card, .legend h3, .legend li')]
    .filter(el => el.checkVisibility());
  const words = [...document.querySelectorAll('.node-title, .network-link, .card-foot, .legend li')]
    .filter(el => el.checkVisibility()).map(el => parseFloat(getComputedStyle(el).fontSize));
  // The cards' verdicts, each inside its card.
  const spill = [...document.querySelectorAll('#grid .card')].filter(card =>
    [...card.querySelectorAll('.card-foot span')].some(s => box(s).right > box(card).right + 0.5)).length;
  return {nodes, bottom: Math.max(...parts.map(el => box(el).bottom)),
          right: Math.max(...parts.map(el => box(el).right)), text: Math.min(...words), spill};
}"""


@pytest.mark.parametrize("stage", ["zero1", "zero3"])
def test_the_projector_shows_two_nodes_of_four_and_the_key_on_one_screen(page: Page, server: str, stage: str) -> None:
    # Issue 34: at 1024×768, both nodes' cards, with their verdicts, and every entry of the key.
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(server + f"/?stage={stage}&nodes=2&shard=4&capacity=80GB&theme=projector")
    seen = page.evaluate(TWO_NODES)
    assert seen["nodes"] == [4, 4]
    assert seen["bottom"] <= 768
    assert seen["right"] <= 1024
    assert seen["text"] >= 16
    assert seen["spill"] == 0
