"""The model cut's traffic by link, worked by hand for Llama 3 8B (docs/wire.md, "The model cut's traffic").

Llama 3 8B: hidden h = 4,096, 32 blocks, 8 K/V heads of 128 (kv = 1,024); its default sequence s = 8,192 and
one sequence a micro-batch (b = 1). One micro-batch's activations in bf16: a = b · s · h · 2 B =
8,192 × 4,096 × 2 = 67,108,864 B (64 MiB).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from app.domain.activations import Recompute
from app.domain.architecture import ModelName
from app.domain.cut_wire import NO_CUT_WIRE, Parallel, cards, cut_wire
from app.domain.parallel import Cut
from app.domain.presets import PRESETS
from app.domain.report import run_report
from app.domain.scenario import Inputs, resolve
from app.domain.stages import Stage

A = 8_192 * 4_096 * 2
"""One micro-batch's activations of Llama 3 8B, b · s · h in bf16: 67,108,864 B."""
GIB = 2**30


def _llama(**knobs: Any) -> Any:
    return resolve(Inputs(model=ModelName.LLAMA_3_8B, **knobs)).run


def _by_link(**knobs: Any) -> list[tuple[Parallel, int, int, int, int]]:
    cut = run_report(_llama(**knobs))[Stage.ZERO3].cut
    return [(link.kind, link.count, link.buffer, link.inside, link.between) for link in cut.links]


def test_the_hand_sums_use_llama_3_8bs_shape() -> None:
    arch = PRESETS[ModelName.LLAMA_3_8B].architecture
    assert arch is not None
    assert (arch.hidden, arch.layers, arch.kv_heads * arch.head_dim, arch.default_seq) == (4_096, 32, 1_024, 8_192)
    assert A == 64 * 2**20


@pytest.mark.parametrize(
    ("knobs", "expected"),
    [
        # tp = 2: 4 all-reduces a block × 32 blocks = 128, each 2 · (2−1)/2 · a = a a card: 128 a = 8 GiB, inside.
        ({"tp": 2}, [(Parallel.TP, 128, A, 128 * A, 0)]),
        # tp = 8: each 2 · 7/8 · a = 1.75 a: 224 a = 15,032,385,536 B (14 GiB), inside.
        ({"tp": 8}, [(Parallel.TP, 128, A, 15_032_385_536, 0)]),
        # with sp: an all-gather and a reduce-scatter for each, (t−1)/t · a each: the same bytes.
        ({"tp": 8, "sp": True}, [(Parallel.TP, 128, A, 15_032_385_536, 0)]),
        # pp = 2, 8 micro-batches, one node of 8: stage 0 sends 8 activations forward, stage 1 their 8 gradients
        # back; each card 8 a = 536,870,912 B, inside (stage 1 is ranks 4-7 of the same node).
        ({"pp": 2, "microbatches": 8}, [(Parallel.PP, 8, A, 8 * A, 0)]),
        # the same on 2 nodes of 8: a stage is 8 ranks, a node; every boundary crosses: 8 a between nodes.
        ({"gpus": 16, "nodes": 2, "pp": 2, "microbatches": 8}, [(Parallel.PP, 8, A, 0, 8 * A)]),
        # pp = 4 on one node: a middle stage sends forward and backward, 2 × 8 = 16 sends.
        ({"pp": 4, "microbatches": 8}, [(Parallel.PP, 16, A, 16 * A, 0)]),
        # interleaved, vpp = 2, pp = 2: each card keeps 2 chunks; stage 0 sends forward from both and backward
        # from its second (its first is the model's first): 3 sends a micro-batch × 8.
        ({"pp": 2, "vpp": 2, "microbatches": 8}, [(Parallel.PP, 24, A, 24 * A, 0)]),
        # tp = 2 with sp and pp = 2: each card of the group sends its half of the activation, a / 2.
        (
            {"gpus": 16, "nodes": 2, "tp": 2, "sp": True, "pp": 2, "microbatches": 8},
            [(Parallel.TP, 16 * 4 * 8, A, 16 * 4 * 8 * A, 0), (Parallel.PP, 8, A // 2, 0, 4 * A)],
        ),
        # cp = 2: s / cp = 4,096 tokens; K and V, 1,024 wide each: 2 × 4,096 × 1,024 × 2 B = 16 MiB a pass.
        # Forward: cp − 1 = 1 pass a block; backward K, V, dK and dV: twice that; 32 blocks: 3 × 32 × 16 MiB.
        ({"cp": 2}, [(Parallel.CP, 64, 16 * 2**20, 1_610_612_736, 0)]),
    ],
)
def test_the_cuts_bytes_by_link_by_hand(knobs: dict[str, Any], expected: list[Any]) -> None:
    assert _by_link(**knobs) == expected


def test_tp_and_cp_on_two_nodes_the_ring_crosses_and_the_group_stays() -> None:
    # tp = 8 fills a node; cp = 2: the next card of the ring is 8 ranks on, in the other node.
    # TP: a / cp = 32 MiB a buffer, 1.75 × 32 MiB × 128 = 7 GiB inside. CP: K and V a card are 1,024 / 8 wide:
    # 2 × 4,096 × 128 × 2 B = 2 MiB a pass, 3 × 32 passes = 192 MiB between nodes.
    assert _by_link(gpus=16, nodes=2, tp=8, cp=2) == [
        (Parallel.TP, 128, A // 2, 7 * GIB, 0),
        (Parallel.CP, 64, 2 * 2**20, 0, 192 * 2**20),
    ]


def test_full_recomputation_adds_the_forwards_collectives_again() -> None:
    # 6 all-reduces a block instead of 4; the ring's forward pass again: 4 passes of 16 MiB instead of 3.
    assert _by_link(tp=2, recompute=Recompute.FULL) == [(Parallel.TP, 192, A, 192 * A, 0)]
    assert _by_link(cp=2, recompute=Recompute.FULL) == [(Parallel.CP, 96, 16 * 2**20, 4 * 32 * 16 * 2**20, 0)]


def test_tensor_parallelism_matches_narayanan_et_als_stated_volume() -> None:
    # Narayanan et al. 2021 §4.1: with tensor parallelism "tensors of total size bsh need to be all-reduced
    # among t model replicas twice each in the forward and backward pass for each layer for each
    # microbatch, leading to a total communication of 8bsh((t−1)/t) per layer per device".
    for t in (2, 4, 8):
        tp = _by_link(tp=t)[0]
        per_layer_elements = Fraction(tp[3], 32 * 2)  # 32 layers, 2 B an element
        assert per_layer_elements == 8 * 8_192 * 4_096 * Fraction(t - 1, t)


def test_the_pipeline_matches_narayanan_et_als_stated_volume() -> None:
    # Narayanan et al. 2021 §4.1: "the total amount of communication between every pair of consecutive devices
    # (for either the forward or backward pass) for each microbatch is bsh".
    assert _by_link(pp=2)[0][3] == 8_192 * 4_096 * 2  # one micro-batch, one direction, 2 B an element


def test_sequence_parallelism_sends_what_tensor_parallelism_does() -> None:
    # Korthikanti et al. 2022 §4.2.2: four all-gathers and four reduce-scatters in place of four all-reduces,
    # "the communication bandwidth used for tensor parallelism and tensor together with sequence parallelism
    # are the same".
    for t in (2, 4, 8):
        assert _by_link(tp=t, sp=True) == _by_link(tp=t)


@pytest.mark.parametrize(
    ("knobs", "bubble"),
    [
        ({"pp": 2, "microbatches": 8}, Fraction(1, 8)),
        ({"pp": 4, "microbatches": 8}, Fraction(3, 8)),
        ({"pp": 4, "vpp": 2, "microbatches": 8}, Fraction(3, 16)),
        ({"tp": 2}, Fraction(0)),
    ],
)
def test_the_bubble_is_added_to_the_step(knobs: dict[str, Any], bubble: Fraction) -> None:
    run = _llama(**knobs)
    cut = cut_wire(run)
    assert cut.bubble == bubble
    # One card's compute: 6 × 8,030,261,248 × 8,192 tokens × m / (tp × pp × cp) at 989e12 × 40%.
    m, parts = run.cut.microbatches, run.cut.model_parallel
    compute = Fraction(6 * 8_030_261_248 * 8_192 * m, 395_600_000_000_000 * parts)
    assert cut.compute == compute
    assert cut.bubble_seconds == bubble * compute
    assert cut.step == compute + bubble * compute + cut.wire


def test_the_time_on_the_wire_by_hand() -> None:
    # pp = 2 on 2 nodes of 8: 8 a = 536,870,912 B between nodes at 400 Gb/s = 50e9 B/s.
    cut = cut_wire(_llama(gpus=16, nodes=2, pp=2, microbatches=8))
    assert (cut.inside_seconds, cut.between_seconds) == (Fraction(0), Fraction(536_870_912, 50 * 10**9))
    # tp = 2: 8 GiB inside at 450 GB/s.
    cut = cut_wire(_llama(tp=2))
    assert (cut.inside_seconds, cut.between_seconds) == (Fraction(8 * GIB, 450 * 10**9), Fraction(0))


def test_no_cut_moves_nothing_and_every_stage_reports_it() -> None:
    run = _llama()
    assert cut_wire(run) == NO_CUT_WIRE
    assert all(row.cut == NO_CUT_WIRE for row in run_report(run))


def test_a_bare_weight_count_has_no_shape_and_says_so() -> None:
    run = resolve(Inputs(params=30 * 10**9, tp=2, pp=2, microbatches=4)).run
    cut = cut_wire(run)
    assert (cut.known, cut.links, cut.bubble) == (False, (), Fraction(1, 4))


@pytest.mark.parametrize(
    ("cut", "gpus", "per_node", "crossing"),
    [
        # pp = 2 on 2 nodes of 8: stage 1 is the second node; every card's neighbour is there.
        (Cut(pp=2), 16, 8, {True}),
        # pp = 2 on one node of 8: never.
        (Cut(pp=2), 8, 8, {False}),
        # pp = 4 on 2 nodes of 8, stages of 4 ranks: stage 0 → 1 inside, 1 → 2 across, 2 → 3 inside.
        (Cut(pp=4), 16, 8, {False, True}),
    ],
)
def test_which_pipeline_boundaries_cross_nodes_follows_the_rank_order(
    cut: Cut, gpus: int, per_node: int, crossing: set[bool]
) -> None:
    found = cards(cut, gpus, per_node)
    assert {c.forward_crosses for c in found if c.forward_sends} == crossing


def test_pp_4_on_two_nodes_the_most_loaded_card_sends_between_nodes() -> None:
    # Stage 1 (ranks 4-7) sends forward to stage 2 in the other node and backward to stage 0 in its own:
    # 8 a between nodes and 8 a inside, the slowest card.
    assert _by_link(gpus=16, nodes=2, pp=4, microbatches=8) == [(Parallel.PP, 16, A, 8 * A, 8 * A)]


# Expert parallelism's all-to-alls (docs/moe.md). Mixtral 8x7B at s = 4,096, b = 1, ep = 8 in one node of 8: each
# card's 4,096 tokens × k = 2 copies × h = 4,096 × 2 B = 67,108,864 B a dispatch; an all-to-all over 8 cards sends
# 7/8 of it, 58,720,256 B, all inside the node. 2 forward + 2 backward a block × 32 blocks = 128 all-to-alls:
# 128 × 58,720,256 = 7,516,192,768 B (7 GiB) a step.
def _ep_links(model: ModelName, **knobs: Any) -> list[tuple[Parallel, int, int, int, int]]:
    run = resolve(Inputs(model=model, batch=1, **knobs)).run
    cut = run_report(run)[Stage.ZERO3].cut
    return [(link.kind, link.count, link.buffer, link.inside, link.between) for link in cut.links]


def test_mixtrals_all_to_alls_in_a_node_by_hand() -> None:
    assert _ep_links(ModelName.MIXTRAL_8X7B, seq=4096, ep=8) == [(Parallel.EP, 128, 67_108_864, 7_516_192_768, 0)]


def test_full_recomputation_runs_the_dispatch_and_combine_again() -> None:
    links = _ep_links(ModelName.MIXTRAL_8X7B, seq=4096, ep=8, recompute=Recompute.FULL)
    assert links == [(Parallel.EP, 192, 67_108_864, 192 * 58_720_256, 0)]


def test_a_capacity_factor_pads_what_the_all_to_alls_move() -> None:
    # 1.25: ⌈8,192 / 8 × 1.25⌉ = 1,280 rows for each of 8 experts, 10,240 × 4,096 × 2 B = 83,886,080 B.
    links = _ep_links(ModelName.MIXTRAL_8X7B, seq=4096, ep=8, capacity_factor=Fraction(5, 4))
    assert links == [(Parallel.EP, 128, 83_886_080, 128 * 83_886_080 * 7 // 8, 0)]


def test_deepseek_v3s_group_of_16_spans_two_nodes() -> None:
    # 58 mixture-of-experts blocks (the first 3 dense), k = 8, h = 7,168: 4,096 × 8 × 7,168 × 2 = 469,762,048 B a
    # dispatch, 1/16 of it, 29,360,128 B, to each of the 15 others: 7 in the card's node, 8 in the other.
    count = 4 * 58
    links = _ep_links(ModelName.DEEPSEEK_V3, seq=4096, gpus=16, gpus_per_node=8, ep=16)
    assert links == [(Parallel.EP, count, 469_762_048, count * 29_360_128 * 7, count * 29_360_128 * 8)]


def test_the_expert_parallel_group_is_ep_ranks_etp_apart() -> None:
    # Megatron's expert rank order, etp fastest: with etp = 2 rank 0's group is ranks 0, 2, 4, …, 14; in a node of
    # 8, three others (2, 4, 6) are in its node and four (8 … 14) in the next.
    places = cards(Cut(ep=8, etp=2), 16, 8)
    assert {(place.ep_inside, place.ep_between) for place in places} == {(3, 4)}


def test_sequence_parallelism_sends_each_cards_share_of_the_tokens() -> None:
    # tp = 2 with sp: each card dispatches its 2,048 tokens, half the buffer; tp's own all-reduces beside it.
    links = _ep_links(ModelName.MIXTRAL_8X7B, seq=4096, ep=4, tp=2, sp=True)
    ep = [link for link in links if link[0] is Parallel.EP]
    assert ep == [(Parallel.EP, 128, 33_554_432, 128 * 33_554_432 * 3 // 4, 0)]
