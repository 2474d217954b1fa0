"""The benchmark's baselines, served by exactly the stack that serves the app.

`/` is a hello-world, the least a route can do. `/floor` is the least a click can do: a blank page
with the vendored htmx (configured as the app configures it) and four links, each swapping one
word. Its click-to-painted time is what this browser, this server and this machine cost before any
work of the app's, the floor under the app's own figure.

Run by bench.serve as `python -m bench.hello --port N --workers W`.
"""

from __future__ import annotations

import argparse
from html import escape

from fastapi import FastAPI
from fastapi.responses import FileResponse, HTMLResponse, PlainTextResponse

from app.paths import STATIC_DIR
from app.serving.server import serve
from app.web.templating import HTMX_CONFIG_JSON

app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
STAGES = ("dp", "zero1", "zero2", "zero3")
HTMX = "htmx-2.0.11.min.js"


@app.get("/", response_class=PlainTextResponse)
async def hello() -> str:
    """The least a route can do."""
    return "Hello, world"


def _word(stage: str) -> str:
    # The same element the app's click measurement waits for: #grid, its stage in data-stage.
    return f'<p id="grid" data-stage="{escape(stage)}">{escape(stage)}</p>'


@app.get("/floor", response_class=HTMLResponse)
async def floor(stage: str = "dp") -> str:
    """A blank page whose links swap one word, as the app's stage tabs swap the widget."""
    links = "".join(
        f'<a id="switch-{s}" class="switch" href="/floor?stage={s}" hx-get="/floor/word?stage={s}"'
        f' hx-target="#grid" hx-swap="outerHTML" hx-push-url="/floor?stage={s}">{s}</a> '
        for s in STAGES
    )
    config = escape(HTMX_CONFIG_JSON)
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>floor</title>'
        f'<meta name="htmx-config" content="{config}"><script src="/floor/htmx.js"></script></head>'
        f'<body hx-history="false"><nav>{links}</nav>{_word(stage)}</body></html>'
    )


@app.get("/floor/word", response_class=HTMLResponse)
async def word(stage: str = "dp") -> str:
    """The one word a floor click swaps in."""
    return _word(stage)


@app.get("/floor/htmx.js")
async def htmx() -> FileResponse:
    """The app's vendored htmx."""
    return FileResponse(STATIC_DIR / HTMX, media_type="text/javascript")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    serve("127.0.0.1", args.port, workers=args.workers, app="bench.hello:app")
