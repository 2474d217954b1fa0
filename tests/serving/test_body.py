"""app/serving/body.py: a body read up to its cap, the declared length refused before a byte is read."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor

import httpx2 as httpx
import pytest
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import Message

from app.main import create_app
from app.serving import body
from app.serving.body import CappedBody, capped


def _request(chunks: list[bytes], declared: int | None) -> tuple[Request, list[int]]:
    """A POST whose body comes in `chunks`; and a list that counts the chunks the server took."""
    taken: list[int] = []
    headers = [] if declared is None else [(b"content-length", str(declared).encode())]

    async def receive() -> Message:
        taken.append(1)
        i = len(taken) - 1
        return {"type": "http.request", "body": chunks[i], "more_body": i < len(chunks) - 1}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": headers, "query_string": b""}
    return Request(scope, receive), taken


@pytest.mark.parametrize(
    ("chunks", "declared", "limit", "read", "taken"),
    [
        ([b"abc", b"def"], 6, 6, CappedBody(b"abcdef"), 2),
        ([b"abc", b"def"], None, 6, CappedBody(b"abcdef"), 2),
        ([b"abc", b"defg"], 7, 6, CappedBody(b"", over=True), 0),  # declared over: nothing read
        ([b"abcd", b"efg", b"hij"], None, 6, CappedBody(b"", over=True), 2),  # stops at the chunk that passes
        ([b"abcd", b"efg"], 3, 6, CappedBody(b"", over=True), 2),  # a declared length that lies is not believed
        ([b""], None, 6, CappedBody(b""), 1),
    ],
)
def test_a_body_is_read_up_to_its_cap(
    chunks: list[bytes], declared: int | None, limit: int, read: CappedBody, taken: int
) -> None:
    request, count = _request(chunks, declared)
    # In a thread of its own: a worker that ran the browser tests keeps Playwright's loop running in this one.
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(asyncio.run, capped(limit)(request)).result(timeout=10) == read
    assert len(count) == taken


@pytest.mark.parametrize(
    ("data", "name", "value"),
    [
        (b"view=%2F%3Fstage%3Dzero2&paused=1", "view", "/?stage=zero2"),
        (b"view=a&view=b", "view", "a"),
        (b"paused=1", "view", ""),
        (b"config=%7B%22a%22%3A+1%7D", "config", '{"a": 1}'),
        (b"config=%FF", "config", "\ufffd"),
    ],
)
def test_a_form_field_is_read_as_a_browser_sends_it(data: bytes, name: str, value: str) -> None:
    assert CappedBody(data).field(name) == value


def test_a_body_slower_than_its_deadline_is_refused_with_a_408_at_the_deadline() -> None:
    async def receive() -> Message:
        await asyncio.sleep(0.05)  # a few bytes at a time, never done
        return {"type": "http.request", "body": b"a", "more_body": True}

    scope = {"type": "http", "method": "POST", "path": "/", "headers": [(b"content-length", b"6")], "query_string": b""}

    async def scenario() -> float:
        started = time.monotonic()
        with pytest.raises(HTTPException) as refused:
            await capped(1000, seconds=0.3)(Request(scope, receive))
        assert refused.value.status_code == 408
        assert refused.value.headers == {"Connection": "close"}
        return time.monotonic() - started

    with ThreadPoolExecutor(1) as pool:
        assert 0.3 <= pool.submit(asyncio.run, scenario()).result(timeout=10) < 5


@pytest.mark.parametrize(
    ("path", "kind"), [("/api/config", "application/json"), ("/config", "text/html")]
)  # fmt: skip
def test_a_route_answers_a_body_too_slow_with_a_clear_408(
    monkeypatch: pytest.MonkeyPatch, path: str, kind: str
) -> None:
    monkeypatch.setattr(body, "BODY_SECONDS", 0.3)

    async def dribble() -> AsyncIterator[bytes]:
        yield b'{"zero_optimization": '
        await asyncio.sleep(30)
        yield b"{}}"

    async def scenario() -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as client:
            return await client.post(path, content=dribble(), headers={"Content-Type": "application/json"})

    with ThreadPoolExecutor(1) as pool:
        response = pool.submit(asyncio.run, scenario()).result(timeout=20)
    assert response.status_code == 408
    assert response.headers["content-type"].startswith(kind)
    assert "came too slowly" in response.text
