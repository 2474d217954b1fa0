"""A request's body read up to a cap, by a route's dependency: the route gets the bytes, or word of too many.

A cap keeps memory safe from a body of any size: the declared length is refused before anything is
read, and a body sent without one is read only until it passes the cap. What to answer a body over
the cap (a page, a JSON refusal) is the route's: it is told, not raised at, so that it can first
refuse what it would refuse anyway (a session not found, say) as it did before reading.

A body must also come within a deadline: uvicorn gives none, and a client sending a few bytes at a
time would hold the request (and its place among the renders) for as long as it liked. One past it
is refused at once with a 408, raised: whatever the route, there is nothing to answer but that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from starlette.exceptions import HTTPException
from starlette.requests import Request

BODY_SECONDS = 10.0
"""The whole body within this long: a form or a config of 64 kB takes a fraction of that on a slow phone link."""


@dataclass(frozen=True)
class CappedBody:
    """A body read whole within the cap; or `over`, when it passed the cap (and `data` is then empty)."""

    data: bytes
    over: bool = False

    def field(self, name: str) -> str:
        """A form field's first value, percent-decoded as a browser sends a form ("" when absent)."""
        return (self.values(name) or [""])[0]

    def values(self, name: str) -> list[str]:
        """All of a form field's values, in order (a group of checkboxes)."""
        return parse_qs(self.data.decode("utf-8", "replace")).get(name, [])


def capped(limit: int, seconds: float | None = None) -> Callable[[Request], Coroutine[Any, Any, CappedBody]]:
    """The dependency that reads a request's body up to `limit` bytes, within `seconds` (BODY_SECONDS)."""

    async def read(request: Request) -> CappedBody:
        """The body, or `over` as soon as it passes `limit` bytes (a declared length first); a 408 when too slow."""
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return CappedBody(b"", over=True)
        body = bytearray()
        try:
            async with asyncio.timeout(BODY_SECONDS if seconds is None else seconds):
                async for chunk in request.stream():
                    body += chunk
                    if len(body) > limit:
                        return CappedBody(b"", over=True)
        except TimeoutError:
            # The rest of the body is never read: the connection cannot carry another request.
            raise HTTPException(408, headers={"Connection": "close"}) from None
        return CappedBody(bytes(body))

    return read
