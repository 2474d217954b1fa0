"""Bad input: a readable message and a 4xx, as HTML where a person looks and JSON for the API."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.errors import describe
from tests.conftest import dom, text

BAD_STAGES = ["zero9", "", "ZERO1", "<script>alert(1)</script>", '"><img src=x onerror=alert(1)>', "%ff", "x" * 5000]


@pytest.mark.parametrize("value", BAD_STAGES)
@pytest.mark.parametrize("headers", [{}, {"HX-Request": "true"}], ids=["page", "fragment"])
def test_bad_stage_on_the_page(client: TestClient, value: str, headers: dict[str, str]) -> None:
    response = client.get("/", params={"stage": value}, headers=headers)
    assert response.status_code == 422
    tree = dom(response.text)
    message = text(tree, '#widget [role="alert"] .notice-message')
    assert "“stage” must be 'dp', 'zero1', 'zero2' or 'zero3'" in message
    # The value comes back as text, never as markup, and never at full length.
    assert tree.select("script:not([src])") == []
    assert tree.select("img") == []
    assert len(message) < 200
    assert tree.select("#grid") == []
    assert [a.get("aria-current") for a in tree.select("nav.switcher a")] == [None] * 4


def test_raw_markup_in_the_query_is_escaped(client: TestClient) -> None:
    response = client.get("/?stage=%3Cb%3Ebold%3C/b%3E")
    assert response.status_code == 422
    assert "<b>bold</b>" not in response.text
    assert dom(response.text).select(".notice-message b") == []


@pytest.mark.parametrize("value", BAD_STAGES)
def test_bad_stage_on_the_api(client: TestClient, value: str) -> None:
    response = client.get("/api/layout", params={"stage": value})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["message"] == "The query parameter “stage” must be 'dp', 'zero1', 'zero2' or 'zero3'."
    assert body["detail"][0]["loc"] == ["query", "stage"]
    assert value not in response.text or value in {"", "x"}


def test_unknown_page_is_a_readable_404(client: TestClient) -> None:
    response = client.get("/stages/zero1")
    assert response.status_code == 404
    assert text(dom(response.text), ".notice-message") == "There is no page at this address."


def test_wrong_method_is_a_405_not_a_5xx(client: TestClient) -> None:
    response = client.post("/api/stages")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET"
    assert response.json()["message"] == "This address does not accept that kind of request."


def test_describe_other_errors_in_plain_words() -> None:
    errors = [
        {
            "loc": ("query", "gpus"),
            "msg": "Input should be less than or equal to 4096",
            "type": "less_than_equal",
            "input": "5000",
        }
    ]
    assert describe(errors, show_input=True) == (
        "The query parameter “gpus” is not valid: input should be less than or equal to 4096."
    )
    assert describe([], show_input=False) == "The request could not be understood."
