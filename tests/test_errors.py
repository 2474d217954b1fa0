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


AMBIGUOUS_ON_THE_PAGE = [
    (
        "80G",
        "The query parameter “capacity” is ambiguous: “80G” could be 80 GB (80×10⁹ bytes) or 80 GiB (80×2³⁰ bytes);"
        " write 80GB or 80GiB.",
    ),
    (
        "1.5 t",
        "The query parameter “capacity” is ambiguous: “1.5 t” could be 1.5 TB (1.5×10¹² bytes) or 1.5 TiB"
        " (1.5×2⁴⁰ bytes); write 1.5TB or 1.5TiB.",
    ),
]


@pytest.mark.parametrize(("value", "message"), AMBIGUOUS_ON_THE_PAGE)
@pytest.mark.parametrize("headers", [{}, {"HX-Request": "true"}], ids=["page", "fragment"])
def test_a_bare_g_on_the_page_names_both_readings(
    client: TestClient, value: str, message: str, headers: dict[str, str]
) -> None:
    response = client.get("/", params={"capacity": value}, headers=headers)
    assert response.status_code == 422
    assert text(dom(response.text), '#widget [role="alert"] .notice-message') == message


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "80G",
            "The query parameter “capacity” is ambiguous: a bare G could mean GB (10⁹ bytes) or GiB (2³⁰ bytes);"
            " write the unit in full.",
        ),
        (
            "1.5T",
            "The query parameter “capacity” is ambiguous: a bare T could mean TB (10¹² bytes) or TiB (2⁴⁰ bytes);"
            " write the unit in full.",
        ),
    ],
)
def test_a_bare_g_on_the_api_names_both_readings_without_echoing_it(
    client: TestClient, value: str, message: str
) -> None:
    response = client.get("/api/memory", params={"capacity": value})
    assert response.status_code == 422
    body = response.json()
    assert body["message"] == message
    assert body["detail"][0]["loc"] == ["query", "capacity"]
    assert value not in response.text


def test_only_sizes_are_ambiguous_a_count_with_a_g_is_simply_wrong() -> None:
    error = {"loc": ("query", "params"), "msg": "String should match pattern", "type": "string_pattern_mismatch"}
    assert describe([{**error, "input": "80G"}], show_input=False) == (
        "The query parameter “params” should be a number of weights, such as 7.5B, 7.5e9 or 7,500,000,000."
    )
    size = {**error, "loc": ("query", "capacity"), "input": "80 GHz"}
    assert describe([size], show_input=True) == (
        "The query parameter “capacity” should be a memory size, such as 80GB, 80GiB or 80e9; “80 GHz” is not."
    )
