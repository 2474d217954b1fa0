"""The cut model's grid in Debian's Chromium: every drawn card on the first screen, normal and on the projector."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser.conftest import Watch, screenshot

pytestmark = pytest.mark.slow

CUTS = {
    "tp8-pp2-zero1-70b": "model=llama-3-70b&gpus=16&tp=8&pp=2&stage=zero1",
    "tp2-pp2-zero3": "gpus=16&tp=2&pp=2&stage=zero3",
    # Past two stages they sit side by side (cut_grid.stage_room), two rows of them.
    "pp3-12": "gpus=12&pp=3&stage=zero3",
    "tp4-pp4-64": "gpus=64&tp=4&pp=4&stage=zero3",
    "pp8-16": "gpus=16&pp=8&stage=zero3",
}
# The cards and stage frames each draws.
DRAWN = {
    "tp8-pp2-zero1-70b": (16, 2),
    "tp2-pp2-zero3": (16, 2),
    "pp3-12": (12, 3),
    "tp4-pp4-64": (16, 4),
    "pp8-16": (16, 8),
}
# A card an eighth of the row draws its eight columns; a sixteenth (eight stages of two a row) its figures.
NARROWEST = {"pp8-16": 50}

_BOXES = """() => Array.from(document.querySelectorAll('#grid .card, #grid .tp-group, #grid .node-box'), e => {
  const b = e.getBoundingClientRect();
  return [e.className, b.left, b.top, b.right, b.bottom, b.width];
})"""

_CELLS = """() => {
  const look = s => { const c = getComputedStyle(document.querySelector(s));
    return [c.borderTopStyle, c.borderTopColor, c.backgroundImage !== 'none'] };
  return { absent: look('#grid .cell.absent'), dashed: look('#grid .cell.dashed') };
}"""


@pytest.mark.parametrize("name", list(CUTS))
@pytest.mark.parametrize(
    ("theme", "width", "height"), [("", 1280, 800), ("&theme=projector", 1024, 768)], ids=["page", "projector"]
)
def test_every_drawn_card_of_a_cut_is_on_the_first_screen(
    page: Page, server: str, watch: Watch, name: str, theme: str, width: int, height: int
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?{CUTS[name]}{theme}")
    assert page.evaluate("document.documentElement.scrollWidth") <= width
    boxes: list[list[object]] = page.evaluate(_BOXES)
    cards = [b for b in boxes if b[0] == "card"]
    count, stages = DRAWN[name]
    assert len(cards) == count
    # On the first screen, and each card wide enough to draw its eight columns.
    assert all(float(str(b[1])) >= 0 and float(str(b[3])) <= width and float(str(b[4])) <= height for b in cards)
    assert min(float(str(b[5])) for b in cards) >= NARROWEST.get(name, 70)
    # A stage frame each, around its tensor groups' cards.
    assert len([b for b in boxes if str(b[0]).startswith("node-box")]) == stages
    screenshot(page, f"cut-{name}{'-projector' if theme else ''}")
    watch.assert_clean(page)


def test_absent_is_drawn_unlike_dashed(page: Page, server: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?{CUTS['tp2-pp2-zero3']}")
    looks = page.evaluate(_CELLS)
    # ZeRO's gap: a dashed outline and no fill; another stage's layers: no outline drawn, a faint hatch.
    assert looks["dashed"][0] == "dashed"
    assert looks["absent"][1] == "rgba(0, 0, 0, 0)"
    assert looks["absent"][2] is True


@pytest.mark.parametrize(
    ("theme", "width", "height"), [("", 1280, 800), ("&theme=projector", 1024, 768)], ids=["page", "projector"]
)
def test_the_step_with_a_cut_stays_on_one_screen_and_the_clicker_moves(
    page: Page, server: str, watch: Watch, theme: str, width: int, height: int
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?gpus=8&tp=2&pp=2&stage=zero3&phase=10{theme}")
    boxes: list[list[object]] = page.evaluate(_BOXES)
    cards = [b for b in boxes if b[0] == "card"]
    assert len(cards) == 8
    assert all(float(str(b[3])) <= width and float(str(b[4])) <= height for b in cards)
    assert page.locator("#grid .cell.absent").count() > 0
    screenshot(page, f"cut-step{'-projector' if theme else ''}")
    # A clicker's PageDown is the step's →: the next phase, the cut still drawn.
    page.locator("body").press("PageDown")
    page.wait_for_url("**phase=11**")
    assert page.locator("#grid .cell.absent").count() > 0
    assert page.locator("#grid .cell.gathered").count() > 0
    watch.assert_clean(page)
