"""Rendered responses, cached whole: a page is a pure function of its address and a few headers.

A class of 300 clicking through four stages asks for the same few pages again and again. Each is
rendered once, compressed once in the coding its first client takes (brotli for a browser, gzip
for most tools), and from then on served from memory with an ETag, so a browser that has it
already gets a 304. The cache is bounded in bytes, least recently used first out.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from dataclasses import dataclass

import anyio
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.assets import not_modified
from app.config import DEFAULT_CACHE_BYTES
from app.encodings import GZIP, PREFERENCE, Effort, choose, compress, decompress
from app.paths import route_path

DEFAULT_MAX_BYTES = DEFAULT_CACHE_BYTES
"""About 2,000 compressed pages and fragments (8 kB each): every stage and phase of a lecture's runs."""

# What a cached body depends on besides the address: the htmx headers (a fragment or the page, a
# pushed or replaced address) and the host, which the "Embed this" panel writes into its snippets.
KEY_HEADERS = (b"host", b"hx-request", b"hx-history-restore-request", b"zb-history")
CACHEABLE_STATUS = frozenset({200, 404, 422})
COMPRESSIBLE = (b"text/", b"application/json")
_MIN_COMPRESS = 512
IDENTITY = ""


@dataclass(frozen=True)
class Cached:
    """One response as first rendered: kept compressed when it compresses, as it is otherwise.

    Kept in the coding its first client took; a client that takes another gets it made once from
    the identity body (and kept), one that takes none gets the body decompressed again. Kept this
    way a page costs the cache a tenth of its size, so a worker stays small.
    """

    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    forms: dict[str, bytes]
    """Coding to body: "br" and "gzip" for a compressed response, IDENTITY ("") for one that is not."""
    etag: str
    """The identity body's validator; each compressed form's adds "-" and its coding."""

    @property
    def compressed(self) -> bool:
        """Whether it is kept compressed (text of some size)."""
        return IDENTITY not in self.forms

    @property
    def size(self) -> int:
        """What it costs the cache."""
        return sum(len(b) for b in self.forms.values()) + sum(len(k) + len(v) for k, v in self.headers)

    @property
    def body(self) -> bytes:
        """The response as the app gave it."""
        if not self.compressed:
            return self.forms[IDENTITY]
        coding, stored = next(iter(self.forms.items()))
        return decompress(stored, coding)


def _key(scope: Scope) -> tuple[object, ...]:
    wanted = dict.fromkeys(KEY_HEADERS, b"")
    for name, value in scope["headers"]:
        if name in wanted:
            wanted[name] = value
    return (scope.get("scheme"), scope.get("root_path", ""), scope["path"], scope.get("query_string", b""),
            *wanted.values())  # fmt: skip


async def _compress(body: bytes, coding: str, effort: Effort) -> bytes:
    # A full page at brotli's densest takes a tenth of a second: on a thread (brotli and zlib let go
    # of the GIL), so the event loop goes on answering the room meanwhile. A fragment's 0.3 ms is
    # less than the hand-off.
    if effort is Effort.FAST:
        return compress(body, coding, effort)
    return await anyio.to_thread.run_sync(compress, body, coding, effort)


async def _send(send: Send, scope: Scope, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    # A HEAD request gets the headers a GET would, and no body.
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


def _varies_beyond_key(headers: tuple[tuple[bytes, bytes], ...]) -> bool:
    # A response that depends on a header the key leaves out (a 422 redrawn from the page on the
    # screen) would be given to the next client with another value of it: not kept.
    named = {n.strip().lower() for k, v in headers if k == b"vary" for n in v.split(b",")}
    return bool(named - set(KEY_HEADERS) - {b"accept-encoding", b""})


def _effort(scope: Scope) -> Effort:
    # A full page is a first load, sent to a whole room: worth a tenth of a second once (on a thread)
    # for 15 % fewer bytes each time. A fragment answers a click, which should not wait for it.
    fragment = any(name == b"hx-request" for name, _ in scope["headers"])
    return Effort.FAST if fragment else Effort.DENSE


class ResponseCache:
    """ASGI middleware caching the GET and HEAD responses of some paths, bounded in bytes.

    `paths` are cached as they are; `prefixes`, everything under them.
    """

    def __init__(
        self, app: ASGIApp, paths: frozenset[str], prefixes: tuple[str, ...] = (), max_bytes: int = DEFAULT_MAX_BYTES
    ) -> None:
        self.app = app
        self.paths = paths
        self.prefixes = prefixes
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple[object, ...], Cached] = OrderedDict()
        # Renders under way, by key: a room clicking the same new stage at once waits for one.
        self.flights: dict[tuple[object, ...], asyncio.Future[Cached | None]] = {}
        self.used = 0
        self.hits = 0
        self.misses = 0

    def _cacheable(self, scope: Scope) -> bool:
        if scope["type"] != "http" or scope["method"] not in {"GET", "HEAD"}:
            return False
        path = route_path(scope)
        return path in self.paths or path.startswith(self.prefixes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve from the cache, or render once through the app and keep the result."""
        if not self._cacheable(scope):
            await self.app(scope, receive, send)
            return
        key = _key(scope)
        entry = self.entries.get(key)
        if entry is not None:
            self.hits += 1
            self.entries.move_to_end(key)
        elif key in self.flights:
            entry = await self.flights[key]
            if entry is None:  # that render depended on more than the key, or failed: make our own
                self.misses += 1
                entry, _ = await self._render(scope, receive)
        else:
            self.misses += 1
            entry = await self._lead(key, scope, receive)
        await self._answer(key, entry, scope, send)

    async def _lead(self, key: tuple[object, ...], scope: Scope, receive: Receive) -> Cached:
        """Render, and give the render to the requests for the same key that arrive meanwhile.

        A room clicking the same new stage at once then costs one render, not one a student.
        """
        flight: asyncio.Future[Cached | None] = asyncio.get_running_loop().create_future()
        self.flights[key] = flight
        shared: Cached | None = None
        try:
            entry, keep = await self._render(scope, receive)
            if keep:
                self._keep(key, entry)
                shared = entry
            return entry
        finally:
            del self.flights[key]
            flight.set_result(shared)

    async def _render(self, scope: Scope, receive: Receive) -> tuple[Cached, bool]:
        """The response as the app gives it, and whether it may be kept."""
        # Ask for the identity body (compression happens here, once) and for GET (HEAD fills the cache too).
        headers = [(k, v) for k, v in scope["headers"] if k != b"accept-encoding"]
        inner = {**scope, "method": "GET", "headers": headers}
        start: Message = {}
        chunks: list[bytes] = []

        async def capture(message: Message) -> None:
            nonlocal start
            if message["type"] == "http.response.start":
                start = message
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))

        await self.app(inner, receive, capture)
        status = start.get("status", 500)
        kept = tuple(
            (k.lower(), v) for k, v in start.get("headers", []) if k.lower() not in {b"content-length", b"etag"}
        )
        keep = (
            status in CACHEABLE_STATUS
            and not any(k in {b"set-cookie", b"content-encoding"} for k, _ in kept)
            and not _varies_beyond_key(kept)
        )
        body = b"".join(chunks)
        content_type = next((v for k, v in kept if k == b"content-type"), b"")
        if len(body) >= _MIN_COMPRESS and content_type.startswith(COMPRESSIBLE):
            coding = choose(Headers(scope=scope)) or GZIP
            forms = {coding: await _compress(body, coding, _effort(scope))}
        else:
            forms = {IDENTITY: body}
        etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
        return Cached(status, kept, forms, etag), keep

    def _keep(self, key: tuple[object, ...], entry: Cached) -> None:
        if entry.size > self.max_bytes // 8:
            return  # one huge response must not empty the cache
        self.entries[key] = entry
        self.used += entry.size
        self._evict()

    def _evict(self) -> None:
        while self.used > self.max_bytes and self.entries:
            _, dropped = self.entries.popitem(last=False)
            self.used -= dropped.size

    async def _answer(self, key: tuple[object, ...], entry: Cached, scope: Scope, send: Send) -> None:
        if entry.status not in CACHEABLE_STATUS:
            # Never kept (a 503 while busy, a failure): as the app gave it, with no validator to reuse it by.
            body = entry.body
            headers = [*entry.headers, (b"content-length", str(len(body)).encode())]
            await _send(send, scope, entry.status, headers, body)
            return
        request = Headers(scope=scope)
        coding = choose(request, PREFERENCE) if entry.compressed else None
        etag = f'{entry.etag[:-1]}-{coding}"' if coding else entry.etag
        headers = [(k, v) for k, v in entry.headers if k not in {b"cache-control", b"vary"}]
        names = [n.strip() for k, v in entry.headers if k == b"vary" for n in v.split(b",") if n.strip()]
        if entry.compressed:
            names.append(b"Accept-Encoding")
        vary = b", ".join(dict.fromkeys(names))
        # Always ask before reusing: the ETag makes asking cheap (a 304 with no body).
        validators = [(b"etag", etag.encode()), (b"cache-control", b"no-cache")] + ([(b"vary", vary)] if vary else [])
        if entry.status == 200 and not_modified(request, etag):
            kept = [(k, v) for k, v in headers if k not in {b"content-type"}]
            await _send(send, scope, 304, kept + validators, b"")
            return
        body = await self._form(key, entry, coding, _effort(scope)) if coding else entry.body
        headers += [*validators, (b"content-length", str(len(body)).encode())]
        if coding:
            headers.append((b"content-encoding", coding.encode()))
        await _send(send, scope, entry.status, headers, body)

    async def _form(self, key: tuple[object, ...], entry: Cached, coding: str, effort: Effort) -> bytes:
        """The body in `coding`, made once from the identity body if no client asked for it before."""
        form = entry.forms.get(coding)
        if form is None:
            form = entry.forms[coding] = await _compress(entry.body, coding, effort)
            if self.entries.get(key) is entry:
                self.used += len(form)
                self._evict()
        return form
