"""The application: routes, static files, error handlers and security headers."""

from __future__ import annotations

import gc

from fastapi import FastAPI
from fastapi.middleware.gzip import GZipMiddleware

from app import __version__, api, errors, pages
from app.assets import StaticAssets
from app.cache import ResponseCache
from app.config import Settings
from app.overload import ConcurrencyLimit
from app.paths import STATIC_DIR
from app.security import SecurityHeadersMiddleware

DESCRIPTION = (
    "Which GPU holds which band of training state under data parallelism and ZeRO stages 1, 2 "
    "and 3: 8 cards, 8 weights, 4 bands (bf16 weights, bf16 gradients, fp32 master copy, Adam moments)."
)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; settings default to the environment's."""
    settings = settings or Settings.from_env()
    # No /docs or /redoc: both load scripts from a CDN, which the CSP and offline classrooms forbid.
    app = FastAPI(title="ZeRO Bands", version=__version__, description=DESCRIPTION, docs_url=None, redoc_url=None)
    app.include_router(pages.router)
    app.include_router(api.router)
    app.state.assets = StaticAssets(STATIC_DIR)
    app.mount("/static", app.state.assets, name="static")
    # A request for /static alone is a 404, not a redirect built from the Host header.
    app.router.redirect_slashes = False
    errors.install(app)
    # 256 labelled cells make a ~100 kB page that compresses about tenfold: it matters on classroom Wi-Fi.
    app.add_middleware(GZipMiddleware, minimum_size=1024)
    # A limit on the work in progress: inside the cache, so an answer from memory (or one waiting
    # for a render of the same page already under way) is never refused; inside the headers, so a
    # 503 carries them.
    app.add_middleware(ConcurrencyLimit, limit=settings.limit_concurrency)
    # Pages and JSON are pure functions of their address: rendered once, then served from memory.
    if settings.cache_bytes:
        pure = frozenset({"/", "/embed", "/compare", "/measured", "/share", "/openapi.json"})
        app.add_middleware(ResponseCache, paths=pure, prefixes=("/api/",), max_bytes=settings.cache_bytes)
    app.add_middleware(SecurityHeadersMiddleware, settings=settings)
    return app


app = create_app()

# A page's render leaves some three hundred objects in reference cycles (Jinja's contexts, the
# request's scope) for the collector, which then walks every cached view too: a quarter of a
# millisecond a request at the default thresholds. Collecting the young less often costs a worker
# little memory and halves that (bench.render). What start-up built stays for good: frozen, it
# is never walked again.
gc.set_threshold(10_000, 10, 10)
gc.freeze()
