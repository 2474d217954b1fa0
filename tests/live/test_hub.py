"""app/live/hub.py: the hubs' contract, the same over MemoryHub and RedisHub, and what a follower's stream sends."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import replace
from typing import cast

import pytest

from app.live import hub as hub_module
from app.live.hub import GONE, QUEUE_SIZE, Fanout, Full, MemoryHub, Unavailable
from app.live.session import LIFETIME_SECONDS, Session, start
from tests.live.conftest import (
    Clock,
    Follower,
    Item,
    MakeHub,
    counted,
    ends,
    eventually,
    following,
    opened,
    run,
    shows,
    started,
    taken,
    updates,
)

VIEWS = ("stage=zero1", "stage=zero2", "stage=zero3&phase=4", "stage=dp")


def test_a_session_added_is_got_back(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            assert await h.get(session.code) == session
            assert await h.get("ACDEFH" if session.code != "ACDEFH" else "HFEDCA") is None

    run(scenario())


def test_a_code_taken_is_refused_and_the_first_session_kept(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            other, _ = start("stage=dp", clock())
            assert await h.add(replace(other, code=session.code)) is False
            assert await h.get(session.code) == session

    run(scenario())


def test_update_returns_the_changed_session_and_keeps_it(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            clock.now += 30
            changed = await h.update(session.code, shows("stage=zero3&phase=4", clock))
            assert changed == session.show("stage=zero3&phase=4", clock.now)
            assert changed is not None
            assert changed.version == 2
            assert await h.get(session.code) == changed

    run(scenario())


def test_update_of_an_unknown_code_is_none(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            assert await h.update("ACDEFH", shows("stage=dp", clock)) is None
            assert await h.get("ACDEFH") is None

    run(scenario())


@pytest.mark.parametrize(("since", "kept"), [(LIFETIME_SECONDS, True), (LIFETIME_SECONDS + 1, False)])
def test_four_hours_after_the_last_action_the_session_is_no_longer_kept(hub: MakeHub, since: int, kept: bool) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            clock.now += since
            assert (await h.get(session.code) == session) is kept
            changed = await h.update(session.code, shows("stage=dp", clock))
            assert (changed is not None) is kept

    run(scenario())


def test_a_follower_gets_the_current_version_then_each_new_one_once_and_in_order(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            await h.update(session.code, shows(VIEWS[1], clock))
            follower = Follower(h, session.code)
            assert await follower.version() == 2
            for n in range(20):
                await h.update(session.code, shows(VIEWS[n % len(VIEWS)], clock))
                await asyncio.sleep(0)
            assert await follower.until(22) == list(range(3, 23))
            await h.update(session.code, ends(clock))
            last = await follower.next()
            assert isinstance(last, Session)
            assert (last.version, last.ended) == (23, True)
            assert await follower.ended() == []

    run(scenario())


def test_a_follower_sees_what_each_version_shows(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock, VIEWS[0])
            follower = Follower(h, session.code)
            first = await follower.next()
            assert first == session
            for view in VIEWS[1:]:
                clock.now += 1
                changed = await h.update(session.code, shows(view, clock))
                assert await follower.next() == changed
            await follower.close()

    run(scenario())


def test_a_last_event_id_of_the_current_version_skips_it(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            await h.update(session.code, shows(VIEWS[1], clock))
            await h.update(session.code, shows(VIEWS[2], clock))
            follower = Follower(h, session.code, last_seen=3)
            await eventually(lambda: counted(h, session.code, 1))
            await h.update(session.code, shows(VIEWS[3], clock))
            assert await follower.version() == 4
            await follower.close()

    run(scenario())


@pytest.mark.parametrize(("last_seen", "first"), [(None, 3), (0, 3), (1, 3), (2, 3), (3, 4), (9, 10)])
def test_the_first_version_sent_is_the_first_past_last_event_id(
    hub: MakeHub, last_seen: int | None, first: int
) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            for n in range(2):
                await h.update(session.code, shows(VIEWS[n], clock))
            follower = Follower(h, session.code, last_seen)
            await eventually(lambda: counted(h, session.code, 1))
            for n in range(8):
                await h.update(session.code, shows(VIEWS[n % len(VIEWS)], clock))
            assert (await follower.until(10))[0] == first
            await follower.close()

    run(scenario())


def test_the_stream_ends_after_the_session_ends(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            follower = Follower(h, session.code)
            assert await follower.version() == 1
            await h.update(session.code, ends(clock))
            assert await follower.ended() == [session.end(clock.now)]
            late = Follower(h, session.code)
            assert await late.ended() == [session.end(clock.now)]
            caught_up = Follower(h, session.code, last_seen=2)
            assert await caught_up.ended() == []
            assert await h.followers(session.code) == 0

    run(scenario())


def test_a_stream_ends_by_itself_after_its_lifetime_and_is_counted_out(hub: MakeHub) -> None:
    # Well before the quiet stream's own check (CHECK_SECONDS): a reader that stopped reading is let go.
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            follower = Follower(h, session.code, lifetime=0.5)
            assert await follower.version() == 1
            await h.update(session.code, shows("stage=dp", clock))
            began = asyncio.get_running_loop().time()
            assert await follower.ended() == [session.show("stage=dp", clock.now)]
            assert asyncio.get_running_loop().time() - began < hub_module.CHECK_SECONDS
            await eventually(lambda: counted(h, session.code, 0))
            again = Follower(h, session.code, last_seen=2)  # as the browser reconnects: nothing missed, nothing twice
            await h.update(session.code, shows("stage=zero1", clock))
            assert await again.version() == 3
            await again.close()

    run(scenario())


def test_a_stream_for_a_code_not_kept_says_gone_and_ends(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            follower = Follower(h, "ACDEFH")
            assert await follower.ended() == [GONE]

    run(scenario())


@pytest.mark.usefixtures("quick")
def test_a_session_that_expires_under_a_follower_is_gone(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            follower = Follower(h, session.code)
            assert await follower.version() == 1
            clock.now += LIFETIME_SECONDS + 1
            assert await follower.ended() == [GONE]

    run(scenario())


def test_a_quiet_session_keeps_its_followers_past_the_check(hub: MakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_module, "CHECK_SECONDS", 0.02)

    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            follower = Follower(h, session.code)
            assert await follower.version() == 1
            clock.now += LIFETIME_SECONDS
            await asyncio.sleep(0.2)  # ten checks, each finding the session as it was
            assert follower.items.empty()
            assert not follower.task.done()
            await h.update(session.code, shows(VIEWS[2], clock))
            assert await follower.version() == 2
            await follower.close()

    run(scenario())


def test_followers_counts_the_open_streams_and_drops_as_they_close(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            other, _ = await started(h, clock)
            followers = [Follower(h, session.code) for _ in range(3)]
            elsewhere = Follower(h, other.code)
            for follower in [*followers, elsewhere]:
                await follower.version()
            assert await h.followers(session.code) == 3
            assert await h.followers(other.code) == 1
            await followers.pop().close()
            assert await h.followers(session.code) == 2
            for follower in [*followers, elsewhere]:
                await follower.close()
            assert await h.followers(session.code) == 0
            assert await h.followers(other.code) == 0
            assert await h.followers("ACDEFH") == 0

    run(scenario())


def test_a_follower_counts_from_before_its_first_read(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            async with following(h, session.code) as queue:
                assert await h.followers(session.code) == 1
                changed = await h.update(session.code, shows(VIEWS[2], clock))
                got = await taken(queue)
                if got == session:  # the listener's catch-up as it subscribed: the version read already
                    got = await taken(queue)
                assert got == changed
            assert await h.followers(session.code) == 0

    run(scenario())


def test_missed_counts_each_clients_wrong_codes(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            assert [await h.missed("192.0.2.1") for _ in range(5)] == [1, 2, 3, 4, 5]
            assert await h.missed("192.0.2.2") == 1
            assert await h.missed("2001:db8::1") == 1
            assert await h.missed("192.0.2.1") == 6

    run(scenario())


def test_memory_misses_are_forgotten_past_the_window() -> None:
    async def scenario() -> None:
        clock = Clock()
        h = MemoryHub(clock)
        for _ in range(3):
            await h.missed("192.0.2.1")
            clock.now += 200
        assert await h.missed("192.0.2.1") == 4
        clock.now += hub_module.MISS_WINDOW_SECONDS - 1
        assert await h.missed("192.0.2.1") == 2
        clock.now += hub_module.MISS_WINDOW_SECONDS + 1
        assert await h.missed("192.0.2.1") == 1

    run(scenario())


def _version(n: int) -> Session:
    session, _ = start("stage=zero1", 0.0)
    return replace(session, code="ACDEFH", version=n)


def test_a_slow_follower_skips_to_the_newest_versions_and_never_back() -> None:
    async def scenario() -> None:
        fanout = Fanout()
        slow = fanout.add("ACDEFH")
        other = fanout.add("HFEDCA")
        for n in range(1, QUEUE_SIZE + 5):
            fanout.deliver("ACDEFH", _version(n))
        versions = []
        while not slow.empty():
            got = slow.get_nowait()
            assert got is not None
            versions.append(got.version)
        assert versions == list(range(QUEUE_SIZE + 1, QUEUE_SIZE + 5))
        assert other.empty()
        fanout.deliver("ACDEFH", GONE)
        assert slow.get_nowait() is GONE
        fanout.remove("ACDEFH", slow)
        fanout.remove("HFEDCA", other)
        assert fanout.queues == {}
        fanout.deliver("ACDEFH", _version(99))

    run(scenario())


def test_a_stream_behind_a_burst_sends_only_newer_versions_and_the_last() -> None:
    async def scenario() -> None:
        clock = Clock()
        h = MemoryHub(clock)
        session, _ = await started(h, clock)
        follower = Follower(h, session.code)
        assert await follower.version() == 1
        for n in range(3 * QUEUE_SIZE):
            await h.update(session.code, shows(VIEWS[n % len(VIEWS)], clock))
        seen = await follower.until(1 + 3 * QUEUE_SIZE)
        assert seen == sorted(set(seen))
        await follower.close()

    run(scenario())


def test_a_stream_closed_by_its_reader_is_no_longercounted(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session, _ = await started(h, clock)
            stream = cast(AsyncGenerator[Item, None], updates(h, session.code, None))
            assert await anext(stream) == session
            assert await h.followers(session.code) == 1
            await stream.aclose()
            assert await h.followers(session.code) == 0

    run(scenario())


class Flaky(MemoryHub):
    """A hub that cannot be reached while `away`."""

    away = False

    async def get(self, code: str) -> Session | None:
        if self.away:
            raise Unavailable("away")
        return await super().get(code)


@pytest.mark.usefixtures("quick")
def test_a_stream_that_lost_touch_sends_the_session_again_once_the_hub_answers() -> None:
    async def scenario() -> None:
        clock = Clock()
        h = Flaky(clock)
        session, _ = await started(h, clock)
        follower = Follower(h, session.code)
        assert await follower.next() == session
        h.away = True
        assert isinstance(await follower.next(), Unavailable)
        h.away = False
        while isinstance(item := await follower.next(), Unavailable):
            pass
        assert item == session  # the follower's screen said it lost touch: it hears the version again
        changed = await h.update(session.code, shows(VIEWS[1], clock))
        assert await follower.next() == changed
        await follower.close()

    run(scenario())


def test_memory_keeps_so_many_sessions_and_refuses_the_next_until_one_expires(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub_module, "SESSIONS_KEPT", 3)

    async def scenario() -> None:
        clock = Clock()
        h = MemoryHub(clock)
        kept = [start(f"stage=zero{i}", clock())[0] for i in range(1, 4)]
        assert [await h.add(session) for session in kept] == [True, True, True]
        with pytest.raises(Full):
            await h.add(start("stage=dp", clock())[0])
        clock.now += LIFETIME_SECONDS + 1  # the three expire: forgotten as the next is added
        assert await h.add(start("stage=dp", clock())[0])

    run(scenario())
