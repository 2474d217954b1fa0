"""app/serving/address.py: an address longer than any the app builds gets a 414 at once, with the headers."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.serving.address import MAX_ADDRESS
from app.serving.config import Settings
from app.serving.security import security_headers

LONGEST = "/?stage=zero2&y=".ljust(MAX_ADDRESS + 1, "a")
"""The longest address let through: its path and query string (the "?" is in neither) make MAX_ADDRESS."""


@pytest.mark.parametrize(
    ("method", "url", "status", "kind"),
    [
        ("GET", LONGEST, 200, "text/html"),
        ("GET", LONGEST + "a", 414, "text/html"),
        ("GET", "/?y=" + "a" * 64_000, 414, "text/html"),
        ("GET", "/api/config?y=" + "a" * 64_000, 414, "application/json"),
        ("GET", "/static/" + "a" * 64_000, 414, "text/html"),
        ("POST", "/live/ACD479/show?" + "a" * 64_000, 414, "text/html"),
        ("HEAD", "/api/stages?y=" + "a" * 9_000, 414, "application/json"),
    ],
)
def test_an_address_longer_than_the_bound_is_refused_with_a_414(
    client: TestClient, method: str, url: str, status: int, kind: str
) -> None:
    assert len(LONGEST) == MAX_ADDRESS + 1
    response = client.request(method, url)
    assert response.status_code == status
    assert response.headers["content-type"].startswith(kind)
    assert set(response.headers) >= {name.lower() for name in security_headers(Settings())}
    if status == 414:
        assert ("too long" in response.text) == (method != "HEAD")
        assert "aaaa" not in response.text
