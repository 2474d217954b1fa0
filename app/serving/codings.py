"""The content codings the app compresses with, and their levels: one place for the middleware and the live page.

Brotli for browsers (brotli-asgi), gzip for other clients and for browsers over plain http (Starlette's
own), with one threshold: below it a compressed body saves less than its headers cost. Fast levels for
what is made on a click (a never-seen fragment in 0.1 ms of gzip, about 1 ms of brotli); brotli's densest
for the static files, made once per worker and then kept by the cache. docs/architecture.md ("Serving")
has the figures.
"""

from __future__ import annotations

import gzip

import brotli

MINIMUM_SIZE = 500
BROTLI_QUALITY = 5
BROTLI_WINDOW = 18
"""A 256 KiB window holds any response here whole, where the default 4 MiB one only costs memory."""
GZIP_LEVEL = 3
STATIC_BROTLI_QUALITY = 11
STATIC_MINIMUM_SIZE = 256
"""The static files' threshold, lower: each is compressed once, and the icon every first load asks for
(342 B of SVG) travels in 149 B of brotli, with a 22-byte header."""


def chosen(accept_encoding: str) -> str:
    """The coding the middleware answers `accept_encoding` with: "br", "gzip", or "" (none).

    As brotli-asgi and Starlette's gzip read the header: by the name's presence (neither reads `q=0`).
    """
    return "br" if "br" in accept_encoding else "gzip" if "gzip" in accept_encoding else ""


def encoded(body: bytes, coding: str) -> bytes:
    """`body` in `coding` ("br", "gzip" or ""), at the levels the middleware uses for what is made on a click."""
    if coding == "br":
        return bytes(brotli.compress(body, quality=BROTLI_QUALITY, lgwin=BROTLI_WINDOW))
    if coding == "gzip":
        return gzip.compress(body, compresslevel=GZIP_LEVEL, mtime=0)
    return body
