"""A bad link in a real browser: its message on the first screen, the form aligned, corrected in place."""

from __future__ import annotations

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import FloatRect, Page, expect

from tests.browser.conftest import Watch, settled

FIRST_SCREEN = 800
"""The message must end within this many pixels of the top, at 1280×800 and on a 390×844 phone."""

BAD_LINKS = ["/?gpus=0", "/?gpus=abc&stage=zero2", "/?params=-1&stage=zero3&phase=5", "/?capacity=0", "/?stage=zero9"]


def _box(page: Page, selector: str) -> FloatRect:
    box = page.locator(selector).bounding_box()
    assert box is not None, selector
    return box


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (390, 844)])
@pytest.mark.parametrize("path", BAD_LINKS)
def test_a_bad_links_message_is_on_the_first_screen(
    page: Page, watch: Watch, width: int, height: int, path: str
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(path)
    notice = _box(page, "#widget .notice")
    assert notice["y"] >= 0
    assert notice["y"] + notice["height"] <= FIRST_SCREEN
    if "stage=zero9" not in path:
        # The form to correct it comes next, its field marked; its neighbour's label stays in line.
        assert _box(page, "#run-form")["y"] > notice["y"]
        assert _box(page, "label[for=f-params]")["y"] == _box(page, "label[for=f-gpus]")["y"]
    # The GPUs field is a number field: given "abc" to show as typed, the browser says it cannot, and shows it empty.
    watch.console_errors = [
        m for m in watch.console_errors if m != 'The specified value "abc" cannot be parsed, or is out of range.'
    ]
    watch.assert_clean(page, allow_status={422})


def test_the_form_under_the_message_stays_put_while_it_is_corrected(page: Page, watch: Watch) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/?gpus=0&stage=zero2")
    expect(page.locator("#grid")).to_have_attribute("data-gpus", "8")
    expect(page.locator("#drawn-instead")).to_have_text("Drawn without gpus=0: 8 GPUs, the default.")
    field = page.locator("#f-gpus")
    field.fill("16")
    field.dispatch_event("change")
    expect(page.locator("#grid")).to_have_attribute("data-gpus", "16")
    settled(page)
    # Corrected: the message goes, the form stays first, the field keeps the focus and the value typed.
    expect(page.locator("#set-aside")).to_have_count(0)
    expect(page.locator("#drawn-instead")).to_have_count(0)
    expect(page.locator(".form-first #f-gpus")).to_be_focused()
    expect(field).to_have_value("16")
    # A bad value typed there again is said at the top and beside the field; the form does not move.
    top = _box(page, "#f-gpus")["y"]
    field.fill("0")
    field.dispatch_event("change")
    expect(page.locator("#f-gpus")).to_have_attribute("aria-invalid", "true")
    settled(page)
    expect(page.locator(".form-first #f-gpus")).to_be_focused()
    assert _box(page, "#set-aside")["y"] < _box(page, "#f-gpus")["y"]
    assert _box(page, "#f-gpus")["y"] + _box(page, "#f-gpus")["height"] <= FIRST_SCREEN
    assert top > 0
    # Another arrangement, chosen from the switcher, is the page as usual.
    page.click("#switch-zero3")
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero3")
    expect(page.locator(".form-first")).to_have_count(0)
    expect(page.locator("#widget > #run-form")).to_have_count(1)
    watch.assert_clean(page, allow_status={422})


def test_a_typo_in_the_form_at_its_place_is_said_beside_it_without_moving_anything(page: Page, watch: Watch) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/?stage=zero2&gpus=16")
    field = page.locator("#f-gpus")
    field.scroll_into_view_if_needed()
    top = _box(page, "#f-gpus")["y"]
    field.fill("0")
    field.dispatch_event("change")
    expect(field).to_have_attribute("aria-invalid", "true")
    settled(page)
    expect(page.locator("#f-gpus-error")).to_be_visible()
    expect(page.locator("#set-aside")).to_have_count(0)
    assert _box(page, "#f-gpus")["y"] == top
    # The message under GPUs does not push the Weights label out of line.
    assert _box(page, "label[for=f-params]")["y"] == _box(page, "label[for=f-gpus]")["y"]
    watch.assert_clean(page, allow_status={422})


@pytest.mark.parametrize("path", ["/?gpus=0&stage=zero3", "/?stage=zero9"])
def test_axe_finds_no_violations_on_a_bad_links_page(page: Page, path: str) -> None:
    page.goto(path)
    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()
