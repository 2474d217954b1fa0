"""A model's config.json in Debian's Chromium: pasted in the form, uploaded, and in an embed.

At 1280×800 and on a phone (390×844): the model's counts shown beside the config, no sideways scroll, and
axe finds nothing to fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from app.domain.hf_config import read_text
from app.domain.presets import stored_text
from tests.browser.conftest import Watch, screenshot, settled

pytestmark = pytest.mark.slow

MIXTRAL = stored_text("mixtral-8x7b-v0.1.json")
NOTE = "mixtral: 46,702,792,704 weights, derived from its shapes."
SCREENS = [(1280, 800), (390, 844)]


def _fits(page: Page, width: int) -> None:
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def _clean(page: Page) -> None:
    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()


@pytest.mark.parametrize(("width", "height"), SCREENS, ids=["page", "phone"])
def test_a_pasted_config_draws_its_model(page: Page, server: str, watch: Watch, width: int, height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?gpus=8&stage=zero3")
    page.locator("#run-form details.more summary").first.click()
    page.fill("#f-config", MIXTRAL)
    expect(page.locator("#f-config-note")).to_have_text(NOTE)
    settled(page)
    # The address carries the config, minimised: the page's state stays in the URL.
    assert quote(read_text(MIXTRAL).minimal, safe="") in page.url.replace("%3a", "%3A").replace("%2c", "%2C")
    _fits(page, width)
    screenshot(page, f"model-config-{width}")
    _clean(page)
    watch.assert_clean(page)


def test_an_uploaded_config_draws_its_model(page: Page, server: str, watch: Watch, tmp_path: Path) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?gpus=8")
    upload = tmp_path / "config.json"
    upload.write_text(stored_text("deepseek-v3.json"))
    page.set_input_files("#model-config-file", upload)
    page.click("#model-config-read")
    expect(page.locator("#f-config-note")).to_have_text(
        "deepseek_v3: 671,026,419,200 weights, derived from its shapes."
    )
    assert "config=" in page.url
    _fits(page, 1280)
    watch.assert_clean(page)


def test_a_long_pasted_config_goes_by_the_upload_forms_box(page: Page, server: str, watch: Watch) -> None:
    # 6.8 KB pretty-printed: too long for the run form's address (8 KB once encoded), sent whole in the body.
    config = {**json.loads(stored_text("deepseek-v3.json")), "layer_types": ["full_attention"] * 189}
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?gpus=8")
    page.fill("#model-config-text", json.dumps(config, indent=4))
    page.click("#model-config-read")
    expect(page.locator("#f-config-note")).to_have_text(
        "deepseek_v3: 671,026,419,200 weights, derived from its shapes."
    )
    assert "config=" in page.url
    assert len(page.url) < 2_000
    watch.assert_clean(page)


@pytest.mark.parametrize(("width", "height"), [(760, 800), (390, 844)], ids=["column", "phone"])
def test_an_embed_of_a_config_shows_its_counts(page: Page, server: str, watch: Watch, width: int, height: int) -> None:
    page.set_viewport_size({"width": width, "height": height})
    config = quote(read_text(MIXTRAL).minimal)
    page.goto(f"{server}/embed?config={config}&gpus=8&stage=zero3&calculator=1")
    note = page.locator("#f-config-note")
    expect(note).to_have_text(NOTE)
    note.scroll_into_view_if_needed()
    expect(note).to_be_visible()
    _fits(page, width)
    screenshot(page, f"model-config-embed-{width}")
    _clean(page)
    watch.assert_clean(page)
