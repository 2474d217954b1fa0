"""No move lost (issue 43, item 7): what could not be sent or fetched is asked for again, and each bar says so.

A view the teacher's page could not send, or a follower could not fetch, is asked for again until it gets
through; meanwhile the teacher's bar says the class is not hearing, and the follower's that it reconnects.

A follower's phone goes offline (Chromium's own offline mode) while the teacher moves, then comes back; a
teacher's `show` is answered 503 while the session's Redis hangs (SIGSTOP), then Redis comes back (SIGCONT).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from urllib.parse import parse_qs

import pytest
from playwright.sync_api import BrowserContext, Page, Request, expect

from tests.browser.conftest import Watch, screenshot, serving, settled, watching, zero_bands_command
from tests.browser.test_live_browser import (
    DESKTOP,
    PHONE,
    _brief,
    _eventually,
    converge,
    fingerprint,
    start_from_page,
    teacher_moves,
)
from tests.live.redis_server import RedisServer, running_redis

BACK_SECONDS = 5.0
"""How soon a follower back online shows the teacher's latest view."""
HEARD_SECONDS = 10.0
"""How soon the teacher's page is heard again once Redis is back: its next try, after the breaker's 3 s
(app/live/redis_hub.py BREAKER_SECONDS) and the 503's Retry-After of 3 s, with room for a loaded machine."""
FOLLOWING = "Following the teacher."
NOT_HEARING = "The class is not hearing you: trying again…"
OFFLINE = "ERR_INTERNET_DISCONNECTED"
# Two moves while offline, or one: a stage, and a stage then the step's first two moments.
MOVES = {"a stage": ["#switch-zero1"], "a stage and a phase": ["#switch-zero1", "#watch-step", "#step-next"]}


def clean_but_for(watch: Watch, page: Page, expected: Callable[[str], bool], status: set[int]) -> None:
    """Nothing went wrong on `page` but what the test caused: the console errors `expected` allows, `status`."""
    assert watch.foreign_requests() == []
    assert watch.page_errors == []
    assert [f for f in watch.failed if int(f.split()[0]) not in status] == []
    assert [m for m in watch.console_errors if not expected(m)] == []
    assert page.evaluate("window.__cspViolations || []") == []


def offline_error(message: str) -> bool:
    """What Chromium and htmx log of a request the offline mode refused."""
    return OFFLINE in message or message.startswith(("htmx:sendError", "htmx:afterRequest"))


def busy_error(message: str) -> bool:
    """What Chromium and htmx log of a 503, the live routes' answer while Redis hangs."""
    return "status of 503" in message or "Error Code 503" in message


@pytest.mark.parametrize("moves", MOVES.values(), ids=MOVES.keys())
def test_a_follower_back_online_shows_the_teachers_latest_view_within_5_s(
    server: str, contexts: Callable[..., BrowserContext], moves: list[str]
) -> None:
    teacher = contexts(viewport=DESKTOP).new_page()
    code = start_from_page(teacher, server, "/?stage=zero3")
    phone_context = contexts(viewport=PHONE, is_mobile=True, has_touch=True)
    phone = phone_context.new_page()
    watch = watching(phone, server)
    phone.goto(f"{server}/live/{code}")
    before = converge(teacher, {"phone": phone})
    bar, reconnecting = phone.locator("#live-follow"), phone.locator("#live-reconnecting")
    expect(bar).to_contain_text(FOLLOWING, use_inner_text=True)
    expect(reconnecting).to_be_hidden()

    # Offline, the phone's stream still hears each move (Chromium keeps it open), but cannot fetch the view.
    phone_context.set_offline(True)
    for move in moves:
        teacher_moves(teacher, partial(teacher.click, move))
    want = fingerprint(teacher)
    assert want["stage"] == "zero1"
    expect(reconnecting).to_be_visible()
    expect(reconnecting).to_have_attribute("role", "status")
    expect(bar).not_to_contain_text(FOLLOWING, use_inner_text=True)
    assert fingerprint(phone) == before
    # Asked again while offline (in 1, 2, then 4 s): it still says so, and stays on the view it has.
    with phone.expect_event("requestfailed", lambda r: "stage=zero1" in r.url, timeout=10_000) as failed_again:
        pass
    assert OFFLINE in (failed_again.value.failure or "")
    screenshot(phone, f"live-follower-reconnecting-{len(moves)}-390")
    expect(bar).not_to_contain_text(FOLLOWING, use_inner_text=True)
    assert fingerprint(phone) == before

    phone_context.set_offline(False)
    back = time.monotonic()
    _eventually(
        lambda: fingerprint(phone) == want,
        lambda: f"the phone shows {_brief(fingerprint(phone))}, not {_brief(want)}",
        seconds=BACK_SECONDS,
    )
    expect(bar).to_contain_text(FOLLOWING, use_inner_text=True, timeout=1000 * BACK_SECONDS)
    expect(reconnecting).to_be_hidden()
    assert time.monotonic() - back < BACK_SECONDS
    settled(phone)
    # It follows on from there, online.
    teacher_moves(teacher, lambda: teacher.click("#switch-zero2"))
    converge(teacher, {"phone": phone})
    assert phone.url == f"{server}/live/{code}"
    clean_but_for(watch, phone, offline_error, set())


@contextmanager
def paused(redis: RedisServer) -> Iterator[Callable[[], None]]:
    """Redis hung (SIGSTOP) until the block ends or the function it yields resumes it (SIGCONT)."""
    assert redis.process is not None
    pid, running = redis.process.pid, [False]

    def resume() -> None:
        if not running[0]:
            os.kill(pid, signal.SIGCONT)
            running[0] = True

    os.kill(pid, signal.SIGSTOP)
    try:
        yield resume
    finally:
        resume()


def _view(request: Request) -> str:
    return parse_qs(request.post_data or "").get("view", [""])[0]


def _answered(shows: list[Request]) -> list[tuple[str, int]]:
    """Each show finished: the view it sent, and its answer's status."""
    return [(_view(r), response.status) for r in shows if (response := r.response()) is not None]


def test_a_show_refused_while_redis_hangs_is_sent_again_once_it_is_back_and_the_class_follows(
    tmp_path: Path, contexts: Callable[..., BrowserContext]
) -> None:
    with (
        running_redis(tmp_path) as redis,
        serving(lambda port: [zero_bands_command(), "--port", str(port), "--redis-url", redis.url]) as server,
    ):
        teacher = contexts(viewport=DESKTOP).new_page()
        teacher_watch = watching(teacher, server)
        code = start_from_page(teacher, server, "/?stage=zero2")
        student = contexts(viewport=DESKTOP).new_page()
        student_watch = watching(student, server)
        student.goto(f"{server}/live/{code}")
        held = converge(teacher, {"student": student})
        deaf = teacher.locator("#live-deaf")
        expect(deaf).to_be_hidden()
        expect(deaf).to_have_attribute("role", "status")
        shows: list[Request] = []
        teacher.on("requestfinished", lambda r: shows.append(r) if r.url.endswith("/show") else None)

        with paused(redis) as resume:
            # ZeRO-1, then the step's phase 1: the teacher's own screen moves (no Redis in it), the class cannot.
            with teacher.expect_response(lambda r: r.url.endswith("/show")) as refused:
                teacher.click("#switch-zero1")
            assert refused.value.status == 503
            assert refused.value.headers["retry-after"] == "3"
            expect(deaf).to_be_visible()
            expect(deaf).to_have_text(NOT_HEARING)
            for move in ("#watch-step", "#step-next"):
                teacher.click(move)
                settled(teacher)
            want = fingerprint(teacher)
            assert (want["stage"], want["phase"]) == ("zero1", "1")
            latest = teacher.locator("#widget").get_attribute("data-address")
            assert latest
            assert "phase=1" in latest
            # Sent again, the latest view in place of the first, and refused again: still said.
            with teacher.expect_event("requestfinished", lambda r: r.url.endswith("/show") and _view(r) == latest,
                                      timeout=1000 * HEARD_SECONDS) as again:  # fmt: skip
                pass
            refused_again = again.value.response()
            assert refused_again is not None
            assert refused_again.status == 503
            expect(deaf).to_be_visible()
            screenshot(teacher, "live-teacher-not-heard-1280")
            assert fingerprint(student) == held
            resume()
            back = time.monotonic()
            expect(deaf).to_be_hidden(timeout=1000 * HEARD_SECONDS)
            heard = time.monotonic() - back

        # Once Redis is back, the latest view is shown, once, and nothing older after it: the class follows.
        assert heard < HEARD_SECONDS
        converge(teacher, {"student": student})
        # (The page's events reach this script only while it waits on the page: evaluate() waits.)
        _eventually(lambda: bool(teacher.evaluate("true")) and _answered(shows)[-1:] == [(latest, 204)],
                    lambda: f"the shows answered: {_answered(shows)}")  # fmt: skip
        assert [view for view, status in _answered(shows) if status == 204] == [latest], _answered(shows)
        expect(student.locator("#live-state")).to_have_text(FOLLOWING)
        # It goes on as before.
        teacher_moves(teacher, lambda: teacher.click("#step-next"))
        converge(teacher, {"student": student})
        clean_but_for(teacher_watch, teacher, busy_error, {503})
        # A student's stream may have dropped meanwhile (htmx logs its error event, an Event), and reconnected.
        clean_but_for(student_watch, student, lambda m: busy_error(m) or m == "[object Event]", {503})
