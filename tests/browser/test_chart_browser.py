"""The step's chart in Debian's Chromium: where it is drawn, how large its text is, and what axe says.

In the page, the projector, a phone, print and the embed's step.
"""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Page, expect

from tests.browser.conftest import Watch, screenshot

# A drawing on the screen, not one kept for screen readers only in a 1 px box (a projector of 800 lines or
# fewer shows only the stage's own-scale drawing: projector.css).
SHOWN = "svg => svg.getBoundingClientRect().width > 1"

# The smallest of the shown drawings' text, in CSS pixels: its font size in SVG units times the drawing's
# width over its 600-unit viewBox.
SMALLEST_TEXT = (
    """() => Math.min(...[...document.querySelectorAll('#chart svg')].filter("""
    + SHOWN
    + """).flatMap(svg => [...svg.querySelectorAll('text')].map(t =>
  parseFloat(getComputedStyle(t).fontSize) * svg.getBoundingClientRect().width / svg.viewBox.baseVal.width)))"""
)


def _pdf_pages(data: bytes) -> int:
    return len(re.findall(rb"/Type\s*/Page(?![s\w])", data))


@pytest.mark.parametrize(
    ("path", "width", "height", "least", "drawn"),
    [
        ("/?stage=zero3&phase=5", 1280, 800, 14, "chart-all"),
        # The projector's back row (issue 45): every text of its first screen at least 16 px, the chart's too.
        # On these 720-800-line screens the chart is the stage's own-scale drawing only.
        ("/?stage=zero3&phase=10&theme=projector", 1024, 768, 16, "chart-own"),
        ("/?stage=dp&phase=3&model=llama-3-8b&theme=projector", 1280, 720, 16, "chart-own"),
        ("/?stage=zero2&phase=12", 390, 844, 13, "chart-all"),
        ("/embed?stage=zero3&phase=5&controls=step", 760, 600, 14, "chart-all"),
    ],
)
def test_the_chart_is_drawn_and_its_text_readable(
    page: Page, server: str, watch: Watch, path: str, width: int, height: int, least: float, drawn: str
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(server + path)
    chart = page.locator("#chart")
    chart.scroll_into_view_if_needed()
    expect(chart.locator("svg.chart-all polyline")).to_have_count(4)  # the four stages, for everyone or for a reader
    expect(chart.locator(f"svg.{drawn}")).to_be_visible()
    assert chart.locator(f"svg.{drawn}").evaluate(SHOWN)
    box = chart.locator(f"svg.{drawn}").bounding_box()
    assert box is not None
    assert box["x"] >= 0
    assert box["x"] + box["width"] <= width  # inside the window: no sideways scrolling
    assert page.evaluate(SMALLEST_TEXT) >= least
    watch.assert_clean(page)
    screenshot(page, "chart-" + re.sub(r"\W+", "-", path.strip("/?")) + f"-{width}")


def test_the_chart_prints_with_the_step(page: Page, server: str) -> None:
    page.goto(f"{server}/?stage=zero3&phase=9")
    page.emulate_media(media="print")
    expect(page.locator("#chart svg.chart-all")).to_be_visible()
    expect(page.locator("#chart svg.chart-own")).to_be_visible()
    # Black on white: the current line is drawn in black, as the others are, told apart by dash and weight.
    stroke = page.locator("#chart polyline.current").first.evaluate("e => getComputedStyle(e).stroke")
    assert stroke == "rgb(0, 0, 0)"
    dashes = page.locator("#chart svg.chart-all polyline").evaluate_all(
        "lines => lines.map(l => getComputedStyle(l).strokeDasharray + ' ' + getComputedStyle(l).strokeWidth)"
    )
    assert len(set(dashes)) == 4, dashes
    assert _pdf_pages(page.pdf(format="A4")) <= 2


@pytest.mark.parametrize(
    "path",
    [
        "/?stage=zero3&phase=5",
        "/?stage=dp&phase=12&model=llama-3-8b&theme=projector",
        "/embed?stage=zero3&phase=5&controls=step",
    ],
)
def test_axe_finds_no_violations_in_the_chart(page: Page, server: str, path: str) -> None:
    page.goto(server + path)
    expect(page.locator("#chart svg.chart-all")).to_be_visible()
    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()


def test_in_an_embed_the_drawings_stand_side_by_side_as_tall_for_every_stage(page: Page, server: str) -> None:
    page.set_viewport_size({"width": 760, "height": 600})
    heights = []
    for stage, phase in (("dp", 5), ("zero1", 17), ("zero3", 5), ("zero3", 12)):
        page.goto(f"{server}/embed?stage={stage}&phase={phase}&controls=step")
        first, second = (page.locator(f"#chart svg.{css}").bounding_box() for css in ("chart-all", "chart-own"))
        assert first is not None
        assert second is not None
        assert first["y"] == pytest.approx(second["y"], abs=1)
        assert second["x"] >= first["x"] + first["width"]
        box = page.locator("#chart").bounding_box()
        assert box is not None
        heights.append(box["height"])
    assert max(heights) - min(heights) <= 1, heights
    assert max(heights) <= 200


# Every text of the chart as drawn on the screen: its box, and the drawing's.
TEXT_BOXES = (
    """() => [...document.querySelectorAll('#chart svg')].filter("""
    + SHOWN
    + """).map(svg => ({
  svg: svg.getBoundingClientRect().toJSON(),
  texts: [...svg.querySelectorAll('text')].map(t => ({text: t.textContent, box: t.getBoundingClientRect().toJSON()})),
}))"""
)


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


@pytest.mark.parametrize("width", [390, 768, 1024, 1280, 1920])
@pytest.mark.parametrize("path", ["/?stage=zero3&phase=51", "/?stage=zero1&phase=1&model=llama-3-8b&theme=projector"])
def test_the_charts_labels_are_whole_and_apart_at_every_width(page: Page, server: str, path: str, width: int) -> None:
    page.set_viewport_size({"width": width, "height": 800})
    page.goto(server + path)
    drawings = page.evaluate(TEXT_BOXES)
    assert drawings, width  # at least one drawing on the screen
    for drawing in drawings:
        svg, texts = drawing["svg"], drawing["texts"]
        for label in texts:  # inside its drawing: nothing clipped by the box around it
            box = label["box"]
            assert svg["left"] - 0.5 <= box["left"], (width, label)
            assert box["right"] <= svg["right"] + 0.5, (width, label)
            assert svg["top"] - 0.5 <= box["top"], (width, label)
            assert box["bottom"] <= svg["bottom"] + 0.5, (width, label)
        for i, a in enumerate(texts):
            for b in texts[i + 1 :]:
                assert not _overlap(a["box"], b["box"]), (width, a, b)
