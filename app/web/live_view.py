"""A live session's views: the teacher's bar, a follower's bar, the state each event carries, and the messages."""

from __future__ import annotations

import io
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit

import segno
from pydantic import ValidationError
from starlette.requests import Request

from app.live.hub import MISSES_ALLOWED, Hub
from app.live.session import Session, normal_code
from app.serving.config import Settings
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
AWAY = "The sessions' store cannot be reached just now. Try again in a moment."
NO_LIVE = (
    "This server runs several workers without Redis, so it cannot keep live sessions: "
    "start it with --redis-url, or with one worker (docs/deploying.md)."
)


def hub_of(request: Request) -> Hub:
    """The app's hub, or the page saying live sessions are off (several workers, no Redis)."""
    settings: Settings = request.app.state.settings
    if not settings.live:
        raise Problem(503, "Live sessions are off here", NO_LIVE)
    hub: Hub = request.app.state.hub
    return hub


async def session_for(request: Request, code: str) -> Session:
    """The session a code names, or the page that says why not: 404, 410 ended, 429 after many wrong codes."""
    hub, normal = hub_of(request), normal_code(code)
    client = request.client.host if request.client else "unknown"
    session = await hub.get(normal) if normal else None
    # Past the wrong codes allowed, every code is refused alike, a right one too (a guesser learns
    # nothing), but for the teacher of the session named.
    teacher = session is not None and session.is_teacher(request.cookies.get(COOKIE))
    if not teacher and await hub.misses(client) >= MISSES_ALLOWED:
        raise Problem(429, "Too many tries", TOO_MANY)
    if session is None:
        await hub.missed(client)
        raise Problem(404, "No such session", NOT_FOUND)
    if session.ended:
        raise Problem(410, "The session has ended", ENDED)
    return session


async def teacher_session(request: Request, code: str) -> Session:
    """The session, if the request carries its teacher's cookie; 403 if not."""
    session = await session_for(request, code)
    if not session.is_teacher(request.cookies.get(COOKIE)):
        raise Problem(403, "Only the teacher can drive", NOT_TEACHER)
    return session


async def follower_embed(request: Request, query: EmbedQuery) -> tuple[EmbedQuery, LiveView]:
    """An embed following the session `query.live` names: the teacher's view with the embed's options, and its bar."""
    session = await session_for(request, query.live or "")
    await check_room(request, session)
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


async def teacher_bar(request: Request, session: Session) -> TeacherBar:
    """The teacher's bar for `session`, with its count of followers now."""
    code = session.code
    return TeacherBar(
        code=code, join_url=absolute_url_for(request, "live_follow", code=code),
        qr_href=path_for(request, "live_qr", code=code), followers_href=path_for(request, "live_followers", code=code),
        followers=await follower_count(request, session), show_href=path_for(request, "live_show", code=code),
        pause_href=path_for(request, "live_pause", code=code), end_href=path_for(request, "live_end", code=code),
        paused=session.paused, live_href=path_for(request, "live_home"),
    )  # fmt: skip


async def follower_count(request: Request, session: Session) -> int:
    """Followers of `session`, over every worker."""
    return await hub_of(request).followers(session.code)


async def check_room(request: Request, session: Session) -> None:
    """A 429 page past the cap on followers."""
    settings: Settings = request.app.state.settings
    if (n := await follower_count(request, session)) >= settings.live_followers:
        raise Problem(429, "This session is full", FULL.format(n=n))


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


def qr_svg(url: str) -> bytes:
    """The join address as a QR code, in SVG (segno): dark modules on white, with the quiet zone."""
    out = io.BytesIO()
    segno.make(url, error="m").save(out, kind="svg", scale=8, border=4, xmldecl=False, svgns=True, title="")
    return out.getvalue()
