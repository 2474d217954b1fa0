"""A lecture over HTTPS: docs/deploying.md's TLS server block in front of `zero-bands`, driven in Chromium.

Every follower page over https was a 500 (Starlette refuses a Partitioned cookie below Python 3.14). Here the
guide's nginx block terminates TLS with a certificate made by `openssl`; a teacher starts a session from the
page, a phone follows `/live/CODE`, another screen `/embed?live=CODE`, both follow a move, and the phone
answers the teacher's question. No response is a 500, and the follower's cookie is Secure, SameSite=None
and Partitioned.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable, Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, Response, expect

from app.web.live_view import VOTER
from tests.browser.conftest import serving, zero_bands_command
from tests.browser.test_live_browser import DESKTOP, PHONE, Screen, converge, start_from_page, teacher_moves
from tests.browser.test_poll_browser import RIGHT, answered, tap
from tests.serving.nginx import blocks, free_port, running_nginx

pytestmark = pytest.mark.slow


def _tls_block() -> str:
    """The guide's TLS server block (and its redirect from plain HTTP)."""
    found = [block for block in blocks("nginx") if re.search(r"^\s*listen 443 ssl;", block, re.M)]
    assert len(found) == 1, "docs/deploying.md should show one nginx block that listens with TLS"
    return found[0]


def _directives(block: str) -> set[str]:
    return {line.strip() for line in block.splitlines() if line.strip().endswith(";")}


def test_the_tls_block_is_the_plain_one_with_tls() -> None:
    # Every line of the plain block's server (its deadlines, body limit and proxy headers) is in the TLS one.
    plain = blocks("nginx")[0]
    server = plain[plain.index("server {") :]
    assert _directives(server) - {"listen 80;", "server_name _;"} <= _directives(_tls_block())


@pytest.fixture(scope="module")
def https(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The app behind nginx with the guide's TLS block and a self-signed certificate; yields https://127.0.0.1:PORT."""
    prefix = tmp_path_factory.mktemp("nginx-tls")
    cert, key = prefix / "cert.pem", prefix / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    port, plain_port = free_port(), free_port()
    with serving(lambda app_port: [zero_bands_command(), "--port", str(app_port), "--workers", "1",
                                   "--allowed-hosts", "127.0.0.1"]) as app_url:  # fmt: skip
        upstream = blocks("nginx")[0]
        upstream = upstream[: upstream.index("server {")].replace("127.0.0.1:8000", app_url.removeprefix("http://"))
        server = _tls_block().replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
        server = server.replace("listen 80;", f"listen 127.0.0.1:{plain_port};")
        server = re.sub(r"ssl_certificate (\S+);", f"ssl_certificate {cert};", server)
        server = re.sub(r"ssl_certificate_key (\S+);", f"ssl_certificate_key {key};", server)
        with running_nginx(prefix, upstream + server, f"https://127.0.0.1:{port}/api/stages"):
            yield f"https://127.0.0.1:{port}"


def _recording(page: Page) -> list[Response]:
    seen: list[Response] = []
    page.on("response", lambda response: seen.append(response))
    return seen


def _voter_cookies(responses: list[Response]) -> list[set[str]]:
    """The attributes of each follower's token the server set, as sent: one set per Set-Cookie."""
    found = []
    for response in responses:
        if "/live/" in response.url or "/embed" in response.url:
            for value in response.header_values("set-cookie"):
                if value.startswith(f"{VOTER}="):
                    found.append({part.strip().lower() for part in value.split(";")[1:]})
    return found


def test_a_lecture_over_https_follows_and_votes_with_no_500(
    https: str, contexts: Callable[..., BrowserContext]
) -> None:
    teacher = contexts(viewport=DESKTOP, ignore_https_errors=True).new_page()
    phone_context = contexts(viewport=PHONE, is_mobile=True, has_touch=True, ignore_https_errors=True)
    phone, embed = phone_context.new_page(), contexts(viewport=DESKTOP, ignore_https_errors=True).new_page()
    responses = [_recording(screen) for screen in (teacher, phone, embed)]
    code = start_from_page(teacher, https, "/?stage=zero2")
    # The join address the class is shown names the proxy's port ($http_host), not the bare host.
    expect(teacher.locator(".live-url").first).to_contain_text(f"{https}/live")
    assert phone.goto(f"{https}/live/{code}") is not None
    assert embed.goto(f"{https}/embed?live={code}") is not None
    followers: dict[str, Screen] = {"phone": phone, "embed": embed}
    converge(teacher, followers)
    teacher_moves(teacher, lambda: teacher.click("#switch-zero3"))
    assert converge(teacher, followers)["stage"] == "zero3"

    # The teacher asks the class; the phone answers; the teacher's count goes to 1.
    teacher.click("#live-ask summary")
    teacher.select_option("select[name=card]", "1")
    teacher.click("#ask-cells")
    tap(phone, RIGHT)
    answered(teacher, 1)

    statuses = [(r.status, r.url) for seen in responses for r in seen]
    assert [s for s in statuses if s[0] >= 500] == []
    assert any(url == f"{https}/live/{code}" and status == 200 for status, url in statuses)
    assert any(url == f"{https}/embed?live={code}" and status == 200 for status, url in statuses)
    # The token as the server sent it, to the phone and to the embed: each once, marked for a course page's iframe.
    cookies = _voter_cookies(responses[1]) + _voter_cookies(responses[2])
    assert len(cookies) == 2
    for attributes in cookies:
        assert {"secure", "httponly", "partitioned", "samesite=none"} <= attributes
    # ... and as Chromium keeps it: Secure, SameSite=None, in a partition of its own.
    kept = [c for c in phone_context.cookies() if c.get("name") == VOTER]
    assert len(kept) == 1
    assert kept[0].get("secure") is True
    assert kept[0].get("sameSite") == "None"
    assert kept[0].get("partitionKey")
    expect(phone.locator("#live-question .poll-own strong")).to_be_visible()
