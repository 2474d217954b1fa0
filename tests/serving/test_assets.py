"""Static assets: minified, fingerprinted addresses, a year's caching, brotli and gzip, 304s and HEAD."""

from __future__ import annotations

import hashlib
import re

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.paths import STATIC_DIR
from app.serving.assets import BUNDLES, IMMUTABLE
from tests.conftest import dom, one, served, unversioned

GZIP = {"Accept-Encoding": "gzip"}
BR = {"Accept-Encoding": "gzip, deflate, br, zstd"}
IDENTITY = {"Accept-Encoding": "identity"}


def _digest(name: str) -> str:
    return hashlib.sha256(served(name)).hexdigest()[:12]


def _wire(client: TestClient, url: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    """Status, headers and the body as sent, before the client undoes its content coding."""
    with client.stream("GET", url, headers=headers) as response:
        return response.status_code, dict(response.headers), b"".join(response.iter_raw())


def test_every_asset_the_pages_use_is_fingerprinted_and_kept_for_a_year(client: TestClient) -> None:
    urls: set[str] = set()
    for page in ["/", "/?theme=projector", "/embed", "/compare", "/measured", "/share"]:
        tree = dom(client.get(page).text)
        urls |= {str(t["src"]) for t in tree.select("script[src]")}
        urls |= {str(t["href"]) for t in tree.select("link[href]")}
    names = {unversioned(url).rpartition("/")[2] for url in urls}
    # htmx and idiomorph, the widget's scripts, the embed's, the icon, and the four stylesheets.
    scripts = {"htmx-2.0.11.min.js", "idiomorph-ext-0.8.0.min.js", "app.js", "embed-frame.js"}
    assert names == scripts | {"favicon.svg", "app.css", "projector.css", "embed.css", "compact.css"}
    for url in sorted(urls):
        name = url.partition("?")[0].rpartition("/")[2]
        assert url.endswith(f"?v={_digest(name)}"), url
        response = client.get(url, headers=IDENTITY)
        assert response.status_code == 200
        assert response.headers["cache-control"] == IMMUTABLE
        assert response.content == served(name)


@pytest.mark.parametrize("query", ["", "?v=000000000000"])
def test_an_address_without_the_current_fingerprint_must_be_revalidated(client: TestClient, query: str) -> None:
    response = client.get(f"/static/app.css{query}")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-cache"
    assert response.content == served("app.css")


@pytest.mark.parametrize(("headers", "coding"), [(GZIP, "gzip"), (BR, "br")])
def test_each_coding_is_sent_compressed_with_its_own_etag(
    client: TestClient, headers: dict[str, str], coding: str
) -> None:
    _, plain_headers, plain = _wire(client, "/static/app.css", IDENTITY)
    _, packed_headers, packed = _wire(client, "/static/app.css", headers)
    assert "content-encoding" not in plain_headers
    assert plain == served("app.css")
    assert packed_headers["content-encoding"] == coding
    assert int(packed_headers["content-length"]) == len(packed) < len(plain) / 4
    # httpx undoes the coding: it is the served file again, from fewer bytes on the wire.
    assert client.get("/static/app.css", headers=headers).content == served("app.css")
    assert packed_headers["etag"] != plain_headers["etag"]
    assert "Accept-Encoding" in packed_headers["vary"]


def test_a_client_that_takes_no_coding_we_make_gets_the_file_as_it_is(client: TestClient) -> None:
    for accepted in ["identity", "", "deflate", "zstd"]:
        status, headers, body = _wire(client, "/static/app.css", {"Accept-Encoding": accepted})
        assert (status, headers.get("content-encoding"), body) == (200, None, served("app.css")), accepted


def test_the_static_files_are_sent_at_brotlis_densest(client: TestClient) -> None:
    # Why they are compressed apart from the pages: on the largest file of the first load, brotli
    # made once at its densest beats both gzip and the quality used for a page made on a click.
    import brotli

    name = next(p.name for p in STATIC_DIR.glob("htmx-*.min.js"))
    sizes = {coding: len(_wire(client, f"/static/{name}", h)[2]) for coding, h in [("gzip", GZIP), ("br", BR)]}
    assert sizes["br"] < 0.95 * sizes["gzip"]
    assert sizes["br"] < 0.95 * len(brotli.compress(served(name), quality=5))


@pytest.mark.parametrize("headers", [IDENTITY, GZIP, BR])
def test_a_matching_etag_gets_304_without_a_body(client: TestClient, headers: dict[str, str]) -> None:
    first = client.get("/static/step.js", headers=headers)
    again = client.get("/static/step.js", headers={**headers, "If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == first.headers["etag"]
    # Another coding's tag does not match this one.
    tags = {client.get("/static/step.js", headers=h).headers["etag"] for h in (IDENTITY, GZIP, BR)}
    assert len(tags) == 3
    for other in tags - {first.headers["etag"]}:
        assert client.get("/static/step.js", headers={**headers, "If-None-Match": other}).status_code == 200


def test_two_workers_send_the_same_bytes_under_the_same_etag() -> None:
    # Each worker compresses on its own: the bytes, and so the tag a browser revalidates with, agree.
    with TestClient(create_app()) as one, TestClient(create_app()) as two:
        for headers in (IDENTITY, GZIP, BR):
            a, b = _wire(one, "/static/app.css", headers), _wire(two, "/static/app.css", headers)
            assert a[2] == b[2]
            assert a[1]["etag"] == b[1]["etag"]


def test_head_gives_the_headers_alone(client: TestClient) -> None:
    for headers in (IDENTITY, BR):
        got, head = client.get("/static/app.css", headers=headers), client.head("/static/app.css", headers=headers)
        assert head.status_code == 200
        assert head.content == b""
        assert head.headers["content-length"] == got.headers["content-length"]
        assert head.headers["etag"] == got.headers["etag"]


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/static", 404),
        ("GET", "/static/", 404),
        ("GET", "/static/nothing.css", 404),
        ("GET", "/static/../app/main.py", 404),
        ("POST", "/static/app.css", 405),
    ],
)
def test_what_is_not_an_asset(client: TestClient, method: str, path: str, status: int) -> None:
    response = client.request(method, path, headers={"Host": "evil.example"}, follow_redirects=False)
    assert response.status_code == status
    assert "location" not in response.headers


def _comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


@pytest.mark.parametrize("name", ["app.css", "step.js", "tools.js"])
def test_minifying_drops_comments_and_spaces_and_keeps_every_rule(client: TestClient, name: str) -> None:
    source = (STATIC_DIR / name).read_text()
    minified_text = client.get(f"/static/{name}", headers=IDENTITY).text
    assert len(minified_text) < 0.8 * len(source)
    assert "/*" not in minified_text
    assert "\n//" not in minified_text
    # Every rule or block survives: the braces outside comments are the same in number.
    assert minified_text.count("{") == _comments(source).count("{") > 20


def test_the_widget_scripts_are_one_file_of_each_module_in_order(client: TestClient) -> None:
    bundle = client.get("/static/app.js", headers=IDENTITY).content
    parts = [client.get(f"/static/{name}", headers=IDENTITY).content.rstrip(b";\n") for name in BUNDLES["app.js"]]
    # Each module whole, in the order the page needs them (swap.js before the rest hooks htmx's swaps).
    found = [bundle.find(part) for part in parts]
    assert all(at >= 0 for at in found)
    assert found == sorted(found)
    assert bundle.startswith(b'"use strict";')


def _linked(client: TestClient, url: str) -> set[str]:
    """The static files a page loads, by name."""
    tree = dom(client.get(url).text)
    urls = {str(t["src"]) for t in tree.select("script[src]")} | {str(t["href"]) for t in tree.select("link[href]")}
    return {unversioned(u).rpartition("/")[2] for u in urls if "/static/" in u}


def test_a_live_sessions_own_files_load_on_its_pages_only(client: TestClient) -> None:
    # live.js, live.css and poll.css are a live session's: every other first load goes without them
    # (docs/performance.md); poll.css comes with a predict-first question too (its own link).
    started = client.post("/live", data={"view": "/?stage=zero1"}, follow_redirects=False)
    assert started.status_code == 303
    teacher = _linked(client, started.headers["location"])
    assert {"live.js", "live.css", "poll.css", "app.js", "app.css"} <= teacher
    assert "live.css" in _linked(client, "/live")  # the start page: its join and start forms
    for page in ["/", "/?theme=projector", "/embed", "/compare", "/share"]:
        assert not {"live.js", "live.css", "poll.css"} & _linked(client, page), page
    assert {"poll.css", "predict.css"} <= _linked(client, "/predict?stage=zero1&to=zero2")
    # The bundle no longer holds live.js, which uses the bundle's `byId`: it is loaded after it.
    assert "live.js" not in BUNDLES["app.js"]
    tree = dom(client.get(started.headers["location"]).text)
    order = [unversioned(str(s["src"])).rpartition("/")[2] for s in tree.select("script[src]")]
    assert order.index("app.js") < order.index("live.js")


@pytest.mark.parametrize(("name", "served_as"), [("favicon.svg", "br"), ("app.css", "br"), ("keys.html", "br")])
def test_small_static_files_are_compressed_too(client: TestClient, name: str, served_as: str) -> None:
    # Each is compressed once and kept: the 342-byte icon of every first load travels in about 150 B.
    status, headers, body = _wire(client, f"/static/{name}", BR)
    assert (status, headers.get("content-encoding")) == (200, served_as)
    assert len(body) < len(served(name))


def test_the_words_come_when_their_fold_is_opened(client: TestClient) -> None:
    # The glossary is static/words.html, fetched on the fold's first toggle (a link without JavaScript):
    # the page's first load carries only its summary and the run's own P.
    fold = one(dom(client.get("/?model=llama-3-8b").text), "details#words")
    slot = one(fold, "#words-slot")
    href = str(slot["hx-get"])
    assert (slot["hx-trigger"], slot["hx-swap"]) == ("toggle once from:closest details", "outerHTML")
    assert str(one(slot, "a")["href"]) == href
    assert "Here P is 8.03B weights." in fold.text
    words = dom(client.get(href).text)
    terms = [dt.text for dt in words.select("dl#words-list dt")]
    assert terms[:4] == ["P", "All-reduce", "Reduce-scatter", "All-gather"]
    assert "Gather, compute, discard" in terms
