"""One screen for the step (issue 45, items 2, 3 and 12), measured in Debian's Chromium.

At the sizes a class projects at, in the normal and the projector view: the eight cards, the step's chart
(its labels whole) and its controls on the first screen in every phase of ZeRO-3's step, the cards and the
chart not moving from one phase to the next; every text of the projector's first screen at least 16 px;
the key whole at 1920×1080; the step printed on one page.
"""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from app.domain.step import LAST_PHASE
from tests.browser.conftest import screenshot, settled

SIZES = [(1024, 768), (1280, 720), (1280, 800), (1920, 1080)]
THEMES = ["default", "projector"]
# The first, the middle and the last phase, and every fourth between: each kind of phase (a pass column's
# gather, compute and discard come in threes), whatever the number of phases the step has.
PHASES = sorted({*range(0, LAST_PHASE + 1, 4), LAST_PHASE // 2, LAST_PHASE})
MOVES_AT_MOST = 4

# The boxes that must be on the first screen, and the chart's labels: each whole, inside the window (where
# they fall inside their drawing is the chart's own layout: tests/web/test_chart_view.py).
BOXES = """() => {
  const box = (el) => { const b = el.getBoundingClientRect(); return [b.left, b.top, b.right, b.bottom]; };
  const shown = (el) => el.checkVisibility() && el.getBoundingClientRect().width > 1;
  const cards = [...document.querySelectorAll('#grid .card')].map(box);
  const controls = ['#step-prev', '#step-next', '#step-heading'].map(s => document.querySelector(s))
    .filter(shown).map(box);
  const labels = [...document.querySelectorAll('#chart svg')].filter(shown)
    .map(svg => [...svg.querySelectorAll('text')].map(box));
  return {cards, controls, labels, chart: box(document.querySelector('#chart')),
          grid: box(document.querySelector('#grid')), width: innerWidth, height: innerHeight,
          scroll: document.documentElement.scrollWidth};
}"""


def _inside(b: list[float], width: float, height: float) -> bool:
    left, top, right, bottom = b
    return left >= -0.5 and top >= -0.5 and right <= width + 0.5 and bottom <= height + 0.5


def _problems(seen: dict[str, object], where: str) -> list[str]:
    width, height = float(seen["width"]), float(seen["height"])  # type: ignore[arg-type]
    found = []
    cards: list[list[float]] = seen["cards"]  # type: ignore[assignment]
    controls: list[list[float]] = seen["controls"]  # type: ignore[assignment]
    drawings: list[list[list[float]]] = seen["labels"]  # type: ignore[assignment]
    if len(cards) != 8 or not all(_inside(c, width, height) for c in cards):
        found.append(f"{where}: cards {[round(c[3]) for c in cards]}")
    if len(controls) != 3 or not all(_inside(c, width, height) for c in controls):
        found.append(f"{where}: controls {controls}")
    if not _inside(seen["chart"], width, height):  # type: ignore[arg-type]
        found.append(f"{where}: chart {seen['chart']}")
    for labels in drawings:
        outside = [b for b in labels if not _inside(b, width, height)]
        if outside:
            found.append(f"{where}: chart labels cut {outside}")
    if int(seen["scroll"]) > width:  # type: ignore[call-overload]
        found.append(f"{where}: {seen['scroll']} px wide")
    return found


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize(("width", "height"), SIZES)
def test_cards_chart_and_controls_are_on_the_first_screen_and_stay_put_in_every_phase(
    page: Page, server: str, width: int, height: int, theme: str
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    problems: list[str] = []
    tops: dict[str, list[float]] = {"cards": [], "chart": []}
    for phase in PHASES:
        page.goto(f"{server}/?stage=zero3&phase={phase}&theme={theme}")
        seen = page.evaluate(BOXES)
        problems += _problems(seen, f"phase {phase}")
        tops["cards"].append(seen["grid"][1])
        tops["chart"].append(seen["chart"][1])
    assert problems == []
    assert {k: round(max(v) - min(v), 1) for k, v in tops.items()} == {
        k: pytest.approx(0, abs=MOVES_AT_MOST) for k in tops
    }
    page.goto(f"{server}/?stage=zero3&phase={LAST_PHASE // 2}&theme={theme}")
    screenshot(page, f"one-screen-{theme}-{width}x{height}")


@pytest.mark.parametrize("theme", THEMES)
@pytest.mark.parametrize(("width", "height"), [(1024, 768), (1280, 720)])
def test_entered_from_the_page_the_step_keeps_its_place_click_after_click(
    page: Page, server: str, width: int, height: int, theme: str
) -> None:
    # As a teacher does: the stage, then "Watch one training step", then Next with the clicker.
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?stage=zero3&theme={theme}")
    page.click("#watch-step")
    expect(page.locator("#step")).to_have_attribute("data-phase", "0")
    settled(page)
    first = page.evaluate(BOXES)
    problems = _problems(first, "phase 0")
    for phase in range(1, 6):
        page.click("#step-next")
        expect(page.locator("#step")).to_have_attribute("data-phase", str(phase))
        settled(page)
        seen = page.evaluate(BOXES)
        problems += _problems(seen, f"phase {phase}")
        for name in ("grid", "chart"):
            if abs(seen[name][1] - first[name][1]) > MOVES_AT_MOST:
                problems.append(f"phase {phase}: {name} moved from {first[name][1]} to {seen[name][1]}")
    assert problems == []


# Every text node drawn on the first screen (any part of it inside the window), but those kept for screen
# readers only (clipped to nothing): its size as drawn, an SVG text's scaled by its drawing.
TEXT_SIZES = """() => {
  const clipped = (el) => { for (let a = el; a; a = a.parentElement) {
    if (getComputedStyle(a).clipPath.startsWith('inset(50%')) return true; } return false; };
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const sizes = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.data.trim() || !el || el.closest('title, script, style, option')) continue;
    if (!el.checkVisibility({visibilityProperty: true, opacityProperty: true}) || clipped(el)) continue;
    const range = document.createRange();
    range.selectNodeContents(n);
    const drawn = [...range.getClientRects()].some(r => r.width > 1 && r.height > 1 && r.bottom > 0
      && r.top < innerHeight && r.right > 0 && r.left < innerWidth);
    if (!drawn) continue;
    let px = parseFloat(getComputedStyle(el).fontSize);
    if (el instanceof SVGElement) { const m = el.getScreenCTM(); px *= Math.hypot(m.a, m.b); }
    sizes.push([px, n.data.trim().slice(0, 30)]);
  }
  return sizes;
}"""


@pytest.mark.parametrize("moment", ["", "&phase=0", f"&phase={LAST_PHASE // 2}", f"&phase={LAST_PHASE}"])
@pytest.mark.parametrize("stage", ["dp", "zero3"])
@pytest.mark.parametrize(("width", "height"), [(1024, 768), (1280, 720)])
def test_every_text_of_the_projectors_first_screen_is_16_px_or_more(
    page: Page, server: str, width: int, height: int, stage: str, moment: str
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?stage={stage}{moment}&theme=projector")
    sizes: list[tuple[float, str]] = page.evaluate(TEXT_SIZES)
    assert len(sizes) > 50
    assert [(round(px, 1), text) for px, text in sizes if px < 15.95] == []


KEY_AND_COST = """() => {
  const box = (s) => {
    const b = document.querySelector(s).getBoundingClientRect();
    return [b.left, b.top, b.right, b.bottom];
  };
  return {key: box('.legend'), words: document.querySelector('#traffic-line') ? [box('.stage-head h2'),
          box('.headline'), box('#traffic-line')] : [], width: innerWidth, height: innerHeight};
}"""


@pytest.mark.parametrize("moment", ["", "&phase=0", f"&phase={LAST_PHASE // 2}", f"&phase={LAST_PHASE}"])
@pytest.mark.parametrize("stage", ["dp", "zero3"])
def test_the_projectors_key_is_whole_on_a_1920_screen(page: Page, server: str, stage: str, moment: str) -> None:
    # docs/url-options.md: "all eight cards, the colour key and the stage's cost … on one screen, at rest
    # and during the step" at 1920×1080.
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(f"{server}/?stage={stage}{moment}&theme=projector")
    seen = page.evaluate(KEY_AND_COST)
    assert _inside(seen["key"], 1920, 1080), seen["key"]


@pytest.mark.parametrize("stage", ["dp", "zero1", "zero2", "zero3"])
def test_the_stages_words_and_cost_are_on_a_1024_projectors_first_screen(page: Page, server: str, stage: str) -> None:
    page.set_viewport_size({"width": 1024, "height": 768})
    page.goto(f"{server}/?stage={stage}&theme=projector")
    seen = page.evaluate(KEY_AND_COST)
    assert len(seen["words"]) == 3
    assert [b for b in seen["words"] if not _inside(b, 1024, 768)] == []


@pytest.mark.parametrize("paper", ["A4", "Letter"])
@pytest.mark.parametrize("phase", [LAST_PHASE // 2 - 1, LAST_PHASE // 2])
def test_the_step_prints_on_one_page(page: Page, server: str, paper: str, phase: int) -> None:
    page.goto(f"{server}/?stage=zero3&phase={phase}")
    pdf = page.pdf(format=paper)
    # Chromium writes each page as an uncompressed object of its own type.
    assert len(re.findall(rb"/Type\s*/Page\b", pdf)) == 1
