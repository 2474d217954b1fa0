"""A class votes (issue 35): 300 followers answer one question at once, and a worker is killed mid-vote.

Run: .venv/bin/python -m bench.votes            (about 40 s; needs /usr/bin/redis-server)
     .venv/bin/python -m bench.votes --quick    (30 followers: checks every vote is counted once, not how fast)

Two parts, on servers started here by `python -m app.cli` (bench/live.py's helpers):

- Load: one worker with sessions in memory. 300 followers hold their event streams (bench/live.py's
  clients, in processes of their own); the teacher asks which cells GPU 1 stores under ZeRO-3 on 8
  cards; each follower, with the token its stream gave it, votes once within 5 s, and a tenth of them
  change their minds a second later. The teacher's panel asks for the count every 500 ms, as its page
  does. The answers are the bench's own: a third are right (GPU 1 holds weight 1's four bands, worked
  out by hand), the rest a mix of cells, so the class's taps per cell are known here before any is sent.
- Fault: Redis and two workers, the followers' pages half from each. Worker A is killed (SIGKILL)
  mid-vote; a vote A does not answer goes to B, as a load balancer sends it on.

Targets: the count reaches the number of followers and no more; the results CSV's taps per cell and its
right answers equal the tally of what was sent; in the load, the p95 from a vote's send to the teacher's
count that shows it is at most 1 s. The command exits 1 on any MISS, the quick run too (its times are
printed, not judged).
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import http.client
import io
import os
import re
import signal
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from urllib.parse import urlencode

from bench.live import (
    COOKIE,
    FORM,
    Line,
    Note,
    Plan,
    Section,
    Teacher,
    _app,
    _crowd,
    _free_port,
    _pct,
    _redis,
    _spread,
    report,
)
from bench.serve import Check

VOTER = "zb-voter"
"""A follower's token (app/web/live_view.py VOTER)."""
VIEW = "/?stage=zero3"
CARD = 1
RIGHT = frozenset({"1.weights", "1.gradients", "1.master", "1.moments"})
"""ZeRO-3 on 8 cards: GPU 1 holds its slice of every band, and its slice is weight 1 (by hand: 8 weights, 8 cards)."""
CELLS = [f"{w}.{band}" for w in range(8) for band in ("weights", "gradients", "master", "moments")]
POLL_SECONDS = 0.5
"""The teacher's panel asks for the count this often (templates/_poll.html, hx-trigger every 500ms)."""
TARGET_P95_S = 1.0
THREADS = 64
ANSWERED = re.compile(r'id="poll-count" data-answered="(\d+)"')
KEY = re.compile(r'name="key" value="([^"]+)"')


@dataclass(frozen=True)
class Size:
    """How big a run: the load's followers, the fault's, and the window of the first votes."""

    followers: int
    fault_followers: int
    seconds: float
    """The window the first votes are spread over."""


FULL = Size(followers=300, fault_followers=200, seconds=5.0)
QUICK = Size(followers=30, fault_followers=20, seconds=1.5)


@dataclass(frozen=True)
class Vote:
    """One vote: whose and what, when sent and answered, the status, and the port that answered (0: none did)."""

    follower: int
    cells: frozenset[str]
    sent: float
    acked: float
    status: int
    port: int


def answer(i: int) -> frozenset[str]:
    """Follower i's final answer: the right cells for every third, else a mix that is never exactly right."""
    if i % 3 == 0:
        return RIGHT
    return frozenset({CELLS[i % 32], CELLS[(7 * i + 3) % 32], "0.weights"})


def first_answer(i: int) -> frozenset[str] | None:
    """A tenth of the class answers something else first, then changes its mind."""
    return frozenset({"7.moments"}) if i % 10 == 5 else None


def call(port: int, method: str, path: str, body: str | None = None, **headers: str) -> tuple[int, str, str]:
    """One request on a connection of its own: the status, the body and Set-Cookie."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers={k.replace("_", "-"): v for k, v in headers.items()})
        response = connection.getresponse()
        return response.status, response.read().decode(), response.getheader("set-cookie") or ""
    finally:
        connection.close()


def token(port: int, code: str) -> str:
    """Open the session's page, then its stream, as a student's phone does: the token the stream hands out.

    The stream is let go once its headers are read: the follower's seat, and so its vote, is held for its
    grace after (app/live/hub.py SEAT_GRACE_SECONDS), far longer than a part of this bench.
    """
    status, _, _ = call(port, "GET", f"/live/{code}")
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", f"/live/{code}/events")
        response = connection.getresponse()
        found = re.search(VOTER + r"=([^;]+)", response.getheader("set-cookie") or "")
    finally:
        connection.close()
    if status != 200 or response.status != 200 or not found:
        raise SystemExit(f"bench.votes: /live/{code}, then its stream, answered {status}, {response.status}: no token")
    return found.group(1)


def vote(ports: Sequence[int], code: str, key: str, voter: str, i: int, cells: frozenset[str]) -> Vote:
    """Send a vote as the panel's form does (htmx); a worker that does not answer passes it to the next."""
    body = urlencode([("key", key), *(("answer", c) for c in sorted(cells))])
    sent = time.monotonic()
    for port in ports:
        try:
            status, _, _ = call(port, "POST", f"/live/{code}/vote", body, Content_Type=FORM, HX_Request="true",
                                Cookie=f"{VOTER}={voter}")  # fmt: skip
            return Vote(i, cells, sent, time.monotonic(), status, port)
        except (OSError, http.client.HTTPException):
            continue
    return Vote(i, cells, sent, time.monotonic(), 0, 0)


class Class:
    """A teacher, a question, and the followers' tokens: everything a part needs to vote."""

    def __init__(self, teacher_port: int, pages: Sequence[int], count: int) -> None:
        self.teacher = Teacher(teacher_port)
        self.teacher.start(VIEW)
        self.code, self.port = self.teacher.code, teacher_port
        self.teacher.connection.close()
        with ThreadPoolExecutor(16) as pool:
            self.voters = list(pool.map(lambda i: token(pages[i % len(pages)], self.code), range(count)))

    def teach(self, method: str, path: str, body: str | None = None, want: int = 200) -> str:
        """A teacher's request (its cookie; htmx), answered `want`: the body."""
        status, text, _ = call(self.port, method, f"/live/{self.code}/{path}", body, Content_Type=FORM,
                               HX_Request="true", Cookie=f"{COOKIE}={self.teacher.cookie}")  # fmt: skip
        if status != want:
            raise SystemExit(f"bench.votes: the teacher's {method} {path} answered {status}")
        return text

    def ask(self) -> str:
        """Ask which cells GPU 1 stores; the round's key, as a follower's panel has it."""
        self.teach("POST", "ask", urlencode({"kind": "cells", "card": str(CARD)}))
        _, panel, _ = call(self.port, "GET", f"/live/{self.code}/question", Cookie=f"{VOTER}={self.voters[0]}")
        found = KEY.search(panel)
        if not found:
            raise SystemExit("bench.votes: the follower's panel has no question after the teacher asked")
        return found.group(1)

    def answered(self) -> int:
        """The count on the teacher's panel, as its page asks for it."""
        found = ANSWERED.search(self.teach("GET", "poll"))
        return int(found.group(1)) if found else -1

    def vote_all(self, ports: Sequence[int], key: str, seconds: float, during: Callable[[float], None]) -> list[Vote]:
        """Every follower votes once over `seconds`, a tenth again a second later; `during(start)` runs meanwhile."""
        count = len(self.voters)
        plan = [(i * seconds / count, i, first_answer(i) or answer(i)) for i in range(count)]
        plan += [(i * seconds / count + 1.0, i, answer(i)) for i in range(count) if first_answer(i)]
        plan.sort(key=lambda p: p[0])
        start = time.monotonic() + 0.2

        def one(at: float, i: int, cells: frozenset[str]) -> Vote:
            time.sleep(max(0.0, start + at - time.monotonic()))
            # A follower's page came from one worker; its votes go there first.
            home = ports[i % len(ports)]
            return vote([home, *(p for p in ports if p != home)], self.code, key, self.voters[i], i, cells)

        with ThreadPoolExecutor(THREADS) as pool:
            futures = [pool.submit(one, *p) for p in plan]
            during(start)
            return [f.result() for f in futures]

    def results(self) -> tuple[int, int, Counter[str]]:
        """The vote closed ("Show the spread"), then the results CSV: answered, right and the taps per cell."""
        self.teach("POST", "poll", urlencode({"action": "show"}))
        status, text, _ = call(self.port, "GET", f"/live/{self.code}/results.csv",
                               Cookie=f"{COOKIE}={self.teacher.cookie}")  # fmt: skip
        rows = list(csv.DictReader(io.StringIO(text)))
        if status != 200 or len(rows) != 1:
            raise SystemExit(f"bench.votes: results.csv answered {status} with {len(rows)} rounds")
        taps = Counter({cell: int(n) for cell, n in (bar.rsplit(": ", 1) for bar in rows[0]["spread"].split("; "))})
        return int(rows[0]["answered"]), int(rows[0]["right"]), taps


def tally(answers: Iterable[frozenset[str]]) -> tuple[int, Counter[str]]:
    """What the class's answers should count to: right ones, and taps per cell."""
    kept = list(answers)
    taps = Counter(dict.fromkeys(CELLS, 0))
    taps.update(cell for cells in kept for cell in cells)
    return sum(cells == RIGHT for cells in kept), taps


def last_answered(votes: Sequence[Vote]) -> dict[int, Vote]:
    """Each follower's last vote answered 2xx, by follower: what the hub should hold for it."""
    return {v.follower: v for v in sorted(votes, key=lambda v: v.sent) if 200 <= v.status < 300}


def counted_check(name: str, votes: Sequence[Vote], results: tuple[int, int, Counter[str]], count: int) -> Check:
    """Every follower whose vote was answered 2xx counted, once, and the spread exactly the answers sent."""
    answered, right, taps = results
    through = last_answered(votes)
    want_right, want_taps = tally(v.cells for v in through.values())
    figure = (
        f"{answered} counted of {len(through)} followers answered 2xx ({count} voted, {len(votes)} votes); "
        f"right {right} (sent {want_right}); taps per cell {'equal to' if taps == want_taps else 'NOT'} the tally "
        f"of the answers sent ({sum(want_taps.values())} taps)"
    )
    ok = answered == len(through) == count and right == want_right and taps == want_taps
    return Check(name, figure, "every 2xx vote counted once; spread = the answers sent", ok)


def poll_counts(klass: Class, polls: list[tuple[float, float, int]], until: float) -> Callable[[float], None]:
    """The teacher's panel: the count asked every POLL_SECONDS until `until` seconds after the start."""

    def run(start: float) -> None:
        n = 0
        while (at := start + n * POLL_SECONDS) < start + until:
            time.sleep(max(0.0, at - time.monotonic()))
            sent = time.monotonic()
            answered = klass.answered()
            polls.append((sent, time.monotonic(), answered))
            n += 1

    return run


def shown_after(votes: Sequence[Vote], polls: Sequence[tuple[float, float, int]]) -> list[float]:
    """For each follower's first vote: from its send to the first teacher's count asked after it was answered."""
    firsts: dict[int, Vote] = {}
    for v in sorted(votes, key=lambda v: v.sent):
        if v.status == 200:
            firsts.setdefault(v.follower, v)
    times = []
    for v in firsts.values():
        shown = next((got for sent, got, _ in polls if sent >= v.acked), None)
        times.append(float("inf") if shown is None else shown - v.sent)
    return times


def load(size: Size) -> Section:
    """One worker, sessions in memory; the followers hold their streams and vote within `size.seconds`."""
    port = _free_port()
    busy = os.getloadavg()[0]
    with contextlib.ExitStack() as stack:
        _app(port, stack)
        klass = Class(port, [port], size.followers)
        plan = Plan([port], f"/live/{klass.code}/events", list(range(size.followers)), None, None,
                    fetch=False, reconnect=False, seconds=120)  # fmt: skip
        crowd = stack.enter_context(_crowd(plan, size.followers))
        if (ready := crowd.ready(60)) != size.followers:
            raise SystemExit(f"bench.votes: {ready} of {size.followers} followers had their first event")
        key = klass.ask()
        polls: list[tuple[float, float, int]] = []
        votes = klass.vote_all([port], key, size.seconds, poll_counts(klass, polls, size.seconds + 3.0))
        following = klass.teach("GET", "poll")
        results = klass.results()
        klass.teach("POST", "end", want=303)
        ended = crowd.done(30)
        crowd.results()
    times = shown_after(votes, polls)
    answer_ms = [(v.acked - v.sent) * 1e3 for v in votes]
    p95 = _pct(times, 0.95)
    statuses = sorted(Counter(v.status for v in votes).items())
    words = re.search(r'data-answered="\d+">([^<]+)<', following)
    lines: list[Line] = [
        counted_check("every vote counted once", votes, results, size.followers),
        Check("a vote to the teacher's count", f"{_spread([t * 1e3 for t in times])} (the panel asks every "
              f"{POLL_SECONDS * 1e3:.0f} ms)", f"p95 <= {TARGET_P95_S * 1e3:.0f} ms", p95 <= TARGET_P95_S),
        Note("a vote, sent to answered", f"{_spread(answer_ms)}; statuses {statuses}"),
        # Seats: each voter's, and each listener's (bench.live's streams carry no voter's cookie), so twice the class.
        Note("the teacher's count at the end", words.group(1).strip() if words else "(none)"),
        Check("streams told the session ended", f"{ended} of {size.followers}", "all of them",
              ended == size.followers),
        Note("the machine before the load", f"load average {busy:.2f} over the last minute, on {os.cpu_count()} cores"),
    ]  # fmt: skip
    return Section(
        f"load: {size.followers} followers of one session, one worker, sessions in memory, each voting once within "
        f"{size.seconds:g} s (a tenth twice)",
        lines,
    )


def fault(size: Size) -> Section:
    """Redis and two workers; worker A killed halfway through the vote, its votes passed on to B."""
    redis_port, port_a, port_b = _free_port(), _free_port(), _free_port()
    url = f"redis://127.0.0.1:{redis_port}/0"
    with contextlib.ExitStack() as stack:
        _redis(redis_port, stack)
        worker_a = _app(port_a, stack, url)
        _app(port_b, stack, url)
        klass = Class(port_b, [port_a, port_b], size.fault_followers)
        key = klass.ask()
        killed: list[float] = []

        def kill_a(start: float) -> None:
            time.sleep(max(0.0, start + size.seconds / 2 - time.monotonic()))
            killed.append(time.monotonic())
            os.kill(worker_a.pid, signal.SIGKILL)

        votes = klass.vote_all([port_a, port_b], key, size.seconds, kill_a)
        worker_a.wait()
        results = klass.results()
    after = [v for v in votes if killed and v.sent >= killed[0]]
    moved = sum(v.follower % 2 == 0 and v.port == port_b for v in after)
    lost = sum(v.status == 0 for v in votes)
    return Section(
        f"fault: Redis and two workers, {size.fault_followers} followers (pages half from each); worker A killed "
        f"(SIGKILL) {size.seconds / 2:g} s into a {size.seconds:g} s vote",
        [
            counted_check("every 2xx vote counted once, through the kill", votes, results, size.fault_followers),
            Note(
                "votes after the kill",
                f"{len(after)}, of which {moved} of A's followers' went on to B; {lost} answered by neither",
            ),
        ],
    )


def run(size: Size) -> list[Section]:
    """Both parts, in turn."""
    return [load(size), fault(size)]


def main(argv: Sequence[str] | None = None, out: Callable[[str], None] = print) -> int:
    """Run both parts and print their figures; exit 1 on a miss."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 followers: checks every vote is counted once")
    args = parser.parse_args(argv)
    return report(run(QUICK if args.quick else FULL), out)


if __name__ == "__main__":
    raise SystemExit(main())
