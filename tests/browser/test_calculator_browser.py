"""The run form answers as it is typed in: no blur, no Enter, and the typing goes on undisturbed."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import Page, expect

from tests.browser.conftest import Watch, settled


def _focused(page: Page) -> str:
    focused: str = page.evaluate("document.activeElement.id || document.activeElement.tagName")
    return focused


def _slow_network(page: Page, latency_ms: int) -> None:
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {"offline": False, "latency": latency_ms, "downloadThroughput": -1, "uploadThroughput": -1},
    )


def test_typing_a_count_of_gpus_redraws_as_it_is_typed(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero2")
    grid = page.locator("#grid")
    page.click("#f-gpus")
    page.keyboard.press("Control+A")
    page.keyboard.type("6")
    expect(grid).to_have_attribute("data-gpus", "6", timeout=3000)  # the server's first answer: it may be cold
    # Typing slowly: after the swap focus and caret are still in the field, at the end of what is typed.
    assert _focused(page) == "f-gpus"
    page.keyboard.type("4")
    expect(grid).to_have_attribute("data-gpus", "64", timeout=1000)
    expect(page.locator("#f-gpus")).to_have_value("64")
    assert _focused(page) == "f-gpus"
    assert parse_qs(urlsplit(page.url).query)["gpus"] == ["64"]
    watch.assert_clean(page)


def test_a_digit_typed_while_an_answer_is_on_its_way_is_kept(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero3")
    _slow_network(page, 500)
    grid = page.locator("#grid")
    page.click("#f-gpus")
    page.keyboard.press("Control+A")
    page.keyboard.type("6")
    page.wait_for_timeout(700)  # the answer for 6 is on its way, and comes in while 4 is typed
    page.keyboard.type("4")
    expect(grid).to_have_attribute("data-gpus", "6", timeout=5000)
    expect(page.locator("#f-gpus")).to_have_value("64")  # the swap took nothing typed away
    expect(grid).to_have_attribute("data-gpus", "64", timeout=5000)
    expect(page.locator("#f-gpus")).to_have_value("64")
    assert _focused(page) == "f-gpus"
    watch.assert_clean(page)


def test_typing_a_count_into_weights_makes_it_another_model(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero3&gpus=16")
    weights = page.locator("#f-params")
    expect(weights).to_be_editable()  # the preset's count, ready to be typed over
    weights.click()
    page.keyboard.press("Control+A")
    page.keyboard.type("70B")
    expect(page.locator("#f-model")).to_have_value("custom")
    caption = page.locator("table.figures caption")
    expect(caption).to_contain_text("Custom model, 70,000,000,000 weights, on 16 GPUs", timeout=1500)
    expect(weights).to_have_value("70B")
    assert _focused(page) == "f-params"
    assert parse_qs(urlsplit(page.url).query) == {
        "stage": ["zero3"],
        "model": ["custom"],
        "params": ["70B"],
        "gpus": ["16"],
    }
    # Back to a preset: it brings its own count, and the one typed is not sent as if set aside.
    settled(page)
    page.select_option("#f-model", "llama-3-8b")
    expect(caption).to_contain_text("Llama 3 8B")
    expect(page.locator(".notes li", has_text="set aside")).to_have_count(0)
    assert parse_qs(urlsplit(page.url).query) == {"stage": ["zero3"], "model": ["llama-3-8b"], "gpus": ["16"]}
    watch.assert_clean(page)


def test_clearing_the_field_and_typing_anew_keeps_the_caret(page: Page, server: str, watch: Watch) -> None:
    page.goto(f"{server}/?stage=zero1")
    grid = page.locator("#grid")
    page.click("#f-gpus")
    page.keyboard.press("Control+A")
    page.keyboard.press("Backspace")
    # Empty, the field is refused: its message comes beside it, and the field keeps focus.
    expect(page.locator("#f-gpus-error")).to_be_visible(timeout=3000)
    assert _focused(page) == "f-gpus"
    page.keyboard.type("6")
    expect(page.locator("#f-gpus-error")).to_have_count(0, timeout=3000)  # and goes once it is right
    expect(grid).to_have_attribute("data-gpus", "6")
    assert _focused(page) == "f-gpus"
    page.keyboard.type("4")
    expect(grid).to_have_attribute("data-gpus", "64", timeout=1000)
    expect(page.locator("#f-gpus")).to_have_value("64")
    watch.assert_clean(page, allow_status={422})
