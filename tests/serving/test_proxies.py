"""`--forwarded-allow-ips`: a proxy on another machine is believed, and only the one named.

The proxy's address here is 127.0.0.2 (all of 127.0.0.0/8 is this machine): uvicorn's default trusts
127.0.0.1 alone, so a request from 127.0.0.2 stands for a proxy on another machine.
"""

from __future__ import annotations

import http.client
from collections.abc import Iterator
from http.cookies import SimpleCookie
from urllib.parse import urlencode, urlsplit

import pytest

from app.cli import parser
from tests.browser.conftest import serving, zero_bands_command
from tests.conftest import dom, one

PROXY = "127.0.0.2"
FORWARDED = {"X-Forwarded-Proto": "https", "X-Forwarded-For": "203.0.113.9", "Host": "zero.example.edu"}


@pytest.fixture(scope="module", params=["trusted", "default"])
def served(request: pytest.FixtureRequest) -> Iterator[tuple[str, bool]]:
    """The app, told to trust the proxy at 127.0.0.2 or left at uvicorn's default; and which."""
    trusted = request.param == "trusted"
    extra = ["--forwarded-allow-ips", f"{PROXY},10.0.0.0/8"] if trusted else []
    command = lambda port: [zero_bands_command(), "--port", str(port), "--workers", "1", *extra]  # noqa: E731
    with serving(command) as url:
        yield url, trusted


def _from_proxy(url: str, method: str, path: str, body: str | None = None, **headers: str) -> http.client.HTTPResponse:
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10, source_address=(PROXY, 0))
    connection.request(method, path, body=body, headers={**FORWARDED, **headers})
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


@pytest.mark.slow  # real uvicorn processes behind a proxy's address
def test_the_teachers_cookie_is_secure_only_behind_a_trusted_https_proxy(served: tuple[str, bool]) -> None:
    url, trusted = served
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    response = _from_proxy(url, "POST", "/live", urlencode({"view": "/?stage=zero3"}), **form)
    assert response.status == 303
    cookie = SimpleCookie(response.getheader("set-cookie") or "")["zb-teacher"]
    assert bool(cookie["secure"]) is trusted


@pytest.mark.slow  # real uvicorn processes behind a proxy's address
def test_the_embed_snippet_says_https_only_behind_a_trusted_https_proxy(served: tuple[str, bool]) -> None:
    url, trusted = served
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10, source_address=(PROXY, 0))
    connection.request("GET", "/share?stage=zero1", headers={**FORWARDED, "HX-Request": "true"})
    panel = dom(connection.getresponse().read().decode())
    connection.close()
    scheme = "https" if trusted else "http"
    assert str(one(panel, "#share-link")["href"]).startswith(f"{scheme}://zero.example.edu/")


@pytest.mark.parametrize(
    ("given", "taken"),
    [("10.0.0.5", True), ("10.0.0.0/24, 192.168.1.7", True), ("*", True), ("::1", True),
     ("proxy.example.edu", False), ("10.0.0.300", False), ("", False)],
)  # fmt: skip
def test_the_option_takes_addresses_and_networks_only(
    given: str, taken: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    if taken:
        assert parser().parse_args(["--forwarded-allow-ips", given]).forwarded_allow_ips == given
    else:
        with pytest.raises(SystemExit):
            parser().parse_args(["--forwarded-allow-ips", given])
        assert "is not an IP address or network" in capsys.readouterr().err
