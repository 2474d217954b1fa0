"""An address longer than any the app builds is refused at once with a 414, before any route reads it.

Python keeps the last 128 addresses it split (`urllib.parse.urlsplit` is an lru_cache since 3.11),
and Starlette splits each request's URL: with 64 kB query strings those 128 held 16 MB of a worker
(measured with tracemalloc, issue 32), and the copies a route makes more while it runs. The longest
address the app builds is the run form's, about 600 bytes; the bound is nginx's own default for a
request line, where the split cache holds about 3 MB at most.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from app.serving.plain import send_plain

MAX_ADDRESS = 8192
"""Bytes of path and query string: thirteen times the run form's longest query."""
TOO_LONG = "This address is too long: no page or API address of ZeRO Bands is over 8 kB."


class AddressLimit:
    """ASGI middleware: a request whose path and query pass MAX_ADDRESS bytes gets a 414, JSON for the API."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or refuse it for its length alone."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if len(scope["path"]) + len(scope.get("query_string", b"")) <= MAX_ADDRESS:
            await self.app(scope, receive, send)
            return
        await send_plain(scope, send, 414, "Address too long", TOO_LONG)
