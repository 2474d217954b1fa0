"""Bad requests answered for whoever is looking: HTML for people, JSON for the API.

Input is never put into a response unescaped: the HTML goes through Jinja's autoescaping,
and the JSON omits the rejected values altogether.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.domain.quantities import ambiguity
from app.domain.scenario import resolve
from app.paths import is_api_path, route_path
from app.web.api import API_TAG
from app.web.embed_view import embed_view
from app.web.fields import FIELD_HINTS, SIZE_FIELDS
from app.web.inputs import NOT_MEASURED, EmbedQuery, PageQuery, SetAside, set_aside
from app.web.links import Links, embed_links, page_links, path_for
from app.web.page_view import PageView, compare_href, error_view, page_view, with_problems
from app.web.pages import form_first, with_way_out
from app.web.set_aside_view import set_aside_view, with_drawn
from app.web.templating import render, replace_history

_MAX_SHOWN = 40
_LOCATIONS = {"query": "query parameter", "path": "path", "header": "header", "body": "body", "option": "option"}


def _shown(value: Any) -> str:
    text = str(value)
    return text if len(text) <= _MAX_SHOWN else text[: _MAX_SHOWN - 1] + "…"


def describe(errors: Sequence[Any], *, show_input: bool) -> str:
    """One readable sentence per problem, e.g. 'The query parameter “stage” must be …'.

    `show_input` repeats what was sent, shortened; only for HTML, where Jinja escapes it.
    """
    sentences = []
    for error in errors:
        loc = [str(part) for part in error.get("loc", ())]
        where = _LOCATIONS.get(loc[0], loc[0]) if loc else "request"
        name = ".".join(loc[1:]) or where
        value = error.get("input")
        got = f"; “{_shown(value)}” is not" if show_input and isinstance(value, str | int | float) else ""
        expected = (error.get("ctx") or {}).get("expected")
        mismatch = error.get("type") == "string_pattern_mismatch"
        # The grammar refuses '80G' like any other typo; the person deserves to hear why.
        reading = (
            ambiguity(value, show_input=show_input)
            if mismatch and name in SIZE_FIELDS and isinstance(value, str)
            else None
        )
        if reading is not None:
            sentences.append(f"The {where} “{name}” is ambiguous: {reading}.")
        elif mismatch and name in FIELD_HINTS:
            sentences.append(f"The {where} “{name}” should be {FIELD_HINTS[name]}{got}.")
        elif error.get("type") == NOT_MEASURED:
            sentences.append(f"{error.get('msg', '')}.")  # a sentence already, starting with impl=…
        elif error.get("type") == "enum" and expected:
            sentences.append(f"The {where} “{name}” must be {expected}{got}.")
        else:
            message = str(error.get("msg", "is not valid")).rstrip(".")
            sentences.append(f"The {where} “{name}” is not valid: {message[:1].lower()}{message[1:]}.")
    return " ".join(sentences) or "The request could not be understood."


def _is_api(request: Request) -> bool:
    route = request.scope.get("route")
    if isinstance(route, APIRoute):
        return API_TAG in route.tags
    return is_api_path(route_path(request.scope))


async def validation_error(request: Request, exc: Exception) -> Response:
    """422 with what was wrong, in the form the asker reads."""
    assert isinstance(exc, RequestValidationError)
    errors = exc.errors()
    if _is_api(request):
        detail = [
            # The sentence, not pydantic's message, which would repeat a pattern hundreds of characters long.
            {"loc": list(e.get("loc", ())), "msg": describe([e], show_input=False), "type": str(e.get("type", ""))}
            for e in errors
        ]
        message = describe(errors, show_input=False)
        return JSONResponse({"message": message, "detail": detail}, status_code=422)
    route = getattr(request.scope.get("route"), "name", None)
    if route == "page":
        return _page_set_aside(request)
    if route == "embed":
        return _embed_set_aside(request)
    view = error_view(describe(errors, show_input=True), page_links(request), None, *_ways_on(request))
    return render(request, "index.html", "widget", view, status_code=422)


def _ways_on(request: Request) -> tuple[str, str]:
    """The side-by-side and the measured pages, bare: an error page keeps the widget's other links."""
    return path_for(request, "compare"), path_for(request, "measured")


def _on_screen(request: Request) -> dict[str, str]:
    """The query of the page the person was looking at when they sent this one.

    htmx names it in HX-Current-URL; a form sent without JavaScript, in Referer. Only the same page
    of the same host counts: another site's or another route's parameters mean nothing here.
    """
    sent = request.headers.get("HX-Current-URL") or request.headers.get("Referer") or ""
    shown = urlsplit(sent)
    if (shown.netloc, shown.path) != (request.url.netloc, request.url.path):
        return {}
    return dict(parse_qsl(shown.query))


def _varies_on_screen(response: Response) -> Response:
    # The body depends on the page on the screen: a shared cache must not give it to another.
    response.headers["Vary"] = f"{response.headers['Vary']}, HX-Current-URL, Referer"
    return response


def _page_set_aside(request: Request) -> Response:
    """The page for the valid part of the request, the rest set aside and said so.

    A bad form field keeps the run on the screen for that field, with what was typed and the reason
    beside it; the rest of the form is drawn, and the address (htmx puts it in the bar) and the
    "Embed this" panel name the run drawn. A bad stage or phase gets a notice, and the switcher
    still carries the run.
    """
    kept = set_aside(request.query_params, shown=_on_screen(request))
    link = page_links(request, kept.query)
    compare = compare_href(path_for(request, "compare"), kept.query.stage, link.kept)
    view = _set_aside_view(kept.query, link, kept, form_first(request), compare)
    view = with_way_out(request, view, kept.query, link)
    push = None if kept.notice else link(kept.query.stage)
    return _varies_on_screen(render(request, "index.html", "widget", view, status_code=422, push_url=push))


def _embed_set_aside(request: Request) -> Response:
    """The embed for the valid part of the request, as the page does it; a bad `controls` is a notice.

    So is a bad field of the run in an embed without the calculator: there is no form to say it
    beside, and a picture of the default run in its place would be a wrong figure in a course page.
    """
    kept = set_aside(request.query_params, EmbedQuery, shown=_on_screen(request))
    query = kept.query
    assert isinstance(query, EmbedQuery)
    link = embed_links(request, query)
    unseen = bool(kept.problems) and not query.calculator and not kept.notice
    if unseen:
        # In the words the page's notice uses ("GPUs: “0” is not accepted. Enter a whole number…"), not pydantic's.
        fields = set_aside_view(kept.problems, resolve(query.inputs()), kept.fell_back).fields
        said = " ".join(f"{f.label}: {f.said}" for f in fields)
        view = error_view(said, link, query.stage)
    else:
        view = _set_aside_view(query, link, kept, form_first(request))
    view = replace(view, embed=embed_view(query.controls, query.calculator))
    push = None if kept.notice or unseen else link(query.stage)
    return _varies_on_screen(
        replace_history(render(request, "index.html", "widget", view, status_code=422, push_url=push))
    )


def _set_aside_view(query: PageQuery, link: Links, kept: SetAside, first: bool, compare: str = "") -> PageView:
    """The view for the valid rest of a request.

    A notice for a bad stage, phase or embed option; else the widget with the bad form fields marked.
    When the form comes `first` (a link was followed, or the form under such a message was sent), the
    top of the widget also says which values were set aside and what the picture is of instead.
    `compare` is the side-by-side page for the run, on the page (an embed's links stay in the embed).
    """
    if kept.notice:
        stage_ok = all(e["loc"][1] != "stage" for e in kept.errors)
        message = describe(kept.errors, show_input=True)
        return error_view(message, link, query.stage if stage_ok else None, compare)
    inputs = query.inputs()
    scenario = resolve(inputs)
    problems = with_drawn(kept.problems, scenario, kept.fell_back)
    view = with_problems(page_view(query.stage, link, scenario, inputs, query.phase), problems)
    if not first:
        return replace(view, compare_href=compare)
    said = set_aside_view(kept.problems, scenario, kept.fell_back) if kept.problems else None
    return replace(view, compare_href=compare, set_aside=said, form_first=True)


_HTTP_MESSAGES = {
    404: "There is no page at this address.",
    405: "This address does not accept that kind of request.",
}


async def http_error(request: Request, exc: Exception) -> Response:
    """404, 405 and the like, without Starlette's bare text."""
    assert isinstance(exc, HTTPException)
    message = _HTTP_MESSAGES.get(exc.status_code, "The request could not be answered.")
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = _allowed(request) or headers.get("Allow", "")
    if _is_api(request):
        return JSONResponse({"message": message, "detail": message}, status_code=exc.status_code, headers=headers)
    view = error_view(message, page_links(request), None, *_ways_on(request))
    response = render(request, "index.html", "widget", view, exc.status_code)
    response.headers.update(headers)
    return response


def _allowed(request: Request) -> str:
    """Every method the schema documents for the address; empty off the API.

    Starlette's 405 names only the first route of a path, and /api/config has two (GET and POST).
    """
    documented = request.app.openapi().get("paths", {}).get(route_path(request.scope), {})
    return ", ".join(sorted(method.upper() for method in documented))


def install(app: FastAPI) -> None:
    """Register the handlers on an app."""
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
