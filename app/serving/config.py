"""Settings read from the environment once, at start-up."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from urllib.parse import urlsplit

from app.live.hub import ADDRESS_SHARE

FRAME_ANCESTORS_ENV = "ZERO_BANDS_FRAME_ANCESTORS"
DEFAULT_FRAME_ANCESTORS = "* file:"
"""Any web page, and a page opened from disk (a slide deck): in CSP, `*` matches network schemes only."""
MAX_FRAME_ANCESTORS_LENGTH = 2048
# Schemes that name no place a page can be framed from, only code or inline content.
REFUSED_SCHEMES = ("javascript:", "data:", "vbscript:", "blob:", "filesystem:")
CACHE_ENV = "ZERO_BANDS_CACHE_MB"
DEFAULT_CACHE_BYTES = 16 * 2**20
LIMIT_ENV = "ZERO_BANDS_LIMIT_CONCURRENCY"
DEFAULT_LIMIT = 32
"""Requests in progress per worker past which the next gets a 503 at once. A cached answer is in
progress for well under a millisecond, so only renders pile up: 32 of them take about a second."""
REDIS_ENV = "ZERO_BANDS_REDIS_URL"
"""Where live sessions are kept when several workers or machines serve them; unset: in this process."""
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
FOLLOWERS_ENV = "ZERO_BANDS_LIVE_FOLLOWERS"
DEFAULT_FOLLOWERS = 500
"""A session's followers past which the next is told the session is full: a large lecture hall."""
SHARE_ENV = "ZERO_BANDS_LIVE_ADDRESS_SHARE"
"""The percentage of a session's places one client address may hold: 80 by default (app/live/hub.py
ADDRESS_SHARE), so a class behind one school address fits; lower it where every student has an address of
their own, and one script can then hold less of the room."""
STREAM_ENV = "ZERO_BANDS_LIVE_STREAM_SECONDS"
DEFAULT_STREAM_SECONDS = 60
"""How long one follower's event stream lasts before the server ends it and the browser opens the next
(with Last-Event-ID, missing nothing): a client that stopped reading is no longer counted after it."""
WORKERS_ENV = "ZERO_BANDS_WORKERS"
"""Set by `zero-bands` for its workers: sessions kept in memory need the one process."""
PUBLIC_URL_ENV = "ZERO_BANDS_PUBLIC_URL"
"""The address students and course pages reach the app at: a live session's join address and QR code,
and the snippets' absolute addresses, are built on it rather than on the address the request came to."""
MAX_PUBLIC_URL = 512
ALLOWED_HOSTS_ENV = "ZERO_BANDS_ALLOWED_HOSTS"
"""The host names the app answers to, comma-separated (`*.example.edu` for any name below): a request with
another Host is refused, so that no snippet or join address is ever written on a host the operator did not name."""
MAX_ALLOWED_HOSTS = 2048
_ALLOWED_HOST = re.compile(r"(?:\*\.)?[a-z0-9](?:[a-z0-9_.-]*[a-z0-9])?|\[[0-9a-f:.]+\]", re.IGNORECASE)
"""A name or an address (IPv6 in brackets), no port; or `*.` and a domain."""
LISTEN_HOST_ENV = "ZERO_BANDS_LISTEN_HOST"
"""Set by `zero-bands` for its workers: the address it listens on (--host), so that a teacher on a loopback
address can be told whether students can reach this machine at all."""

# A CSP source expression: a keyword, a scheme, or a host with optional scheme, port and path.
# Anything else (a ';' or ',' above all) could smuggle a second directive into the header.
_SOURCE = re.compile(
    r"""^(?:
        \*
      | '(?:self|none)'
      | [a-z][a-z0-9+.-]*:
      | (?:[a-z][a-z0-9+.-]*://)?(?:\*\.)?[a-z0-9-]+(?:\.[a-z0-9-]+)*(?::(?:\d{1,5}|\*))?(?:/[^\s;,]*)?
    )$""",
    re.IGNORECASE | re.VERBOSE,
)


class SettingsError(ValueError):
    """A setting in the environment is not usable; the message says which and why."""


@dataclass(frozen=True)
class Settings:
    """What an operator can configure."""

    frame_ancestors: str = DEFAULT_FRAME_ANCESTORS
    limit_concurrency: int | None = DEFAULT_LIMIT
    """None: no limit."""
    cache_bytes: int = DEFAULT_CACHE_BYTES
    """What the rendered responses may hold, per worker; 0 renders every request afresh."""
    redis_url: str = ""
    """Live sessions in Redis; empty: in this process's memory."""
    live_followers: int = DEFAULT_FOLLOWERS
    live_address_share: Fraction = ADDRESS_SHARE
    """The part of a session's places one client address may hold."""
    live_stream_seconds: float = DEFAULT_STREAM_SECONDS
    workers: int = 1
    """Worker processes serving this address: more than one needs Redis for live sessions."""
    public_url: str = ""
    """Where students reach the app (scheme, host, port, prefix; no trailing slash); empty: the request's own."""
    listen_host: str = ""
    """The address the server listens on, when `zero-bands` started it; empty: not known."""
    allowed_hosts: tuple[str, ...] = ()
    """The host names a request's Host may name (`*.example.edu`: any below it); empty: any valid host."""

    @property
    def live(self) -> bool:
        """Whether live sessions can be served: by Redis, or by the one process that keeps them."""
        return bool(self.redis_url) or self.workers == 1

    def __post_init__(self) -> None:
        if self.redis_url and not self.redis_url.startswith(REDIS_SCHEMES):
            raise SettingsError(
                f"{REDIS_ENV}={quoted(self.redis_url)} is not a Redis address such as redis://localhost:6379/0"
            )
        if self.public_url:
            check_public_url(self.public_url)
        check_allowed_hosts(self.allowed_hosts)
        if self.live_followers < 1:
            raise SettingsError(f"{FOLLOWERS_ENV} must be a whole number of at least 1")
        if not 0 < self.live_address_share <= 1:
            raise SettingsError(f"{SHARE_ENV} must be a percentage from 1 to 100")
        if not self.live_stream_seconds > 0:
            raise SettingsError(f"{STREAM_ENV} must be a number of seconds above 0")
        if self.limit_concurrency is not None and self.limit_concurrency < 1:
            raise SettingsError(f"{LIMIT_ENV} must be a whole number of at least 1, or 'none'")
        if len(self.frame_ancestors) > MAX_FRAME_ANCESTORS_LENGTH:
            raise SettingsError(
                f"{FRAME_ANCESTORS_ENV} is {len(self.frame_ancestors):,} characters long; "
                f"at most {MAX_FRAME_ANCESTORS_LENGTH:,} are accepted"
            )
        if not self.frame_ancestors.isprintable():
            raise SettingsError(f"{FRAME_ANCESTORS_ENV} contains a line break or control character")
        sources = self.frame_ancestors.split(" ")
        sources = [source for source in sources if source]
        if not sources:
            raise SettingsError(f"{FRAME_ANCESTORS_ENV} is empty; use 'none' to forbid embedding")
        for source in sources:
            if source.lower().startswith(REFUSED_SCHEMES):
                raise SettingsError(
                    f"{FRAME_ANCESTORS_ENV}: {quoted(source)} names no site that could embed the page; "
                    "use https: or an origin such as https://*.example.edu"
                )
            port = _PORT.search(source)
            if port and port.group(1) != "*" and not 0 < int(port.group(1)) <= 65535:
                raise SettingsError(f"{FRAME_ANCESTORS_ENV}: {quoted(source)} has no valid port (1-65535)")
            if not _SOURCE.match(source):
                raise SettingsError(
                    f"{FRAME_ANCESTORS_ENV}: {quoted(source)} is not a CSP source expression "
                    "(examples: * 'self' 'none' https: https://*.example.edu)"
                )
        if "'none'" in sources and len(sources) > 1:
            raise SettingsError(f"{FRAME_ANCESTORS_ENV}: 'none' cannot be combined with other sources")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Settings:
        """Settings from environment variables, with defaults for the unset ones."""
        limit = environ.get(LIMIT_ENV, str(DEFAULT_LIMIT)).strip()
        if limit.lower() == "none":
            limit_concurrency = None
        elif limit.isdigit() and len(limit) < 10:
            limit_concurrency = int(limit)
        else:
            raise SettingsError(f"{LIMIT_ENV}={quoted(limit)} is not a whole number of at least 1, or 'none'")
        cache = environ.get(CACHE_ENV, str(DEFAULT_CACHE_BYTES // 2**20)).strip()
        if not (cache.isdigit() and len(cache) < 6):
            raise SettingsError(
                f"{CACHE_ENV}={quoted(cache)} is not a whole number of megabytes (0 turns the cache off)"
            )
        followers = environ.get(FOLLOWERS_ENV, str(DEFAULT_FOLLOWERS)).strip()
        if not (followers.isdigit() and len(followers) < 7):
            raise SettingsError(f"{FOLLOWERS_ENV}={quoted(followers)} is not a whole number of followers")
        share = environ.get(SHARE_ENV, str(ADDRESS_SHARE * 100)).strip()
        if not (share.isdigit() and 1 <= int(share) <= 100):
            raise SettingsError(f"{SHARE_ENV}={quoted(share)} is not a percentage from 1 to 100")
        stream = environ.get(STREAM_ENV, str(DEFAULT_STREAM_SECONDS)).strip()
        if not (stream.replace(".", "", 1).isdigit() and len(stream) < 10):
            raise SettingsError(f"{STREAM_ENV}={quoted(stream)} is not a number of seconds")
        workers = environ.get(WORKERS_ENV, "1").strip()
        public_url = environ.get(PUBLIC_URL_ENV, "").strip()
        return cls(
            frame_ancestors=environ.get(FRAME_ANCESTORS_ENV, DEFAULT_FRAME_ANCESTORS).strip(),
            limit_concurrency=limit_concurrency,
            cache_bytes=int(cache) * 2**20,
            redis_url=environ.get(REDIS_ENV, "").strip(),
            live_followers=int(followers),
            live_address_share=Fraction(int(share), 100),
            live_stream_seconds=float(stream),
            workers=int(workers) if workers.isdigit() and len(workers) < 7 else 1,
            public_url=public_url.rstrip("/"),
            listen_host=environ.get(LISTEN_HOST_ENV, "").strip(),
            allowed_hosts=allowed_hosts(environ.get(ALLOWED_HOSTS_ENV, "")),
        )


def check_public_url(url: str) -> None:
    """Raise a SettingsError saying why `url` is not an address students could open.

    It must be http or https, with a host, perhaps a port and a path prefix; no query, fragment, user name,
    space or control character.
    """
    shown = quoted(url)
    if len(url) > MAX_PUBLIC_URL:
        raise SettingsError(f"{PUBLIC_URL_ENV} is {len(url):,} characters long; at most {MAX_PUBLIC_URL} are accepted")
    if not url.isprintable() or " " in url:
        raise SettingsError(f"{PUBLIC_URL_ENV}={shown} contains a space, line break or control character")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise SettingsError(f"{PUBLIC_URL_ENV}={shown} has no valid port (1-65535)") from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise SettingsError(
            f"{PUBLIC_URL_ENV}={shown} is not an http or https address such as http://192.168.1.20:8000 "
            "or https://zero.example.edu/tools/zero"
        )
    if parts.query or parts.fragment or url.endswith(("?", "#")) or parts.username is not None:
        raise SettingsError(f"{PUBLIC_URL_ENV}={shown} has a query, fragment or user name: give the address alone")
    if port == 0:
        raise SettingsError(f"{PUBLIC_URL_ENV}={shown} has no valid port (1-65535)")


def allowed_hosts(text: str) -> tuple[str, ...]:
    """The host names in a comma-separated list, in lower case; a SettingsError for one that is no host name."""
    if len(text) > MAX_ALLOWED_HOSTS:
        raise SettingsError(f"{ALLOWED_HOSTS_ENV} is {len(text):,} characters long; at most {MAX_ALLOWED_HOSTS:,}")
    hosts = tuple(host.strip().lower() for host in text.split(",") if host.strip())
    check_allowed_hosts(hosts)
    return hosts


def check_allowed_hosts(hosts: tuple[str, ...]) -> None:
    """Raise a SettingsError naming the first of `hosts` that is no host name, or has a port."""
    for host in hosts:
        if not _ALLOWED_HOST.fullmatch(host):
            raise SettingsError(
                f"{ALLOWED_HOSTS_ENV}: {quoted(host)} is not a host name without a port "
                "(examples: zero.example.edu, *.example.edu, 192.168.1.20, [::1])"
            )


_PORT = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?[^/:]*:(\d+|\*)(?:/|$)", re.IGNORECASE)


def quoted(text: str, limit: int | None = 80) -> str:
    """Text quoted for a message: control characters and escapes shown, never sent to a terminal raw.

    Past `limit` characters (None: no limit) it is cut, with an ellipsis.
    """
    cut = text if limit is None else text[:limit]
    shown = repr(cut) if cut.isprintable() else ascii(cut)
    return shown + (" …" if len(cut) < len(text) else "")
