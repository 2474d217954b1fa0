"""Where sessions are kept and how a teacher's action reaches each follower's connection.

A hub keeps sessions and fans each new version out to the connections of this process. `MemoryHub`
keeps them in this process (the default `zero-bands`, one worker); `RedisHub` (app/live/redis_hub.py)
keeps them in Redis and hears every worker's changes through one pub/sub connection per worker.
`versions` is what a follower's event stream sends from its admitted queue, the same over either hub.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import Counter, defaultdict, deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Protocol, TypeAlias, TypeVar

from app.live.session import Session

K = TypeVar("K")
SessionEdit = Callable[[Session], Session]
"""What `update` applies to a session: a pure function from the old session to the new."""
GONE = None
"""What a follower's queue gets when its session is no longer kept (expired, or lost with Redis)."""
QUEUE_SIZE = 16
"""Versions waiting for one slow follower; past them it skips to the newest (never back)."""
CHECK_SECONDS = 15.0
"""How often a quiet stream asks the hub itself: an expiry, or a change missed while Redis was away."""
RETRY_SECONDS = 2.0
"""How soon a stream asks again when the hub cannot be reached."""
MISS_WINDOW_SECONDS = 600
MISSES_ALLOWED = 100
"""Codes naming no session, asked for on any live route from one client address in ten minutes: a class
behind one school address mistyping, not a script guessing. Past them, every code is refused alike, the
right ones too, but for a session this address already follows or started (app/live/service.py `find`)."""
ADDRESS_SHARE = Fraction(4, 5)
"""The default share of a session's places one client address may take (`ZERO_BANDS_LIVE_ADDRESS_SHARE`):
a class behind one school address fits, and one script cannot fill the room."""
SEAT_GRACE_SECONDS = 120.0
"""How long a follower's seat (its token's place, and so its vote) is held after its last stream ends: a
phone's screen locked for a minute, a stream's reconnection, keep it; a script's seats let go after it."""
STREAMS_PER_SEAT = 4
"""Streams open at once with one follower's token: its tabs. Past them, a reconnecting tab waits its turn."""
STREAMS_PER_ADDRESS = 600
"""Streams open at once from one client address, over every session, in one worker: two full lectures
behind one school address. Each costs the worker about 55 kB (bench.memory, "live"): 33 MB at most."""
STARTS_ALLOWED = 60
START_WINDOW_SECONDS = 3600
"""Sessions one client address may start in an hour: one a minute for a whole lecture, more than any teacher
starts (a course's staff behind one address included); a script, no flood (240 kept at most, 4 hours each)."""
SESSIONS_KEPT = 10_000
"""Sessions one worker keeps in memory at once (MemoryHub): about 1 kB each (bench.memory, "live"), 10 MB."""


VOTE_CHANGES = 30
"""Votes one token may send in one round: changing one's mind, not a script hammering."""
VOTE_WINDOW_SECONDS = 60
VOTES_PER_PLACE = 4
"""Votes a client address may send in a minute, per place it may take in the room (`Room.per_address`):
a class behind one school address votes and changes its mind, a script from one address cannot flood."""


class VoteRefused(Exception):
    """A vote not counted: `closed` (the round takes no votes), `token` or `address` (past its limit)."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class Unavailable(Exception):
    """The hub cannot be reached (Redis is down): the session may still be there."""


@dataclass(frozen=True)
class Room:
    """How many may follow one session, and how many of them from one client address."""

    size: int
    share: Fraction = ADDRESS_SHARE

    @property
    def per_address(self) -> int:
        """The places one address may take: `share` of the room, one at least."""
        return max(1, math.floor(self.size * self.share))


UNLIMITED = Room(2**31, Fraction(1))
"""No limit: a test's admission, or a hub asked without a room."""


class Full(Exception):
    """No place for one more follower: the room is full, or the address has its share (`address`).

    `streams`: the address, or the follower's token, has as many streams open as one may (not the room).
    """

    def __init__(self, followers: int, address: bool = False, streams: bool = False) -> None:
        super().__init__(followers, address, streams)
        self.followers, self.address, self.streams = followers, address, streams


Queue: TypeAlias = asyncio.Queue[Session | None]
"""A follower's versions still to send (GONE: the session is no longer kept)."""


class Hub(Protocol):
    """What the routes need of a place that keeps sessions."""

    async def add(self, session: Session) -> bool:
        """Keep a new session; False if its code is taken."""
        ...

    async def get(self, code: str) -> Session | None:
        """The session now, or None: no such code, or expired."""
        ...

    async def update(self, code: str, change: SessionEdit) -> Session | None:
        """Apply `change` to the session, atomically, and send the result to every follower."""
        ...

    async def admit(self, code: str, client: str, room: Room | None = None, token: str = "") -> Queue:
        """A queue of the session's new versions, counted as a follower of `client` until `leave`.

        Checked and counted in one step: Full if `room` has no place left, for anyone or for `client`.
        With a follower's `token`, its seat too: held already (its streams come and go), or taken now if
        the room's seats, and `client`'s share of them, have a place; Full if not. A seat is held while a
        stream with its token is open, and SEAT_GRACE_SECONDS after: only a seat's vote is counted.
        """
        ...

    async def leave(self, code: str, queue: Queue) -> None:
        """The follower of `queue` is gone: no longer counted."""
        ...

    async def followers(self, code: str, client: str | None = None) -> int:
        """How many follow the session, over every worker (from `client` alone, if given)."""
        ...

    async def seats(self, code: str, client: str | None = None) -> tuple[int, int]:
        """The seats held in the session, and how many of them the most crowded address holds (or `client`)."""
        ...

    async def holds(self, code: str, token: str) -> bool:
        """Whether `token` holds a seat in the session now."""
        ...

    async def missed(self, client: str) -> int:
        """Count a wrong code from `client`: how many it has tried in the window."""
        ...

    async def started(self, client: str) -> int:
        """Count a session started from `client`: how many it has started in the window (this one too)."""
        ...

    async def vote(self, code: str, key: str, token: str, answer: str, client: str, per_address: int) -> int | None:
        """Keep `token`'s answer in round `key`, replacing its last, if that round takes votes now: one step.

        The votes in the round after it; None if the session is no longer kept. VoteRefused if the token
        holds no seat (`seat`), the round is not open (`closed`), the token changed its answer VOTE_CHANGES
        times (`token`), or `client` sent `per_address` votes in the window (`address`).
        """
        ...

    async def ballots(self, code: str, key: str) -> list[str]:
        """Round `key`'s answers, one per token that holds its seat now, without the tokens."""
        ...

    async def answered(self, code: str, key: str) -> int:
        """How many tokens that hold their seats now answered in round `key`: never more than the seats."""
        ...

    async def own(self, code: str, key: str, token: str) -> str | None:
        """`token`'s answer in round `key`, if it gave one."""
        ...

    async def misses(self, client: str) -> int:
        """How many wrong codes `client` has tried in the window, counting none."""
        ...

    async def close(self) -> None:
        """Let go of connections and tasks."""
        ...


class Fanout:
    """The followers in this process, by session: each has a queue of the versions it has still to send."""

    def __init__(self) -> None:
        self.queues: defaultdict[str, set[Queue]] = defaultdict(set)
        self.clients: defaultdict[str, Counter[str]] = defaultdict(Counter)
        """Followers here by session, then by client address."""
        self.owners: dict[Queue, tuple[str, str]] = {}
        """Each follower's client address and token."""
        self.streams: defaultdict[str, Counter[str]] = defaultdict(Counter)
        """Streams here by session, then by token (a follower's tabs)."""
        self.per_client: Counter[str] = Counter()
        """Streams here by client address, over every session."""

    def deliver(self, code: str, session: Session | None) -> None:
        """Give `session` (GONE: the session is no longer kept) to every follower of `code` here."""
        for queue in self.queues.get(code, ()):
            if queue.full():  # a follower that fell behind skips to the newest
                while not queue.empty():
                    queue.get_nowait()
            queue.put_nowait(session)

    def check(self, code: str, client: str, token: str) -> None:
        """Full (`streams`) if `client`, or `token`, has as many streams open here as one may."""
        tabs = self.streams[code][token] if token and code in self.streams else 0
        if self.per_client[client] >= STREAMS_PER_ADDRESS or tabs >= STREAMS_PER_SEAT:
            raise Full(self.count(code), streams=True)

    def add(self, code: str, client: str = "", token: str = "") -> Queue:
        """A new follower's queue, from `client` with `token`."""
        queue: Queue = asyncio.Queue(QUEUE_SIZE)
        self.queues[code].add(queue)
        self.clients[code][client] += 1
        self.owners[queue] = client, token
        self.per_client[client] += 1
        if token:
            self.streams[code][token] += 1
        return queue

    def admit(self, code: str, client: str, room: Room, token: str = "") -> Queue:
        """A new follower's queue if `room` has a place for it (Full if not), checked and added in one step."""
        self.check(code, client, token)
        if (n := self.count(code)) >= room.size:
            raise Full(n)
        if self.clients[code][client] >= room.per_address:
            raise Full(n, address=True)
        return self.add(code, client, token)

    def remove(self, code: str, queue: Queue) -> str | None:
        """A follower gone (once: a second removal of the same queue changes nothing); its token, if any."""
        owner = self.owners.pop(queue, None)
        if owner is None:
            return None
        client, token = owner
        self.queues[code].discard(queue)
        _less(self.clients[code], client)
        _less(self.per_client, client)
        if token:
            _less(self.streams[code], token)
            if not self.streams[code]:
                del self.streams[code]
        if not self.queues[code]:
            del self.queues[code], self.clients[code]
        return token

    def count(self, code: str, client: str | None = None) -> int:
        """Followers of `code` in this process (from `client` alone, if given)."""
        if client is not None:
            return self.clients[code][client] if code in self.clients else 0
        return len(self.queues.get(code, ()))

    def tokens(self, code: str) -> set[str]:
        """The tokens with a stream open here: their seats are held."""
        return set(self.streams.get(code, ()))


def _less(counter: Counter[K], key: K) -> None:
    """One fewer of `key`, and none kept once there are none."""
    counter[key] -= 1
    if counter[key] <= 0:
        del counter[key]


class Window:
    """Events by client address (wrong codes, sessions started) in a sliding window, each address's kept bounded."""

    def __init__(self, seconds: float, limit: int) -> None:
        self.seconds, self.limit = seconds, limit
        self.times: defaultdict[str, deque[float]] = defaultdict(deque)

    def count(self, client: str, now: float) -> int:
        """How many in the window."""
        return sum(1 for t in self.times.get(client, ()) if t >= now - self.seconds)

    def note(self, client: str, now: float) -> int:
        """Count one, forget those past the window, and say how many are left.

        Past the limit only the latest `limit` + 1 are kept (enough to say it is past): a script's 600
        guesses a second cost no more memory than a class's hundred mistypes.
        """
        if len(self.times) > 10_000:  # a crowd of addresses: forget the ones that stopped
            for key in [k for k, t in self.times.items() if not t or t[-1] < now - self.seconds]:
                del self.times[key]
        times = self.times[client]
        times.append(now)
        while times and (times[0] < now - self.seconds or len(times) > self.limit + 1):
            times.popleft()
        return len(times)


def takes_votes(session: Session | None, key: str) -> bool:
    """Whether round `key` of `session` takes votes now: its question is the one on the screens, and open."""
    poll = session.poll if session is not None and not session.ended else None
    return poll is not None and poll.open and poll.key == key


@dataclass
class Seat:
    """A follower's place, by its token: its address, and until when it is held once no stream holds it."""

    client: str
    until: float


class MemoryHub:
    """Sessions in this process: for one worker, with nothing else to run."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.sessions: dict[str, Session] = {}
        self.fanout = Fanout()
        self.wrong = Window(MISS_WINDOW_SECONDS, MISSES_ALLOWED)
        self.starts = Window(START_WINDOW_SECONDS, STARTS_ALLOWED)
        self.seats_by_code: defaultdict[str, dict[str, Seat]] = defaultdict(dict)
        self.votes: defaultdict[tuple[str, str], dict[str, str]] = defaultdict(dict)
        """Answers by session and round, then by token."""
        self.changes: Counter[tuple[str, str, str]] = Counter()
        self.sent: Counter[tuple[str, int]] = Counter()
        """Votes by client address and window."""

    async def add(self, session: Session) -> bool:
        """Keep a new session, forgetting the expired ones; False if its code is taken, or SESSIONS_KEPT are."""
        now = self.clock()
        for code in [c for c, s in self.sessions.items() if s.expired(now)]:
            del self.sessions[code]
            self.seats_by_code.pop(code, None)
            for kept in [k for k in self.votes if k[0] == code]:  # nothing of a student outlives the session
                del self.votes[kept]
            for counted in [k for k in self.changes if k[0] == code]:
                del self.changes[counted]
        if len(self.sessions) >= SESSIONS_KEPT:
            raise Full(len(self.sessions))
        if session.code in self.sessions:
            return False
        self.sessions[session.code] = session
        return True

    async def get(self, code: str) -> Session | None:
        """The session, unless it expired."""
        session = self.sessions.get(code)
        return None if session is None or session.expired(self.clock()) else session

    async def update(self, code: str, change: SessionEdit) -> Session | None:
        """Change the session and tell this process's followers."""
        session = await self.get(code)
        if session is None:
            return None
        self.sessions[code] = changed = change(session)
        self.fanout.deliver(code, changed)
        return changed

    def _held(self, code: str) -> dict[str, Seat]:
        """The session's seats held now (a stream open with the token, or within its grace), the rest let go."""
        now, open_here = self.clock(), self.fanout.tokens(code)
        seats = self.seats_by_code.get(code, {})
        for token in [t for t, seat in seats.items() if seat.until <= now and t not in open_here]:
            del seats[token]
        return seats

    async def admit(self, code: str, client: str, room: Room | None = None, token: str = "") -> Queue:
        """A follower's queue, checked and counted with no await between (one event loop: one step)."""
        room = room or UNLIMITED
        self.fanout.check(code, client, token)
        if token:
            seats = self._held(code)
            if token not in seats:
                if len(seats) >= room.size:
                    raise Full(len(seats))
                if sum(1 for seat in seats.values() if seat.client == client) >= room.per_address:
                    raise Full(len(seats), address=True)
            queue = self.fanout.admit(code, client, room, token)
            self.seats_by_code[code][token] = Seat(client, self.clock() + SEAT_GRACE_SECONDS)
            return queue
        return self.fanout.admit(code, client, room)

    async def leave(self, code: str, queue: Queue) -> None:
        """A follower gone: its seat held for its grace from now."""
        token = self.fanout.remove(code, queue)
        if token and (seat := self.seats_by_code.get(code, {}).get(token)) is not None:
            seat.until = self.clock() + SEAT_GRACE_SECONDS

    async def followers(self, code: str, client: str | None = None) -> int:
        """Followers of the session (from `client` alone, if given): all of them are in this process."""
        return self.fanout.count(code, client)

    async def seats(self, code: str, client: str | None = None) -> tuple[int, int]:
        """The seats held, and the most held by one address (or by `client`)."""
        by_client = Counter(seat.client for seat in self._held(code).values())
        most = by_client[client] if client is not None else max(by_client.values(), default=0)
        return sum(by_client.values()), most

    async def holds(self, code: str, token: str) -> bool:
        """Whether `token` holds a seat."""
        return token in self._held(code)

    async def missed(self, client: str) -> int:
        """Count a wrong code from `client`."""
        return self.wrong.note(client, self.clock())

    async def misses(self, client: str) -> int:
        """Wrong codes from `client` in the window."""
        return self.wrong.count(client, self.clock())

    async def started(self, client: str) -> int:
        """Count a session started from `client`."""
        return self.starts.note(client, self.clock())

    async def vote(self, code: str, key: str, token: str, answer: str, client: str, per_address: int) -> int | None:
        """Keep the answer, checked and kept with no await between (one event loop: one step)."""
        session = await self.get(code)
        if session is None:
            return None
        if token not in self._held(code):
            raise VoteRefused("seat")
        if not takes_votes(session, key):
            raise VoteRefused("closed")
        if self.changes[code, key, token] >= VOTE_CHANGES:
            raise VoteRefused("token")
        window = int(self.clock() // VOTE_WINDOW_SECONDS)
        if len(self.sent) > 10_000:  # a crowd of addresses: forget the windows past
            for old in [k for k in self.sent if k[1] != window]:
                del self.sent[old]
        if self.sent[client, window] >= per_address:
            raise VoteRefused("address")
        self.changes[code, key, token] += 1
        self.sent[client, window] += 1
        self.votes[code, key][token] = answer
        return len(self.votes[code, key])

    def _counted(self, code: str, key: str) -> list[str]:
        held = self._held(code)
        return [answer for token, answer in self.votes.get((code, key), {}).items() if token in held]

    async def ballots(self, code: str, key: str) -> list[str]:
        """The round's answers of the seats held."""
        return self._counted(code, key)

    async def answered(self, code: str, key: str) -> int:
        """The round's count, of the seats held."""
        return len(self._counted(code, key))

    async def own(self, code: str, key: str, token: str) -> str | None:
        """The token's answer."""
        return self.votes.get((code, key), {}).get(token)

    async def close(self) -> None:
        """Nothing to let go of."""


async def versions(
    hub: Hub, code: str, queue: Queue, last_seen: int | None, lifetime: float | None = None
) -> AsyncIterator[Session | Unavailable | None]:
    """What a follower's stream sends, in order of version and each version once, from `queue` (admitted).

    First the session as it is now (unless `last_seen`, the stream's Last-Event-ID, is already it), then
    every newer version. GONE when the session is no longer kept, and then nothing more; after an end,
    nothing more. An `Unavailable` while the hub cannot be reached: the stream says so and keeps asking,
    and once the hub answers it sends the session again, even at the version it had sent (the follower's
    screen says it lost touch until it hears). The follower is counted from before the first read, so no
    version falls between the two. After `lifetime` seconds it ends by itself (the browser reconnects with
    Last-Event-ID and misses nothing): a client that stopped reading is let go by then.
    """
    loop = asyncio.get_running_loop()
    deadline = math.inf if lifetime is None else loop.time() + lifetime
    sent = -1 if last_seen is None else last_seen
    away = False
    while loop.time() < deadline:
        try:
            session = await hub.get(code)
        except Unavailable as error:
            yield error
            away = True
            await asyncio.sleep(max(0.0, min(RETRY_SECONDS, deadline - loop.time())))
            continue
        while True:
            if session is None:
                yield GONE
                return
            if session.version > sent or (away and session.version == sent):
                sent = session.version
                yield session
            away = False
            if session.ended:
                return
            # Each wait bounded by itself, never a timeout around a yield: that would cancel the
            # caller's send, not this generator's wait.
            wait = min(CHECK_SECONDS, deadline - loop.time())
            if wait <= 0:
                return
            try:
                # Not wait_for: on Python 3.11 it swallows a cancellation that comes as the get
                # completes, and a closed stream would go on following.
                async with asyncio.timeout(wait):
                    session = await queue.get()
            except TimeoutError:
                break  # quiet for a while: ask the hub itself
