"""The static assets, served from memory: fingerprinted, precompressed, cached for a year.

Every file under static/ is read once at start-up. Its address carries a hash of its content
(`/static/app.css?v=1a2b3c4d5e6f`), so a new release changes the address and a browser never
keeps an old stylesheet beside a new page: that address may be cached for good (`immutable`).
The same file asked for without the hash, or with an old one, is still served, with `no-cache`.
Our own stylesheet and scripts are minified as they are read (rcssmin, rjsmin: comments and
spaces only, no renaming), so the source keeps its comments and the wire does not carry them. The
brotli and gzip forms are made once, at their highest levels, and never again per request.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl

import rcssmin  # type: ignore[import-untyped]
import rjsmin  # type: ignore[import-untyped]
from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from app.encodings import PREFERENCE, choose, compress
from app.paths import route_path

FINGERPRINT = "v"
"""The query parameter that carries an asset's content hash."""

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"

_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
# Below this a compressed body saves less than its own header costs.
_MIN_COMPRESS = 256

BUNDLES = {"app.js": ("swap.js", "grid.js", "step.js", "keys.js", "tools.js")}
"""Scripts every page with the widget runs, served as one file in this order: one request and one
compressed stream instead of five (brotli finds what they share). Each stays its own module under
static/, and is still served alone."""


@dataclass(frozen=True)
class Asset:
    """One static file as served, its fingerprint, and its compressed forms."""

    name: str
    media_type: str
    body: bytes
    """As served: minified for our own CSS and scripts, as on disk for the rest."""
    digest: str
    """The first 12 hex digits of the served body's SHA-256."""
    forms: dict[str, bytes] = field(default_factory=dict)
    """Coding ("br", "gzip") to the body in it; empty for files too small or not text."""

    def etag(self, coding: str | None) -> str:
        """A strong validator per form: each compressed body is different bytes, so it has its own."""
        return f'"{self.digest}-{coding}"' if coding else f'"{self.digest}"'


def minified(name: str, body: bytes) -> bytes:
    """Our own stylesheet and scripts without comments and spare spaces; anything else as it is."""
    if name.endswith(".css"):
        return str(rcssmin.cssmin(body.decode())).encode()
    if name.endswith(".js") and not name.endswith(".min.js"):
        return str(rjsmin.jsmin(body.decode())).encode()
    return body


def bundled(directory: Path, parts: tuple[str, ...]) -> bytes:
    """The scripts `parts`, minified, one after the other (each ends its last statement)."""
    return b"\n".join(minified(name, (directory / name).read_bytes()).rstrip(b";\n") + b";" for name in parts)


def _asset(name: str, body: bytes) -> Asset:
    media_type = _TYPES.get(Path(name).suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
    compressible = media_type.startswith(("text/", "image/svg")) and len(body) >= _MIN_COMPRESS
    forms = {coding: compress(body, coding) for coding in PREFERENCE} if compressible else {}
    return Asset(name, media_type, body, hashlib.sha256(body).hexdigest()[:12], forms)


def load(directory: Path) -> dict[str, Asset]:
    """Every file directly under `directory`, read, minified and compressed once; and the bundles."""
    assets = {path.name: _asset(path.name, minified(path.name, path.read_bytes()))
              for path in sorted(directory.iterdir()) if path.is_file()}  # fmt: skip
    for name, parts in BUNDLES.items():
        assets[name] = _asset(name, bundled(directory, parts))
    return assets


def not_modified(headers: Headers, etag: str) -> bool:
    """Whether the client's `If-None-Match` already names `etag` (weak comparison, as RFC 9110 asks)."""
    given = headers.get("if-none-match")
    if given is None:
        return False
    if given.strip() == "*":
        return True
    tags = {tag.strip().removeprefix("W/") for tag in given.split(",")}
    return etag.removeprefix("W/") in tags


class StaticAssets:
    """An ASGI app for /static: GET and HEAD, fingerprinted URLs, 304s, brotli and gzip made in advance."""

    def __init__(self, directory: Path) -> None:
        self.assets = load(directory)

    def fingerprint(self, name: str) -> str:
        """The query that marks this version of an asset: 'v=…' (a missing asset raises KeyError)."""
        return f"{FINGERPRINT}={self.assets[name].digest}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request for an asset."""
        assert scope["type"] == "http"
        method = scope["method"]
        # Below the mount, Starlette's root_path ends in "/static": what is left is the file's name.
        asset = self.assets.get(route_path(scope).lstrip("/"))
        if method not in {"GET", "HEAD"}:
            await _plain(send, 405, b"Method not allowed.\n", [(b"allow", b"GET, HEAD")])
            return
        if asset is None:
            await _plain(send, 404, b"Not found.\n", [])
            return
        headers = Headers(scope=scope)
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        fresh = query.get(FINGERPRINT) == asset.digest
        coding = choose(headers, tuple(asset.forms))
        etag = asset.etag(coding)
        common = [
            (b"cache-control", (IMMUTABLE if fresh else REVALIDATE).encode()),
            (b"etag", etag.encode()),
            (b"vary", b"Accept-Encoding"),
        ]
        if not_modified(headers, etag):
            await send({"type": "http.response.start", "status": 304, "headers": common})
            await send({"type": "http.response.body", "body": b""})
            return
        body = asset.forms[coding] if coding else asset.body
        response_headers = [
            (b"content-type", asset.media_type.encode()),
            (b"content-length", str(len(body)).encode()),
            *common,
        ]
        if coding:
            response_headers.append((b"content-encoding", coding.encode()))
        await send({"type": "http.response.start", "status": 200, "headers": response_headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


async def _plain(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
