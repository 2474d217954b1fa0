"""/measured's section "CPU offload, measured" on the parsed DOM: under ZeRO-3 only, every byte named."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from tests.conftest import dom, one, text


@pytest.mark.parametrize("url", ["/measured?stage=zero3", "/measured?stage=zero3&impl=fsdp1&theme=projector"])
def test_zero3_shows_each_ranks_cpu_against_the_model(client: TestClient, url: str) -> None:
    tree = dom(client.get(url).text)
    section = one(tree, "#offload")
    assert "CPUOffloadPolicy" in text(section, "#offload-heading")
    assert "every byte of difference is named" in text(section, "#offload-agreement")
    rows = section.select("#offload-ranks tbody tr")
    assert len(rows) == 8
    # 16 B × 4,096 weights in the model; measured 32 B more, Adam's 8 step counters.
    for row in rows:
        assert (text(row, ".model"), text(row, ".torch"), text(row, ".difference")) == ("65,536 B", "65,568 B", "+32 B")
        assert "step counters +32 B" in text(row, ".reasons")
    categories = [
        (text(r, "th"), text(r, ".model"), text(r, ".torch")) for r in section.select("#offload-categories tbody tr")
    ]
    assert categories == [
        ("Weights' slices", "16,384 B", "16,384 B"),
        ("Gradients' slices", "16,384 B", "16,384 B"),
        ("Adam's moments", "32,768 B", "32,768 B"),
    ]


def test_the_compute_path_names_its_two_differences(client: TestClient) -> None:
    tree = dom(client.get("/measured?stage=zero3").text)
    rows = {text(r, "th"): r for r in one(tree, "#offload-compute").select("tbody tr")}
    assert len(rows) == 19
    assert text(rows["Forward 3"], ".difference") == "0 B"
    assert text(rows["Backward 7"], ".difference") == "−8,192 B"
    assert "first reduce" in text(rows["Backward 7"], ".reasons")
    assert "nothing to prefetch" in text(rows["Backward 0"], ".reasons")
    assert "peaks at 32,768 B" in text(tree, "#offload-compute-summary")
    named = text(tree, "#offload-differences")
    assert "pin_memory=False" in named
    assert "Padding" in named


def test_the_section_links_to_the_model_with_the_same_settings(client: TestClient) -> None:
    link = one(dom(client.get("/measured?stage=zero3&theme=projector").text), "#offload-model")
    query = parse_qs(urlsplit(str(link["href"])).query)
    assert query == {
        "stage": ["zero3"],
        "accounting": ["fsdp2"],
        "offload": ["optimizer+params"],
        "theme": ["projector"],
    }
    assert client.get(str(link["href"])).status_code == 200


@pytest.mark.parametrize("stage", ["dp", "zero1", "zero2"])
def test_the_other_stages_do_not_show_it(client: TestClient, stage: str) -> None:
    assert not dom(client.get(f"/measured?stage={stage}").text).select("#offload")


def test_the_api_serves_the_offload_comparison(client: TestClient) -> None:
    offload = client.get("/api/measured").json()["offload"]
    assert (offload["stage"], offload["recipe"], offload["pinned"]) == ("zero3", "mixed-adam", False)
    assert [r["measured_bytes"] for r in offload["ranks"]] == [65_568] * 8
    assert all(r["unexplained_bytes"] == 0 for r in offload["ranks"])
    assert all(p["unexplained_bytes"] == 0 for p in offload["compute"])
