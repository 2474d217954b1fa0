"""The static assets, served from memory: fingerprinted, precompressed, cached for a year.

Every file under static/ is read once at start-up. Its address carries a hash of its content
(`/static/app.css?v=1a2b3c4d5e6f`), so a new release changes the address and a browser never
keeps an old stylesheet beside a new page: that address may be cached for good (`immutable`).
The same file asked for without the hash, or with an old one, is still served, with `no-cache`.
The gzip form is made once, at the highest level, and never again per request.
"""

from __future__ import annotations

import gzip
import hashlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl

from starlette.datastructures import Headers
from starlette.types import Receive, Scope, Send

from app.paths import route_path

FINGERPRINT = "v"
"""The query parameter that carries an asset's content hash."""

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"

_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
# Below this a gzip body saves less than its own header costs.
_MIN_GZIP = 512


@dataclass(frozen=True)
class Asset:
    """One static file, its fingerprint, and both forms of its body."""

    name: str
    media_type: str
    body: bytes
    gzipped: bytes | None
    digest: str
    """The first 12 hex digits of the content's SHA-256."""

    def etag(self, gzipped: bool) -> str:
        """A strong validator per form: the gzip body is different bytes, so it has its own."""
        return f'"{self.digest}-gz"' if gzipped else f'"{self.digest}"'


def load(directory: Path) -> dict[str, Asset]:
    """Every file directly under `directory`, read and compressed once."""
    assets: dict[str, Asset] = {}
    for path in sorted(directory.iterdir()):
        if not path.is_file():
            continue
        body = path.read_bytes()
        media_type = _TYPES.get(path.suffix) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        compressible = media_type.startswith(("text/", "image/svg")) and len(body) >= _MIN_GZIP
        # mtime=0: the same bytes from every worker and every start, so every worker gives one ETag.
        gzipped = gzip.compress(body, compresslevel=9, mtime=0) if compressible else None
        digest = hashlib.sha256(body).hexdigest()[:12]
        assets[path.name] = Asset(path.name, media_type, body, gzipped, digest)
    return assets


def accepts_gzip(headers: Headers) -> bool:
    """Whether the client takes gzip (a q=0 refusal counts as no)."""
    for part in headers.get("accept-encoding", "").split(","):
        coding, _, params = part.strip().partition(";")
        if coding.strip().lower() in {"gzip", "*"}:
            return params.replace(" ", "").lower() not in {"q=0", "q=0.0", "q=0.00", "q=0.000"}
    return False


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
    """An ASGI app for /static: GET and HEAD, fingerprinted URLs, 304s, gzip made in advance."""

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
        use_gzip = asset.gzipped is not None and accepts_gzip(headers)
        etag = asset.etag(use_gzip)
        common = [
            (b"cache-control", (IMMUTABLE if fresh else REVALIDATE).encode()),
            (b"etag", etag.encode()),
            (b"vary", b"Accept-Encoding"),
        ]
        if not_modified(headers, etag):
            await send({"type": "http.response.start", "status": 304, "headers": common})
            await send({"type": "http.response.body", "body": b""})
            return
        body = asset.gzipped if use_gzip and asset.gzipped is not None else asset.body
        response_headers = [
            (b"content-type", asset.media_type.encode()),
            (b"content-length", str(len(body)).encode()),
            *common,
        ]
        if use_gzip:
            response_headers.append((b"content-encoding", b"gzip"))
        await send({"type": "http.response.start", "status": 200, "headers": response_headers})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


async def _plain(send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]]) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()), *extra]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
