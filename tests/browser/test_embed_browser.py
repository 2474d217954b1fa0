"""/embed in a course page on another origin, and the page's "Embed this" panel.

The frame fits its content, framing obeys the setting, and full screen is offered where the host allows it.
"""

from __future__ import annotations

import http.server
import os
import threading
import time
import urllib.request
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import ConsoleMessage, Frame, Page, expect

from app.domain.step import LAST_PHASE
from app.web.embed_view import EMBED_HEIGHT
from tests.browser.conftest import _free_port, screenshot, serving, settled, zero_bands_command
from tests.conftest import dom, one

COLUMN = 760
"""The course page's column, as wide as the embed is made for."""


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def _snippet(server: str, path: str, controls: str, calculator: bool = False) -> str:
    """The snippet the app's own "Embed this" panel offers for `path` with `controls` (and the calculator)."""
    with urllib.request.urlopen(server + path) as response:
        panel = one(dom(response.read().decode()), "#embed-this")["hx-get"]
    with urllib.request.urlopen(server + str(panel)) as response:
        tree = dom(response.read().decode())
    option = one(tree, f'#embed-controls option[value="{controls}"]')
    return str(option["data-snippet-calculator" if calculator else "data-snippet"])


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Any]:
    """Serve pages from another origin (another port): `serve(name, html)` returns the page's address."""
    port = _free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), partial(_Quiet, directory=str(tmp_path)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()

    def page_at(name: str, body: str) -> str:
        # An icon of its own, so the browser asks this server for nothing it lacks.
        head = '<!doctype html><meta charset=utf-8><title>Lesson</title><link rel=icon href="data:,">'
        (tmp_path / name).write_text(head + body)
        return f"http://127.0.0.1:{port}/{name}"

    yield page_at
    httpd.shutdown()
    httpd.server_close()


def _lesson(snippet: str, column: int = COLUMN) -> str:
    # A course page's column; a host may use inline styles, this app's own pages never do.
    return (
        f'<h1>Lesson 4</h1><div style="width:{column}px;margin:0 auto">'
        f"<p>Before the figure.</p>{snippet}<p id=after>After the figure.</p></div>"
    )


def _frame(page: Page, server: str) -> Frame:
    """The embed's frame, once it has started loading (a lazy frame starts when the page lays it out)."""
    expect(page.frame_locator("iframe").first.locator("#widget")).to_have_count(1)
    frame = page.frame(url=lambda url: url.startswith(server + "/embed"))
    assert frame is not None
    return frame


def _fits(page: Page, frame: Frame, selector: str = "iframe", column: int = COLUMN) -> int:
    """Wait until the frame is as tall as its content and shows no scrollbar; its height."""
    deadline = time.monotonic() + 10
    while True:
        settled(frame)
        content: int = frame.evaluate("Math.ceil(document.documentElement.getBoundingClientRect().height)")
        scroll, client = frame.evaluate(
            "[document.documentElement.scrollHeight, document.documentElement.clientHeight]"
        )
        box = page.locator(selector).first.bounding_box()
        assert box is not None
        if abs(box["height"] - content) <= 1 and scroll <= client:
            assert box["width"] == column
            assert frame.evaluate("document.documentElement.scrollWidth") <= column
            return content
        if time.monotonic() > deadline:
            raise AssertionError(f"frame {box['height']} px, content {content} px, scroll {scroll} > {client}")
        time.sleep(0.1)


def _errors(page: Page) -> list[str]:
    errors: list[str] = []

    def record(message: ConsoleMessage) -> None:
        if message.type in {"error", "warning"}:
            errors.append(message.text)

    page.on("console", record)
    page.on("pageerror", lambda error: errors.append(str(error)))
    return errors


def test_the_frame_fits_its_content_after_load_and_every_swap(page: Page, server: str, serve: Any) -> None:
    errors = _errors(page)
    page.set_viewport_size({"width": 1000, "height": 800})
    snippet = _snippet(server, "/?stage=zero1", "step")
    page.goto(serve("lesson.html", _lesson(snippet)))
    frame = _frame(page, server)
    expect(frame.locator("#grid")).to_have_attribute("data-stage", "zero1")
    at_rest = _fits(page, frame)
    assert at_rest != EMBED_HEIGHT, "the snippet's default height should have been replaced"
    screenshot(page, "embed-760-zero1")
    # The step's controls open the step at its first phase, the state at rest: nothing to enter, or leave.
    expect(frame.locator("#step")).to_have_attribute("data-phase", "0")
    expect(frame.locator("#watch-step")).to_have_count(0)
    expect(frame.locator("#step-leave")).to_be_hidden()
    for control in ["#step-next", "#switch-zero3"]:
        frame.click(control)
        settled(frame)
        assert _fits(page, frame) == pytest.approx(at_rest, abs=8)
    expect(frame.locator("#step")).to_have_attribute("data-phase", "1")
    expect(frame.locator("#grid")).to_have_attribute("data-stage", "zero3")
    screenshot(page, "embed-760-zero3-step")
    # The address stays inside the embed, with its options.
    assert frame.url.startswith(server + "/embed?stage=zero3")
    assert "controls=step" in frame.url
    assert errors == []


def test_the_host_script_ignores_messages_from_anyone_but_the_frame(page: Page, server: str, serve: Any) -> None:
    page.goto(serve("lesson.html", _lesson(_snippet(server, "/?stage=dp", "stages"))))
    frame = _frame(page, server)
    height = _fits(page, frame)
    # The host page's own window (or any other frame) claiming to be the embed changes nothing.
    page.evaluate("window.postMessage({type: 'zero-bands:resize', height: 40}, '*')")
    page.evaluate("window.postMessage(JSON.stringify({subject: 'lti.frameResize', height: 40}), '*')")
    page.wait_for_timeout(300)
    box = page.locator("iframe").bounding_box()
    assert box is not None
    assert box["height"] == pytest.approx(height, abs=1)


def test_without_the_host_script_the_default_height_scrolls_and_cuts_nothing_off(
    page: Page, server: str, serve: Any
) -> None:
    # The step's embed is taller than the snippet's 800 px (the switcher's alone fits in it).
    snippet = _snippet(server, "/?stage=zero2&phase=10", "step").split("<script")[0]
    page.goto(serve("plain.html", _lesson(snippet)))
    frame = _frame(page, server)
    expect(frame.locator("#grid")).to_have_attribute("data-stage", "zero2")
    box = page.locator("iframe").bounding_box()
    assert box is not None
    assert box["height"] == EMBED_HEIGHT
    # The content is taller than the frame, and the frame scrolls to all of it.
    assert frame.evaluate("document.documentElement.scrollHeight") > EMBED_HEIGHT
    frame.locator("#grid .card").last.scroll_into_view_if_needed()
    expect(frame.locator("#grid .card").last).to_be_in_viewport()


def test_full_screen_is_offered_where_the_host_allows_it(page: Page, server: str, serve: Any) -> None:
    allowed = _snippet(server, "/?stage=zero1", "stages")
    forbidden = allowed.replace(' allow="fullscreen"', "").replace("data-zero-bands", "data-zero-bands id=no-fs")
    page.goto(serve("two.html", _lesson(allowed + forbidden)))
    # The frames load lazily and in their own time: wait for both rather than race them.
    deadline = time.monotonic() + 15
    while len(frames := [f for f in page.frames if f.url.startswith(server + "/embed")]) < 2:
        assert time.monotonic() < deadline, "both frames should load"
        page.wait_for_timeout(50)
    for frame in frames:
        expect(frame.locator("#grid")).to_have_count(1)
    by_allow = {frame.frame_element().get_attribute("allow"): frame for frame in frames}
    free, locked = by_allow["fullscreen"], by_allow[None]
    expect(locked.locator("#fullscreen")).to_be_hidden()
    expect(locked.locator("#fullscreen-note")).to_be_visible()
    expect(free.locator("#fullscreen-note")).to_be_hidden()
    expect(free.locator("#fullscreen")).to_be_visible()
    free.click("#fullscreen")
    expect(free.locator("#fullscreen")).to_have_attribute("aria-pressed", "true")
    in_full_screen = "document.fullscreenElement && document.fullscreenElement.tagName"
    assert free.evaluate(in_full_screen) == "MAIN"
    # A swap keeps full screen: the main element stays, only the widget inside it is replaced.
    free.click("#switch-zero2")
    expect(free.locator("#grid")).to_have_attribute("data-stage", "zero2")
    settled(free)
    assert free.evaluate(in_full_screen) == "MAIN"
    expect(free.locator("#fullscreen")).to_have_attribute("aria-pressed", "true")
    free.click("#fullscreen")
    expect(free.locator("#fullscreen")).to_have_attribute("aria-pressed", "false")
    assert free.evaluate(in_full_screen) is None


@pytest.fixture
def self_only() -> Iterator[str]:
    """A second `zero-bands`, started with ZERO_BANDS_FRAME_ANCESTORS='self'."""
    env = {**os.environ, "ZERO_BANDS_FRAME_ANCESTORS": "'self'"}
    with serving(lambda port: [zero_bands_command(), "--port", str(port)], env) as url:
        yield url


def test_framing_is_refused_for_an_origin_the_setting_leaves_out(
    page: Page, server: str, self_only: str, serve: Any
) -> None:
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text))
    strict = f'<iframe id=strict src="{self_only}/embed?stage=zero1" width=760 height=400 title=strict></iframe>'
    open_ = f'<iframe id=open src="{server}/embed?stage=zero1" width=760 height=400 title=open></iframe>'
    page.goto(serve("framing.html", _lesson(strict + open_)))
    # The default setting frames anywhere: the control.
    expect(page.frame_locator("#open").locator("#grid")).to_have_attribute("data-stage", "zero1")
    # The same app started with 'self' is refused in another origin's page.
    deadline = time.monotonic() + 5
    while not any("frame-ancestors" in text for text in refused):
        assert time.monotonic() < deadline, refused
        page.wait_for_timeout(100)
    strict_frame = page.frame_locator("#strict")
    expect(strict_frame.locator("#grid")).to_have_count(0)
    # ... while it still frames itself.
    with urllib.request.urlopen(self_only + "/embed?stage=zero1") as response:
        assert "frame-ancestors 'self'" in response.headers["content-security-policy"]


def test_embed_this_copies_the_snippet_for_the_chosen_controls(page: Page, server: str) -> None:
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=server)
    page.goto(server + "/?stage=zero1&gpus=16")
    page.click("#embed-this summary")
    page.select_option("#embed-controls", "none")
    snippet = page.locator("#embed-snippet")
    expect(snippet).to_have_value(
        f'<iframe src="{server}/embed?stage=zero1&amp;gpus=16&amp;controls=none" title="ZeRO Bands: ZeRO-1" '
        f'width="100%" height="{EMBED_HEIGHT}" style="border:0;max-width:800px" allow="fullscreen" loading="lazy" '
        f'data-zero-bands></iframe>\n<script src="{server}/static/embed.js" defer></script>'
    )
    page.click("#embed-copy")
    expect(page.locator("#embed-copy-status")).to_have_text("Copied.")
    assert page.evaluate("navigator.clipboard.readText()") == snippet.input_value()
    # A swap redraws the panel for the new stage and keeps it open, with the same choice.
    page.click("#switch-zero3")
    settled(page)
    expect(page.locator("#embed-this")).to_have_attribute("open", "")
    expect(page.locator("#embed-controls")).to_have_value("none")
    expect(snippet).to_have_value(
        f'<iframe src="{server}/embed?stage=zero3&amp;gpus=16&amp;controls=none" title="ZeRO Bands: ZeRO-3" '
        f'width="100%" height="{EMBED_HEIGHT}" style="border:0;max-width:800px" allow="fullscreen" loading="lazy" '
        f'data-zero-bands></iframe>\n<script src="{server}/static/embed.js" defer></script>'
    )
    screenshot(page, "embed-this-panel")


@pytest.mark.parametrize(
    "path",
    [
        "/embed?stage=zero1",
        "/embed?stage=zero3&phase=9&controls=step&calculator=1",
        "/embed?stage=zero2&controls=none",
        "/share?stage=zero1&controls=step&calculator=1",
    ],
)
def test_axe_finds_no_accessibility_violations_in_the_embed(page: Page, server: str, path: str) -> None:
    page.goto(server + path)
    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()


def test_a_page_opened_from_disk_can_frame_it(page: Page, server: str, tmp_path: Path) -> None:
    # A teacher's slide deck is often a file: page; CSP's `*` alone matches network schemes only.
    deck = tmp_path / "deck.html"
    frame = f'<iframe id=deck src="{server}/embed?stage=zero3" width=760 height=500 title=deck></iframe>'
    deck.write_text(_lesson(frame))
    refused: list[str] = []
    page.on("console", lambda message: refused.append(message.text))
    page.goto(deck.as_uri())
    expect(page.frame_locator("#deck").locator("#grid")).to_have_attribute("data-stage", "zero3")
    assert not [text for text in refused if "frame-ancestors" in text]


# How many lines the key's longest entry takes: its height over its line height.
_KEY_LINES = """() => Math.max(...[...document.querySelectorAll('.legend .key li')].map(
  li => li.getBoundingClientRect().height / parseFloat(getComputedStyle(li).lineHeight)))"""


@pytest.mark.parametrize("path", ["/embed?stage=zero2&theme=projector", "/embed?stage=zero3&phase=2&theme=projector"])
def test_a_projector_embed_on_a_wide_screen_keeps_its_key_readable(page: Page, server: str, path: str) -> None:
    # Opened alone at 1280 (a teacher's tab): the key's three parts had two columns each, a word a line,
    # and the full-screen button sat in an empty cell of the layout, half way down.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(server + path)
    assert page.evaluate(_KEY_LINES) < 2
    button, switcher = page.locator("#fullscreen").bounding_box(), page.locator(".switcher").bounding_box()
    assert button is not None
    assert switcher is not None
    assert button["y"] + button["height"] <= switcher["y"]


STAGES = ["dp", "zero1", "zero2", "zero3"]
# The text of the cards and their key, the step's words and drawings: none smaller (the screen's own
# pixels; an SVG's text as drawn, after its scaling).
_SMALLEST_TEXT = """() => {
  const sizes = [];
  for (const el of document.querySelectorAll('#widget *')) {
    if (el.closest('.visually-hidden, .grid-note') || !el.checkVisibility()) { continue; }
    const own = [...el.childNodes].some(n => n.nodeType === Node.TEXT_NODE && n.textContent.trim());
    if (!own) { continue; }
    const size = parseFloat(getComputedStyle(el).fontSize);
    sizes.push(el instanceof SVGElement ? size * el.getScreenCTM().a : size);
  }
  return Math.min(...sizes);
}"""
# Every cell's box, and the room between a cell and the next one down its column.
_CELLS = """() => {
  const boxes = [...document.querySelectorAll('#grid .cell')].map(c => c.getBoundingClientRect());
  const apart = [...document.querySelectorAll('#grid .column')].flatMap(col => {
    const cells = [...col.querySelectorAll('.cell')].map(c => c.getBoundingClientRect());
    return cells.slice(1).map((c, i) => c.top - cells[i].bottom);
  });
  return [Math.min(...boxes.map(b => b.height)), Math.min(...boxes.map(b => b.width)), Math.min(...apart)];
}"""


@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize(
    ("controls", "moment", "limit"),
    [
        ("none", "", 600),  # the picture alone
        # The step: its controls, words and drawing, and one card's memory through the step (the chart,
        # 184 px at 760 px wide), which issue 33 put in the embed's step; and the room of the sentence on
        # what a switch changed, kept while it is empty (issue 45: one height in every stage and phase).
        ("step", "&phase=5", 1190),  # a forward phase
        ("step", "&phase=12", 1190),  # a backward phase: ZeRO-2 and 3 draw a collective more
        # The switcher: within the snippet's own height, so it fits without the script too.
        ("stages", "", EMBED_HEIGHT),
    ],
    ids=["picture", "step-forward", "step-backward", "switcher"],
)
def test_a_compact_embed_fits_a_course_pages_column(
    page: Page, server: str, serve: Any, stage: str, controls: str, moment: str, limit: int
) -> None:
    page.set_viewport_size({"width": 1000, "height": 800})
    snippet = _snippet(server, f"/?stage={stage}{moment}", controls)
    page.goto(serve(f"{controls}-{stage}.html", _lesson(snippet)))
    frame = _frame(page, server)
    expect(frame.locator("#grid")).to_have_attribute("data-stage", stage)
    height = _fits(page, frame)
    print(f"embed {controls}{moment} {stage}: {height} px in a {COLUMN} px frame")
    assert height <= limit
    # Still readable: four cards a row, no text under 12 px, every cell a few pixels tall and apart.
    tops = frame.evaluate("[...document.querySelectorAll('#grid .card')].map(c => c.getBoundingClientRect().top)")
    assert len(set(tops)) == 2
    assert frame.evaluate(_SMALLEST_TEXT) >= 12
    tallest, widest, apart = frame.evaluate(_CELLS)
    assert (tallest >= 6, widest >= 12, apart >= 2) == (True, True, True)
    if stage == "zero3":
        screenshot(page, f"embed-760-{controls}{moment.replace('&', '-').replace('=', '')}")


def test_the_embed_panel_offers_the_calculator_and_the_snippet_follows_it(page: Page, server: str) -> None:
    page.goto(server + "/?stage=zero2&gpus=16")
    page.click("#embed-this summary")
    # With the script, a drop-down and a box; the links that do the same without it are hidden.
    expect(page.locator("#embed-calculator")).to_be_visible()
    expect(page.locator("#embed-choices")).to_be_hidden()
    snippet = page.locator("#embed-snippet")

    def frame_src() -> str:
        return str(one(dom(snippet.input_value()), "iframe")["src"])

    page.check("#embed-calculator")
    assert frame_src() == f"{server}/embed?stage=zero2&gpus=16&calculator=1"
    page.select_option("#embed-controls", "step")
    assert frame_src() == f"{server}/embed?stage=zero2&gpus=16&controls=step&calculator=1"
    expect(page.locator("#embed-url")).to_have_attribute("href", frame_src())
    # A swap redraws the panel for the new stage and keeps both choices.
    page.click("#switch-zero3")
    settled(page)
    expect(page.locator("#embed-calculator")).to_be_checked()
    expect(page.locator("#embed-controls")).to_have_value("step")
    assert frame_src() == f"{server}/embed?stage=zero3&gpus=16&controls=step&calculator=1"
    page.uncheck("#embed-calculator")
    assert frame_src() == f"{server}/embed?stage=zero3&gpus=16&controls=step"


def test_the_calculators_embed_holds_the_run_form(page: Page, server: str, serve: Any) -> None:
    page.set_viewport_size({"width": 1000, "height": 800})
    page.goto(serve("calculator.html", _lesson(_snippet(server, "/?stage=zero2", "stages", calculator=True))))
    frame = _frame(page, server)
    expect(frame.locator("#run-form")).to_have_count(1)
    print(f"embed stages with the calculator zero2: {_fits(page, frame)} px in a {COLUMN} px frame")


# The course page counts the frame's height messages, in both forms (static/embed-frame.js).
_COUNTER = """<script>
window.resizes = []; window.lti = [];
addEventListener("message", (e) => {
  if (e.data && e.data.type === "zero-bands:resize") { resizes.push(e.data.height); }
  if (typeof e.data === "string" && e.data.includes("lti.frameResize")) { lti.push(JSON.parse(e.data).height); }
});
</script>"""
MIDDLE = LAST_PHASE // 2


def _moves(controls: str) -> list[tuple[str, str, str]]:
    """What a class clicks in an embed with `controls`: each control, and the stage and phase it leads to."""
    if controls == "none":
        return []
    stages = [(f"#switch-{stage}", stage, "0" if controls == "step" else "") for stage in [*STAGES[1:], "dp"]]
    if controls == "stages":
        return stages
    last = str(LAST_PHASE)
    # Into the step's first move, its middle (by the slider) and its end; every stage there; back to the start.
    step = [("#step-next", "dp", "1"), (f"#phase-slider={MIDDLE}", "dp", str(MIDDLE)), ("#step-last", "dp", last)]
    at_last = [(f"#switch-{stage}", stage, last) for stage in STAGES[1:]]
    return [*stages, *step, *at_last, ("#step-first", "zero3", "0")]


@pytest.mark.parametrize("column", [COLUMN, 400])
@pytest.mark.parametrize("controls", ["none", "stages", "step"])
def test_an_embed_keeps_one_height_and_says_it_once(
    page: Page, server: str, serve: Any, controls: str, column: int
) -> None:
    # A course page's text must not move when a class switches or steps: one height within 8 px, under every
    # stage, entering the step and in its phases, sent to the page once. The picture alone has no switcher:
    # each stage is a page of its own, each the same height.
    page.set_viewport_size({"width": column + 40, "height": 800})
    heights: list[int] = []
    messages: list[tuple[int, int]] = []
    for stage in ["dp"] if controls != "none" else STAGES:
        page.goto(
            serve(
                f"{controls}-{stage}-{column}.html",
                _COUNTER + _lesson(_snippet(server, f"/?stage={stage}", controls), column),
            )
        )
        frame = _frame(page, server)
        expect(frame.locator("#grid")).to_have_attribute("data-stage", stage)
        heights.append(_fits(page, frame, column=column))
        screenshot(page, f"embed-{column}-{controls}-{stage}")
        for control, shown, phase in _moves(controls):
            name, _, value = control.partition("=")
            if value:  # the slider: a change submits its form
                frame.locator(name).evaluate(
                    "(e, v) => { e.value = v; e.dispatchEvent(new Event('change', {bubbles: true})); }", value
                )
            else:
                frame.click(name)
            settled(frame)
            expect(frame.locator("#widget")).to_have_attribute("data-stage", shown)
            expect(frame.locator("#widget")).to_have_attribute("data-phase", phase)
            box = page.locator("iframe").bounding_box()
            assert box is not None
            # Nothing scrolls inside the frame: its content is whole, in a frame as tall as at first.
            scroll, client = frame.evaluate(
                "[document.documentElement.scrollHeight, document.documentElement.clientHeight]"
            )
            assert scroll <= client, (control, scroll, client)
            heights.append(round(box["height"]))
            screenshot(page, f"embed-{column}-{controls}-{shown}-{phase or 'rest'}-{name.strip('#')}")
        time.sleep(0.3)  # a late message would have come by now
        messages.append((page.evaluate("resizes.length"), page.evaluate("lti.length")))
    print(f"embed {controls} at {column} px: {min(heights)}-{max(heights)} px; messages {messages}")
    assert max(heights) - min(heights) <= 8, heights
    assert messages == [(1, 1)] * len(messages)
