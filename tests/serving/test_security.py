from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.routing import Mount

from app.main import create_app
from app.serving.config import FRAME_ANCESTORS_ENV, Settings, SettingsError

# Each path, and where it may be framed by default: the embed (a follower's too, and its errors) anywhere;
# the rest, the teacher's page and the live routes above all, by this origin only (no click-jacking).
FRAMED = [
    ("/", "'self'"),
    ("/?stage=zero3", "'self'"),
    ("/?stage=nope", "'self'"),
    ("/api/stages", "'self'"),
    ("/api/layout?stage=nope", "'self'"),
    ("/static/app.css", "'self'"),
    ("/static/embed.js", "'self'"),  # loaded by the course page's script tag, never framed
    ("/nowhere", "'self'"),
    ("/share?stage=zero1", "'self'"),
    ("/live", "'self'"),
    ("/live/NOPE12", "'self'"),
    ("/live/NOPE12/teach", "'self'"),
    ("/embed?stage=zero2", "* file:"),
    ("/embed?stage=nope", "* file:"),
    ("/embed?live=NOPE12", "* file:"),
]
PATHS = [path for path, _ in FRAMED]


def _directives(header: str) -> dict[str, str]:
    return {part.split()[0]: " ".join(part.split()[1:]) for part in header.split(";") if part.strip()}


@pytest.mark.parametrize(("path", "framed_by"), FRAMED)
def test_every_response_carries_the_headers(client: TestClient, path: str, framed_by: str) -> None:
    headers = client.get(path).headers
    csp = _directives(headers["content-security-policy"])
    assert csp["script-src"] == "'self'"
    assert csp["style-src"] == "'self'"
    assert csp["object-src"] == "'none'"
    assert csp["default-src"] == "'self'"
    assert csp["frame-ancestors"] == framed_by
    assert "unsafe-inline" not in headers["content-security-policy"]
    assert "unsafe-eval" not in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["referrer-policy"] == "same-origin"
    assert "x-frame-options" not in headers
    assert "server" not in headers


@pytest.mark.parametrize(
    "value", ["'self' https://*.example.edu", "https://courses.example.org:8443", "'none'", "https:", "*"]
)
def test_frame_ancestors_from_the_environment_are_the_embeds_alone(value: str) -> None:
    settings = Settings.from_env({FRAME_ANCESTORS_ENV: value})
    client = TestClient(create_app(settings))
    for path, framed_by in FRAMED:
        csp = _directives(client.get(path).headers["content-security-policy"])
        assert csp["frame-ancestors"] == (value if framed_by != "'self'" else "'self'"), path


def test_under_a_prefix_the_embed_alone_is_framed_anywhere() -> None:
    outer = Starlette(routes=[Mount("/course/zero", app=create_app())])
    with TestClient(outer) as client:
        for path, framed_by in FRAMED:
            csp = _directives(client.get("/course/zero" + path).headers["content-security-policy"])
            assert csp["frame-ancestors"] == framed_by, path


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
    assert _directives(response.headers["content-security-policy"])["frame-ancestors"] == "'self'"
    assert response.headers["content-type"].startswith(kind)
    assert "failed to answer" in response.text
    assert "a bug" not in response.text
    page = client.get("/").headers
    for name in ("content-security-policy", "x-content-type-options", "referrer-policy",
                 "cross-origin-opener-policy", "permissions-policy"):  # fmt: skip
        assert response.headers[name] == page[name], name
    assert "server" not in response.headers
