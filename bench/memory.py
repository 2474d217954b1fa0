"""A worker's memory under a flood of addresses never asked before: RSS before and after, in one run.

Run: .venv/bin/python -m bench.memory            (20,000 requests a flood, about a minute each)
     .venv/bin/python -m bench.memory --quick    (2,000: checks it runs, not the bound)

The app is started by its `zero-bands` command with one worker (uvicorn then serves in the process
it started: the one whose memory is read). Its RSS is read once warm, as the baseline, then after each
flood, sent over a few kept-alive connections:
- long distinct queries, a new one each time, on a page, the API and a static file: half of 64,000
  bytes, as issue 32's probe sent them (refused with a 414 now: app/serving/address.py), half of 8,000,
  answered but too long for the response cache to keep;
- distinct runs: a valid run of a model size never asked before, each drawn and answered;
- distinct clusters: runs of 1 to 4,096 GPUs under every stage, phase and a few recipes, which fill
  the memos below the cache (app/web/grid_view.py, templating.py) as well as the cache itself.
Each figure is printed as a ratio against the baseline, beside the bound the docs state for a
worker (docs/performance.md); a miss prints MISS and, in the full run, the command exits 1.
"""

from __future__ import annotations

import argparse
import http.client
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from bench.serve import Check, _command, _free_port, _rss_mb, _server, report

FLOOD = 20_000
LONG = (64_000, 8_000)
"""Bytes of the long query strings: what issue 32's probe sent, and just under the app's 414."""
CONNECTIONS = 4
LECTURE_MB = 100.0
"""A worker's RSS after a flood of pages and long addresses: bench.serve's bound (docs/performance.md)."""
ANY_MB = 140.0
"""A worker's RSS under any request mix: what the bounded caches and memos can hold (docs/performance.md)."""


def long_query(i: int) -> str:
    """The i-th long address: a page, the API and a static file in turn, each with a query never seen."""
    where = ("/?stage=zero2&y=", "/api/config?y=", "/static/app.css?y=")[i % 3]
    return f"{where}{i}".ljust(LONG[i // 3 % 2] - 16, "a")


def new_run(i: int) -> str:
    """The i-th run never asked before: another model size each, with the grid's fragment asked for."""
    return f"/?stage={('dp', 'zero1', 'zero2', 'zero3')[i % 4]}&params={7_000_000_000 + i * 1_000_003}"


RECIPES = ("", "&offload=optimizer", "&accounting=deepspeed", "&lora_rank=16&lora_targets=all-linear",
           "&offload=optimizer%2Bparams&offload_device=nvme", "&accounting=fsdp2")  # fmt: skip


def new_cluster(i: int) -> str:
    """The i-th run of another cluster size, stage, phase and recipe: up to 4,096 GPUs."""
    stage = ("dp", "zero1", "zero2", "zero3")[i % 4]
    return f"/?stage={stage}&gpus={1 + i * 7919 % 4096}{RECIPES[i % len(RECIPES)]}&phase={i % 12}"


def flood(port: int, count: int, address: Callable[[int], str]) -> dict[int, int]:
    """Send `count` GETs over a few kept-alive connections; how many got each status."""
    statuses: dict[int, int] = {}

    def send(first: int) -> dict[int, int]:
        seen: dict[int, int] = {}
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        for i in range(first, count, CONNECTIONS):
            connection.request("GET", address(i), headers={"Accept-Encoding": "gzip", "HX-Request": "true"})
            response = connection.getresponse()
            response.read()
            seen[response.status] = seen.get(response.status, 0) + 1
            if response.will_close:
                connection.close()
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        connection.close()
        return seen

    with ThreadPoolExecutor(CONNECTIONS) as pool:
        for seen in pool.map(send, range(CONNECTIONS)):
            for status, n in seen.items():
                statuses[status] = statuses.get(status, 0) + n
    return statuses


def run(count: int) -> list[Check]:
    """Start the app, warm it, read its RSS; flood it three times, reading it after each."""
    port = _free_port()
    argv = [_command(), "--port", str(port), "--workers", "1"]
    with _server(argv, port) as (_, pid):
        flood(port, 200, new_run)  # warm: the templates, the views' caches begun, the allocator's arenas
        baseline = max(_rss_mb(pid))
        checks = []
        # A cluster of thousands of GPUs takes tens of ms to draw: a quarter as many fill its memos many times over.
        floods = (
            ("long distinct queries", long_query, count, LECTURE_MB),
            ("distinct runs", new_run, count, LECTURE_MB),
            ("distinct clusters", new_cluster, count // 4, ANY_MB),
        )
        for name, address, n, bound in floods:
            statuses = flood(port, n, address)
            rss = max(_rss_mb(pid))
            answered = ", ".join(f"{k:,} × {status}" for status, k in sorted(statuses.items()))
            checks.append(Check(
                f"RSS after {n:,} {name}",
                f"{rss:.0f} MB = {rss / baseline:.2f}× the {baseline:.0f} MB once warm ({answered})",
                f"<= {bound:.0f} MB a worker", rss <= bound and 500 not in statuses,
            ))  # fmt: skip
    return checks


def main(argv: Sequence[str] | None = None) -> int:
    """Print each figure beside its bound; exit 1 on a miss in a full run."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 requests a flood, for CI: checks it runs")
    parser.add_argument("--count", type=int, default=FLOOD, help=f"requests a flood (default {FLOOD:,})")
    args = parser.parse_args(argv)
    return report(run(args.count // 10 if args.quick else args.count), args.quick)


if __name__ == "__main__":
    sys.exit(main())
