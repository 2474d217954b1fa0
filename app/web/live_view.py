"""A live session's views: the teacher's bar, a follower's bar, the state each event carries, and the messages.

The messages word each refusal of the live rules (app/live/service.py) with its status.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

import segno
from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import Response

from app.live.service import (
    BadVote,
    Crowded,
    LiveOff,
    NoSuchSession,
    NotAFollower,
    NotTheTeacher,
    Refusal,
    RoomFull,
    SessionEnded,
    ShareTaken,
    TooManyStarts,
    TooManyTries,
    TooManyVotes,
    VoteClosed,
)
from app.live.session import LIFETIME_SECONDS, Session
from app.serving import reach
from app.serving.headers import valid_host
from app.serving.overload import render_slot
from app.web.inputs import EmbedQuery, PageQuery, Theme
from app.web.links import Links, absolute_url_for, path_for
from app.web.poll_view import PollPanel, card_options

COOKIE = "zb-teacher"
"""The teacher's secret: HttpOnly, SameSite=Strict, sent only to the session's own addresses."""
KEY = "k"
"""The join key's parameter, on the address the QR code carries (app/live/session.py `join_key`)."""
VOTER = "zb-voter"
"""A follower's anonymous token (app/live/session.py `voter`): HttpOnly, sent only to the session's own addresses."""


@dataclass(frozen=True)
class TeacherBar:
    """What the teacher's screen adds around the widget: how to join, who follows, Pause and End."""

    code: str
    join_url: str
    """The follower's page, absolute: read aloud, typed, or scanned from the QR code."""
    qr_href: str
    followers_href: str
    followers: int
    """Seats held now, over every worker: the followers whose answers count."""
    show_href: str
    pause_href: str
    end_href: str
    paused: bool
    ask_href: str = ""
    """Where "Ask the class" posts."""
    cards: tuple[int, ...] = ()
    """The cards drawn on the teacher's view, that a cells question may be about."""
    live_href: str = ""
    """Where to start another, should this one be lost."""
    warning: str = ""
    """Why students cannot open the address the teacher opened, and what they can open: empty when they can."""
    crowd: str = ""
    """How many places one address holds, when that is a large part of the room (`crowd_words`)."""
    count_words: str = field(init=False, repr=False, compare=False)
    """The bar's count: "12 following", and how many from one address when that is many."""
    count_href: str = field(init=False, repr=False, compare=False)
    """Where the count is asked again, with the count now: the answer that first counts someone folds the QR code."""
    qr_open: str | None = field(init=False, repr=False, compare=False)
    """The QR code open until someone follows, then one click away."""
    pause_value: str = field(init=False, repr=False, compare=False)
    pause_label: str = field(init=False, repr=False, compare=False)
    note_css: str = field(init=False, repr=False, compare=False)
    note: str = field(init=False, repr=False, compare=False)
    """What the class sees: said while paused, for a screen reader otherwise."""
    warnings: tuple[str, ...] = field(init=False, repr=False, compare=False)
    card_options: tuple[tuple[int, str | None], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        paused = self.paused
        derived = {
            "card_options": card_options(self.cards),
            "count_words": count_words(self.followers, self.crowd),
            "count_href": counted_href(self.followers_href, self.followers),
            "qr_open": None if self.followers else "",
            "pause_value": "0" if paused else "1",
            "pause_label": "Resume: show them my view" if paused else "Pause",
            "note_css": "live-note" if paused else "live-note visually-hidden",
            "note": "Paused: the class stays on the view you paused on, while you move on alone."
            if paused
            else "Every click you make here is shown on their screens.",
            "warnings": (self.warning,) if self.warning else (),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


def counted_href(followers_href: str, followers: int) -> str:
    """The count's address, saying how many the bar shows now (`was`): 0 and then someone folds the QR code."""
    return f"{followers_href}?{urlencode({'was': followers})}"


def count_words(followers: int, crowd: str = "") -> str:
    """The teacher's count: "12 following", or "400 following (312 of them from one address)"."""
    return f"{followers:,} following" + (f" ({crowd})" if crowd else "")


CROWD = 10
"""One address holding this many places or more is said on the teacher's bar."""


def crowd_words(most: int) -> str:
    """The bar's words when one address holds many places ("312 of them from one address").

    A school's network (the teacher knows) or one person's script (the teacher ends the session, starts another).
    """
    return f"{most:,} of them from one address" if most >= CROWD else ""


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
    """The widget to fetch for it: the page's, or the embed's with the embed's own options, in the follower's theme."""
    paused: bool
    ended: bool
    words: str = field(init=False, repr=False, compare=False)
    """The bar's sentence."""
    css: str = field(init=False, repr=False, compare=False)
    ended_attr: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.ended:
            words = "The teacher has ended the session."
        else:
            words = "The teacher has paused the class here." if self.paused else "Following the teacher."
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "css", "live-state paused" if self.paused else "live-state")
        object.__setattr__(self, "ended_attr", "" if self.ended else None)


@dataclass(frozen=True)
class LiveView:
    """The live bar on a page: the teacher's, or a follower's."""

    teacher: TeacherBar | None = None
    follower: FollowerBar | None = None
    poll: PollPanel | None = None
    """The teacher's question panel, if a question is on the screens."""
    teachers: tuple[TeacherBar, ...] = field(init=False, repr=False, compare=False)
    """The teacher's bar, or none (`followers`)."""
    followers: tuple[FollowerBar, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "teachers", (self.teacher,) if self.teacher else ())
        object.__setattr__(self, "followers", (self.follower,) if self.follower else ())


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
    view: str = ""
    """The view a session started here shows (canonical; empty: the default): the one the teacher came from."""
    messages: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """Why a session cannot be shown; else the forms to join and to start one (`invitations`)."""
    invitations: tuple[str, ...] = field(init=False, repr=False, compare=False)
    came_from: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The view the session starts from, said, when there is one."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "messages", (self.message,) if self.message else ())
        object.__setattr__(self, "invitations", () if self.message else (self.view,))
        object.__setattr__(self, "came_from", (self.view,) if self.view else ())


class Problem(Exception):
    """A live page that cannot be shown: its status, and a sentence for the person."""

    def __init__(self, status: int, heading: str, message: str) -> None:
        super().__init__(message)
        self.status, self.heading, self.message = status, heading, message


NOT_FOUND = (
    "There is no live session with that code. Check the code with your teacher: it has eight letters and digits."
)
ENDED = "The teacher has ended this session. Ask your teacher for the code of the next one."
NOT_TEACHER = "Only the teacher who started this session can drive it, from the browser that started it."
TOO_MANY = (
    "Too many wrong codes from this address. Wait ten minutes, then try again; a session this address "
    "already follows, or started, still opens."
)
TOO_MANY_STARTS = "This address has started as many sessions as one may in an hour. Use one of them, or wait."
CROWDED = "Too many at once: this server, or this address, holds as many live sessions or screens as it may."
FULL = "This session is full: {n:,} are following already. Ask the teacher to start another for the rest of the room."
SHARE = (
    "{n:,} screens from this address follow this session already, the most one address may. "
    "Ask the teacher to start another session for the rest of the room."
)
NOT_FOLLOWER = (
    "Only screens following this session answer its questions: open the session's page, wait for it to say "
    '"Following the teacher.", then answer.'
)
CLOSED = "The teacher has closed this vote, or asked another question. Your screen shows the one now."
TOO_MANY_VOTES = "Too many answers from this screen or this address just now. Wait a minute, then answer again."
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
    TooManyStarts: (429, "Too many sessions", TOO_MANY_STARTS),
    Crowded: (429, "Too many at once", CROWDED),
    NotTheTeacher: (403, "Only the teacher can drive", NOT_TEACHER),
    RoomFull: (429, "This session is full", FULL),
    ShareTaken: (429, "This session is full for this address", SHARE),
    NotAFollower: (403, "Only followers answer", NOT_FOLLOWER),
    VoteClosed: (409, "This vote is closed", CLOSED),
    BadVote: (422, "That answer was not understood", "{why}"),
    TooManyVotes: (429, "Too many answers", TOO_MANY_VOTES),
}
"""Each refusal of the live rules (app/live/service.py) as the person is told it: status, heading, sentence."""


def problem_for(refusal: Refusal) -> Problem:
    """The page a refusal of the live rules makes: its status and its words."""
    status, heading, message = WORDING[type(refusal)]
    if isinstance(refusal, RoomFull):
        message = message.format(n=refusal.followers)
    elif isinstance(refusal, ShareTaken):
        message = message.format(n=refusal.allowed)
    elif isinstance(refusal, BadVote):
        message = refusal.why
    return Problem(status, heading, message)


def followed_embed(request: Request, session: Session, query: EmbedQuery) -> tuple[EmbedQuery, LiveView]:
    """An embed following `session`: the teacher's view with the embed's options and theme (of `query`), and its bar."""
    shown = EmbedQuery.model_validate(
        {**dict(parse_qsl(session.shown)), **dict(query.options()), "theme": query.theme.value}
    )
    bar = follower_bar(request, session, path_for(request, "embed"), query.options(), query.theme)
    return shown, LiveView(follower=bar)


def follower_view(shown: str, theme: Theme) -> str:
    """The view a follower is shown of the teacher's (`shown`, canonical): the same, in the follower's own theme.

    The teacher's theme is the teacher's screen's: a projector's large type is not pushed to every phone.
    """
    return canonical_view(view_query("?" + shown).model_copy(update={"theme": theme}))


def follower_bar(
    request: Request, session: Session, base: str, options: tuple[tuple[str, str], ...] = (),
    theme: Theme = Theme.DEFAULT,
) -> FollowerBar:  # fmt: skip
    """A follower's bar: the stream to listen to (its views in the follower's `theme`), the state now, the way back."""
    events = path_for(request, "live_events", code=session.code)
    embedded = bool(options) or base.endswith("/embed")
    # The join key the page was opened with goes on to its stream: scanned, it is no guess (`join_key`).
    key = request.query_params.get(KEY, "")
    keyed = ((KEY, key),) if session.is_join_key(key) else ()
    params = (
        ((("live", session.code), *options) if embedded else ())
        + ((("theme", theme.value),) if theme is not Theme.DEFAULT else ())
        + keyed
    )
    if params:
        events += "?" + urlencode(params)
    back = path_for(request, "live_follow", code=session.code)
    if theme is not Theme.DEFAULT and not embedded:
        back += "?" + urlencode({"theme": theme.value})
    return FollowerBar(session.code, events, back, state_view(session, base, options, theme))


@dataclass(frozen=True)
class JoinAddress:
    """The address students open to follow a session, and, when they cannot open the teacher's, why."""

    url: str
    """The address to read aloud or type: without the join key."""
    warning: str = ""
    from_request: bool = True
    """Built on the request's Host header (neither the public URL nor this machine's own address)."""
    key: str = ""
    """The session's join key, which the QR code's address carries (`scanned`)."""

    @property
    def scanned(self) -> str:
        """The address the QR code carries: `url` with the join key, so a scanning phone is no guesser."""
        return f"{self.url}?{urlencode({KEY: self.key})}" if self.key else self.url


def join_address(request: Request, session: Session) -> JoinAddress:
    """Where students follow `session`, and a warning when they cannot open the teacher's own address.

    The public URL's, else this request's address, unless that is this machine only (127.0.0.1, ::1,
    localhost): then this machine's address on the network if the server listens there, or what to do.
    """
    settings, code, key = request.app.state.settings, session.code, session.join_key()
    url = absolute_url_for(request, "live_follow", code=code)
    host = request.url.hostname or ""
    if settings.public_url or not reach.is_loopback(host):
        return JoinAddress(url, from_request=not settings.public_url, key=key)
    shown = reach.bare_host(host)
    listening = settings.listen_host
    own = listening if listening and not reach.is_everywhere(listening) and not reach.is_loopback(listening) else None
    own = own or reach.outward_address()
    port = request.url.port
    where = own and f"{request.url.scheme}://{own}{f':{port}' if port else ''}" + path_for(
        request, "live_follow", code=code
    )
    if where and listening and not reach.is_loopback(listening):
        # Served on the network: students open this machine's own address, which the bar and QR code show.
        return JoinAddress(where, UNREACHABLE_LISTENING.format(host=shown), from_request=False, key=key)
    if listening and reach.is_loopback(listening):
        advice = UNREACHABLE_LOOPBACK.format(host=shown, then=f" and they can open {where}" if where else "")
    elif where:
        advice = UNREACHABLE_MAYBE.format(host=shown, where=where)
    else:
        advice = UNREACHABLE_OFFLINE.format(host=shown)
    return JoinAddress(url, advice, key=key)


UNREACHABLE_LISTENING = (
    "Students cannot open {host}: it is this computer only. The address and QR code here are its address on "
    "the network."
)
UNREACHABLE_LOOPBACK = (
    "Students cannot open {host}: it is this computer only, and the server listens on it alone. "
    "Start it with --host 0.0.0.0{then}, or with --public-url."
)
UNREACHABLE_MAYBE = (
    "Students cannot open {host}: it is this computer only. If the server listens on the network, they can "
    "open {where}; or start it with --public-url."
)
UNREACHABLE_OFFLINE = (
    "Students cannot open {host}: it is this computer only, and this computer has no network address now. "
    "Join the room's network, or start the server with --public-url."
)


ASKABLE_CARDS = (0, 1, 2, 3)
"""The cards "Ask the class" offers a cells question about: drawn in every grid of four cards or more."""


R = TypeVar("R", bound=Response)


def with_voter(request: Request, response: R, code: str, token: str) -> R:
    """`response` giving a follower's screen its token, handed out with its seat (app/web/live.py `live_events`).

    HttpOnly, sent only to the session's addresses. In a course page's iframe on another site, only a
    cookie marked SameSite=None and Secure is sent back, kept apart per top-level site (Partitioned,
    CHIPS); over plain http (a laptop on the room's network) Lax, which a same-site iframe sends.
    Partitioned is written by hand: Starlette refuses it below Python 3.14, and the project runs 3.11.
    """
    https = request.url.scheme == "https"
    where = path_for(request, "live_follow", code=code)
    response.set_cookie(VOTER, token, max_age=LIFETIME_SECONDS, path=where, secure=https, httponly=True,
                        samesite="none" if https else "lax")  # fmt: skip
    if https:
        name, value = response.raw_headers[-1]
        response.raw_headers[-1] = (name, value + b"; Partitioned")
    return response


def teacher_bar(request: Request, session: Session, followers: int, crowd: str = "") -> TeacherBar:
    """The teacher's bar for `session`, with its count of followers now, and the address students open."""
    code = session.code
    join = join_address(request, session)
    return TeacherBar(
        code=code, join_url=join.url, warning=join.warning,
        qr_href=path_for(request, "live_qr", code=code), followers_href=path_for(request, "live_followers", code=code),
        followers=followers, show_href=path_for(request, "live_show", code=code),
        pause_href=path_for(request, "live_pause", code=code), end_href=path_for(request, "live_end", code=code),
        paused=session.paused, live_href=path_for(request, "live_home"),
        ask_href=path_for(request, "live_ask", code=code), cards=ASKABLE_CARDS, crowd=crowd,
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


def state_view(
    session: Session, base: str, options: tuple[tuple[str, str], ...] = (), theme: Theme = Theme.DEFAULT
) -> StateView:
    """What a follower is sent of `session`: the view to fetch on `base` (the page, or the embed with `options`).

    In the follower's own `theme`, whatever the teacher's.
    """
    query = view_query("?" + session.shown)
    link = Links(base, tuple(query.canonical().items()), query.phase, options, theme)
    href = link.switch(query.stage, query.previous)
    return StateView(session.version, href, session.paused, session.ended)


MAX_QR_HOST = 100
"""The longest Host drawn into a QR code when no public URL is set: a QR of version 8 that any phone scans."""
BAD_HOST = "This address's host name is not one a phone could open: use the address the teacher's screen shows."


def join_qr(request: Request, session: Session) -> bytes:
    """The follower's page as a QR code, drawn in a render slot; a Problem (400) for a Host too long to scan.

    On the public URL when one is set; else built from the request's Host (app/serving/headers.py has
    checked that it is a host[:port]), which may be at most MAX_QR_HOST characters: each distinct one
    is a render, 4 ms for a usual address, 11.5 ms at 100 characters, 21 ms at 255 (measured, this
    2-core machine). The render takes one of the worker's render slots (app/serving/overload.py), as a
    page does: the live routes are not counted by the limit, since they may wait on Redis.
    """
    join = join_address(request, session)
    # The header as sent: Starlette draws the server's own address for one it cannot parse, which no phone opens.
    host = request.headers.get("host", request.base_url.netloc)
    if join.from_request and not valid_host(host, MAX_QR_HOST):
        raise Problem(400, "Not a host name", BAD_HOST)
    with render_slot(request.scope):
        return qr_svg(join.scanned)


# A teacher's screen asks for its QR on each load: drawn once, and 256 of the largest SVGs (a public
# URL of 512 characters, 12 kB each) hold 3 MB at most.
@lru_cache(maxsize=256)
def qr_svg(url: str) -> bytes:
    """The join address as a QR code, in SVG (segno): dark modules on white, with the quiet zone."""
    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="svg", scale=8, border=4, xmldecl=False, svgns=True, title="")
    return out.getvalue()
