"""Sessions in Redis, for many workers or machines behind a load balancer.

Each session is one key holding its JSON, expiring four hours after the teacher's last action. A
change is a WATCH/MULTI transaction that writes the key and PUBLISHes the new version on one channel
in the same EXEC, so versions reach every worker in the order they were written. Each worker listens
on one pub/sub connection, whatever its number of followers, and hands each version to its own
(app/live/hub.py Fanout). When Redis comes back after going away, the listener asks again for every
session followed here, so a version published meanwhile is not missed, and a session Redis lost is
said to have ended.

Followers are counted per worker, in one hash per session and one per session and client address
(worker → count and time), rewritten every few seconds; a worker killed stops rewriting its field, and
after a short while it no longer counts. A new follower is admitted by one Lua script that sums the
other workers' fields, compares with the room and writes this worker's, so two workers admitting at the
same moment cannot both take the last place; within a worker, admissions and rewrites take turns (a lock).

On the request path every call has a short deadline and no second try, and a breaker: after a failure,
for BREAKER_SECONDS every call raises `Unavailable` at once, so a Redis that hangs costs a request
half a second once, not several seconds at each call (docs/architecture.md, "Live sessions").
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager

import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError, WatchError

from app.live.hub import (
    GONE,
    MISS_WINDOW_SECONDS,
    SEAT_GRACE_SECONDS,
    START_WINDOW_SECONDS,
    UNLIMITED,
    VOTE_CHANGES,
    VOTE_WINDOW_SECONDS,
    Fanout,
    Full,
    Queue,
    Room,
    SessionEdit,
    Unavailable,
    VoteRefused,
)
from app.live.session import LIFETIME_SECONDS, Session

PREFIX = "zero-bands:live:"
CHANNEL = "zero-bands:live"
HEARTBEAT_SECONDS = 5.0
STALE_SECONDS = 3 * HEARTBEAT_SECONDS
"""A worker's count of followers older than this is a worker that stopped: not counted."""
RECONNECT_SECONDS = (0.25, 0.5, 1.0, 2.0)
"""The listener's waits between tries while Redis is away; the last repeats."""
CANCEL_SECONDS = 0.05
"""How long close() waits for a task it cancelled before cancelling it again."""
LISTEN_WAIT_SECONDS = 2.0
"""How long a new follower waits for the listener to be subscribed (Redis may be away)."""
CALL_SECONDS = 0.5
"""The longest one Redis call on the request path may take (connecting, or waiting for its answer)."""
BREAKER_SECONDS = 3.0
"""After a failed call, how long every call is refused at once before Redis is tried again."""
ADMIT = """
local worker, now, stale = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local function others(key)
  local total = 0
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    if fields[i] ~= worker then
      local count, when = string.match(fields[i + 1], '^(%d+) (%S+)$')
      if count and now - tonumber(when) < stale then total = total + tonumber(count) end
    end
  end
  return total
end
local room = others(KEYS[1]) + tonumber(ARGV[4])
if room > tonumber(ARGV[5]) then return {1, room - 1} end
if others(KEYS[2]) + tonumber(ARGV[6]) > tonumber(ARGV[7]) then return {2, room - 1} end
local token, client = ARGV[9], ARGV[11]
if token ~= '' then
  local held = redis.call('ZSCORE', KEYS[3], token)
  if not held or tonumber(held) <= now then
    local gone = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now)
    for i = 1, #gone do redis.call('HDEL', KEYS[4], gone[i]) end
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
    local seats = redis.call('ZRANGE', KEYS[3], 0, -1)
    if #seats >= tonumber(ARGV[5]) then return {1, #seats} end
    local mine = 0
    for i = 1, #seats do
      if redis.call('HGET', KEYS[4], seats[i]) == client then mine = mine + 1 end
    end
    if mine >= tonumber(ARGV[7]) then return {2, #seats} end
  end
  redis.call('ZADD', KEYS[3], ARGV[10], token)
  redis.call('HSET', KEYS[4], token, client)
  redis.call('EXPIRE', KEYS[3], ARGV[8])
  redis.call('EXPIRE', KEYS[4], ARGV[8])
end
redis.call('HSET', KEYS[1], worker, ARGV[4] .. ' ' .. ARGV[2])
redis.call('EXPIRE', KEYS[1], ARGV[8])
redis.call('HSET', KEYS[2], worker, ARGV[6] .. ' ' .. ARGV[2])
redis.call('EXPIRE', KEYS[2], ARGV[8])
return {0, room}
"""
"""A follower's admission, in one step: KEYS are the session's and the address's counts by worker, and the
session's seats (token → until when held) and their addresses; ARGV this worker, the time, STALE_SECONDS,
then this worker's count and the limit, for the session and for the address, the keys' lifetime, the
follower's token (empty: no seat), until when its seat is held, and its address. This worker's counts
include the new follower. A token whose seat is held keeps it; a new one takes a seat if the room's seats,
and the address's share of them, have a place. {0, followers} if admitted, else {1 (the room) or 2 (the
address's share), the followers or seats before}."""

SEATS = """
local tokens = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. ARGV[1], '+inf')
local by, most = {}, 0
for i = 1, #tokens do
  local client = redis.call('HGET', KEYS[2], tokens[i]) or ''
  by[client] = (by[client] or 0) + 1
  if by[client] > most then most = by[client] end
end
if ARGV[2] == '1' then most = by[ARGV[3]] or 0 end
return {#tokens, most}
"""
"""The seats held now (KEYS: the seats, their addresses; ARGV: the time, whether one address is asked, which):
{seats, the most one address holds, or the address asked}."""

COUNTED = """
local out, now = {}, tonumber(ARGV[1])
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  local held = redis.call('ZSCORE', KEYS[2], all[i])
  if held and tonumber(held) > now then out[#out + 1] = all[i + 1] end
end
return out
"""
"""A round's answers of the seats held now (KEYS: the round's answers, the seats; ARGV: the time)."""

VOTE = """
local text = redis.call('GET', KEYS[1])
if not text then return -1 end
local held = redis.call('ZSCORE', KEYS[5], ARGV[2])
if not held or tonumber(held) <= tonumber(ARGV[8]) then return -5 end
local session = cjson.decode(text)
local polls = session['polls'] or {}
local poll = polls[#polls]
if session['ended'] or not poll or poll['done'] or not poll['open']
   or string.format('%d.%d', poll['number'], poll['round']) ~= ARGV[1] then return -2 end
if redis.call('HINCRBY', KEYS[3], ARGV[2], 1) > tonumber(ARGV[4]) then return -3 end
redis.call('EXPIRE', KEYS[3], ARGV[6])
local sent = redis.call('INCR', KEYS[4])
if sent == 1 then redis.call('EXPIRE', KEYS[4], ARGV[7]) end
if sent > tonumber(ARGV[5]) then return -4 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[2], ARGV[6])
return redis.call('HLEN', KEYS[2])
"""
"""A vote, checked against the session as stored and kept in one step, so a round closed by another worker
takes no vote after: KEYS are the session, the round's answers (token → answer), its changes by token, the
address's votes in the window and the session's seats; ARGV the round's key, the token, the answer, the two
limits, the session's lifetime, the window and the time. The votes in the round after it, or -1 (no
session), -5 (the token holds no seat), -2 (not open), -3 (the token's limit), -4 (the address's)."""
REFUSED = {-2: "closed", -3: "token", -4: "address", -5: "seat"}


class Breaker:
    """After a failure, every call refused at once for `seconds`; then the next call tries again.

    One timestamp, not a library's breaker: the rule is one failure opens it (a hung Redis makes every
    call wait), and closing is the next call that succeeds (docs/architecture.md, "Live sessions").
    """

    def __init__(self, seconds: float = BREAKER_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self.clock = seconds, clock
        self.until = -float("inf")

    @property
    def open(self) -> bool:
        """Whether calls are refused now."""
        return self.clock() < self.until

    def check(self) -> None:
        """Unavailable at once while open."""
        if self.open:
            raise Unavailable("Redis failed a moment ago; not tried again yet")

    def trip(self) -> None:
        """A call failed: open for `seconds`."""
        self.until = self.clock() + self.seconds


POOL_SIZE = 64
"""Connections one worker keeps to Redis: each call holds one for about a millisecond."""


class RedisHub:
    """Sessions and their fan-out through Redis (`redis://host:port/db`)."""

    def __init__(self, url: str, clock: Callable[[], float] = time.time) -> None:
        # One try again on a new connection when a pooled one was dropped (Redis restarted, or closed
        # it idle): its next command fails at once, and the teacher's click would be lost. Never again
        # after a timeout: a Redis that does not answer is not asked twice. (from_url passes no retry
        # of its own to the connections: without this, none.)
        retry = Retry(NoBackoff(), 1, supported_errors=(RedisConnectionError,))
        # A pool that makes a burst wait its turn for a connection (CALL_SECONDS at most), rather than
        # refusing past its size: 300 votes at once would otherwise fail past the 100th, and trip the breaker.
        pool = redis.BlockingConnectionPool.from_url(url, max_connections=POOL_SIZE, timeout=CALL_SECONDS,
                                                     socket_timeout=CALL_SECONDS, socket_connect_timeout=CALL_SECONDS,
                                                     health_check_interval=10, retry=retry)  # fmt: skip
        self.redis = redis.Redis.from_pool(pool)
        self.admit_script = self.redis.register_script(ADMIT)
        self.vote_script = self.redis.register_script(VOTE)
        self.seats_script = self.redis.register_script(SEATS)
        self.counted_script = self.redis.register_script(COUNTED)
        self.clock = clock
        self.breaker = Breaker(BREAKER_SECONDS)
        self.fanout = Fanout()
        self.worker = uuid.uuid4().hex
        self.tasks: list[asyncio.Task[None]] = []
        self.listening = asyncio.Event()
        self.counting = asyncio.Lock()
        """Held while this worker's counts change and are written: each write is of the count then."""

    @contextmanager
    def _guard(self) -> Iterator[None]:
        """A call on the request path: refused at once while the breaker is open; a failure opens it."""
        self.breaker.check()
        try:
            yield
        except RedisError as error:
            self.breaker.trip()
            raise Unavailable(str(error)) from error

    def _ensure_started(self) -> None:
        # Started by the first follower, inside the running loop: a worker that only renders pages
        # holds no pub/sub connection.
        if not self.tasks:
            self.tasks = [asyncio.create_task(self._listen()), asyncio.create_task(self._heartbeat())]

    async def add(self, session: Session) -> bool:
        """Keep a new session unless its code is taken (SET NX)."""
        with self._guard():
            return bool(await self.redis.set(PREFIX + session.code, session.to_json(), ex=LIFETIME_SECONDS, nx=True))

    async def get(self, code: str) -> Session | None:
        """The session, or None if Redis does not keep it (expired, ended long ago, or lost)."""
        with self._guard():
            text = await self.redis.get(PREFIX + code)
        session = None if text is None else Session.from_json(text)
        return None if session is None or session.expired(self.clock()) else session

    async def update(self, code: str, change: SessionEdit) -> Session | None:
        """Change the session and publish the new version, in one transaction (retried if another wrote first)."""
        key = PREFIX + code
        with self._guard():
            async with self.redis.pipeline(transaction=True) as pipe:
                while True:
                    try:
                        await pipe.watch(key)
                        text = await pipe.get(key)
                        session = None if text is None else Session.from_json(text)
                        if session is None or session.expired(self.clock()):
                            return None
                        changed = change(session)
                        pipe.multi()  # type: ignore[no-untyped-call]
                        pipe.set(key, changed.to_json(), ex=LIFETIME_SECONDS)
                        pipe.publish(CHANNEL, changed.to_json())
                        await pipe.execute()
                        return changed
                    except WatchError:
                        continue

    async def admit(self, code: str, client: str, room: Room | None = None, token: str = "") -> Queue:
        """A follower's queue, checked against `room` over every worker and counted, in one script.

        Returned once this worker's listener is subscribed, so a version written after the follower's
        first read reaches its queue; while Redis is away, after a short wait (the stream says so,
        and the listener catches up once it is back).
        """
        self._ensure_started()
        room = room or UNLIMITED
        async with self.counting:
            self.fanout.check(code, client, token)
            queue = self.fanout.add(code, client, token)
            try:
                with self._guard():
                    keys = [f"{PREFIX}{code}:followers", _from(code, client), *_seats(code)]
                    now = self.clock()
                    args = (self.worker, now, STALE_SECONDS, self.fanout.count(code), room.size,
                            self.fanout.count(code, client), room.per_address, LIFETIME_SECONDS, token,
                            now + SEAT_GRACE_SECONDS, client)  # fmt: skip
                    refused, followers = await self.admit_script(keys=keys, args=args)
            except BaseException:
                self.fanout.remove(code, queue)
                raise
            if refused:
                self.fanout.remove(code, queue)
                raise Full(int(followers), address=refused == 2)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(LISTEN_WAIT_SECONDS):
                await self.listening.wait()
        return queue

    async def leave(self, code: str, queue: Queue) -> None:
        """A follower gone: counted out here at once, and in Redis if it answers (else the heartbeat does)."""
        owner = self.fanout.owners.get(queue)
        self.fanout.remove(code, queue)  # at once, even if the write below is cancelled
        if owner is not None and not self.breaker.open:  # while open, the heartbeat writes it later
            async with self.counting:
                try:
                    await self._count(code, [owner[0]], [owner[1]] if owner[1] else [])
                except RedisError:
                    self.breaker.trip()

    async def followers(self, code: str, client: str | None = None) -> int:
        """Followers over every worker that has counted lately (from `client` alone, if given)."""
        with self._guard():
            fields = await self.redis.hgetall(f"{PREFIX}{code}:followers" if client is None else _from(code, client))
        now = self.clock()
        total = 0
        for value in fields.values():
            count, _, when = (value.decode() if isinstance(value, bytes) else value).partition(" ")
            if now - float(when) < STALE_SECONDS:
                total += int(count)
        return total

    async def seats(self, code: str, client: str | None = None) -> tuple[int, int]:
        """The seats held over every worker, and the most one address holds (or `client`), in one script."""
        with self._guard():
            held, most = await self.seats_script(keys=_seats(code), args=[self.clock(), int(client is not None),
                                                                             client or ""])  # fmt: skip
        return int(held), int(most)

    async def holds(self, code: str, token: str) -> bool:
        """Whether `token`'s seat is held now, over every worker."""
        with self._guard():
            until = await self.redis.zscore(_seats(code)[0], token)
        return until is not None and float(until) > self.clock()

    async def missed(self, client: str) -> int:
        """Count a wrong code from `client`, over every worker."""
        return await self._note(f"{PREFIX}misses:{client}", MISS_WINDOW_SECONDS)

    async def started(self, client: str) -> int:
        """Count a session started from `client`, over every worker."""
        return await self._note(f"{PREFIX}starts:{client}", START_WINDOW_SECONDS)

    async def _note(self, key: str, window: int) -> int:
        # A window from the first event: one counter and its expiry, the same on every worker.
        with self._guard():
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.incr(key)
                pipe.expire(key, window, nx=True)
                count, _ = await pipe.execute()
        return int(count)

    async def misses(self, client: str) -> int:
        """Wrong codes from `client` in the window, over every worker."""
        with self._guard():
            count = await self.redis.get(f"{PREFIX}misses:{client}")
        return int(count or 0)

    async def vote(self, code: str, key: str, token: str, answer: str, client: str, per_address: int) -> int | None:
        """Keep the answer in the round's hash, checked against the session as stored, in one script."""
        keys = [PREFIX + code, f"{PREFIX}{code}:votes:{key}", f"{PREFIX}{code}:changes:{key}",
                f"{PREFIX}votes-from:{client}", _seats(code)[0]]  # fmt: skip
        args: list[str | int | float] = [key, token, answer, VOTE_CHANGES, per_address, LIFETIME_SECONDS,
                                         VOTE_WINDOW_SECONDS, self.clock()]  # fmt: skip
        with self._guard():
            votes = int(await self.vote_script(keys=keys, args=args))
        if votes == -1:
            return None
        if votes < 0:
            raise VoteRefused(REFUSED[votes])
        return votes

    async def ballots(self, code: str, key: str) -> list[str]:
        """The round's answers of the seats held, from its hash, in one script."""
        with self._guard():
            values = await self.counted_script(keys=[f"{PREFIX}{code}:votes:{key}", _seats(code)[0]],
                                               args=[self.clock()])  # fmt: skip
        return [v.decode() if isinstance(v, bytes) else v for v in values]

    async def answered(self, code: str, key: str) -> int:
        """The round's count, of the seats held."""
        return len(await self.ballots(code, key))

    async def own(self, code: str, key: str, token: str) -> str | None:
        """The token's answer, from the round's hash."""
        with self._guard():
            value = await self.redis.hget(f"{PREFIX}{code}:votes:{key}", token)
        return value.decode() if isinstance(value, bytes) else value

    async def close(self) -> None:
        """Stop listening, and close the connections."""
        for task in self.tasks:
            # Until it ends: on Python 3.11 a redis-py call can swallow a cancellation (its own
            # asyncio.wait_for), and the heartbeat or the listener would go on, and close() wait for ever.
            while not task.done():
                task.cancel()
                await asyncio.wait([task], timeout=CANCEL_SECONDS)
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.redis.aclose()

    async def _count(self, code: str, clients: Iterable[str], tokens: Iterable[str]) -> None:
        # Under `counting`: the counts written are this worker's now, and no admission writes between. A
        # session Redis no longer keeps (it restarted empty) gets no counts or seats written back.
        now, kept = self.clock(), bool(await self.redis.exists(PREFIX + code))
        for key, count in [(f"{PREFIX}{code}:followers", self.fanout.count(code)),
                           *((_from(code, c), self.fanout.count(code, c)) for c in clients)]:  # fmt: skip
            if count and kept:
                await self.redis.hset(key, self.worker, f"{count} {now}")
                await self.redis.expire(key, LIFETIME_SECONDS)
            else:
                await self.redis.hdel(key, self.worker)
        if kept and (seats := dict.fromkeys(tokens, now + SEAT_GRACE_SECONDS)):
            # Held from now for their grace: refreshed while a stream is open here, counted from its end after.
            await self.redis.zadd(_seats(code)[0], seats, xx=True)

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            with contextlib.suppress(RedisError):
                await self._beat()

    async def _beat(self) -> None:
        # Every count of this worker written again, with the time: a worker that stops, stops counting.
        async with self.counting:
            for code in list(self.fanout.queues):
                await self._count(code, list(self.fanout.clients[code]), self.fanout.tokens(code))

    async def _listen(self) -> None:
        tries = 0
        while True:
            try:
                async with self.redis.pubsub() as pubsub:
                    await pubsub.subscribe(CHANNEL)
                    async for message in pubsub.listen():
                        if message["type"] == "subscribe":
                            # Redis has the subscription now (SUBSCRIBE's reply; again after redis-py
                            # reconnected by itself): from here every version is heard. What was
                            # published before, while away or before this worker listened, is read.
                            await self._catch_up()
                            tries = 0
                            self.listening.set()
                        elif message["type"] == "message":
                            try:
                                session = Session.from_json(message["data"])
                            except (ValueError, TypeError):
                                continue  # not one of our sessions: another release mid-deploy, another app
                            self.fanout.deliver(session.code, session)
            except (RedisError, OSError):
                self.listening.clear()
                await asyncio.sleep(RECONNECT_SECONDS[min(tries, len(RECONNECT_SECONDS) - 1)])
                tries += 1

    async def _catch_up(self) -> None:
        # Back after Redis went away: what was published meanwhile was not heard.
        for code in list(self.fanout.queues):
            text = await self.redis.get(PREFIX + code)
            self.fanout.deliver(code, GONE if text is None else Session.from_json(text))


def _seats(code: str) -> list[str]:
    """The keys of a session's seats (token → until when held) and of their addresses (token → address)."""
    return [f"{PREFIX}{code}:seats", f"{PREFIX}{code}:seat-from"]


def _from(code: str, client: str) -> str:
    """The key of a session's followers from one client address, by worker."""
    return f"{PREFIX}{code}:from:{client}"
