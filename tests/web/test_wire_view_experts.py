"""A mixture of experts' ZeRO collectives on the page: the experts' own group named beside the cards and listed.

The figures are tests/domain/test_wire_experts.py's: Mixtral 8x7B on 16 GPUs in 2 nodes of 8, ep = 8, etp = 1,
ZeRO-1. The card's 7,242,780,672 weights (7.24B), 5,637,144,576 of them routed experts (5.64B); edp = 2, ranks
8 apart (one card in each node); the rest over dp × cp = 16.
"""

from __future__ import annotations

from starlette.testclient import TestClient

from tests.conftest import text
from tests.web.helpers import run_page

MIXTRAL = "model=mixtral-8x7b&gpus=16&nodes=2&ep=8&etp=1&stage=zero1"


def test_the_line_beside_the_cards_says_which_group_each_part_goes_over(client: TestClient) -> None:
    said = text(run_page(client, MIXTRAL), "#wire-line")
    assert (
        "Its routed experts' 5.64B of 7.24B weights go over their expert-data-parallel group, 2 cards ep × etp = 8 "
        "ranks apart (across 2 nodes), the rest over dp × cp's 16: Megatron-LM's and DeepSpeed-MoE's groups."
    ) in said


def test_the_time_on_the_wire_says_the_compute_is_the_active_weights(client: TestClient) -> None:
    # 12,879,925,248 active of 46,702,792,704 weights (Mistral's 12.9B): what `wire.compute_seconds` counts.
    assert "compute is 6 × 12.9B active weights × " in text(run_page(client, MIXTRAL), "#wire p.assumptions")
    assert "compute is 6 × 8.03B weights × " in text(
        run_page(client, "model=llama-3-8b&nodes=2"), "#wire p.assumptions"
    )


def test_the_collectives_by_link_list_each_group_apart(client: TestClient) -> None:
    rows = run_page(client, MIXTRAL).select("#wire .wire-items tbody tr")
    names = [text(row, "th") for row in rows]
    assert names[:4] == [
        "reduce-scatter of the gradients outside the routed experts after the backward pass",
        "reduce-scatter of the routed experts' gradients after the backward pass, over the expert-data-parallel "
        "group of 2 cards, 8 ranks apart",
        "all-gather of the weights outside the routed experts after the update",
        "all-gather of the routed experts' weights after the update, over the expert-data-parallel group of 2 "
        "cards, 8 ranks apart",
    ]
    # Half of the experts' 11,274,289,152 B between nodes, 5,637,144,576 B = 5.25 GiB (5.3 shown); nothing inside.
    cells = [td.get_text(" ", strip=True) for td in rows[1].select("td")]
    assert cells == ["ring reduce-scatter over 2 cards: (n−1)/n of the buffer a card, n = 2", "0 GiB", "5.3 GiB"]
    assert rows[1].get("class") == ["crosses"]


def test_a_dense_models_line_names_no_experts(client: TestClient) -> None:
    assert "routed experts" not in text(run_page(client, "model=llama-3-8b&gpus=16&nodes=2"), "#wire-line")


def test_the_api_lists_the_experts_collectives_with_their_group(client: TestClient) -> None:
    stages = client.get("/api/memory?model=mixtral-8x7b&gpus=16&nodes=2&ep=8&etp=1").json()["stages"]
    zero1 = next(s for s in stages if s["stage"] == "zero1")
    # 2 × 2,809,863,168 inside; 2 × (200,704,512 + 5,637,144,576) between (tests/domain/test_wire_experts.py).
    assert (zero1["inside_bytes"], zero1["between_bytes"]) == (5_619_726_336, 11_675_698_176)
    assert [(c["collective"], c["scope"], c["cards"], c["nodes"], c["buffer_bytes"]) for c in zero1["collectives"]] == [
        ("reduce-scatter", "the shard group", 16, 2, 3_211_272_192),
        ("reduce-scatter", "the expert-data-parallel group", 2, 2, 11_274_289_152),
        ("all-gather", "the shard group", 16, 2, 3_211_272_192),
        ("all-gather", "the expert-data-parallel group", 2, 2, 11_274_289_152),
    ]
