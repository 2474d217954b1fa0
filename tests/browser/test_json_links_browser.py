"""The footer's "same figures as JSON" links follow the run drawn, swap after swap."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.conftest import Watch, settled


def test_a_stage_switch_brings_the_footers_json_links_of_the_run_drawn(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero1&gpus=16")
    settled(page)
    layout = page.locator("#json-links a").nth(2)
    expect(layout).to_have_attribute("href", "/api/layout?stage=zero1&gpus=16")
    page.click("#switch-zero3")
    settled(page)
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero3")
    # The footer is not swapped: its links come out of band with the widget.
    expect(layout).to_have_attribute("href", "/api/layout?stage=zero3&gpus=16")
    expect(page.locator("#json-links a").nth(0)).to_have_attribute("href", "/api/memory?gpus=16")
    assert page.locator("#json-links").count() == 1
    assert page.locator("#widget #json-links").count() == 0
    watch.assert_clean(page)


def test_a_swap_settles_once_though_the_footers_links_come_with_it(page: Page, server: str) -> None:
    # The scripts (step.js, keys.js, bench.serve's click timer) count one htmx:afterSettle per swap.
    page.goto(f"{server}/?stage=zero1")
    settled(page)
    page.evaluate(
        "() => { window.__settles = 0; document.addEventListener('htmx:afterSettle', () => { window.__settles++; }); }"
    )
    page.click("#switch-zero2")
    settled(page)
    expect(page.locator("#json-links a").nth(2)).to_have_attribute("href", "/api/layout?stage=zero2")
    page.wait_for_timeout(200)
    assert page.evaluate("() => window.__settles") == 1
