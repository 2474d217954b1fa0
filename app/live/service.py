"""The live sessions' rules, over a hub: finding a session, the teacher's check, the wrong-code limit, the room cap.

The web layer (app/web/live.py) reads a request into a `Visitor` and a code, asks `Sessions`, and
words what it is refused (app/web/live_view.py): each rule here raises a `Refusal` of its own kind,
with no status and no sentence, which are the web's.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from fractions import Fraction

from app.domain.questions import BadAnswer, Question, Spread, normal_answer, spread
from app.live.hub import (
    ADDRESS_SHARE,
    MISSES_ALLOWED,
    STARTS_ALLOWED,
    VOTES_PER_PLACE,
    Full,
    Hub,
    MemoryHub,
    Queue,
    Room,
    Unavailable,
    VoteRefused,
    versions,
)
from app.live.redis_hub import RedisHub
from app.live.session import Poll, Session, normal_code
from app.live.session import start as new_session


class Refusal(Exception):
    """Why a session cannot be used as asked: one of the kinds below."""


class LiveOff(Refusal):
    """Live sessions are not kept here: several workers, and no Redis to share sessions between them."""


class NoSuchSession(Refusal):
    """No session has that code (or it expired), or the text cannot be a code."""


class SessionEnded(Refusal):
    """The teacher ended the session."""


class TooManyTries(Refusal):
    """The visitor's address tried too many wrong codes lately: every code is refused alike (but its own sessions')."""


class TooManyStarts(Refusal):
    """The visitor's address started as many sessions lately as one may (hub.py STARTS_ALLOWED)."""


class Crowded(Refusal):
    """The server keeps as many sessions, or the visitor's address holds as many streams, as it may."""


class NotTheTeacher(Refusal):
    """The visitor does not hold the session's teacher's secret."""


class RoomFull(Refusal):
    """The session has as many followers as one session may have."""

    def __init__(self, followers: int) -> None:
        super().__init__(followers)
        self.followers = followers


class ShareTaken(Refusal):
    """The visitor's address follows the session with its share of the room already (hub.py ADDRESS_SHARE)."""

    def __init__(self, allowed: int) -> None:
        super().__init__(allowed)
        self.allowed = allowed


class NotAFollower(Refusal):
    """A vote without a seat of this session's (a token admitted with its stream): only those who follow it answer."""


class VoteClosed(Refusal):
    """A vote for a round that takes none now: closed, revealed, put away, or another round's."""


class BadVote(Refusal):
    """A vote that cannot be an answer to the question: why, for the person."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class TooManyVotes(Refusal):
    """A token that changed its answer too often, or an address that sent too many votes in a minute."""


@dataclass(frozen=True)
class Visitor:
    """Who asks: the client's address (wrong codes are counted by it) and the teacher's secret it carries, if any."""

    address: str
    secret: str | None = None
    token: str | None = None
    """The follower's anonymous token (its cookie), if it carries one."""
    key: str | None = None
    """The join key of the address it opened (the QR code's `?k=`), if any."""


def hub_for(redis_url: str) -> Hub:
    """Redis when configured; otherwise this process's memory."""
    return RedisHub(redis_url) if redis_url else MemoryHub()


def origin(address: str) -> str:
    """What a session keeps of the address it was started from: a digest, enough to know it again."""
    return hashlib.sha256(address.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Sessions:
    """The live sessions kept in `hub`, under their rules.

    `on` is whether sessions can be kept here at all (one worker, or Redis); `room` is how many may
    follow one session, and `share` the part of it one client address may take.
    """

    hub: Hub
    on: bool
    room: int
    share: Fraction = ADDRESS_SHARE
    clock: Callable[[], float] = time.time

    @property
    def places(self) -> Room:
        """The room, and one address's share of it."""
        return Room(self.room, self.share)

    def _kept(self) -> Hub:
        if not self.on:
            raise LiveOff
        return self.hub

    def check_on(self) -> None:
        """LiveOff unless sessions can be kept here."""
        self._kept()

    async def find(self, code: str, visitor: Visitor) -> Session:
        """The session `code` names, as typed; else NoSuchSession, SessionEnded, or TooManyTries (wrong codes).

        Every code that names no session counts as a wrong one, on every route (the join form, a page, a
        stream, the QR code, the count): a script guesses through any of them. Past the wrong codes allowed,
        every code is refused alike, a right one too (a guesser learns nothing), but for a session the
        visitor knows other than by its code: its teacher's, one its address started or follows (a seat
        held from it), or one whose QR code it scanned (its join key). So a class behind one school address
        is never locked out of its own session by one student's guesses.
        """
        hub, normal = self._kept(), normal_code(code)
        session = await hub.get(normal) if normal else None
        throttled = await hub.misses(visitor.address) >= MISSES_ALLOWED
        if session is None:
            if throttled:
                raise TooManyTries
            await hub.missed(visitor.address)
            raise NoSuchSession
        if throttled and not await self._known(session, visitor):
            raise TooManyTries
        if session.ended:
            raise SessionEnded
        return session

    async def _known(self, session: Session, visitor: Visitor) -> bool:
        """Whether the visitor may reach `session` whatever its wrong codes: it teaches, started or follows it."""
        if session.is_teacher(visitor.secret) or session.is_join_key(visitor.key):
            return True
        if session.origin == origin(visitor.address):
            return True
        return (await self._kept().seats(session.code, visitor.address))[1] > 0

    async def join(self, code: str, visitor: Visitor) -> Session:
        """The session `code` names, found as `find` does (the join form: a code naming none counts as wrong)."""
        return await self.find(code, visitor)

    async def teach(self, code: str, visitor: Visitor) -> Session:
        """The session, found as `find` does, if the visitor is its teacher; NotTheTeacher if not."""
        session = await self.find(code, visitor)
        if not session.is_teacher(visitor.secret):
            raise NotTheTeacher
        return session

    async def follow(self, code: str, visitor: Visitor) -> Session:
        """The session, found as `find` does, if it has a seat for the visitor (a page's check: `admit` takes it).

        RoomFull if every seat is held; ShareTaken if the visitor's address holds its share of them. A
        visitor whose token holds a seat already has its place.
        """
        session, hub = await self.find(code, visitor), self._kept()
        if visitor.token and session.is_voter(visitor.token) and await hub.holds(session.code, visitor.token):
            return session
        # The room counts both seats and streams: a stream with no token (none on this page) takes a place too.
        held, from_here = await hub.seats(session.code, visitor.address)
        if (n := max(held, await hub.followers(session.code))) >= self.room:
            raise RoomFull(n)
        if max(from_here, await hub.followers(session.code, visitor.address)) >= (share := self.places.per_address):
            raise ShareTaken(share)
        return session

    async def admit(self, code: str, visitor: Visitor) -> tuple[Session, Queue, str]:
        """The session, found as `find` does, a follower's queue counted in it (until `leave`), and its token.

        The follower's token is the visitor's if it is one of the session's, else a new one, handed out here
        with the seat and never with a bare page (app/web/live.py sets it as the stream's cookie). The room
        is checked and the seat taken in one step (the hub's `admit`): RoomFull when the room is full,
        ShareTaken when the visitor's address holds its share, Crowded past the streams one may hold.
        """
        session = await self.find(code, visitor)
        token = visitor.token if visitor.token and session.is_voter(visitor.token) else session.voter()
        try:
            return session, await self._kept().admit(session.code, visitor.address, self.places, token), token
        except Full as full:
            if full.streams:
                raise Crowded from None
            raise ShareTaken(self.places.per_address) if full.address else RoomFull(full.followers) from None

    async def leave(self, code: str, queue: Queue) -> None:
        """The follower of `queue` is gone (a second call changes nothing)."""
        await self._kept().leave(code, queue)

    async def followers(self, session: Session) -> int:
        """Followers of `session` (their streams open now), over every worker."""
        return await self._kept().followers(session.code)

    async def seats(self, session: Session) -> tuple[int, int]:
        """Seats held in `session` (the followers whose votes count), and the most one address holds."""
        return await self._kept().seats(session.code)

    async def start(self, view: str, visitor: Visitor) -> tuple[Session, str]:
        """A new session showing `view`, kept; and the teacher's secret.

        TooManyStarts past the sessions one address may start in the window; Crowded when the server keeps
        as many sessions as it may.
        """
        hub = self._kept()
        if await hub.started(visitor.address) > STARTS_ALLOWED:
            raise TooManyStarts
        try:
            while True:
                session, secret = new_session(view, self.clock(), origin(visitor.address))
                if await hub.add(session):  # else a code already in use: draw another
                    return session, secret
        except Full:
            raise Crowded from None

    async def show(self, session: Session, view: str) -> Session | None:
        """The teacher moved to `view`; the session as changed (None: no longer kept)."""
        return await self._kept().update(session.code, lambda s: s.show(view, self.clock()))

    async def pause(self, session: Session, paused: bool) -> Session | None:
        """The teacher paused (True) or resumed the followers; the session as changed."""
        return await self._kept().update(session.code, lambda s: s.pause(paused, self.clock()))

    async def end(self, session: Session) -> Session | None:
        """The teacher ended the session; every follower is told."""
        return await self._kept().update(session.code, lambda s: s.end(self.clock()))

    async def ask(self, session: Session, question: Question) -> Session | None:
        """Put `question` to the class; the session as changed."""
        return await self._kept().update(session.code, lambda s: s.ask(question, self.clock()))

    async def poll_edit(self, session: Session, view: str | None = None, **change: int | bool) -> Session | None:
        """The question now changed (closed, shown, another round, revealed, put away); the session as changed."""
        return await self._kept().update(session.code, lambda s: s.poll_edit(self.clock(), view, **change))

    async def vote(self, code: str, visitor: Visitor, key: str, given: list[str]) -> tuple[Session, str]:
        """Keep a follower's answer to round `key`; the session and the answer as kept.

        NotAFollower without a token of the session's holding its seat, BadVote for what cannot be an answer,
        VoteClosed when the round takes no votes, TooManyVotes past a limit (app/live/hub.py).
        """
        session = await self.find(code, visitor)
        if not session.is_voter(visitor.token):
            raise NotAFollower
        poll = session.poll
        if poll is None or poll.key != key or not poll.open:
            raise VoteClosed
        try:
            answer = normal_answer(poll.question, given)
        except BadAnswer as bad:
            raise BadVote(str(bad)) from None
        per_address = self.places.per_address * VOTES_PER_PLACE
        try:
            kept = await self._kept().vote(session.code, key, visitor.token or "", answer, visitor.address, per_address)
        except VoteRefused as refused:
            raise {"seat": NotAFollower, "closed": VoteClosed}.get(refused.why, TooManyVotes) from None
        if kept is None:
            raise NoSuchSession
        return session, answer

    async def own(self, session: Session, visitor: Visitor) -> str | None:
        """The visitor's answer in the round now, if any."""
        poll = session.poll
        if poll is None or not session.is_voter(visitor.token):
            return None
        return await self._kept().own(session.code, poll.key, visitor.token or "")

    async def answered(self, session: Session) -> int:
        """How many answered the round now."""
        poll = session.poll
        return 0 if poll is None else await self._kept().answered(session.code, poll.key)

    async def spreads(self, session: Session, poll: Poll) -> tuple[Spread, ...]:
        """Each round of `poll`, counted, the first first."""
        hub = self._kept()
        return tuple([spread(poll.question, await hub.ballots(session.code, key)) for key in poll.keys])

    def updates(
        self, code: str, queue: Queue, last_seen: int | None, lifetime: float | None = None
    ) -> AsyncIterator[Session | Unavailable | None]:
        """What an admitted follower's stream sends, for at most `lifetime` seconds (app/live/hub.py `versions`)."""
        return versions(self._kept(), code, queue, last_seen, lifetime)
