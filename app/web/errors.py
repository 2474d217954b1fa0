"""Bad requests answered for whoever is looking: JSON for the API, a plain message for other routes.

The page and the embed read their queries leniently (`pages.py`), so they never come here for a bad
value: their own route draws the valid rest, and says what was set aside.

Input is never put into a response unescaped: the HTML goes through Jinja's autoescaping,
and the JSON omits the rejected values altogether.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException
from starlette.responses import Response

from app.domain.units import ambiguity
from app.paths import is_api_path, route_path
from app.web.api import API_TAG
from app.web.fields import FIELD_HINTS, SIZE_FIELDS
from app.web.inputs import NOT_MEASURED
from app.web.links import page_links, path_for
from app.web.page_view import error_view
from app.web.templating import render

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
    view = error_view(describe(errors, show_input=True), page_links(request), None, *_ways_on(request))
    return render(request, "index.html", "widget", view, status_code=422)


def _ways_on(request: Request) -> tuple[str, str]:
    """The side-by-side and the measured pages, bare: an error page keeps the widget's other links."""
    return path_for(request, "compare"), path_for(request, "measured")


_HTTP_MESSAGES = {
    404: "There is no page at this address.",
    405: "This address does not accept that kind of request.",
    408: "The request's body came too slowly, and was not read: send it again.",
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
