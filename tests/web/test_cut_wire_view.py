"""The model cut's traffic on the page, in the table and the API: the figures of tests/domain/test_cut_wire.py.

Llama 3 8B, one sequence of 8,192 tokens: a = b · s · h · 2 B = 64 MiB a micro-batch's activations.
"""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.conftest import text
from tests.web.helpers import run_page, table_cells

TP2 = "model=llama-3-8b&tp=2"
PP2 = "model=llama-3-8b&gpus=16&nodes=2&pp=2&microbatches=8"
"""Two nodes of 8, a stage a node: every activation and gradient crosses the network."""


def test_without_a_cut_nothing_of_it_is_shown_or_sent(client: TestClient) -> None:
    tree = run_page(client, "model=llama-3-8b")
    assert tree.select(".cut-wire") == []
    assert all("cut" not in row for row in client.get("/api/memory?model=llama-3-8b").json()["stages"])


def test_tensor_parallelism_on_one_node_by_hand(client: TestClient) -> None:
    tree = run_page(client, TP2)
    # 128 all-reduces of a, each 2 · 1/2 · a a card: 8 GiB; at 450 GB/s, 8 × 2³⁰ / 450e9 s = 19.1 ms.
    # Compute: 6 × 8,030,261,248 × 8,192 / 2 at 395.6 TFLOP/s = 0.499 s; the step 0.499 + 0.0191 = 0.518 s.
    assert table_cells(tree, "td.comm-cell span.cut-wire") == ["cut: 8.0 GiB inside; step 0.518 s"] * 4
    words = [p.get_text(" ", strip=True) for p in tree.select("#wire p.cut-wire")]
    assert words == [
        "Cutting the model (tp=2) sends 8.0 GiB more a step inside the node from its most loaded card: 19.1 ms on "
        "the wire, between the blocks' matrix multiplies. The embedding's and output layer's own collectives are "
        "left out.",
        "A step with the cut: 0.499 s of compute (this card's 1/2 of the model, 1 micro-batch) + 19.1 ms of the "
        "cut's traffic = 0.518 s, none of it hidden; ZeRO's collectives above apart.",
    ]
    last = tree.select("#wire .wire-items tbody tr")[-1]
    assert text(last, "th") == (
        "tensor parallelism's all-reduces of the activations: 4 a block (2 forward, 2 backward) × 32 blocks × "
        "1 micro-batch"
    )
    assert [td.get_text(strip=True) for td in last.select("td.num")] == ["8.0 GiB", "0 GiB"]


def test_the_pipeline_across_two_nodes_with_its_bubble(client: TestClient) -> None:
    tree = run_page(client, PP2)
    # 8 sends of a between nodes: 0.5 GiB, at 50e9 B/s 10.7 ms. Compute: 6 × P × 8,192 × 8 / 2 at 395.6 TFLOP/s
    # = 3.99 s; the bubble 1/8 of it, 0.499 s; the step 3.99 + 0.499 + 0.0107 = 4.5 s.
    assert table_cells(tree, "td.comm-cell span.cut-wire")[3] == (
        "cut: 0 GiB inside · 0.50 GiB between; bubble 12.5%; step 4.5 s"
    )
    words = [p.get_text(" ", strip=True) for p in tree.select("#wire p.cut-wire")]
    assert words[1] == "The pipeline idles 12.5% of the ideal step, (pp − 1)/microbatches = 1/8: 0.499 s a step."
    last = tree.select("#wire .wire-items tbody tr")[-1]
    assert last.get("class") == ["crosses"]


def test_a_bare_count_says_its_traffic_is_unknown(client: TestClient) -> None:
    tree = run_page(client, "params=30B&tp=2&pp=2&microbatches=4")
    words = [p.get_text(" ", strip=True) for p in tree.select("#wire p.cut-wire")]
    assert words[0].startswith("The model is cut (tp=2, pp=2), but a weight count alone has no shape")
    assert words[2].endswith("= 2.33 s, the cut's traffic unknown; ZeRO's collectives above apart.")
    assert table_cells(tree, "td.comm-cell span.cut-wire")[0] == (
        "cut: traffic unknown without a model's shape; bubble 25%; step 2.33 s"
    )
    cut = client.get("/api/memory?params=30B&tp=2&pp=2&microbatches=4").json()["stages"][0]["cut"]
    assert (cut["known"], cut["links"], cut["bubble"]) == (False, [], 0.25)


def test_the_api_gives_the_cut_by_link_and_its_time(client: TestClient) -> None:
    cut = client.get(f"/api/memory?{PP2}").json()["stages"][3]["cut"]
    assert [
        (c["kind"], c["count"], c["buffer_bytes"], c["inside_bytes"], c["between_bytes"]) for c in cut["links"]
    ] == [("pp", 8, 2**26, 0, 2**29)]
    assert (cut["inside_bytes"], cut["between_bytes"], cut["bubble"]) == (0, 2**29, 0.125)
    assert cut["between_seconds"] == pytest.approx(2**29 / 50e9)
    assert cut["compute_seconds"] == pytest.approx(6 * 8_030_261_248 * 8_192 * 8 / 2 / 395.6e12)
    assert cut["step_seconds"] == pytest.approx(cut["compute_seconds"] * 1.125 + 2**29 / 50e9)
