"""Serving: uvicorn with uvloop and httptools, one worker per core, set through its public options only.

uvicorn closes a kept-alive connection left idle (`timeout_keep_alive`), but gives a client no
deadline for its request's headers: a client that sends nothing, or a byte at a time (slowloris),
keeps its connection. On a network where that matters, a reverse proxy in front holds the clients'
connections and sets that deadline: docs/deploying.md shows nginx and Caddy with it, and
tests/serving/test_deploying.py checks the nginx one.
"""

from __future__ import annotations

import os
import resource

import uvicorn

APP = "app.main:app"
KEEP_ALIVE_SECONDS = 5
"""An idle kept-alive connection is closed after this long (uvicorn's default, stated)."""


def raise_open_files() -> tuple[int, int]:
    """Raise this process's soft limit on open files to its hard limit; the limits now.

    Each connection is a file: at the common soft limit of 1,024, a thousand idle sockets refused
    every other client. The hard limit (often 524,288 under systemd, 1,048,576 in containers) is
    what an administrator allows; the soft one is only where a process starts.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def serve(
    host: str,
    port: int,
    root_path: str = "",
    workers: int = 1,
    access_log: bool = False,
    app: str = APP,
    forwarded_allow_ips: str | None = None,
) -> None:
    """Run `app` (an import string) under uvicorn until interrupted; workers read their settings from the environment.

    The benchmark serves its hello-world baseline through this same function, so both stand on one stack.
    """
    # Each thread that renders a page would otherwise get a malloc arena of its own (glibc: up to
    # eight a core), and a worker keeps their memory after the rush: two hold RSS under 100 MB.
    # Read by each worker process as it starts (the environment is inherited); set yours to override.
    os.environ.setdefault("MALLOC_ARENA_MAX", "2")
    raise_open_files()  # before the workers start: they inherit it
    uvicorn.run(
        app,
        host=host,
        port=port,
        root_path=root_path,
        workers=workers,
        loop="uvloop",
        http="httptools",
        access_log=access_log,
        # Whose X-Forwarded-For and X-Forwarded-Proto to believe: the client's address (wrong codes are
        # counted by it) and the scheme (the teacher's cookie is Secure, snippets https://). None:
        # uvicorn's default, $FORWARDED_ALLOW_IPS or else 127.0.0.1, a proxy on this machine.
        forwarded_allow_ips=forwarded_allow_ips,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
        # The brief asks for no Server header; the middleware drops it too.
        server_header=False,
        date_header=True,
        backlog=2048,
    )
