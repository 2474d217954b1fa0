"""A request's Host, and the headers the response cache keys on, checked before the cache or the app reads them.

The cache (app/serving/cache.py) keys a response on each key header's last value, and the app reads
the first: a header sent twice (`HX-Request: true`, then an empty one) had a bare fragment kept as the
page, brotli kept for clients that take none, or another site's Host kept in the "Embed this" snippet.
No browser sends one of them twice, so such a request is refused, not repaired.

The Host is written into every absolute address the app builds (the snippets, the join address and its
QR code): with `allowed_hosts` set, any other is refused; without, it must at least be a host[:port]
a browser could send. Starlette's TrustedHostMiddleware does the first, but answers in plain text
with none of this app's wording: here both are answered as every refusal of the serving layer is
(app/serving/plain.py), inside the security headers' middleware so the 400 carries them.
"""

from __future__ import annotations

import re

from starlette.types import ASGIApp, Receive, Scope, Send

from app.serving.cache import KEY_HEADERS
from app.serving.plain import send_plain

ONCE = frozenset({*KEY_HEADERS, b"host"})
"""Headers a request may send at most once."""
MAX_HOST = 255
"""The longest Host taken: a DNS name is at most 253 characters, and a port."""
HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
"""A name (underscores too: a container's), an IPv4 address, or an IPv6 one in brackets, perhaps a port."""
TWICE = "This request sent its {name} header more than once, which no browser does. Send it once."
NOT_A_HOST = "This request's Host header is no host name a browser sends. Open the address you were given."
NOT_OURS = "This server does not answer to that host name. Open the address you were given."


def hostname(host: str) -> str:
    """The host without its port, in lower case: `[::1]:8000` is `[::1]`, `Zero.Example:80` `zero.example`."""
    if host.startswith("["):
        return host[: host.find("]") + 1].lower()
    return host.partition(":")[0].lower()


def allowed(host: str, patterns: tuple[str, ...]) -> bool:
    """Whether `host` (host[:port]) is one of `patterns`: a name, or `*.` and a domain, which any name below matches."""
    name = hostname(host)
    return any(name == p or (p.startswith("*.") and name.endswith(p[1:])) for p in patterns)


def valid_host(host: str, limit: int = MAX_HOST) -> bool:
    """Whether `host` is a host[:port] of at most `limit` characters."""
    return len(host) <= limit and HOST.fullmatch(host) is not None


def _spelled(name: bytes) -> str:
    """A header's name as its specification spells it: HX-Request, ZB-History, Accept-Encoding."""
    words = name.decode().split("-")
    return "-".join(w.upper() if w in ("hx", "zb") else w.title() for w in words)


class HeaderCheck:
    """ASGI middleware: a 400 for a key header sent twice, or a Host that is not allowed or is no host."""

    def __init__(self, app: ASGIApp, allowed_hosts: tuple[str, ...] = ()) -> None:
        self.app = app
        self.allowed_hosts = tuple(p.lower() for p in allowed_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Pass the request on, or refuse it."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        seen: set[bytes] = set()
        host: bytes | None = None
        for name, value in scope["headers"]:
            if name in ONCE:
                if name in seen:
                    await send_plain(scope, send, 400, "A header sent twice", TWICE.format(name=_spelled(name)))
                    return
                seen.add(name)
                if name == b"host":
                    host = value
        why = self._refusal(host)
        if why:
            await send_plain(scope, send, 400, "Not this server's host name", why)
            return
        await self.app(scope, receive, send)

    def _refusal(self, sent: bytes | None) -> str:
        """Why the Host is refused; empty if it is not."""
        # No Host at all (HTTP/1.0): Starlette uses the server's own address, which no client chose.
        if sent is None:
            return NOT_OURS if self.allowed_hosts else ""
        host = sent.decode("latin-1")
        if not valid_host(host):
            return NOT_A_HOST
        if self.allowed_hosts and not allowed(host, self.allowed_hosts):
            return NOT_OURS
        return ""
