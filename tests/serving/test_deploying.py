"""docs/deploying.md: its nginx set-up, run in front of the app, closes slow clients and passes the app's answers on.

uvicorn gives a client no deadline for its headers; the proxy the deploying guide shows does. Skipped
where nginx is not installed (apt-get install nginx-light).
"""

from __future__ import annotations

import re
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator

import pytest

from app.serving.config import Settings
from app.serving.security import security_headers
from app.web.config_view import MAX_CONFIG_BYTES, MAX_FORM_BYTES
from tests.browser.conftest import serving, zero_bands_command
from tests.conftest import dom, one
from tests.serving.clients import get, slowloris
from tests.serving.nginx import NGINX, blocks, free_port, running_nginx

HEADER_TIMEOUT = 5


@pytest.fixture(autouse=True)
def _nginx_installed() -> None:
    """The README's test line installs nginx-light: without it these tests fail, they do not skip."""
    if NGINX is None:
        pytest.fail("nginx is not installed: apt-get install nginx-light (the README's test line does)")


def _block(language: str) -> str:
    return blocks(language)[0]


def _free_port() -> int:
    return free_port()


def test_the_guide_sets_a_deadline_for_headers_in_both_proxies() -> None:
    assert re.search(rf"^\s*client_header_timeout {HEADER_TIMEOUT}s;", _block("nginx"), re.M)
    assert re.search(rf"^\s*read_header {HEADER_TIMEOUT}s$", _block("caddyfile"), re.M)


@pytest.fixture(scope="module")
def proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app, and nginx in front of it with the guide's server block; yields nginx's address."""
    prefix = tmp_path_factory.mktemp("nginx")
    port = _free_port()
    with serving(lambda app_port: [zero_bands_command(), "--port", str(app_port), "--workers", "1"]) as app_url:
        app_port = app_url.rpartition(":")[2]
        server = _block("nginx").replace("server 127.0.0.1:8000;", f"server 127.0.0.1:{app_port};")
        server = server.replace("listen 80;", f"listen 127.0.0.1:{port};")
        with running_nginx(prefix, server, f"http://127.0.0.1:{port}/api/stages"):
            yield f"http://127.0.0.1:{port}"


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
    return get(url, headers)[:3]


def test_the_apps_answers_pass_through_as_they_are(proxy: str) -> None:
    status, headers, body = _get(f"{proxy}/?stage=zero2", {"Accept-Encoding": "br"})
    assert status == 200
    assert headers["content-encoding"] == "br"
    assert int(headers["content-length"]) == len(body)
    assert set(headers) >= {k.lower() for k in security_headers(Settings())}
    again = _get(f"{proxy}/?stage=zero2", {"Accept-Encoding": "br", "If-None-Match": headers["etag"]})
    assert again[0] == 304


@pytest.mark.parametrize("path", ["/?stage=zero2", "/api/memory?gpus=0", "/no-such-page"])
def test_every_answer_through_the_proxy_tells_browsers_to_keep_to_https(proxy: str, path: str) -> None:
    assert _get(f"{proxy}{path}")[1]["strict-transport-security"] == "max-age=31536000"


def test_the_embed_snippet_names_the_address_people_see(proxy: str) -> None:
    # The proxy passes the Host on, so the app's absolute links are the proxy's, not its own.
    page = dom(_get(f"{proxy}/?stage=zero1", {"Host": "zero.example.edu"})[2].decode())
    href = str(one(page, "details#embed-this")["hx-get"])
    panel = dom(_get(f"{proxy}{href}", {"Host": "zero.example.edu", "HX-Request": "true"})[2].decode())
    assert str(one(panel, "#share-link")["href"]).startswith("http://zero.example.edu/")


def test_a_client_that_does_not_finish_its_headers_is_closed_and_slows_no_one(proxy: str) -> None:
    port = int(proxy.rpartition(":")[2])
    slow, silent = slowloris(port, 50)
    started = time.monotonic()
    # A byte now and then does not buy more time: the deadline counts from the start.
    for _ in range(4):
        time.sleep(1)
        for sock in slow:
            sock.sendall(b"x")
    assert _get(f"{proxy}/?stage=zero1")[0] == 200
    for sock in [*slow, silent]:
        sock.settimeout(HEADER_TIMEOUT + 3)
        reply = b""
        while chunk := sock.recv(4096):
            reply += chunk
        assert reply in {b""} or reply.startswith(b"HTTP/1.1 408")  # closed by the proxy
        sock.close()
    assert time.monotonic() - started < HEADER_TIMEOUT + 3


def test_the_proxy_lets_through_every_body_the_app_reads() -> None:
    found = re.search(r"^\s*client_max_body_size (\d+)k;", _block("nginx"), re.M)
    assert found
    assert int(found.group(1)) * 1024 == MAX_FORM_BYTES


def test_a_large_pasted_config_reaches_the_app_through_the_proxy(proxy: str) -> None:
    # 60 kB of config, percent-encoded to about 100 kB: nginx's 16k refused it before the app saw it.
    config = "{" + ",".join(f'"key{i}": 1' for i in range(4_800)) + "}"
    assert 55_000 < len(config) < MAX_CONFIG_BYTES
    form = urllib.parse.urlencode({"config": config}).encode()
    assert len(form) > 90_000
    request = urllib.request.Request(f"{proxy}/config?stage=zero2", data=form, method="POST")
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.status == 200
        assert "ZeRO Bands" in response.read().decode()
