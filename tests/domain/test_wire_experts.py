"""ZeRO's own collectives for a mixture of experts, by link, each figure against a hand calculation written here.

Megatron-LM (its distributed optimizer and DDP: the experts' gradients reduced over the expert data-parallel
group) and DeepSpeed-MoE (`expert_data_parallel_group`) reduce and gather the routed experts' gradients and
weights over the expert-data-parallel group, edp = gpus ÷ (pp × ep × etp) cards, and the card's other weights
over dp × cp. Megatron's expert rank order (etp, ep, edp, pp from the fastest rank) puts an edp group's ranks
ep × etp apart. A collective over n cards in k nodes (g in each) sends (g − 1)/g of its buffer inside a node
and (k − 1)/n between nodes a card (docs/wire.md). docs/moe.md works the same figures.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.architecture import ModelName
from app.domain.communication import Scope
from app.domain.scenario import Inputs, resolve
from app.domain.stages import Stage
from app.domain.step import LAST_PHASE
from app.domain.wire import Span

# Mixtral 8x7B: h = 4,096, 32 blocks, 8 experts of 3 × 4,096 × 14,336, vocabulary 32,000 (untied), bf16 (2 B).
ATTENTION = 2 * 4096 * 4096 + 2 * 4096 * 1024  # 41,943,040
EXPERT = 3 * 4096 * 14336  # 176,160,768
ROUTER_AND_NORMS = 8 * 4096 + 2 * 4096  # 40,960: whole on every card
TABLE = 32000 * 4096  # 131,072,000, the embedding and the output layer each

# tp = 1, ep = 8: one expert a card in each block.
CARD = 32 * (ATTENTION + ROUTER_AND_NORMS + EXPERT) + 2 * TABLE + 4096
EXPERTS = 32 * EXPERT
REST = CARD - EXPERTS


def test_the_hand_counts() -> None:
    assert (CARD, EXPERTS, REST) == (7_242_780_672, 5_637_144_576, 1_605_636_096)


def _mixtral(**query: Any) -> Any:
    return resolve(Inputs(model=ModelName.MIXTRAL_8X7B, **query)).report


# Mixtral on 16 GPUs in 2 nodes of 8, ep = 8, etp = 1: dp = 16 (every card, neighbours: 2 nodes of 8);
# edp = 16 ÷ (1 × 8 × 1) = 2, its ranks 8 apart (GPUs r and r + 8): one card in each node, g = 1, k = 2.
# The rest: 2 B × 1,605,636,096 = 3,211,272,192 B; 7/8 inside = 2,809,863,168, 1/16 between = 200,704,512.
# The experts: 2 B × 5,637,144,576 = 11,274,289,152 B; nothing inside, 1/2 between = 5,637,144,576.
REST_LINK = (Scope.GROUP, Span(16, 2), 3_211_272_192, 2_809_863_168, 200_704_512)
EXPERTS_LINK = (Scope.EXPERTS, Span(2, 2), 11_274_289_152, 0, 5_637_144_576)


@pytest.mark.parametrize(
    ("stage", "collectives"),
    [
        # ZeRO-1: the gradients' reduce-scatter, the weights' all-gather after the update, each over both groups.
        (Stage.ZERO1, 2),
        # ZeRO-3: the forward's and the backward's all-gathers and the reduce-scatter.
        (Stage.ZERO3, 3),
    ],
)
def test_mixtral_on_two_nodes_with_ep_8_reduces_and_gathers_its_experts_over_edp_2_between_nodes(
    stage: Stage, collectives: int
) -> None:
    row = _mixtral(gpus=16, nodes=2, ep=8, etp=1)[stage]
    assert (row.card_params, row.expert_params) == (CARD, EXPERTS)
    found = [(link.transfer.scope, link.span, link.buffer, link.inside, link.between) for link in row.links]
    assert found == [REST_LINK, EXPERTS_LINK] * collectives
    # ZeRO-1: 2 × 2,809,863,168 = 5,619,726,336 inside, 2 × (200,704,512 + 5,637,144,576) = 11,675,698,176 between;
    # ZeRO-3: 8,429,589,504 and 17,513,547,264. (Over dp = 16 alone the card's 14,485,561,344 B would send 7/8 of
    # it inside a node, 1/16 between: the experts' group moves their share between nodes.)
    assert (row.inside_bytes, row.between_bytes) == (collectives * 2_809_863_168, collectives * 5_837_849_088)
    assert row.communication_p == collectives  # the card's weights, once a collective, over the two groups
    assert row.communication_bytes == collectives * 2 * CARD
    last = _mixtral(gpus=16, nodes=2, ep=8, etp=1).step(stage)[LAST_PHASE]
    assert (last.tally_p, last.inside_so_far, last.between_so_far) == (
        collectives,
        row.inside_bytes,
        row.between_bytes,
    )


def test_the_experts_collectives_are_named_with_their_group() -> None:
    row = _mixtral(gpus=16, nodes=2, ep=8, etp=1)[Stage.ZERO1]
    assert [link.transfer.description for link in row.links] == [
        "reduce-scatter of the gradients outside the routed experts after the backward pass",
        "reduce-scatter of the routed experts' gradients after the backward pass, over the expert-data-parallel group",
        "all-gather of the weights outside the routed experts after the update",
        "all-gather of the routed experts' weights after the update, over the expert-data-parallel group",
    ]


def test_with_tp_2_the_rest_goes_over_dp_8_and_the_experts_over_edp_2() -> None:
    # tp = 2, ep = 8, etp = 1 on 16 GPUs: the card keeps 6,440,620,032 weights, 5,637,144,576 of them experts
    # (docs/moe.md), 803,475,456 not. dp = 8, ranks 2 apart (0, 2, …, 14): 2 nodes of 4, so the rest's
    # 1,606,950,912 B send 3/4 = 1,205,213,184 inside and 1/8 = 200,868,864 between. edp = 16 ÷ 8 = 2, ranks 8 apart.
    row = _mixtral(gpus=16, nodes=2, tp=2, ep=8, etp=1)[Stage.ZERO1]
    found = [(link.transfer.scope, link.span, link.buffer, link.inside, link.between) for link in row.links]
    rest = (Scope.GROUP, Span(8, 2), 1_606_950_912, 1_205_213_184, 200_868_864)
    assert found == [rest, EXPERTS_LINK] * 2


def test_ep_4_in_one_node_keeps_the_experts_group_inside_it() -> None:
    # 8 GPUs, ep = 4: two experts a card, 32 × 2 × 176,160,768 = 11,274,289,152 weights; edp = 8 ÷ 4 = 2, ranks
    # 4 apart (ep × etp × edp = 8 ≤ a node's 8 cards): 22,548,578,304 B, half of it sent inside the node.
    # The rest, 1,605,636,096 weights over dp = 8: 7/8 of 3,211,272,192 B = 2,809,863,168.
    row = _mixtral(gpus=8, ep=4, etp=1)[Stage.ZERO1]
    found = [(link.transfer.scope, link.span, link.buffer, link.inside, link.between) for link in row.links]
    experts = (Scope.EXPERTS, Span(2, 1), 22_548_578_304, 11_274_289_152, 0)
    assert found == [(Scope.GROUP, Span(8, 1), 3_211_272_192, 2_809_863_168, 0), experts] * 2


@pytest.mark.parametrize(
    "query",
    [
        {"gpus": 16, "nodes": 2},  # ep = 1: the experts ÷ tp with the rest, one group
        {"gpus": 16, "nodes": 2, "tp": 2},
        {"gpus": 8, "tp": 2, "ep": 2, "etp": 1},  # ep × etp = tp: edp is dp, the same group
    ],
)
def test_where_the_experts_group_is_the_data_parallel_one_each_collective_moves_the_whole_card(
    query: dict[str, int],
) -> None:
    # With ep × etp = tp the routed experts shard with the rest: one collective each, of the card's weights.
    for stage in Stage:
        row = _mixtral(**query)[stage]
        assert all(link.transfer.scope is not Scope.EXPERTS for link in row.links)
        assert all(link.buffer == 2 * row.card_params for link in row.links)


@pytest.mark.parametrize(
    "query",
    [
        {"ep": 8, "etp": 1},
        {"tp": 2, "ep": 8, "etp": 1},
        {"tp": 2, "ep": 4},  # etp as tp: 4 × 2 = 8 ranks, edp 2
        {"ep": 4, "etp": 1, "pp": 2, "microbatches": 4},
    ],
)
@pytest.mark.parametrize("stage", list(Stage))
def test_the_steps_tally_is_the_tables_traffic_with_the_experts_apart(query: dict[str, int], stage: Stage) -> None:
    report = _mixtral(gpus=16, nodes=2, **query)
    last, row = report.step(stage)[LAST_PHASE], report[stage]
    assert any(link.transfer.scope is Scope.EXPERTS for link in row.links)
    assert last.tally_p == row.communication_p
    # The table rounds each collective's bytes up to a whole byte.
    assert 0 <= row.inside_bytes - last.inside_so_far < len(row.links)
    assert 0 <= row.between_bytes - last.between_so_far < len(row.links)
