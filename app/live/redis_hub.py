"""Sessions in Redis, for many workers or machines behind a load balancer.

Each session is one key holding its JSON, expiring four hours after the teacher's last action. A
change is a WATCH/MULTI transaction that writes the key and PUBLISHes the new version on one channel
in the same EXEC, so versions reach every worker in the order they were written. Each worker listens
on one pub/sub connection, whatever its number of followers, and hands each version to its own
(app/live/hub.py Fanout). When Redis comes back after going away, the listener asks again for every
session followed here, so a version published meanwhile is not missed, and a session Redis lost is
said to have ended.

Followers are counted per worker, in one hash per session (worker → count and time), rewritten every
few seconds; a worker killed stops rewriting its field, and after a short while it no longer counts.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, WatchError

from app.live.hub import GONE, MISS_WINDOW_SECONDS, Fanout, SessionEdit, Unavailable
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


class RedisHub:
    """Sessions and their fan-out through Redis (`redis://host:port/db`)."""

    def __init__(self, url: str, clock: Callable[[], float] = time.time) -> None:
        # One try again on a new connection: a pooled one that Redis dropped (restarted, or closed it
        # idle) fails its next command, and the teacher's click would be lost. (from_url passes no
        # retry of its own to the connections: without this, none.)
        self.redis = redis.Redis.from_url(url, socket_timeout=5, socket_connect_timeout=2, health_check_interval=10,
                                          retry=Retry(NoBackoff(), 1))  # fmt: skip
        self.clock = clock
        self.fanout = Fanout()
        self.worker = uuid.uuid4().hex
        self.tasks: list[asyncio.Task[None]] = []
        self.listening = asyncio.Event()

    def _ensure_started(self) -> None:
        # Started by the first follower, inside the running loop: a worker that only renders pages
        # holds no pub/sub connection.
        if not self.tasks:
            self.tasks = [asyncio.create_task(self._listen()), asyncio.create_task(self._heartbeat())]

    async def add(self, session: Session) -> bool:
        """Keep a new session unless its code is taken (SET NX)."""
        try:
            return bool(await self.redis.set(PREFIX + session.code, session.to_json(), ex=LIFETIME_SECONDS, nx=True))
        except RedisError as error:
            raise Unavailable(str(error)) from error

    async def get(self, code: str) -> Session | None:
        """The session, or None if Redis does not keep it (expired, ended long ago, or lost)."""
        try:
            text = await self.redis.get(PREFIX + code)
        except RedisError as error:
            raise Unavailable(str(error)) from error
        session = None if text is None else Session.from_json(text)
        return None if session is None or session.expired(self.clock()) else session

    async def update(self, code: str, change: SessionEdit) -> Session | None:
        """Change the session and publish the new version, in one transaction (retried if another wrote first)."""
        key = PREFIX + code
        try:
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
        except RedisError as error:
            raise Unavailable(str(error)) from error

    @asynccontextmanager
    async def follow(self, code: str) -> AsyncIterator[asyncio.Queue[Session | None]]:
        """A follower's queue, counted in Redis while it follows.

        Yielded once this worker's listener is subscribed, so a version written after the follower's
        first read reaches its queue; while Redis is away, after a short wait (the stream says so,
        and the listener catches up once it is back).
        """
        self._ensure_started()
        queue = self.fanout.add(code)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(LISTEN_WAIT_SECONDS):
                    await self.listening.wait()
            with contextlib.suppress(RedisError):  # the heartbeat counts it when Redis is back
                await self._count(code)
            yield queue
        finally:
            self.fanout.remove(code, queue)
            with contextlib.suppress(RedisError):
                await self._count(code)

    async def followers(self, code: str) -> int:
        """Followers over every worker that has counted lately."""
        try:
            fields = await self.redis.hgetall(f"{PREFIX}{code}:followers")
        except RedisError as error:
            raise Unavailable(str(error)) from error
        now = self.clock()
        total = 0
        for value in fields.values():
            count, _, when = (value.decode() if isinstance(value, bytes) else value).partition(" ")
            if now - float(when) < STALE_SECONDS:
                total += int(count)
        return total

    async def missed(self, client: str) -> int:
        """Count a wrong code from `client`, over every worker."""
        key = f"{PREFIX}misses:{client}"
        try:
            async with self.redis.pipeline(transaction=True) as pipe:
                pipe.incr(key)
                pipe.expire(key, MISS_WINDOW_SECONDS, nx=True)
                count, _ = await pipe.execute()
        except RedisError as error:
            raise Unavailable(str(error)) from error
        return int(count)

    async def misses(self, client: str) -> int:
        """Wrong codes from `client` in the window, over every worker."""
        try:
            count = await self.redis.get(f"{PREFIX}misses:{client}")
        except RedisError as error:
            raise Unavailable(str(error)) from error
        return int(count or 0)

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

    async def _count(self, code: str) -> None:
        # Written again while the count changed meanwhile: a heartbeat that read it before the last
        # follower left would otherwise land after that follower's own write, and count it still.
        key = f"{PREFIX}{code}:followers"
        while True:
            count = self.fanout.count(code)
            if count:
                await self.redis.hset(key, self.worker, f"{count} {self.clock()}")
                await self.redis.expire(key, LIFETIME_SECONDS)
            else:
                await self.redis.hdel(key, self.worker)
            if self.fanout.count(code) == count:
                return

    async def _heartbeat(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_SECONDS)
            with contextlib.suppress(RedisError):
                for code in list(self.fanout.queues):
                    await self._count(code)

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
