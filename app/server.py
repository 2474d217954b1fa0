"""Serving: uvicorn with uvloop and httptools, several workers, and a guard against slow headers.

uvicorn closes an idle keep-alive connection, but has no limit on how long a client may take to
send its request's headers: a client sending nothing, or a byte at a time (slowloris), would keep
its connection, and 500 of them a worker's sockets. `GuardedHttpTools` closes a connection whose
headers are not complete within `ZERO_BANDS_HEADER_TIMEOUT` seconds of its opening or of its
request's first byte. It also gives uvicorn's own 400 responses the app's security headers.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from app.config import Settings
from app.security import security_headers

HEADER_TIMEOUT_ENV = "ZERO_BANDS_HEADER_TIMEOUT"
DEFAULT_HEADER_TIMEOUT = 5.0


class GuardedHttpTools(HttpToolsProtocol):
    """uvicorn's httptools protocol with a deadline for the request line and headers."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = float(os.environ.get(HEADER_TIMEOUT_ENV, DEFAULT_HEADER_TIMEOUT))
        self.header_deadline: asyncio.TimerHandle | None = None

    def _arm(self) -> None:
        self._disarm()
        self.header_deadline = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self.header_deadline is not None:
            self.header_deadline.cancel()
            self.header_deadline = None

    def _too_slow(self) -> None:
        self.header_deadline = None
        if not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """A connection that never sends its headers is closed too."""
        super().connection_made(transport)
        self._arm()

    def on_message_begin(self) -> None:
        """Each request on a kept-alive connection has its own deadline."""
        super().on_message_begin()
        self._arm()

    def on_headers_complete(self) -> None:
        """In time: the request goes on to the app."""
        self._disarm()
        super().on_headers_complete()

    def connection_lost(self, exc: Exception | None) -> None:
        """Nothing is left waiting on a closed connection."""
        self._disarm()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        """A request the parser refuses gets the app's headers too."""
        body = msg.encode("ascii", "replace")
        lines = [b"HTTP/1.1 400 Bad Request"]
        lines += [f"{k}: {v}".encode("latin-1") for k, v in security_headers(Settings.from_env()).items()]
        lines += [b"content-type: text/plain; charset=utf-8", b"content-length: %d" % len(body), b"connection: close"]
        self.transport.write(b"\r\n".join(lines) + b"\r\n\r\n" + body)
        self.transport.close()


APP = "app.main:app"


def serve(
    host: str,
    port: int,
    root_path: str = "",
    workers: int = 1,
    access_log: bool = False,
    header_timeout: float = DEFAULT_HEADER_TIMEOUT,
    app: str = APP,
) -> None:
    """Run `app` (an import string) under uvicorn until interrupted; workers read their settings from the environment.

    The benchmark serves its hello-world baseline through this same function, so both stand on one stack.
    """
    os.environ[HEADER_TIMEOUT_ENV] = str(header_timeout)
    # Each thread that renders a page would otherwise get a malloc arena of its own (glibc: up to
    # eight a core), and a worker keeps their memory after the rush: two hold RSS under 100 MB.
    # Read by each worker process as it starts (the environment is inherited); set yours to override.
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    uvicorn.run(
        app,
        host=host,
        port=port,
        root_path=root_path,
        workers=workers,
        loop="uvloop",
        http=GuardedHttpTools,
        access_log=access_log,
        # The brief asks for no Server header; the middleware drops it too.
        server_header=False,
        date_header=True,
        backlog=2048,
    )
