from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from app.serving.config import FRAME_ANCESTORS_ENV, Settings, SettingsError

PATHS = ["/", "/?stage=zero3", "/?stage=nope", "/api/stages", "/api/layout?stage=nope", "/static/app.css", "/nowhere"]


def _directives(header: str) -> dict[str, str]:
    return {part.split()[0]: " ".join(part.split()[1:]) for part in header.split(";") if part.strip()}


@pytest.mark.parametrize("path", PATHS)
def test_every_response_carries_the_headers(client: TestClient, path: str) -> None:
    headers = client.get(path).headers
    csp = _directives(headers["content-security-policy"])
    assert csp["script-src"] == "'self'"
    assert csp["style-src"] == "'self'"
    assert csp["object-src"] == "'none'"
    assert csp["default-src"] == "'self'"
    assert csp["frame-ancestors"] == "* file:"
    assert "unsafe-inline" not in headers["content-security-policy"]
    assert "unsafe-eval" not in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"
    assert "x-frame-options" not in headers
    assert "server" not in headers


@pytest.mark.parametrize(
    "value", ["'self' https://*.example.edu", "https://courses.example.org:8443", "'none'", "https:", "*"]
)
def test_frame_ancestors_from_the_environment(value: str) -> None:
    settings = Settings.from_env({FRAME_ANCESTORS_ENV: value})
    response = TestClient(create_app(settings)).get("/")
    assert _directives(response.headers["content-security-policy"])["frame-ancestors"] == value


def test_frame_ancestors_defaults_to_anywhere() -> None:
    # `*` is any web page; a slide deck opened from disk is a file: page, which `*` does not match.
    assert Settings.from_env({}).frame_ancestors == "* file:"


@pytest.mark.parametrize(
    "value",
    [
        "", "https://a.example; script-src *", "https://a.example, *", "'unsafe-inline'", "'none' https:", "a b\nc",
        "javascript:", "DATA:", "https://a.example:99999", "https://a.example:0", "https://" + "a" * 3000 + ".example",
    ],
)  # fmt: skip
def test_frame_ancestors_that_would_break_the_policy_are_refused(value: str) -> None:
    with pytest.raises(SettingsError, match=FRAME_ANCESTORS_ENV):
        Settings.from_env({FRAME_ANCESTORS_ENV: value})


def _fails() -> None:
    raise RuntimeError("a bug")


@pytest.mark.parametrize(("path", "kind"), [("/failing", "text/html"), ("/api/failing", "application/json")])
def test_a_failure_is_a_500_with_the_headers(client: TestClient, path: str, kind: str) -> None:
    app = create_app()
    app.add_api_route(path, _fails)
    response = TestClient(app, raise_server_exceptions=False).get(path)
    assert response.status_code == 500
    assert response.headers["content-type"].startswith(kind)
    assert "failed to answer" in response.text
    assert "a bug" not in response.text
    page = client.get("/").headers
    for name in ("content-security-policy", "x-content-type-options", "referrer-policy",
                 "cross-origin-opener-policy", "permissions-policy"):  # fmt: skip
        assert response.headers[name] == page[name], name
    assert "server" not in response.headers
