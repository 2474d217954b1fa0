"""Live sessions in Chromium: a teacher's clicks drive every follower's screen (issue 23's "done when").

A teacher's page and three followers, each in its own browser context: a desktop, a phone, and an embed in
a course page on another origin. After every move each follower's grid is the teacher's; Pause holds them,
a follower who explores is left alone until "Back to the teacher", and End tells them all.
"""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import BrowserContext, FloatRect, Frame, Page, expect

from app.domain.step import LAST_PHASE
from app.web.live import RETRY_MS
from tests.browser.conftest import Host, Watch, _free_port, screenshot, serving, settled, watching, zero_bands_command

WCAG_AA = {"runOnly": {"type": "tag", "values": ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]}}
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
CONVERGE_SECONDS = 10
"""How long a follower may take to show the teacher's view: an event, then a fetch and a swap."""

# What a person sees of the widget: its stage and phase, every cell's words (they name card, weight, band
# and what the card does with it), the headline and the heading.
FINGERPRINT = """() => {
  const w = document.getElementById('widget');
  const text = (sel) => {
    const e = w.querySelector(sel);
    return e ? e.textContent.replace(/\\s+/g, ' ').trim() : null;
  };
  return {
    stage: w.dataset.stage || null, phase: w.dataset.phase || null,
    grid: [...w.querySelectorAll('#grid .cell')].map((c) => c.getAttribute('aria-label')),
    headline: text('.headline'), heading: text('#stage-heading'),
  };
}"""

Screen = Page | Frame


def _eventually(check: Callable[[], bool], what: Callable[[], str], seconds: float = CONVERGE_SECONDS) -> None:
    """Poll `check` until it holds; fail with `what()` after `seconds`."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(what())
        time.sleep(0.05)


def fingerprint(screen: Screen) -> dict[str, Any]:
    """The widget as a person sees it."""
    seen: dict[str, Any] = screen.evaluate(FINGERPRINT)
    return seen


def _brief(print_: dict[str, Any]) -> str:
    return f"{print_['stage']} phase {print_['phase']!r}: {print_['headline']}"


def converge(teacher: Page, followers: dict[str, Screen]) -> dict[str, Any]:
    """Wait until every follower's widget is the teacher's (settled); the teacher's fingerprint."""
    settled(teacher)
    want = fingerprint(teacher)
    assert want["grid"], "the teacher's page should draw a grid"
    for name, screen in followers.items():
        shows(name, screen, want)
    return want


def shows(name: str, screen: Screen, want: dict[str, Any]) -> None:
    """Wait until `screen` shows the view `want` fingerprints."""
    _eventually(
        lambda: fingerprint(screen) == want, lambda: f"{name} shows {_brief(fingerprint(screen))}, not {_brief(want)}"
    )


def version(screen: Screen) -> int:
    """The session's version the follower's bar was last told of."""
    return int(screen.locator("#live-state").get_attribute("data-version") or "0")


def told_of(screen: Screen, at_least: int) -> None:
    """Wait until the follower's bar has been told of version `at_least` (or a later one)."""
    _eventually(lambda: version(screen) >= at_least, lambda: f"{screen.url} is at {version(screen)} < {at_least}")


def teacher_moves(teacher: Page, move: Callable[[], object]) -> None:
    """Make a move on the teacher's page and wait until the session has been told of it."""
    with teacher.expect_response(lambda r: r.url.endswith("/show") and r.request.method == "POST") as shown:
        move()
    assert shown.value.status == 204
    settled(teacher)


def start_from_page(teacher: Page, server: str, path: str) -> str:
    """The teacher, on `path`, presses "Teach this live"; the session's code."""
    teacher.goto(server + path)
    teacher.click("#teach-live")
    expect(teacher).to_have_url(re.compile(re.escape(server) + r"/live/[A-Z0-9]{8}/teach$"))
    teacher.wait_for_load_state("domcontentloaded")  # live.js (its own file, after app.js) has run: Escape folds
    # The QR code opens over the page as the session starts; the class has scanned it, and the teacher folds it.
    expect(teacher.locator("#live-qr")).to_be_visible()
    teacher.wait_for_load_state()  # live.js listens (a loaded machine pressed Escape before it did)
    teacher.keyboard.press("Escape")
    expect(teacher.locator("#live-qr")).to_be_hidden()
    match = re.search(r"/live/([A-Z0-9]{8})/teach$", teacher.url)
    assert match
    return match.group(1)


def _host_page(host: Host, server: str, code: str, more: str = "") -> str:
    """A course page framing the live embed (and `more`), recording every state message the frame sends it."""
    return host.page(
        "lesson.html",
        "<h1>Lesson 4</h1><div id=column>"
        f'<iframe id=zb src="{server}/embed?live={code}" width=760 height=900 title="ZeRO Bands, live"></iframe>'
        f"{more}</div>"
        "<script>window.replies = []; addEventListener('message', (e) => { if (e.data && e.data.type === "
        "'zero-bands:state') { window.replies.push({origin: e.origin, source: e.source === "
        "document.getElementById('zb').contentWindow, data: e.data}); } });</script>",
    )


def _replies(lesson: Page) -> list[dict[str, Any]]:
    got: list[dict[str, Any]] = lesson.evaluate("window.replies")
    return got


def _ask(lesson: Page, server: str, message: dict[str, Any], answers: int) -> dict[str, Any]:
    """Post `message` to the embed from the course page; the embed's answer, its `answers`-th in all."""
    lesson.evaluate("(m) => document.getElementById('zb').contentWindow.postMessage(m, '*')", message)
    _eventually(lambda: len(_replies(lesson)) >= answers, lambda: f"{len(_replies(lesson))} answers of {answers}")
    assert len(_replies(lesson)) == answers
    reply = _replies(lesson)[-1]
    # From the frame, with the app's origin.
    assert (reply["origin"], reply["source"]) == (server, True)
    data: dict[str, Any] = reply["data"]
    return data


def _embed(lesson: Page, server: str) -> Frame:
    expect(lesson.frame_locator("#zb").locator("#live-follow")).to_have_count(1)
    frame = lesson.frame(url=lambda url: url.startswith(server + "/embed"))
    assert frame is not None
    return frame


def _clean_host(lesson: Page, watch: Watch, host: Host, frame: Frame) -> None:
    """The course page asked its own origin and the app's, nothing else; no errors in it or in the frame."""
    mine = (watch.origin + "/", host.origin + "/", host.other_origin + "/")
    assert [r.url for r in watch.requests if not r.url.startswith(mine)] == []
    assert watch.page_errors == []
    assert watch.failed == []
    assert watch.console_errors == []
    assert frame.evaluate("window.__cspViolations || []") == []


def test_a_teacher_drives_a_desktop_a_phone_and_an_embed_through_a_lesson(
    server: str, host: Host, contexts: Callable[..., BrowserContext]
) -> None:
    teacher = contexts(viewport=DESKTOP).new_page()
    teacher_watch = watching(teacher, server)
    code = start_from_page(teacher, server, "/?stage=dp")
    follow_url = f"{server}/live/{code}"

    desktop = contexts(viewport=DESKTOP).new_page()
    phone = contexts(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2).new_page()
    lesson = contexts(viewport={"width": 1000, "height": 1000}).new_page()
    watches = {"desktop": watching(desktop, server), "phone": watching(phone, server)}
    lesson_watch = watching(lesson, server)
    desktop.goto(follow_url)
    phone.goto(follow_url)
    lesson.goto(_host_page(host, server, code))
    embed = _embed(lesson, server)
    followers: dict[str, Screen] = {"desktop": desktop, "phone": phone, "embed": embed}

    def addresses_stay() -> None:
        # Following or exploring, a live page keeps its own address: reloaded, it still follows.
        assert teacher.url == follow_url + "/teach"
        assert desktop.url == follow_url
        assert phone.url == follow_url
        assert embed.url == f"{server}/embed?live={code}"

    converge(teacher, followers)
    expect(desktop.locator("#live-state")).to_have_text("Following the teacher.")

    # A stage switch.
    teacher_moves(teacher, lambda: teacher.click("#switch-zero3"))
    converge(teacher, followers)
    addresses_stay()

    # Five phases: a clicker's PageDown at rest starts the step at phase 1, then its Next, then PageDown.
    teacher.locator("#stage-heading").click()
    teacher_moves(teacher, lambda: teacher.keyboard.press("PageDown"))
    assert converge(teacher, followers)["phase"] == "1"
    teacher_moves(teacher, lambda: teacher.click("#step-next"))
    assert converge(teacher, followers)["phase"] == "2"
    for phase in ("3", "4", "5"):
        teacher.focus("#step-next")
        teacher_moves(teacher, lambda: teacher.keyboard.press("PageDown"))
        assert converge(teacher, followers)["phase"] == phase
    addresses_stay()

    # A change of the run, in the step: the followers draw the teacher's model too.
    before = fingerprint(teacher)
    teacher_moves(teacher, lambda: teacher.select_option("#f-model", "llama-3-8b"))
    now = converge(teacher, followers)
    assert (now["stage"], now["phase"]) == ("zero3", "5")
    assert now["headline"] != before["headline"]

    # The count, asked every 3 s, has been asked since the three joined.
    expect(teacher.locator("#live-count")).to_have_text("3 following", timeout=8000)

    # Pause: the class stays on this view while the teacher moves on alone.
    held = fingerprint(teacher)
    teacher.click("#live-pause")
    expect(teacher.locator("#live-pause")).to_have_text("Resume: show them my view")
    for screen in followers.values():
        expect(screen.locator("#live-state")).to_have_class(re.compile(r"\bpaused\b"))
        expect(screen.locator("#live-state")).to_have_text("The teacher has paused the class here.")
    paused_at = version(desktop)
    teacher_moves(teacher, lambda: teacher.click("#step-next"))
    teacher_moves(teacher, lambda: teacher.click("#switch-zero2"))
    assert fingerprint(teacher) != held
    for screen in followers.values():
        told_of(screen, paused_at + 2)  # both moves have reached it, and changed nothing
        assert fingerprint(screen) == held
    teacher.click("#live-pause")
    expect(teacher.locator("#live-pause")).to_have_text("Pause")
    converge(teacher, followers)
    for screen in followers.values():
        expect(screen.locator("#live-state")).to_have_text("Following the teacher.")

    # Explore: the desktop follower picks a stage itself, and the teacher's next move leaves it alone.
    away, back = desktop.locator("#live-away"), desktop.locator("#live-back")
    expect(away).to_be_hidden()
    desktop.click("#switch-dp")
    expect(desktop.locator("#widget")).to_have_attribute("data-stage", "dp")
    expect(away).to_be_visible()
    expect(back).to_have_text("Back to the teacher")
    settled(desktop)
    explored = fingerprint(desktop)
    teacher_moves(teacher, lambda: teacher.click("#step-next"))
    others = {name: screen for name, screen in followers.items() if name != "desktop"}
    converge(teacher, others)
    told_of(desktop, version(phone))
    assert fingerprint(desktop) == explored
    addresses_stay()
    # ... and back.
    back.click()
    expect(away).to_be_hidden()
    converge(teacher, followers)
    addresses_stay()

    # A follower reloaded, or one exploring and then reloaded, follows again at the teacher's view.
    phone.locator("#switch-zero1").tap()
    expect(phone.locator("#live-away")).to_be_visible()
    addresses_stay()
    phone.reload()
    expect(phone.locator("#live-away")).to_be_hidden()
    last = converge(teacher, followers)
    addresses_stay()
    screenshot(teacher, "live-teacher-lesson-1280")
    screenshot(phone, "live-follower-lesson-390")
    screenshot(lesson, "live-embed-lesson")

    # End: every follower is told, and the follower's address then says the session has ended.
    teacher.click("#live-end")
    expect(teacher).to_have_url(server + "/live")
    for screen in followers.values():
        expect(screen.locator("#live-follow")).to_have_class(re.compile(r"\bended\b"))
        expect(screen.locator("#live-state")).to_have_text("The teacher has ended the session.")
    screenshot(phone, "live-follower-ended-390")
    # The course page asking is told the embed no longer follows.
    ended = _ask(lesson, server, {"type": "zero-bands:get-state"}, 1)
    assert (ended["stage"], ended["following"]) == (last["stage"], False)
    for name, page in {"desktop": desktop, "phone": phone}.items():
        response = page.goto(follow_url)
        assert response is not None
        assert response.status == 410, name
        expect(page.locator("h2")).to_have_text("The session has ended")
        watches[name].assert_clean(page, allow_status={410})
    # The count may have been asked as End was pressed: the ended session's 410, then the page left.
    assert set(teacher_watch.failed) <= {f"410 {follow_url}/followers"}
    teacher_watch.assert_clean(teacher, allow_status={410})
    _clean_host(lesson, lesson_watch, host, embed)


def test_a_late_joiner_lands_on_the_teachers_moment(server: str, contexts: Callable[..., BrowserContext]) -> None:
    teacher = contexts(viewport=DESKTOP).new_page()
    code = start_from_page(teacher, server, "/?stage=zero1&gpus=16")
    teacher_moves(teacher, lambda: teacher.click("#switch-zero2"))
    teacher_moves(teacher, lambda: teacher.click("#watch-step"))
    teacher_moves(teacher, lambda: teacher.click("#step-next"))
    want = fingerprint(teacher)
    assert (want["stage"], want["phase"]) == ("zero2", "1")

    late = contexts(viewport=PHONE, is_mobile=True, has_touch=True).new_page()
    watch = watching(late, server)
    # The code as a student types it from the teacher's screen: in two halves, in small letters.
    late.goto(server + "/live")
    late.fill("#join-code", f"{code[:3]} {code[3:]}".lower())
    late.get_by_role("button", name="Join").click()
    expect(late).to_have_url(f"{server}/live/{code}")
    late.wait_for_load_state("domcontentloaded")
    # At once: the page itself is the teacher's view, with no fetch of another.
    assert fingerprint(late) == want
    settled(late)
    expect(late.locator("#live-state")).to_have_text("Following the teacher.")
    assert [r.url for r in watch.requests if "stage=" in r.url] == []
    # It still follows from there.
    teacher_moves(teacher, lambda: teacher.click("#step-next"))
    converge(teacher, {"late": late})
    assert late.url == f"{server}/live/{code}"
    watch.assert_clean(late)


def test_the_embeds_state_api_answers_its_course_page_and_no_one_else(
    server: str, host: Host, contexts: Callable[..., BrowserContext]
) -> None:
    teacher = contexts(viewport=DESKTOP).new_page()
    code = start_from_page(teacher, server, "/?stage=zero3&phase=4")
    # The course page frames the embed, and two pages of its own that are not the embed's parent: one from
    # the course page's origin, one from another.
    same = host.page("same.html", "<p>Another frame of the course page's origin.</p>")
    other = host.page("other.html", "<p>A frame of another origin.</p>").replace(host.origin, host.other_origin)
    siblings = f'<iframe id=same src="{same}" title=same></iframe><iframe id=other src="{other}" title=other></iframe>'
    lesson_html = _host_page(host, server, code, siblings)
    lesson = contexts(viewport={"width": 1000, "height": 1000}).new_page()
    watch = watching(lesson, server)
    lesson.goto(lesson_html)
    embed = _embed(lesson, server)
    expect(embed.locator("#widget")).to_have_attribute("data-phase", "4")
    settled(embed)

    def ask(message: dict[str, Any], answers: int) -> dict[str, Any]:
        return _ask(lesson, server, message, answers)

    state = ask({"type": "zero-bands:get-state"}, 1)
    assert state == {
        "type": "zero-bands:state",
        "stage": "zero3",
        "phase": 4,
        "run": {},
        "following": True,
        "error": None,
    }

    # Messages from any window but the parent, or from the frame itself, change nothing and get no answer.
    embed.evaluate("window.__heard = 0; addEventListener('message', () => { window.__heard += 1; })")
    for sibling in ("#same", "#other"):
        expect(lesson.frame_locator(sibling).locator("p")).to_have_count(1)
    frames = {f.url: f for f in lesson.frames}
    intruders = [frames[same], frames[other], embed]
    for sender in intruders:
        for message in ({"type": "zero-bands:set-state", "stage": "dp", "phase": 0}, {"type": "zero-bands:get-state"}):
            sender.evaluate("(m) => window.parent.frames[0].postMessage(m, '*')", message)
    heard = 2 * len(intruders)
    _eventually(lambda: embed.evaluate("window.__heard") == heard, lambda: f"{embed.evaluate('window.__heard')} heard")
    # A set-state obeyed would have sent its request at once, in the handler.
    assert embed.locator(".htmx-request").count() == 0
    assert embed.locator("#widget").get_attribute("data-stage") == "zero3"
    expect(embed.locator("#live-away")).to_be_hidden()
    # An answer to any of them would have reached the course page before this one.
    assert ask({"type": "zero-bands:get-state"}, 2)["stage"] == "zero3"

    # The course page sets the view: the embed shows it, and no longer follows.
    state = ask({"type": "zero-bands:set-state", "stage": "zero1", "phase": None}, 3)
    assert (state["stage"], state["phase"], state["following"], state["error"]) == ("zero1", None, False, None)
    expect(embed.locator("#widget")).to_have_attribute("data-stage", "zero1")
    expect(embed.locator("#live-away")).to_be_visible()
    left, at = fingerprint(embed), version(embed)
    teacher_moves(teacher, lambda: teacher.click("#step-next"))
    told_of(embed, at + 1)
    assert fingerprint(embed) == left
    assert ask({"type": "zero-bands:get-state"}, 4)["following"] is False
    # Back to the teacher, inside the frame: it follows again, and says so.
    embed.click("#live-back")
    converge(teacher, {"embed": embed})
    state = ask({"type": "zero-bands:get-state"}, 5)
    assert (state["stage"], state["phase"], state["following"]) == ("zero3", 5, True)
    assert embed.url == f"{server}/embed?live={code}"
    _clean_host(lesson, watch, host, embed)


@pytest.mark.parametrize("width", [1280, 390])
def test_axe_finds_no_violations_on_the_live_pages(
    server: str, contexts: Callable[..., BrowserContext], width: int
) -> None:
    size = {"width": width, "height": 800 if width > 500 else 844}
    phone = {"is_mobile": True, "has_touch": True} if width < 500 else {}

    def check(page: Page, name: str) -> None:
        settled(page)
        results = Axe().run(page, options=WCAG_AA)
        assert results.violations_count == 0, f"{name}:\n{results.generate_report()}"
        screenshot(page, f"live-{name}-{width}")

    teacher = contexts(viewport=size, **phone).new_page()
    teacher_watch = watching(teacher, server)
    teacher.goto(server + "/live")
    expect(teacher.locator("#live-start")).to_be_visible()
    check(teacher, "home")
    teacher.click("#live-start")
    expect(teacher).to_have_url(re.compile(r"/live/[A-Z0-9]{8}/teach$"))
    expect(teacher.locator("#live-qr")).to_have_js_property("complete", True)
    assert teacher.locator("#live-qr").evaluate("img => img.naturalWidth") > 0
    code = teacher.url.split("/")[-2]
    # Two cards, not eight: axe takes seconds over a grid of hundreds of cells, which the themes' tests check.
    teacher_moves(teacher, lambda: teacher.fill("#f-gpus", "2"))
    teacher_moves(teacher, lambda: teacher.click("#switch-zero2"))
    check(teacher, "teacher")

    follower = contexts(viewport=size, **phone).new_page()
    follower_watch = watching(follower, server)
    follower.goto(f"{server}/live/{code}")
    converge(teacher, {"follower": follower})
    check(follower, "follower")
    follower.click("#switch-zero3")
    expect(follower.locator("#live-back")).to_be_visible()
    check(follower, "follower-away")
    teacher_watch.assert_clean(teacher)
    follower_watch.assert_clean(follower)


def test_a_followers_own_moves_leave_the_teacher_and_nothing_else_does(
    server: str, contexts: Callable[..., BrowserContext]
) -> None:
    teacher = contexts(viewport=DESKTOP).new_page()
    code = start_from_page(teacher, server, "/?stage=zero3&phase=3")
    follower = contexts(viewport=DESKTOP).new_page()
    watch = watching(follower, server)
    follower.goto(f"{server}/live/{code}")
    away = follower.locator("#live-away")
    converge(teacher, {"follower": follower})

    # Full screen (its button, or F) changes no view: the follower still follows.
    follower.locator("#stage-heading").click()
    follower.keyboard.press("f")
    expect(follower.locator("#fullscreen")).to_have_attribute("aria-pressed", "true")
    follower.click("#fullscreen")
    expect(follower.locator("#fullscreen")).to_have_attribute("aria-pressed", "false")
    expect(away).to_be_hidden()
    teacher_moves(teacher, lambda: teacher.click("#step-next"))
    converge(teacher, {"follower": follower})
    expect(away).to_be_hidden()

    # A step key pressed while the teacher's view is on its way is the follower's own move (static/step.js
    # asks for it without a click): it leaves the teacher, and the teacher's next move leaves it alone.
    held: list[Any] = []
    follower.route(lambda url: "stage=" in url, lambda route: held.append(route) if not held else route.continue_())
    teacher_moves(teacher, lambda: teacher.click("#step-next"))
    # The route's handler runs only while Playwright waits on something: this does, until it has.
    expect(follower.locator("#widget.htmx-request, main.htmx-request")).not_to_have_count(0)
    _eventually(lambda: follower.evaluate("true") and bool(held), lambda: "the teacher's view should be held")
    follower.keyboard.press("PageDown")
    held[0].continue_()
    expect(away).to_be_visible()
    settled(follower)
    want = fingerprint(teacher)
    mine = fingerprint(follower)
    assert int(mine["phase"]) == int(want["phase"]) + 1
    at = version(follower)
    teacher_moves(teacher, lambda: teacher.click("#step-next"))
    told_of(follower, at + 1)
    assert fingerprint(follower) == mine
    follower.unroute_all()
    follower.click("#live-back")
    converge(teacher, {"follower": follower})

    # Typing in the run form leaves at once, before its request (and before the field is left).
    follower.fill("#f-gpus", "16")
    expect(away).to_be_visible()
    expect(follower.locator("#grid")).to_have_attribute("data-gpus", "16")
    assert follower.url == f"{server}/live/{code}"
    watch.assert_clean(follower)


def test_after_a_restart_the_pages_say_the_session_ended_and_the_followers_stop_asking(
    contexts: Callable[..., BrowserContext],
) -> None:
    # A one-process server keeps its sessions in memory: a restart loses them, and every follower's tab
    # asks again. Each is told the session ended, once, and none of it counts as a wrong code.
    port = _free_port()

    def serving_on_port() -> AbstractContextManager[str]:
        # The same port each time, as a restart keeps it: the pages ask again where they asked before.
        return serving(lambda p: [zero_bands_command(), "--port", str(p)], port=port)

    with serving_on_port() as first:
        teacher = contexts(viewport=DESKTOP).new_page()
        code = start_from_page(teacher, first, "/?stage=zero1")
        student = contexts(viewport=PHONE).new_page()
        student.goto(f"{first}/live/{code}")
        expect(student.locator("#live-state")).to_have_text("Following the teacher.")
        settled(student)
    asked: list[str] = []
    student.on("request", lambda r: asked.append(r.url) if r.url.endswith("/events") else None)
    with serving_on_port() as second:
        expect(student.locator("#live-state")).to_have_text("The session has ended.", timeout=30_000)
        expect(student.locator("#live-follow")).to_have_class(re.compile(r"\bended\b"))
        heard = len(asked)
        time.sleep(3 * RETRY_MS / 1000)  # past the stream's retry: a closed stream asks no more
        assert len(asked) == heard
        with pytest.raises(urllib.error.HTTPError) as lost:
            urllib.request.urlopen(f"{second}/live/join?code={code}")
        lost.value.close()
        assert lost.value.code == 404  # a wrong code, the first: the tabs' asking counted none
        # The teacher's page is told by its count's next answer, before any click.
        expect(teacher.locator("#live-lost")).to_be_visible(timeout=15_000)
        expect(teacher.locator("#live-count")).to_have_text("no longer running")


def _inside(page: Page, selector: str) -> FloatRect:
    """The box of `selector`, which must lie wholly inside the window."""
    box = page.locator(selector).bounding_box()
    size = page.viewport_size
    assert box is not None, selector
    assert size is not None
    assert box["x"] >= 0, (selector, box)
    assert box["y"] >= 0, (selector, box)
    assert box["x"] + box["width"] <= size["width"] + 0.5, (selector, box)
    assert box["y"] + box["height"] <= size["height"] + 0.5, (selector, box)
    return box


def test_a_phone_that_taps_next_is_told_it_explores_at_the_foot_and_goes_back_in_one_tap(
    server: str, contexts: Callable[..., BrowserContext]
) -> None:
    teacher = contexts(viewport=DESKTOP).new_page()
    code = start_from_page(teacher, server, "/?stage=zero3&phase=2")
    phone = contexts(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2).new_page()
    watch = watching(phone, server)
    phone.goto(f"{server}/live/{code}")
    converge(teacher, {"phone": phone})
    away = phone.locator("#live-away")
    expect(away).to_be_hidden()
    # Scrolled down to the cards, as a student reading them is; the step's buttons at the foot.
    phone.locator("#grid .card").nth(3).scroll_into_view_if_needed()
    phone.locator("#step-next").tap()
    expect(phone.locator("#widget")).to_have_attribute("data-phase", "3")
    expect(away).to_be_visible()
    expect(away).to_contain_text("Exploring on your own.")
    notice, back = _inside(phone, "#live-away"), _inside(phone, "#live-back")
    # The step's bar stays whole, just above the notice.
    bar = _inside(phone, ".step-bar")
    assert bar["y"] + bar["height"] <= notice["y"] + 0.5
    assert back["height"] >= 24
    screenshot(phone, "live-follower-exploring-390")
    phone.locator("#live-back").tap()
    expect(away).to_be_hidden()
    assert converge(teacher, {"phone": phone})["phase"] == "2"
    assert phone.url == f"{server}/live/{code}"
    watch.assert_clean(phone)


def test_the_teachers_projector_view_stays_on_the_teachers_screen(
    server: str, contexts: Callable[..., BrowserContext]
) -> None:
    teacher = contexts(viewport=DESKTOP).new_page()
    code = start_from_page(teacher, server, "/?stage=zero1")
    student = contexts(viewport=DESKTOP).new_page()
    watch = watching(student, server)
    student.goto(f"{server}/live/{code}")
    converge(teacher, {"student": student})
    at = version(student)
    with teacher.expect_navigation():
        teacher_moves(teacher, lambda: teacher.click("#theme-toggle"))
    expect(teacher.locator("html")).to_have_class("theme-projector")
    told_of(student, at + 1)
    expect(student.locator("html")).to_have_class("theme-default")
    teacher_moves(teacher, lambda: teacher.click("#switch-zero3"))
    converge(teacher, {"student": student})
    expect(student.locator("html")).to_have_class("theme-default")
    # The student's own toggle: its page in the projector view, still following.
    student.click("#theme-toggle")
    expect(student).to_have_url(f"{server}/live/{code}?theme=projector")
    expect(student.locator("html")).to_have_class("theme-projector")
    expect(student.locator("#live-state")).to_have_text("Following the teacher.")
    teacher_moves(teacher, lambda: teacher.click("#switch-zero2"))
    converge(teacher, {"student": student})
    expect(student.locator("html")).to_have_class("theme-projector")
    # A colour scheme is the same: the student's own (still following), and the teacher's, the teacher's alone.
    student.click("#scheme-menu summary")
    student.click("#scheme-dark")
    expect(student).to_have_url(f"{server}/live/{code}?theme=projector-dark")
    expect(student.locator("html")).to_have_attribute("data-scheme", "dark")
    expect(student.locator("#live-state")).to_have_text("Following the teacher.")
    at = version(student)
    teacher.click("#scheme-menu summary")
    with teacher.expect_navigation():
        teacher_moves(teacher, lambda: teacher.click("#scheme-light"))
    expect(teacher.locator("html")).to_have_attribute("data-scheme", "light")
    told_of(student, at + 1)
    expect(student.locator("html")).to_have_attribute("data-scheme", "dark")
    watch.assert_clean(student)


@pytest.mark.parametrize("size", [(1024, 768), (1280, 720), (1366, 768), (1920, 1080)])
def test_a_session_starts_from_the_projector_view_at_any_height_with_a_qr_code_the_room_can_scan(
    server: str, contexts: Callable[..., BrowserContext], size: tuple[int, int]
) -> None:
    teacher = contexts(viewport={"width": size[0], "height": size[1]}).new_page()
    watch = watching(teacher, server)
    teacher.goto(f"{server}/?stage=zero3&model=llama-3-8b&phase=4&theme=projector")
    _inside(teacher, "#teach-live")
    teacher.click("#teach-live")
    expect(teacher).to_have_url(re.compile(r"/live/[A-Z0-9]{8}/teach$"))
    expect(teacher.locator("html")).to_have_class("theme-projector")
    assert fingerprint(teacher)["stage"] == "zero3"
    expect(teacher.locator("#widget")).to_have_attribute(
        "data-address", "/?stage=zero3&model=llama-3-8b&phase=4&theme=projector"
    )
    # Open as the session starts, over the page; at least 160 px.
    expect(teacher.locator("#live-qr-box")).to_have_attribute("open", "")
    expect(teacher.locator("#live-qr")).to_have_js_property("complete", True)
    qr = _inside(teacher, "#live-qr")
    assert min(qr["width"], qr["height"]) >= 160
    assert teacher.locator("#live-qr").evaluate("img => img.naturalWidth") > 0
    screenshot(teacher, f"live-projector-teacher-{size[0]}x{size[1]}")
    # Folded away by a click on it (or anywhere: the click goes on to what it covers), and back from its button.
    teacher.mouse.click(qr["x"] + qr["width"] / 2, qr["y"] + qr["height"] / 2)
    expect(teacher.locator("#live-qr")).to_be_hidden()
    teacher.click("#live-qr-box summary")
    expect(teacher.locator("#live-qr")).to_be_visible()
    watch.assert_clean(teacher)


def test_the_start_page_starts_from_the_view_the_teacher_came_from(
    server: str, contexts: Callable[..., BrowserContext]
) -> None:
    teacher = contexts(viewport=DESKTOP).new_page()
    watch = watching(teacher, server)
    teacher.goto(f"{server}/live", referer=f"{server}/?stage=zero2&gpus=16&phase=7")
    expect(teacher.locator("#live-from")).to_be_visible()
    teacher.click("#live-start")
    expect(teacher).to_have_url(re.compile(r"/live/[A-Z0-9]{8}/teach$"))
    expect(teacher.locator("#widget")).to_have_attribute("data-address", "/?stage=zero2&gpus=16&phase=7")
    # On 127.0.0.1 the bar says students cannot open it.
    expect(teacher.locator("#live-warning")).to_contain_text("Students cannot open 127.0.0.1: it is this computer only")
    watch.assert_clean(teacher)


def test_with_a_public_url_the_bars_keep_all_eight_cards_on_the_first_screen_at_1280_by_800(
    contexts: Callable[..., BrowserContext],
) -> None:
    port = _free_port()
    public = f"http://zero-bands.test:{port}"
    command = [zero_bands_command(), "--port", str(port), "--public-url", public]
    with serving(lambda p: command, port=port) as origin:
        teacher = contexts(viewport=DESKTOP).new_page()
        watch = watching(teacher, origin)
        code = start_from_page(teacher, origin, "/?stage=zero3")
        # The join address and the QR code are the public URL's; no warning.
        expect(teacher.locator("#live-url")).to_have_text(f"{public}/live/{code}")
        expect(teacher.locator("#live-qr")).to_have_attribute("alt", f"QR code of {public}/live/{code}")
        expect(teacher.locator("#live-warning")).to_have_count(0)
        student = contexts(viewport=DESKTOP).new_page()
        student.goto(f"{origin}/live/{code}")
        converge(teacher, {"student": student})
        for name, page, bar in [("teacher", teacher, "#live-teach"), ("student", student, "#live-follow")]:
            assert page.locator(".card").count() == 8
            box = page.locator(bar).bounding_box()
            assert box is not None
            assert box["height"] <= 60, (name, box)
            last = page.locator(".card").last.bounding_box()
            assert last is not None
            assert last["y"] + last["height"] <= 800, (name, last)
            screenshot(page, f"live-{name}-cards-1280x800")
        watch.assert_clean(teacher)


def _centre(box: FloatRect) -> tuple[float, float]:
    return box["x"] + box["width"] / 2, box["y"] + box["height"] / 2


def _covers(box: FloatRect, point: tuple[float, float]) -> bool:
    x, y = point
    return box["x"] <= x <= box["x"] + box["width"] and box["y"] <= y <= box["y"] + box["height"]


def test_the_qr_code_never_swallows_a_click_on_a_stage_and_folds_when_the_first_student_follows(
    server: str, contexts: Callable[..., BrowserContext]
) -> None:
    teacher = contexts(viewport=DESKTOP).new_page()
    watch = watching(teacher, server)
    teacher.goto(server + "/?stage=dp")
    teacher.click("#teach-live")
    expect(teacher).to_have_url(re.compile(r"/live/[A-Z0-9]{8}/teach$"))
    code = teacher.url.split("/")[-2]
    qr, zero3 = teacher.locator("#live-qr"), teacher.locator("#switch-zero3")
    expect(qr).to_be_visible()
    # At 1280 px the QR code, open over the page, covers ZeRO-3's switch: the teacher's first click on it
    # switches all the same, and folds the code.
    qr_box, switch_box = qr.bounding_box(), zero3.bounding_box()
    assert qr_box is not None
    assert switch_box is not None
    assert _covers(qr_box, _centre(switch_box))
    teacher_moves(teacher, lambda: teacher.mouse.click(*_centre(switch_box)))
    expect(teacher.locator("#widget")).to_have_attribute("data-stage", "zero3")
    expect(qr).to_be_hidden()
    # Open again for the class; it folds by itself once a student follows (the count's next answer).
    teacher.click("#live-qr-box summary")
    expect(qr).to_be_visible()
    student = contexts(viewport=PHONE, is_mobile=True, has_touch=True).new_page()
    student.goto(f"{server}/live/{code}")
    expect(teacher.locator("#live-count")).to_have_text("1 following", timeout=8000)
    expect(qr).to_be_hidden()
    expect(teacher.locator("#live-qr-box")).not_to_have_attribute("open", "")
    # The teacher may open it again for a latecomer: it stays open while more follow.
    teacher.click("#live-qr-box summary")
    another = contexts(viewport=PHONE, is_mobile=True, has_touch=True).new_page()
    another.goto(f"{server}/live/{code}")
    expect(teacher.locator("#live-count")).to_have_text("2 following", timeout=8000)
    expect(qr).to_be_visible()
    watch.assert_clean(teacher)


# The tooltip of the cell in focus, as its ::after is placed (app.css: over the card's top, or under a first
# row's card), against the stage switcher's box.
TOOLTIP = """(cell) => {
  const card = cell.closest('.card').getBoundingClientRect(), tip = getComputedStyle(cell, '::after');
  const height = parseFloat(tip.height) + parseFloat(tip.paddingTop) + parseFloat(tip.paddingBottom);
  const top = tip.top !== 'auto' && tip.bottom === 'auto' ? card.top + parseFloat(tip.top)
    : card.bottom - parseFloat(tip.bottom) - height;
  const switcher = document.querySelector('.switcher').getBoundingClientRect();
  return {shown: tip.content !== 'none', top, bottom: top + height, switcherBottom: switcher.bottom};
}"""


def test_on_a_phone_the_stage_words_follow_the_cards_the_steps_cells_read_and_a_tooltip_clears_the_switcher(
    server: str, contexts: Callable[..., BrowserContext]
) -> None:
    teacher = contexts(viewport=DESKTOP).new_page()
    code = start_from_page(teacher, server, "/?stage=zero3")
    phone = contexts(viewport=PHONE, is_mobile=True, has_touch=True, device_scale_factor=2).new_page()
    watch = watching(phone, server)
    phone.goto(f"{server}/live/{code}")
    converge(teacher, {"phone": phone})

    def words_under_the_cards() -> None:
        grid, heading = phone.locator("#grid").bounding_box(), phone.locator("#stage-heading").bounding_box()
        assert grid is not None
        assert heading is not None
        # Just under the cards, before their key (it was 1,320 px down, under the key and the note).
        assert grid["y"] + grid["height"] <= heading["y"] <= grid["y"] + grid["height"] + 40, (grid, heading)
        key = phone.locator(".legend").first.bounding_box()
        assert key is not None
        assert key["y"] > heading["y"]

    words_under_the_cards()
    # Every first-row and second-row card's tooltip, on focus (a tap), clears the switcher above the cards.
    for card in range(4):
        cell = phone.locator("#grid .card").nth(card).locator(".cell").nth(5)
        cell.tap()
        tip = cell.evaluate(TOOLTIP)
        assert tip["shown"], card
        assert tip["top"] >= tip["switcherBottom"], (card, tip)
    screenshot(phone, "live-follower-tooltip-390")

    # In the step, every cell is at least 12 px tall, 2-byte ones too (they were 6).
    teacher_moves(teacher, lambda: teacher.click("#watch-step"))
    teacher_moves(teacher, lambda: teacher.click("#step-last"))
    assert converge(teacher, {"phone": phone})["phase"] == str(LAST_PHASE)
    heights = phone.locator("#grid .cell").evaluate_all("(cells) => cells.map((c) => c.getBoundingClientRect().height)")
    assert len(heights) == 8 * 8 * 4
    assert min(heights) >= 12
    words_under_the_cards()
    screenshot(phone, "live-follower-step-390")
    watch.assert_clean(phone)
