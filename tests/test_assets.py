"""Static assets: fingerprinted addresses, a year's caching, precompressed gzip, 304s and HEAD."""

from __future__ import annotations

import gzip
import hashlib

import pytest
from fastapi.testclient import TestClient

from app.assets import IMMUTABLE, accepts_gzip
from app.paths import STATIC_DIR
from tests.conftest import dom

GZIP = {"Accept-Encoding": "gzip"}
IDENTITY = {"Accept-Encoding": "identity"}


def _digest(name: str) -> str:
    return hashlib.sha256((STATIC_DIR / name).read_bytes()).hexdigest()[:12]


def test_every_asset_the_page_uses_is_fingerprinted_and_kept_for_a_year(client: TestClient) -> None:
    tree = dom(client.get("/").text)
    urls = [str(t["src"]) for t in tree.select("script[src]")] + [str(t["href"]) for t in tree.select("link[href]")]
    assert len(urls) >= 7
    for url in urls:
        name = url.partition("?")[0].rpartition("/")[2]
        assert url.endswith(f"?v={_digest(name)}"), url
        response = client.get(url, headers=IDENTITY)
        assert response.status_code == 200
        assert response.headers["cache-control"] == IMMUTABLE
        assert response.content == (STATIC_DIR / name).read_bytes()


@pytest.mark.parametrize("query", ["", "?v=000000000000"])
def test_an_address_without_the_current_fingerprint_must_be_revalidated(client: TestClient, query: str) -> None:
    response = client.get(f"/static/app.css{query}")
    assert response.status_code == 200
    assert response.headers["cache-control"] == "no-cache"


def test_gzip_is_made_in_advance_and_has_its_own_etag(client: TestClient) -> None:
    plain = client.get("/static/app.css", headers=IDENTITY)
    packed = client.get("/static/app.css", headers=GZIP)
    assert "content-encoding" not in plain.headers
    assert packed.headers["content-encoding"] == "gzip"
    # httpx decodes the body: it is the file again, from fewer bytes on the wire.
    assert packed.content == plain.content == (STATIC_DIR / "app.css").read_bytes()
    assert int(packed.headers["content-length"]) < len(plain.content) / 3
    assert plain.headers["etag"] == f'"{_digest("app.css")}"'
    assert packed.headers["etag"] == f'"{_digest("app.css")}-gz"'
    assert packed.headers["vary"] == "Accept-Encoding"


@pytest.mark.parametrize("headers", [IDENTITY, GZIP])
def test_a_matching_etag_gets_304_without_a_body(client: TestClient, headers: dict[str, str]) -> None:
    first = client.get("/static/grid.js", headers=headers)
    again = client.get("/static/grid.js", headers={**headers, "If-None-Match": first.headers["etag"]})
    assert again.status_code == 304
    assert again.content == b""
    assert again.headers["etag"] == first.headers["etag"]
    # The other form's tag does not match this one.
    other = first.headers["etag"].removesuffix('-gz"') + ('"' if first.headers["etag"].endswith('-gz"') else '-gz"')
    assert client.get("/static/grid.js", headers={**headers, "If-None-Match": other}).status_code == 200


def test_head_gives_the_headers_alone(client: TestClient) -> None:
    response = client.head("/static/app.css", headers=IDENTITY)
    assert response.status_code == 200
    assert response.content == b""
    assert int(response.headers["content-length"]) == (STATIC_DIR / "app.css").stat().st_size


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
    [("gzip", True), ("br, gzip;q=0.8", True), ("*", True), ("gzip;q=0", False), ("identity", False), ("", False)],
)
def test_accept_encoding(header: str, expected: bool) -> None:
    from starlette.datastructures import Headers

    assert accepts_gzip(Headers({"accept-encoding": header})) is expected


def test_the_gzip_body_is_the_same_bytes_every_time() -> None:
    # mtime=0 in the header: two workers, or two starts, give byte-identical bodies and one ETag.
    from app.assets import load

    first, second = load(STATIC_DIR)["app.css"], load(STATIC_DIR)["app.css"]
    assert first.gzipped == second.gzipped
    assert first.gzipped is not None
    assert gzip.decompress(first.gzipped) == (STATIC_DIR / "app.css").read_bytes()
