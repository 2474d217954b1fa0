"""One live session, as data: its join code, the teacher's secret, what followers see, and how it changes.

Pure: no clock, no randomness and no I/O of its own; the hubs (app/live/hub.py, app/live/redis_hub.py)
keep sessions and pass the time in.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from app.domain.questions import AnswerKind, Question

ALPHABET = "ACDEFHJKMNPRTWXY3479"
"""Join codes' characters: none that looks like another (0 O Q, 1 I L, 2 Z, 5 S, 6 G, 8 B, U V)."""
CODE_LENGTH = 8
"""20**8 = 25.6 billion codes: with 1,000 sessions running, a guess finds one once in 25.6 million tries
(docs/security.md works out how long that takes at the fastest rate the server allows)."""
LIFETIME_SECONDS = 4 * 3600
"""A session ends four hours after the teacher's last action."""


def new_code() -> str:
    """A fresh join code, easy to read aloud."""
    return "".join(secrets.choice(ALPHABET) for _ in range(CODE_LENGTH))


SEPARATORS = str.maketrans("", "", " -.\u00a0\u2010\u2011\u2012\u2013\u2014\u2212")
"""What people put between a code's halves, taken out: spaces (a phone's no-break one too), dots, and the
dashes a phone's keyboard makes of a hyphen (en and em dashes, the minus sign)."""


def normal_code(text: str) -> str | None:
    """The code someone typed, as stored (capitals, no spaces, dots or dashes); None if it cannot be one."""
    code = text.upper().translate(SEPARATORS)
    return code if len(code) == CODE_LENGTH and all(c in ALPHABET for c in code) else None


def digest(secret: str) -> str:
    """What is stored of the teacher's secret: its SHA-256, so a copy of the store cannot drive."""
    return hashlib.sha256(secret.encode()).hexdigest()


@dataclass(frozen=True)
class Poll:
    """A question put to the class, and its rounds: round 1, then each "Vote again" (app/domain/questions.py).

    Votes are kept by the hub, per round (`key`), never here: a session's JSON goes to every worker.
    """

    question: Question
    number: int
    """The question's place in the session: 1, 2, …"""
    round: int = 1
    open: bool = True
    """Whether votes are taken now."""
    shown: bool = False
    """Whether the teacher's screen shows the spread of answers."""
    revealed: bool = False
    done: bool = False
    """The teacher put the question away: the screens show the picture alone."""

    @property
    def key(self) -> str:
        """The round now, as the hub keys its votes: `number.round`."""
        return f"{self.number}.{self.round}"

    @property
    def keys(self) -> tuple[str, ...]:
        """Every round's key, the first first."""
        return tuple(f"{self.number}.{r}" for r in range(1, self.round + 1))

    @property
    def marker(self) -> str:
        """What a follower's question panel changes with: the round and where it is."""
        return f"{self.key}.{int(self.open)}{int(self.revealed)}{int(self.done)}"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Poll:
        """A poll from `asdict`'s JSON."""
        q = data["question"]
        question = Question(**{**q, "kind": AnswerKind(q["kind"]), "choices": tuple(q["choices"]),
                               "weights": tuple(q["weights"])})  # fmt: skip
        return cls(**{**data, "question": question})


MAX_POLLS = 50
"""Questions one session keeps (a lecture asks a handful): past them, the oldest are forgotten."""


@dataclass(frozen=True)
class Session:
    """A live session at one version.

    `view` is the teacher's screen and `shown` the followers': the same but while paused, when the
    followers keep the view the teacher paused on. Both are a page's canonical query string.
    """

    code: str
    secret_digest: str
    view: str
    shown: str
    touched: float
    """When the teacher last acted, in seconds since the epoch."""
    version: int = 1
    paused: bool = False
    ended: bool = False
    polls: tuple[Poll, ...] = field(default=())
    """The questions asked, the last the one now (unless done)."""
    origin: str = ""
    """A digest of the address the session was started from (app/live/service.py `origin`): never locked out."""

    @property
    def poll(self) -> Poll | None:
        """The question on the screens now: the last asked, until the teacher puts it away."""
        return self.polls[-1] if self.polls and not self.polls[-1].done else None

    def ask(self, question: Question, now: float) -> Session:
        """Put `question` to the class: round 1, open."""
        number = self.polls[-1].number + 1 if self.polls else 1
        polls = (*self.polls, Poll(question, number))[-MAX_POLLS:]
        return replace(self, polls=polls, touched=now, version=self.version + 1)

    def poll_edit(self, now: float, view: str | None = None, **change: Any) -> Session:
        """The question now changed (`open`, `shown`, `revealed`, `round`, `done`), and the `view` if given."""
        poll = self.poll
        if poll is None:
            return self
        polls = (*self.polls[:-1], replace(poll, **change))
        changed = replace(self, polls=polls, touched=now, version=self.version + 1)
        return changed if view is None else replace(changed.show(view, now), version=self.version + 1)

    def show(self, view: str, now: float) -> Session:
        """The teacher moved to `view`: followers follow, unless paused."""
        shown = self.shown if self.paused else view
        return replace(self, view=view, shown=shown, touched=now, version=self.version + 1)

    def pause(self, paused: bool, now: float) -> Session:
        """Pause holds the followers where they are; resuming brings them to the teacher's view."""
        return replace(self, paused=paused, shown=self.shown if paused else self.view, touched=now,
                       version=self.version + 1)  # fmt: skip

    def end(self, now: float) -> Session:
        """The teacher ended the session."""
        return replace(self, ended=True, touched=now, version=self.version + 1)

    def expired(self, now: float) -> bool:
        """Four hours without a teacher action."""
        return now - self.touched > LIFETIME_SECONDS

    def is_teacher(self, secret: str | None) -> bool:
        """Whether `secret` (the teacher's cookie) is this session's."""
        return secret is not None and hmac.compare_digest(digest(secret), self.secret_digest)

    def voter(self) -> str:
        """A new follower's anonymous token: a random part, and its signature by the session (so no one mints one).

        Signed with the stored digest of the teacher's secret, which no follower sees: any worker checks it.
        """
        nonce = secrets.token_urlsafe(12)
        return f"{nonce}.{self._sign(nonce)}"

    def is_voter(self, token: str | None) -> bool:
        """Whether `token` is one of this session's followers' (`voter`)."""
        nonce, _, signature = (token or "").partition(".")
        return bool(nonce) and hmac.compare_digest(signature, self._sign(nonce))

    def join_key(self) -> str:
        """The key the session's QR code carries (`?k=`): a screen that scanned it is no guesser.

        Signed as a token is: no one without the teacher's screen makes it, so the wrong-code limit of an
        address spares it (app/live/service.py `find`), and a class scanning the code is never locked out.
        """
        return self._sign("join")[:16]

    def is_join_key(self, key: str | None) -> bool:
        """Whether `key` is this session's `join_key`."""
        return bool(key) and hmac.compare_digest(key or "", self.join_key())

    def _sign(self, nonce: str) -> str:
        return hmac.new(self.secret_digest.encode(), f"{self.code}.{nonce}".encode(), "sha256").hexdigest()[:32]

    def to_json(self) -> str:
        """The session as stored in Redis and sent between workers."""
        return json.dumps(asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> Session:
        """A session from `to_json`."""
        data = json.loads(text)
        return cls(**{**data, "polls": tuple(Poll.from_dict(p) for p in data.get("polls", ()))})


def start(view: str, now: float, origin: str = "") -> tuple[Session, str]:
    """A new session showing `view`, and the teacher's secret (kept in the teacher's cookie, never stored)."""
    secret = secrets.token_urlsafe(32)
    session = Session(code=new_code(), secret_digest=digest(secret), view=view, shown=view, touched=now, origin=origin)
    return session, secret
