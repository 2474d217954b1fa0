"""A lecture hall at once: the served app under load, as ratios against a hello-world on the same stack.

Run: .venv/bin/python -m bench.serve            (about 2 minutes; needs wrk: apt-get install wrk)
     .venv/bin/python -m bench.serve --quick    (a few seconds a figure: checks it runs, not how fast)

Both servers are started here by the same `app.serving.server.serve` (uvicorn, uvloop, httptools, no
access log) with one worker per core: the app by its `zero-bands` command, the baseline as
`bench.hello`: a bare Starlette `PlainTextResponse` ASGI app, stricter than a FastAPI hello-world,
with a second tiny app for the blank page that is the click's floor. wrk loads them in turn in the
same run, the hello-world before and after each of the app's throughput loads, so the machine's
noise hits both. Every figure is printed beside its target; a miss prints MISS and, in the full
run, the command exits 1. A figure wrk's report leaves out (its 99% line, say) or a wrk run that
fails is a MISS that says so, not a traceback.
The quick run (CI) exits 1 only when something fails to run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from html.parser import HTMLParser
from pathlib import Path

HX = "HX-Request: true"
GZIP = "Accept-Encoding: gzip"
BROWSER_CODINGS = "gzip, deflate, br, zstd"
"""What Debian's Chromium sends in Accept-Encoding, to 127.0.0.1 as to any HTTPS site."""
FIRST_LOAD_BYTES = 40_000
"""The first load's bound, on the wire (issue 45): bytes, not KiB (40 KiB would be 40,960)."""
PEERS = {"Gradio": (60.0, 94.0), "Streamlit": (95.0, 121.0)}
"""Click to swapped result, p50 and p95 in ms, for the same feature on this machine (issue 9)."""

NEW_RUN_SCRIPT = """
math.randomseed(os.time() + tonumber(tostring({}):sub(8), 16))
request = function()
  local path = "/?stage=zero2&params=" .. math.random(1000000, 999999999999)
  return wrk.format("GET", path, {["HX-Request"] = "true", ["Accept-Encoding"] = "gzip"})
end
"""


@dataclass(frozen=True)
class Load:
    """What wrk measured; a figure its output did not give is None, and `missing` says why."""

    rps: float | None
    p50_ms: float | None
    p99_ms: float | None
    socket_errors: int
    non_2xx: int
    requests: int | None
    missing: tuple[str, ...] = ()


@dataclass(frozen=True)
class Check:
    """One figure against its target."""

    name: str
    figure: str
    target: str
    ok: bool


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _command() -> str:
    found = shutil.which("zero-bands", path=str(Path(sys.executable).parent)) or shutil.which("zero-bands")
    if not found:
        raise SystemExit("bench.serve: the zero-bands command is not installed (pip install -e .)")
    return found


@contextlib.contextmanager
def _server(argv: list[str], port: int, env: dict[str, str] | None = None) -> Iterator[tuple[float, int]]:
    """Start a server; yield the seconds until it first answered, and its process id."""
    started = time.monotonic()
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = started + 30
        while True:
            if process.poll() is not None:
                raise SystemExit(f"bench.serve: {' '.join(argv)} exited with {process.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=1) as response:
                    response.read()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise SystemExit(f"bench.serve: {argv[0]} did not answer within 30 s") from None
                time.sleep(0.02)
        yield time.monotonic() - started, process.pid
    finally:
        process.terminate()
        process.wait(timeout=15)


def _ms(text: str) -> float | None:
    """A duration as wrk prints it ("812.00us", "1.20ms", "2.00s", "1.50m", "1.00h") in ms, or None."""
    found = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if not found:
        return None
    try:
        number = float(found.group(1))
    except ValueError:
        return None
    return number * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6}[found.group(2)]


def parse_wrk(out: str) -> Load:
    """Read wrk's report (run with --latency) defensively: a line it left out is a figure missing, not an error."""
    missing: list[str] = []
    rps_line = re.search(r"Requests/sec:\s+([\d.]+)\s*$", out, re.MULTILINE)
    requests_line = re.search(r"(\d+) requests in", out)
    errors = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    non_2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    percentiles = dict(re.findall(r"^\s*(\d+)%\s+(\S+)\s*$", out, re.MULTILINE))

    def latency(percent: str) -> float | None:
        text = percentiles.get(percent)
        figure = _ms(text) if text is not None else None
        if figure is None:
            missing.append(
                f"wrk printed no {percent}% latency line" if text is None
                else f"wrk's {percent}% latency {text!r} is not a duration"
            )  # fmt: skip
        return figure

    try:
        rps = float(rps_line.group(1)) if rps_line else None
    except ValueError:
        rps = None
    if rps is None:
        missing.append("wrk printed no Requests/sec line")
    if requests_line is None:
        missing.append("wrk printed no request count")
    p50, p99 = latency("50"), latency("99")
    return Load(
        rps=rps,
        p50_ms=p50,
        p99_ms=p99,
        socket_errors=sum(int(n) for n in errors.groups()) if errors else 0,
        non_2xx=int(non_2xx.group(1)) if non_2xx else 0,
        requests=int(requests_line.group(1)) if requests_line else None,
        missing=tuple(missing),
    )


def wrk(url: str, connections: int, seconds: float, headers: Sequence[str] = (), script: str | None = None) -> Load:
    """One wrk run: requests per second, median and 99th percentile latency, errors (a run that failed: all missing)."""
    argv = ["wrk", "-t2", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--latency"]
    for header in headers:
        argv += ["-H", header]
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as lua:
        if script:
            lua.write(script)
    if script:
        argv += ["-s", lua.name]
    try:
        done = subprocess.run([*argv, url], capture_output=True, text=True, check=False, timeout=seconds + 60)
    except subprocess.TimeoutExpired:
        return Load(None, None, None, 0, 0, None, (f"wrk did not finish within {seconds + 60:.0f} s",))
    finally:
        os.unlink(lua.name)
    load = parse_wrk(done.stdout)
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["nothing"]
        load = replace(load, missing=(f"wrk exited with {done.returncode}: {said[0]}", *load.missing))
    return load


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if tag == "script" and values.get("src"):
            self.urls.append(values["src"] or "")
        if tag == "link" and values.get("rel") in {"stylesheet", "icon"}:
            self.urls.append(values.get("href") or "")


def first_load_bytes(base: str) -> tuple[int, int]:
    """Bytes on the wire (bodies, compressed as for Chromium) for the page and everything it loads; and the count."""
    import gzip

    import brotli

    def decompress(wire: bytes, coding: str) -> bytes:
        return bytes(brotli.decompress(wire)) if coding == "br" else gzip.decompress(wire)

    def fetch(url: str) -> tuple[bytes, int]:
        request = urllib.request.Request(base + url, headers={"Accept-Encoding": BROWSER_CODINGS})
        with urllib.request.urlopen(request, timeout=10) as response:
            wire = response.read()
            coding = response.headers.get("Content-Encoding")
            body = decompress(wire, coding) if coding else wire
            return body, len(wire)

    page, total = fetch("/")
    parser = _Assets()
    parser.feed(page.decode())
    for url in parser.urls:
        total += fetch(url)[1]
    return total, 1 + len(parser.urls)


def _rss_mb(parent: int) -> list[float]:
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    pids = [int(p) for p in children] or [parent]
    sizes = []
    for pid in pids:
        status = Path(f"/proc/{pid}/status").read_text()
        sizes.append(int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024)  # type: ignore[union-attr]
    return sizes


def settled(url: str, seconds: float = 15) -> None:
    """Wait until `url` answers 200 again after a crowd.

    The connections a crowd left in the listen backlog are served (most with a 503) after wrk has
    gone: a figure taken meanwhile would measure that tail, not the app.
    """
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                response.read()
            return
        except OSError:  # a 503 (HTTPError) or a refused connection
            if time.monotonic() > deadline:
                raise SystemExit(f"bench.serve: {url} did not answer 200 within {seconds:.0f} s of the crowd") from None
            time.sleep(0.1)


def _latency_ms(url: str, count: int) -> float:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        with urllib.request.urlopen(url, timeout=10) as response:
            response.read()
        times.append((time.perf_counter() - started) * 1e3)
    return statistics.median(times)


def slowloris(port: int, url: str, connections: int, seconds: float) -> tuple[float, float, int]:
    """A normal request's median latency before and while `connections` clients dribble their headers.

    Also how many of those connections the server had closed by the end.
    """
    before = _latency_ms(url, 30)
    socks = []
    for _ in range(connections):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n")
        socks.append(sock)
    stop = time.monotonic() + seconds

    def dribble() -> None:
        while time.monotonic() < stop:
            for sock in socks:
                with contextlib.suppress(OSError):
                    sock.sendall(b"X")
            time.sleep(0.5)

    thread = threading.Thread(target=dribble, daemon=True)
    thread.start()
    during = _latency_ms(url, 30)
    thread.join()
    # One wait for them all: a closed socket reads as ready (b"" or a reset), an open one does not.
    readable, _, _ = select.select(socks, [], [], 0.5)
    closed = 0
    for sock in readable:
        try:
            closed += sock.recv(1) == b""
        except OSError:
            closed += 1  # reset by the server
    for sock in socks:
        sock.close()
    return before, during, closed


def clicks(base: str, count: int, start: str = "/?stage=dp") -> list[float]:
    """Milliseconds from a click on a stage tab to the swapped grid painted, in headless Chromium.

    `start` is the page, whose tabs are `#switch-<stage>` and whose grid is `#grid[data-stage]`:
    the app's, or the floor's (bench.hello), measured the same way.
    """
    from playwright.sync_api import sync_playwright

    flags = ["--disable-background-networking", "--disable-component-update", "--disable-sync", "--no-first-run"]
    # The marks are set by listeners installed through the browser, not by the page: its CSP forbids inline code.
    listen = """() => {
      window.__swaps = [];
      document.addEventListener('click', e => { if (e.target.closest('.switch')) performance.mark('click'); }, true);
      document.addEventListener('htmx:afterSettle', () => requestAnimationFrame(() => setTimeout(() => {
        const m = performance.measure('swap', 'click'); window.__swaps.push(m.duration);
      }, 0)));
    }"""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=flags)
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(base + start)
        page.evaluate(listen)
        order = ["zero1", "zero2", "zero3", "dp"]
        for i in range(count):
            stage = order[i % 4]
            page.click(f"#switch-{stage}")
            # Polled from here every 10 ms, not by a Playwright locator: its waiting runs in the page, on
            # the main thread, inside the interval measured. (wait_for_function needs eval: CSP refuses.)
            deadline = time.monotonic() + 10
            while page.evaluate("() => window.__swaps.length") < i + 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            if page.evaluate("() => document.getElementById('grid').dataset.stage") != stage:
                raise SystemExit(f"bench.serve: the click on {stage} did not swap the grid")
            time.sleep(0.05)
        swaps: list[float] = page.evaluate("() => window.__swaps")
        browser.close()
    return swaps


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _unmeasured(*loads: Load) -> str:
    """Why a figure is missing, in words: every reason the loads give, once each."""
    return "; ".join(dict.fromkeys(reason for load in loads for reason in load.missing))


def ratio_check(name: str, load: Load, baselines: Sequence[Load], least: float) -> Check:
    """The app's throughput against the mean of the hello-world loads beside it."""
    target = f">= {least}×"
    beside = [b.rps for b in baselines if b.rps]
    if load.rps is None or not beside:
        why = _unmeasured(load, *baselines) or "no hello-world load beside it"
        return Check(name, f"not measured: {why}", target, False)
    baseline = sum(beside) / len(beside)
    r = load.rps / baseline
    figure = f"{load.rps:,.0f} req/s = {r:.2f}× the Starlette hello-world's {baseline:,.0f}"
    return Check(name, figure, target, r >= least)


def hall_check(hall: Load) -> Check:
    """300 connections on the cached fragment: no errors, and the 99th percentile within a second."""
    name, target = "300 connections on the fragment", "0 errors, p99 <= 1000 ms"
    if hall.requests is None or hall.p50_ms is None or hall.p99_ms is None:
        return Check(name, f"not measured: {_unmeasured(hall)}", target, False)
    figure = (
        f"{hall.requests:,} requests, {hall.socket_errors} socket errors, {hall.non_2xx} non-2xx, "
        f"p50 {hall.p50_ms:.0f} ms, p99 {hall.p99_ms:.0f} ms"
    )
    return Check(name, figure, target, hall.socket_errors == 0 and hall.non_2xx == 0 and hall.p99_ms <= 1000)


def crowd_check(crowd: Load) -> Check:
    """1,000 connections, each a run never seen: an answer, page or 503, within a second."""
    name = "1,000 connections, every run new (overload)"
    target = "p99 <= 1000 ms: an answer (page or 503) at once, no queue of seconds"
    if crowd.requests is None or crowd.p50_ms is None or crowd.p99_ms is None:
        return Check(name, f"not measured: {_unmeasured(crowd)}", target, False)
    figure = (
        f"{crowd.requests:,} requests, {crowd.non_2xx:,} answered 503, p50 {crowd.p50_ms:.0f} ms, "
        f"p99 {crowd.p99_ms:.0f} ms, {crowd.socket_errors} socket errors"
    )
    return Check(name, figure, target, crowd.p99_ms <= 1000)


def first_load_check(wire: int, files: int) -> Check:
    """The first load's bytes on the wire against issue 45's 40,000 B."""
    return Check("first load", f"{wire:,} B in {files} files", f"<= {FIRST_LOAD_BYTES:,} B", wire <= FIRST_LOAD_BYTES)


def run(quick: bool) -> list[Check]:
    """Start both servers, load them in turn, and check every figure against its target."""
    if not shutil.which("wrk"):
        raise SystemExit("bench.serve: wrk is not installed (apt-get install wrk)")
    workers = os.cpu_count() or 1
    seconds, hall_seconds = (1.0, 2.0) if quick else (5.0, 10.0)
    checks: list[Check] = []
    hello_port, app_port = _free_port(), _free_port()
    hello_argv = [sys.executable, "-m", "bench.hello", "--port", str(hello_port), "--workers", str(workers)]
    argv = [_command(), "--port", str(app_port), "--workers", str(workers)]
    # Both servers up at once (an idle one costs nothing), and the hello-world loaded right before
    # and right after each of the app's loads: each ratio is taken against the baseline beside it,
    # so a slow spell of this shared machine hits both sides of the ratio.
    with _server(hello_argv, hello_port), _server(argv, app_port) as (ready, pid):
        base = f"http://127.0.0.1:{app_port}"

        def hello() -> Load:
            return wrk(f"http://127.0.0.1:{hello_port}/", 10, seconds)

        with urllib.request.urlopen(base + "/", timeout=10) as response:
            css = next(u for u in re.findall(r'href="([^"]+)"', response.read().decode()) if "app.css" in u)
        hellos = [hello()]
        fragment = wrk(f"{base}/?stage=zero2", 10, seconds, [HX, GZIP])
        hellos.append(hello())
        static = wrk(base + css, 10, seconds, [GZIP])
        hellos.append(hello())
        new_run = wrk(f"{base}/", 10, seconds, script=NEW_RUN_SCRIPT)
        hellos.append(hello())
        hall = wrk(f"{base}/?stage=zero2", 300, hall_seconds, [HX, GZIP])
        # The worst crowd: every request a run never seen, so each must be rendered.
        crowd = wrk(f"{base}/", 1000, seconds, script=NEW_RUN_SCRIPT)
        rss = _rss_mb(pid)
        settled(f"{base}/?stage=zero1")
        before, during, closed = slowloris(app_port, f"{base}/?stage=zero1", 50 if quick else 500, 3.0)
        wire, files = first_load_bytes(base)
        swaps = clicks(base, 8 if quick else 60)
        floor = clicks(f"http://127.0.0.1:{hello_port}", 8 if quick else 60, "/floor?stage=dp")

    checks.append(ratio_check("cached fragment (HX-Request, gzip)", fragment, hellos[0:2], 0.5))
    checks.append(ratio_check("static asset (fingerprinted, gzip)", static, hellos[1:3], 0.8))
    checks.append(ratio_check("never-seen run (rendered afresh)", new_run, hellos[2:4], 0.07))
    checks.append(hall_check(hall))
    checks.append(crowd_check(crowd))
    slow_count = 50 if quick else 500
    # uvicorn gives no deadline for headers: closing such clients is the reverse proxy's (docs/deploying.md,
    # checked by tests/serving/test_deploying.py). Here, that they slow no one else.
    checks.append(Check(
        f"{slow_count} slowloris connections",
        f"a request's median {before:.1f} ms before, {during:.1f} ms during; {closed} of {slow_count} closed "
        "by uvicorn (the proxy closes them: docs/deploying.md)",
        "median during <= 2× before + 2 ms",
        during <= 2 * before + 2,
    ))  # fmt: skip
    checks.append(first_load_check(wire, files))
    p50, p95 = _percentile(swaps, 0.5), _percentile(swaps, 0.95)
    peers = "; ".join(f"{name} {a:.0f}/{b:.0f}" for name, (a, b) in PEERS.items())
    floor50, floor95 = _percentile(floor, 0.5), _percentile(floor, 0.95)
    checks.append(Check(
        f"click to swapped grid ({len(swaps)} clicks)",
        f"p50 {p50:.0f} ms, p95 {p95:.0f} ms ({peers}; a one-word htmx swap on a blank page, the floor "
        f"here: {floor50:.0f}/{floor95:.0f})", "p95 <= the floor's p95 + 15 ms", p95 <= floor95 + 15,
    ))  # fmt: skip
    checks.append(Check("RSS per worker after the load", ", ".join(f"{m:.0f} MB" for m in rss), "<= 100 MB",
                        max(rss) <= 100))  # fmt: skip
    checks.append(Check("ready after start", f"{ready:.2f} s ({workers} workers)", "<= 1.5 s", ready <= 1.5))
    return checks


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    """Print every figure beside its target; exit 1 on a miss (a full run) or a failure to run (any run)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short loads, for CI: checks it runs, not the speed")
    args = parser.parse_args(argv)
    return report(run(args.quick), args.quick, out)


def report(checks: Sequence[Check], quick: bool, out: Callable[[str], None] = print) -> int:
    """Print each check, ok or MISS, beside its target; the exit code: 1 on a miss in a full run."""
    width = max(len(c.name) for c in checks)
    for check in checks:
        out(f"{'ok  ' if check.ok else 'MISS'} {check.name:<{width}}  {check.figure}  (target {check.target})")
    missed = [c.name for c in checks if not c.ok]
    if quick:
        out("quick run: the loads are too short to judge speed; run without --quick for the figures")
        return 0
    out(
        f"{len(checks) - len(missed)} of {len(checks)} targets met"
        + (f"; missed: {', '.join(missed)}" if missed else "")
    )
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
