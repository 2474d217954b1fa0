"""The page stays where the reader is: no jumps on a swap, no moving buttons, no lost focus."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import FloatRect, Frame, Page, expect

from tests.browser.conftest import Watch, _free_port, settled

VIEWPORTS = [(1280, 800), (390, 844)]
STAGES = ["dp", "zero1", "zero2", "zero3"]
LAST_PHASE = 52

# (address, the control clicked, what stands under the pointer afterwards)
SWAPS = [
    ("/?stage=dp&phase=3", "#step-next", "#step-next"),
    ("/?stage=zero1&phase=3", "#step-prev", "#step-prev"),
    ("/?stage=zero3&phase=16", "#step-next", "#step-next"),
    ("/?stage=zero2&phase=9", "#step-first", "#step-first"),
    ("/?stage=dp", "#switch-zero2", "#switch-zero2"),
    ("/?stage=dp&phase=5", "#switch-zero3", "#switch-zero3"),
    # The step panel takes the place of the link that opened it. From 1181 px wide it stands beside the
    # cards, not under the headline: the page scrolls by the difference, so it appears under the pointer.
    ("/?stage=zero1", "#watch-step", "#step"),
]
# A row of the table on a phone: the note of what changed comes above it, and the page scrolls by its
# height so the row stays under the finger. (On a wide screen the table ends the page: scrolled to its
# foot, there is no further to go, and the row may move by the difference of two rows' heights.)
ROW_SWAPS = [
    ("/?stage=dp", "#row-zero2", "#row-zero2"),
    ("/?stage=zero3&capacity=80GiB", "#row-dp", "#row-dp"),
]
# The controls whose swap changes the height of what is above them: the page scrolls to keep them put.
SCROLLING = {"#watch-step", "#row-zero2", "#row-dp"}


def _top(frame: Page | Frame, selector: str) -> float:
    top: float = frame.evaluate(f"document.querySelector({selector!r}).getBoundingClientRect().top")
    return top


def _swap_in_place(frame: Page | Frame, selector: str, replacement: str) -> None:
    """Scroll so the control is near the top, click it, and check that nothing moved."""
    frame.evaluate(f"scrollTo(0, document.querySelector({selector!r}).getBoundingClientRect().top + scrollY - 40)")
    settled(frame)
    before, top = frame.evaluate("window.scrollY"), _top(frame, selector)
    assert before > 0, "the page should be scrolled before the click"
    # A button of the step's bar at the foot of a narrow window never moves; what must stay put is
    # the cards under it (the text of the next phase above them may be shorter or taller).
    in_bar: bool = frame.evaluate(
        "(s) => { const bar = document.querySelector(s).closest('.step-bar');"
        " return !!bar && getComputedStyle(bar).position === 'fixed'; }",
        selector,
    )
    cards = _top(frame, "#grid")
    frame.evaluate("window.__sameDocument = true; document.getElementById('widget').dataset.old = 'yes'")
    frame.click(selector)
    # The new widget has come (without a page load) and htmx has finished with it.
    frame.wait_for_selector("#widget:not([data-old])", state="attached")
    settled(frame)
    assert frame.evaluate("window.__sameDocument") is True
    if in_bar:
        assert abs(_top(frame, "#grid") - cards) <= 2
    elif selector not in SCROLLING:
        assert abs(frame.evaluate("window.scrollY") - before) <= 2
    assert abs(_top(frame, replacement) - top) <= 2


@pytest.mark.parametrize(
    ("width", "height", "path", "selector", "replacement"),
    [(*size, *swap) for swap in SWAPS for size in VIEWPORTS] + [(390, 844, *swap) for swap in ROW_SWAPS],
)
def test_a_swap_never_moves_the_reader(
    page: Page, server: str, watch: Watch, width: int, height: int, path: str, selector: str, replacement: str
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(server + path)
    _swap_in_place(page, selector, replacement)
    watch.assert_clean(page)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def lesson(tmp_path: Path, server: str) -> Iterator[str]:
    """A course page on another origin with the embed in a frame taller than its window."""
    (tmp_path / "lesson.html").write_text(
        "<!doctype html><title>Lesson</title><h1>Lesson 4</h1>"
        f'<iframe title="ZeRO Bands" src="{server}/embed?stage=zero1&phase=4&controls=step" width="1000"'
        ' height="900"></iframe>'
        "<p>After the figure.</p>"
    )
    port = _free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), partial(_Quiet, directory=str(tmp_path)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{port}/lesson.html"
    httpd.shutdown()
    httpd.server_close()


def test_a_swap_inside_a_frame_moves_neither_the_frame_nor_the_page(page: Page, lesson: str, server: str) -> None:
    page.set_viewport_size({"width": 1100, "height": 800})
    page.goto(lesson)
    frame = page.frame(url=lambda url: url.startswith(server))
    assert frame is not None
    frame.wait_for_selector("#step")
    page.evaluate("scrollTo(0, 60)")  # the course page scrolled a little, the frame part off the screen
    outer = page.evaluate("window.scrollY")
    assert outer == 60
    for selector in ["#step-next", "#step-prev", "#switch-zero2"]:
        before, grid = frame.evaluate("window.scrollY"), _top(frame, "#grid")
        frame.evaluate("document.getElementById('widget').dataset.old = 'yes'")
        frame.click(selector)
        frame.wait_for_selector("#widget:not([data-old])", state="attached")
        settled(frame)
        assert abs(frame.evaluate("window.scrollY") - before) <= 2
        assert abs(_top(frame, "#grid") - grid) <= 2
    assert page.evaluate("window.scrollY") == outer


@pytest.mark.parametrize(("width", "height"), [(1280, 800), (1920, 1080), (390, 844)])
@pytest.mark.parametrize("stage", STAGES)
def test_step_controls_stay_put_in_every_phase(
    page: Page, server: str, watch: Watch, width: int, height: int, stage: str
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?stage={stage}&phase=0&model=llama-3-70b")
    boxes: dict[str, list[FloatRect]] = {"#step-next": [], "#step-prev": [], "#phase-slider": []}
    if width >= 1280:
        # On a projector the cards below the panel stay put too, arrows or no arrows.
        boxes["#grid .card"] = []
    for phase in range(LAST_PHASE + 1):
        expect(page.locator("#step")).to_have_attribute("data-phase", str(phase))
        settled(page)
        for selector, seen in boxes.items():
            box = page.locator(selector).first.bounding_box()
            assert box is not None
            seen.append(box)
        if phase < LAST_PHASE:
            page.click("#step-next")
    for selector, seen in boxes.items():
        first = seen[0]
        moved = [
            (phase, box)
            for phase, box in enumerate(seen)
            if any(abs(box[k] - first[k]) > 1 for k in ("x", "y", "width"))
        ]
        assert moved == [], f"{selector} moved"
    watch.assert_clean(page)


def _focused(page: Page) -> str:
    focused: str = page.evaluate("document.activeElement.id || document.activeElement.tagName")
    return focused


def test_focus_stays_on_the_control_used(page: Page, server: str, watch: Watch) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?stage=zero2")
    page.focus("#watch-step")
    page.keyboard.press("Enter")
    expect(page.locator("#step")).to_have_attribute("data-phase", "0")
    settled(page)
    assert _focused(page) == "step-next"

    # Enter, again and again, all the way to the end and past it: focus never falls to the page.
    for phase in range(1, LAST_PHASE + 2):
        page.keyboard.press("Enter")
        expect(page.locator("#step")).to_have_attribute("data-phase", str(min(phase, LAST_PHASE)))
        settled(page)
        assert _focused(page) == "step-next"
    next_control = page.locator("#step-next")
    expect(next_control).to_have_attribute("aria-disabled", "true")
    assert next_control.get_attribute("href") is None

    page.focus("#step-first")
    page.keyboard.press("Enter")
    expect(page.locator("#step")).to_have_attribute("data-phase", "0")
    settled(page)
    assert _focused(page) == "step-first"
    expect(page.locator("#step-first")).to_have_attribute("aria-disabled", "true")
    expect(page.locator("#step-prev")).to_have_attribute("aria-disabled", "true")
    page.keyboard.press("Enter")  # nothing to do, nowhere to fall
    assert _focused(page) == "step-first"

    page.focus("#step-leave")
    page.keyboard.press("Enter")
    expect(page.locator("#step")).to_have_count(0)
    settled(page)
    assert _focused(page) == "watch-step"
    watch.assert_clean(page)


def test_arrowing_through_the_model_list_neither_fills_the_history_nor_floods_the_server(
    page: Page, server: str, watch: Watch
) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?stage=zero1")
    start = page.evaluate("history.length")
    page.focus("#f-model")
    for key in ["ArrowDown"] * 4 + ["ArrowUp"] + ["ArrowDown"] * 2:
        page.keyboard.press(key)
    chosen = page.evaluate("document.getElementById('f-model').value")
    expect(page).to_have_url(f"{server}/?stage=zero1&model={chosen}")
    settled(page)
    expect(page.locator("#f-model")).to_have_value(chosen)
    assert _focused(page) == "f-model"
    form_requests = [r for r in watch.requests if r.headers.get("hx-request") == "true"]
    assert len(form_requests) == 1
    assert page.evaluate("history.length") - start <= 1

    # The stage tabs are navigation: they still add an entry, and back returns to the run.
    page.click("#switch-zero3")
    expect(page).to_have_url(f"{server}/?stage=zero3&model={chosen}")
    page.go_back()
    expect(page).to_have_url(f"{server}/?stage=zero1&model={chosen}")
    watch.assert_clean(page)


def test_a_typo_keeps_the_form_and_marks_the_field(page: Page, server: str, watch: Watch) -> None:
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{server}/?stage=zero2&gpus=16")
    page.select_option("#f-model", "custom")
    expect(page.locator("#f-params")).to_be_editable()
    settled(page)

    page.fill("#f-params", "thirty billion")
    page.press("#f-params", "Tab")
    error = page.locator("#f-params-error")
    expect(error).to_contain_text("Enter a number of weights")
    expect(page.locator("#f-params")).to_have_value("thirty billion")
    expect(page.locator("#f-params")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#switch-zero2")).to_have_attribute("aria-current", "page")
    expect(page.locator("#grid")).to_have_attribute("data-gpus", "16")
    settled(page)

    page.fill("#f-gpus", "5000")
    page.press("#f-gpus", "Shift+Tab")
    expect(page.locator("#f-gpus-error")).to_contain_text("between 1 and 4096")
    expect(page.locator("#f-gpus")).to_have_value("5000")
    expect(page.locator("#f-params")).to_have_value("thirty billion")
    assert _focused(page) == "f-params"
    settled(page)

    # Fixing the field clears its message; the stage tabs carry the valid run.
    page.fill("#f-params", "7B")
    page.fill("#f-gpus", "64")
    page.press("#f-gpus", "Enter")
    expect(page.locator("#grid")).to_have_attribute("data-gpus", "64")
    expect(page.locator(".field-error")).to_have_count(0)
    settled(page)
    page.click("#switch-zero3")
    expect(page).to_have_url(f"{server}/?stage=zero3&model=custom&params=7B&gpus=64")
    watch.assert_clean(page, allow_status={422})


# Every axis label whose text is wider than its box, and every drop-down whose chosen option is
# wider than the room inside it (less the arrow), measured with a probe in the select's own font.
CLIPPED = """() => {
  const axis = [...document.querySelectorAll('#grid .axis span')]
    .filter(el => el.scrollWidth > el.clientWidth || el.scrollHeight > el.clientHeight)
    .map(el => 'axis ' + el.textContent);
  const selects = [...document.querySelectorAll('#run-form select')].filter(select => {
    const style = getComputedStyle(select);
    const probe = document.createElement('span');
    probe.textContent = select.options[select.selectedIndex].text;
    probe.style.font = style.font;
    probe.style.position = 'absolute';
    probe.style.whiteSpace = 'pre';
    document.body.append(probe);
    const width = probe.getBoundingClientRect().width;
    probe.remove();
    return width > select.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight) - 20;
  }).map(select => select.id);
  return [...axis, ...selects];
}"""


@pytest.mark.parametrize(("width", "height"), [(390, 844), (1280, 800), (1920, 1080)])
@pytest.mark.parametrize("run", ["stage=zero3&gpus=16", "stage=zero1&gpus=16", "stage=zero3&gpus=1024"])
def test_axis_labels_and_drop_downs_are_whole(
    page: Page, server: str, watch: Watch, width: int, height: int, run: str
) -> None:
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?{run}&recipe=mixed-adam")
    assert page.evaluate(CLIPPED) == []
    labels = page.locator("#grid .card").first.locator(".axis span").all_inner_texts()
    assert [label for label in labels if label] == (
        ["0", "1", "2", "3", "…", "1020", "1021", "1022", "1023"]
        if run.endswith("1024")
        else [str(w) for w in range(16) if w % 2 == 0]
    )
    watch.assert_clean(page)


@pytest.mark.parametrize("gpus", ["16", "1024", "1"])
def test_the_field_being_typed_in_stays_in_view_when_the_grid_above_changes_size(
    page: Page, server: str, watch: Watch, gpus: str
) -> None:
    # On a phone the run form is under the grid: 16 cards are twice as tall as 8, 1,024 drawn as 8.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server + "/?stage=zero2")
    field = page.locator("#f-gpus")
    field.scroll_into_view_if_needed()
    top = _top(page, "#f-gpus")
    field.fill(gpus)
    field.press("Enter")
    expect(page.locator("#grid")).to_have_attribute("data-gpus", gpus)
    settled(page)
    assert page.evaluate("document.activeElement.id") == "f-gpus"
    assert abs(_top(page, "#f-gpus") - top) <= 10
    watch.assert_clean(page)


def test_back_lands_where_the_reader_was_not_at_the_footer(page: Page, server: str) -> None:
    # Back is restored from the server (htmx keeps no snapshots): the whole body is swapped, and the
    # browser has already scrolled to where the reader was on that entry.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server + "/?stage=zero1")
    page.evaluate("scrollTo(0, 250)")
    page.click("#switch-zero2")
    expect(page).to_have_url(server + "/?stage=zero2")
    page.evaluate("scrollTo(0, 0)")
    page.click("#switch-zero3")
    expect(page).to_have_url(server + "/?stage=zero3")
    page.go_back()
    page.go_back()
    expect(page.locator("#grid")).to_have_attribute("data-stage", "zero1")
    settled(page)
    assert page.evaluate("window.scrollY") <= 400


def _at_the_cards(page: Page, width: int, height: int, url: str) -> float:
    """Open `url` in a window of that size scrolled to the cards, as a student watching them; their top."""
    page.set_viewport_size({"width": width, "height": height})
    page.goto(url)
    page.evaluate("document.getElementById('grid').scrollIntoView()")
    settled(page)
    return _top(page, "#grid")


# Where a box is against the window and the step's bar: (top, bottom, the bar's top or the window's foot).
_PLACE = """(selector) => {
  const box = document.querySelector(selector).getBoundingClientRect();
  const bar = document.querySelector('.step-nav').getBoundingClientRect();
  const fixed = getComputedStyle(document.querySelector('.step-nav')).position === 'fixed';
  return [box.top, box.bottom, fixed ? bar.top : innerHeight];
}"""

# The ringed cells (what the phase works on) that can be seen: inside the window, clear of the bar.
_SEEN_ACTIVE = """() => {
  const bar = document.querySelector('.step-nav');
  const foot = getComputedStyle(bar).position === 'fixed' ? bar.getBoundingClientRect().top : innerHeight;
  return [...document.querySelectorAll('#grid .cell.active')]
    .filter(c => { const r = c.getBoundingClientRect(); return r.top >= 0 && r.bottom <= foot; })
    .map(c => c.closest('.column').dataset.weight);
}"""


@pytest.mark.parametrize(
    ("width", "height", "theme"),
    [
        (390, 844, "default"),
        (360, 740, "default"),
        (768, 1024, "default"),
        (1024, 768, "projector"),
        (1280, 800, "default"),
    ],
)
def test_next_is_in_reach_while_the_cards_are_watched(
    page: Page, server: str, watch: Watch, width: int, height: int, theme: str
) -> None:
    # A student scrolls down to the cards, then steps: Next must be on the screen with them (on a
    # phone the panel that holds it is 700 px above the cards), and pressing it must show the cards
    # changing, not move them away.
    # Phase 5 is the compute of the second column; each column's gather, compute and discard ring it,
    # and the gather of the next moves the ring on (phases 7 and 10).
    grid_top = _at_the_cards(page, width, height, f"{server}/?stage=zero3&phase=5&theme={theme}")
    assert page.evaluate("window.scrollY") > 0 or width >= 1280
    seen = page.evaluate(_SEEN_ACTIVE)
    for phase in range(6, 12):
        top, bottom, _ = page.evaluate(_PLACE, "#step-next")
        assert top >= 0, f"Next is above the screen at phase {phase - 1}"
        assert bottom <= height, f"Next is below the screen at phase {phase - 1}"
        assert seen, f"no cell the phase works on is in view at phase {phase - 1}"
        page.click("#step-next")
        expect(page.locator("#step")).to_have_attribute("data-phase", str(phase))
        settled(page)
        assert abs(_top(page, "#grid") - grid_top) <= 2, "the cards moved"
        # The ring is in view; at a gather it has moved on to the next column of the model.
        now = page.evaluate(_SEEN_ACTIVE)
        assert now
        if phase % 3 == 1:
            assert set(now) != set(seen)
        else:
            assert set(now) == set(seen)
        seen = now
    watch.assert_clean(page)


@pytest.mark.parametrize(("width", "height"), [(390, 844), (768, 1024)])
def test_nothing_focused_hides_under_the_step_bar(
    page: Page, server: str, watch: Watch, width: int, height: int
) -> None:
    # WCAG 2.4.11: every control, tabbed to from the top of the page, and every cell, reached with the
    # arrow keys, is scrolled clear of the bar at the foot of the window.
    page.set_viewport_size({"width": width, "height": height})
    page.goto(f"{server}/?stage=zero2&phase=7")
    settled(page)
    hidden: list[str] = []

    def check() -> str:
        where: list[Any] = page.evaluate(
            """() => {
              const el = document.activeElement, bar = document.querySelector('.step-nav');
              const r = el.getBoundingClientRect();
              return [el.id || el.getAttribute('aria-label') || el.tagName, bar.contains(el), r.bottom,
                      bar.getBoundingClientRect().top];
            }"""
        )
        name, in_bar, bottom, bar_top = where
        if name != "BODY" and not in_bar and bottom > bar_top + 0.5:
            hidden.append(name)
        return str(name)

    page.evaluate("scrollTo(0, 0)")
    for _ in range(80):
        page.keyboard.press("Tab")
        if check() == "BODY":
            break
    page.focus("#grid .card[tabindex='0'] .cell")
    for _ in range(page.locator("#grid .cell").count()):
        page.keyboard.press("ArrowRight")
        check()
    assert hidden == []
    # And the page's end can be read above the bar.
    page.evaluate("scrollTo(0, document.documentElement.scrollHeight)")
    _, bottom, foot = page.evaluate(_PLACE, ".colophon")
    assert bottom <= foot
    watch.assert_clean(page)


def test_axe_finds_nothing_wrong_with_the_step_bar_on_a_phone(page: Page, server: str) -> None:
    _at_the_cards(page, 390, 844, f"{server}/?stage=zero3&phase=9&capacity=80GiB")
    assert page.evaluate("getComputedStyle(document.querySelector('.step-nav')).position") == "fixed"
    results = Axe().run(page)
    assert results.violations_count == 0, results.generate_report()


@pytest.mark.parametrize(("width", "height"), [(390, 844), (360, 740)])
@pytest.mark.parametrize("stage", ["zero3", "dp"])
def test_stepping_from_the_bar_never_moves_the_cards(
    page: Page, server: str, watch: Watch, width: int, height: int, stage: str
) -> None:
    # The text of a phase above the cards is not always as tall as the last one's (ZeRO-3's backward
    # phases draw two transfers): pressed in the bar, Next keeps the cards where they are, through
    # every phase, and the bar names the phase shown, as the heading does.
    top = _at_the_cards(page, width, height, f"{server}/?stage={stage}&phase=0")
    for phase in range(LAST_PHASE + 1):
        expect(page.locator("#step")).to_have_attribute("data-phase", str(phase))
        settled(page)
        assert abs(_top(page, "#grid") - top) <= 2, f"the cards moved at phase {phase}"
        heading = " ".join(page.locator("#step-heading").inner_text().split())
        where = page.locator(".step-bar .step-where")
        expect(where).to_be_visible()
        count = f"Phase {phase} of {LAST_PHASE}"
        # …and its traffic so far, as the panel's tally does.
        tally = " ".join(page.locator("#tally").inner_text().split()).removeprefix("Traffic so far: ")
        assert " ".join(where.inner_text().split()) == heading.replace(f"{count} ", f"{count}: ", 1) + f" · {tally}"
        if phase < LAST_PHASE:
            page.click("#step-next")
    watch.assert_clean(page)
