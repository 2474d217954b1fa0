"""The cut model's grid in Debian's Chromium: every drawn card on the first screen, normal and on the projector."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser.conftest import Watch, screenshot

pytestmark = pytest.mark.slow

CUTS = {
    "tp8-pp2-zero1-70b": "model=llama-3-70b&gpus=16&tp=8&pp=2&stage=zero1",
    "tp2-pp2-zero3": "gpus=16&tp=2&pp=2&stage=zero3",
}

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
    assert len(cards) == 16
    # On the first screen, and each card wide enough to draw its eight columns.
    assert all(float(str(b[1])) >= 0 and float(str(b[3])) <= width and float(str(b[4])) <= height for b in cards)
    assert min(float(str(b[5])) for b in cards) >= 70
    # Two stage frames, each around its tensor groups' cards.
    assert len([b for b in boxes if b[0] == "node-box"]) == 2
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
