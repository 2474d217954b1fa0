"""Live sessions' routes: start, join, teach, follow, and the followers' event stream.

The teacher's page is the page itself, with a bar around the widget; after each of the teacher's
swaps it sends the widget's address to `show` (static/live.js). Each follower's event stream
(sse-starlette) then carries the new version: a small element naming the widget's address, which the
follower fetches, as a click would, from the response cache (docs/architecture.md, "Live sessions").

Each route reads its input, asks the live rules (app/live/service.py `Sessions`), builds a view
(app/web/live_view.py) and renders. What the rules refuse is answered by one handler, `refused_page`.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, FastAPI, Header, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from markupsafe import Markup
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.types import Receive, Scope, Send

from app.domain.bounded import read_whole
from app.domain.questions import (
    AnswerKind,
    Question,
    bytes_choice,
    cells_question,
    memory_question,
    next_phase_question,
)
from app.domain.run import MAX_GPUS
from app.domain.scenario import resolve
from app.live import service
from app.live.hub import GONE, Hub, Queue, Unavailable
from app.live.redis_hub import BREAKER_SECONDS
from app.live.service import BadVote, NoSuchSession, Refusal, SessionEnded, Sessions, Visitor
from app.live.session import LIFETIME_SECONDS, Session
from app.serving.body import CappedBody, capped
from app.serving.cache import CACHEABLE_STATUS
from app.serving.config import Settings
from app.web.errors import describe
from app.web.inputs import EmbedQuery, PageQuery, Theme
from app.web.links import path_for
from app.web.live_access import LiveSessions, Who, from_this_origin
from app.web.live_page import follower_page, live_page
from app.web.live_view import (
    ASKABLE_CARDS,
    AWAY,
    COOKIE,
    BadView,
    LivePage,
    LiveView,
    Problem,
    canonical_view,
    count_words,
    counted_href,
    crowd_words,
    follower_bar,
    follower_view,
    join_qr,
    problem_for,
    state_view,
    teacher_bar,
    view_query,
    with_voter,
)
from app.web.poll_view import PollPanel, QuestionPanel, card_options, poll_panel, question_panel, results_csv
from app.web.templating import macro_html, render, wants_fragment

router = APIRouter(include_in_schema=False)

PING_SECONDS = 15
"""A comment down each stream this often: proxies keep it open, and a client gone is found (its write fails)."""
SEND_TIMEOUT_SECONDS = 10
"""A send that waits this long for the client is given up, and its stream closed. It waits only once the
kernel's buffers are full, which a stalled reader takes long to fill: streams end by their lifetime
(Settings.live_stream_seconds) first."""
RETRY_MS = 1000
"""How soon a browser reconnects a dropped stream (its EventSource), with Last-Event-ID."""
REFUSED_RETRY_MS = 15_000
"""How soon a refused stream asks again: a place in a full room, or an address's lockout, takes a while."""
MAX_FORM_BYTES = 8192


def hub_for(settings: Settings) -> Hub:
    """The hub the settings ask for: Redis when configured, otherwise this process's memory."""
    return service.hub_for(settings.redis_url)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    """Let go of the hub's connections when the worker stops."""
    yield
    await app.state.hub.close()


async def problem_page(request: Request, problem: Exception) -> Response:
    """The page that says why, with the status; on the event stream, an event that says it."""
    assert isinstance(problem, Problem)
    if request.url.path.endswith("/events"):
        return EventSourceResponse(_refused(problem), ping=0, send_timeout=SEND_TIMEOUT_SECONDS)
    page = LivePage(title=f"{problem.heading} · ZeRO Bands", heading=problem.heading, message=problem.message,
                    live_href=path_for(request, "live_home"))  # fmt: skip
    response = render(request, "live.html", "live", page, status_code=problem.status)
    if problem.status in CACHEABLE_STATUS:
        # Whether a code is found depends on who asks (an address's wrong codes) and on now: never kept. (The
        # cache keeps no other status; a 503 marked no-store keeps Chromium from reading a body no script reads.)
        response.headers["Cache-Control"] = "no-store"
    if problem.status == 429:
        response.headers["Retry-After"] = "600"
    return response


async def refused_page(request: Request, refusal: Exception) -> Response:
    """What the live rules refused, wherever a route asked them: the page that says why (app/web/live_view.py)."""
    assert isinstance(refusal, Refusal)
    return await problem_page(request, problem_for(refusal))


async def unavailable_page(request: Request, error: Exception) -> Response:
    """Redis away, wherever a route asked it: the page that says to try again, 503, with when."""
    response = await problem_page(request, Problem(503, "Try again in a moment", AWAY))
    if response.status_code == 503:  # a page; a stream says it in its event, and when to ask again
        response.headers["Retry-After"] = str(math.ceil(BREAKER_SECONDS))  # when the breaker tries Redis again
    return response


def install(app: FastAPI) -> None:
    """The live pages' answers to a problem: the web's own, and each refusal of the live rules."""
    app.add_exception_handler(Problem, problem_page)
    app.add_exception_handler(Refusal, refused_page)


LiveForm = Annotated[CappedBody, Depends(capped(MAX_FORM_BYTES))]
"""A teacher's action's form, read up to its cap."""


def _field(form: CappedBody, name: str) -> str:
    """A field of a teacher's form; 413 if the form passed its cap."""
    if form.over:
        raise Problem(413, "Too long", "That request was too long to be a teacher's action.")
    return form.field(name)


@router.api_route("/live", methods=["GET", "HEAD"], name="live_home", response_class=HTMLResponse)
def live_home(request: Request, sessions: LiveSessions) -> HTMLResponse:
    """Start a session (teachers) from the view they came from, or join one with its code (students)."""
    sessions.check_on()  # or the page saying that live sessions are off here
    page = LivePage(title="Live session · ZeRO Bands", heading="Live session", view=came_from(request),
                    start_href=path_for(request, "live_start"), join_href=path_for(request, "live_join"))  # fmt: skip
    response = render(request, "live.html", "live", page)
    response.headers["Vary"] = ", ".join(filter(None, (response.headers.get("Vary"), "Referer")))
    return response


def came_from(request: Request) -> str:
    """The view a teacher came to /live from (canonical; empty: the default).

    The page's parameters given to /live itself (`/live?stage=zero3&phase=4`), else those of the page of
    this site that linked here.
    """
    address = "?" + request.url.query
    if not request.url.query:
        referer = urlsplit(request.headers.get("referer", ""))
        own = (request.url.scheme, request.url.netloc, path_for(request, "page"))
        if (referer.scheme, referer.netloc, referer.path) != own:
            return ""
        address = "?" + referer.query
    try:
        return canonical_view(view_query(address))
    except BadView:
        return ""


TEACHERS_PAGE = [Depends(from_this_origin)]
"""A teacher's action is taken only from a page of this origin (app/web/live_access.py)."""


@router.post("/live", name="live_start", dependencies=TEACHERS_PAGE)
async def live_start(request: Request, sessions: LiveSessions, who: Who, form: LiveForm) -> Response:
    """A new session showing the view the teacher was on (`view`, else the default page); 303 to the teacher's page."""
    session, secret = await sessions.start(canonical_view(_valid(request, _field(form, "view"))), who)
    response = RedirectResponse(path_for(request, "live_teach", code=session.code), status_code=303)
    return _with_cookie(request, response, session.code, secret)


def _with_cookie(request: Request, response: Response, code: str, secret: str | None) -> Response:
    """`response` setting the teacher's cookie for the session's whole lifetime from now.

    Set again on each of the teacher's actions, as each one starts the session's lifetime again. Sent
    back only to this session's addresses, never to scripts, never with another site's request.
    """
    where = path_for(request, "live_follow", code=code)
    response.set_cookie(COOKIE, secret or "", max_age=LIFETIME_SECONDS, path=where,
                        secure=request.url.scheme == "https", httponly=True, samesite="strict")  # fmt: skip
    return response


@router.get("/live/join", name="live_join")
async def live_join(
    request: Request, sessions: LiveSessions, who: Who, code: Annotated[str, Query(max_length=40)] = ""
) -> Response:
    """The join form's answer: 303 to the session's page, or the page saying why not."""
    session = await sessions.join(code, who)
    return RedirectResponse(path_for(request, "live_follow", code=session.code), status_code=303)


@router.api_route("/live/{code}", methods=["GET", "HEAD"], name="live_follow", response_class=HTMLResponse)
async def live_follow(
    request: Request, code: str, sessions: LiveSessions, who: Who, theme: Annotated[Theme, Query()] = Theme.DEFAULT
) -> Response:
    """A follower's page: the teacher's view now, in the follower's own theme, and the stream that keeps it so.

    No token here: a follower's is handed out with its seat, by its stream (`live_events`).
    """
    session = await sessions.follow(code, who)
    bar = follower_bar(request, session, path_for(request, "page"), theme=theme)
    return follower_page(request, follower_view(session.shown, theme), LiveView(follower=bar))


@router.api_route("/live/{code}/teach", methods=["GET", "HEAD"], name="live_teach", response_class=HTMLResponse)
async def live_teach(request: Request, code: str, sessions: LiveSessions, who: Who) -> HTMLResponse:
    """The teacher's page: the view the teacher is on, with the session's bar."""
    session = await sessions.teach(code, who)
    held, crowd = await _count(sessions, session)
    bar = teacher_bar(request, session, held, crowd)
    # The seats asked once, for the bar and the question's count alike.
    return live_page(
        request, session.view, LiveView(teacher=bar, poll=await _teachers_panel(request, sessions, session, held))
    )


@router.post("/live/{code}/show", name="live_show", dependencies=TEACHERS_PAGE)
async def live_show(
    request: Request, code: str, sessions: LiveSessions, who: Who, form: LiveForm,
    zb_live: Annotated[str, Header()] = "",
) -> Response:  # fmt: skip
    """The teacher's page moved to the view at `view`: 204 for its script, 303 back for a plain form."""
    session = await sessions.teach(code, who)
    await sessions.show(session, canonical_view(_valid(request, _field(form, "view"))))
    return _with_cookie(request, Response(status_code=204) if zb_live else _back(request, code), code, who.secret)


@router.post("/live/{code}/pause", name="live_pause", dependencies=TEACHERS_PAGE)
async def live_pause(request: Request, code: str, sessions: LiveSessions, who: Who, form: LiveForm) -> Response:
    """Pause (`paused=1`) or resume the followers; htmx gets the teacher's bar again."""
    session = await sessions.teach(code, who)
    changed = await sessions.pause(session, _field(form, "paused") == "1")
    if request.headers.get("HX-Request") != "true" or changed is None:
        return _with_cookie(request, _back(request, code), code, who.secret)
    bar = teacher_bar(request, changed, *await _count(sessions, changed))
    return _with_cookie(request, HTMLResponse(macro_html("_live.html", "teacher_bar", bar)), code, who.secret)


async def _count(sessions: Sessions, session: Session) -> tuple[int, str]:
    """The teacher's count: the seats held, and how many one address holds when they are many.

    Seats, not streams: the class with a phone locked a moment, the number the question's answers are counted of.
    """
    held, most = await sessions.seats(session)
    return held, crowd_words(most)


@router.post("/live/{code}/end", name="live_end", dependencies=TEACHERS_PAGE)
async def live_end(request: Request, code: str, sessions: LiveSessions, who: Who) -> Response:
    """End the session: every follower is told, and its page then says so."""
    await sessions.end(await sessions.teach(code, who))
    return RedirectResponse(path_for(request, "live_home"), status_code=303)


def question_for(view: str, kind: AnswerKind, card: int) -> Question:
    """The question of `kind` about the teacher's `view` (canonical): in the step, a number is "predict, then step".

    ValueError, with a sentence, when the view has none such (a card the grid does not draw).
    """
    query = view_query("?" + view)
    scenario = resolve(query.inputs())
    report, stage, phase = scenario.report, query.stage, query.phase
    if kind is AnswerKind.CELLS:
        return cells_question(report, stage, card)
    if kind is AnswerKind.CHOICE:
        return bytes_choice(report, stage)
    if phase is not None and phase < len(report.step(stage)) - 1:
        return next_phase_question(report, stage, phase, scenario.units)
    return memory_question(report, stage, scenario.units)


ASKED = frozenset(kind.value for kind in AnswerKind)


@router.post("/live/{code}/ask", name="live_ask", dependencies=TEACHERS_PAGE)
async def live_ask(request: Request, code: str, sessions: LiveSessions, who: Who, form: LiveForm) -> Response:
    """Put a question about the teacher's view to the class ("Ask the class": `kind`, and `card` for a cells one)."""
    session = await sessions.teach(code, who)
    kind, card = _field(form, "kind"), _field(form, "card") or "1"
    try:
        if kind not in ASKED:
            raise ValueError("that is not one of the questions offered")
        # Read within bounds (a card of 5,000 digits is no card): what is no card is one the grid does not draw.
        number = read_whole(card, MAX_GPUS)
        question = question_for(session.view, AnswerKind(kind), -1 if number is None else number)
    except ValueError as error:
        why = f"{str(error)[:1].upper()}{str(error)[1:]}: ask another."
        if wants_fragment(request):  # in the panel's place, which stays for the next question
            return HTMLResponse(macro_html("_poll.html", "poll_refused", why), status_code=422)
        raise Problem(422, "That question cannot be asked here", why) from None
    # "Ask the class" folds away, out of band: the question's panel is then in view.
    folded = macro_html("_poll.html", "ask_form", path_for(request, "live_ask", code=code), card_options(ASKABLE_CARDS),
                        {"hx-swap-oob": "true"})  # fmt: skip
    return await _teachers_answer(request, sessions, who, await sessions.ask(session, question) or session, folded)


POLL_ACTIONS: dict[str, dict[str, int | bool]] = {
    "show": {"open": False, "shown": True},
    "again": {"open": True, "shown": False},
    "reveal": {"open": False, "shown": True, "revealed": True},
    "done": {"open": False, "done": True},
}
"""The teacher's buttons on the question: close the vote and show the spread, vote again, reveal, put it away."""


@router.post("/live/{code}/poll", name="live_poll_edit", dependencies=TEACHERS_PAGE)
async def live_poll_edit(request: Request, code: str, sessions: LiveSessions, who: Who, form: LiveForm) -> Response:
    """One of the teacher's buttons on the question now (`action`); "Reveal" on a prediction steps the class to it."""
    session, action = await sessions.teach(code, who), _field(form, "action")
    if session.poll is None or action not in POLL_ACTIONS:
        raise Problem(409, "No such question now", "That question is no longer on the screens: ask another.")
    change = {**POLL_ACTIONS[action], **({"round": session.poll.round + 1} if action == "again" else {})}
    view = _revealed_view(session) if action == "reveal" else None
    changed = await sessions.poll_edit(session, view, **change) or session
    return await _teachers_answer(request, sessions, who, changed, reload=view is not None)


def _revealed_view(session: Session) -> str | None:
    """The view a prediction's reveal steps the class to (the phase it asked about); None: the view stays."""
    phase = session.poll.question.reveal_phase if session.poll else None
    query = view_query("?" + session.view)
    return None if phase is None else canonical_view(query.model_copy(update={"phase": phase}))


@router.get("/live/{code}/poll", name="live_poll", response_class=HTMLResponse)
async def live_poll(request: Request, code: str, sessions: LiveSessions, who: Who) -> Response:
    """The teacher's question panel, asked again every moment while the vote is open (the count)."""
    session = await sessions.teach(code, who)
    return HTMLResponse(macro_html("_poll.html", "poll_panel", await _teachers_panel(request, sessions, session)))


@router.get("/live/{code}/results.csv", name="live_results")
async def live_results(request: Request, code: str, sessions: LiveSessions, who: Who) -> Response:
    """Every question of the session, each round's counts: no student's answer, no token."""
    session = await sessions.teach(code, who)
    rounds = [(poll, await sessions.spreads(session, poll)) for poll in session.polls]
    headers = {
        "Content-Disposition": f'attachment; filename="zero-bands-{session.code}.csv"',
        "Cache-Control": "no-store",
    }
    return Response(results_csv(rounds), media_type="text/csv; charset=utf-8", headers=headers)


@router.post("/live/{code}/vote", name="live_vote", dependencies=TEACHERS_PAGE)
async def live_vote(request: Request, code: str, sessions: LiveSessions, who: Who, form: LiveForm) -> Response:
    """A follower's answer (`answer`, one per tapped cell) to round `key`; changed by voting again until it closes."""
    try:
        session, _ = await sessions.vote(code, who, _field(form, "key"), form.values("answer"))
    except BadVote as bad:
        if not wants_fragment(request):
            raise
        session = await sessions.find(code, who)
        return await _followers_answer(request, sessions, who, session, bad.why, status_code=422)
    if not wants_fragment(request):
        return RedirectResponse(path_for(request, "live_follow", code=session.code), status_code=303)
    return await _followers_answer(request, sessions, who, session)


@router.get("/live/{code}/question", name="live_question", response_class=HTMLResponse)
async def live_question(request: Request, code: str, sessions: LiveSessions, who: Who) -> Response:
    """A follower's question panel: the question now, the follower's own answer, the answer once revealed."""
    return await _followers_answer(request, sessions, who, await sessions.find(code, who))


async def _teachers_panel(
    request: Request, sessions: Sessions, session: Session, seats: int | None = None
) -> PollPanel | None:
    """The teacher's panel for the question now, counted: the spread only once shown (a vote never waits on it).

    `seats`: the seats held, when the caller has asked already.
    """
    poll = session.poll
    if poll is None:
        return None
    spreads = await sessions.spreads(session, poll) if poll.shown else ()
    code = session.code
    hrefs = (path_for(request, "live_poll", code=code), path_for(request, "live_poll_edit", code=code),
             path_for(request, "live_results", code=code))  # fmt: skip
    # Answers are counted of the seats held, so "N of M have answered" never has N past M.
    if seats is None:
        seats, _ = await sessions.seats(session)
    return poll_panel(poll, await sessions.answered(session), seats, spreads, hrefs)


async def _teachers_answer(
    request: Request, sessions: Sessions, who: Visitor, session: Session, also: str = "", reload: bool = False
) -> Response:
    """After a teacher's question action: the panel for htmx (and `also`, out of band), else back to the page.

    `reload`: a reveal that steps the class, which the teacher's own widget does by reloading its page.
    """
    if not wants_fragment(request):
        return _with_cookie(request, _back(request, session.code), session.code, who.secret)
    panel = await _teachers_panel(request, sessions, session)
    response = HTMLResponse(macro_html("_poll.html", "poll_panel", panel) + also)
    if reload:
        response.headers["HX-Refresh"] = "true"  # the teacher's own widget steps too, as the followers' do
    return _with_cookie(request, response, session.code, who.secret)


async def _followers_answer(
    request: Request, sessions: Sessions, who: Visitor, session: Session, error: str = "", status_code: int = 200
) -> Response:
    """A follower's question panel, with its own answer, and why its last was refused."""
    vote_href = path_for(request, "live_vote", code=session.code)
    poll = session.poll
    panel: QuestionPanel | None = None
    if poll is not None:
        panel = question_panel(poll, vote_href, await sessions.own(session, who), error)
    return HTMLResponse(macro_html("_poll.html", "question_panel", panel), status_code=status_code)


@router.get("/live/{code}/followers", name="live_followers", response_class=HTMLResponse)
async def live_followers(
    request: Request, code: str, sessions: LiveSessions, who: Who, was: Annotated[int | None, Query(ge=0)] = None
) -> Response:
    """How many follow, for the teacher's bar (asked every few seconds); once ended, 286: htmx's "stop asking".

    `was`: the count the bar showed. When it was none and someone follows now, the QR code folds (out of band):
    the class has scanned it, and it no longer covers the page (the stage switcher under it).
    """
    try:
        session = await sessions.find(code, who)
    except (NoSuchSession, SessionEnded):
        # The last answer: the count says so, and the bar's notice shows, before the teacher's next click.
        return HTMLResponse(macro_html("_live.html", "gone_count", path_for(request, "live_home")), status_code=286)
    held, crowd = await _count(sessions, session)
    count = macro_html("_live.html", "followers", counted_href(request.url.path, held), count_words(held, crowd))
    if was == 0 and held:
        count += macro_html("_live.html", "qr_box", teacher_bar(request, session, held, crowd), {"hx-swap-oob": "true"})
    return HTMLResponse(count)


@router.get("/live/{code}/qr.svg", name="live_qr")
async def live_qr(request: Request, code: str, sessions: LiveSessions, who: Who) -> Response:
    """The QR code of the follower's page, as SVG."""
    session = await sessions.find(code, who)
    svg = join_qr(request, session)
    return Response(svg, media_type="image/svg+xml", headers={"Cache-Control": "private, max-age=3600"})


@router.get("/live/{code}/events", name="live_events")
async def live_events(
    request: Request, code: str, sessions: LiveSessions, who: Who, query: Annotated[EmbedQuery, Query()],
    last_event_id: Annotated[str, Header(max_length=20)] = "",
) -> EventSourceResponse:  # fmt: skip
    """A follower's stream: the current version first (unless Last-Event-ID has it), then each new one in order.

    Its admission takes the follower's seat, and hands out its token (its cookie) if it had none.

    The embed's options (`controls`, `calculator`) with `live`: the events name the embed's address.
    A session ended or no longer kept (the server restarted) is said so in a stream that the page
    closes, rather than a 404 its browser would ask again and again. The follower is counted from its
    admission (app/live/service.py `admit`) until its stream ends, after the stream's lifetime at most.
    """
    try:
        session, queue, token = await sessions.admit(code, who)
    except (NoSuchSession, SessionEnded):
        return EventSourceResponse(_ended(), ping=0, send_timeout=SEND_TIMEOUT_SECONDS)
    base, options = (path_for(request, "embed"), query.options()) if query.live else (path_for(request, "page"), ())
    last = int(last_event_id) if last_event_id.isdecimal() else None
    lifetime = request.app.state.settings.live_stream_seconds
    question = path_for(request, "live_question", code=session.code)
    stream = _events(sessions, session.code, queue, last, (base, question), options, lifetime, query.theme)
    following = Following(stream, lambda: sessions.leave(session.code, queue), ping=PING_SECONDS,
                          send_timeout=SEND_TIMEOUT_SECONDS)  # fmt: skip
    # The token is handed out with the seat, here, never with a bare page: only an admitted follower votes.
    return following if token == who.token else with_voter(request, following, session.code, token)


class Following(EventSourceResponse):
    """A follower's stream that counts the follower out however it ends, even unread (a HEAD, a client gone)."""

    def __init__(self, stream: AsyncIterator[ServerSentEvent], leave: Callable[[], Awaitable[None]],
                 **options: Any) -> None:  # fmt: skip
        super().__init__(stream, **options)
        self.leave = leave

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Stream, then count the follower out (a second time changes nothing if the stream did)."""
        try:
            await super().__call__(scope, receive, send)
        finally:
            await self.leave()


async def _events(
    sessions: Sessions, code: str, queue: Queue, last: int | None, hrefs: tuple[str, str],
    options: tuple[tuple[str, str], ...], lifetime: float, theme: Theme,
) -> AsyncIterator[ServerSentEvent]:  # fmt: skip
    base, question = hrefs
    # The question panel's state last sent down this stream: a new page has none; a stream reconnected may
    # have missed a question's end, and is told at once.
    asked: str | None = "" if last is None else None
    try:
        async for item in sessions.updates(code, queue, last, lifetime):
            if isinstance(item, Unavailable):
                yield ServerSentEvent(macro_html("_live.html", "away"), event="state", retry=RETRY_MS)
            elif item is GONE:
                async for event in _ended():
                    yield event
                return
            else:
                state = state_view(item, base, options, theme)
                yield ServerSentEvent(macro_html("_live.html", "state", state), event="state", id=str(item.version),
                                      retry=RETRY_MS)  # fmt: skip
                if (marker := item.poll.marker if item.poll else "") != asked:
                    # A question asked, closed, revealed or put away: the follower's panel is fetched again
                    # (with its own answer, which no event carries: one event goes to every follower).
                    asked = marker
                    hides = item.poll is not None and item.poll.question.hides_picture and not item.poll.revealed
                    # No question: an empty event, which empties the follower's panel.
                    attrs = {"data-hides": "" if hides else None}
                    loader = macro_html("_poll.html", "question_loader", question, attrs)
                    yield ServerSentEvent(loader if marker else Markup(""), event="poll")
                if item.ended:
                    yield ServerSentEvent("", event="ended")
    finally:
        await sessions.leave(code, queue)  # at once when its lifetime ends, before the last bytes are sent


async def _refused(problem: Problem) -> AsyncIterator[ServerSentEvent]:
    """A follower's stream refused for now (a full room, an address locked out, Redis away): the bar says why.

    A status would not be seen: the page's stream would ask again and again while its bar still said
    "Following the teacher." over a screen no longer following. The stream ends here, and the browser
    asks again after `retry`: at once for Redis, later for what takes minutes to change.
    """
    if problem.status == 503:
        yield ServerSentEvent(macro_html("_live.html", "away"), event="state", retry=RETRY_MS)
    else:
        refused = macro_html("_live.html", "refused", problem.message)
        yield ServerSentEvent(refused, event="state", retry=REFUSED_RETRY_MS)


async def _ended() -> AsyncIterator[ServerSentEvent]:
    """The session is no longer kept, or has ended: the page says so, and closes its stream on `ended`."""
    yield ServerSentEvent(macro_html("_live.html", "gone"), event="state")
    # A question on the screen goes with it (a Redis restarted empty ends its round too): the picture shows.
    yield ServerSentEvent(macro_html("_poll.html", "question_panel", None), event="poll")
    # The follower's bar closes its stream on this (sse-close), rather than reconnecting.
    yield ServerSentEvent("", event="ended")


def _valid(request: Request, address: str) -> PageQuery:
    """The page's view at `address`, a path of the page itself (not another site or another page)."""
    parts = urlsplit(address)
    if parts.scheme or parts.netloc or parts.path not in ("", path_for(request, "page")):
        raise Problem(422, "That view was not understood", "A live session shows views of this page only.")
    try:
        return view_query(address)
    except BadView as error:
        # Worded as the page words a bad link: the view's address is one.
        errors = [{**e, "loc": ("query", *e["loc"])} for e in error.args[0]]
        raise Problem(422, "That view was not understood", describe(errors, show_input=True)) from None


def _back(request: Request, code: str) -> Response:
    return RedirectResponse(path_for(request, "live_teach", code=code), status_code=303)
