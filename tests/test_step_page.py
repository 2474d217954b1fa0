"""Watching one step on the page and in the API: every phase is a URL the server computes."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from tests.conftest import dom, one, text


def _page(client: TestClient, query: str, headers: dict[str, str] | None = None) -> BeautifulSoup:
    response = client.get(f"/?{query}", headers=headers or {})
    assert response.status_code == 200, response.text[:300]
    return dom(response.text)


def _query(href: object) -> dict[str, list[str]]:
    return parse_qs(urlsplit(str(href)).query)


def test_at_rest_offers_the_step(client: TestClient) -> None:
    tree = _page(client, "stage=zero2&gpus=16")
    assert _query(one(tree, "#watch-step")["href"]) == {"stage": ["zero2"], "gpus": ["16"], "phase": ["0"]}
    assert tree.select("#step") == []


@pytest.mark.parametrize("headers", [{}, {"HX-Request": "true"}], ids=["page", "fragment"])
def test_zero3_forward_layer_3_shows_the_gathered_layer(client: TestClient, headers: dict[str, str]) -> None:
    tree = _page(client, "stage=zero3&phase=3", headers)
    panel = one(tree, "#step")
    assert panel["data-phase"] == "3"
    assert text(panel, "h3") == "Phase 3 of 20 Forward pass, layer 3"
    assert text(panel, "#tally strong") == "0.375P"
    assert one(panel, ".transfer figcaption").get_text() == "all-gather of layer 3's weights: 0.125P"
    weights = tree.select('#grid .cell[data-weight="2"][data-band="weights"]')
    assert [c["data-holding"] for c in weights] == ["gathered", "gathered", "held"] + ["gathered"] * 5
    assert all("active" in c["class"] for c in weights)
    assert {c["data-holding"] for c in tree.select('#grid .cell[data-weight="3"][data-band="weights"]')} == {
        "held",
        "dashed",
    }


def test_controls_are_real_links_that_keep_the_run(client: TestClient) -> None:
    tree = _page(client, "stage=zero1&phase=5&model=llama-3-8b")
    assert _query(one(tree, "#step-prev")["href"]) == {"stage": ["zero1"], "model": ["llama-3-8b"], "phase": ["4"]}
    assert _query(one(tree, "#step-next")["href"])["phase"] == ["6"]
    assert _query(one(tree, "#step-first")["href"])["phase"] == ["0"]
    assert _query(one(tree, "#step-last")["href"])["phase"] == ["20"]
    assert "phase" not in _query(one(tree, ".leave")["href"])
    # Switching the arrangement keeps the moment of the step.
    assert _query(one(tree, "#switch-zero3")["href"])["phase"] == ["5"]
    slider = one(tree, "#phase-slider")
    assert (slider["min"], slider["max"], slider["value"]) == ("0", "20", "5")
    hidden = {i["name"]: i["value"] for i in tree.select('.phase-form input[type="hidden"]')}
    assert hidden == {"stage": "zero1", "model": "llama-3-8b"}


def test_ends_have_no_link_past_them(client: TestClient) -> None:
    # The control stays, disabled but focusable, so focus has somewhere to stay; it links nowhere.
    for phase, controls in [(0, ["#step-first", "#step-prev"]), (20, ["#step-next", "#step-last"])]:
        tree = _page(client, f"stage=dp&phase={phase}")
        for selector in controls:
            control = one(tree, selector)
            assert control.get("aria-disabled") == "true"
            assert control.get("tabindex") == "0"
            assert control.get("href") is None
            assert control.get("hx-get") is None


@pytest.mark.parametrize(("stage", "tally"), [("dp", "2P"), ("zero1", "2P"), ("zero2", "2P"), ("zero3", "3P")])
def test_the_tally_ends_at_the_seed_figures(client: TestClient, stage: str, tally: str) -> None:
    assert text(_page(client, f"stage={stage}&phase=20"), "#tally strong") == tally


def test_a_run_on_other_than_eight_cards_is_stepped_on_eight(client: TestClient) -> None:
    tree = _page(client, "stage=zero3&phase=3&gpus=64")
    assert len(tree.select("#grid .card")) == 8
    assert text(tree, ".step-note") == (
        "The step is drawn on 8 cards with 8 layers; the table below uses your 64 GPUs."
    )
    assert _page(client, "stage=zero3&phase=3").select(".step-note") == []


def test_live_memory_per_card(client: TestClient) -> None:
    tree = _page(client, "stage=zero3&phase=9")
    subs = [text(card, ".card-sub") for card in tree.select("#grid .card")]
    assert subs[0] == "now 69.8 GiB · peak 69.8 GiB"
    # GPU 7 owns layer 8: nothing to gather for it, so it sits at its shard.
    assert subs[7] == "now 55.9 GiB · peak 62.9 GiB"


@pytest.mark.parametrize("phase", ["-1", "21", "x", "1.5"])
def test_phase_out_of_range_is_a_readable_422(client: TestClient, phase: str) -> None:
    response = client.get(f"/?stage=zero3&phase={phase}")
    assert response.status_code == 422
    assert "“phase”" in text(dom(response.text), ".notice-message")


def test_api_step(client: TestClient) -> None:
    body = client.get("/api/step", params={"stage": "zero3", "phase": "9"}).json()
    assert (body["part"], body["layer"], body["title"]) == ("backward", 7, "Backward pass, layer 8")
    assert [t["collective"] for t in body["transfers"]] == ["all-gather", "reduce-scatter"]
    assert body["tally_p"] == 1.25
    assert body["live_bytes"][0] == 75e9
    assert len(body["cells"]) == 8 * 8 * 4
    assert client.get("/api/step", params={"stage": "zero2", "phase": "20"}).json()["tally_p"] == 2.0
    assert client.get("/api/step", params={"phase": "21"}).status_code == 422
