"""app/web/errors.py: bad requests answered with a readable 4xx, as HTML for people and JSON for the API."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.web.errors import describe
from tests.conftest import dom, one, opened_panel, text
from tests.web.helpers import HX, SHOWN_16, query_of

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
        "Ambiguous: “80G” could be 80 GB (80×10⁹ bytes) or 80 GiB (80×2³⁰ bytes); write 80GB or 80GiB.",
    ),
    (
        "1.5 t",
        "Ambiguous: “1.5 t” could be 1.5 TB (1.5×10¹² bytes) or 1.5 TiB (1.5×2⁴⁰ bytes); write 1.5TB or 1.5TiB.",
    ),
]


@pytest.mark.parametrize(("value", "message"), AMBIGUOUS_ON_THE_PAGE)
@pytest.mark.parametrize("headers", [{}, {"HX-Request": "true"}], ids=["page", "fragment"])
def test_a_bare_g_on_the_page_names_both_readings(
    client: TestClient, value: str, message: str, headers: dict[str, str]
) -> None:
    response = client.get("/", params={"capacity": value}, headers=headers)
    assert response.status_code == 422
    # Beside the field, which keeps what was typed; the rest of the page is drawn as usual.
    assert _problem(dom(response.text), "#f-capacity") == (value, message)


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
        "The query parameter “params” should be a number of weights under 10,000T, such as 7.5B, 7.5e9 or 7,500,000,000"
        " (at most four digits before K, M, B or T)."
    )
    size = {**error, "loc": ("query", "capacity"), "input": "80 GHz"}
    assert describe([size], show_input=True) == (
        "The query parameter “capacity” should be a memory size, such as 80GB, 80GiB or 80e9"
        " (at most four digits before GB, GiB, TB or TiB); “80 GHz” is not."
    )


def _switch_queries(tree: BeautifulSoup) -> dict[str, dict[str, list[str]]]:
    return {str(a["id"]): parse_qs(urlsplit(str(a["href"])).query) for a in tree.select("nav.switcher a")}


def _problem(tree: BeautifulSoup, selector: str) -> tuple[str, str]:
    """The value a field shows and the message it points to, checked to be wired for assistive tech."""
    field = one(tree, selector)
    assert field.get("aria-invalid") == "true"
    message = one(tree, f"#{field['aria-describedby']}")
    assert message.get("role") == "alert"
    said = " ".join(message.get_text(" ").split())
    return str(field.get("value", "")), said.removesuffix(" " + _drawn(tree, selector)).strip()


def _drawn(tree: BeautifulSoup, selector: str) -> str:
    """What the message beside a field says the picture uses meanwhile ("Drawn with 16 GPUs, …")."""
    drawn = one(tree, f"#{one(tree, selector)['aria-describedby']}").select_one(".field-drawn")
    return "" if drawn is None else " ".join(drawn.get_text(" ").split())


@pytest.mark.parametrize("headers", [{}, {"HX-Request": "true"}], ids=["page", "fragment"])
def test_a_typo_in_the_weights_keeps_the_widget_and_says_so_beside_the_field(
    client: TestClient, headers: dict[str, str]
) -> None:
    query = {"stage": "zero2", "model": "custom", "params": "thirty billion", "gpus": "16", "capacity": "80GiB"}
    response = client.get("/", params=query, headers=headers)
    assert response.status_code == 422
    tree = dom(response.text)
    # The run as far as it is valid: the stage drawn and marked, the other fields kept.
    assert one(tree, "#grid")["data-stage"] == "zero2"
    assert one(tree, "#grid")["data-gpus"] == "16"
    assert one(tree, "#switch-zero2").get("aria-current") == "page"
    assert _switch_queries(tree)["switch-zero3"] == {
        "stage": ["zero3"], "model": ["custom"], "gpus": ["16"], "capacity": ["80GiB"], "from": ["zero2"]
    }  # fmt: skip
    assert one(tree, "#f-capacity")["value"] == "80GiB"
    assert _problem(tree, "#f-params") == (
        "thirty billion",
        "Enter a number of weights under 10,000T, such as 7.5B, 7.5e9 or 7,500,000,000"
        " (at most four digits before K, M, B or T), or leave it blank.",
    )
    assert tree.select('[aria-invalid="true"]') == [one(tree, "#f-params")]
    # A link followed says so at the top too; a keystroke in the form is answered beside the field only.
    assert tree.select(".notice") == ([] if headers else [one(tree, "#set-aside")])


def test_too_many_gpus_is_shown_not_silently_ignored(client: TestClient) -> None:
    response = client.get("/", params={"stage": "zero3", "model": "llama-3-8b", "gpus": "5000"})
    assert response.status_code == 422
    tree = dom(response.text)
    value, message = _problem(tree, "#f-gpus")
    assert value == "5000"
    assert "between 1 and 4096" in message
    assert one(tree, "#switch-zero3").get("aria-current") == "page"
    assert _switch_queries(tree)["switch-dp"] == {"stage": ["dp"], "model": ["llama-3-8b"], "from": ["zero3"]}


def test_several_bad_fields_are_each_marked_and_the_folded_ones_unfolded(client: TestClient) -> None:
    query = {"recipe": "custom", "weights_bytes": "0", "largest_layer": "big", "units": "furlongs", "gpus": "x"}
    tree = dom(client.get("/", params=query).text)
    marked = {str(el["id"]) for el in tree.select('[aria-invalid="true"]')}
    assert marked == {"f-weights_bytes", "f-layer", "f-units", "f-gpus"}
    assert one(tree, "details.more").has_attr("open")
    assert _problem(tree, "#f-weights_bytes") == ("0", "Enter a whole number of bytes between 1 and 16.")
    assert _problem(tree, "#f-units")[1] == "Choose one of 'GiB' or 'GB'."
    assert one(tree, "#grid")["data-stage"] == "dp"


@pytest.mark.parametrize("value", BAD_STAGES[3:5])
def test_markup_typed_in_a_field_comes_back_as_text(client: TestClient, value: str) -> None:
    response = client.get("/", params={"model": "custom", "params": value, "capacity": value})
    assert response.status_code == 422
    tree = dom(response.text)
    assert tree.select("script:not([src])") == []
    assert tree.select("img") == []
    assert _problem(tree, "#f-params")[0] == value
    assert _problem(tree, "#f-capacity")[0] == value
    assert value not in " ".join(p.get_text() for p in tree.select(".field-error"))


def test_a_bad_phase_keeps_a_notice_and_the_run_in_the_switcher(client: TestClient) -> None:
    response = client.get("/", params={"stage": "zero1", "phase": "99", "gpus": "64", "model": "llama-3-8b"})
    assert response.status_code == 422
    tree = dom(response.text)
    assert "“phase” is not valid" in text(tree, '#widget [role="alert"] .notice-message')
    assert one(tree, "#switch-zero1").get("aria-current") == "page"
    assert _switch_queries(tree)["switch-zero3"] == {
        "stage": ["zero3"], "model": ["llama-3-8b"], "gpus": ["64"], "from": ["zero1"]
    }  # fmt: skip


def test_a_bad_stage_keeps_the_run_in_the_switcher(client: TestClient) -> None:
    tree = dom(client.get("/", params={"stage": "zero9", "gpus": "64", "params": "oops"}).text)
    assert "“stage” must be" in text(tree, ".notice-message")
    assert "“params”" in text(tree, ".notice-message")
    assert _switch_queries(tree)["switch-zero2"] == {"stage": ["zero2"], "gpus": ["64"]}


def test_the_api_still_answers_json_without_the_rejected_value(client: TestClient) -> None:
    response = client.get("/api/memory", params={"gpus": "98765", "params": "thirty billion"})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    assert "98765" not in response.text
    assert "thirty billion" not in response.text


@pytest.mark.parametrize(
    ("headers", "gpus"),
    [
        ({"HX-Request": "true", "HX-Current-URL": SHOWN_16}, "16"),
        ({"Referer": SHOWN_16}, "16"),  # the form sent without JavaScript
        ({"HX-Request": "true"}, "8"),
        ({"HX-Request": "true", "HX-Current-URL": "http://elsewhere.example/?gpus=16"}, "8"),
        ({"Referer": "http://testserver/compare?gpus=16"}, "8"),
        ({"Referer": "http://testserver/?gpus=-3"}, "8"),
    ],
    ids=["htmx", "no-js", "nothing-shown", "another-site", "another-page", "shown-invalid"],
)
def test_a_typo_in_the_gpus_redraws_the_run_on_the_screen_not_the_default(
    client: TestClient, headers: dict[str, str], gpus: str
) -> None:
    response = client.get("/", params={"stage": "zero2", "gpus": "0"}, headers=headers)
    assert response.status_code == 422
    tree = dom(response.text)
    assert one(tree, "#grid")["data-gpus"] == gpus
    assert len(tree.select("#grid .card")) == int(gpus)
    assert _problem(tree, "#f-gpus") == ("0", "Enter a whole number of GPUs between 1 and 4096.")
    # Beside the field too, what the cards show meanwhile: they are not the figures of the value typed.
    before = "as on the screen before" if gpus == "16" else "the default"
    assert _drawn(tree, "#f-gpus") == f"Drawn with {gpus} GPUs, {before}."
    assert {"hx-current-url", "referer"} <= {v.strip().lower() for v in response.headers["vary"].split(",")}
    # The address and the share link name the run drawn, not the typo (htmx would put that in the bar).
    drawn = "/?stage=zero2" + ("" if gpus == "8" else f"&gpus={gpus}")
    assert response.headers.get("hx-push-url") == (drawn if "HX-Request" in headers else None)
    assert one(opened_panel(client, tree), "#share-link")["href"] == "http://testserver" + drawn


def test_other_fields_changed_beside_a_typo_are_drawn_and_the_address_follows(client: TestClient) -> None:
    # The form sends every field: a new model and card memory with 0 still in the GPUs field.
    shown = "http://testserver/?stage=zero2&gpus=64"
    headers = {"HX-Request": "true", "HX-Current-URL": shown, "ZB-History": "replace"}
    response = client.get("/?stage=zero2&gpus=0&model=llama-3-8b&capacity=80GiB", headers=headers)
    tree = dom(response.text)
    assert one(tree, "#grid")["data-gpus"] == "64"
    assert "Llama 3 8B" in text(tree, "table.figures caption")
    drawn = "/?stage=zero2&model=llama-3-8b&gpus=64&capacity=80GiB"
    assert response.headers["hx-replace-url"] == drawn
    assert one(opened_panel(client, tree), "#share-link")["href"] == "http://testserver" + drawn


def test_the_answer_to_a_typo_is_not_cached_for_the_next_screen(client: TestClient) -> None:
    def drawn(shown: str) -> str:
        headers = {"HX-Request": "true", "HX-Current-URL": f"http://testserver/?gpus={shown}"}
        return str(one(dom(client.get("/?gpus=0", headers=headers).text), "#grid")["data-gpus"])

    assert [drawn("16"), drawn("32"), drawn("16")] == ["16", "32", "16"]


def test_the_api_explains_a_pattern_mismatch_in_a_sentence_without_the_pattern(client: TestClient) -> None:
    body = client.get("/api/memory", params={"params": "thirty billion"}).json()
    assert [d["msg"] for d in body["detail"]] == [
        "The query parameter “params” should be a number of weights under 10,000T, such as 7.5B, 7.5e9 or 7,500,000,000"
        " (at most four digits before K, M, B or T)."
    ]
    assert "thirty" not in str(body)


def test_an_error_page_without_a_picture_keeps_the_widgets_links(client: TestClient) -> None:
    for path in ["/?stage=zero1&phase=99", "/stages/zero1", "/compare?left=zero9"]:
        tree = dom(client.get(path).text)
        assert tree.select(".notice"), path
        assert str(one(tree, "#compare-link")["href"]).startswith("/compare"), path
        assert str(one(tree, "#measured-link")["href"]).startswith("/measured"), path
    # An embed's links stay in the embed: no way out to the site's other pages.
    embedded = dom(client.get("/embed?stage=zero9").text)
    assert embedded.select(".notice")
    assert embedded.select("#compare-link, #measured-link") == []


@pytest.mark.parametrize(
    ("query", "named"), [("controls=all", "controls"), ("controls=", "controls"), ("calculator=maybe", "calculator")]
)
def test_a_bad_embed_option_is_a_clear_422_that_stays_in_the_embed(client: TestClient, query: str, named: str) -> None:
    response = client.get(f"/embed?stage=zero1&gpus=4&{query}")
    assert response.status_code == 422
    tree = dom(response.text)
    assert f"“{named}”" in text(tree, ".notice-message")
    assert tree.select(".masthead") == []
    switch = one(tree, "#switch-zero2")
    assert urlsplit(str(switch["href"])).path == "/embed"
    assert query_of(str(switch["href"]))["gpus"] == ["4"]


def test_a_typo_in_an_embeds_calculator_keeps_the_embed(client: TestClient) -> None:
    response = client.get("/embed?stage=zero1&calculator=1&gpus=lots", headers=HX)
    assert response.status_code == 422
    tree = dom(response.text)
    assert one(tree, "#f-gpus")["aria-invalid"] == "true"
    assert one(tree, "#run-form")["action"] == "/embed"
    assert "hx-push-url" not in response.headers


@pytest.mark.parametrize(
    ("query", "named"),
    [
        ("model=llama-3-70b&gpus=0&capacity=80GiB", "GPUs: “0” is not accepted. Enter a whole number of GPUs"),
        ("capacity=banana", "Card memory: “banana” is not accepted. Enter a memory size"),
        ("params=<script>", "Weights: “<script>” is not accepted. Enter a number of weights"),
    ],
)
def test_a_bad_run_in_an_embed_without_the_calculator_is_said_not_drawn(
    client: TestClient, query: str, named: str
) -> None:
    # Nothing in such an embed could say a value was set aside: drawing the default run instead
    # would put a wrong figure in the course page. It says what was wrong, and draws nothing.
    response = client.get(f"/embed?stage=zero2&{query}")
    assert response.status_code == 422
    tree = dom(response.text)
    # In the words of the page's notice, with the value typed escaped (the parser reads it back as text).
    assert text(tree, ".notice-message").startswith(named)
    assert tree.select("#grid, .cost-table, .headline") == []
    assert tree.select("script:not([src])") == []
    switch = one(tree, "#switch-zero3")
    assert urlsplit(str(switch["href"])).path == "/embed"
