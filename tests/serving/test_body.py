"""app/serving/body.py: a body read up to its cap, the declared length refused before a byte is read."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from starlette.requests import Request
from starlette.types import Message

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
