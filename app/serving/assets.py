"""The static files: read once at start-up, minified, the widget's scripts bundled, fingerprinted.

Every file under static/ is read once, into memory. Its address carries a hash of its content
(`/static/app.css?v=1a2b3c4d5e6f`), so a new release changes the address and a browser never keeps
an old stylesheet beside a new page: that address may be cached for good (`immutable`). The same
file asked for without the hash, or with an old one, is still served, with `no-cache`.

Our own stylesheet and scripts are minified as they are read (rcssmin, rjsmin: comments and spaces
only, no renaming): the source keeps its comments and the wire does not carry them, a quarter of
the first load (docs/architecture.md, "Serving"). What this module does not do, the stack around
it does once for every response: compression (app/main.py), and the ETag, 304 and HEAD
(app/serving/cache.py), which also keeps each compressed asset in memory after its first request.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl

import rcssmin  # type: ignore[import-untyped]
import rjsmin  # type: ignore[import-untyped]
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from app.paths import route_path

FINGERPRINT = "v"
"""The query parameter that carries an asset's content hash."""

IMMUTABLE = "public, max-age=31536000, immutable"
REVALIDATE = "no-cache"

_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}

BUNDLES = {"app.js": ("swap.js", "grid.js", "step.js", "keys.js", "tools.js")}
"""Scripts every page with the widget runs, served as one file in this order: one request and one
compressed stream instead of five. Each stays its own module under static/, and is still served alone.
live.js is not in it: only a live session's pages load it (templates/_layout.html), after the bundle
whose `byId` it uses; 977 B of every other first load (docs/performance.md)."""


@dataclass(frozen=True)
class Asset:
    """One static file as served, and its fingerprint."""

    media_type: str
    body: bytes
    """As served: minified for our own CSS and scripts, as on disk for the rest."""
    digest: str
    """The first 12 hex digits of the served body's SHA-256."""


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
    return Asset(media_type, body, hashlib.sha256(body).hexdigest()[:12])


def load(directory: Path) -> dict[str, Asset]:
    """Every file directly under `directory`, read and minified once; and the bundles."""
    assets = {path.name: _asset(path.name, minified(path.name, path.read_bytes()))
              for path in sorted(directory.iterdir()) if path.is_file()}  # fmt: skip
    for name, parts in BUNDLES.items():
        assets[name] = _asset(name, bundled(directory, parts))
    return assets


class StaticAssets:
    """An ASGI app for /static: each file from memory, kept for a year at its fingerprinted address."""

    def __init__(self, directory: Path) -> None:
        self.assets = load(directory)

    def fingerprint(self, name: str) -> str:
        """The query that marks this version of an asset: 'v=…' (a missing asset raises KeyError)."""
        return f"{FINGERPRINT}={self.assets[name].digest}"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request for an asset."""
        # Below the mount, Starlette's root_path ends in "/static": what is left is the file's name.
        asset = self.assets.get(route_path(scope).lstrip("/"))
        response: Response
        if scope["method"] not in {"GET", "HEAD"}:
            response = PlainTextResponse("Method not allowed.\n", 405, headers={"Allow": "GET, HEAD"})
        elif asset is None:
            response = PlainTextResponse("Not found.\n", 404)
        else:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            fresh = query.get(FINGERPRINT) == asset.digest
            cache_control = IMMUTABLE if fresh else REVALIDATE
            response = Response(asset.body, media_type=asset.media_type, headers={"Cache-Control": cache_control})
        await response(scope, receive, send)
