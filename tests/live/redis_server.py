"""A real Redis for the live tests: Debian's redis-server on a free local port, in a folder of its own.

Never the system's Redis on 6379 (CI installs the Debian package, whose own service may or may not be
running): each server here is started for the tests, keeps nothing on disk, and is stopped after them.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

REDIS_SERVER = "/usr/bin/redis-server"
MISSING = f"{REDIS_SERVER} is missing: install Debian's redis-server: the README's test line does"
START_SECONDS = 10.0


def free_port() -> int:
    """A local port no one listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class RedisServer:
    """One redis-server process on `port`, without persistence: a restart loses every key, as a crash would."""

    def __init__(self, folder: Path, port: int | None = None) -> None:
        if not Path(REDIS_SERVER).exists():
            raise RuntimeError(MISSING)
        self.folder = folder
        self.port = port or free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it and wait until it answers PING."""
        command = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                   "--dir", str(self.folder)]  # fmt: skip
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + START_SECONDS
        with redis.Redis(port=self.port, socket_connect_timeout=0.5, socket_timeout=0.5) as client:
            while True:
                if self.process.poll() is not None:
                    raise RuntimeError(f"redis-server on port {self.port} exited with {self.process.returncode}")
                with contextlib.suppress(redis.RedisError):
                    if client.ping():
                        return
                if time.monotonic() > deadline:
                    raise RuntimeError(f"redis-server on port {self.port} did not answer within {START_SECONDS} s")
                time.sleep(0.02)

    def stop(self) -> None:
        """Stop it at once (SIGKILL: nothing is saved, and every connection drops)."""
        if self.process is not None:
            self.process.kill()
            self.process.wait(timeout=10)
            self.process = None

    def restart(self) -> None:
        """Stopped and started again on the same port, empty."""
        self.stop()
        self.start()

    def client(self) -> redis.Redis:
        """A plain client of this server."""
        return redis.Redis.from_url(self.url, socket_timeout=5)


@contextmanager
def running_redis(folder: Path) -> Iterator[RedisServer]:
    """A Redis running for the block; stopped at its end."""
    server = RedisServer(folder)
    server.start()
    try:
        yield server
    finally:
        server.stop()
