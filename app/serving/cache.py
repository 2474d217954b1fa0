"""The one response cache: a page is a pure function of its address and a few headers.

A class of 300 clicking through four stages asks for the same few pages again and again. Each is
rendered (and compressed, by the middleware inside this one) once, then served from memory with an
ETag, so a browser that has it already gets a 304; a HEAD gets the headers alone. This is the one
place where ETags, 304s and HEAD are written, for the pages, the JSON and the static files alike.
The cache is bounded in bytes, least recently used first out; a room asking at once for a page not
yet kept waits for one render of it.

The bound is on the worker's real memory, whatever is asked: an entry is kept under a fixed-size
hash of its address and key headers, and counted with what Python spends to hold it (measured:
tests/serving/test_cache.py). An address longer than any the app builds (a 64 kB query string, a
long path under /static/) or a key header longer than any a browser sends is answered, not kept:
it is no page a class asks for twice, only churn that would push the real pages out.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections import OrderedDict
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.paths import route_path
from app.serving.config import DEFAULT_CACHE_BYTES

DEFAULT_MAX_BYTES = DEFAULT_CACHE_BYTES
"""About 2,000 compressed pages and fragments (8 kB each): every stage and phase of a lecture's runs."""

# What a cached body depends on besides the address: the content coding the client takes, the htmx
# headers (a fragment or the page, a pushed or replaced address), where the run form stands
# (app/web/templating.py FORM_FIRST_HEADER), and the host, which the "Embed this" panel writes into its
# snippets. Browsers send one of a handful of Accept-Encoding values: each is a key of its own.
KEY_HEADERS = (
    b"accept-encoding", b"host", b"hx-request", b"hx-history-restore-request", b"zb-history", b"zb-form-first",
)  # fmt: skip
# The longest address the app builds is the run form's query with every field filled: about 880
# bytes with 12 characters a value (tests/serving/test_cache.py). A path and query over 3 kB is no link of the app's.
MAX_KEPT_ADDRESS = 3072
# Host is at most 253 characters of DNS name and a port; Accept-Encoding and the htmx headers a few dozen.
MAX_KEPT_HEADER = 300
ENTRY_OVERHEAD = 400
"""Bytes Python spends on an entry beside its body and header bytes: its place in the ordered dict,
the hashed key, the Cached object, its tag and the body's bytes object. About 175 measured with
tracemalloc (CPython 3.11), rounded up for the dict's table just after it grows (tests/serving/test_cache.py)."""
HEADER_OVERHEAD = 100
"""Bytes Python spends on each kept header beside its name and value: a pair and two bytes objects (87 measured)."""
CACHEABLE_STATUS = frozenset({200, 404, 422})
# The app below is asked for the whole response, always: the validators and ranges are answered here.
CONDITIONAL = frozenset({b"if-none-match", b"if-modified-since", b"if-match", b"if-unmodified-since", b"if-range",
                         b"range"})  # fmt: skip
DROPPED = frozenset({b"content-length", b"etag", b"last-modified"})
"""Response headers not kept: the length is sent from the body, and the validator is the cache's own."""
NOT_IN_304 = frozenset({b"content-type", b"content-encoding", b"content-length"})


@dataclass(frozen=True, slots=True)
class Cached:
    """One response as the app gave it: compressed, when the client takes a coding and it was worth it."""

    status: int
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    etag: str
    """A strong validator: a hash of these very bytes, so each coding has its own, the same in every worker."""

    @property
    def size(self) -> int:
        """What it costs the cache: its bytes, and what Python spends to hold them."""
        return ENTRY_OVERHEAD + len(self.body) + sum(HEADER_OVERHEAD + len(k) + len(v) for k, v in self.headers)


def not_modified(headers: Headers, etag: str) -> bool:
    """Whether the client's `If-None-Match` already names `etag` (weak comparison, as RFC 9110 asks)."""
    given = headers.get("if-none-match")
    if given is None:
        return False
    if given.strip() == "*":
        return True
    tags = {tag.strip().removeprefix("W/") for tag in given.split(",")}
    return etag.removeprefix("W/") in tags


def _key(scope: Scope) -> bytes | None:
    """A digest of what the response depends on; None for an address or header too long to keep."""
    path: str = scope["path"]
    query: bytes = scope.get("query_string", b"")
    if len(path) + len(query) > MAX_KEPT_ADDRESS:
        return None
    wanted = dict.fromkeys(KEY_HEADERS, b"")
    for name, value in scope["headers"]:
        if name in wanted:
            if len(value) > MAX_KEPT_HEADER:
                return None
            wanted[name] = value
    parts = (scope.get("scheme", ""), scope.get("root_path", ""), path, query, *wanted.values())
    # 32 bytes whatever the address; repr keeps the parts apart (no separator a value could hold).
    return hashlib.sha256(repr(parts).encode()).digest()


def _varies_beyond_key(headers: tuple[tuple[bytes, bytes], ...]) -> bool:
    # A response that depends on a header the key leaves out (a 422 redrawn from the page on the
    # screen) would be given to the next client with another value of it: not kept.
    named = {n.strip().lower() for k, v in headers if k == b"vary" for n in v.split(b",")}
    return bool(named - set(KEY_HEADERS) - {b""})


async def _send(send: Send, scope: Scope, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    # A HEAD request gets the headers a GET would, and no body.
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


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
        self.entries: OrderedDict[bytes, Cached] = OrderedDict()
        # Renders under way, by key: a room clicking the same new stage at once waits for one.
        self.flights: dict[bytes, asyncio.Future[Cached | None]] = {}
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
        entry = None if key is None else self.entries.get(key)
        if key is None:  # answered as any other, never kept
            self.misses += 1
            entry, _ = await self._render(scope, receive)
        elif entry is not None:
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
        await self._answer(entry, scope, send)

    async def _lead(self, key: bytes, scope: Scope, receive: Receive) -> Cached:
        """Render, and give the render to the requests for the same key that arrive meanwhile."""
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
        """The whole response as the app gives it to a GET, and whether it may be kept."""
        headers = [(k, v) for k, v in scope["headers"] if k not in CONDITIONAL]
        inner = {**scope, "method": "GET", "headers": headers}  # a HEAD fills the cache too
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
        kept = tuple((k.lower(), v) for k, v in start.get("headers", []) if k.lower() not in DROPPED)
        # A cookie set, a header the key leaves out, or no-store (a live session's page): not for the next client.
        private = any(k == b"set-cookie" or (k == b"cache-control" and b"no-store" in v) for k, v in kept)
        shared = not private and not _varies_beyond_key(kept)
        keep = status in CACHEABLE_STATUS and shared
        body = b"".join(chunks)
        etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
        return Cached(status, kept, body, etag), keep

    def _keep(self, key: bytes, entry: Cached) -> None:
        if entry.size > self.max_bytes // 8:
            return  # one huge response must not empty the cache
        self.entries[key] = entry
        self.used += entry.size
        while self.used > self.max_bytes and self.entries:
            _, dropped = self.entries.popitem(last=False)
            self.used -= dropped.size

    async def _answer(self, entry: Cached, scope: Scope, send: Send) -> None:
        length = (b"content-length", str(len(entry.body)).encode())
        if entry.status not in CACHEABLE_STATUS:
            # Never kept (a 503 while busy, a failure): as the app gave it, with no validator to reuse it by.
            await _send(send, scope, entry.status, [*entry.headers, length], entry.body)
            return
        headers = list(entry.headers)
        if not any(k == b"cache-control" for k, _ in headers):
            headers.append((b"cache-control", b"no-cache"))  # always ask before reusing: a 304 makes asking cheap
        headers.append((b"etag", entry.etag.encode()))
        if entry.status == 200 and not_modified(Headers(scope=scope), entry.etag):
            await _send(send, scope, 304, [(k, v) for k, v in headers if k not in NOT_IN_304], b"")
            return
        await _send(send, scope, entry.status, [*headers, length], entry.body)
