"""The served app under load and abuse: a fast 503 past the limit, slow clients harmless, a bad request refused."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import pytest
from starlette.types import Message, Receive, Scope, Send

from app.serving.config import Settings
from app.serving.overload import ConcurrencyLimit
from app.serving.security import security_headers
from tests.browser.conftest import serving, zero_bands_command
from tests.conftest import asgi_get
from tests.serving.clients import get, slowloris

SECURITY = {k.lower() for k in security_headers(Settings())}


def _command(*extra: str) -> Callable[[int], list[str]]:
    return lambda port: [zero_bands_command(), "--port", str(port), "--workers", "1", *extra]


def _get(url: str, timeout: float = 10) -> tuple[int, dict[str, str], float]:
    status, headers, _, seconds = get(url, timeout=timeout)
    return status, headers, seconds


def test_past_the_limit_a_request_gets_a_503_at_once_with_the_apps_headers() -> None:
    # One request held inside the app; the next, over a limit of one, is refused without waiting.
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(scope: Scope, receive: Receive, send: Send) -> None:
        entered.set()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"done"})

    limited = ConcurrencyLimit(slow, limit=1)

    async def call(path: str) -> tuple[int, dict[bytes, bytes], bytes]:
        sent: list[Message] = []

        async def send(message: Message) -> None:
            sent.append(message)

        async def receive() -> Message:
            return {"type": "http.request", "body": b""}

        scope = {"type": "http", "method": "GET", "path": path, "root_path": "", "headers": []}
        await limited(scope, receive, send)
        return sent[0]["status"], dict(sent[0]["headers"]), sent[1]["body"]

    async def scenario() -> None:
        first = asyncio.create_task(call("/"))
        await entered.wait()
        started = time.monotonic()
        status, headers, body = await call("/?stage=zero1")
        assert time.monotonic() - started < 0.1
        assert status == 503
        assert headers[b"retry-after"] == b"1"
        assert b"busy" in body
        api_status, api_headers, _ = await call("/api/memory")
        assert api_status == 503
        assert api_headers[b"content-type"] == b"application/json"
        # A live session's event stream, open for the lecture, is let through and never counted.
        stream = asyncio.create_task(call("/live/ACD479/events"))
        await asyncio.sleep(0.01)
        assert (limited.active, limited.refused, stream.done()) == (1, 2, False)
        release.set()
        assert (await first)[0] == 200
        assert (await stream)[0] == 200
        assert limited.active == 0
        assert limited.refused == 2

    # In a thread of its own: the browser tests' Playwright keeps an event loop running in this one.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, scenario()).result(timeout=30)


def test_the_limit_counts_requests_whose_work_never_awaits() -> None:
    # A render is CPU work on the event loop: without a yield before it, each request of a crowd read
    # in one turn would find the others not yet counted, and all would queue instead of hearing 503.
    started: list[int] = []

    async def busy(scope: Scope, receive: Receive, send: Send) -> None:
        started.append(1)
        time.sleep(0.01)  # a render, holding the loop
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"drawn"})

    limited = ConcurrencyLimit(busy, limit=3)

    async def crowd() -> list[int]:
        answers = await asyncio.gather(*(asgi_get(limited, f"params={i}") for i in range(10)))
        return sorted(int(sent[0]["status"]) for sent in answers)

    with ThreadPoolExecutor(1) as pool:
        statuses = pool.submit(asyncio.run, crowd()).result(timeout=30)
    assert statuses == [200] * 3 + [503] * 7
    assert len(started) == 3


def test_a_crowd_of_new_runs_meets_the_limit_and_a_crowd_of_cached_ones_does_not() -> None:
    # A page renders on the event loop without awaiting. Ten never-seen runs read at once must still
    # meet a limit of three, the seven past it refused before any is rendered; ten requests for a
    # page already rendered are each answered from the cache at once, and none is refused.
    from app.main import create_app

    app = create_app(Settings(limit_concurrency=3))

    async def call(query: str) -> int:
        return int((await asgi_get(app, query, [(b"hx-request", b"true")]))[0]["status"])

    async def scenario() -> tuple[list[int], list[int]]:
        fresh = await asyncio.gather(*(call(f"stage=zero2&params={10**6 + i}") for i in range(10)))
        await call("stage=zero1")
        cached = await asyncio.gather(*(call("stage=zero1") for _ in range(10)))
        return fresh, cached

    with ThreadPoolExecutor(1) as pool:
        fresh, cached = pool.submit(asyncio.run, scenario()).result(timeout=60)
    assert sorted(fresh) == [200] * 3 + [503] * 7
    assert cached == [200] * 10


def _burst(url: str, paths: list[str]) -> list[tuple[int, dict[str, str]]]:
    """Each path on a connection of its own, the requests all written before any answer is read."""
    host, port = url.removeprefix("http://").split(":")
    sockets = [socket.create_connection((host, int(port)), timeout=10) for _ in paths]
    for sock, path in zip(sockets, paths, strict=True):
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    answers = []
    for sock in sockets:
        with sock:
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        head = data.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in head[1:])
        answers.append((int(head[0].split()[1]), {k.lower(): v for k, v in headers.items()}))
    return answers


def test_the_served_503_carries_the_security_headers() -> None:
    env = {**os.environ, "ZERO_BANDS_LIMIT_CONCURRENCY": "1"}
    with serving(_command(), env=env) as url:
        _get(url + "/")  # the first page a worker draws builds what the others reuse
        # A hundred runs never drawn, asked for at the same moment: past one render, the rest are
        # refused. How many come in one turn of the server's loop is the kernel's timing, so the
        # burst is sent again, with new runs, until one does (the first, on a machine at rest).
        for burst in range(20):
            results = _burst(url, [f"/?stage=zero2&params={10**6 + 100 * burst + i}" for i in range(100)])
            if any(status == 503 for status, _ in results):
                break
    refused = [headers for status, headers in results if status == 503]
    assert refused, "20 bursts of 100 requests at once never passed a limit of 1"
    assert {status for status, _ in results} <= {200, 503}
    for headers in refused:
        assert headers["retry-after"] == "1"
        assert headers["cache-control"] == "no-store"
        assert "etag" not in headers
        assert set(headers) >= SECURITY


def test_clients_that_do_not_finish_their_headers_slow_no_one() -> None:
    # uvicorn keeps them open (no deadline for headers): closing them is the proxy's job, and
    # tests/serving/test_deploying.py checks that the documented proxy does it. Here: others are served as usual.
    with serving(_command()) as url:
        port = int(url.rpartition(":")[2])
        slow, silent = slowloris(port, 100)
        _get(f"{url}/?stage=zero1")
        status, _, seconds = _get(f"{url}/?stage=zero1")
        assert status == 200
        assert seconds < 1
        for sock in [*slow, silent]:
            sock.close()


def test_a_request_the_parser_refuses_gets_a_400_and_the_server_goes_on() -> None:
    with serving(_command()) as url:
        port = int(url.rpartition(":")[2])
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n")
            reply = b""
            while chunk := sock.recv(4096):  # and then the connection is closed
                reply += chunk
        assert reply.split(b"\r\n", 1)[0].lower().startswith(b"http/1.1 400")
        assert _get(f"{url}/api/stages")[0] == 200


@pytest.mark.parametrize("workers", ["2"])
def test_several_workers_serve_the_same_bytes(workers: str) -> None:
    with serving(lambda port: [zero_bands_command(), "--port", str(port), "--workers", workers]) as url:
        answers = {(_get(f"{url}/api/memory?gpus=64")[0]) for _ in range(6)}
        assert answers == {200}
        bodies = set()
        for _ in range(8):
            with urllib.request.urlopen(f"{url}/?stage=zero3", timeout=10) as response:
                bodies.add((response.read(), response.headers["etag"]))
        assert len(bodies) == 1


_LOW_SOFT_LIMIT = """
import os, resource, sys
hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard))
os.execv(sys.argv[1], sys.argv[1:])
"""
"""Start a command with a soft limit of 64 open files, as a shell with `ulimit -Sn 64` would."""


def test_idle_connections_past_the_soft_limit_on_open_files_lock_no_one_out() -> None:
    # The server raises its soft limit to the hard one as it starts: 150 idle sockets, far past 64, leave room.
    def command(port: int) -> list[str]:
        return [sys.executable, "-c", _LOW_SOFT_LIMIT, *_command()(port)]

    with serving(command) as url:
        port = int(url.rpartition(":")[2])
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(150)]
        try:
            assert _get(f"{url}/api/stages", timeout=20)[0] == 200
        finally:
            for sock in idle:
                sock.close()


def test_the_soft_limit_on_open_files_is_raised_to_the_hard_one() -> None:
    code = (
        "import resource; from app.serving.server import raise_open_files;"
        "hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1];"
        "resource.setrlimit(resource.RLIMIT_NOFILE, (64, hard));"
        "print(raise_open_files() == (hard, hard))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "True"
