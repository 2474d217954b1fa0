"""app/web/pages.py: the routes, their status codes, content types and headers (Vary, history)."""

from __future__ import annotations

import json

import pytest
from bs4 import Tag
from fastapi.testclient import TestClient

from app.domain.stages import Stage
from tests.conftest import dom, one, sent
from tests.web.helpers import HX, after_the_switcher, run_page

RESTORE = {"HX-Request": "true", "HX-History-Restore-Request": "true"}


HTML, JSON = "text/html", "application/json"


# path, request headers, status, content type, what the body is
ROUTES = [
    ("/", {}, 200, HTML, "page"),
    ("/?stage=zero2", {}, 200, HTML, "page"),
    ("/?stage=zero2", HX, 200, HTML, "fragment"),
    ("/?stage=zero2", RESTORE, 200, HTML, "page"),
    ("/?stage=zero3&utm_source=course", {}, 200, HTML, "page"),
    ("/?stage=zero9", {}, 422, HTML, "page"),
    ("/?stage=zero9", HX, 422, HTML, "fragment"),
    ("/?stage=", {}, 422, HTML, "page"),
    ("/nowhere", {}, 404, HTML, "page"),
    ("/nowhere", HX, 404, HTML, "fragment"),
    ("/api/stages", {}, 200, JSON, "json"),
    ("/api/layout", {}, 200, JSON, "json"),
    ("/api/layout?stage=zero3", {}, 200, JSON, "json"),
    ("/api/layout?stage=zero9", {}, 422, JSON, "json"),
    ("/api/nowhere", {}, 404, JSON, "json"),
    ("/openapi.json", {}, 200, JSON, "json"),
    ("/static/app.css", {}, 200, "text/css", "asset"),
    ("/static/grid.js", {}, 200, "text/javascript", "asset"),
    ("/static/htmx-2.0.11.min.js", {}, 200, "text/javascript", "asset"),
    ("/static/favicon.svg", {}, 200, "image/svg+xml", "asset"),
    ("/favicon.ico", {}, 200, "image/svg+xml", "asset"),
]


@pytest.mark.parametrize(("path", "headers", "status", "content_type", "kind"), ROUTES)
def test_route(
    client: TestClient, path: str, headers: dict[str, str], status: int, content_type: str, kind: str
) -> None:
    response = client.get(path, headers=headers)
    assert response.status_code == status
    assert response.headers["content-type"].startswith(content_type)
    assert "content-security-policy" in response.headers
    if kind in {"page", "fragment"}:
        vary = {v.strip().lower() for v in response.headers["vary"].split(",")}
        assert {"hx-request", "hx-history-restore-request"} <= vary
        tree = sent(response.text)
        assert (tree.find("html") is not None) == (kind == "page")
        widget = tree.select_one("section#widget")
        assert widget is not None
        assert widget.select_one("nav.switcher") is not None
        if kind == "fragment":
            roots = [child for child in tree.children if isinstance(child, Tag)]
            # The widget; out of band, what the live region says (of a run drawn: not of a refusal, which
            # leaves it be) and the footer's JSON links for the run it draws.
            said = [("narration", "innerHTML")] if status == 200 else []
            assert [root.name for root in roots] == ["title", "section", *(["div"] if said else []), "span"]
            assert roots[1].get("id") == "widget"
            oob = [(root.get("id"), root.get("hx-swap-oob")) for root in roots[2:]]
            assert oob == [*said, ("json-links", "innerHTML")]
    if kind == "json":
        body = response.json()
        # Each JSON answer carries what its route is for: rows, cells, a message, or the schema.
        if status >= 400:
            assert set(body) >= {"message", "detail"}
        elif path.startswith("/api/stages"):
            assert [row["stage"] for row in body] == [stage.value for stage in Stage]
        elif path.startswith("/api/layout"):
            assert len(body["cells"]) == 8 * 8 * 4
        else:
            assert set(body["paths"]) >= {"/api/stages", "/api/layout", "/api/memory", "/api/step"}


def test_default_stage_is_data_parallelism(client: TestClient) -> None:
    grid = dom(client.get("/").text).select_one("#grid")
    assert grid is not None
    assert grid["data-stage"] == "dp"


def test_head_request_is_answered(client: TestClient) -> None:
    response = client.head("/?stage=zero1")
    assert response.status_code == 200
    assert response.text == ""


def test_fragment_pushes_the_short_canonical_url(client: TestClient) -> None:
    full_form = "stage=zero2&model=llama-3-8b&params=8030261248&gpus=64&recipe=mixed-adam&capacity=&units=GiB"
    response = client.get(f"/?{full_form}", headers={"HX-Request": "true"})
    assert response.headers["HX-Push-Url"] == "/?stage=zero2&model=llama-3-8b&gpus=64"
    assert "HX-Replace-Url" not in response.headers


def test_the_run_form_replaces_the_url_instead_of_pushing(client: TestClient) -> None:
    form = one(run_page(client, "stage=zero1"), "form#run-form")
    assert form["hx-replace-url"] == "true"
    assert form.get("hx-push-url") is None
    headers = {"HX-Request": "true", **json.loads(str(form["hx-headers"]))}
    response = client.get("/?stage=zero2&model=llama-3-8b&gpus=64", headers=headers)
    assert response.headers["HX-Replace-Url"] == "/?stage=zero2&model=llama-3-8b&gpus=64"
    assert "HX-Push-Url" not in response.headers
    assert "ZB-History" in response.headers["Vary"]


def test_the_fragment_pushes_the_address_without_the_hint(client: TestClient) -> None:
    response = client.get("/?stage=zero2&from=zero1", headers={"HX-Request": "true"})
    assert response.headers["HX-Push-Url"] == "/?stage=zero2"
    assert len(dom(response.text).select(".cell.changed")) == 56


def test_embeds_vary_on_the_htmx_headers(client: TestClient) -> None:
    for headers in ({}, HX):
        vary = {v.strip() for v in client.get("/embed?stage=zero1", headers=headers).headers["vary"].split(",")}
        assert {"HX-Request", "HX-History-Restore-Request"} <= vary


def test_an_htmx_swap_in_an_embed_gets_the_embeds_widget_and_replaces_the_address(client: TestClient) -> None:
    response = client.get("/embed?stage=zero2&controls=step&phase=4", headers=HX)
    assert response.status_code == 200
    tree = sent(response.text)
    assert tree.select("html, body, .masthead") == []
    assert one(tree, "#grid")["data-stage"] == "zero2"
    assert tree.select(".step-controls #step-next")
    assert tree.select("#embed-this") == []
    # A frame's history is the host page's: the embed replaces its address rather than pushing one.
    assert "hx-push-url" not in response.headers
    assert response.headers["hx-replace-url"] == "/embed?stage=zero2&phase=4&controls=step"


FORM_FIRST = {"HX-Request": "true", "ZB-Form-First": "1"}


def test_a_keystroke_is_answered_beside_the_field_and_the_form_stays_where_it_stood(client: TestClient) -> None:
    # Typed in the form at its usual place: the message beside the field, nothing moves above it.
    typed = dom(client.get("/?stage=zero2&gpus=0", headers={"HX-Request": "true"}).text)
    assert typed.select("#set-aside, #drawn-instead, .form-first") == []
    assert one(typed, "#widget > #run-form #f-gpus")["aria-invalid"] == "true"
    # Typed in the form under a bad link's message: it stays first, with the message, until corrected ...
    again = client.get("/?stage=zero2&gpus=x", headers=FORM_FIRST)
    assert again.status_code == 422
    tree = dom(again.text)
    first = after_the_switcher(tree)[0]
    assert [str(c.get("id")) for c in first.find_all(True, recursive=False)] == ["set-aside", "run-form"]
    # ... and once corrected, the form stays first (no message): it does not move away under the typing.
    fixed = client.get("/?stage=zero2&gpus=16", headers=FORM_FIRST)
    assert fixed.status_code == 200
    tree = dom(fixed.text)
    assert tree.select("#set-aside, #drawn-instead") == []
    assert one(tree, ".form-first #run-form")["hx-get"] == "/"
    assert one(tree, ".form-first")["hx-headers"] == '{"ZB-Form-First": "1"}'
    assert tree.select(".side #run-form") == []
    # A link followed from there (the switcher's) is the page as usual; and so is the same address without
    # the form's header, though an answer with it was just given (and cached).
    plain = dom(client.get("/?stage=zero2&gpus=16", headers={"HX-Request": "true"}).text)
    assert plain.select(".form-first") == []
    assert plain.select("#widget > #run-form")
    assert "ZB-Form-First" in fixed.headers["vary"]
