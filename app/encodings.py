"""Content codings: which one a client takes, and making and undoing each.

Brotli first where the client offers it (every current browser does, on localhost and HTTPS):
on this app's pages and on htmx it is 10–20 % smaller than gzip. gzip for the rest (wrk, curl).
"""

from __future__ import annotations

import functools
import gzip
from collections.abc import Sequence
from enum import Enum

import brotli
from isal import igzip
from starlette.datastructures import Headers

BR = "br"
GZIP = "gzip"
PREFERENCE = (BR, GZIP)
"""Best first, on a tie in the client's q-values."""

# ISA-L's levels go from 0 to 3; zlib's denser ones (6 and 9) are for bytes made once and sent often.
_ISAL_TOP_LEVEL = 3

_REFUSED = {"q=0", "q=0.0", "q=0.00", "q=0.000"}


class Effort(Enum):
    """How hard to compress: (brotli quality, gzip level), chosen by how often the bytes are sent."""

    FAST = (3, 2)
    """A fragment, made on a click, so a click on a run never drawn is not kept waiting: for an 80 kB
    widget 0.2 ms in brotli (6.5 kB; quality 5 would give 5.8 kB for 0.8 ms) and 0.05 ms in gzip
    (9.1 kB, by ISA-L; zlib's level 3 takes 0.24 ms for 8.8 kB)."""
    DENSE = (11, 6)
    """A full page: about 125 ms once (off the event loop), then sent to a whole room: 5.6 kB for
    the 80 kB page, 3 % fewer than quality 10 (23 ms) and 15 % fewer than FAST."""
    SMALLEST = (11, 9)
    """A static file, made once at start-up."""


def accepted(header: str) -> frozenset[str]:
    """The codings an Accept-Encoding value takes (a q=0 refusal counts as no; `*` means any)."""
    taken: set[str] = set()
    refused: set[str] = set()
    for part in header.split(","):
        coding, _, params = part.strip().partition(";")
        name = coding.strip().lower()
        (refused if params.replace(" ", "").lower() in _REFUSED else taken).add(name)
    if "*" in taken:
        taken |= set(PREFERENCE)
    return frozenset(taken - refused)


def choose(headers: Headers, offered: Sequence[str] = PREFERENCE) -> str | None:
    """The best of `offered` that the client takes, or None for the identity body."""
    return _choose(headers.get("accept-encoding", ""), tuple(offered))


@functools.lru_cache(maxsize=256)
def _choose(header: str, offered: tuple[str, ...]) -> str | None:
    # Browsers send one of a handful of headers: parse each once, not on every request.
    taken = accepted(header)
    return next((coding for coding in PREFERENCE if coding in offered and coding in taken), None)


def compress(body: bytes, coding: str, effort: Effort = Effort.SMALLEST) -> bytes:
    """`body` in `coding`, as hard as `effort` says.

    gzip with mtime=0, so every worker and every start gives the same bytes and the same ETag.
    """
    quality, level = effort.value
    if coding == BR:
        # A 256 KiB window holds any page or asset here whole; the default 4 MiB one only makes the
        # encoder's buffers (and so each worker's memory) larger.
        return bytes(brotli.compress(body, quality=quality, lgwin=18))
    if level <= _ISAL_TOP_LEVEL:
        # Intel's ISA-L: five times zlib's speed at the low levels, the same gzip format.
        return igzip.compress(body, compresslevel=level, mtime=0)
    return gzip.compress(body, compresslevel=level, mtime=0)


def decompress(body: bytes, coding: str) -> bytes:
    """The identity body back from `coding`."""
    return bytes(brotli.decompress(body)) if coding == BR else gzip.decompress(body)
