"""The benchmark's baseline: a hello-world served by exactly the stack that serves the app.

Run by bench.serve as `python -m bench.hello --port N --workers W`.
"""

from __future__ import annotations

import argparse

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse

from app.server import serve

app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)


@app.get("/", response_class=PlainTextResponse)
async def hello() -> str:
    """The least a route can do."""
    return "Hello, world"


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    serve("127.0.0.1", args.port, workers=args.workers, app="bench.hello:app")
