"""The comparison table fits its box (issue 45): every preset, at 1024, 1280 and 1920 px, and on paper.

Its detail columns fold under their figure (the peak's parts under the peak; the traffic by link, its time
and the collectives in words under the P), so no column is cut off and no row grows tall in a narrow column.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser

from app.domain.presets import PRESETS

MODELS = [str(name) for name in PRESETS]
# The defaults (8 GPUs, no card), and the widest table: a card's verdicts and several nodes' links.
RUNS = ["", "&gpus=64&capacity=80GB"]
TALLEST_ROW = 240
"""px: four short lines of figures beside the collectives in words (it was 300–384 px)."""

MEASURE = """() => {
  const table = document.querySelector('table.figures');
  const box = table.closest('.table-wrap');
  const rows = [...table.querySelectorAll('tbody tr')].map(r => r.getBoundingClientRect().height);
  const comm = table.querySelector('td.comm-cell');
  const right = box.getBoundingClientRect().right;
  const cut = [...table.querySelectorAll('thead th')].filter(th => th.getBoundingClientRect().right > right + 0.5);
  return {scroll: table.scrollWidth, box: box.clientWidth, rows,
          comm: comm ? comm.getBoundingClientRect().width : 0, cut: cut.map(th => th.textContent.trim())};
}"""


@pytest.mark.parametrize("width", [1024, 1280, 1920])
def test_the_table_fits_its_box_for_every_preset(browser: Browser, server: str, width: int) -> None:
    page = browser.new_page(viewport={"width": width, "height": 900})
    seen = {}
    for model in MODELS:
        for run in RUNS:
            page.goto(f"{server}/?model={model}{run}")
            seen[model + run] = page.evaluate(MEASURE)
    page.close()
    assert {key: (m["scroll"], m["box"]) for key, m in seen.items() if m["scroll"] > m["box"]} == {}
    assert {key: max(m["rows"]) for key, m in seen.items() if max(m["rows"]) > TALLEST_ROW} == {}
    # The collectives in words get a column wide enough to read (it was squeezed to 130 px).
    assert min(m["comm"] for m in seen.values()) >= 180


# A4 and Letter, less the page's margins of 8 mm a side, in CSS px (96 to the inch).
PAPER = {"A4": round((210 - 16) / 25.4 * 96), "Letter": round((8.5 * 25.4 - 16) / 25.4 * 96)}


@pytest.mark.parametrize("paper", list(PAPER))
def test_the_table_prints_whole(browser: Browser, server: str, paper: str) -> None:
    page = browser.new_page(viewport={"width": PAPER[paper], "height": 1100})
    page.emulate_media(media="print")
    seen = {}
    for model in MODELS:
        for run in RUNS:
            page.goto(f"{server}/?model={model}{run}")
            seen[model + run] = page.evaluate(MEASURE)
            assert page.pdf(format=paper)[:5] == b"%PDF-"
    page.close()
    assert {key: (m["scroll"], m["box"]) for key, m in seen.items() if m["scroll"] > m["box"]} == {}
    # No heading past the paper's edge.
    assert {key: m["cut"] for key, m in seen.items() if m["cut"]} == {}
