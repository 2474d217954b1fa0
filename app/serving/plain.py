"""The answers the serving layer writes itself, around the app: a short page, or JSON under /api/.

Busy (app/serving/overload.py), an address too long (app/serving/address.py) and a failure
(app/serving/security.py `server_error`) are answered before or after any route: no template, only
a heading and a sentence, worded once here for both kinds of client.
"""

from __future__ import annotations

import json
from html import escape

from starlette.types import Scope, Send

from app.paths import is_api_path, route_path

HTML = b"text/html; charset=utf-8"
JSON = b"application/json"


def plain(scope: Scope, heading: str, message: str, detail: str | None = None) -> tuple[bytes, bytes]:
    """The body and its media type: JSON (`detail`, else the message, and the message) for the API, else a page."""
    if is_api_path(route_path(scope)[:64]):  # the start of the path names it: never more read of a long one
        return json.dumps({"detail": detail or message, "message": message}).encode(), JSON
    page = (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(heading)} · ZeRO Bands</title>'
        f"</head>\n<body><h1>{escape(heading)}</h1><p>{escape(message)}</p></body></html>\n"
    )
    return page.encode(), HTML


async def send_plain(
    scope: Scope, send: Send, status: int, heading: str, message: str, detail: str | None = None,
    headers: tuple[tuple[bytes, bytes], ...] = (),
) -> None:  # fmt: skip
    """Send that answer whole, with `headers`; a HEAD gets the headers alone."""
    body, media = plain(scope, heading, message, detail)
    start = [(b"content-type", media), (b"content-length", str(len(body)).encode()), *headers]
    await send({"type": "http.response.start", "status": status, "headers": start})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})
