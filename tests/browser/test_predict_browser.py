"""Predict first in Debian's Chromium: predict, see the answer beside the prediction, go on; and what axe says.

The questions' cells and figures are checked by hand in tests/web/test_predict_view.py; here, that the
mode works in a browser with JavaScript (each step an htmx swap of the widget, the address kept) and
without it (plain links and a GET form), with focus where a keyboard user expects it.
"""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import Watch, screenshot, settled
from tests.browser.test_themes_browser import WCAG_AA

pytestmark = pytest.mark.slow

# Under ZeRO-1 on 8 GPUs, GPU 1 keeps all four bands of weight 1 and weights + gradients of the others.
PREDICTED = ("1.weights", "1.gradients", "1.master", "1.moments", "0.weights", "2.master")


def test_predict_reveal_and_go_on_with_javascript(page: Page, server: str, watch: Watch) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?stage=dp&batch=0&predict=1")
    page.click("#switch-zero1")
    expect(page).to_have_url(re.compile(r"/predict\?stage=dp&batch=0&to=zero1&predict=1$"))
    settled(page)
    expect(page.locator("#predict-prompt")).to_contain_text("Under ZeRO-1, which bands does GPU 1 store")
    expect(page.locator("#predict-heading")).to_be_focused()
    assert page.locator("header.masthead").count() == 1  # swapped into the page, not a new one
    for cell in PREDICTED:
        page.check(f'input[name=answer][value="{cell}"]')
    page.click("#predict-send")
    settled(page)
    expect(page).to_have_url(re.compile(r"shown=1.*answer=0\.weights"))
    expect(page.locator(".predict-verdict")).to_have_text(
        "Not quite. GPU 1 stores 18 of its 32 cells. You predicted 6: 5 it stores, 1 it does not; you missed 13."
    )
    expect(page.locator("#predict-check td.hit")).to_have_count(5)
    expect(page.locator("#predict-check td.wrong")).to_have_count(1)
    expect(page.locator("#predict-check td.missed")).to_have_count(13)
    screenshot(page, "predict-cells-answer")
    page.click("#predict-go")
    settled(page)
    expect(page).to_have_url(re.compile(r"/\?stage=zero1&batch=0&predict=1$"))
    expect(page.locator("#switch-zero1")).to_have_attribute("aria-current", "page")
    expect(page.locator("#switch-zero1")).to_be_focused()
    # In the step, the next phase asks what GPU 0 will hold.
    page.click("#watch-step")
    settled(page)
    page.click("#step-next")
    settled(page)
    expect(page).to_have_url(re.compile(r"/predict\?stage=zero1&batch=0&phase=0&predict=1$"))
    page.fill("#predict-number", "150")
    page.keyboard.press("Enter")
    settled(page)
    expect(page.locator("#predict-given")).to_have_text("150 GiB")
    # Without activations (batch=0) GPU 0 holds its state at rest: 30e9 x (2 + 2 + 12/8) B = 153.668 GiB.
    expect(page.locator("#predict-true")).to_have_text("153.668 GiB")
    expect(page.locator(".predict-verdict")).to_have_text("Right.")
    page.click("#predict-go")
    settled(page)
    expect(page).to_have_url(re.compile(r"/\?stage=zero1&batch=0&phase=1&predict=1$"))
    expect(page.locator("#step-next")).to_be_focused()
    watch.assert_clean(page)


def test_a_bad_number_says_why_and_keeps_the_question(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/predict?stage=zero3&phase=2&predict=1")
    page.fill("#predict-number", "<b>lots</b>")
    page.click("#predict-send")
    settled(page)
    expect(page.locator("#predict-error")).to_contain_text("Give a number of GiB")
    expect(page.locator("#predict-number")).to_have_value("<b>lots</b>")
    expect(page.locator("#predict-number")).to_have_attribute("aria-invalid", "true")
    assert page.locator("#widget b").count() == 0
    # htmx swaps a 422 in (its responseHandling), and the browser logs the status: allowed here.
    watch.assert_clean(page, allow_status={422})


def test_predict_reveal_and_go_on_without_javascript(browser: Browser, server: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(f"{server}/?stage=zero2&predict=1")
    page.click("#switch-zero3")
    expect(page).to_have_url(re.compile(r"/predict\?stage=zero2&to=zero3&predict=1$"))
    for cell in ("1.weights", "1.gradients", "1.master", "1.moments"):
        page.check(f'input[name=answer][value="{cell}"]')
    page.click("#predict-send")
    expect(page.locator(".predict-verdict")).to_contain_text("Right. GPU 1 stores 4 of its 32 cells.")
    page.click("#predict-go")
    expect(page).to_have_url(re.compile(r"/\?stage=zero3&predict=1&from=zero2$"))
    expect(page.locator("#switch-zero3")).to_have_attribute("aria-current", "page")
    context.close()


VIEWS = [
    ("/predict?stage=dp&to=zero1&predict=1", "light"),
    ("/predict?stage=dp&to=zero1&predict=1&shown=1&answer=1.weights&answer=2.master", "dark"),
    ("/predict?stage=zero3&phase=4&predict=1&theme=projector", "light"),
    ("/predict?stage=zero3&phase=4&predict=1&shown=1&answer=60&theme=dark", "light"),
    ("/predict?stage=zero3&phase=4&shown=1&answer=lots", "light"),
]


@pytest.mark.parametrize(("path", "scheme"), VIEWS)
def test_axe_finds_no_wcag_22_aa_violations(browser: Browser, server: str, path: str, scheme: str) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900}, color_scheme=scheme)  # type: ignore[arg-type]
    page.goto(server + path)
    settled(page)
    results = Axe().run(page, options=WCAG_AA)
    assert results.violations_count == 0, results.generate_report()
    page.close()
