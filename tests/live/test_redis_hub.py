"""app/live/redis_hub.py: two RedisHubs on one Redis stand for two workers; Redis dropped, away, restarted empty."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import pytest

from app.live import redis_hub
from app.live.hub import GONE, Full, Room, Unavailable
from app.live.redis_hub import PREFIX, STALE_SECONDS, RedisHub
from app.live.session import Session
from tests.live.conftest import (
    WAIT_SECONDS,
    Clock,
    Follower,
    counted,
    ends,
    eventually,
    following,
    run,
    shows,
    started,
    stopped,
    taken,
)
from tests.live.redis_server import RedisServer

VIEWS = ("stage=zero1", "stage=zero2", "stage=zero3&phase=4", "stage=dp")


@asynccontextmanager
async def workers(server: RedisServer, clock: Clock) -> AsyncIterator[tuple[RedisHub, RedisHub]]:
    """Two hubs on one Redis, as two workers' own."""
    a, b = RedisHub(server.url, clock), RedisHub(server.url, clock)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def _until(check: Callable[[], bool]) -> None:
    async def holds() -> bool:
        return check()

    await eventually(holds)


def test_a_follower_on_one_worker_gets_in_order_each_version_another_writes(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            follower = Follower(b, session.code)
            assert await follower.version() == 1
            for n in range(20):
                clock.now += 1
                await a.update(session.code, shows(VIEWS[n % len(VIEWS)], clock))
            assert await follower.until(21) == list(range(2, 22))
            last = await a.update(session.code, ends(clock))
            assert await follower.ended() == [last]
            assert await b.get(session.code) == last

    run(scenario())


def test_updates_from_both_workers_at_once_make_consecutive_versions_and_followers_never_go_back(
    redis_server: RedisServer,
) -> None:
    writes = 60

    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            followers = [Follower(h, session.code) for h in (a, a, b, b)]
            for follower in followers:
                assert await follower.version() == 1
            changes = [h.update(session.code, shows(VIEWS[n % len(VIEWS)], clock)) for n, h in enumerate([a, b] * 30)]
            changed = await asyncio.gather(*changes)
            versions = sorted(s.version for s in changed if s is not None)
            assert versions == list(range(2, writes + 2))
            final = await b.get(session.code)
            assert final is not None
            assert final.version == writes + 1
            for follower in followers:
                seen = await follower.until(writes + 1)
                assert seen == sorted(set(seen))
                await follower.close()

    run(scenario())


@pytest.mark.usefixtures("quick")
def test_followers_are_counted_over_both_workers_and_a_worker_that_stopped_drops_out(
    redis_server: RedisServer,
) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            on_a = [Follower(a, session.code) for _ in range(2)]
            on_b = [Follower(b, session.code) for _ in range(3)]
            for follower in [*on_a, *on_b]:
                assert await follower.version() == 1
            assert await a.followers(session.code) == 5
            assert await b.followers(session.code) == 5
            clock.now += STALE_SECONDS + 1
            await eventually(lambda: counted(a, session.code, 5))  # both heartbeats, at the new time
            for task in a.tasks:  # worker A killed: its count stays in Redis, never written again
                await stopped(task)
            assert await b.followers(session.code) == 5
            clock.now += STALE_SECONDS + 1
            await eventually(lambda: counted(b, session.code, 3))
            await on_b.pop().close()
            assert await b.followers(session.code) == 2
            for follower in [*on_a, *on_b]:
                await follower.close()
            assert await b.followers(session.code) == 0

    run(scenario())


def test_a_dropped_listener_catches_up_on_what_was_written_meanwhile(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_hub, "RECONNECT_SECONDS", (0.05,))

    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            follower = Follower(b, session.code)
            assert await follower.version() == 1
            unheard = session.show(VIEWS[2], clock())
            with redis_server.client() as raw:
                raw.set(PREFIX + session.code, unheard.to_json())  # written, never published
                assert raw.execute_command("CLIENT", "KILL", "TYPE", "pubsub") == 1
            assert await follower.next() == unheard
            changed = await a.update(session.code, shows(VIEWS[3], clock))
            assert await follower.next() == changed
            await follower.close()

    run(scenario())


def test_a_dropped_listener_says_gone_for_a_session_redis_no_longer_has(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_hub, "RECONNECT_SECONDS", (0.05,))

    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            kept, _ = await started(a, clock)
            lost, still = Follower(b, session.code), Follower(b, kept.code)
            assert await lost.version() == 1
            assert await still.version() == 1
            with redis_server.client() as raw:
                raw.delete(PREFIX + session.code)
                assert raw.execute_command("CLIENT", "KILL", "TYPE", "pubsub") == 1
            assert await lost.ended() == [GONE]
            changed = await a.update(kept.code, shows(VIEWS[1], clock))
            assert await still.next() == changed
            await still.close()

    run(scenario())


@pytest.mark.usefixtures("quick")
def test_an_open_stream_while_redis_restarts_empty_says_away_then_gone_and_ends(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            followers = [Follower(a, session.code), Follower(b, session.code)]
            for follower in followers:
                assert await follower.version() == 1
            await asyncio.to_thread(redis_server.stop)
            for follower in followers:
                assert isinstance(await follower.next(), Unavailable)  # nothing else can be known
            await asyncio.to_thread(redis_server.start)
            for follower in followers:
                left = await follower.ended()
                assert left[-1] is GONE
                assert all(isinstance(item, Unavailable) for item in left[:-1])
            assert await a.get(session.code) is None
            assert await a.followers(session.code) == 0

    run(scenario())


@pytest.mark.usefixtures("quick")
def test_after_a_restart_the_listener_hears_again_and_catches_up_on_a_session_added_back(
    redis_server: RedisServer,
) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            async with following(b, session.code) as queue:
                await asyncio.to_thread(redis_server.stop)
                await _until(lambda: not b.listening.is_set())
                await asyncio.to_thread(redis_server.start)
                back = replace(session, version=5)
                assert await a.add(back)
                await _until(b.listening.is_set)
                changed = await a.update(session.code, shows(VIEWS[2], clock))
                assert changed is not None
                heard: list[Session | None] = []
                while not heard or heard[-1] != changed:
                    heard.append(await taken(queue))
                assert heard[-1] == changed
                assert all(item in (session, GONE, back) for item in heard[:-1])
            follower = Follower(b, session.code)
            assert await follower.next() == changed
            last = await a.update(session.code, ends(clock))
            assert await follower.ended() == [last]

    run(scenario())


def test_a_follower_admitted_while_redis_is_away_is_refused_and_not_left_counted(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_hub, "RECONNECT_SECONDS", (0.05,))
    monkeypatch.setattr(redis_hub, "BREAKER_SECONDS", 0.05)

    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            await asyncio.to_thread(redis_server.stop)
            with pytest.raises(Unavailable):
                await b.admit(session.code, "10.0.0.2", Room(10))
            assert b.fanout.count(session.code) == 0
            await asyncio.to_thread(redis_server.start)
            await asyncio.sleep(0.1)  # past the breaker's pause
            assert await b.followers(session.code) == 0

    run(scenario())


def test_a_burst_over_two_workers_fills_the_room_and_not_one_more(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            hubs = [a, b] * 20
            outcomes = await asyncio.gather(
                *(h.admit(session.code, f"10.1.0.{i}", Room(25)) for i, h in enumerate(hubs)), return_exceptions=True
            )
            assert sum(isinstance(o, asyncio.Queue) for o in outcomes) == 25
            assert all(isinstance(o, asyncio.Queue | Full) for o in outcomes)
            assert a.fanout.count(session.code) + b.fanout.count(session.code) == 25
            assert await a.followers(session.code) == 25

    run(scenario())


def test_one_address_over_two_workers_takes_its_share(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            outcomes = await asyncio.gather(
                *(h.admit(session.code, "10.0.0.2", Room(10)) for h in [a, b] * 6), return_exceptions=True
            )
            refused = [o for o in outcomes if isinstance(o, Full)]
            assert (len(outcomes) - len(refused), {r.address for r in refused}) == (8, {True})
            assert isinstance(await b.admit(session.code, "10.0.0.3", Room(10)), asyncio.Queue)

    run(scenario())


def test_a_hung_redis_costs_one_short_wait_then_is_refused_at_once_until_the_breaker_tries_again(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(redis_hub, "BREAKER_SECONDS", 1.0)

    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, _):
            session, _ = await started(a, clock)
            assert redis_server.process is not None
            os.kill(redis_server.process.pid, signal.SIGSTOP)
            try:
                began = time.monotonic()
                with pytest.raises(Unavailable):
                    await a.get(session.code)
                # One call's deadline, and no second try (5 s and a retry before).
                assert time.monotonic() - began < 2 * redis_hub.CALL_SECONDS
                began = time.monotonic()
                for call in (a.get(session.code), a.followers(session.code), a.misses("10.0.0.2")):
                    with pytest.raises(Unavailable):
                        await call
                assert time.monotonic() - began < 0.1  # the breaker: refused without asking
            finally:
                os.kill(redis_server.process.pid, signal.SIGCONT)

            async def answers() -> bool:
                with contextlib.suppress(Unavailable):
                    return await a.get(session.code) == session
                return False

            await eventually(answers)

    run(scenario())


@pytest.mark.parametrize(
    "call",
    [
        lambda h: h.add(Session("ACDEFH", "", "stage=dp", "stage=dp", 0.0)),
        lambda h: h.get("ACDEFH"),
        lambda h: h.update("ACDEFH", lambda s: s),
        lambda h: h.followers("ACDEFH"),
        lambda h: h.missed("192.0.2.1"),
    ],
    ids=["add", "get", "update", "followers", "missed"],
)
def test_each_call_while_redis_is_away_raises_unavailable(
    redis_server: RedisServer, call: Callable[[RedisHub], Awaitable[object]]
) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, _):
            assert await a.get("ACDEFH") is None
            await asyncio.to_thread(redis_server.stop)
            with pytest.raises(Unavailable):
                await call(a)

    run(scenario())


def test_followers_past_the_stale_time_are_notcounted(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, _):
            with redis_server.client() as raw:
                raw.hset(f"{PREFIX}ACDEFH:followers", mapping={
                    "fresh": f"4 {clock.now - STALE_SECONDS + 1}", "stale": f"7 {clock.now - STALE_SECONDS}",
                    "future": f"2 {clock.now + 1}",
                })  # fmt: skip
            assert await a.followers("ACDEFH") == 6

    run(scenario())


def test_a_call_after_redis_dropped_the_connections_makes_a_new_one(redis_server: RedisServer) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, _):
            session, _ = await started(a, clock)
            with redis_server.client() as raw:
                assert raw.client_kill_filter(_type="normal") >= 1
            assert await a.update(session.code, shows(VIEWS[1], clock)) is not None
            await asyncio.to_thread(redis_server.restart)
            assert await a.add(session)
            assert await a.get(session.code) == session

    run(scenario())


def test_close_ends_the_listener_and_heartbeat_whatever_they_are_doing(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # redis-py's calls on Python 3.11 may swallow a cancellation (its wait_for), so a heartbeat caught
    # inside one went on beating, and close() waited for it for ever: most of ten tries did.
    monkeypatch.setattr(redis_hub, "HEARTBEAT_SECONDS", 0)

    async def scenario() -> None:
        clock = Clock()
        for _ in range(10):
            h = RedisHub(redis_server.url, clock)
            session, _ = await started(h, clock)
            async with following(h, session.code):
                h.fanout.add(session.code)  # a follower still counted by the heartbeat as the worker stops
            async with asyncio.timeout(WAIT_SECONDS):
                await h.close()
            assert all(task.done() for task in h.tasks)

    run(scenario())


@pytest.mark.parametrize("message", [b"not json", b"[1, 2]", b'{"code": "ACDEFH"}', b'{"code": "ACDEFH", "new": 1}'])
def test_a_message_the_listener_cannot_read_is_passed_over(redis_server: RedisServer, message: bytes) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, b):
            session, _ = await started(a, clock)
            follower = Follower(b, session.code)
            assert await follower.version() == 1
            with redis_server.client() as raw:
                assert raw.publish(redis_hub.CHANNEL, message) == 1
            changed = await a.update(session.code, shows(VIEWS[1], clock))
            assert await follower.next() == changed
            await follower.close()

    run(scenario())


def test_a_heartbeat_under_way_as_the_last_follower_leaves_does_not_count_it_again(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, _):
            session, _ = await started(a, clock)
            written, release = asyncio.Event(), asyncio.Event()
            hset = a.redis.hset

            async def held(*args: Any, **kwargs: Any) -> Any:
                written.set()
                await release.wait()
                return await hset(*args, **kwargs)

            queue = await a.admit(session.code, "10.0.0.2")
            assert await a.followers(session.code) == 1
            monkeypatch.setattr(a.redis, "hset", held)
            beat = asyncio.create_task(a._beat())  # the heartbeat, as it read one follower
            await written.wait()
            monkeypatch.setattr(a.redis, "hset", hset)
            leaving = asyncio.create_task(a.leave(session.code, queue))
            await _until(lambda: a.fanout.count(session.code) == 0)
            release.set()
            await beat
            await leaving
            assert await a.followers(session.code) == 0

    run(scenario())


@pytest.mark.parametrize(("tripped", "since", "refused"), [(False, 0.0, False), (True, 0.0, True),
                                                           (True, 2.9, True), (True, 3.0, False)])  # fmt: skip
def test_the_breaker_refuses_for_its_pause_after_a_failure_then_lets_a_call_try(
    tripped: bool, since: float, refused: bool
) -> None:
    clock = Clock(100.0)
    breaker = redis_hub.Breaker(3.0, clock)
    if tripped:
        breaker.trip()
    clock.now += since
    assert breaker.open == refused
    if refused:
        with pytest.raises(Unavailable):
            breaker.check()
    else:
        breaker.check()


def test_a_heartbeat_after_redis_restarted_empty_writes_no_counts_or_seats_back(redis_server: RedisServer) -> None:
    """Counts and seats of a session Redis lost are not written back by the worker still holding its streams."""

    async def scenario() -> None:
        clock = Clock()
        async with workers(redis_server, clock) as (a, _):
            session, _ = await started(a, clock)
            queue = await a.admit(session.code, "10.0.0.2", Room(10), "token")
            assert await a.redis.keys(f"{PREFIX}{session.code}:*")  # counted, with its seat
            await a.redis.flushall()  # as a restart without persistence, before the listener notices
            await a._beat()  # the heartbeat's round, at once rather than in five seconds
            assert await a.redis.keys(f"{PREFIX}*") == []
            await a.leave(session.code, queue)
            assert await a.redis.keys(f"{PREFIX}*") == []

    run(scenario())
