"""The response cache: ETags and 304s, what the key holds, identical bytes from two workers, the byte bound."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from starlette.types import Receive, Scope, Send

from app.cache import ResponseCache
from app.main import create_app
from tests.conftest import asgi_get, dom, one, opened_panel

HX = {"HX-Request": "true"}
GZIP = {"Accept-Encoding": "gzip"}
IDENTITY = {"Accept-Encoding": "identity"}

CASES = [
    ("page", "/?stage=zero2&gpus=16", {}),
    ("fragment", "/?stage=zero2&gpus=16", HX),
    ("embed", "/embed?stage=zero3&phase=4", {}),
    ("compare", "/compare?left=dp&right=zero3", {}),
    ("share", "/share?stage=zero2&gpus=16", HX),
    ("api", "/api/memory?gpus=64&capacity=80GB", {}),
    ("schema", "/openapi.json", {}),
]


@pytest.mark.parametrize(("name", "url", "headers"), CASES)
@pytest.mark.parametrize("encoding", [IDENTITY, GZIP])
def test_a_matching_if_none_match_gets_a_304(
    client: TestClient, name: str, url: str, headers: dict[str, str], encoding: dict[str, str]
) -> None:
    first = client.get(url, headers={**headers, **encoding})
    assert first.status_code == 200, name
    assert first.headers["cache-control"] == "no-cache"
    etag = first.headers["etag"]
    again = client.get(url, headers={**headers, **encoding, "If-None-Match": etag})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == etag
    # Another body's tag is no match.
    assert client.get(url, headers={**headers, **encoding, "If-None-Match": '"other"'}).status_code == 200


def test_the_page_and_its_fragment_and_both_encodings_have_their_own_etags(client: TestClient) -> None:
    url = "/?stage=zero1"
    tags = {client.get(url, headers={**h, **e}).headers["etag"] for h in ({}, HX) for e in (IDENTITY, GZIP)}
    assert len(tags) == 4
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
    with TestClient(create_app()) as one, TestClient(create_app()) as two:
        for encoding in (IDENTITY, GZIP):
            a, b = one.get(url, headers={**headers, **encoding}), two.get(url, headers={**headers, **encoding})
            assert a.content == b.content, name
            assert a.headers["etag"] == b.headers["etag"]
            assert a.headers.get("content-length") == b.headers.get("content-length")


def test_every_get_route_answers_head_with_the_headers_alone(client: TestClient) -> None:
    documented = [path for path, ops in client.get("/openapi.json").json()["paths"].items() if "get" in ops]
    assert len(documented) >= 4
    pages = ["/", "/embed", "/compare", "/measured", "/share", "/favicon.ico", "/openapi.json", "/static/app.css"]
    for path in [*documented, *pages]:
        got, head = client.get(path, headers=IDENTITY), client.head(path, headers=IDENTITY)
        assert head.status_code == got.status_code == 200, path
        assert head.content == b""
        assert head.headers.get("content-length") == got.headers.get("content-length"), path


async def _sized(scope: Scope, receive: Receive, send: Send) -> None:
    """An app whose body is as many bytes as its query asks."""
    if scope["type"] != "http":
        return
    size = int(scope["query_string"] or b"0")
    body = b"x" * size
    # Not a type that is compressed: each entry costs the cache what its body weighs.
    headers = [(b"content-type", b"application/octet-stream")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def test_the_cache_is_bounded_in_bytes_and_drops_the_least_recently_used() -> None:
    cache = ResponseCache(_sized, paths=frozenset({"/"}), max_bytes=20_000)
    client = TestClient(cache)
    for size in range(2000, 2400, 40):
        assert client.get(f"/?{size}", headers=IDENTITY).content == b"x" * size
    assert cache.used <= 20_000
    assert len(cache.entries) < 10
    # The first ones asked for are the ones gone; the newest stayed.
    misses = cache.misses
    client.get("/?2360", headers=IDENTITY)
    assert cache.misses == misses
    client.get("/?2000", headers=IDENTITY)
    assert cache.misses == misses + 1
    # One response larger than an eighth of the cache is served, not kept.
    assert client.get("/?5000", headers=IDENTITY).content == b"x" * 5000
    assert all(entry.size < 5000 for entry in cache.entries.values())


def test_a_page_is_kept_compressed_and_still_served_whole_to_a_client_without_gzip(client: TestClient) -> None:
    packed = client.get("/?stage=zero3&gpus=32", headers=GZIP)
    plain = client.get("/?stage=zero3&gpus=32", headers=IDENTITY)
    assert plain.content == packed.content  # httpx decodes the gzip body
    assert "content-encoding" not in plain.headers
    assert int(plain.headers["content-length"]) == len(plain.content)
    caches = [m for m in _middlewares(client) if isinstance(m, ResponseCache)]
    entry = next(e for e in caches[0].entries.values() if e.compressed and len(e.body) == len(plain.content))
    assert entry.size < len(plain.content) / 5


def _middlewares(client: TestClient) -> list[object]:
    """The app's middleware instances, outermost first."""
    found, app = [], client.app.middleware_stack  # type: ignore[attr-defined]
    while app is not None:
        found.append(app)
        app = getattr(app, "app", None)
    return found


def _render_counting(renders: list[str], shareable: bool) -> object:
    import asyncio

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        renders.append(scope["query_string"].decode())
        await asyncio.sleep(0.01)  # a render in progress, as the others arrive
        headers = [(b"content-type", b"text/plain")]
        if not shareable:
            headers.append((b"vary", b"Referer"))  # depends on more than the key: never given to another
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"drawn " + scope["query_string"]})

    return app


@pytest.mark.parametrize(("shareable", "renders_expected"), [(True, 1), (False, 10)])
def test_requests_for_a_page_being_rendered_wait_for_that_render(shareable: bool, renders_expected: int) -> None:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    renders: list[str] = []
    cache = ResponseCache(_render_counting(renders, shareable), paths=frozenset({"/"}))  # type: ignore[arg-type]

    async def call(query: bytes) -> bytes:
        body: bytes = (await asgi_get(cache, query.decode()))[1]["body"]
        return body

    async def room() -> list[bytes]:
        return await asyncio.gather(*(call(b"stage=zero3") for _ in range(10)), call(b"stage=dp"))

    with ThreadPoolExecutor(1) as pool:
        bodies = pool.submit(asyncio.run, room()).result(timeout=30)
    assert bodies == [b"drawn stage=zero3"] * 10 + [b"drawn stage=dp"]
    # A room asking for one new page at once costs one render, unless the page depends on more than its address.
    assert renders.count("stage=zero3") == renders_expected
    assert renders.count("stage=dp") == 1
    assert cache.flights == {}
