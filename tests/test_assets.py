"""Static assets: minified, fingerprinted addresses, a year's caching, precompressed brotli and gzip, 304s and HEAD."""

from __future__ import annotations

import hashlib
import re

import pytest
from fastapi.testclient import TestClient
from starlette.datastructures import Headers

from app.assets import IMMUTABLE
from app.encodings import choose, decompress
from app.paths import STATIC_DIR
from tests.conftest import dom, served, unversioned

GZIP = {"Accept-Encoding": "gzip"}
BR = {"Accept-Encoding": "gzip, deflate, br, zstd"}
IDENTITY = {"Accept-Encoding": "identity"}


def _digest(name: str) -> str:
    return hashlib.sha256(served(name)).hexdigest()[:12]


def test_every_asset_the_pages_use_is_fingerprinted_and_kept_for_a_year(client: TestClient) -> None:
    urls: set[str] = set()
    for page in ["/", "/?theme=projector", "/embed", "/compare", "/measured", "/share"]:
        tree = dom(client.get(page).text)
        urls |= {str(t["src"]) for t in tree.select("script[src]")}
        urls |= {str(t["href"]) for t in tree.select("link[href]")}
    names = {unversioned(url).rpartition("/")[2] for url in urls}
    # htmx, the widget's scripts, the embed's, the icon, and the four stylesheets.
    assert names == {"htmx-2.0.11.min.js", "app.js", "embed-frame.js", "favicon.svg", "app.css", "projector.css",
                     "embed.css", "compact.css"}  # fmt: skip
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


@pytest.mark.parametrize(("headers", "coding"), [(GZIP, "gzip"), (BR, "br")])
def test_each_coding_is_made_in_advance_and_has_its_own_etag(
    client: TestClient, headers: dict[str, str], coding: str
) -> None:
    plain = client.get("/static/app.css", headers=IDENTITY)
    packed = client.get("/static/app.css", headers=headers)
    assert "content-encoding" not in plain.headers
    assert packed.headers["content-encoding"] == coding
    # httpx decodes the body: it is the served file again, from fewer bytes on the wire.
    assert packed.content == plain.content == served("app.css")
    assert int(packed.headers["content-length"]) < len(plain.content) / 3
    assert plain.headers["etag"] == f'"{_digest("app.css")}"'
    assert packed.headers["etag"] == f'"{_digest("app.css")}-{coding}"'
    assert packed.headers["vary"] == "Accept-Encoding"


def test_brotli_is_smaller_than_gzip_on_htmx(client: TestClient) -> None:
    # Why brotli is worth a dependency: on the largest file of the first load.
    name = next(p.name for p in STATIC_DIR.glob("htmx-*.min.js"))
    sizes = {
        c: int(client.get(f"/static/{name}", headers=h).headers["content-length"])
        for c, h in [("gz", GZIP), ("br", BR)]
    }
    assert sizes["br"] < 0.95 * sizes["gz"]


@pytest.mark.parametrize("headers", [IDENTITY, GZIP, BR])
def test_a_matching_etag_gets_304_without_a_body(client: TestClient, headers: dict[str, str]) -> None:
    first = client.get("/static/step.js", headers=headers)
    again = client.get("/static/step.js", headers={**headers, "If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == first.headers["etag"]
    # Another form's tag does not match this one.
    tags = {f'"{_digest("step.js")}{suffix}"' for suffix in ("", "-gzip", "-br")}
    for other in tags - {first.headers["etag"]}:
        assert client.get("/static/step.js", headers={**headers, "If-None-Match": other}).status_code == 200


def test_head_gives_the_headers_alone(client: TestClient) -> None:
    response = client.head("/static/app.css", headers=IDENTITY)
    assert response.status_code == 200
    assert response.content == b""
    assert int(response.headers["content-length"]) == len(served("app.css"))


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


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        ("gzip", "gzip"),
        ("gzip, deflate, br, zstd", "br"),
        ("br;q=0, gzip;q=0.8", "gzip"),
        ("*", "br"),
        ("*, br;q=0", "gzip"),
        ("gzip;q=0", None),
        ("identity", None),
        ("", None),
    ],
)
def test_accept_encoding(header: str, expected: str | None) -> None:
    assert choose(Headers({"accept-encoding": header})) == expected


def test_the_compressed_bodies_are_the_same_bytes_every_time() -> None:
    # gzip's mtime=0, brotli's no timestamp: two workers, or two starts, give byte-identical bodies and one ETag.
    from app.assets import load

    first, second = load(STATIC_DIR)["app.css"], load(STATIC_DIR)["app.css"]
    assert first.forms == second.forms
    assert set(first.forms) == {"br", "gzip"}
    for coding, body in first.forms.items():
        assert decompress(body, coding) == served("app.css")


def _comments(text: str) -> str:
    return re.sub(r"/\*.*?\*/", "", text, flags=re.S)


@pytest.mark.parametrize("name", ["app.css", "step.js", "tools.js"])
def test_minifying_drops_comments_and_spaces_and_keeps_every_rule(name: str) -> None:
    source = (STATIC_DIR / name).read_text()
    minified_text = served(name).decode()
    assert len(minified_text) < 0.8 * len(source)
    assert "/*" not in minified_text
    assert "\n//" not in minified_text
    # Every rule or block survives: the braces outside comments are the same in number.
    assert minified_text.count("{") == _comments(source).count("{") > 20


def test_the_widget_scripts_are_one_file_of_each_module_in_order(client: TestClient) -> None:
    from app.assets import BUNDLES

    bundle = client.get("/static/app.js", headers=IDENTITY).content
    parts = [served(name) for name in BUNDLES["app.js"]]
    # Each module whole, in the order the page needs them (swap.js before the rest hooks htmx's swaps).
    assert [bundle.find(part.rstrip(b";\n")) for part in parts] == sorted(bundle.find(p.rstrip(b";\n")) for p in parts)
    assert all(bundle.find(part.rstrip(b";\n")) >= 0 for part in parts)
    assert bundle.startswith(b'"use strict";')
