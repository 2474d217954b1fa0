"""What rendering the 256-cell grid costs, as a page and as an htmx fragment, measured in one run.

Run: .venv/bin/python -m bench.render [--rounds N]

Absolute times depend on the machine, so the time target is a ratio against a baseline measured
in the same run, interleaved round by round (GET /api/stages: routing, validation and the test
client, with almost no work):
- a full page, grid, bars, form and table included, costs at most 3× the baseline when its view
  is cached (a class clicking through the same stages), and at most 4.5× for a run never seen
  (it builds 256 frozen cell views afresh: measured 3.6-4.2×);
- a page travels compressed in at most 20 kB, so a class on one Wi-Fi access point loads it fast.
The fragment is reported beside the page: it is the page less its shell, so it costs about the
same to render; what it saves is the browser's reload, not server time.

Then where a never-seen run's time goes: htmx fragments of runs no one asked for before (another
model size each, so the cluster's columns and cells are reused, as in bench.serve), with the
response cache on and gzip asked for, called as a server calls the app (ASGI, no test client) and
timed with perf counters around the view, the template and the compression; the rest is routing,
validation, the thread hand-off, middleware and the cache.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import inspect
import statistics
import time
from collections.abc import Callable, MutableMapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from unittest import mock

from fastapi.testclient import TestClient
from starlette.middleware.gzip import GZipResponder

import app.web.pages
from app.main import create_app
from app.serving.config import Settings

MAX_PAGE_GZIP_BYTES = 20_000
MAX_PAGE_TIME_RATIO = 3.0
MAX_NEW_RUN_TIME_RATIO = 4.5
HX = {"HX-Request": "true"}


@dataclass(frozen=True)
class Measure:
    """The median time of one request, and its body size raw and compressed."""

    name: str
    seconds: float
    raw_bytes: int
    gzip_bytes: int


REQUESTS = [
    ("baseline /api/stages", "/api/stages", {}),
    ("full page", "/?stage=zero2", {}),
    # A run no one asked for before: the view is built, not taken from the cache.
    ("full page, new run", "/?stage=zero2&gpus={round}", {}),
    ("htmx fragment", "/?stage=zero2", HX),
    ("api layout", "/api/layout?stage=zero2", {}),
]


def run(rounds: int) -> list[Measure]:
    """Time every request once per round, interleaved, so drift in the machine hits all alike."""
    times: dict[str, list[float]] = {name: [] for name, _, _ in REQUESTS}
    bodies: dict[str, bytes] = {}
    # Rendering is what this measures: the response cache (bench.serve measures it) is left out.
    with TestClient(create_app(Settings(cache_bytes=0))) as client:
        client.get("/")  # warm the template cache
        for round_ in range(rounds):
            for name, path, headers in REQUESTS:
                url = path.format(round=17 + round_ % 4000)
                start = time.perf_counter()
                response = client.get(url, headers={**headers, "Accept-Encoding": "identity"})
                times[name].append(time.perf_counter() - start)
                assert response.status_code == 200, (path, response.status_code)
                bodies[name] = response.content
    return [
        Measure(name, statistics.median(times[name]), len(bodies[name]), len(gzip.compress(bodies[name])))
        for name, _, _ in REQUESTS
    ]


# What a never-seen run's time is split into: each name is looked up where the route (or the compression
# middleware, which gives gzip to a client that asks for it through Starlette's own responder) calls it.
SPLIT: list[tuple[str, object, str]] = [
    ("view", app.web.pages, "page_view"),
    ("template", app.web.pages, "render"),
    ("compression", GZipResponder, "apply_compression"),
]


def split(requests: int) -> dict[str, float]:
    """Milliseconds per never-seen fragment: each step of SPLIT, "other" and "total"."""
    spent: dict[str, float] = dict.fromkeys((name for name, _, _ in SPLIT), 0.0)

    def timed(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
        if inspect.iscoroutinefunction(func):

            async def waited(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return await func(*args, **kwargs)
                finally:
                    spent[name] += time.perf_counter() - start

            return waited

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return func(*args, **kwargs)
            finally:
                spent[name] += time.perf_counter() - start

        return wrapper

    asgi = create_app(Settings())
    headers = [(b"host", b"bench"), (b"hx-request", b"true"), (b"accept-encoding", b"gzip")]

    async def get(query: str) -> None:
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
            "path": "/", "raw_path": b"/", "query_string": query.encode(), "root_path": "", "headers": headers,
            "client": ("127.0.0.1", 9), "server": ("127.0.0.1", 80),
        }  # fmt: skip
        status: list[int] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])

        await asgi(scope, receive, send)
        assert status == [200], (query, status)

    async def load() -> float:
        await get("stage=zero2")  # the cluster's columns and cells, drawn once
        with contextlib.ExitStack() as patches:
            for name, module, attribute in SPLIT:
                patches.enter_context(mock.patch.object(module, attribute, timed(name, getattr(module, attribute))))
            start = time.perf_counter()
            for i in range(requests):
                await get(f"stage=zero2&params={1_000_003 + 7_919 * i}")
            return time.perf_counter() - start

    # A loop of its own, on a thread of its own: the caller may be inside a running loop (pytest with
    # Playwright's sync API is).
    with ThreadPoolExecutor(1) as thread:
        total = thread.submit(lambda: asyncio.run(load())).result()
    figures = {name: spent[name] * 1e3 / requests for name, _, _ in SPLIT}
    figures["other"] = total * 1e3 / requests - sum(figures.values())
    figures["total"] = total * 1e3 / requests
    return figures


def main(argv: Sequence[str] | None = None) -> int:
    """Print the table and whether the targets hold; exit 1 if one does not."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args(argv)
    results = run(args.rounds)
    baseline = results[0].seconds
    print(f"{'request':<22} {'median ms':>10} {'× baseline':>11} {'raw kB':>8} {'gzip kB':>8}")
    for m in results:
        print(
            f"{m.name:<22} {m.seconds * 1e3:>10.2f} {m.seconds / baseline:>11.1f}"
            f" {m.raw_bytes / 1e3:>8.1f} {m.gzip_bytes / 1e3:>8.1f}"
        )
    by_name = {m.name: m for m in results}
    ratio = by_name["full page"].seconds / baseline
    page_gzip = by_name["full page"].gzip_bytes
    time_ok = ratio <= MAX_PAGE_TIME_RATIO
    new_ratio = by_name["full page, new run"].seconds / baseline
    new_ok = new_ratio <= MAX_NEW_RUN_TIME_RATIO
    size_ok = page_gzip <= MAX_PAGE_GZIP_BYTES
    checks = [
        (f"full page time = {ratio:.2f} × baseline (target <= {MAX_PAGE_TIME_RATIO:.1f})", time_ok),
        (f"new run time = {new_ratio:.2f} × baseline (target <= {MAX_NEW_RUN_TIME_RATIO:.1f})", new_ok),
        (f"full page gzip = {page_gzip / 1e3:.1f} kB (target <= {MAX_PAGE_GZIP_BYTES / 1e3:.0f} kB)", size_ok),
    ]
    for text, ok in checks:
        print(("ok   " if ok else "MISS ") + text)
    requests = max(20, args.rounds * 2)
    parts = split(requests)
    print(f"\nwhere a never-seen run's time goes ({requests} htmx fragments, each another model size, gzip)")
    for name, ms in parts.items():
        print(f"{name:<22} {ms:>10.2f} ms {100 * ms / parts['total']:>5.0f} %")
    return 0 if all(ok for _, ok in checks) else 1


if __name__ == "__main__":
    raise SystemExit(main())
