"""The application: routes, static files, error handlers and security headers."""

from __future__ import annotations

import gc

from brotli_asgi import BrotliMiddleware
from fastapi import FastAPI
from starlette.middleware.gzip import GZipMiddleware

from app import __version__
from app.live.hub import Unavailable
from app.paths import EVENT_STREAM, STATIC_DIR
from app.serving.address import AddressLimit
from app.serving.assets import StaticAssets
from app.serving.cache import ResponseCache
from app.serving.codings import (
    BROTLI_QUALITY,
    BROTLI_WINDOW,
    GZIP_LEVEL,
    MINIMUM_SIZE,
    STATIC_BROTLI_QUALITY,
    STATIC_MINIMUM_SIZE,
)
from app.serving.config import Settings
from app.serving.headers import HeaderCheck
from app.serving.overload import Busy, ConcurrencyLimit, busy_page
from app.serving.security import SecurityHeadersMiddleware, server_error
from app.web import api, errors, live, pages

DESCRIPTION = (
    "Which GPU holds which band of training state under data parallelism and ZeRO stages 1, 2 "
    "and 3: 8 cards, 8 weights, 4 bands (bf16 weights, bf16 gradients, fp32 master copy, Adam moments)."
)


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the app; settings default to the environment's."""
    settings = settings or Settings.from_env()
    # No /docs or /redoc: both load scripts from a CDN, which the CSP and offline classrooms forbid.
    app = FastAPI(
        title="ZeRO Bands", version=__version__, description=DESCRIPTION, docs_url=None, redoc_url=None,
        lifespan=live.lifespan,
    )  # fmt: skip
    app.state.settings = settings
    app.state.hub = live.hub_for(settings)
    app.include_router(pages.router)
    app.include_router(live.router)
    app.include_router(api.router)
    app.state.assets = StaticAssets(STATIC_DIR)
    # The static files at brotli's densest (and zlib's, for gzip): with the cache on, made once per
    # worker on the first request (htmx in 50 ms), 2.4 kB fewer on every first load.
    static_quality = STATIC_BROTLI_QUALITY if settings.cache_bytes else BROTLI_QUALITY
    static = BrotliMiddleware(
        app.state.assets, quality=static_quality, lgwin=BROTLI_WINDOW, minimum_size=STATIC_MINIMUM_SIZE
    )
    app.mount("/static", static, name="static")
    # A request for /static alone is a 404, not a redirect built from the Host header.
    app.router.redirect_slashes = False
    errors.install(app)
    live.install(app)
    # Redis away, wherever a route asked it: one 503 page, not a try at every call.
    app.add_exception_handler(Unavailable, live.unavailable_page)
    # No render slot for a live route's own render (the QR code): the busy page, as for any other.
    app.add_exception_handler(Busy, busy_page)
    # Any other failure: Starlette's outermost ServerErrorMiddleware answers it, so the 500 brings its own headers.
    app.add_exception_handler(Exception, server_error(settings))
    # The one compression layer. 256 labelled cells make an 80 kB page that compresses about tenfold:
    # it matters on classroom Wi-Fi. Brotli inside, so a client that takes it gets it; gzip around it
    # for the rest (brotli-asgi's own gzip fallback knows only zlib's slowest level). A 256 KiB brotli
    # window holds any response here whole, where the default 4 MiB one only costs memory.
    # A live session's event stream is sent as it goes, uncompressed (Starlette's gzip leaves
    # text/event-stream alone by itself): its events are a few hundred bytes each.
    app.add_middleware(
        BrotliMiddleware, quality=BROTLI_QUALITY, lgwin=BROTLI_WINDOW, minimum_size=MINIMUM_SIZE, gzip_fallback=False,
        excluded_handlers=[EVENT_STREAM.pattern],
    )  # fmt: skip
    app.add_middleware(GZipMiddleware, minimum_size=MINIMUM_SIZE, compresslevel=GZIP_LEVEL)
    # A limit on the work in progress: inside the cache, so an answer from memory (or one waiting
    # for a render of the same page already under way) is never refused; inside the headers, so a
    # 503 carries them.
    app.add_middleware(ConcurrencyLimit, limit=settings.limit_concurrency)
    # Pages, JSON and static files are pure functions of their address: made and compressed once,
    # then served from memory.
    if settings.cache_bytes:
        pure = frozenset({"/", "/embed", "/compare", "/measured", "/share", "/openapi.json", "/favicon.ico"})
        prefixes = ("/api/", "/static/")
        app.add_middleware(ResponseCache, paths=pure, prefixes=prefixes, max_bytes=settings.cache_bytes)
    # A key header sent twice, or a Host not allowed or no host at all: refused before the cache keys on it
    # or a snippet is written with it.
    app.add_middleware(HeaderCheck, allowed_hosts=settings.allowed_hosts)
    # An address longer than any the app builds: refused before anything splits or keeps it.
    app.add_middleware(AddressLimit)
    # Another site's page may frame the embed (and a follower's embed, `/embed?live=CODE`), nothing else.
    embedded = frozenset({app.url_path_for("embed")})
    app.add_middleware(SecurityHeadersMiddleware, settings=settings, embedded=embedded)
    return app


app = create_app()

# A page's render leaves some three hundred objects in reference cycles (Jinja's contexts, the
# request's scope) for the collector, which then walks every cached view too: a quarter of a
# millisecond a request at the default thresholds. Collecting the young less often costs a worker
# little memory and halves that (bench.render). What start-up built stays for good: frozen, it
# is never walked again.
gc.set_threshold(10_000, 10, 10)
gc.freeze()
