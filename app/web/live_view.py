"""A live session's views: the teacher's bar, a follower's bar, the state each event carries, and the messages.

The messages word each refusal of the live rules (app/live/service.py) with its status.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import parse_qsl, urlencode, urlsplit

import segno
from pydantic import ValidationError
from starlette.requests import Request

from app.live.service import (
    LiveOff,
    NoSuchSession,
    NotTheTeacher,
    Refusal,
    RoomFull,
    SessionEnded,
    ShareTaken,
    TooManyTries,
)
from app.live.session import Session
from app.web.inputs import EmbedQuery, PageQuery, Theme
from app.web.links import Links, absolute_url_for, path_for

COOKIE = "zb-teacher"
"""The teacher's secret: HttpOnly, SameSite=Strict, sent only to the session's own addresses."""


@dataclass(frozen=True)
class TeacherBar:
    """What the teacher's screen adds around the widget: how to join, who follows, Pause and End."""

    code: str
    join_url: str
    """The follower's page, absolute: read aloud, typed, or scanned from the QR code."""
    qr_href: str
    followers_href: str
    followers: int
    show_href: str
    pause_href: str
    end_href: str
    paused: bool
    live_href: str = ""
    """Where to start another, should this one be lost."""


@dataclass(frozen=True)
class FollowerBar:
    """What a follower's screen adds: the stream it listens to, the state it is at, and the way back."""

    code: str
    events_href: str
    back_href: str
    state: StateView


@dataclass(frozen=True)
class StateView:
    """One version of the session as a follower sees it: what each event carries."""

    version: int
    view_href: str
    """The widget to fetch for it: the page's, or the embed's with the embed's own options."""
    theme: Theme
    paused: bool
    ended: bool

    @property
    def words(self) -> str:
        """The bar's sentence."""
        if self.ended:
            return "The teacher has ended the session."
        return "The teacher has paused the class here." if self.paused else "Following the teacher."


@dataclass(frozen=True)
class LiveView:
    """The live bar on a page: the teacher's, or a follower's."""

    teacher: TeacherBar | None = None
    follower: FollowerBar | None = None


@dataclass(frozen=True)
class LivePage:
    """A page of its own: starting or joining a session, or why a session cannot be shown."""

    title: str
    heading: str
    message: str = ""
    start_href: str = ""
    join_href: str = ""
    live_href: str = ""
    """Where to start or join another."""
    code: str = ""
    theme: Theme = Theme.DEFAULT


class Problem(Exception):
    """A live page that cannot be shown: its status, and a sentence for the person."""

    def __init__(self, status: int, heading: str, message: str) -> None:
        super().__init__(message)
        self.status, self.heading, self.message = status, heading, message


NOT_FOUND = "There is no live session with that code. Check the code with your teacher: it has six letters and digits."
ENDED = "The teacher has ended this session. Ask your teacher for the code of the next one."
NOT_TEACHER = "Only the teacher who started this session can drive it, from the browser that started it."
TOO_MANY = "Too many wrong codes from this address. Wait ten minutes, then try again."
FULL = "This session is full: {n:,} are following already. Ask the teacher to start another for the rest of the room."
SHARE = (
    "{n:,} screens from this address follow this session already, the most one address may. "
    "Ask the teacher to start another session for the rest of the room."
)
AWAY = "The sessions' store cannot be reached just now. Try again in a moment."
NO_LIVE = (
    "This server runs several workers without Redis, so it cannot keep live sessions: "
    "start it with --redis-url, or with one worker (docs/deploying.md)."
)


WORDING: dict[type[Refusal], tuple[int, str, str]] = {
    LiveOff: (503, "Live sessions are off here", NO_LIVE),
    NoSuchSession: (404, "No such session", NOT_FOUND),
    SessionEnded: (410, "The session has ended", ENDED),
    TooManyTries: (429, "Too many tries", TOO_MANY),
    NotTheTeacher: (403, "Only the teacher can drive", NOT_TEACHER),
    RoomFull: (429, "This session is full", FULL),
    ShareTaken: (429, "This session is full for this address", SHARE),
}
"""Each refusal of the live rules (app/live/service.py) as the person is told it: status, heading, sentence."""


def problem_for(refusal: Refusal) -> Problem:
    """The page a refusal of the live rules makes: its status and its words."""
    status, heading, message = WORDING[type(refusal)]
    if isinstance(refusal, RoomFull):
        message = message.format(n=refusal.followers)
    elif isinstance(refusal, ShareTaken):
        message = message.format(n=refusal.allowed)
    return Problem(status, heading, message)


def followed_embed(request: Request, session: Session, query: EmbedQuery) -> tuple[EmbedQuery, LiveView]:
    """An embed following `session`: the teacher's view with the embed's options (of `query`), and its bar."""
    shown = EmbedQuery.model_validate({**dict(parse_qsl(session.shown)), **dict(query.options())})
    return shown, LiveView(follower=follower_bar(request, session, path_for(request, "embed"), query.options()))


def follower_bar(
    request: Request, session: Session, base: str, options: tuple[tuple[str, str], ...] = ()
) -> FollowerBar:
    """A follower's bar: the stream to listen to, the state now, and the way back to the teacher."""
    events = path_for(request, "live_events", code=session.code)
    if options or base.endswith("/embed"):
        events += "?" + urlencode((("live", session.code), *options))
    back = path_for(request, "live_follow", code=session.code)
    return FollowerBar(session.code, events, back, state_view(session, base, options))


def teacher_bar(request: Request, session: Session, followers: int) -> TeacherBar:
    """The teacher's bar for `session`, with its count of followers now."""
    code = session.code
    return TeacherBar(
        code=code, join_url=absolute_url_for(request, "live_follow", code=code),
        qr_href=path_for(request, "live_qr", code=code), followers_href=path_for(request, "live_followers", code=code),
        followers=followers, show_href=path_for(request, "live_show", code=code),
        pause_href=path_for(request, "live_pause", code=code), end_href=path_for(request, "live_end", code=code),
        paused=session.paused, live_href=path_for(request, "live_home"),
    )  # fmt: skip


class BadView(ValueError):
    """An address the teacher's page sent that is not a view of the page: pydantic's errors, as its args."""


def view_query(address: str) -> PageQuery:
    """The page's parameters in a view's address (its query; the path is not read)."""
    try:
        return PageQuery.model_validate(dict(parse_qsl(urlsplit(address).query)))
    except ValidationError as error:
        raise BadView(error.errors()) from None


def canonical_view(query: PageQuery) -> str:
    """The view as a session keeps it: the page's query string, as the page's own links write it."""
    return Links("", tuple(query.canonical().items()), query.phase, theme=query.theme).switch(
        query.stage, query.previous
    )[1:]


def state_view(session: Session, base: str, options: tuple[tuple[str, str], ...] = ()) -> StateView:
    """What a follower is sent of `session`: the view to fetch on `base` (the page, or the embed with `options`)."""
    query = view_query("?" + session.shown)
    link = Links(base, tuple(query.canonical().items()), query.phase, options, query.theme)
    href = link.switch(query.stage, query.previous)
    return StateView(session.version, href, query.theme, session.paused, session.ended)


MAX_HOST = 255
"""The longest Host drawn into a QR code: a DNS name is at most 253 characters, and a port."""
_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?")
"""A name or an address, IPv6 in brackets, and perhaps a port: what a browser sends as Host."""
BAD_HOST = "This address's host name is not one a phone could open: use the address the teacher's screen shows."


def join_qr(request: Request, code: str) -> bytes:
    """The follower's page as a QR code; a Problem (400) when the Host is no host[:port] to draw.

    The address is built from the request's Host: a long one would cost a QR of its size (100 ms
    of CPU at 2,300 characters) or one too large for any QR (segno raises, a 500).
    """
    # The header as sent: Starlette draws the server's own address for one it cannot parse, which no phone opens.
    host = request.headers.get("host", request.base_url.netloc)
    if len(host) > MAX_HOST or not _HOST.fullmatch(host):
        raise Problem(400, "Not a host name", BAD_HOST)
    return qr_svg(absolute_url_for(request, "live_follow", code=code))


# A teacher's screen asks for its QR on each load: drawn once (3.6 ms for a usual address, 18 ms for the
# longest host allowed), and 256 of the largest SVGs (7.7 kB each) hold 2 MB.
@lru_cache(maxsize=256)
def qr_svg(url: str) -> bytes:
    """The join address as a QR code, in SVG (segno): dark modules on white, with the quiet zone."""
    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="svg", scale=8, border=4, xmldecl=False, svgns=True, title="")
    return out.getvalue()
