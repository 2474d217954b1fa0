"""Past a set number of requests in progress, the next is told at once to come back, not queued.

A lecture hall clicking at the same moment should wait milliseconds, or hear "busy" at once and
retry: never sit for seconds in a queue while the server works through it. The count is per worker
process; the 503 carries `Retry-After` and, since it passes through the security middleware
outside this one, the same headers as every other response.

uvicorn's own `limit_concurrency` is not used: it counts open connections as well as requests, so
a hall of kept-alive browsers would be refused pages the cache holds (docs/architecture.md, "Serving").
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.paths import is_live_path, route_path
from app.serving.plain import plain, send_plain

RETRY_AFTER_SECONDS = 1
BUSY = "Busy"
BUSY_MESSAGE = "ZeRO Bands is busy: many people are using it at this moment. Please try again in a second."
SLOT = "zero_bands.render_slots"
"""Where a live route finds the limit (in its scope), to count in a render of its own: the QR code."""


class Busy(Exception):
    """No render slot is free: answered 503, as the middleware answers (`busy_page`)."""


class ConcurrencyLimit:
    """ASGI middleware: at most `limit` HTTP requests in progress; past that, a 503 at once."""

    def __init__(self, app: ASGIApp, limit: int | None) -> None:
        self.app = app
        self.limit = limit
        self.active = 0
        self.refused = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Count the request in, or turn it away."""
        # Live sessions' routes are never counted: a follower's event stream stays open for the lecture,
        # and every live route may wait on Redis, which must not hold a slot that `/` and the API need
        # (a hung Redis once made them answer 503). Their pages are one per follower, made cheap.
        if scope["type"] != "http" or self.limit is None or is_live_path(route_path(scope)):
            if self.limit is not None and scope["type"] == "http":
                scope[SLOT] = self  # a live route's own render counts in with `slot`, once past Redis
            await self.app(scope, receive, send)
            return
        if self.active >= self.limit:
            self.refused += 1
            await _busy(scope, send)
            return
        self.active += 1
        try:
            # A page renders on the event loop without awaiting (CPU work: a thread would only add
            # hand-offs). Yield once before it holds the loop, so that the requests read in the same
            # turn count themselves in first; otherwise each would see a count of one, and a crowd
            # would queue unseen instead of hearing 503 at once.
            await asyncio.sleep(0)
            await self.app(scope, receive, send)
        finally:
            self.active -= 1

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Count a render in for as long as it runs, or raise Busy: for a route this middleware does not count."""
        if self.limit is not None and self.active >= self.limit:
            self.refused += 1
            raise Busy
        self.active += 1
        try:
            yield
        finally:
            self.active -= 1


def render_slot(scope: Mapping[str, Any]) -> AbstractContextManager[None]:
    """A render slot for a live route's CPU work, or Busy; no limit when the app has none."""
    limit: ConcurrencyLimit | None = scope.get(SLOT)
    return limit.slot() if limit is not None else nullcontext()


async def busy_page(request: Request, exc: Exception) -> Response:
    """The 503 for Busy raised in a route: the same as the middleware's."""
    body, media = plain(request.scope, BUSY, BUSY_MESSAGE, detail="busy")
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS), "Cache-Control": "no-store"}
    return Response(body, 503, headers=headers, media_type=media.decode())


async def _busy(scope: Scope, send: Send) -> None:
    headers = ((b"retry-after", str(RETRY_AFTER_SECONDS).encode()), (b"cache-control", b"no-store"))
    await send_plain(scope, send, 503, BUSY, BUSY_MESSAGE, detail="busy", headers=headers)
