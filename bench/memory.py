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
  the memos below the cache (app/web/grid_view.py, templating.py) as well as the cache itself;
- live sessions: as many started as one worker keeps (app/live/hub.py SESSIONS_KEPT), each from an address
  of its own (X-Forwarded-For, from the trusted loopback), then one more; and as many event streams held
  open from one address as one worker takes from it (STREAMS_PER_ADDRESS), then one more.
Each figure is printed as a ratio against the baseline, beside the bound the docs state for a
worker (docs/performance.md); a miss prints MISS and, in the full run, the command exits 1.
"""

from __future__ import annotations

import argparse
import http.client
import socket
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

from app.live.hub import SESSIONS_KEPT, STREAMS_PER_ADDRESS
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


SESSION_KB = 2.0
STREAM_KB = 64.0
"""What one kept session and one open event stream may cost a worker (1 kB and 55 kB measured): the bound on
a worker holding every session it keeps and one address's every stream is its warm RSS plus these
(docs/security.md, "Memory: sessions and streams")."""


def start_sessions(port: int, count: int) -> tuple[list[str], dict[int, int]]:
    """`count` sessions started, each from an address of its own: their codes, and how many got each status."""
    codes: list[str] = []
    statuses: dict[int, int] = {}
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for i in range(count):
        address = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
        connection.request(
            "POST",
            "/live",
            body="view=%2F%3Fstage%3Dzero3",
            headers={"Content-Type": "application/x-www-form-urlencoded", "X-Forwarded-For": address},
        )
        response = connection.getresponse()
        response.read()
        statuses[response.status] = statuses.get(response.status, 0) + 1
        if response.status == 303:
            codes.append(response.headers["location"].split("/")[2])
    connection.close()
    return codes, statuses


def open_streams(port: int, codes: list[str], count: int) -> tuple[list[socket.socket], list[bytes]]:
    """`count` event streams opened from this one address over `codes` in turn, held open; each one's first bytes."""
    held, first = [], []
    for i in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(f"GET /live/{codes[i % len(codes)]}/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        sock.settimeout(10)
        data = b""
        while b"event: state" not in data:
            data += sock.recv(65536)
        held.append(sock)
        first.append(data)
    return held, first


def live(sessions: int, streams: int) -> list[Check]:
    """A fresh worker's RSS with every session it keeps, then with one address's every stream, against its budget."""
    port = _free_port()
    argv = [_command(), "--port", str(port), "--workers", "1", "--forwarded-allow-ips", "127.0.0.1"]
    with _server(argv, port) as (_, pid):
        flood(port, 200, new_run)  # warm, as the other floods' worker
        before = max(_rss_mb(pid))
        codes, statuses = start_sessions(port, sessions + 1)
        kept = max(_rss_mb(pid))
        held, first = open_streams(port, codes[:3], streams + 1)
        time.sleep(0.5)
        rss = max(_rss_mb(pid))
        for sock in held:
            sock.close()
    refused = sum(b"Too many at once" in data for data in first)
    started = ", ".join(f"{k:,} × {status}" for status, k in sorted(statuses.items()))
    session_bound = before + sessions * SESSION_KB / 1024
    stream_bound = session_bound + streams * STREAM_KB / 1024
    full = sessions == SESSIONS_KEPT  # the quick run starts a tenth: none is refused
    return [
        Check(f"RSS with {sessions + 1:,} sessions started", f"{kept:.0f} MB = {before:.0f} MB warm "
              f"{kept - before:+.1f} MB, {(kept - before) * 1024 / sessions:.1f} kB a session ({started})",
              f"<= {session_bound:.0f} MB ({SESSION_KB:g} kB a session)" + (", the last refused 429" if full else ""),
              kept <= session_bound and statuses.get(429, 0) == full),
        Check(f"RSS with {streams + 1:,} streams from one address", f"{rss:.0f} MB, {(rss - kept) * 1024 / streams:.0f}"
              f" kB a stream; {refused} refused", f"<= {stream_bound:.0f} MB ({STREAM_KB:g} kB a stream), the last "
              "refused", rss <= stream_bound and refused == 1),
    ]  # fmt: skip


def run(count: int, sessions: int = SESSIONS_KEPT, streams: int = STREAMS_PER_ADDRESS) -> list[Check]:
    """Start the app, warm it, read its RSS; flood it three times, reading it after each; then its live bounds."""
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
    return checks + live(sessions, streams)


def main(argv: Sequence[str] | None = None) -> int:
    """Print each figure beside its bound; exit 1 on a miss in a full run."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2,000 requests a flood, for CI: checks it runs")
    parser.add_argument("--count", type=int, default=FLOOD, help=f"requests a flood (default {FLOOD:,})")
    args = parser.parse_args(argv)
    if args.quick:  # a tenth of the sessions: it runs, not the bound
        return report(run(args.count // 10, SESSIONS_KEPT // 10), True)
    return report(run(args.count), False)


if __name__ == "__main__":
    sys.exit(main())
