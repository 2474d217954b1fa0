"""The live tests' fixtures: a Redis of their own, hubs over memory and over Redis, a fake clock, and followers.

Coroutines run under `run`, in a thread with a loop of its own: in a full run the browser tests'
Playwright keeps an event loop running in the main thread. Every wait has a timeout, so a lost version
fails a test rather than hanging it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest

from app.live import hub as hub_module
from app.live import redis_hub
from app.live.hub import Hub, MemoryHub, Queue, Room, SessionEdit, Unavailable, versions
from app.live.redis_hub import RedisHub
from app.live.session import Session, start
from tests.live.redis_server import RedisServer, running_redis

T = TypeVar("T")
NOW = 1_800_000_000.0
WAIT_SECONDS = 10.0
"""The longest any one thing is awaited: far past what it takes, short of a hang."""
SCENARIO_SECONDS = 60.0

Item = Session | Unavailable | None


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: float = NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


MakeHub = Callable[[Clock], Hub]


def run(scenario: Coroutine[Any, Any, T], seconds: float = SCENARIO_SECONDS) -> T:
    """Run a test's coroutine to its end, in a loop of its own, for at most `seconds`."""

    async def bounded() -> T:
        started = time.monotonic()
        async with asyncio.timeout(seconds):
            result = await scenario
        # A cancellation swallowed inside (as 3.11's wait_for can) would let a hung scenario end quietly.
        assert time.monotonic() - started < seconds, f"the scenario took more than {seconds} s"
        return result

    # A daemon thread, not a pool: a loop that a swallowed cancellation keeps busy fails the test
    # after the time it had, rather than holding the run at the pool's exit.
    outcome: list[T] = []
    errors: list[BaseException] = []

    def target() -> None:
        try:
            outcome.append(asyncio.run(bounded()))
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=target, name="live-scenario", daemon=True)
    thread.start()
    thread.join(seconds + 10)
    if errors:
        raise errors[0]
    assert outcome, f"the scenario did not end within {seconds + 10} s, even cancelled"
    return outcome[0]


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of this test's own, on a free port, empty, stopped after the test."""
    with running_redis(tmp_path) as server:
        yield server


@pytest.fixture
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """The hubs' waits cut short: a quiet stream asks again, the listener reconnects, the counts beat, at once."""
    monkeypatch.setattr(hub_module, "CHECK_SECONDS", 0.1)
    monkeypatch.setattr(hub_module, "RETRY_SECONDS", 0.05)
    monkeypatch.setattr(redis_hub, "RECONNECT_SECONDS", (0.05, 0.1))
    monkeypatch.setattr(redis_hub, "HEARTBEAT_SECONDS", 0.05)


@pytest.fixture(params=["memory", "redis"])
def hub(request: pytest.FixtureRequest) -> MakeHub:
    """How to make the hub under test from a clock: in memory, or in a Redis of this test's own."""
    if request.param == "memory":
        return MemoryHub
    server: RedisServer = request.getfixturevalue("redis_server")
    return lambda clock: RedisHub(server.url, clock)


@asynccontextmanager
async def opened(make: MakeHub, clock: Clock) -> AsyncIterator[Hub]:
    """A hub for the block, closed at its end."""
    hub = make(clock)
    try:
        yield hub
    finally:
        await hub.close()


async def started(hub: Hub, clock: Clock, view: str = "stage=zero1") -> tuple[Session, str]:
    """A new session kept in `hub`, and its teacher's secret."""
    session, secret = start(view, clock())
    assert await hub.add(session)
    return session, secret


def shows(view: str, clock: Clock) -> SessionEdit:
    """The teacher moving to `view`."""
    return lambda session: session.show(view, clock())


def ends(clock: Clock) -> SessionEdit:
    """The teacher ending the session."""
    return lambda session: session.end(clock())


async def eventually(check: Callable[[], Awaitable[bool]], seconds: float = WAIT_SECONDS) -> None:
    """Wait until `check` holds (a count that another task or worker writes), for at most `seconds`."""
    deadline = time.monotonic() + seconds
    while not await check():
        assert time.monotonic() < deadline, f"not so within {seconds} s"
        await asyncio.sleep(0.01)


async def counted(hub: Hub, code: str, n: int) -> bool:
    """Whether the hub counts `n` followers of `code` (over every worker)."""
    return await hub.followers(code) == n


async def taken(queue: asyncio.Queue[Session | None]) -> Session | None:
    """The next version in a follower's queue; fails past WAIT_SECONDS."""
    async with asyncio.timeout(WAIT_SECONDS):
        return await queue.get()


@asynccontextmanager
async def following(hub: Hub, code: str, client: str = "", room: Room | None = None) -> AsyncIterator[Queue]:
    """A follower's queue, admitted and counted for the block, as the event stream's route has it."""
    queue = await hub.admit(code, client, room)
    try:
        yield queue
    finally:
        await hub.leave(code, queue)


async def updates(
    hub: Hub, code: str, last_seen: int | None, lifetime: float | None = None
) -> AsyncIterator[Session | Unavailable | None]:
    """A follower's stream as the route reads it: admitted, its versions (hub.py `versions`), then let go."""
    async with following(hub, code) as queue:
        async for item in versions(hub, code, queue, last_seen, lifetime):
            yield item


class Follower:
    """One follower's stream (`updates`), read in a task of its own: what it yields, in order."""

    def __init__(self, hub: Hub, code: str, last_seen: int | None = None, lifetime: float | None = None) -> None:
        self.items: asyncio.Queue[Item] = asyncio.Queue()
        self.task = asyncio.create_task(self._read(hub, code, last_seen, lifetime))

    async def _read(self, hub: Hub, code: str, last_seen: int | None, lifetime: float | None) -> None:
        stream = cast(AsyncGenerator[Item, None], updates(hub, code, last_seen, lifetime))
        async with contextlib.aclosing(stream):
            async for item in stream:
                self.items.put_nowait(item)

    async def next(self, seconds: float = WAIT_SECONDS) -> Item:
        """The stream's next item; fails past `seconds`."""
        async with asyncio.timeout(seconds):
            return await self.items.get()

    async def version(self, seconds: float = WAIT_SECONDS) -> int:
        """The next item, which must be a version of the session: its number."""
        item = await self.next(seconds)
        assert isinstance(item, Session), item
        return item.version

    async def until(self, version: int, seconds: float = WAIT_SECONDS) -> list[int]:
        """The versions yielded up to `version`, which must come; any other item fails."""
        seen = [await self.version(seconds)]
        while seen[-1] < version:
            seen.append(await self.version(seconds))
        return seen

    async def ended(self, seconds: float = WAIT_SECONDS) -> list[Item]:
        """Wait for the stream to end by itself; what it yielded that was not read yet."""
        async with asyncio.timeout(seconds):
            await asyncio.shield(self.task)
        left = []
        while not self.items.empty():
            left.append(self.items.get_nowait())
        return left

    async def close(self) -> None:
        """The follower goes away (its connection closes)."""
        await stopped(self.task)


async def stopped(task: asyncio.Task[Any]) -> None:
    """Cancel `task` until it ends, as a cancel scope of anyio's does (sse-starlette's, for a stream).

    Once may not be enough: on Python 3.11 a redis-py call can swallow a cancellation (its wait_for).
    """
    async with asyncio.timeout(WAIT_SECONDS):
        while not task.done():
            task.cancel()
            await asyncio.wait([task], timeout=0.05)
    with contextlib.suppress(asyncio.CancelledError):
        await task
