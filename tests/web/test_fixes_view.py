"""What would make it fit, under the verdict and in /api/memory: the domain's changes (tests/domain/test_fixes.py)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain.fixes import Fix
from app.web.fixes_view import cost, label
from tests.web.helpers import query_of, run_page

L70 = "model=llama-3-70b&gpus=64&capacity=80GB&seq=4096&recompute=selective"
L405 = "model=llama-3.1-405b&gpus=1024&capacity=80GB"
LORA = "model=llama-3-8b&gpus=1&capacity=24GB&lora_rank=16"


def _lines(client: TestClient, query: str) -> list[tuple[str, str, str]]:
    tree = run_page(client, query)
    return [
        (" ".join(li.get_text(" ").split()), " ".join(li.get("class") or []), str(li.a["href"]) if li.a else "")
        for li in tree.select("#fixes li")
    ]


@pytest.mark.parametrize(
    ("query", "first"),
    [
        (f"{L70}&stage=zero3", "full recomputation : fits, 47.1 GiB left"),
        # Its default sequence is 8,192 tokens, its training length (tests/domain/test_fixes.py, FULL_405).
        (f"{L405}&stage=zero3", "full recomputation : fits, 20.7 GiB left"),
        (LORA, "full recomputation : fits, 1.2 GiB left"),  # on 24 GB, 24e9 bytes: 22.4 GiB
        # The "2.8 GiB left" is on a card of 24 GiB: the same peak, FULL_LORA, 2 ** 30 bytes a GiB.
        (LORA.replace("24GB", "24GiB"), "full recomputation : fits, 2.8 GiB left"),
    ],
)
def test_the_first_change_fits(client: TestClient, query: str, first: str) -> None:
    words, css, _ = _lines(client, query)[0]
    assert (words, css) == (first, "fix fits")


def test_every_change_and_what_saves_almost_nothing(client: TestClient) -> None:
    assert [(words, css) for words, css, _ in _lines(client, f"{L70}&stage=zero3")] == [
        ("full recomputation : fits, 47.1 GiB left", "fix fits"),
        ("sequence 2,048 : fits, 2.5 GiB left", "fix fits"),
        (
            "tp 4 : fits, 16.2 GiB left; every layer's activations all-reduced in the node, forward and backward",
            "fix fits",
        ),
        ("cp 2 : fits, 2.5 GiB left; every layer's keys and values gathered in the node", "fix fits"),
        (
            "pp 2 : fits, 1.5 GiB left; the pipeline idles 1× the step's compute ((pp − 1) / micro-batches), "
            "its sends between nodes",
            "fix fits",
        ),
        ("offload the optimizer : still over by 34.8 GiB", "fix"),
        ("offload the optimizer and the weights : still over by 32.7 GiB", "fix"),
        (
            "selective recomputation, as now : saves almost nothing, 0.078 GiB: peak 123.8 GiB → 123.7 GiB",
            "fix small",
        ),
    ]


def test_each_change_links_to_the_run_changed(client: TestClient) -> None:
    hrefs = [query_of(href) for _, _, href in _lines(client, f"{L70}&stage=zero2")]
    keys = ("stage", "recompute", "seq", "offload", "tp", "cp", "pp")
    assert [tuple(h.get(key, [None])[0] for key in keys) for h in hrefs] == [
        # Under ZeRO-2 the cut fits on its own: tp 8 (a node), pp 8.
        ("zero2", "selective", "4096", None, "8", None, None),
        ("zero2", "selective", "4096", None, None, None, "8"),
        ("zero2", "full", "4096", None, None, None, None),
        ("zero2", "selective", "256", None, None, None, None),
        ("zero2", "selective", "4096", "optimizer", None, None, None),
        ("zero3", "selective", "4096", None, None, None, None),
        ("zero2", "selective", "4096", None, None, "64", None),  # the most tried, still over
        ("zero2", None, "4096", None, None, None, None),  # the run's own selective leads to the run without it
    ]


def test_two_knobs_lead_to_zero3_with_the_other_changed(client: TestClient) -> None:
    # Llama 3.1 405B on 1,024 × 80 GB under data parallelism: no one knob fits; ZeRO-3 with its own changes.
    hrefs = [query_of(href) for _, _, href in _lines(client, f"{L405}&stage=dp")]
    assert (hrefs[0]["stage"], hrefs[0]["recompute"]) == (["zero3"], ["full"])
    # Under ZeRO-2, 32 uneven stages (3 or 4 of the 126 blocks) fit alone.
    assert query_of(_lines(client, f"{L405}&stage=zero2")[0][2])["pp"] == ["32"]


@pytest.mark.parametrize(
    "query", ["", "model=llama-3-70b&gpus=64&capacity=800GB&stage=zero3", f"{L70}&stage=zero3&capacity=200GB"]
)
def test_no_list_where_it_fits_or_no_card_is_given(client: TestClient, query: str) -> None:
    assert run_page(client, query).select("#fixes") == []


def _stages(client: TestClient, query: str) -> list[dict[str, Any]]:
    response = client.get(f"/api/memory?{query}")
    assert response.status_code == 200, response.text
    stages: list[dict[str, Any]] = response.json()["stages"]
    return stages


def test_the_api_gives_each_stages_changes(client: TestClient) -> None:
    zero3 = _stages(client, L70)[3]
    assert zero3["fixes"][0] == {
        "knob": "recompute",
        "value": "full",
        "peak_bytes": 29_445_392_384,
        "headroom_bytes": 80_000_000_000 - 29_445_392_384,
        "fits": True,
        "saved_bytes": zero3["peak_bytes"] - 29_445_392_384,
        "small": False,
        "bubble": 0.0,
        "between_nodes": False,
    }
    pp = next(f for f in zero3["fixes"] if f["knob"] == "pp")
    # One micro-batch through 2 stages idles (2 − 1) / 1 of the step; 64 cards in 8 nodes: sends between nodes.
    assert (pp["value"], pp["bubble"], pp["between_nodes"]) == ("2", 1.0, True)
    assert [(f["knob"], f["value"], f["small"]) for f in zero3["fixes"]][-1] == ("recompute", "selective", True)


def test_the_api_leaves_them_out_where_it_fits(client: TestClient) -> None:
    assert all("fixes" not in row for row in _stages(client, "capacity=800GB"))
    assert all("fixes" not in row for row in _stages(client, ""))


def test_two_knobs_where_one_does_not_fit(client: TestClient) -> None:
    # Llama 3.1 405B on 1,024 × 80 GB under data parallelism: ZeRO-3 and full recomputation peak at
    # 57,784,728,832 B (tests/domain/test_fixes.py FULL_405, by hand): 80e9 B less that is 20.7 GiB left.
    said, css, href = _lines(client, "model=llama-3.1-405b&gpus=1024&capacity=80GB&stage=dp")[0]
    assert said.startswith("ZeRO-3 and full recomputation")
    assert said.endswith("fits, 20.7 GiB left")
    assert "fits" in css
    query = query_of(href)
    assert (query["stage"], query["recompute"]) == (["zero3"], ["full"])


@pytest.mark.parametrize(
    ("fix", "said"),
    [
        (Fix("pp", "4", 0, 1, 1, bubble=Fraction(3, 8)), "the pipeline idles 3/8 of the step's compute "
         "((pp − 1) / micro-batches)"),
        (Fix("microbatches", "1", 0, 1, 1, bubble=Fraction(3), between_nodes=True), "the pipeline idles 3× the "
         "step's compute ((pp − 1) / micro-batches), its sends between nodes"),
        (Fix("cp", "16", 0, 1, 1, between_nodes=True), "every layer's keys and values gathered between nodes"),
        (Fix("tp", "2", 0, 1, 1), "every layer's activations all-reduced in the node, forward and backward"),
        (Fix("sp", "1", 0, 1, 1), "the same bytes on the wire as tp's all-reduces, as a reduce-scatter and an "
         "all-gather"),
        (Fix("stage", "zero3", 0, 1, 1, then=("tp", "8")), "every layer's activations all-reduced in the node, "
         "forward and backward"),
        (Fix("recompute", "full", 0, 1, 1), ""),
        (Fix("ep", "8", 0, 1, 1), "every expert block's tokens sent to their experts and back, an all-to-all in the "
         "node"),
        (Fix("ep", "16", 0, 1, 1, between_nodes=True), "every expert block's tokens sent to their experts and back, "
         "an all-to-all between nodes"),
    ],
)  # fmt: skip
def test_what_a_cut_costs_in_time(fix: Fix, said: str) -> None:
    assert cost(fix) == said


@pytest.mark.parametrize(
    ("fix", "words"),
    [
        (Fix("tp", "8", 0, 1, 1), "tp 8"),
        (Fix("sp", "1", 0, 1, 1), "sequence parallelism"),
        (Fix("ep", "8", 0, 1, 1), "ep 8"),
        (Fix("microbatches", "1", 0, 1, 1), "1 micro-batch"),
        (Fix("stage", "zero3", 0, 1, 1, then=("pp", "2")), "ZeRO-3 and pp 2"),
    ],
)
def test_the_cuts_knobs_in_words(fix: Fix, words: str) -> None:
    assert label(fix) == words
