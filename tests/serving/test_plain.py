"""app/serving/plain.py: the serving layer's own answers, a page for people and JSON for the API."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from starlette.types import Message

from app.serving.plain import plain, send_plain
from tests.conftest import dom, text


def _scope(path: str, method: str = "GET") -> dict[str, object]:
    return {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}


@pytest.mark.parametrize(
    ("path", "media", "detail"),
    [("/", "text/html; charset=utf-8", None), ("/api/memory", "application/json", "busy"),
     ("/api/config", "application/json", None), ("/live/ABCDEF", "text/html; charset=utf-8", "busy")],
)  # fmt: skip
def test_a_page_for_people_and_json_for_the_api(path: str, media: str, detail: str | None) -> None:
    body, kind = plain(_scope(path), "Busy <now>", "Try <b>again</b>.", detail)
    assert kind.decode() == media
    if media == "application/json":
        assert json.loads(body) == {"detail": detail or "Try <b>again</b>.", "message": "Try <b>again</b>."}
    else:
        page = dom(body.decode())
        assert (text(page, "title"), text(page, "h1"), text(page, "p")) == (
            "Busy <now> · ZeRO Bands", "Busy <now>", "Try <b>again</b>.",
        )  # fmt: skip
        assert "<b>" not in body.decode()  # the words are text, never markup


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_it_is_sent_whole_with_its_headers_and_a_head_gets_them_alone(method: str) -> None:
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def answer() -> None:
        await send_plain(_scope("/", method), send, 503, "Busy", "Wait.", headers=((b"retry-after", b"1"),))

    # In a thread of its own: a browser test before it in this worker leaves Playwright's loop running here.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, answer()).result(timeout=30)
    start, body = sent
    headers = dict(start["headers"])
    assert (start["status"], headers[b"retry-after"], headers[b"content-type"]) == (
        503,
        b"1",
        b"text/html; charset=utf-8",
    )
    assert int(headers[b"content-length"]) > 0
    assert (body["body"] == b"") is (method == "HEAD")
