"""The Jinja2 environment, and the one helper that renders a page or just its widget."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from jinja2 import Environment, FileSystemLoader
from jinja2_fragments import render_block
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.templating import Jinja2Templates

from app.paths import TEMPLATES_DIR
from app.web.form_view import FormPart
from app.web.links import template_url_for

# htmx settings that keep it inside a strict CSP and make back/forward ask the server. (Requests
# to this origin only, selfRequestsOnly, is htmx 2's default: not repeated in every page's bytes.)
HTMX_CONFIG: dict[str, Any] = {
    "allowEval": False,
    "allowScriptTags": False,
    "includeIndicatorStyles": False,
    "historyCacheSize": 0,
    # No CSS transitions to wait for; settling at once also attaches htmx to the new links sooner.
    "defaultSettleDelay": 0,
    # Settling copies these attributes from the old element to the new; never "style", which a
    # strict style-src would refuse if anything had set one.
    "attributesToSettle": ["class", "width", "height"],
    # A 422 carries a readable message written for the spot it is swapped into.
    "responseHandling": [
        {"code": "204", "swap": False},
        {"code": "[23]..", "swap": True},
        {"code": "422", "swap": True, "error": False},
        {"code": "[45]..", "swap": False, "error": True},
    ],
}

# A request that only refines the page asks for its address to be replaced rather than pushed
# (the run form: arrowing through a drop-down must not fill the history).
HISTORY_HEADER = "ZB-History"

# Sent by the run form while it stands first, under the message of a bad link (templates/_widget_block.html):
# the answer keeps it there, so the field being corrected does not move away under the typing.
FORM_FIRST_HEADER = "ZB-Form-First"

# These headers decide the body or the history header, so a cache must key on them.
VARY = f"HX-Request, HX-History-Restore-Request, {HISTORY_HEADER}, {FORM_FIRST_HEADER}"

_INDENT = re.compile(r"^[ \t]+", re.MULTILINE)


class _Unindented(FileSystemLoader):
    """Templates without the indentation that keeps them readable here.

    A browser collapses a newline and the spaces after it into one space, as it does a newline
    alone, so the page looks the same. (No template holds a <pre>, and the one <textarea> gets its
    text from a variable.) The fragment is a fifth smaller, and a run never seen is rendered,
    compressed and sent in 2.3-2.8 ms instead of 2.8-3.6 ms (bench.render, the two alternating).
    """

    def get_source(self, environment: Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        """The template's source, each line's leading spaces and tabs taken off."""
        source, filename, uptodate = super().get_source(environment, template)
        return _INDENT.sub("", source), filename, uptodate


templates = Jinja2Templates(directory=TEMPLATES_DIR)
templates.env.loader = _Unindented(TEMPLATES_DIR)
# Templates do not change while the app runs: no stat of the file on every render.
templates.env.auto_reload = False
templates.env.globals["url_for"] = template_url_for
HTMX_CONFIG_JSON = json.dumps(HTMX_CONFIG, separators=(",", ":"))
templates.env.globals["htmx_config"] = HTMX_CONFIG_JSON
# A live session's pages keep their own address while the widget changes under them: reloaded, the
# teacher's page is still the teacher's, and a follower's still follows.
HTMX_LIVE_CONFIG_JSON = json.dumps({**HTMX_CONFIG, "historyEnabled": False}, separators=(",", ":"))
# The page's layouts name theirs by the view's `htmx_config` (app/web/page_view.py).
templates.env.globals["htmx_configs"] = {"page": HTMX_CONFIG_JSON, "live": HTMX_LIVE_CONFIG_JSON}


class _Same:
    """An object as a cache key by identity, not by value, and kept alive while the key is.

    Hashing a card's 32 cells of a dozen fields each would cost more than rendering them saves;
    an identity is free, and holding the object means its id cannot be reused while cached.
    """

    __slots__ = ("obj",)

    def __init__(self, obj: object) -> None:
        self.obj = obj

    def __hash__(self) -> int:
        return id(self.obj)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj


def macro_html(template: str, macro: str, *args: object) -> Markup:
    """One macro of `template` applied to `args`: a piece of a page sent alone (a live session's event)."""
    return Markup(getattr(templates.env.get_template(template).module, macro)(*args))


def _macro(macro: str, *args: object) -> Markup:
    return macro_html("_widget.html", macro, *args)


# A card's plot is about 9 kB (measured) and serves every run on its cluster. Full of the largest
# clusters' cards, 1,024 held 17.7 MB (bench.memory's distinct clusters, tracemalloc): within a worker's bound.
@lru_cache(maxsize=1024)
def _lasting(macro: str, same: _Same) -> Markup:
    return _macro(macro, same.obj)


def rendered(macro: str, obj: object) -> Markup:
    """`macro` of _widget.html applied to `obj`, rendered once for each object.

    For immutable view parts built once and shared: a card's columns are built once for each
    stage, cluster and recipe (grid_view.card_columns), so a run of another model size reuses their
    markup. These are the page's hot loop: rendered afresh each time, a never-seen run costs 1.5
    times as much (docs/architecture.md).
    """
    return _lasting(macro, _Same(obj))


templates.env.globals["rendered"] = rendered


# A run form's part (app/web/form_view.py) is one of few, run after run: kept by its value, which is
# cheaper to hash than the part is to render (docs/architecture.md, "Four memos below the cache").
def form_part(part: FormPart) -> Markup:
    """The run form's `part` macro (templates/_form.html) applied to a control or the bands, once for each value.

    A part showing a value set aside holds what someone typed (up to the address's limit): rendered, not kept,
    so the memo's bound on memory stays one of few short values.
    """
    return _form_markup(part) if part.set_aside else _kept_form_part(part)


def _form_markup(part: FormPart) -> Markup:
    return Markup(templates.env.get_template("_form.html").module.part(part))  # type: ignore[attr-defined]


_kept_form_part = lru_cache(maxsize=1024)(_form_markup)


templates.env.globals["form_part"] = form_part


def wants_fragment(request: Request) -> bool:
    """An htmx swap asks for the widget alone; a history restore needs the whole page."""
    headers = request.headers
    return headers.get("HX-Request") == "true" and headers.get("HX-History-Restore-Request") != "true"


def render(
    request: Request, template: str, block: str, view: object, status_code: int = 200, push_url: str | None = None
) -> HTMLResponse:
    """Render `template` whole, or only its `block` for an htmx swap, with the view as `view`.

    `push_url` is the canonical address of what the fragment shows: htmx puts it in the address
    bar instead of the form's long query string, as a new history entry, or in place of the current
    one when the request says `ZB-History: replace`.
    """
    fragment = wants_fragment(request)
    # `refined`: the run form's request, which keeps the stage and phase (what #narration says depends on it).
    refined = request.headers.get(HISTORY_HEADER) == "replace"
    context = {"request": request, "view": view, "fragment": fragment, "refined": refined}
    if fragment:
        # jinja2-fragments renders the block as Jinja renders a page: an error names the template's line.
        response = HTMLResponse(render_block(templates.env, template, block, context), status_code=status_code)
        if push_url is not None:
            response.headers["HX-Replace-Url" if refined else "HX-Push-Url"] = push_url
    else:
        response = templates.TemplateResponse(request, template, context, status_code=status_code)
    response.headers["Vary"] = VARY
    return response


def replace_history(response: HTMLResponse) -> HTMLResponse:
    """An htmx swap in an embed replaces the frame's address instead of pushing one.

    A frame's history is the host page's too: the host's Back button should leave the page, not
    step back through the embed's stages.
    """
    pushed = response.headers.get("HX-Push-Url")
    if pushed is not None:
        del response.headers["HX-Push-Url"]
        response.headers["HX-Replace-Url"] = pushed
    return response
