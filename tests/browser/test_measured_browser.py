"""The measured pages in Chromium: the rank table lines up in projector, no sideways scroll on a phone."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from tests.browser.conftest import settled
from tests.web.test_measured_view import MEASURED

# How many header cells are shown in the table's head, and how many cells are shown in each body row.
VISIBLE = """table => {
  const shown = el => el.getClientRects().length > 0 && getComputedStyle(el).display !== 'none';
  return [[...table.querySelectorAll('thead th')].filter(shown).length,
          [...table.querySelectorAll('tbody tr')].map(tr => [...tr.children].filter(shown).length)];
}"""


@pytest.mark.parametrize(
    "path", [*(f"{p}{'&' if '?' in p else '?'}theme=projector" for p in MEASURED), "/?stage=zero2&theme=projector"]
)
def test_in_projector_every_visible_header_has_its_visible_column(page: Page, server: str, path: str) -> None:
    page.set_viewport_size({"width": 1920, "height": 1080})
    page.goto(server + path)
    settled(page)
    table = page.locator("#ranks" if path.startswith("/measured") else "table.cost-table")
    headers, rows = table.evaluate(VISIBLE)
    assert rows
    assert set(rows) == {headers}
    if path.startswith("/measured"):
        assert headers == 5  # rank, model, measured, difference, named differences: none hidden


@pytest.mark.parametrize("path", MEASURED)
def test_on_a_phone_nothing_scrolls_sideways(page: Page, server: str, path: str) -> None:
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server + path)
    settled(page)
    width: int = page.evaluate("document.documentElement.scrollWidth")
    assert width <= 390
    # The rank table's cells carry their column's name, shown before the value.
    label: str = page.locator("#ranks tbody td.torch").first.evaluate(
        "el => getComputedStyle(el, '::before').getPropertyValue('content')"
    )
    assert label.startswith('"Measured')


def test_zero3_opens_on_fsdp2_with_fsdp1_one_click_away_and_its_difference_in_view(page: Page, server: str) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(server + "/measured?stage=zero3")
    settled(page)
    assert page.locator("#measured").get_attribute("data-impl") == "fsdp2"
    note = page.locator("#impl-note")
    box = note.bounding_box()
    assert box is not None
    assert box["y"] + box["height"] <= 800
    assert "gather one layer at a time" in note.inner_text()
    page.click("#impl-fsdp1")
    settled(page)
    assert page.locator("#measured").get_attribute("data-impl") == "fsdp1"
    assert page.locator(".curve-note").inner_text().startswith("Not the model's shape.")
