"""The projector theme on the server: one parameter, kept in every address, validated like the rest."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from tests.conftest import dom, one, text

HX = {"HX-Request": "true"}
PROJECTOR = "/?stage=zero3&gpus=16&capacity=80GiB&theme=projector"


def _query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def _theme(url: str) -> list[str]:
    return _query(url).get("theme", [])


@pytest.mark.parametrize("phase", ["", "&phase=9"])
def test_projector_is_a_class_on_the_page_and_every_address_keeps_it(client: TestClient, phase: str) -> None:
    tree = dom(client.get(PROJECTOR + phase).text)
    assert one(tree, "html").get("class") == ["theme-projector"]
    links = [
        str(tag.get("href") or tag.get("hx-get"))
        for tag in tree.select("#widget a[href], #widget a[hx-get], .masthead a[href]")
        if tag.get("id") != "theme-toggle"
        and not str(tag.get("href") or "").startswith("#")
        # A snippet for a course page embeds the default theme: the frame is a column, not a projector.
        and not tag.find_parent(class_="embed-this")
    ]
    forms = [tag for tag in tree.select("#widget form") if tag.get("method") == "get"]
    assert links
    assert forms
    for url in links:
        assert _theme(url) == ["projector"], url
    for form in forms:
        hidden = [i for i in form.select('input[type="hidden"]') if i.get("name") == "theme"]
        assert [i.get("value") for i in hidden] == ["projector"], form.get("id") or form.get("class")


def test_the_default_theme_adds_nothing_to_addresses(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero1&phase=3").text)
    assert one(tree, "html").get("class") == ["theme-default"]
    assert not any(_theme(str(a.get("href"))) for a in tree.select("#widget a[href]") if a.get("id") != "theme-toggle")
    assert not tree.select('input[name="theme"]')


def test_the_toggle_switches_the_theme_and_keeps_the_run_and_phase(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero2&gpus=16&phase=5").text)
    toggle = one(tree, "#theme-toggle")
    assert text(tree, "#theme-toggle") == "Projector view"
    # A whole page load: the theme styles the page around the widget too.
    assert toggle.get("hx-get") is None
    query = _query(str(toggle.get("href")))
    assert query == {"stage": ["zero2"], "gpus": ["16"], "phase": ["5"], "theme": ["projector"]}

    back = dom(client.get(str(toggle.get("href"))).text)
    assert text(back, "#theme-toggle") == "Normal view"
    assert _query(str(one(back, "#theme-toggle").get("href"))) == {"stage": ["zero2"], "gpus": ["16"], "phase": ["5"]}


def test_a_swapped_fragment_keeps_the_theme(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero1&theme=projector", headers=HX).text)
    assert _theme(str(one(tree, "#switch-zero2").get("href"))) == ["projector"]
    assert one(tree, '#run-form input[name="theme"]').get("value") == "projector"


@pytest.mark.parametrize("value", ["dark", "PROJECTOR", ""])
def test_a_bad_theme_is_a_clear_422(client: TestClient, value: str) -> None:
    response = client.get(f"/?stage=zero1&theme={value}")
    assert response.status_code == 422
    tree = dom(response.text)
    message = text(tree, ".notice-message")
    assert "“theme”" in message
    assert "'projector'" in message
    # The switcher still offers a way on, in the default theme.
    assert one(tree, "html").get("class") == ["theme-default"]
    assert _theme(str(one(tree, "#switch-zero1").get("href"))) == []


def test_the_skip_link_leads_to_the_grid(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero1").text)
    first = tree.body.find(True) if tree.body else None
    assert first is not None
    assert "skip-link" in (first.get("class") or [])
    assert first.get("href") == "#grid"
    assert tree.select_one("#grid") is not None
    # A notice has no grid, so no skip link that leads nowhere.
    assert dom(client.get("/?stage=nope").text).select(".skip-link") == []


def test_the_api_does_not_take_a_theme(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    names = {p["name"] for path in schema["paths"].values() for op in path.values() for p in op.get("parameters", [])}
    assert "theme" not in names
