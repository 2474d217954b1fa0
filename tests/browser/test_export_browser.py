"""The static export, served by a plain static file server (and opened from disk), clicked through."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from app.domain.step import LAST_PHASE
from tests.browser.conftest import serving, settled, watching


@pytest.fixture(scope="module")
def site(exported_site: Path) -> Path:
    return exported_site


@pytest.fixture(scope="module")
def static_server(site: Path) -> Iterator[str]:
    """`python -m http.server`: no app, no headers of ours, the same page whatever the query."""

    def command(port: int) -> list[str]:
        return [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(site)]

    with serving(command) as url:
        yield url


def _shows(page: Page, heading: str, phase: int | None = None) -> None:
    expect(page.locator("#stage-heading")).to_contain_text(heading)
    if phase is None:
        expect(page.locator("#step")).to_have_count(0)
    else:
        expect(page.locator("#step")).to_have_attribute("data-phase", str(phase))


def test_with_javascript_htmx_swaps_the_widget_out_of_each_static_page(page: Page, static_server: str) -> None:
    watch = watching(page, static_server)
    page.goto(f"{static_server}/index.html")
    _shows(page, "Data parallelism")
    expect(page.locator("meta[http-equiv='Content-Security-Policy']")).to_have_count(1)
    page.evaluate("window.__sameDocument = true")  # survives swaps, not page loads

    page.click("#switch-zero3")
    _shows(page, "ZeRO-3")
    expect(page).to_have_url(f"{static_server}/zero3.html")
    expect(page).to_have_title(re.compile("ZeRO-3"))
    expect(page.locator("#widget")).to_have_count(1)  # swapped in place, not nested

    page.click("#watch-step")
    _shows(page, "ZeRO-3", 0)
    expect(page).to_have_url(f"{static_server}/zero3-phase-0.html")
    settled(page)
    page.click("#step-next")
    _shows(page, "ZeRO-3", 1)
    settled(page)
    page.focus("#step-next")
    page.keyboard.press("ArrowRight")
    _shows(page, "ZeRO-3", 2)
    expect(page).to_have_url(f"{static_server}/zero3-phase-2.html")
    settled(page)
    page.click("#step-prev")
    _shows(page, "ZeRO-3", 1)
    settled(page)
    page.click("#switch-zero1")  # the arrangement changes, the phase stays
    _shows(page, "ZeRO-1", 1)
    expect(page).to_have_url(f"{static_server}/zero1-phase-1.html")
    assert page.evaluate("window.__sameDocument === true")

    settled(page)
    page.go_back()  # htmx asks the static server again: history cache is off
    _shows(page, "ZeRO-3", 1)
    expect(page).to_have_url(f"{static_server}/zero3-phase-1.html")

    settled(page)
    page.click("#step-play")
    _shows(page, "ZeRO-3", 2)
    page.click("#step-play")
    expect(page.locator("#step-play")).to_have_attribute("aria-pressed", "false")
    settled(page)
    assert page.evaluate("window.__sameDocument === true")
    watch.assert_clean(page)


def test_the_forms_say_they_need_the_live_app(page: Page, static_server: str) -> None:
    watch = watching(page, static_server)
    page.goto(f"{static_server}/zero2-phase-3.html")
    notes = page.locator(".export-note")
    expect(notes.filter(has_text="the calculator needs the live app")).to_have_count(1)
    expect(notes.filter(has_text="take the snippet from the live app")).to_have_count(1)
    expect(page.locator("#run-update")).to_be_disabled()
    expect(page.locator("#phase-slider")).to_be_disabled()
    page.click("a[href='api/memory.json']")
    expect(page).to_have_url(f"{static_server}/api/memory.json")
    watch.assert_clean(page)


def test_without_javascript_every_link_loads_its_static_page(browser: Browser, static_server: str) -> None:
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    watch = watching(page, static_server)
    try:
        page.goto(f"{static_server}/index.html")
        page.click("#switch-zero2")
        _shows(page, "ZeRO-2")
        expect(page).to_have_url(f"{static_server}/zero2.html")
        page.click("#watch-step")
        _shows(page, "ZeRO-2", 0)
        page.click("#step-next")
        _shows(page, "ZeRO-2", 1)
        page.click("#step-last")
        _shows(page, "ZeRO-2", LAST_PHASE)
        page.click("#step-prev")
        _shows(page, "ZeRO-2", LAST_PHASE - 1)
        page.click("#row-dp")
        _shows(page, "Data parallelism", LAST_PHASE - 1)
        expect(page).to_have_url(f"{static_server}/dp-phase-{LAST_PHASE - 1}.html")
        page.click("#step-leave")
        _shows(page, "Data parallelism")
        page.click(".masthead a")
        expect(page).to_have_url(f"{static_server}/index.html")
        assert watch.foreign_requests() == []
        assert watch.failed == []
        assert watch.console_errors == []
    finally:
        context.close()


def test_opened_from_disk_links_load_whole_pages(page: Page, site: Path) -> None:
    watch = watching(page, "file://")
    page.goto((site / "zero3-phase-5.html").as_uri())
    _shows(page, "ZeRO-3", 5)
    page.click("#step-next")
    _shows(page, "ZeRO-3", 6)
    expect(page).to_have_url((site / "zero3-phase-6.html").as_uri())
    page.focus("#step-next")
    page.keyboard.press("ArrowRight")
    _shows(page, "ZeRO-3", 7)
    page.click("#switch-zero1")
    _shows(page, "ZeRO-1", 7)
    assert watch.foreign_requests() == []
    assert watch.page_errors == []
    assert watch.console_errors == []
