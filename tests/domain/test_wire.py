"""Traffic by link and the time on the wire, worked by hand (docs/wire.md gives the sums).

Per card, a collective over n cards in k nodes (g in each) sends (g−1)/g of its buffer inside its node
and (k−1)/n between nodes; an all-reduce twice that.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from typing import Any

import pytest

from app.domain.accounting import Accounting, Setup
from app.domain.architecture import ModelName
from app.domain.communication import Whose
from app.domain.hardware import Fabric
from app.domain.presets import PRESETS
from app.domain.recipes import MIXED_ADAM, RECIPES, Band, RecipeName
from app.domain.report import run_report
from app.domain.run import Run, groups_refused
from app.domain.scenario import Inputs, resolve
from app.domain.sizing import loaded_card
from app.domain.stages import Stage
from app.domain.wire import moved_params
from app.domain.zeropp import zeropp_between_ratio

SEED = 30 * 10**9
LLAMA_3_8B = PRESETS[ModelName.LLAMA_3_8B].params


def test_llama_3_8b_is_the_count_its_hand_sums_use() -> None:
    assert LLAMA_3_8B == 8_030_261_248


def _links(run: Run, stage: Stage) -> list[tuple[str, int, int]]:
    return [(str(link.transfer.collective), link.inside, link.between) for link in run_report(run)[stage].links]


# Hybrid ZeRO-3 on 2 nodes × 4, shard groups of 4 (one node each), bf16 weights and gradients (2 B):
# - each gather and the reduce-scatter: 4 cards in 1 node, a buffer of 2P: inside 3/4 · 2P, between 0;
# - the gradient slices' all-reduce: 2 replicas in 2 nodes (g = 1), a buffer of 2P/4: between 2 · 1/2 · 2P/4.
@pytest.mark.parametrize(
    ("params", "gather", "replicas"),
    [
        (SEED, 45 * 10**9, 15 * 10**9),  # 3/4 · 60 GB; 2 · 1/2 · 15 GB
        (LLAMA_3_8B, 12_045_391_872, 4_015_130_624),  # 3/4 · 16,060,522,496; 2 · 1/2 · 4,015,130,624
    ],
)
def test_hybrid_zero3_on_two_nodes_of_four_by_hand(params: int, gather: int, replicas: int) -> None:
    run = Run(params=params, gpus=8, nodes=2, shard_size=4)
    assert _links(run, Stage.ZERO3) == [
        ("all-gather", gather, 0),
        ("all-gather", gather, 0),
        ("reduce-scatter", gather, 0),
        ("all-reduce", 0, replicas),
    ]
    row = run_report(run)[Stage.ZERO3]
    assert (row.inside_bytes, row.between_bytes) == (3 * gather, replicas)
    # 16 B a weight split 4 ways: 16Ψ/4, as one node of 4 would keep.
    assert row.per_gpu_bytes == 16 * params // 4
    assert row.communication_p == Fraction(7, 2)  # 3P in the group, 2P/4 across the replicas


# Flat ZeRO-3 on the same 2 nodes × 4: each collective over 8 cards in 2 nodes: inside 3/4 · 2P,
# between 1/8 · 2P.
@pytest.mark.parametrize(
    ("params", "inside", "between"),
    [(SEED, 45 * 10**9, 7_500_000_000), (LLAMA_3_8B, 12_045_391_872, 2_007_565_312)],
)
def test_flat_zero3_on_two_nodes_of_four_by_hand(params: int, inside: int, between: int) -> None:
    run = Run(params=params, gpus=8, nodes=2)
    assert _links(run, Stage.ZERO3) == [
        ("all-gather", inside, between),
        ("all-gather", inside, between),
        ("reduce-scatter", inside, between),
    ]


def test_a_collective_sends_a_flat_rings_n_minus_one_over_n_in_all() -> None:
    # Inside and between add up to (n−1)/n of the buffer: 7/8 of 2P on 8 cards, however the nodes fall.
    for nodes in (1, 2, 4, 8):
        run = Run(params=SEED, gpus=8, nodes=nodes)
        for link in run_report(run)[Stage.ZERO3].links:
            assert link.inside + link.between == 2 * SEED * 7 // 8


def test_data_parallel_all_reduce_moves_twice_n_minus_one_over_n() -> None:
    run = Run(params=SEED, gpus=8)  # one node of 8
    (reduce, gather) = run_report(run)[Stage.DP].links
    assert reduce.inside + gather.inside == 2 * (2 * SEED) * 7 // 8
    assert "(n−1)/n" in reduce.algorithm


def test_zeropp_cuts_the_bytes_between_nodes_to_a_quarter_of_zero3s() -> None:
    # The ZeRO++ paper: 3M to 0.75M across nodes, with hpZ inside the node, int8 weights and int4 gradients.
    flat = Run(params=SEED, gpus=16, nodes=2)
    zeropp = replace(flat, setup=Setup(hpz=8), qwz=True, qgz=True)
    before, after = run_report(flat)[Stage.ZERO3], run_report(zeropp)[Stage.ZERO3]
    assert Fraction(after.between_bytes, before.between_bytes) == Fraction(1, 4)
    # By hand, 16 cards in 2 nodes: between = 1/16 of each buffer; 3 × 2P before, P + 0 + P/2 after.
    assert before.between_bytes == 3 * 2 * SEED // 16
    assert after.between_bytes == (SEED + SEED // 2) // 16
    quantized = [link.quantized for link in after.links]
    assert quantized == ["int8", "", "int4"]  # hpZ's backward gather reads its own bf16 copy, in the node


def test_hpz_adds_its_copy_of_the_weights_split_across_the_node() -> None:
    flat = Run(params=SEED, gpus=16, nodes=2)
    zeropp = replace(flat, setup=Setup(hpz=8))
    extra = run_report(zeropp)[Stage.ZERO3].per_gpu_bytes - run_report(flat)[Stage.ZERO3].per_gpu_bytes
    assert extra == 2 * SEED // 8  # 2Ψ/hpz
    # Only ZeRO-3 has it: the other stages keep their bytes.
    for stage in (Stage.DP, Stage.ZERO1, Stage.ZERO2):
        assert run_report(zeropp)[stage].per_gpu_bytes == run_report(flat)[stage].per_gpu_bytes


def test_the_time_on_the_wire_and_the_compute_by_hand() -> None:
    # Hybrid ZeRO-3 on 2 × 4, the seed's 30B, one sequence of 4,096 tokens a card, the H100 defaults:
    # 135 GB at 450 GB/s = 0.3 s inside; 15 GB at 400 Gb/s = 50 GB/s = 0.3 s between;
    # 6 × 30e9 × 4,096 = 7.3728e14 FLOP at 40% of 989 TFLOP/s = 3.956e14 FLOP/s: 1.8637... s.
    run = Run(params=SEED, gpus=8, nodes=2, shard_size=4, batch=1, seq=4096)
    time = run_report(run)[Stage.ZERO3].time
    assert time.inside == Fraction(3, 10)
    assert time.between == Fraction(3, 10)
    assert time.compute == Fraction(6 * SEED * 4096, 989 * 10**12 * 40 // 100)
    assert 1.8636 < float(time.compute) < 1.8638
    assert time.hides is True
    # A tenth of the network: 3 s between nodes, more than the compute.
    slow = replace(run, links=Fabric(network=40))
    assert run_report(slow)[Stage.ZERO3].time.between == 3
    assert run_report(slow)[Stage.ZERO3].time.hides is False


def test_no_micro_batch_has_no_compute_time() -> None:
    time = run_report(Run(params=SEED, gpus=8, batch=0))[Stage.ZERO3].time
    assert time.compute is None
    assert time.hides is None


@pytest.mark.parametrize(
    ("gpus", "per_node", "shard", "hpz", "zeropp", "said"),
    [
        (8, 8, 3, 1, False, "shard=3 does not divide gpus=8"),
        (24, 8, 12, 1, False, "shard=12 does not line up with nodes of 8 GPUs"),
        (16, 8, 8, 8, True, "two answers to the slow link"),
        (16, 8, None, 3, True, "hpz=3 does not divide gpus=16"),
        (24, 8, None, 12, True, "hpz=12 does not line up with nodes of 8 GPUs"),
        (16, 8, 8, 1, False, ""),
        (16, 8, None, 8, True, ""),
    ],
)
def test_groups_refused_names_both_numbers(
    gpus: int, per_node: int, shard: int | None, hpz: int, zeropp: bool, said: str
) -> None:
    refused = groups_refused(gpus, per_node, shard, hpz, zeropp)
    assert said in refused if said else refused == ""


def test_a_run_refuses_a_shard_group_that_does_not_divide_its_cards() -> None:
    with pytest.raises(ValueError, match="shard=3 does not divide gpus=8"):
        Run(gpus=8, shard_size=3)


def test_the_scenario_carries_the_links_and_zeropp_into_the_run() -> None:
    scenario = resolve(Inputs(gpus=16, hpz=8, qwz=True, qgz=True, nvlink=900, network=200, tflops=500, mfu=50))
    run = scenario.run
    assert (run.setup.hpz, run.qwz, run.qgz) == (8, True, True)
    assert run.links == Fabric(900, 200, 500, 50)
    assert run.seq == scenario.seq


# hpZ wider than a node: its group's backward gathers cross nodes. Seed 30B (P), bf16 weights (2 B), qwZ's int8
# forward gather (1 B), qgZ's int4 reduce-scatter (0.5 B); a collective over n cards in k nodes sends (k−1)/n of
# its buffer between nodes per card.
@pytest.mark.parametrize(
    ("gpus", "nodes", "hpz", "between", "plain", "ratio"),
    [
        # 16 cards in 2 nodes of 8, hpZ over all 16 (2 nodes): forward P · 1/16, backward 2P · 1/16,
        # reduce-scatter P/2 · 1/16; plain ZeRO-3 3 × 2P · 1/16 = 11.25e9; 6.5625e9 / 11.25e9 = 7/12 = 0.583.
        (16, 2, 16, [1_875_000_000, 3_750_000_000, 937_500_000], 11_250_000_000, Fraction(7, 12)),
        # 16 cards in 4 nodes of 4, hpZ over 8 (2 nodes): forward P · 3/16, backward 2P · 1/8, reduce-scatter
        # P/2 · 3/16; plain 3 × 2P · 3/16 = 33.75e9; 15.9375e9 / 33.75e9 = 17/36.
        (16, 4, 8, [5_625_000_000, 7_500_000_000, 2_812_500_000], 33_750_000_000, Fraction(17, 36)),
        # 24 cards in 3 nodes of 8, hpZ over all 24: forward P · 2/24, backward 2P · 2/24, reduce-scatter
        # P/2 · 2/24; plain 3 × 2P · 2/24 = 15e9; 8.75e9 / 15e9 = 7/12.
        (24, 3, 24, [2_500_000_000, 5_000_000_000, 1_250_000_000], 15_000_000_000, Fraction(7, 12)),
        # hpZ a node's 8 cards, 16 in 2 nodes: the paper's case, the backward gather inside: 0.25.
        (16, 2, 8, [1_875_000_000, 0, 937_500_000], 11_250_000_000, Fraction(1, 4)),
        # hpZ a node's 4 cards, 16 in 4 nodes: forward P · 3/16, 0, P/2 · 3/16 = 7.875e9 of 33.75e9.
        (16, 4, 4, [5_625_000_000, 0, 2_812_500_000], 33_750_000_000, Fraction(1, 4)),
    ],
)
def test_hpz_wider_than_a_node_sends_its_backward_gathers_between_nodes(
    gpus: int, nodes: int, hpz: int, between: list[int], plain: int, ratio: Fraction
) -> None:
    flat = Run(params=SEED, gpus=gpus, nodes=nodes)
    zeropp = replace(flat, setup=Setup(hpz=hpz), qwz=True, qgz=True)
    assert [link.between for link in run_report(zeropp)[Stage.ZERO3].links] == between
    assert run_report(flat)[Stage.ZERO3].between_bytes == plain
    assert zeropp_between_ratio(zeropp) == ratio == Fraction(sum(between), plain)


def test_zeropp_on_one_node_has_no_ratio_between_nodes() -> None:
    assert zeropp_between_ratio(replace(Run(params=SEED, gpus=8), setup=Setup(hpz=8), qwz=True)) is None


# Megatron-LM reduces its gradients in the fp32 main_grad buffer (4 B) and gathers bf16 weights (2 B). Llama 3 8B
# (P = 8,030,261,248) on 8 cards in one node; a ring collective sends (n−1)/n = 7/8 of its buffer a card.
# - data parallelism's all-reduce of fp32 gradients: 2 × 4P = 64,242,089,984 B in the P count; 2 · 7/8 · 4P sent;
# - the distributed optimizer: an fp32 reduce-scatter 4P and a bf16 all-gather 2P: 48,181,567,488 B; 7/8 · 6P sent;
# - ZeRO-3's collectives (Megatron-FSDP's): two bf16 gathers and an fp32 reduce-scatter: 8P; 7/8 · 8P sent.
@pytest.mark.parametrize(
    ("stage", "p_count", "inside", "buffers"),
    [
        (Stage.DP, 64_242_089_984, 56_211_828_736, [32_121_044_992, 32_121_044_992]),
        (Stage.ZERO1, 48_181_567_488, 42_158_871_552, [32_121_044_992, 16_060_522_496]),
        (Stage.ZERO2, 48_181_567_488, 42_158_871_552, [32_121_044_992, 16_060_522_496]),
        (Stage.ZERO3, 64_242_089_984, 56_211_828_736, [16_060_522_496, 16_060_522_496, 32_121_044_992]),
    ],
)
def test_megatrons_traffic_reduces_its_fp32_main_grad(
    stage: Stage, p_count: int, inside: int, buffers: list[int]
) -> None:
    run = resolve(Inputs(model=ModelName.LLAMA_3_8B, gpus=8, accounting=Accounting.MEGATRON)).run
    row = run_report(run)[stage]
    assert row.communication_bytes == p_count
    assert row.inside_bytes == inside
    assert [link.buffer for link in row.links] == buffers
    assert 2 * 4 * LLAMA_3_8B == 64_242_089_984
    assert (4 + 2) * LLAMA_3_8B == 48_181_567_488


GRADIENTLESS = replace(
    MIXED_ADAM,
    specs=tuple(replace(s, copies=0) if s.band is Band.GRADIENTS else s for s in MIXED_ADAM.specs),
)
"""Mixed-precision Adam with a gradients band of 0 B: what qgZ quantizes, where there is nothing."""


def test_qgz_sends_no_more_than_the_gradients_are() -> None:
    # No gradient bytes: the reduce-scatter sends 0, not int4's half a byte × 30e9 = 15e9 B.
    run = Run(params=SEED, gpus=16, nodes=2, recipe=GRADIENTLESS, qgz=True)
    reduce = run_report(run)[Stage.ZERO3].links[-1]
    assert (str(reduce.transfer.collective), reduce.buffer, reduce.inside, reduce.between) == (
        "reduce-scatter",
        0,
        0,
        0,
    )


def test_the_replicas_all_reduce_a_slice_rounded_up_to_whole_weights() -> None:
    # 30e9 + 1 weights in shard groups of 4: a slice is ⌈(30e9 + 1) / 4⌉ = 7,500,000,001 weights, 2 B each;
    # all-reduced across 2 replicas in 2 nodes: 2 · 1/2 · 15,000,000,002 B between nodes.
    run = Run(params=SEED + 1, gpus=8, nodes=2, shard_size=4)
    replicas = run_report(run)[Stage.ZERO3].links[-1]
    assert (replicas.buffer, replicas.between) == (15_000_000_002, 15_000_000_002)


def test_a_lora_runs_compute_is_every_weights_forward_and_backward() -> None:
    # 1% of the seed's 30B trains; the passes still run through all 30e9 weights:
    # 6 × 30e9 × 4,096 = 7.3728e14 FLOP at 40% of 989 TFLOP/s, 1.8637 s (not 0.0186 s).
    run = Run(params=SEED, gpus=8, frozen=SEED * 99 // 100, batch=1, seq=4096)
    compute = run_report(run)[Stage.ZERO3].time.compute
    assert compute == Fraction(737_280_000_000_000, 395_600_000_000_000)
    assert compute is not None
    assert 1.8636 < float(compute) < 1.8638


def test_hsdp_data_parallelism_all_reduces_over_every_card() -> None:
    # Data parallelism keeps no shard group: its all-reduce runs over all 8 cards in 2 nodes, each half sending
    # 3/4 · 60e9 = 45e9 B inside and 1/8 · 60e9 = 7.5e9 B between nodes, as without shard=4.
    run = Run(params=SEED, gpus=8, nodes=2, shard_size=4)
    assert _links(run, Stage.DP) == [
        ("reduce-scatter", 45 * 10**9, 7_500_000_000),
        ("all-gather", 45 * 10**9, 7_500_000_000),
    ]


def test_the_traffic_hides_when_it_takes_exactly_the_compute() -> None:
    # The seed's hybrid 2 × 4 run above: 0.3 s inside + 0.3 s between = 0.6 s. A compute of exactly 0.6 s:
    # 7.3728e14 FLOP / 0.6 s = 1.2288e15 FLOP/s, 40% of 3,072 TFLOP/s.
    run = Run(params=SEED, gpus=8, nodes=2, shard_size=4, batch=1, seq=4096, links=Fabric(tflops=3072))
    time = run_report(run)[Stage.ZERO3].time
    assert (time.wire, time.compute) == (Fraction(3, 5), Fraction(3, 5))
    assert time.hides is True


def test_qwz_sends_no_more_than_the_weights_are() -> None:
    # QLoRA's NF4 weights take 2,113/4,096 B a weight (half a byte and their block constants), under int8's 1 B:
    # the forward gather sends them as they are: 30e9 × 2,113/4,096 = 15,476,074,218.75 B; 1/16 of it between nodes,
    # 967,254,638.67 B; each rounded up to a whole byte.
    run = Run(params=SEED, gpus=16, nodes=2, recipe=RECIPES[RecipeName.QLORA_NF4], qwz=True)
    forward = run_report(run)[Stage.ZERO3].links[0]
    assert (forward.buffer, forward.between) == (15_476_074_219, 967_254_639)


# ZeRO with the model cut: Llama 3 8B on 16 GPUs in 2 nodes of 8, b = 1, s = 8,192, mixed precision (2 B).
# A card keeps its stage's layers ÷ tp (docs/parallelism.md): with tp = pp = 2 the first stage's card keeps
# 16 × (218,103,808/2 + 8,192) + 525,336,576/2 = 2,007,629,824 weights, the last's 4,096 more (the final norm),
# 2,007,633,920; with tp = 2 alone, 32 × 109,060,096 + 525,336,576 + 4,096 = 4,015,263,744.
# Megatron's rank order (tp fastest, cp, dp, pp) puts a ZeRO group's dp × cp cards tp ranks apart:
# - tp = pp = 2: dp = 4, ranks 0, 2, 4, 6 (a stage is a node): 4 cards in 1 node, inside 3/4 of the buffer;
# - tp = 2: dp = 8, ranks 0, 2, ..., 14: 8 cards in 2 nodes of 4, inside 3/4, between 1/8.
FIRST_STAGE, LAST_STAGE, TP2 = 2_007_629_824, 2_007_633_920, 4_015_263_744


def _llama_cut(**knobs: Any) -> Run:
    return resolve(Inputs(model=ModelName.LLAMA_3_8B, gpus=16, nodes=2, **knobs)).run


@pytest.mark.parametrize(
    ("knobs", "stage", "card", "rings", "inside", "between"),
    [
        # ZeRO-3, tp = pp = 2: 3 × 3/4 · 2 × 2,007,633,920 inside, nothing between (the last stage is the loaded one).
        ({"tp": 2, "pp": 2}, Stage.ZERO3, LAST_STAGE, (4, 1), 3_011_450_880, 0),
        # ZeRO-3, tp = 2: 3/4 · 8,030,527,488 inside, 1/8 of it between, a collective.
        ({"tp": 2}, Stage.ZERO3, TP2, (8, 2), 6_022_895_616, 1_003_815_936),
        # ZeRO-2, tp = 2: the same rings, two of them.
        ({"tp": 2}, Stage.ZERO2, TP2, (8, 2), 6_022_895_616, 1_003_815_936),
    ],
)
def test_zero_with_the_cut_moves_the_cards_own_weights_over_its_zero_group(
    knobs: dict[str, int], stage: Stage, card: int, rings: tuple[int, int], inside: int, between: int
) -> None:
    run = _llama_cut(**knobs)
    row = run_report(run)[stage]
    collectives = 3 if stage is Stage.ZERO3 else 2
    assert [(link.span.cards, link.span.nodes) for link in row.links] == [rings] * collectives
    assert [link.buffer for link in row.links] == [2 * card] * collectives
    assert [(link.inside, link.between) for link in row.links] == [(inside, between)] * collectives
    assert (row.inside_bytes, row.between_bytes) == (collectives * inside, collectives * between)
    # The ZeRO paper's units, P the card's own weights: 3P and 2P, and the bytes 2 B each.
    assert row.communication_p == collectives
    assert row.communication_bytes == collectives * 2 * card


def test_zero_with_the_cut_under_megatron_reduces_fp32_gradients() -> None:
    # Megatron's count is its first stage's card: the gradients' 4 B a weight, the weights' gather 2 B.
    row = run_report(_llama_cut(tp=2, pp=2, accounting=Accounting.MEGATRON))[Stage.ZERO1]
    assert [(link.buffer, link.inside, link.between) for link in row.links] == [
        (4 * FIRST_STAGE, 3 * FIRST_STAGE, 0),
        (2 * FIRST_STAGE, 3 * FIRST_STAGE // 2, 0),
    ]


def test_hybrid_zero_with_the_cut_places_its_replicas_a_shard_group_apart() -> None:
    # tp = 2, shard = 4: a shard group is ranks 0, 2, 4, 6 (one node); its 2 replicas are 8 ranks apart, 2 nodes.
    row = run_report(_llama_cut(tp=2, shard=4))[Stage.ZERO3]
    assert [(link.span.cards, link.span.nodes) for link in row.links] == [(4, 1)] * 3 + [(2, 2)]
    assert row.links[-1].between == 2 * TP2 // 4  # 2 · 1/2 · (2 B × its slice of 4,015,263,744 / 4)


@pytest.mark.parametrize(("knobs", "share"), [({"tp": 2, "pp": 2}, 4), ({"tp": 2}, 2), ({}, 1)])
def test_the_compute_is_the_cards_share_one_figure_with_the_cuts(knobs: dict[str, int], share: int) -> None:
    # 6 × 8,030,261,248 × 8,192 FLOP ÷ (tp × pp × cp) at 40% of 989 TFLOP/s.
    run = _llama_cut(**knobs)
    row = run_report(run)[Stage.ZERO3]
    assert row.time.compute == Fraction(6 * LLAMA_3_8B * 8192, share * 989 * 10**12 * 40 // 100)
    assert row.cut.compute == (row.time.compute if share > 1 else None)


@pytest.mark.parametrize(
    ("knobs", "inside", "between"),
    [
        # The first stage's card, loaded with 2 micro-batches in flight: 4 × 3/4 · 2 × 2,007,629,824 a collective.
        ({"tp": 2, "pp": 2}, 12_045_778_944, 0),
        # Uncut: 16 cards in 2 nodes, 4 × 7/8 · 16,060,522,496 inside and 4 × 1/16 of it between.
        ({}, 56_211_828_736, 4_015_130_624),
    ],
)
def test_zero3_gathers_and_reduce_scatters_in_each_micro_batch(
    knobs: dict[str, int], inside: int, between: int
) -> None:
    # FSDP2 reshards after the forward and after the backward, and keeps only its gradients' slice, so each of
    # 4 micro-batches gathers twice and reduce-scatters once: 4 × 3P. Data parallelism's all-reduce is once a step.
    one, four = run_report(_llama_cut(**knobs)), run_report(_llama_cut(microbatches=4, **knobs))
    assert four[Stage.ZERO3].communication_p == 12
    assert [(link.transfer.per_step, link.inside, link.between) for link in four[Stage.ZERO3].links] == [
        (4, inside, between)
    ] * 3
    assert four[Stage.ZERO3].links[0].transfer.description.endswith("once in each of the 4 micro-batches")
    assert four[Stage.ZERO3].time.compute == 4 * (one[Stage.ZERO3].time.compute or 0)
    assert four[Stage.DP].communication_p == 2


@pytest.mark.parametrize(("microbatches", "expected"), [(8, 24), (2, 6), (1, 3)])
def test_a_bare_counts_pipeline_stage_gathers_again_for_the_backward(microbatches: int, expected: int) -> None:
    # 70e9 weights cut by tp = 8 and pp = 2: a card's 4.375e9, all trained, so the backward's gather moves
    # them all, as the forward's and the reduce-scatter do: 3P a micro-batch (the Llama 3 70B preset's too).
    inputs = Inputs(params=70 * 10**9, gpus=64, tp=8, pp=2, microbatches=microbatches)
    run = resolve(inputs).run
    card = loaded_card(Stage.ZERO3, run)
    assert moved_params(run, Whose.REACHED, card) == 70 * 10**9 // 16
    assert resolve(inputs).report[Stage.ZERO3].communication_p == expected
