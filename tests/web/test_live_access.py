"""app/web/live_access.py: a teacher's action taken only from a page of this very origin.

SameSite=Strict keeps the teacher's cookie from another site's request; a page on another port of the
same host is the same site, and its form once moved the class.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from app.main import create_app
from tests.conftest import dom, text

OWN = "http://testserver"
ACTIONS = [("show", {"view": "/?stage=dp"}), ("pause", {"paused": "1"}), ("end", {})]


@pytest.fixture
def teacher() -> Iterator[tuple[TestClient, str]]:
    """A client holding a new session's teacher's cookie, and the session's code."""
    with TestClient(create_app()) as client:
        response = client.post("/live", data={"view": "/?stage=zero3"}, follow_redirects=False)
        found = re.fullmatch(r"/live/([A-Z0-9]+)/teach", response.headers["location"])
        assert found
        yield client, found.group(1)


ORIGINS = [
    ({"Sec-Fetch-Site": "same-origin"}, True),
    ({"Sec-Fetch-Site": "same-origin", "Origin": OWN}, True),
    ({"Origin": OWN}, True),
    ({}, True),  # no browser's request: nothing another page could have sent
    ({"Sec-Fetch-Site": "same-site"}, False),  # another port or subdomain of this site
    ({"Sec-Fetch-Site": "same-site", "Origin": "http://testserver:8799"}, False),
    ({"Sec-Fetch-Site": "cross-site"}, False),
    ({"Sec-Fetch-Site": "none"}, False),
    ({"Origin": "http://testserver:8799"}, False),
    ({"Origin": "https://testserver"}, False),
    ({"Origin": "null"}, False),
]


@pytest.mark.parametrize(("headers", "allowed"), ORIGINS)
@pytest.mark.parametrize(("action", "form"), ACTIONS, ids=[a for a, _ in ACTIONS])
def test_a_teachers_action_is_taken_only_from_this_origin(
    teacher: tuple[TestClient, str], headers: dict[str, str], allowed: bool, action: str, form: dict[str, str]
) -> None:
    client, code = teacher
    response = client.post(f"/live/{code}/{action}", data=form, headers=headers, follow_redirects=False)
    if allowed:
        assert response.status_code == 303
    else:
        assert response.status_code == 403
        assert "not carried out" in text(dom(response.text), ".notice-message")
        # Nothing changed: the session is at its first version, running.
        state = dom(client.get(f"/live/{code}").text).select_one("#live-state")
        assert state is not None
        assert (state["data-version"], state.has_attr("data-ended")) == ("1", False)


@pytest.mark.parametrize(("headers", "allowed"), ORIGINS)
def test_a_session_is_started_only_from_this_origin(headers: dict[str, str], allowed: bool) -> None:
    # Another page's form would leave the visitor holding a teacher's cookie for a session they never chose.
    with TestClient(create_app()) as client:
        response = client.post("/live", data={"view": "/?stage=zero3"}, headers=headers, follow_redirects=False)
        assert response.status_code == (303 if allowed else 403)
        assert ("set-cookie" in response.headers) is allowed
