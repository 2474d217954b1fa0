"""Clients the serving tests share: a plain GET, and clients that never finish their headers."""

from __future__ import annotations

import socket
import time
import urllib.error
import urllib.request


def get(
    url: str, headers: dict[str, str] | None = None, timeout: float = 10
) -> tuple[int, dict[str, str], bytes, float]:
    """A GET, and its answer; an error status is returned, not raised."""
    started = time.monotonic()
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
            return (
                response.status,
                {k.lower(): v for k, v in response.headers.items()},
                body,
                time.monotonic() - started,
            )
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read(), time.monotonic() - started


def slowloris(port: int, count: int) -> tuple[list[socket.socket], socket.socket]:
    """`count` connections that start their headers and never end them, and one that sends nothing at all."""
    slow = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ")  # and never the end of the headers
        slow.append(sock)
    return slow, socket.create_connection(("127.0.0.1", port))
