"""The benchmark's baselines, served by exactly the stack that serves the app.

`/` is the hello-world: Starlette's `PlainTextResponse` sent by a bare ASGI app, as Starlette's own
documentation writes it, with no router, no FastAPI and no middleware. That is stricter than a
FastAPI hello-world (about twice as fast, side by side with one worker on this machine), so a ratio
against it counts everything the app's stack adds above uvicorn.

`/floor` is the least a click can do: a blank page with the vendored htmx (configured as the app
configures it) and four links, each swapping one word, served by a second tiny Starlette app
behind the same callable. Its click-to-painted time is what this browser, this server and this
machine cost before any work of the app's, the floor under the app's own figure.

Run by bench.serve as `python -m bench.hello --port N --workers W`.
"""

from __future__ import annotations

import argparse
from html import escape

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, PlainTextResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from app.paths import STATIC_DIR
from app.serving.server import serve
from app.web.templating import HTMX_CONFIG_JSON

STAGES = ("dp", "zero1", "zero2", "zero3")
HTMX = "htmx-2.0.11.min.js"


def _word(stage: str) -> str:
    # The same element the app's click measurement waits for: #grid, its stage in data-stage.
    return f'<p id="grid" data-stage="{escape(stage)}">{escape(stage)}</p>'


async def floor(request: Request) -> HTMLResponse:
    """A blank page whose links swap one word, as the app's stage tabs swap the widget."""
    stage = request.query_params.get("stage", "dp")
    links = "".join(
        f'<a id="switch-{s}" class="switch" href="/floor?stage={s}" hx-get="/floor/word?stage={s}"'
        f' hx-target="#grid" hx-swap="outerHTML" hx-push-url="/floor?stage={s}">{s}</a> '
        for s in STAGES
    )
    config = escape(HTMX_CONFIG_JSON)
    return HTMLResponse(
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>floor</title>'
        f'<meta name="htmx-config" content="{config}"><script src="/floor/htmx.js"></script></head>'
        f'<body hx-history="false"><nav>{links}</nav>{_word(stage)}</body></html>'
    )


async def word(request: Request) -> HTMLResponse:
    """The one word a floor click swaps in."""
    return HTMLResponse(_word(request.query_params.get("stage", "dp")))


async def htmx(request: Request) -> FileResponse:
    """The app's vendored htmx."""
    return FileResponse(STATIC_DIR / HTMX, media_type="text/javascript")


floor_app = Starlette(routes=[Route("/floor", floor), Route("/floor/word", word), Route("/floor/htmx.js", htmx)])
"""The click's floor, and the server's lifespan (which the hello-world leaves to it)."""


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """The hello-world at `/`: one `PlainTextResponse`, made and sent; anything else is the floor's."""
    if scope["type"] == "http" and scope["path"] == "/":
        response = PlainTextResponse("Hello, world")
        await response(scope, receive, send)
    else:
        await floor_app(scope, receive, send)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    serve("127.0.0.1", args.port, workers=args.workers, app="bench.hello:app")
