"""Traffic by link and the time on the wire, worked by hand (docs/wire.md gives the sums).

Per card, a collective over n cards in k nodes (g in each) sends (g−1)/g of its buffer inside its node
and (k−1)/n between nodes; an all-reduce twice that.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from app.domain.accounting import Setup
from app.domain.architecture import PRESETS, ModelName
from app.domain.hardware import Fabric
from app.domain.report import run_report
from app.domain.run import Run, groups_refused
from app.domain.scenario import Inputs, resolve
from app.domain.stages import Stage

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
