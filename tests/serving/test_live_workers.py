"""A live session over two real workers and a real Redis, as behind a load balancer: a worker killed, Redis restarted.

Two `zero-bands --workers 1 --redis-url …` processes stand for two workers. Followers read the event
stream as a browser's EventSource does (reconnecting with Last-Event-ID after a drop) and apply a
version as static/live.js does (only one past the last applied). Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx2 as httpx

from tests.browser.conftest import _free_port, _wait_for, zero_bands_command
from tests.conftest import dom, one
from tests.live.conftest import run, stopped
from tests.live.redis_server import RedisServer, running_redis

WAIT_SECONDS = 30.0
"""The longest one thing is awaited: far past what it takes on a loaded machine, short of a hang."""
RETRY_SECONDS = 1.0
"""How soon a follower reconnects a dropped stream: the `retry` the server sends (app/web/live.py RETRY_MS)."""
VIEWS = ("/?stage=zero2", "/?stage=zero3", "/?stage=zero3&phase=4", "/?stage=dp", "/?stage=zero1")
FOLLOWERS_EACH = 3


@dataclass
class Worker:
    """One `zero-bands` process on its own port."""

    url: str
    process: subprocess.Popen[bytes]

    def kill(self) -> None:
        """SIGKILL: no shutdown, its connections dropped, its counts left in Redis as they were."""
        self.process.kill()
        self.process.wait(timeout=10)


@contextmanager
def worker(redis_url: str, log: Path) -> Iterator[Worker]:
    """A worker serving live sessions from `redis_url` until the block ends (or it is killed)."""
    port = _free_port()
    command = [zero_bands_command(), "--port", str(port), "--workers", "1", "--redis-url", redis_url]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait_for(port, process)
        yield Worker(f"http://127.0.0.1:{port}", process)
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(timeout=10)


@dataclass
class Connection:
    """One of a follower's streams: where, with what Last-Event-ID, and the versions the server sent on it."""

    url: str
    last_event_id: str | None
    status: int = 0
    sent: list[int] = field(default_factory=list)


class Follower:
    """A follower's page: its EventSource, reconnecting to a worker that is up, and the versions it applied."""

    def __init__(self, client: httpx.AsyncClient, code: str, pick: Callable[[], str]) -> None:
        self.client, self.code, self.pick = client, code, pick
        self.applied: list[int] = []
        self.connections: list[Connection] = []
        self.last_event_id: str | None = None
        self.saw_ended = False
        self.closed = False
        self.heard = asyncio.Event()
        self.task = asyncio.create_task(self._follow())

    async def _follow(self) -> None:
        try:
            await self._reconnecting()
        finally:
            self.heard.set()

    async def _reconnecting(self) -> None:
        while True:
            connection = Connection(self.pick(), self.last_event_id)
            self.connections.append(connection)
            headers = {"Last-Event-ID": self.last_event_id} if self.last_event_id else {}
            try:
                async with self.client.sse(f"{connection.url}/live/{self.code}/events", headers=headers) as source:
                    connection.status = source.response.status_code
                    self.heard.set()
                    if connection.status != 200:  # an EventSource gives up on any other answer
                        return
                    async for event in source:
                        self._hear(connection, event)
                        if self.closed:  # the `ended` event: the bar's sse-close
                            return
            except httpx.TransportError:
                pass
            await asyncio.sleep(RETRY_SECONDS)

    def _hear(self, connection: Connection, event: httpx.ServerSentEvent) -> None:
        if event.event == "ended":
            self.closed = True
        elif event.event == "state":
            state = one(dom(event.data), "#live-state")
            self.saw_ended = self.saw_ended or state.has_attr("data-ended")
            if state.has_attr("data-version"):
                version = int(str(state["data-version"]))
                connection.sent.append(version)
                if not self.applied or version > self.applied[-1]:
                    self.applied.append(version)
            if event.id:
                self.last_event_id = event.id
        self.heard.set()

    async def until(self, check: Callable[[Follower], bool], seconds: float = WAIT_SECONDS) -> None:
        """Wait until `check` holds of what this follower has heard; fails past `seconds`."""
        async with asyncio.timeout(seconds):
            while not check(self):
                if self.task.done():
                    raise AssertionError(f"the follower stopped: {self.task.exception()!r}, {self.connections}")
                self.heard.clear()
                await self.heard.wait()

    @property
    def at(self) -> int:
        """The version applied last (0: none)."""
        return self.applied[-1] if self.applied else 0


@dataclass
class Teacher:
    """The teacher's browser: the session's code and the secret its cookie keeps."""

    client: httpx.AsyncClient
    code: str
    secret: str
    version: int = 1

    async def act(self, url: str, n: int) -> None:
        """The teacher's n-th click on the worker at `url`: a new view, or every fifth a pause or a resume."""
        cookie = {"Cookie": f"zb-teacher={self.secret}"}
        live = f"{url}/live/{self.code}"
        if n % 5 == 4:
            paused = "1" if n % 10 == 4 else "0"
            answer = await self.client.post(f"{live}/pause", data={"paused": paused}, headers=cookie)
            assert answer.status_code == 303, answer.text
        else:
            view = VIEWS[n % len(VIEWS)]
            answer = await self.client.post(f"{live}/show", data={"view": view}, headers={"ZB-Live": "1", **cookie})
            assert answer.status_code == 204, answer.text
        self.version += 1


async def _start(client: httpx.AsyncClient, url: str) -> Teacher:
    answer = await client.post(f"{url}/live", data={"view": "/?stage=zero1"})
    assert answer.status_code == 303
    code = answer.headers["location"].split("/")[2]
    assert answer.headers["location"] == f"/live/{code}/teach"
    cookie = answer.headers["set-cookie"]
    assert {"HttpOnly", f"Path=/live/{code}", "SameSite=strict"} <= {part.strip() for part in cookie.split(";")}
    return Teacher(client, code, answer.cookies["zb-teacher"])


async def _followers_counted(client: httpx.AsyncClient, url: str, code: str, n: int) -> None:
    async with asyncio.timeout(WAIT_SECONDS):
        while True:
            answer = await client.get(f"{url}/live/{code}/followers")
            if one(dom(answer.text), "#live-count").get_text() == f"{n} following":
                return
            await asyncio.sleep(0.1)


def _in_order_from(connection: Connection, first: int, last: int) -> None:
    assert connection.status == 200
    assert connection.sent == list(range(first, last + 1)), connection


def test_followers_on_two_workers_get_every_version_in_order_through_a_kill_and_a_redis_restart(
    tmp_path: Path,
) -> None:
    with (
        running_redis(tmp_path) as redis,
        worker(redis.url, tmp_path / "a.log") as a,
        worker(redis.url, tmp_path / "b.log") as b,
    ):
        run(_scenario(redis, a, b), seconds=4 * WAIT_SECONDS)


async def _scenario(redis: RedisServer, a: Worker, b: Worker) -> None:
    up = [a.url, b.url]
    timeout = httpx.Timeout(10, read=3 * 15)  # a stream is sent a ping every 15 s
    async with httpx.AsyncClient(timeout=timeout) as client:
        teacher = await _start(client, a.url)
        on_a = [Follower(client, teacher.code, lambda: up[0]) for _ in range(FOLLOWERS_EACH)]
        on_b = [Follower(client, teacher.code, lambda: up[-1]) for _ in range(FOLLOWERS_EACH)]
        everyone = on_a + on_b
        try:
            for follower in everyone:
                await follower.until(lambda f: f.at == 1)
            await _followers_counted(client, a.url, teacher.code, len(everyone))

            # Clicks on either worker reach every follower on both, each version once and in order.
            for n in range(10):
                await teacher.act(up[n % 2], n)
            for follower in everyone:
                await follower.until(lambda f: f.at == teacher.version)
                assert follower.applied == list(range(1, teacher.version + 1))
                _in_order_from(follower.connections[0], 1, teacher.version)
            before_kill = teacher.version

            # Worker A killed mid-session: its followers reconnect to B with the last id they saw,
            # while the teacher goes on on B.
            up.remove(a.url)
            a.kill()
            for n in range(10, 13):
                await teacher.act(b.url, n)
            for follower in on_a:
                await follower.until(lambda f: len(f.connections) > 1 and bool(f.connections[-1].sent))
            for n in range(13, 16):
                await teacher.act(b.url, n)
            for follower in everyone:
                await follower.until(lambda f: f.at == teacher.version)
            for follower in on_b:
                assert len(follower.connections) == 1
                assert follower.applied == list(range(1, teacher.version + 1))
                _in_order_from(follower.connections[0], 1, teacher.version)
            for follower in on_a:
                first, *dropped, last = follower.connections
                _in_order_from(first, 1, before_kill)
                assert all(c.url == b.url and c.last_event_id == str(before_kill) for c in [*dropped, last])
                assert all(c.status in (0, 200) and c.sent == [] for c in dropped)
                assert last.url == b.url
                assert last.last_event_id == str(before_kill)
                assert last.sent, last
                assert last.sent[0] > before_kill  # the server never sent again what Last-Event-ID had
                _in_order_from(last, last.sent[0], teacher.version)
                assert follower.applied == list(range(1, before_kill + 1)) + last.sent

            # Redis restarted, empty: every follower is told the session is over, none is left silent.
            await asyncio.to_thread(redis.restart)
            for follower in everyone:
                await follower.until(lambda f: f.closed)
                assert follower.saw_ended
                assert follower.at == teacher.version
            assert (await client.get(f"{b.url}/live/{teacher.code}")).status_code == 404
        finally:
            for follower in everyone:
                await stopped(follower.task)
