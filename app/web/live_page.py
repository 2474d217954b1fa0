"""A live session's page: the view it shows drawn once per view, then only the session's bar per request.

A class joins at once: 300 students scan the code within a second, and every one of them asks for
the same view. Building it (stage_page, 20 ms for a 4,096-GPU step) and drawing its widget (13 ms)
for each would queue them for seconds. So the view and its widget's markup are kept here, for the
few views a lecture is on, and each follower's page draws only the page around them and its own bar
(templates/live_page.html): the cost of a page the response cache already holds, whatever the view
(bench.live, "Joins"). The response cache cannot keep these pages itself: one session's page
changes with the session, under the same address.

A follower's page carries nothing of the follower's own (its token comes with its stream): every
follower of a session at one version, in one theme, gets the same bytes. So those bytes are kept too,
compressed as the client takes them, and a class of 300 joining at once costs one render and one
compression per coding, then a copy each (bench.live, "Joins": p95 1,786 ms before, under 1 s after).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import replace

from jinja2_fragments import render_block
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from app.serving.codings import MINIMUM_SIZE, chosen, encoded
from app.web.live_view import LiveView, view_query
from app.web.page_view import PageView
from app.web.pages import stage_page
from app.web.templating import VARY, templates

VIEWS_KEPT = 32
"""Views drawn and kept: a lecture's recent stages and phases (a 4,096-GPU one is about 100 kB)."""
PAGES_KEPT = 32
"""Followers' pages kept, each in one coding: a lecture's recent versions (a 4,096-GPU one 14 kB in brotli,
135 kB as it is): a few MB at most."""

_drawn: OrderedDict[bytes, tuple[PageView, Markup]] = OrderedDict()
_pages: OrderedDict[bytes, tuple[bytes, str]] = OrderedDict()
"""Each page's bytes and their coding ("": a page too short to compress, or a client that takes none)."""


def _key(request: Request, shown: str) -> bytes:
    # The widget's links and snippets are written from the request's scheme, host and root path: one
    # drawing for each. Hashed, so that a long Host costs the memo no more than a short one.
    return hashlib.sha256(f"{request.base_url}\n{shown}".encode()).digest()


def drawn(request: Request, shown: str) -> tuple[PageView, Markup]:
    """The page's view of `shown` (a canonical view) and its widget's markup, drawn once while kept."""
    key = _key(request, shown)
    if (kept := _drawn.get(key)) is not None:
        _drawn.move_to_end(key)
        return kept
    view, _ = stage_page(request, view_query("?" + shown))
    # Drawn as a live page draws it: the widget's only difference is the "Teach this live" field, left out.
    # The config forms left out too: their POST answers with the plain page, out of the session.
    configs = replace(view.configs, live=True) if view.configs else None
    context = {"request": request, "view": replace(view, live=LiveView(), configs=configs), "fragment": False,
               "refined": False}  # fmt: skip
    _drawn[key] = view, Markup(render_block(templates.env, "index.html", "widget", context))
    if len(_drawn) > VIEWS_KEPT:
        _drawn.popitem(last=False)
    return _drawn[key]


def live_page(request: Request, shown: str, live: LiveView) -> HTMLResponse:
    """A live page, whole: the view `shown` with the session's bar; no shared cache keeps it (one session's)."""
    view, widget = drawn(request, shown)
    context = {"request": request, "view": replace(view, live=live), "widget": widget, "fragment": False,
               "refined": False}  # fmt: skip
    response = templates.TemplateResponse(request, "live_page.html", context)
    response.headers["Vary"] = VARY
    response.headers["Cache-Control"] = "no-store"
    return response


def follower_page(request: Request, shown: str, live: LiveView) -> Response:
    """A follower's page, whole, as `live_page` draws it: kept by its session's state and coding, sent as kept.

    Sent already compressed (the compression middleware leaves a response with a coding alone).
    """
    wanted = chosen(request.headers.get("accept-encoding", ""))
    key = hashlib.sha256(f"{request.base_url}\n{shown}\n{live!r}\n{wanted}".encode()).digest()
    if (kept := _pages.get(key)) is None:
        page = bytes(live_page(request, shown, live).body)
        coding = wanted if len(page) >= MINIMUM_SIZE else ""
        kept = _pages[key] = encoded(page, coding), coding
        if len(_pages) > PAGES_KEPT:
            _pages.popitem(last=False)
    else:
        _pages.move_to_end(key)
    body, coding = kept
    headers = {"Vary": VARY, "Cache-Control": "no-store"} | ({"Content-Encoding": coding} if coding else {})
    return Response(body, media_type="text/html", headers=headers)
