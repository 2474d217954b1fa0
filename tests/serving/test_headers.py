"""app/serving/headers.py: a key header sent twice, or a Host no browser sends, is refused before the cache keeps it."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.serving.cache import KEY_HEADERS
from app.serving.config import ALLOWED_HOSTS_ENV, Settings, SettingsError
from app.serving.headers import NOT_A_HOST
from app.serving.security import security_headers
from tests.conftest import dom, one

Headers = list[tuple[str, str]]


def _page(client: TestClient, url: str, headers: Headers) -> tuple[str, bool, str]:
    """What a person's browser would draw: the page's stylesheet, whether it came brotli'd, the snippet's host."""
    response = client.get(url, headers=headers)
    assert response.status_code == 200
    tree = dom(response.text)
    sheet = tree.select_one("link[rel=stylesheet]")
    link = tree.select_one("#share-link")
    return (
        str(sheet["href"]) if sheet else "",
        response.headers.get("content-encoding") == "br",
        (str(link["href"]).split("/")[2] if link else ""),
    )


IDENTITY = ("Accept-Encoding", "identity")
# Each header the cache keys on, sent twice: the cache kept the last value and the app read the first.
# The normal request after it sends the duplicate's last value, so it would be answered from that key:
# a bare fragment as the page, brotli to a client that takes none, a snippet naming another site.
DUPLICATES = [
    ("/?stage=zero2", [IDENTITY, ("HX-Request", "true"), ("HX-Request", "")], [IDENTITY, ("HX-Request", "")]),
    ("/?stage=zero3", [("Accept-Encoding", "br"), IDENTITY], [IDENTITY]),
    ("/share?stage=zero1", [IDENTITY, ("Host", "elsewhere.example"), ("Host", "testserver")], [IDENTITY]),
    ("/?stage=dp", [IDENTITY, ("HX-History-Restore-Request", "true"), ("HX-History-Restore-Request", "")],
     [IDENTITY]),
    ("/?stage=zero1", [IDENTITY, ("ZB-History", "replace"), ("ZB-History", "")], [IDENTITY]),
    ("/?stage=zero1", [IDENTITY, ("ZB-Form-First", "1"), ("ZB-Form-First", "")], [IDENTITY]),
]  # fmt: skip


@pytest.mark.parametrize(("url", "twice", "normal"), DUPLICATES)
def test_a_key_header_sent_twice_is_refused_and_the_next_client_gets_the_page(
    url: str, twice: Headers, normal: Headers
) -> None:
    name = next(n for n, _ in twice if sum(m == n for m, _ in twice) > 1)
    with TestClient(create_app()) as client:
        refused = client.get(url, headers=twice)
        assert refused.status_code == 400
        assert f"its {name} header more than once" in one(dom(refused.text), "p").text
        for header, value in security_headers(Settings()).items():
            assert refused.headers[header] == value
        stylesheet, brotli, host = _page(client, url, normal)
    assert stylesheet.startswith("/static/")
    assert not brotli
    assert host in {"", "testserver"}


def test_every_key_header_of_the_cache_is_checked() -> None:
    checked = {name.lower() for _, twice, _ in DUPLICATES for name, _ in twice if name != "Accept-Encoding"}
    assert checked | {"accept-encoding"} == {name.decode() for name in KEY_HEADERS}


def test_a_header_sent_twice_under_the_api_is_told_in_json(client: TestClient) -> None:
    response = client.get("/api/stages", headers=[("Accept-Encoding", "gzip"), ("Accept-Encoding", "br")])
    assert response.status_code == 400
    assert "more than once" in json.loads(response.text)["message"]


def test_a_header_the_cache_does_not_key_on_may_come_twice(client: TestClient) -> None:
    response = client.get("/?stage=zero1", headers=[("Accept", "text/html"), ("Accept", "*/*")])
    assert response.status_code == 200


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("class.example", 200),
        ("class.example:8000", 200),
        ("10.0.0.7:8000", 200),
        ("[::1]:8000", 200),
        ("zero_bands:8000", 200),  # a container's name, as a proxy in front of it may pass it on
        ("h" * 255, 200),
        ("h" * 256, 400),
        ("h" * 2_400, 400),
        ("a b", 400),
        ("class.example:8000:9", 400),
        ("<script>", 400),
        ("class.example/path", 400),
        ("", 400),
    ],
)
def test_with_no_hosts_named_any_host_name_is_taken_and_nothing_else(
    client: TestClient, host: str, status: int
) -> None:
    response = client.get("/share?stage=zero1", headers={"Host": host, "Accept-Encoding": "identity"})
    assert response.status_code == status
    if status == 400:
        assert one(dom(response.text), "h1").text == "Not this server's host name"
        assert one(dom(response.text), "p").text == NOT_A_HOST  # the host is not repeated
    else:
        assert str(one(dom(response.text), "#share-link")["href"]).startswith(f"http://{host}/")


ALLOWED = {ALLOWED_HOSTS_ENV: "zero.example.edu, *.school.example"}


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("zero.example.edu", 200),
        ("ZERO.Example.edu:8443", 200),
        ("hall.school.example", 200),
        ("a.hall.school.example", 200),
        ("school.example", 400),  # `*.` names the names below, not the domain itself
        ("evil.example", 400),
        ("zero.example.edu.evil.example", 400),
        ("evilschool.example", 400),
        ("127.0.0.1:8000", 400),
    ],
)
@pytest.mark.parametrize("path", ["/share?stage=zero1", "/api/stages"])
def test_with_hosts_named_another_host_is_refused(host: str, status: int, path: str) -> None:
    with TestClient(create_app(Settings.from_env(ALLOWED))) as client:
        response = client.get(path, headers={"Host": host})
    assert response.status_code == status
    if status == 400 and path.startswith("/api/"):
        assert "does not answer to that host name" in json.loads(response.text)["message"]
    elif status == 400:
        assert "does not answer to that host name" in one(dom(response.text), "p").text


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("", ()),
        ("zero.example.edu", ("zero.example.edu",)),
        (" Zero.Example.edu , *.school.example,", ("zero.example.edu", "*.school.example")),
        ("192.168.1.20,[::1]", ("192.168.1.20", "[::1]")),
    ],
)
def test_the_allowed_hosts_are_a_setting(value: str, kept: tuple[str, ...]) -> None:
    assert Settings.from_env({ALLOWED_HOSTS_ENV: value}).allowed_hosts == kept


@pytest.mark.parametrize("value", ["zero.example.edu:8000", "https://zero.example.edu", "*", "*.", "a b", "x/y"])
def test_allowed_hosts_that_are_no_host_names_are_refused(value: str) -> None:
    with pytest.raises(SettingsError, match=ALLOWED_HOSTS_ENV):
        Settings.from_env({ALLOWED_HOSTS_ENV: value})
