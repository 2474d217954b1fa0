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

from starlette.types import ASGIApp, Receive, Scope, Send

from app.paths import is_live_path, route_path
from app.serving.plain import send_plain

RETRY_AFTER_SECONDS = 1
BUSY = "Busy"
BUSY_MESSAGE = "ZeRO Bands is busy: many people are using it at this moment. Please try again in a second."


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


async def _busy(scope: Scope, send: Send) -> None:
    headers = ((b"retry-after", str(RETRY_AFTER_SECONDS).encode()), (b"cache-control", b"no-store"))
    await send_plain(scope, send, 503, BUSY, BUSY_MESSAGE, detail="busy", headers=headers)
