"""The response cache: ETags and 304s, HEAD, what the key holds, identical bytes from two workers, the byte bound."""

from __future__ import annotations

import asyncio
import gc
import tracemalloc
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient
from starlette.types import ASGIApp, Receive, Scope, Send

from app.main import create_app
from app.serving.cache import ENTRY_OVERHEAD, MAX_KEPT_ADDRESS, MAX_KEPT_HEADER, ResponseCache
from tests.conftest import asgi_get, dom, full_run_only, one, opened_panel

HX = {"HX-Request": "true"}
GZIP = {"Accept-Encoding": "gzip"}
BR = {"Accept-Encoding": "gzip, deflate, br, zstd"}
IDENTITY = {"Accept-Encoding": "identity"}

CASES = [
    ("page", "/?stage=zero2&gpus=16", {}),
    ("fragment", "/?stage=zero2&gpus=16", HX),
    ("embed", "/embed?stage=zero3&phase=4", {}),
    ("compare", "/compare?left=dp&right=zero3", {}),
    ("share", "/share?stage=zero2&gpus=16", HX),
    ("api", "/api/memory?gpus=64&capacity=80GB", {}),
    ("schema", "/openapi.json", {}),
    ("asset", "/static/app.css", {}),
]


def _wire(client: TestClient, url: str, headers: dict[str, str]) -> tuple[dict[str, str], bytes]:
    """The headers and the body as sent, before the client undoes its content coding."""
    with client.stream("GET", url, headers=headers) as response:
        return dict(response.headers), b"".join(response.iter_raw())


@pytest.mark.parametrize(("name", "url", "headers"), CASES)
@pytest.mark.parametrize("encoding", [IDENTITY, GZIP, BR])
def test_a_matching_if_none_match_gets_a_304(
    client: TestClient, name: str, url: str, headers: dict[str, str], encoding: dict[str, str]
) -> None:
    first = client.get(url, headers={**headers, **encoding})
    assert first.status_code == 200, name
    assert first.headers["cache-control"] == "no-cache"
    etag = first.headers["etag"]
    again = client.get(url, headers={**headers, **encoding, "If-None-Match": f'"other", {etag}'})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag
    assert again.headers["vary"] == first.headers["vary"]
    assert "content-encoding" not in again.headers
    # Another body's tag is no match, and a date is no validator here: the body is sent.
    assert client.get(url, headers={**headers, **encoding, "If-None-Match": '"other"'}).status_code == 200
    since = {"If-Modified-Since": "Fri, 01 Jan 2100 00:00:00 GMT"}
    assert client.get(url, headers={**headers, **encoding, **since}).content == first.content


def test_the_page_and_its_fragment_and_each_coding_have_their_own_etags(client: TestClient) -> None:
    url = "/?stage=zero1"
    tags = {client.get(url, headers={**h, **e}).headers["etag"] for h in ({}, HX) for e in (IDENTITY, GZIP, BR)}
    assert len(tags) == 6
    vary = client.get(url, headers=GZIP).headers["vary"]
    assert {v.strip() for v in vary.split(",")} >= {"HX-Request", "Accept-Encoding"}


def test_the_host_is_part_of_the_key(client: TestClient) -> None:
    # The "Embed this" snippet is absolute: a page asked for under another name must not get this one's.
    page = dom(client.get("/?stage=zero1").text)
    first = opened_panel(client, page, {"Host": "a.example"})
    second = opened_panel(client, page, {"Host": "b.example"})
    assert str(one(first, "#share-link")["href"]).startswith("http://a.example/")
    assert str(one(second, "#share-link")["href"]).startswith("http://b.example/")


@pytest.mark.parametrize(("name", "url", "headers"), CASES)
def test_two_workers_give_the_same_bytes_and_etags(name: str, url: str, headers: dict[str, str]) -> None:
    with TestClient(create_app()) as first, TestClient(create_app()) as second:
        for encoding in (IDENTITY, GZIP, BR):
            a, b = _wire(first, url, {**headers, **encoding}), _wire(second, url, {**headers, **encoding})
            assert a[1] == b[1], name
            assert a[0]["etag"] == b[0]["etag"]
            assert a[0].get("content-encoding") == b[0].get("content-encoding")
            assert int(a[0]["content-length"]) == len(a[1])


def test_every_get_route_answers_head_with_the_headers_alone(client: TestClient) -> None:
    documented = [path for path, ops in client.get("/openapi.json").json()["paths"].items() if "get" in ops]
    assert {"/api/stages", "/api/layout", "/api/memory", "/api/step", "/api/timeline", "/api/measured"} <= set(
        documented
    )
    pages = ["/", "/embed", "/compare", "/measured", "/share", "/favicon.ico", "/openapi.json", "/static/app.css"]
    for path in [*documented, *pages]:
        for encoding in (IDENTITY, BR):
            got, head = client.get(path, headers=encoding), client.head(path, headers=encoding)
            assert head.status_code == got.status_code == 200, path
            assert head.content == b""
            assert head.headers.get("content-length") == got.headers.get("content-length"), path
            assert head.headers.get("etag") == got.headers.get("etag"), path


def test_a_range_request_gets_the_whole_body(client: TestClient) -> None:
    # The cache answers for the app below it, which is always asked for the whole response.
    whole = client.get("/static/app.css", headers=IDENTITY)
    ranged = client.get("/static/app.css", headers={**IDENTITY, "Range": "bytes=0-9"})
    assert (ranged.status_code, ranged.content) == (200, whole.content)


def test_an_asset_keeps_its_own_cache_control_and_a_page_is_revalidated(client: TestClient) -> None:
    page = dom(client.get("/").text)
    css = str(one(page, 'link[rel="stylesheet"]')["href"])
    assert client.get(css).headers["cache-control"] == "public, max-age=31536000, immutable"
    assert client.get("/").headers["cache-control"] == "no-cache"


class _Counted:
    """An app whose body is as many bytes as its query asks, counting what it is asked to draw."""

    def __init__(self) -> None:
        self.drawn: list[int] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        size = int(scope["query_string"] or b"0")
        self.drawn.append(size)
        headers = [(b"content-type", b"application/octet-stream")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"x" * size})


def test_the_cache_is_bounded_in_bytes_and_drops_the_least_recently_used() -> None:
    inner = _Counted()
    cache = ResponseCache(inner, paths=frozenset({"/"}), max_bytes=24_000)
    client = TestClient(cache)
    sizes = list(range(2000, 2400, 40))
    for size in sizes:
        assert client.get(f"/?{size}").content == b"x" * size
    assert cache.used <= 24_000
    assert inner.drawn == sizes
    # The newest stayed; the first ones asked for are the ones gone, and are drawn again.
    client.get("/?2360")
    client.get("/?2000")
    assert inner.drawn == [*sizes, 2000]
    # One response larger than an eighth of the cache is served, not kept.
    for _ in range(2):
        assert client.get("/?5000").content == b"x" * 5000
    assert inner.drawn[-2:] == [5000, 5000]


def test_what_a_browser_is_sent_is_kept_compressed() -> None:
    # A worker keeps a page at a tenth of its size: what the cache holds is the bytes it sends.
    import brotli

    app = create_app()
    with TestClient(app) as client:
        headers, body = _wire(client, "/?stage=zero3&gpus=32", BR)
    assert headers["content-encoding"] == "br"
    caches = [m for m in _middlewares(app) if isinstance(m, ResponseCache)]
    assert len(caches) == 1
    assert len(body) <= caches[0].used < len(body) + 1024  # the body and its headers
    assert caches[0].used < len(brotli.decompress(body)) / 5


def _middlewares(app: object) -> list[object]:
    """The app's middleware instances, outermost first."""
    found, layer = [], app.middleware_stack  # type: ignore[attr-defined]
    while layer is not None:
        found.append(layer)
        layer = getattr(layer, "app", None)
    return found


def _render_counting(renders: list[str], private: tuple[bytes, bytes] | None) -> ASGIApp:
    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        renders.append(scope["query_string"].decode())
        await asyncio.sleep(0.01)  # a render in progress, as the others arrive
        headers = [(b"content-type", b"text/plain")]
        if private:
            headers.append(private)  # never given to another
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"drawn " + scope["query_string"]})

    return app


@pytest.mark.parametrize(
    ("private", "renders_expected"),
    [
        (None, 1),
        ((b"vary", b"Referer"), 10),  # depends on more than the key
        ((b"cache-control", b"no-store"), 10),  # one live session's state now (app/web/pages.py embed)
    ],
)
def test_requests_for_a_page_being_rendered_wait_for_that_render(
    private: tuple[bytes, bytes] | None, renders_expected: int
) -> None:
    renders: list[str] = []
    cache = ResponseCache(_render_counting(renders, private), paths=frozenset({"/"}))

    async def call(query: bytes) -> bytes:
        body: bytes = (await asgi_get(cache, query.decode()))[1]["body"]
        return body

    async def room() -> list[bytes]:
        return await asyncio.gather(*(call(b"stage=zero3") for _ in range(10)), call(b"stage=dp"))

    with ThreadPoolExecutor(1) as pool:
        bodies = pool.submit(asyncio.run, room()).result(timeout=30)
    assert bodies == [b"drawn stage=zero3"] * 10 + [b"drawn stage=dp"]
    # A room asking for one new page at once costs one render, unless the page is not the same for everyone.
    assert renders.count("stage=zero3") == renders_expected
    assert renders.count("stage=dp") == 1


async def _drive(cache: ResponseCache, count: int, query: Callable[[int], str], host: bytes = b"a.example") -> None:
    """`count` GETs of / straight through the cache, the i-th with `query(i)`."""
    for i in range(count):
        await asgi_get(cache, query(i), [(b"host", host), (b"accept-encoding", b"gzip")])


def _run(coroutine: Coroutine[Any, Any, None]) -> None:
    with ThreadPoolExecutor(1) as pool:  # a loop of its own, as in the tests above
        pool.submit(asyncio.run, coroutine).result(timeout=120)


# 5,461 entries: just after the dict's table grows; the quick loop keeps the smallest and that one.
@pytest.mark.parametrize("count", [100, *full_run_only(2_000), 5_500])
def test_the_bytes_the_cache_counts_bound_the_memory_it_really_holds(count: int) -> None:
    cache = ResponseCache(_Small(), paths=frozenset({"/"}), max_bytes=10**9)
    _run(_drive(cache, 1, str))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        _run(_drive(cache, count, lambda i: f"stage=zero2&gpus={i + 10}"))
        gc.collect()
        real = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    accounted = cache.used * count / len(cache.entries)
    # Honest both ways: never less than the memory held, and not so much more that the bound means little.
    assert real <= accounted <= 2 * real


class _Small:
    """A small response with the headers a page has: the entry's overhead outweighs its bytes."""

    def __init__(self) -> None:
        self.drawn = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.drawn += 1
        headers = [(b"content-type", b"text/html; charset=utf-8"), (b"vary", b"Accept-Encoding"),
                   (b"x-content-kind", b"page")]  # fmt: skip
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"x" * 100})


@pytest.mark.parametrize(
    ("name", "query", "host"),
    [
        ("long distinct queries", lambda i: f"y={i}" + "a" * 64_000, b"a.example"),
        ("queries just over the bound", lambda i: f"y={i}".ljust(MAX_KEPT_ADDRESS, "a"), b"a.example"),
        ("long hosts", lambda i: f"stage=zero2&gpus={i}", b"h" * 4_000),
        ("short distinct queries", lambda i: f"y={i}", b"a.example"),
    ],
)
def test_a_flood_of_distinct_addresses_keeps_the_cache_within_its_bytes(
    name: str, query: Callable[[int], str], host: bytes
) -> None:
    max_bytes = 200_000
    cache = ResponseCache(_Small(), paths=frozenset({"/"}), max_bytes=max_bytes)
    seen: list[int] = []

    async def flood() -> None:
        for i in range(0, 3_000, 100):
            await _drive(cache, 100, lambda j, i=i: query(i + j), host)  # type: ignore[misc]
            seen.append(cache.used)
            assert len(cache.entries) <= max_bytes // (ENTRY_OVERHEAD + 100), name

    _run(flood())
    assert max(seen) <= max_bytes, name
    assert all(len(key) == 32 for key in cache.entries)  # what a key costs does not grow with the address


@pytest.mark.parametrize(
    ("url", "headers", "kept"),
    [
        ("/?" + "a" * (MAX_KEPT_ADDRESS - 1), {}, True),
        ("/?" + "a" * MAX_KEPT_ADDRESS, {}, False),
        ("/?stage=zero2", {"Host": "h" * MAX_KEPT_HEADER}, True),
        ("/?stage=zero2", {"Host": "h" * (MAX_KEPT_HEADER + 1)}, False),
        ("/?stage=zero2", {"Accept-Encoding": "gzip, " * 60}, False),
    ],
)
def test_an_address_longer_than_any_the_app_builds_is_answered_not_kept(
    url: str, headers: dict[str, str], kept: bool
) -> None:
    inner = _Small()
    cache = ResponseCache(inner, paths=frozenset({"/"}))
    client = TestClient(cache)
    first = client.get(url, headers=headers)
    again = client.get(url, headers={**headers, "If-None-Match": first.headers["etag"]})
    assert (first.status_code, again.status_code) == (200, 304)  # the cache still answers for it
    assert client.head(url, headers=headers).headers["content-length"] == "100"
    assert inner.drawn == (1 if kept else 3)
    assert len(cache.entries) == (1 if kept else 0)


def test_the_longest_address_the_run_form_sends_is_kept(client: TestClient) -> None:
    # Every field of the run form filled, as the browser sends it: the bound leaves it room, threefold.
    page = dom(client.get("/?recipe=custom&offload=optimizer%2Bparams&offload_device=nvme").text)
    form = one(page, "#run-form")
    fields = [str(tag["name"]) for tag in form.select("[name]")]
    query = urlencode([(name, "9" * 12) for name in fields])
    assert len(fields) > 20
    assert 3 * len(query) <= MAX_KEPT_ADDRESS
