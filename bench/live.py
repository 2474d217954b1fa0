"""Live sessions in a lecture hall: 300 followers of one teacher, and a worker and Redis killed under them (issue 23).

Run: .venv/bin/python -m bench.live            (about a minute; needs /usr/bin/redis-server)
     .venv/bin/python -m bench.live --quick    (20 followers, 10 actions: checks that it delivers, not how fast)

Three parts, on servers started here by `python -m app.cli` (the `zero-bands` command) of this tree:

- Load: one worker with sessions in memory (the default set-up), 300 followers of one session. The
  followers are asyncio clients on raw sockets, in two processes of their own, so that their cost
  is not the server's event loop's. Each holds its event stream and, like a browser, a second
  kept-alive connection on which it fetches the fragment each event names (HX-Request,
  Accept-Encoding: br). The teacher does as its page does: swaps in the fragment, then posts the
  view; one action every 250 ms. Every time is `time.monotonic()`: CLOCK_MONOTONIC, one clock for
  all the processes of a Linux machine, so a follower's receipt minus the teacher's send is a latency.
- Address or fragment: what the app sends (the address; each follower fetches the fragment from the
  response cache) against sending the fragment itself in every event: the bytes, from the same run,
  and the server's CPU for 300 events of either size, written by a bare SSE app on the same stack
  (`sink_app`: uvicorn, uvloop, httptools, sse-starlette).
- Fault: Redis and two workers, half the followers on each. Worker A is killed (SIGKILL) mid-lecture;
  its followers reconnect to B after the stream's `retry` with Last-Event-ID, as EventSource does,
  and the teacher goes on at B. Then Redis is killed and started again, empty.
- Kept in its place (issue 32): Redis hung (SIGSTOP) under 32 clients asking for a follower's page, while
  `/` and the API are timed against the same requests with Redis well; and a follower whose client
  connects its stream and never reads: when the teacher's count lets it go.

A figure with a target is printed ok or MISS beside it, one without is printed for the record; the
command exits 1 on any MISS, the quick run too. The quick run's delivery checks (every version,
once, in order) hold on any machine; its times are printed as they come.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import html
import http.client
import http.cookies
import multiprocessing
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from app.live.hub import CHECK_SECONDS
from bench.serve import Check

ROOT = Path(__file__).resolve().parents[1]
REDIS_SERVER = "/usr/bin/redis-server"
COOKIE = "zb-teacher"
"""The teacher's cookie (app/web/live_view.py COOKIE)."""
FIRST_VIEW = "/?stage=zero3"
STAGES = ("dp", "zero1", "zero2", "zero3")
PHASES = 53
"""Phases 0-52 of a step (app/domain/step.py LAST_PHASE is 52)."""
RUNS = ("", "&model=llama-3-8b", "&model=llama-3-70b&gpus=16")
"""The lecture's runs: the default, then two changes of model (values of app/web/inputs.py)."""
PACE_SECONDS = 0.25
"""A brisk teacher: one click every 250 ms, for a minute's lecture in 15 s."""
FAULT_PACE_SECONDS = 0.2
TARGET_P95_MS = 250.0
CLIENT_PROCESSES = 2
CONNECT_AT_ONCE = 32
"""Followers connecting at the same moment in one process: a class arriving, not one SYN flood."""
REDIS_DOWN_SECONDS = 1.0
SEP = b"\r\n\r\n"
"""What ends each event: sse-starlette's default separator is CRLF, and the app keeps it."""
STREAM_ERRORS = (OSError, EOFError, asyncio.LimitOverrunError, ValueError)
"""A connection reset, closed mid-answer, or answered with garbage: for a follower, a dropped stream."""
VIEW = re.compile(r'data-view="([^"]*)"')


@dataclass(frozen=True)
class Size:
    """How big a run: the load's followers and actions, the sink's pushes, the fault's followers and actions."""

    followers: int
    actions: int
    sink_pushes: int
    fault_followers: int
    fault_before: int
    """The teacher's actions on worker A before it is killed; as many again on B after."""


FULL = Size(followers=300, actions=60, sink_pushes=10, fault_followers=100, fault_before=20)
QUICK = Size(followers=20, actions=10, sink_pushes=3, fault_followers=10, fault_before=4)


@dataclass(frozen=True)
class Note:
    """A figure printed for the record, with no target."""

    name: str
    figure: str


Line = Check | Note


@dataclass(frozen=True)
class Section:
    """One part's heading and its lines."""

    title: str
    lines: list[Line]


# -- the followers' side: asyncio clients on raw sockets, run in processes of their own ------------------


@dataclass
class Plan:
    """What a process of followers is to do (sent to it as a dict: plain data crosses processes simply)."""

    ports: list[int]
    """Where the streams go: the first try at port `ports[index % len(ports)]`, then the next ones in turn."""
    path: str
    indices: list[int]
    final: int | None
    """The version after which a follower is done (None: it follows until its stream says ended)."""
    views: dict[int, list[tuple[str, str]]] | None
    """Each version's view, as sorted query pairs: what each event must name."""
    fetch: bool
    """Whether each follower fetches the fragment its events name, as a browser does."""
    reconnect: bool
    seconds: float
    """How long the followers may take to be done: the bound on every wait in the process."""


@dataclass
class Heard:
    """What one follower heard (sent back from its process as a dict)."""

    index: int
    home: int
    received: list[tuple[int, float, int]] = field(default_factory=list)
    """Each event with an id, in the order it came: its version, when, and its bytes (chunk framing aside)."""
    states: list[tuple[str, float]] = field(default_factory=list)
    """What it was told without a version: 'away', 'ended' (the session is gone), or 'refused 404' on reconnecting."""
    fragments: list[tuple[int, float, int, int, int]] = field(default_factory=list)
    """Each fragment fetched: its version, when it was in hand, the status, the body's and the headers' bytes."""
    opens: list[tuple[float, int]] = field(default_factory=list)
    """Each stream opened: when its headers came, and the port."""
    drops: list[float] = field(default_factory=list)
    wrong_views: int = 0
    superseded: int = 0
    """Fragments not fetched because a newer version came first (a browser would fetch only the newest too)."""


class Page:
    """A follower's kept-alive connection for fragments, the browser's second one beside the stream."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def get(self, path: str) -> tuple[int, int, int]:
        """GET the fragment at `path`: the status, the body's bytes (compressed) and the headers' bytes."""
        request = (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nHX-Request: true\r\nAccept-Encoding: br\r\n\r\n"
        )
        for attempt in range(2):
            if self.streams is None:
                self.streams = await asyncio.open_connection("127.0.0.1", self.port, limit=2**20)
            reader, writer = self.streams
            try:
                writer.write(request.encode())
                status, headers, head = await _head(reader)
                if "content-length" in headers:
                    body = len(await reader.readexactly(int(headers["content-length"])))
                else:
                    body = 0
                    async for chunk in _chunks(reader):
                        body += len(chunk)
                if headers.get("connection", "").lower() == "close":
                    self.close()
                return status, body, head
            except STREAM_ERRORS:
                # uvicorn closes a connection idle for 5 s: a browser opens another and asks again.
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Let the connection go."""
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None


async def _head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], int]:
    """An answer's status and headers, and their size."""
    block = await reader.readuntil(b"\r\n\r\n")
    lines = block.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ", 2)[1])
    pairs = (line.partition(":") for line in lines[1:] if line)
    return status, {name.strip().lower(): value.strip() for name, _, value in pairs}, len(block)


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    """A chunked body's chunks, until its end or the connection's."""
    while True:
        line = await reader.readline()
        if not line:
            return
        size = int(line.split(b";")[0].strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return
        yield (await reader.readexactly(size + 2))[:-2]


def _fields(block: bytes) -> dict[str, str]:
    """One event's fields (`data` joined by newlines); a comment (a ping) has none."""
    fields: dict[str, str] = {}
    data: list[str] = []
    for line in block.decode().split("\r\n"):
        if not line or line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value[1:] if value.startswith(" ") else value
        if name == "data":
            data.append(value)
        else:
            fields[name] = value
    if data:
        fields["data"] = "\n".join(data)
    return fields


async def _events(reader: asyncio.StreamReader) -> AsyncIterator[tuple[dict[str, str], int]]:
    """Each event of a stream, with its bytes, until the stream ends."""
    buffer = b""
    async for chunk in _chunks(reader):
        buffer += chunk
        while (end := buffer.find(SEP)) >= 0:
            block, buffer = buffer[:end], buffer[end + len(SEP) :]
            yield _fields(block), end + len(SEP)


class Follower:
    """One student's browser: its event stream, and the fragments it fetches, as static/live.js does."""

    def __init__(self, plan: Plan, index: int) -> None:
        self.plan = plan
        self.heard = Heard(index=index, home=index % len(plan.ports))
        self.applied = -1
        self.shown: str | None = None
        self.retry = 1.0
        self.wanted: tuple[int, str] | None = None
        self.want = asyncio.Event()
        self.ready = asyncio.Event()
        self.finished = asyncio.Event()

    async def run(self, gate: asyncio.Semaphore) -> None:
        """Follow: open the stream, read it, and on a drop reconnect (to the next worker) after `retry`."""
        fetching = asyncio.create_task(self._fetch()) if self.plan.fetch else None
        at, refused = self.heard.home, 0
        try:
            while True:
                port = self.plan.ports[at % len(self.plan.ports)]
                try:
                    async with gate:
                        reader, writer, status = await self._open(port)
                except STREAM_ERRORS:
                    # A dead worker refuses at once; a load balancer would send the browser to another.
                    if not self.plan.reconnect:
                        return
                    at, refused = at + 1, refused + 1
                    await asyncio.sleep(self.retry if refused % len(self.plan.ports) == 0 else 0)
                    continue
                refused = 0
                if status != 200:
                    writer.close()
                    self.heard.states.append((f"refused {status}", time.monotonic()))
                    if status in (404, 410) or not self.plan.reconnect:
                        return
                    await asyncio.sleep(self.retry)
                    continue
                try:
                    self.heard.opens.append((time.monotonic(), port))
                    if await self._read(reader):
                        return
                except STREAM_ERRORS:
                    pass
                finally:
                    writer.close()
                self.heard.drops.append(time.monotonic())
                if not self.plan.reconnect:
                    return
                await asyncio.sleep(self.retry)  # EventSource waits the stream's `retry` before reconnecting
                at += 1
        finally:
            # Ended, refused, dropped for good or stopped: nothing more will come to this one.
            self.ready.set()
            self.finished.set()
            if fetching is not None:
                fetching.cancel()

    async def _open(self, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter, int]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**20)
        last = f"Last-Event-ID: {self.applied}\r\n" if self.applied >= 0 else ""
        request = f"GET {self.plan.path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\n{last}\r\n"
        try:
            writer.write(request.encode())
            status, _, _ = await _head(reader)
        except BaseException:
            writer.close()
            raise
        return reader, writer, status

    async def _read(self, reader: asyncio.StreamReader) -> bool:
        """Read one stream until it ends; True if it said the session ended (the bar's sse-close)."""
        async for fields, size in _events(reader):
            now = time.monotonic()
            if fields.get("retry", "").isdigit():
                self.retry = int(fields["retry"]) / 1000
            if fields.get("event") == "ended":
                return True
            if fields.get("event") != "state":
                continue
            data = fields.get("data", "")
            if "id" in fields:
                version = int(fields["id"])
                self.heard.received.append((version, now, size))
                if version > self.applied:  # never an older version after a newer (static/live.js)
                    self._apply(version, data)
                if "data-ended" in data:
                    self.heard.states.append(("ended", now))
            else:
                self.heard.states.append(("away" if "data-away" in data else "ended", now))
            self.ready.set()
        return False

    def _apply(self, version: int, data: str) -> None:
        self.applied = version
        found = VIEW.search(data)
        view = html.unescape(found.group(1)) if found else ""
        views = self.plan.views
        if views is not None and version in views and sorted(parse_qsl(urlsplit(view).query)) != views[version]:
            self.heard.wrong_views += 1
        fetch = self.plan.fetch and self.shown is not None and view != self.shown
        if self.shown is None or fetch:
            self.shown = view  # the first: the follower's page came with it, nothing to fetch
        if fetch:
            self.heard.superseded += self.wanted is not None
            self.wanted = (version, view)
            self.want.set()
        elif self.plan.final is not None and version >= self.plan.final:
            self.finished.set()  # the last version, with no fragment to fetch for it

    async def _fetch(self) -> None:
        page = Page(self.plan.ports[self.heard.home])
        try:
            while True:
                await self.want.wait()
                self.want.clear()
                if self.wanted is None:
                    continue
                (version, view), self.wanted = self.wanted, None
                try:
                    status, body, head = await page.get(view)
                except STREAM_ERRORS:
                    status, body, head = 0, 0, 0
                self.heard.fragments.append((version, time.monotonic(), status, body, head))
                if self.plan.final is not None and version >= self.plan.final:
                    self.finished.set()
        finally:
            page.close()


async def _follow_all(conn: Connection, plan: Plan) -> list[Heard]:
    """Connect every follower, say 'ready', follow until all are done, say 'done', and stop when told."""
    loop = asyncio.get_running_loop()
    told = asyncio.Event()

    def hear() -> None:  # level-triggered: stop watching, or the loop would spin on the waiting message
        loop.remove_reader(conn.fileno())
        told.set()

    loop.add_reader(conn.fileno(), hear)
    # The loop made the pipe non-blocking: a large send (what the followers heard) would fail half-written.
    os.set_blocking(conn.fileno(), True)
    followers = [Follower(plan, index) for index in plan.indices]
    gate = asyncio.Semaphore(CONNECT_AT_ONCE)
    tasks = [asyncio.create_task(f.run(gate)) for f in followers]
    deadline = loop.time() + plan.seconds

    async def every(events: list[asyncio.Event]) -> None:
        waiting = [asyncio.create_task(e.wait()) for e in events]
        stop = asyncio.create_task(told.wait())
        every: asyncio.Future[Any] = asyncio.gather(*waiting)
        try:
            await asyncio.wait([stop, every], timeout=max(0.0, deadline - loop.time()),
                               return_when=asyncio.FIRST_COMPLETED)  # fmt: skip
        finally:
            for task in (*waiting, stop):
                task.cancel()

    await every([f.ready for f in followers])
    conn.send(("ready", sum(f.ready.is_set() and f.applied >= 0 for f in followers)))
    await every([f.finished for f in followers])
    conn.send(("done", sum(f.finished.is_set() for f in followers)))
    await told.wait()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return [f.heard for f in followers]


def _follower_process(conn: Connection, plan: dict[str, Any]) -> None:
    """A process of followers (the target of `Crowd`): what each heard goes back as plain dicts."""
    import uvloop

    heard = uvloop.run(_follow_all(conn, Plan(**plan)))
    os.set_blocking(conn.fileno(), True)
    conn.send([asdict(h) for h in heard])
    conn.close()


class Crowd:
    """The follower processes of one part, and the messages between them and this one."""

    def __init__(self, plan: Plan, count: int, processes: int = CLIENT_PROCESSES) -> None:
        context = multiprocessing.get_context("spawn")  # a fresh interpreter: nothing of this one's state
        self.pipes: list[Connection] = []
        self.processes: list[multiprocessing.process.BaseProcess] = []
        share = -(-count // processes)
        for first in range(0, count, share):
            ours, theirs = context.Pipe()
            part = {**asdict(plan), "indices": list(range(first, min(count, first + share)))}
            process = context.Process(target=_follower_process, args=(theirs, part), daemon=True)
            process.start()
            theirs.close()
            self.pipes.append(ours)
            self.processes.append(process)

    def _each(self, word: str, timeout: float) -> int:
        """Wait for `word` from every process; the sum of the counts they give."""
        total, deadline = 0, time.monotonic() + timeout
        for pipe in self.pipes:
            if not pipe.poll(max(0.0, deadline - time.monotonic())):
                raise SystemExit(f"bench.live: a process of followers said no '{word}' within {timeout:.0f} s")
            said, count = pipe.recv()
            if said != word:
                raise SystemExit(f"bench.live: a process of followers said {said!r}, not {word!r}")
            total += count
        return total

    def ready(self, timeout: float) -> int:
        """How many followers have their stream open and its first event."""
        return self._each("ready", timeout)

    def done(self, timeout: float) -> int:
        """How many are done: every version received (and fetched), or their session ended."""
        return self._each("done", timeout)

    def results(self) -> list[Heard]:
        """Stop the followers, and what each heard."""
        heard: list[Heard] = []
        for pipe in self.pipes:
            pipe.send("stop")
        for pipe in self.pipes:
            said: object = ()
            while isinstance(said, tuple):  # a 'ready' or 'done' not waited for (a part that gave up) comes first
                if not pipe.poll(30):
                    raise SystemExit("bench.live: a process of followers sent nothing back within 30 s")
                said = pipe.recv()
            assert isinstance(said, list)
            heard += [Heard(**d) for d in said]
        return heard

    def close(self) -> None:
        """End the processes that are still running (the ones started here)."""
        for pipe in self.pipes:
            with contextlib.suppress(OSError):
                pipe.send("stop")
        for process in self.processes:
            process.join(5)
            if process.is_alive():
                process.terminate()
                process.join(5)
        for pipe in self.pipes:
            pipe.close()


@contextlib.contextmanager
def _crowd(plan: Plan, count: int) -> Iterator[Crowd]:
    crowd = Crowd(plan, count)
    try:
        yield crowd
    finally:
        crowd.close()


# -- servers ---------------------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _env() -> dict[str, str]:
    """The environment, with this tree first on the path and no Redis of the caller's."""
    env = {k: v for k, v in os.environ.items() if k != "ZERO_BANDS_REDIS_URL"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def _answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as response:
            response.read()
        return True
    except OSError:
        return False


def _redis_answers(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as sock:
            sock.sendall(b"PING\r\n")
            return sock.recv(16).startswith(b"+PONG")
    except OSError:
        return False


def _start(
    argv: list[str], ready: Callable[[], bool], stack: contextlib.ExitStack, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a process, stopped when `stack` closes, and wait until `ready()`; its errors are shown if it fails."""
    log: IO[bytes] = stack.enter_context(tempfile.TemporaryFile())  # noqa: SIM115 (the stack closes it)
    process = subprocess.Popen(argv, env=_env() | (env or {}), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=log)
    stack.callback(_stop, process)
    deadline = time.monotonic() + 30
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            said = log.read().decode(errors="replace").strip().splitlines()[-3:]
            why = f"exited with {process.returncode}" if process.returncode is not None else "was not ready in 30 s"
            raise SystemExit(f"bench.live: {' '.join(argv)} {why}: {' / '.join(said)}")
        time.sleep(0.05)
    return process


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _app(
    port: int, stack: contextlib.ExitStack, redis_url: str | None = None, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """One `zero-bands --workers 1` process: sessions in its memory, or in Redis; `env` added to its environment."""
    argv = [sys.executable, "-m", "app.cli", "--port", str(port), "--workers", "1"]
    argv = [*argv, "--redis-url", redis_url] if redis_url else argv
    return _start(argv, lambda: _answers(port), stack, env)


def _redis(port: int, stack: contextlib.ExitStack) -> subprocess.Popen[bytes]:
    """A Redis of our own that keeps nothing on disk: restarted, it is empty."""
    argv = [REDIS_SERVER, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    return _start(argv, lambda: _redis_answers(port), stack)


def _cpu_seconds(pid: int) -> float:
    """CPU time (user and system) a process has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- the teacher -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Action:
    """One of the teacher's actions: the version it made, when its request was sent and answered."""

    version: int
    view: str
    sent: float
    acked: float


class Teacher:
    """The teacher's browser: the session's cookie and one kept-alive connection."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        self.code = ""
        self.cookie = ""
        self.used = time.monotonic()
        self.swap_cpu = 0.0
        """The server's CPU while it answered the teacher's swaps (rendering each new view), when told its pid."""

    def move(self, port: int) -> None:
        """Carry on at another worker (the load balancer's choice once the first one is gone)."""
        self.connection.close()
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)

    def _request(
        self, method: str, path: str, body: str | None = None, **headers: str
    ) -> tuple[http.client.HTTPResponse, bytes]:
        if time.monotonic() - self.used > 3:
            # uvicorn closes a connection idle for 5 s, and http.client would not ask again: a new one.
            self.connection.close()
        self.connection.request(method, path, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()})
        response = self.connection.getresponse()
        answer = response.read()
        self.used = time.monotonic()
        return response, answer

    def start(self, view: str) -> None:
        """Start a session showing `view` (POST /live): keep its code and the cookie."""
        response, _ = self._request("POST", "/live", urlencode({"view": view}), Content_Type=FORM)
        cookie = http.cookies.SimpleCookie(response.getheader("set-cookie") or "")
        if response.status != 303 or COOKIE not in cookie:
            raise SystemExit(f"bench.live: POST /live answered {response.status} without the teacher's cookie")
        self.code, self.cookie = (response.getheader("location") or "").split("/")[2], cookie[COOKIE].value

    def show(self, view: str) -> tuple[float, float, int]:
        """POST the view, as the teacher's page does after its swap: when it was sent and answered, and the status."""
        body = urlencode({"view": view})
        sent = time.monotonic()
        response, _ = self._request("POST", f"/live/{self.code}/show", body, Content_Type=FORM, ZB_Live="1",
                                 Cookie=f"{COOKIE}={self.cookie}")  # fmt: skip
        return sent, time.monotonic(), response.status

    def fragment(self, view: str, coding: str) -> bytes:
        """The widget's fragment, as htmx asks for it (HX-Request), in `coding` (br, or identity)."""
        response, body = self._request("GET", view, HX_Request="true", Accept_Encoding=coding)
        if response.status != 200:
            raise SystemExit(f"bench.live: GET {view} answered {response.status}")
        return body

    def lecture(self, views: Sequence[str], pace: float, first: int, swap: bool, pid: int = 0) -> list[Action]:
        """One action every `pace` seconds (on a schedule: a slow answer does not push the next one back)."""
        actions, start = [], time.monotonic()
        for i, view in enumerate(views):
            time.sleep(max(0.0, start + i * pace - time.monotonic()))
            if swap:
                # The teacher's own swap comes first, as on its page: the cache has the fragment for the class.
                before = _cpu_seconds(pid) if pid else 0.0
                self.fragment(view, "br")
                self.swap_cpu += _cpu_seconds(pid) - before if pid else 0.0
            sent, acked, status = self.show(view)
            if status != 204:
                raise SystemExit(f"bench.live: the teacher's action {view} answered {status}, not 204")
            actions.append(Action(first + i, view, sent, acked))
        return actions


FORM = "application/x-www-form-urlencoded"


def lecture_views(count: int) -> list[str]:
    """`count` distinct views: the four stages in turn, phases 0-52, and two changes of run on the way."""
    # 4 and 53 are coprime: (stage, phase) repeats only after 212 actions.
    return [f"/?stage={STAGES[i % 4]}{RUNS[i * len(RUNS) // count]}&phase={i % PHASES}" for i in range(count)]


def _query(view: str) -> list[tuple[str, str]]:
    return sorted(parse_qsl(urlsplit(view).query))


# -- figures ---------------------------------------------------------------------------------------------


def _pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def _spread(values_ms: Sequence[float]) -> str:
    p50, p95 = _pct(values_ms, 0.5), _pct(values_ms, 0.95)
    return f"p50 {p50:.0f} ms, p95 {p95:.0f} ms, max {max(values_ms, default=0):.0f} ms"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def _mb(n: float) -> str:
    return f"{n / 1e6:,.1f} MB" if n >= 1e6 else f"{n / 1e3:,.1f} kB"


@dataclass(frozen=True)
class Order:
    """How one follower's versions came, against the versions the teacher made."""

    missing: int
    twice: int
    backwards: int
    """Versions that came after a newer one."""


def order(received: Sequence[int], expected: Sequence[int]) -> Order:
    """Missing, repeated and out-of-order versions in `received`."""
    seen: set[int] = set()
    twice = backwards = 0
    newest = -1
    for version in received:
        twice += version in seen
        backwards += version not in seen and version < newest
        seen.add(version)
        newest = max(newest, version)
    return Order(len(set(expected) - seen), twice, backwards)


def delivery_check(name: str, heard: Sequence[Heard], expected: Sequence[int]) -> Check:
    """Every follower got every version once, in order, each naming the teacher's view."""
    orders = [order([v for v, _, _ in h.received], expected) for h in heard]
    whole = sum(o == Order(0, 0, 0) and h.wrong_views == 0 for o, h in zip(orders, heard, strict=True))
    missing, twice = sum(o.missing for o in orders), sum(o.twice for o in orders)
    backwards, wrong = sum(o.backwards for o in orders), sum(h.wrong_views for h in heard)
    figure = (
        f"{whole} of {len(heard)} followers got versions {expected[0]}-{expected[-1]} each once, in order, naming "
        f"the teacher's view; {missing} missing, {twice} twice, {backwards} out of order, {wrong} wrong views"
    )
    return Check(name, figure, "all of them", whole == len(heard))


# -- the parts -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lecture:
    """What the load part measured, for the address-or-fragment part."""

    event_bytes: float
    """An event's bytes, on average."""
    fragment_bytes: float
    """A fragment's answer (compressed body and headers), on average."""
    total_bytes: int
    """Every event and fragment answer of the lecture, over every follower."""
    fragments: list[bytes]
    """Each view's fragment, uncompressed."""
    cpu_ms: float
    """The server's CPU per action, less the teacher's swap."""


def load(size: Size) -> tuple[Section, Lecture]:
    """300 followers of one session on one worker with sessions in memory; the teacher acts 60 times."""
    views = lecture_views(size.actions)
    expected = {1: _query(FIRST_VIEW)} | {i + 2: _query(v) for i, v in enumerate(views)}
    final = 1 + size.actions
    port = _free_port()
    # What else was running: the times below are of a shared machine, and say so.
    busy = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        server = _app(port, stack)
        teacher = Teacher(port)
        stack.callback(teacher.connection.close)
        teacher.start(FIRST_VIEW)
        plan = Plan([port], f"/live/{teacher.code}/events", list(range(size.followers)), final, expected,
                    fetch=True, reconnect=False, seconds=60 + size.actions * PACE_SECONDS)  # fmt: skip
        crowd = stack.enter_context(_crowd(plan, size.followers))
        if (ready := crowd.ready(60)) != size.followers:
            raise SystemExit(f"bench.live: {ready} of {size.followers} followers had their first event")
        cpu = _cpu_seconds(server.pid)
        actions = teacher.lecture(views, PACE_SECONDS, first=2, swap=True, pid=server.pid)
        crowd.done(plan.seconds)
        cpu = _cpu_seconds(server.pid) - cpu
        heard = crowd.results()
        fragments = [teacher.fragment(v, "identity") for v in views]
    sent = {a.version: a.sent for a in actions}
    event_ms = [(t - sent[v]) * 1e3 for h in heard for v, t, _ in h.received if v in sent]
    fragment_ms = [(t - sent[v]) * 1e3 for h in heard for v, t, s, _, _ in h.fragments if v in sent and s == 200]
    events = [b for h in heard for v, _, b in h.received if v in sent]
    answers = [b + head for h in heard for v, _, s, b, head in h.fragments if v in sent and s == 200]
    bodies = [b for h in heard for v, _, s, b, _ in h.fragments if v in sent and s == 200]
    failed = sum(s != 200 for h in heard for _, _, s, _, _ in h.fragments)
    superseded = sum(h.superseded for h in heard)
    mean = _mean
    p95 = _pct(event_ms, 0.95)
    swap_ms = teacher.swap_cpu / size.actions * 1e3
    rest_ms = cpu / size.actions * 1e3 - swap_ms
    teacher_ms = [(a.acked - a.sent) * 1e3 for a in actions]
    lines: list[Line] = [
        delivery_check("every version to every follower", heard, list(range(1, final + 1))),
        Check("teacher's request to a follower's event", f"{_spread(event_ms)} ({len(event_ms):,} events)",
              f"p95 <= {TARGET_P95_MS:.0f} ms", p95 <= TARGET_P95_MS),
        Note("teacher's request to the fragment in hand",
             f"{_spread(fragment_ms)} ({len(fragment_ms):,} fragments; {failed} not 200, {superseded} skipped "
             "for a newer version)"),
        Note("bytes per follower per action",
             f"event {mean(events):,.0f} B + fragment {mean(answers):,.0f} B ({mean(bodies):,.0f} B brotli body "
             f"+ headers) = {mean(events) + mean(answers):,.0f} B"),
        Note("server CPU per action", f"{cpu / size.actions * 1e3:.1f} ms: the teacher's swap (a new view rendered) "
             f"{swap_ms:.1f} ms, the rest {rest_ms:.1f} ms (the action, its event to {size.followers} followers, their "
             f"{size.followers} fragments from the cache)"),
        Note("the teacher's POST, sent to answered", _spread(teacher_ms)),
        Note("the machine before the load", f"load average {busy:.2f} over the last minute, on "
             f"{os.cpu_count()} cores"),
    ]  # fmt: skip
    title = (
        f"load: {size.followers} followers of one session, one worker, sessions in memory; the teacher acts "
        f"{size.actions} times, every {PACE_SECONDS * 1e3:.0f} ms"
    )
    result = Lecture(mean(events), mean(answers), sum(events) + sum(answers), fragments, rest_ms)
    return Section(title, lines), result


def sink_app() -> Starlette:
    """A bare SSE app on the server's stack, writing what it is given to every open stream.

    Served by `uvicorn --factory bench.live:sink_app`. POST /payload sets what the events carry, and each
    POST /push sends it, as the next version, to every stream: the cost of an event of that size to each
    follower, without the app around it.
    """
    streams: set[asyncio.Queue[tuple[int, str]]] = set()
    said = {"version": 0}
    payload = [""]

    async def events(request: Request) -> EventSourceResponse:
        queue: asyncio.Queue[tuple[int, str]] = asyncio.Queue()
        streams.add(queue)

        async def stream() -> AsyncIterator[ServerSentEvent]:
            try:
                yield ServerSentEvent("open", event="state", id="0", retry=1000)
                while True:
                    version, data = await queue.get()
                    yield ServerSentEvent(data, event="state", id=str(version), retry=1000)
            finally:
                streams.discard(queue)

        # The app's own ping and send timeout (app/web/live.py).
        return EventSourceResponse(stream(), ping=15, send_timeout=10)

    async def set_payload(request: Request) -> Response:
        payload[0] = (await request.body()).decode()
        return Response(status_code=204)

    async def push(request: Request) -> Response:
        said["version"] += 1
        for queue in streams:
            queue.put_nowait((said["version"], payload[0]))
        return Response(status_code=204)

    async def home(request: Request) -> Response:
        return Response("sink")

    routes = [Route("/", home), Route("/events", events), Route("/payload", set_payload, methods=["POST"]),
              Route("/push", push, methods=["POST"])]  # fmt: skip
    return Starlette(routes=routes)


ADDRESS_STATE = (
    '<p class="live-state" id="live-state" data-version="61" data-view="/?stage=zero2&amp;model=llama-3-8b&amp;'
    'phase=5" data-theme="default">Following the teacher.</p>'
)
"""What an event of the app carries: the state element, naming the address."""


def sink(size: Size, fragment: str) -> list[Line]:
    """300 events of the address's size, then 300 of the fragment's, each written by the bare SSE app."""
    port = _free_port()
    argv = [sys.executable, "-m", "uvicorn", "--factory", "bench.live:sink_app", "--host", "127.0.0.1",
            "--port", str(port), "--loop", "uvloop", "--http", "httptools", "--no-access-log",
            "--log-level", "warning"]  # fmt: skip
    kinds = (ADDRESS_STATE, fragment)
    pushes, lines = size.sink_pushes, list[Line]()
    with contextlib.ExitStack() as stack:
        server = _start(argv, lambda: _answers(port), stack)
        plan = Plan([port], "/events", list(range(size.followers)), len(kinds) * pushes, None, fetch=False,
                    reconnect=False, seconds=120)  # fmt: skip
        crowd = stack.enter_context(_crowd(plan, size.followers))
        if (ready := crowd.ready(60)) != size.followers:
            raise SystemExit(f"bench.live: {ready} of {size.followers} followers of the bare SSE app had their event")
        pusher = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        stack.callback(pusher.close)
        sent: dict[int, float] = {}
        cpu: list[float] = []
        for k, data in enumerate(kinds):
            pusher.request("POST", "/payload", body=data.encode())
            pusher.getresponse().read()
            before, start = _cpu_seconds(server.pid), time.monotonic()
            for i in range(pushes):
                time.sleep(max(0.0, start + i * PACE_SECONDS - time.monotonic()))
                sent[k * pushes + i + 1] = time.monotonic()
                pusher.request("POST", "/push")
                pusher.getresponse().read()
            if k + 1 < len(kinds):
                time.sleep(1.0)  # every follower has the last of these (they take milliseconds): idle, no CPU
            else:
                crowd.done(plan.seconds)
            cpu.append(_cpu_seconds(server.pid) - before)
        heard = crowd.results()
    for k, data in enumerate(kinds):
        ours = range(k * pushes + 1, (k + 1) * pushes + 1)
        late = [(t - sent[v]) * 1e3 for h in heard for v, t, _ in h.received if v in ours]
        last = [max((t - sent[v]) * 1e3 for h in heard for w, t, _ in h.received if w == v) for v in ours]
        event = len(ServerSentEvent(data, event="state", id="61", retry=1000).encode())
        lines.append(Note(
            f"bare SSE app: {size.followers} events of {_mb(event)}",
            f"server CPU {cpu[k] / pushes * 1e3:.1f} ms a push; to a follower {_spread(late)}; to the last of "
            f"them p50 {_pct(last, 0.5):.0f} ms ({pushes} pushes, {len(late):,} events)",
        ))  # fmt: skip
    return lines


def address_or_fragment(size: Size, lecture: Lecture) -> Section:
    """What the app sends against sending the fragment in every event, in bytes and in the server's CPU."""
    fragment_events = [
        len(ServerSentEvent(f.decode(), event="state", id=str(i + 2), retry=1000).encode())
        for i, f in enumerate(lecture.fragments)
    ]
    per_fragment = sum(fragment_events) / len(fragment_events)
    address = lecture.event_bytes + lecture.fragment_bytes
    n = size.followers
    lines: list[Line] = [
        Note("the address (what the app sends)",
             f"{_mb(address * n)} an action to {n} followers ({address:,.0f} B each: the event, then the "
             f"fragment's brotli answer from the cache); {_mb(lecture.total_bytes)} over {size.actions} actions"),
        Note("the fragment in the event instead",
             f"{_mb(per_fragment * n)} an action ({per_fragment:,.0f} B each: SSE is not compressed per event "
             f"here); {_mb(sum(fragment_events) * n)} over {size.actions} actions = "
             f"{per_fragment / address:.1f}× the address's bytes"),
        Note("the app's server CPU per action, address", f"{lecture.cpu_ms:.1f} ms (in the load above, less the "
             "teacher's swap: the same render either way)"),
    ]  # fmt: skip
    middle = lecture.fragments[len(lecture.fragments) // 2].decode()
    lines += sink(size, middle)
    return Section(f"address or fragment, at {n} followers", lines)


def fault(size: Size) -> Section:
    """Two workers on Redis, half the followers on each; worker A killed mid-lecture, then Redis restarted."""
    redis_port, port_a, port_b = _free_port(), _free_port(), _free_port()
    url = f"redis://127.0.0.1:{redis_port}/0"
    views = lecture_views(2 * size.fault_before)
    expected = {1: _query(FIRST_VIEW)} | {i + 2: _query(v) for i, v in enumerate(views)}
    with contextlib.ExitStack() as stack:
        redis = _redis(redis_port, stack)
        worker_a = _app(port_a, stack, url)
        _app(port_b, stack, url)
        teacher = Teacher(port_a)
        stack.callback(lambda: teacher.connection.close())
        teacher.start(FIRST_VIEW)
        plan = Plan([port_a, port_b], f"/live/{teacher.code}/events", list(range(size.fault_followers)), None,
                    expected, fetch=False, reconnect=True, seconds=90)  # fmt: skip
        crowd = stack.enter_context(_crowd(plan, size.fault_followers))
        if (ready := crowd.ready(60)) != size.fault_followers:
            raise SystemExit(f"bench.live: {ready} of {size.fault_followers} followers had their first event")
        before = size.fault_before
        actions = teacher.lecture(views[:before], FAULT_PACE_SECONDS, first=2, swap=False)
        time.sleep(FAULT_PACE_SECONDS / 2)
        killed = time.monotonic()
        os.kill(worker_a.pid, signal.SIGKILL)
        worker_a.wait()
        time.sleep(FAULT_PACE_SECONDS / 2)
        teacher.move(port_b)
        actions += teacher.lecture(views[before:], FAULT_PACE_SECONDS, first=2 + before, swap=False)
        time.sleep(2.0)  # A's followers are back (1 s retry) before Redis goes
        redis_down = time.monotonic()
        os.kill(redis.pid, signal.SIGKILL)
        redis.wait()
        time.sleep(REDIS_DOWN_SECONDS)
        _redis(redis_port, stack)
        redis_up = time.monotonic()
        done = crowd.done(CHECK_SECONDS + 20)
        heard = crowd.results()
        _, _, status = teacher.show(views[-1])
    return Section(
        f"fault: Redis and two workers, {size.fault_followers} followers (half on each); the teacher acts every "
        f"{FAULT_PACE_SECONDS * 1e3:.0f} ms, worker A is killed after {before} actions, then Redis restarts empty",
        fault_lines(heard, actions, killed, (redis_down, redis_up), status, done),
    )


def reopening(heard: Heard, killed: float) -> float | None:
    """When the follower's first stream after the kill opened, if one did."""
    return next((t for t, _ in heard.opens if t > killed), None)


def converged(heard: Heard, actions: Sequence[Action], killed: float) -> float | None:
    """When, after the kill, the follower was on a live stream at the newest version the teacher had stored.

    The newest stored: the highest version whose POST had been answered by then. From the moment its new
    stream opened, or from the event that brought it up to that version.
    """
    opened = reopening(heard, killed)
    if opened is None:
        return None

    def stored(at: float) -> int:
        return max((a.version for a in actions if a.acked <= at), default=1)

    applied = max((v for v, t, _ in heard.received if t <= opened), default=-1)
    if applied >= stored(opened):
        return opened
    for version, at, _ in heard.received:
        if at > opened:
            applied = max(applied, version)
            if applied >= stored(at):
                return at
    return None


def fault_lines(
    heard: Sequence[Heard], actions: Sequence[Action], killed: float, redis: tuple[float, float], status: int,
    done: int,
) -> list[Line]:  # fmt: skip
    """The fault part's figures: convergence after the kill, order, skips, and what Redis's restart left."""
    a_side = [h for h in heard if h.home == 0]
    b_side = [h for h in heard if h.home == 1]
    times = [converged(h, actions, killed) for h in a_side]
    took = [(t - killed) * 1e3 for t in times if t is not None]
    reopened = [(t - killed) * 1e3 for t in (reopening(h, killed) for h in a_side) if t is not None]
    versions = list(range(1, actions[-1].version + 1))
    before_redis = [[v for v, t, _ in h.received if t < redis[0]] for h in heard]
    orders = [order(r, versions) for r in before_redis]
    twice_or_back = sum(o.twice + o.backwards for o in orders)
    skipped_a = sum(o.missing for o, h in zip(orders, heard, strict=True) if h.home == 0)
    skipped_b = sum(o.missing for o, h in zip(orders, heard, strict=True) if h.home == 1)
    whole_b = sum(o.missing == 0 for o, h in zip(orders, heard, strict=True) if h.home == 1)
    wrong = sum(h.wrong_views for h in heard)
    down, up = redis
    firsts: list[tuple[str, float]] = []
    for h in heard:
        after = [(f"version {v}", t) for v, t, _ in h.received if t > down] + [(s, t) for s, t in h.states if t > down]
        if after:
            firsts.append(min(after, key=lambda said: said[1]))
    kinds: dict[str, int] = {}
    for kind, _ in firsts:
        kinds[kind] = kinds.get(kind, 0) + 1
    heard_ms = [(t - up) * 1e3 for _, t in firsts]
    silent = len(heard) - len(firsts)
    back = "the session came back" if status == 204 else f"the session was lost (the teacher's next action: {status})"
    said = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) or "nothing"
    slowest = max(heard_ms, default=float("nan")) / 1e3
    return [
        Check("A's followers on B after the kill",
              f"{len(took)} of {len(a_side)} converged on the newest stored version, after the kill: "
              f"{_spread(took)}; their streams reopened at B at p50 {_pct(reopened, 0.5):.0f} ms",
              "all of them (the times: a 1 s retry, as EventSource's)", len(took) == len(a_side)),
        Check("versions applied twice or out of order", f"{twice_or_back} (events with a version at or below one "
              f"already applied; {wrong} wrong views)", "0", twice_or_back == 0 and wrong == 0),
        Note("versions skipped to", f"A's followers: {skipped_a} versions never sent to them, skipped to the newest "
             f"on reconnecting (fine: they converged); B's: {skipped_b}"),
        Check("B's followers, through the kill", f"{whole_b} of {len(b_side)} got every version", "all of them",
              whole_b == len(b_side)),
        Check("Redis restarted empty", f"{back}; first heard after Redis's kill: {said}; every follower within "
              f"{slowest:.1f} s of Redis back ({REDIS_DOWN_SECONDS:g} s down); {silent} heard nothing; "
              f"{done} of {len(heard)} streams closed", f"every follower hears, within CHECK_SECONDS "
              f"({CHECK_SECONDS:.0f} s: a constant, no setting)", silent == 0 and slowest <= CHECK_SECONDS),
    ]  # fmt: skip


# -- joins -----------------------------------------------------------------------------------------------

JOIN_VIEW = "/?stage=zero3&model=llama-3.1-405b&gpus=4096&phase=10"
"""The heaviest view a lecture shows (issue 43's): Llama 3.1 405B's step on 4,096 GPUs, drawn afresh for the first."""
JOIN_SECONDS = 0.3
"""A class scanning the code at once: 300 within 0.3 s."""
JOIN_TARGET_P95_MS = 1000.0


async def _get_once(port: int, path: str, at: float) -> tuple[int, float]:
    """At `at` (monotonic), open a connection and GET `path` as a browser would: the status, and seconds to the end."""
    await asyncio.sleep(max(0.0, at - time.monotonic()))
    start = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=2**20)
    try:
        writer.write(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept-Encoding: br\r\n\r\n".encode())
        status, headers, _ = await _head(reader)
        if "content-length" in headers:
            await reader.readexactly(int(headers["content-length"]))
        else:
            async for _ in _chunks(reader):
                pass
        return status, time.monotonic() - start
    finally:
        writer.close()


def _arrivals(port: int, path: str, count: int) -> list[tuple[int, float]]:
    """`count` browsers opening `path` within JOIN_SECONDS, evenly spread: each one's status and time."""

    async def all_of_them() -> list[tuple[int, float]]:
        t0 = time.monotonic() + 0.1
        return list(await asyncio.gather(*(_get_once(port, path, t0 + i * JOIN_SECONDS / count)
                                           for i in range(count))))  # fmt: skip

    return asyncio.run(all_of_them())


def joins(size: Size) -> Section:
    """A class scanning the code at once: `size.followers` follower pages within a second, against the page itself."""
    port = _free_port()
    with contextlib.ExitStack() as stack:
        _app(port, stack)
        teacher = Teacher(port)
        stack.callback(teacher.connection.close)
        teacher.start(JOIN_VIEW)
        teacher.fragment(JOIN_VIEW, "br")  # the teacher's page is open: the page is in the response cache
        _arrivals(port, JOIN_VIEW, 1)
        page = _arrivals(port, JOIN_VIEW, size.followers)
        joined = _arrivals(port, f"/live/{teacher.code}", size.followers)
    page_ms, join_ms = [t * 1e3 for _, t in page], [t * 1e3 for _, t in joined]
    busy = sum(status == 503 for status, _ in joined)
    other = sum(status not in (200, 503) for status, _ in joined)
    p95 = _pct(join_ms, 0.95)
    ratio = _pct(join_ms, 0.5) / _pct(page_ms, 0.5)
    lines: list[Line] = [
        Check("a follower's page, joining", f"{_spread(join_ms)}; {busy} answered 503 busy, {other} other",
              f"p95 <= {JOIN_TARGET_P95_MS:.0f} ms and no 503", p95 <= JOIN_TARGET_P95_MS and busy == other == 0),
        Note("the same view's page from the cache, the same way", _spread(page_ms)),
        Note("joining against the cached page", f"p50 {ratio:.1f} times the cached page's"),
    ]  # fmt: skip
    title = f"joins: {size.followers} students open the follower's page within {JOIN_SECONDS:g} s ({JOIN_VIEW})"
    return Section(title, lines)


# -- kept in its place: a hung Redis, and a reader that stopped reading ----------------------------------

LIVE_ASKERS = 32
"""Clients asking for a follower's page while Redis hangs: as many as a worker's render slots."""
ASK_PAUSE_SECONDS = 0.1
SITE_PATHS = ("/", "/api/memory")
"""What must keep its speed while Redis hangs: the page and the API, each for a run not asked before (a
render: a cached answer never waits for a slot), `gpus` counting up."""
HUNG_RATIO_TARGET = 3.0
STREAM_SECONDS = {"quick": 3, "full": 60}
"""The streams' lifetime for the stalled reader: the default's 60 s, or 3 s in the quick run."""


def _ask_live(port: int, path: str, seconds: float) -> list[tuple[int, float, str]]:
    """Ask for `path` again and again, as a class reloading, for `seconds`: each status, time and Retry-After."""
    answers: list[tuple[int, float, str]] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        began = time.monotonic()
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            response.read()
            answers.append((response.status, time.monotonic() - began, response.getheader("retry-after") or ""))
        except OSError:
            answers.append((0, time.monotonic() - began, ""))
        finally:
            connection.close()
        time.sleep(ASK_PAUSE_SECONDS)
    return answers


def _askers_process(conn: Connection, port: int, path: str, seconds: float) -> None:
    """A process of LIVE_ASKERS threads asking for `path` (its own GIL: the timed requests are not slowed by it)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(LIVE_ASKERS) as pool:
        results = list(pool.map(lambda _: _ask_live(port, path, seconds), range(LIVE_ASKERS)))
    conn.send([a for r in results for a in r])
    conn.close()


def _timed(port: int, seconds: float, first: int) -> dict[str, list[tuple[int, float]]]:
    """SITE_PATHS asked in turn on one kept-alive connection for `seconds`, each with `gpus` from `first` up."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    times: dict[str, list[tuple[int, float]]] = {path: [] for path in SITE_PATHS}
    end = time.monotonic() + seconds
    gpus = first
    while time.monotonic() < end:
        gpus += 1
        for path in SITE_PATHS:
            began = time.monotonic()
            connection.request("GET", f"{path}?gpus={gpus}", headers={"Accept-Encoding": "br"})
            response = connection.getresponse()
            response.read()
            times[path].append((response.status, time.monotonic() - began))
        time.sleep(0.005)
    connection.close()
    return times


def _count_of(port: int, code: str) -> int:
    """The session's followers, as the teacher's bar asks for them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/live/{code}/followers", timeout=10) as response:
        words = html.unescape(response.read().decode())
    found = re.search(r">([\d,]+) following<", words)
    return int(found.group(1).replace(",", "")) if found else -1


def _stalled_reader(port: int, code: str, lifetime: float, out: list[float]) -> None:
    """Connect a stream and never read; `out` gets how long until the teacher's count let it go (-1: never)."""
    with socket.socket() as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a phone asleep: small buffers, never read
        sock.connect(("127.0.0.1", port))
        began = time.monotonic()
        sock.sendall(f"GET /live/{code}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode())
        counted = False
        while time.monotonic() - began < lifetime + 30:
            n = _count_of(port, code)
            counted = counted or n == 1
            if counted and n == 0:
                out.append(time.monotonic() - began)
                return
            time.sleep(0.1)
        out.append(-1.0)


def kept_in_place(size: Size) -> Section:
    """A hung Redis's effect on `/` and the API, a live request's answer meanwhile, and a stalled reader's end."""
    quick = size == QUICK
    seconds = 2.0 if quick else 5.0
    lifetime = STREAM_SECONDS["quick" if quick else "full"]
    redis_port, port, memory_port = _free_port(), _free_port(), _free_port()
    stalled: list[float] = []
    with contextlib.ExitStack() as stack:
        # The stalled reader, on a server of its own with sessions in memory, timed meanwhile.
        _app(memory_port, stack, env={"ZERO_BANDS_LIVE_STREAM_SECONDS": str(lifetime)})
        host = Teacher(memory_port)
        stack.callback(lambda: host.connection.close())
        host.start(FIRST_VIEW)
        reader = threading.Thread(target=_stalled_reader, args=(memory_port, host.code, lifetime, stalled))
        reader.start()
        redis = _redis(redis_port, stack)
        _app(port, stack, f"redis://127.0.0.1:{redis_port}/0")
        teacher = Teacher(port)
        stack.callback(lambda: teacher.connection.close())
        teacher.start(FIRST_VIEW)
        _timed(port, 0.3, 1)  # the worker warmed up (its memos: not the runs timed below)
        usual = _timed(port, seconds, 1000)
        receiver, sender = multiprocessing.Pipe(duplex=False)
        askers = multiprocessing.get_context("spawn").Process(
            target=_askers_process, args=(sender, port, f"/live/{teacher.code}", seconds)
        )
        os.kill(redis.pid, signal.SIGSTOP)
        try:
            askers.start()
            time.sleep(0.2)  # the askers are asking
            hung = _timed(port, seconds - 0.4, 2500)
            asked: list[tuple[int, float, str]] = receiver.recv() if receiver.poll(seconds + 60) else []
            askers.join(30)
        finally:
            os.kill(redis.pid, signal.SIGCONT)
        reader.join(lifetime + 60)
    return Section(
        f"kept in its place: Redis hung (SIGSTOP) for {seconds:g} s under {LIVE_ASKERS} clients asking for a "
        f"follower's page; a stream's reader that never reads (lifetime {lifetime} s)",
        [*hung_lines(usual, hung, asked), stalled_line(stalled, lifetime)],
    )


def hung_lines(
    usual: dict[str, list[tuple[int, float]]], hung: dict[str, list[tuple[int, float]]],
    asked: Sequence[tuple[int, float, str]],
) -> list[Line]:  # fmt: skip
    """The site's speed while Redis hangs, against its speed with Redis well; and what the live requests got."""
    lines: list[Line] = []
    for path in SITE_PATHS:
        before = [t * 1e3 for status, t in usual[path] if status == 200]
        during = [t * 1e3 for _, t in hung[path]]
        refused = sum(status != 200 for status, _ in hung[path])
        ratio = _pct(during, 0.5) / _pct(before, 0.5)
        lines.append(Check(
            f"{path} while Redis hangs",
            f"p50 {_pct(during, 0.5):.2f} ms against {_pct(before, 0.5):.2f} ms with Redis well = {ratio:.2f}x, "
            f"max {max(during, default=0):.0f} ms; {refused} of {len(during)} not 200",
            f"no 503, p50 <= {HUNG_RATIO_TARGET:g}x", refused == 0 and ratio <= HUNG_RATIO_TARGET,
        ))  # fmt: skip
    times = [t * 1e3 for _, t, _ in asked]
    statuses = sorted({status for status, _, _ in asked})
    retry = sorted({after for status, _, after in asked if status == 503})
    lines.append(Check(
        "a follower's page while Redis hangs",
        f"{len(asked)} asked: statuses {statuses}, Retry-After {retry}; {_spread(times)}",
        "503 with Retry-After, each within 1 s", bool(asked) and statuses == [503] and "" not in retry
        and max(times) <= 1000,
    ))  # fmt: skip
    return lines


def stalled_line(stalled: Sequence[float], lifetime: float) -> Line:
    """When the reader that never reads was let go."""
    took = stalled[0] if stalled else -1.0
    figure = f"counted out after {took:.1f} s" if took >= 0 else "still counted"
    return Check("a stream whose reader never reads", figure, f"counted out within the lifetime + 2 s "
                 f"({lifetime + 2:g} s)", 0 <= took <= lifetime + 2)  # fmt: skip


# -- the report ------------------------------------------------------------------------------------------


def run(size: Size) -> list[Section]:
    """Every part, in turn."""
    section, lecture = load(size)
    return [section, address_or_fragment(size, lecture), joins(size), fault(size), kept_in_place(size)]


def report(sections: Sequence[Section], out: Callable[[str], None] = print) -> int:
    """Print each part's lines, ok or MISS beside a target; the exit code: 1 on any MISS."""
    width = max(len(line.name) for s in sections for line in s.lines)
    checks: list[Check] = []
    for section in sections:
        out(section.title)
        for line in section.lines:
            if isinstance(line, Check):
                checks.append(line)
                verdict = "ok  " if line.ok else "MISS"
                out(f"{verdict} {line.name:<{width}}  {line.figure}  (target {line.target})")
            else:
                out(f"     {line.name:<{width}}  {line.figure}")
    missed = [c.name for c in checks if not c.ok]
    met = f"{len(checks) - len(missed)} of {len(checks)} targets met"
    out(met + (f"; missed: {', '.join(missed)}" if missed else ""))
    return 1 if missed else 0


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    """Run every part and print its figures; exit 1 on a miss."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="20 followers and 10 actions: checks it delivers")
    args = parser.parse_args(argv)
    return report(run(QUICK if args.quick else FULL), out)


if __name__ == "__main__":
    raise SystemExit(main())
