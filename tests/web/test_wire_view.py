"""Across nodes on the page: the nodes drawn, hybrid sharding's cells, hpZ's band, traffic by link and its time."""

from __future__ import annotations

import pytest
from starlette.testclient import TestClient

from tests.conftest import cell_facts, dom, one, text
from tests.web.helpers import run_page, table_cells

HYBRID = "stage=zero3&nodes=2&shard=4"
"""The seed's 30B on 2 nodes of 4, split within each node: the issue's example."""


def test_the_default_page_draws_no_nodes(client: TestClient) -> None:
    tree = run_page(client, "")
    assert tree.select("#grid .node-box, #grid .network-link") == []
    # One node: no line beside the cards (the page as it was); the table and its details give the links.
    assert tree.select("#wire-line, #links-tally") == []
    # Data parallelism's all-reduce on one node of 8: 2 × 7/8 × 60 GB = 105 GB = 97.8 GiB.
    assert table_cells(tree, "td.comm-cell span.by-link")[0] == "97.8 GiB inside"
    assert tree.select("#wire") == []  # the collectives by link, across nodes only: the first load stays small


def test_two_nodes_are_drawn_with_their_two_kinds_of_link(client: TestClient) -> None:
    tree = run_page(client, HYBRID)
    nodes = tree.select("#grid > .node-box")
    assert [text(node, ".node-title > span:first-child") for node in nodes] == ["Node 0: GPUs 0–3", "Node 1: GPUs 4–7"]
    assert [[card["data-card-index"] for card in node.select(".card")] for node in nodes] == [
        ["0", "1", "2", "3"],
        ["4", "5", "6", "7"],
    ]
    assert text(nodes[0], ".node-link") == "NVLink inside: 450 GB/s a card"
    assert text(tree, "#grid > .network-link") == "Network between nodes: 400 Gb/s a card"


def test_hybrid_zero3_keeps_each_weight_on_one_card_in_each_node(client: TestClient) -> None:
    tree = run_page(client, HYBRID)
    solid: dict[str, set[str]] = {}
    for cell in tree.select("#grid .cell"):
        facts = cell_facts(cell)
        if facts["state"] == "solid":
            solid.setdefault(facts["weight"], set()).add(facts["card"])
    # Weight w is held by GPU w mod 4 in node 0 and GPU 4 + w mod 4 in node 1.
    assert solid == {str(w): {str(w % 4), str(4 + w % 4)} for w in range(8)}
    # The cells that fill back in, against one group of 8: each card's second weight, 4 bands each.
    replicas = tree.select("#grid .cell.replica")
    assert len(replicas) == 8 * 4
    assert {(cell_facts(c)["card"], cell_facts(c)["weight"]) for c in replicas} == {
        (str(c), str((c + 4) % 8)) for c in range(8)
    }
    assert "White dot" in text(tree, ".legend")


@pytest.mark.parametrize(
    ("query", "label", "target"),
    [
        ("stage=zero3&nodes=2", "Hybrid: shard within each node of 4", "shard=4"),
        (HYBRID, "Shard across all 8 cards instead", None),
    ],
)
def test_the_switch_between_one_shard_group_and_a_nodes(
    client: TestClient, query: str, label: str, target: str | None
) -> None:
    link = one(run_page(client, query), "#hybrid-switch")
    assert str(link.get_text()).startswith(label)
    href = str(link["href"])
    assert ("shard=" in href) is (target is not None)
    if target:
        assert target in href


def test_a_cut_models_zero_group_is_no_hybrid_and_moves_the_cards_weights(client: TestClient) -> None:
    # Llama 3 8B, tp = pp = 2 on 2 nodes of 8: ZeRO's group is dp = 4 cards of a node, not all 16, so no hybrid
    # switch and no hybrid sentence. ZeRO-3's three collectives: 3/4 · 2 × 2,007,633,920 B = 2.80 GiB each,
    # inside (tests/domain/test_wire.py).
    tree = run_page(client, "model=llama-3-8b&stage=zero3&gpus=16&nodes=2&tp=2&pp=2")
    assert tree.select("#hybrid-switch") == []
    assert "Hybrid sharding" not in tree.get_text()
    assert table_cells(tree, "td.comm-cell span.by-link")[3] == "8.4 GiB inside · 0 GiB between"
    assert text(tree, "table.figures tr[data-stage=zero3] .comm") == "3P"


def test_the_traffic_by_link_beside_the_cards_and_in_the_table(client: TestClient) -> None:
    tree = run_page(client, HYBRID)
    # 135 GB = 125.7 GiB inside; 15 GB = 14.0 GiB between (tests/domain/test_wire.py).
    assert text(tree, "#wire-line").startswith(
        "Each card sends 125.7 GiB a step inside its node and 14.0 GiB between nodes: the (n−1)/n of each "
        "collective over n cards, where the P count above takes each as a whole P. On the wire: 0.3 s inside "
        "the node + 0.3 s between nodes = 0.6 s a step"
    )
    assert table_cells(tree, "td.comm-cell span.by-link")[3] == "125.7 GiB inside · 14.0 GiB between"
    assert text(tree, "table.figures tr[data-stage=zero3] .comm") == "3.5P"
    rows = tree.select("#wire .wire-items tbody tr")
    assert [row.get("class") for row in rows] == [None, None, None, ["crosses"]]
    assert "ring all-reduce over 2 cards" in text(rows[3], "td")


def test_hpz_draws_its_band_of_its_own(client: TestClient) -> None:
    tree = run_page(client, "stage=zero3&gpus=16&nodes=2&hpz=8")
    card = one(tree, '#grid section.card[data-card-index="9"]')
    slots = card.select(".secondary-row .slot")
    # GPU 9 keeps the slices of weights 1 and 9: the second among each node's 8.
    assert [i for i, slot in enumerate(slots) if "solid" in (slot.get("class") or [])] == [1, 9]
    assert text(card, ".secondary .host-title") == "hpZ copy, 1/8 a card"
    # Not under the other stages: only its room, empty, so that the cards are as tall under every stage.
    other = run_page(client, "stage=zero2&gpus=16&nodes=2&hpz=8")
    assert other.select(".secondary-row .slot") == []
    assert len(other.select(".secondary.placeholder[aria-hidden=true]")) == 16


def test_the_replicas_all_reduce_pairs_each_card_with_its_twin_across_the_network(client: TestClient) -> None:
    # Hybrid on 2 × 4: GPU c and GPU c + 4 keep the same slice: four pairs, each across the nodes.
    tree = run_page(client, f"{HYBRID}&phase=50")
    drawing = one(tree, ".transfer svg")
    assert len(drawing.select("path.arrow")) == 4
    assert len(drawing.select("path.arrow.between")) == 4
    assert "across the replicas" in text(tree, ".transfer figcaption")


def test_the_step_tallies_each_link_and_draws_the_network_dashed(client: TestClient) -> None:
    tree = run_page(client, "stage=zero3&nodes=2&phase=52")
    # The step's end is the table's: 3 × 45 GB inside, 3 × 7.5 GB between.
    assert text(tree, "#links-tally") == (
        "Sent so far, each card: 125.7 GiB of 125.7 GiB inside a node, 21.0 GiB of 21.0 GiB between nodes"
    )
    gathering = run_page(client, "stage=zero3&nodes=2&phase=1")
    drawing = one(gathering, ".transfer svg")
    assert len(drawing.select("line.node-boundary")) == 1
    crossing = drawing.select("path.arrow.between")
    assert crossing
    assert len(crossing) < len(drawing.select("path.arrow"))


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("shard=3", "shard=3 does not divide gpus=8"),
        ("gpus=24&shard=12", "shard=12 does not line up with nodes of 8 GPUs"),
        ("gpus=16&hpz=3", "hpz=3 does not divide gpus=16"),
        ("gpus=16&shard=8&qwz=1", "two answers to the slow link"),
        ("gpus=16&hpz=8&accounting=fsdp2", "hpz, qwz and qgz are DeepSpeed's ZeRO++"),
    ],
)
def test_groups_the_cluster_cannot_have_get_a_422_naming_both(client: TestClient, query: str, said: str) -> None:
    answer = client.get(f"/api/memory?{query}")
    assert answer.status_code == 422
    assert said in answer.json()["message"]
    page = client.get(f"/?{query}")
    assert page.status_code == 422
    assert said in text(dom(page.text), ".set-aside-fields")


def test_the_api_gives_each_collective_by_link_and_the_time(client: TestClient) -> None:
    answer = client.get(f"/api/memory?{HYBRID}").json()
    assert (answer["inputs"]["shard"], answer["inputs"]["replicas"]) == (4, 2)
    zero3 = answer["stages"][3]
    assert (zero3["inside_bytes"], zero3["between_bytes"]) == (135 * 10**9, 15 * 10**9)
    assert [c["scope"] for c in zero3["collectives"]] == [
        "the shard group",
        "the shard group",
        "the shard group",
        "the replicas",
    ]
    assert zero3["time"]["inside_seconds"] == pytest.approx(0.3)
    assert zero3["time"]["between_seconds"] == pytest.approx(0.3)


def test_hpz_wider_than_a_node_says_its_gathers_cross_nodes(client: TestClient) -> None:
    # 16 cards in 2 nodes of 8, hpZ over all 16: the backward's gather of 2 × 30e9 B sends 1/16 of it between
    # nodes, 3,750,000,000 B a card; ZeRO++ sends 0.583 of ZeRO-3's bytes between nodes (tests/domain/test_wire.py).
    query = "stage=zero3&gpus=16&hpz=16&qwz=1&qgz=1"
    explained = " ".join(p.get_text() for p in run_page(client, query).select("p.explanation"))
    assert "stay inside the node" not in explained
    assert "split across 16 cards in 2 nodes, wider than a node, so the backward's gathers cross nodes too" in explained
    assert "each card sends 0.583 of ZeRO-3's bytes, not the ZeRO++ paper's 0.25" in explained
    rows = run_page(client, query).select("#wire .wire-items tbody tr")
    assert text(rows[1], "th") == "all-gather of the weights in the backward pass, from hpZ's copy, across 2 nodes"
    (zero3,) = [row for row in client.get(f"/api/memory?{query}").json()["stages"] if row["stage"] == "zero3"]
    assert zero3["collectives"][1]["between_bytes"] == 3_750_000_000
