"""app/live/service.py: the live rules over either hub, no HTTP: finding, the teacher's check, wrong codes, the room.

The web's wording of each refusal (status, heading, sentence) is tests/web/test_live_view.py's; the pages
that show it are tests/web/test_live.py's.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from app.live.hub import MISS_WINDOW_SECONDS, MISSES_ALLOWED, STARTS_ALLOWED, MemoryHub, Room
from app.live.service import (
    LiveOff,
    NoSuchSession,
    NotTheTeacher,
    RoomFull,
    SessionEnded,
    Sessions,
    ShareTaken,
    TooManyStarts,
    TooManyTries,
    Visitor,
)
from app.live.session import ALPHABET, CODE_LENGTH, Session
from tests.live.conftest import Clock, MakeHub, following, opened, run

STUDENT = Visitor("10.0.0.2")
ELSEWHERE = Visitor("10.0.0.3")


def _absent(code: str) -> str:
    """A well-formed code that is not `code`."""
    return "".join(ALPHABET[(ALPHABET.index(c) + 1) % len(ALPHABET)] for c in code)


async def _started(sessions: Sessions, view: str = "stage=zero1") -> tuple[Session, Visitor]:
    session, secret = await sessions.start(view, Visitor("192.0.2.99"))
    return session, Visitor(STUDENT.address, secret)


@pytest.mark.parametrize(
    "typed",
    [lambda c: c, lambda c: c.lower(), lambda c: f"{c[:3]}-{c[3:]}", lambda c: f" {c[:3].lower()} {c[3:]} "],
    ids=["as-shown", "lower", "dashed", "spaced"],
)
def test_a_code_is_found_as_a_person_types_it(hub: MakeHub, typed: Callable[[str], str]) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=10, clock=clock)
            session, _ = await _started(sessions)
            assert await sessions.find(typed(session.code), STUDENT) == session
            assert await h.misses(STUDENT.address) == 0

    run(scenario())


@pytest.mark.parametrize("typed", ["", "ACD47", "0OQ1IL", "<script>", "absent"])
def test_a_code_typed_to_join_that_names_no_session_is_refused_and_counted_as_a_wrong_one(
    hub: MakeHub, typed: str
) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=10, clock=clock)
            session, _ = await _started(sessions)
            with pytest.raises(NoSuchSession):
                await sessions.join(_absent(session.code) if typed == "absent" else typed, STUDENT)
            assert (await h.misses(STUDENT.address), await h.misses(ELSEWHERE.address)) == (1, 0)

    run(scenario())


LOOKS: list[tuple[str, Callable[[Sessions, str], Awaitable[object]]]] = [
    ("find", lambda s, code: s.find(code, STUDENT)),
    ("teach", lambda s, code: s.teach(code, STUDENT)),
    ("follow", lambda s, code: s.follow(code, STUDENT)),
    ("admit", lambda s, code: s.admit(code, STUDENT)),
]


@pytest.mark.parametrize(("name", "look"), LOOKS, ids=[name for name, _ in LOOKS])
def test_every_lookup_of_a_code_naming_no_session_counts_as_a_wrong_one(
    hub: MakeHub, name: str, look: Callable[[Sessions, str], Awaitable[object]]
) -> None:
    # A script guesses through any route: a page, a stream, the teacher's page, not only the join form.
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=10, clock=clock)
            session, _ = await _started(sessions)
            for _ in range(MISSES_ALLOWED):
                with pytest.raises(NoSuchSession):
                    await look(sessions, _absent(session.code))
            with pytest.raises(TooManyTries):
                await look(sessions, _absent(session.code))
            assert await h.misses(STUDENT.address) == MISSES_ALLOWED

    run(scenario())


def test_a_class_whose_lost_session_counted_wrong_codes_joins_the_teachers_next_one(hub: MakeHub) -> None:
    """A restart lost the session: 300 tabs behind the school's address ask for it once each, then the next one."""

    async def scenario() -> None:
        clock = Clock()
        school = "198.51.100.1"
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=500, clock=clock)
            lost = _absent((await _started(sessions))[0].code)
            for _ in range(300):
                with pytest.raises((NoSuchSession, TooManyTries)):
                    await sessions.admit(lost, Visitor(school))
            assert await h.misses(school) >= MISSES_ALLOWED
            nxt, _ = await sessions.start("stage=zero2", Visitor(school))  # the teacher behind the same address
            admitted = [await sessions.admit(nxt.code, Visitor(school)) for _ in range(300)]
            assert len(admitted) == 300 == await sessions.followers(nxt)

    run(scenario())


def test_an_ended_session_is_refused_as_ended_even_to_its_teacher(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=10, clock=clock)
            session, teacher = await _started(sessions)
            ended = await sessions.end(session)
            assert ended is not None
            assert (ended.ended, ended.version) == (True, 2)
            for visitor in (STUDENT, teacher):
                with pytest.raises(SessionEnded):
                    await sessions.find(session.code, visitor)

    run(scenario())


def test_past_the_wrong_codes_allowed_every_code_is_refused_alike_but_for_sessions_the_address_knows(
    hub: MakeHub,
) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=10, clock=clock)
            session, teacher = await _started(sessions)
            followed, _ = await _started(sessions)
            _, _, token = await sessions.admit(followed.code, STUDENT)  # the guesser's classmate follows this one
            own, _ = await sessions.start("stage=zero3", STUDENT)  # and this one was started from the address
            wrong = _absent(session.code)
            for _ in range(MISSES_ALLOWED):
                with pytest.raises(NoSuchSession):
                    await sessions.join(wrong, STUDENT)
            for code in (wrong, session.code):
                for look in (sessions.join, sessions.find, sessions.follow, sessions.admit):
                    with pytest.raises(TooManyTries):
                        await look(code, STUDENT)
            with pytest.raises(TooManyTries):  # the teacher's secret opens its own session only
                await sessions.find(wrong, teacher)
            assert await sessions.find(session.code, teacher) == session
            assert await sessions.teach(session.code, teacher) == session
            assert await sessions.find(session.code, ELSEWHERE) == session  # another address is not held back
            # The sessions this address already knows stay open to it: a class is never locked out by one guesser.
            assert await sessions.follow(followed.code, STUDENT) == followed
            assert (await sessions.admit(followed.code, Visitor(STUDENT.address, token=token)))[0] == followed
            assert await sessions.join(own.code, STUDENT) == own
            assert await h.misses(STUDENT.address) == MISSES_ALLOWED  # a refusal when held back is not counted

    run(scenario())


def test_starting_sessions_is_limited_per_address(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=10, clock=clock)
            for _ in range(STARTS_ALLOWED):
                await sessions.start("stage=dp", STUDENT)
            with pytest.raises(TooManyStarts):
                await sessions.start("stage=dp", STUDENT)
            assert (await sessions.start("stage=dp", ELSEWHERE))[0].code  # another teacher is not held back

    run(scenario())


@pytest.mark.parametrize("secret", [None, "", "forged"])
def test_only_the_teachers_secret_drives(hub: MakeHub, secret: str | None) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=10, clock=clock)
            session, teacher = await _started(sessions)
            with pytest.raises(NotTheTeacher):
                await sessions.teach(session.code, Visitor(STUDENT.address, secret))
            assert await sessions.teach(session.code, teacher) == session

    run(scenario())


@pytest.mark.parametrize(("room", "present", "refused"), [(1, 0, False), (1, 1, True), (3, 2, False), (3, 3, True)])
def test_the_room_holds_so_many_followers(hub: MakeHub, room: int, present: int, refused: bool) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=room, clock=clock)
            session, _ = await _started(sessions)
            queues = [following(h, session.code) for _ in range(present)]
            for queue in queues:
                await queue.__aenter__()
            try:
                assert await sessions.followers(session) == present
                if refused:
                    with pytest.raises(RoomFull) as raised:
                        await sessions.follow(session.code, STUDENT)
                    assert raised.value.followers == present
                else:
                    assert await sessions.follow(session.code, STUDENT) == session
                assert await sessions.find(session.code, STUDENT) == session  # finding it is not following it
            finally:
                for queue in queues:
                    await queue.__aexit__(None, None, None)

    run(scenario())


async def _burst(sessions: Sessions, code: str, visitors: list[Visitor]) -> list[object]:
    """Every visitor admitted at the same moment: each one's queue, or its refusal."""
    return await asyncio.gather(*(sessions.admit(code, v) for v in visitors), return_exceptions=True)


def test_a_burst_of_followers_fills_the_room_and_not_one_more(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=30, clock=clock)
            session, _ = await _started(sessions)
            outcomes = await _burst(sessions, session.code, [Visitor(f"10.1.0.{i}") for i in range(45)])
            admitted = [o for o in outcomes if isinstance(o, tuple)]
            refused = [o for o in outcomes if isinstance(o, RoomFull)]
            assert (len(admitted), len(refused)) == (30, 15)
            assert {r.followers for r in refused} == {30}
            assert await sessions.followers(session) == 30
            for _, queue, _ in admitted:
                await sessions.leave(session.code, queue)
                await sessions.leave(session.code, queue)  # twice: counted out once
            assert await sessions.followers(session) == 0

    run(scenario())


@pytest.mark.parametrize(("room", "share"), [(1, 1), (2, 1), (5, 4), (10, 8), (500, 400), (501, 400)])
def test_one_address_takes_at_most_four_fifths_of_the_room(room: int, share: int) -> None:
    assert Room(room).per_address == share


def test_a_burst_from_one_address_takes_its_share_and_leaves_the_rest_to_the_others(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=10, clock=clock)
            session, _ = await _started(sessions)
            outcomes = await _burst(sessions, session.code, [STUDENT] * 12)
            assert [type(o).__name__ for o in outcomes].count("tuple") == 8
            assert all(isinstance(o, tuple | ShareTaken) for o in outcomes)
            assert {o.allowed for o in outcomes if isinstance(o, ShareTaken)} == {8}
            with pytest.raises(ShareTaken):  # the page says so too, before its stream is refused
                await sessions.follow(session.code, STUDENT)
            assert await sessions.follow(session.code, ELSEWHERE) == session
            others = await _burst(sessions, session.code, [ELSEWHERE] * 3)
            # Which of them comes last is the hubs' order, not the list's.
            assert sorted(type(o).__name__ for o in others) == ["RoomFull", "tuple", "tuple"]

    run(scenario())


def test_the_teachers_actions_change_the_session_kept(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            sessions = Sessions(h, on=True, room=10, clock=clock)
            session, _ = await _started(sessions, "stage=zero1")
            clock.now += 60
            shown = await sessions.show(session, "stage=zero2")
            paused = await sessions.pause(session, True)
            moved = await sessions.show(session, "stage=zero3")
            assert shown == session.show("stage=zero2", clock.now)
            assert paused is not None
            assert (paused.version, paused.paused, paused.shown) == (3, True, "stage=zero2")
            assert moved is not None
            assert (moved.view, moved.shown, moved.touched) == ("stage=zero3", "stage=zero2", clock.now)
            assert await h.get(session.code) == moved

    run(scenario())


ASKS: list[tuple[str, Callable[[Sessions, Session], Awaitable[object]]]] = [
    ("find", lambda s, session: s.find(session.code, STUDENT)),
    ("teach", lambda s, session: s.teach(session.code, STUDENT)),
    ("join", lambda s, session: s.join(session.code, STUDENT)),
    ("follow", lambda s, session: s.follow(session.code, STUDENT)),
    ("admit", lambda s, session: s.admit(session.code, STUDENT)),
    ("leave", lambda s, session: s.leave(session.code, asyncio.Queue())),
    ("followers", lambda s, session: s.followers(session)),
    ("start", lambda s, session: s.start("stage=dp", STUDENT)),
    ("show", lambda s, session: s.show(session, "stage=dp")),
    ("pause", lambda s, session: s.pause(session, True)),
    ("end", lambda s, session: s.end(session)),
]


@pytest.mark.parametrize(("name", "ask"), ASKS, ids=[name for name, _ in ASKS])
def test_with_live_sessions_off_every_ask_is_refused_and_the_hub_untouched(
    name: str, ask: Callable[[Sessions, Session], Awaitable[object]]
) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(MemoryHub, clock) as h:
            session, _ = await _started(Sessions(h, on=True, room=10, clock=clock))
            off = Sessions(h, on=False, room=10, clock=clock)
            with pytest.raises(LiveOff):
                off.check_on()
            with pytest.raises(LiveOff):
                await ask(off, session)
            with pytest.raises(LiveOff):
                off.updates(session.code, asyncio.Queue(), None)
            assert await h.get(session.code) == session
            assert await h.misses(STUDENT.address) == 0

    run(scenario())


def test_one_address_guessing_at_the_fastest_rate_allowed_takes_more_than_a_year_to_find_one_of_a_thousand() -> None:
    # docs/security.md works this out from the same constants; here, by hand: 20^8 codes, 1,000 open, 100 per 600 s.
    assert (len(ALPHABET), CODE_LENGTH, MISSES_ALLOWED, MISS_WINDOW_SECONDS) == (20, 8, 100, 600)
    guesses_per_find = 20**8 // 1000  # 25,600,000
    seconds = guesses_per_find / (100 / 600)  # 153,600,000 s
    assert seconds / (365.25 * 86400) == pytest.approx(4.867, abs=0.001)
    assert seconds > 365.25 * 86400


def test_the_security_docs_figures_are_the_codes() -> None:
    # docs/security.md states the allowance, the share and the stream's lifetime as cog writes them.
    root = Path(__file__).resolve().parents[2]
    checked = subprocess.run([sys.executable, "-m", "cogapp", "-I", ".", "--check", "docs/security.md"], cwd=root,
                             capture_output=True, text=True, check=False)  # fmt: skip
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"| {MISSES_ALLOWED} in 10 minutes |" in (root / "docs/security.md").read_text()
    assert "finding one takes 4.9 years on average" in (root / "docs/security.md").read_text()
