"""The most loaded card of a cut, against Korthikanti et al. 2022's Table 2, Megatron-LM's formula and hand sums.

docs/parallelism.md works each case. Llama 3 8B: L = 32 blocks, h = 4096, kv = 1024, f = 14336, a = 32,
v = 128,256 (untied); a block has 218,103,808 matrix weights and 8,192 norm weights; the embedding and the
output layer 525,336,576 each; the final norm 4,096.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from app.domain.accounting import Accounting, Setup
from app.domain.activations import Recompute, Shape, for_one_sequence
from app.domain.architecture import GPT_3_175B, LLAMA_3_1_405B, LLAMA_3_8B, Architecture
from app.domain.layers import model_layers
from app.domain.loaded import in_flight, megatron_activations, per_layer_at, stage_load
from app.domain.parallel import Cut
from app.domain.run import Run, groups_refused
from app.domain.sizing import layer_exceeds_card, report
from app.domain.stages import Stage

# Korthikanti et al. 2022, Table 2, per layer with tensor parallelism t: sbh(10 + 24/t + 5as/(ht)) without
# recomputation, sbh(34/t + 5as/(ht)) with sequence parallelism, sbh(10 + 24/t) and sbh(34/t) selective, 2sbh
# full. GPT-3 175B at s = 2048, b = 1, t = 8: sbh = 25,165,824, 5as/h = 80, so 5as/(ht) = 10.
SBH = 25_165_824
TABLE_2 = [
    (Recompute.NONE, False, SBH * (10 + 3 + 10)),
    (Recompute.NONE, True, SBH * (Fraction(34, 8) + 10)),
    (Recompute.SELECTIVE, False, SBH * (10 + 3)),
    (Recompute.SELECTIVE, True, SBH * Fraction(34, 8)),
    (Recompute.FULL, False, SBH * 2),
    # Table 2 has no row for full recomputation with sequence parallelism: Megatron-LM keeps the block's input
    # as the sequence-parallel region left it, 1/t of it.
    (Recompute.FULL, True, SBH * 2 // 8),
]


@pytest.mark.parametrize(("recompute", "sp", "expected"), TABLE_2)
def test_gpt3_per_layer_with_t_is_table_2(recompute: Recompute, sp: bool, expected: Fraction) -> None:
    assert per_layer_at(GPT_3_175B, Shape(1, 2048, recompute), Cut(tp=8, sp=sp)) == expected


# Llama 3 8B at s = 8192, b = 1: outside the region the two norms' and the two first projections' inputs,
# 8sbh = 8192 × 32,768; inside Q, K and V, the log-sum-exp, the output projection's input and the MLP's four,
# 4sbh + 4sb·kv + 4asb + 8sbf = 8192 × 135,296.
OUTSIDE, INSIDE = 8192 * 32_768, 8192 * 135_296
LLAMA_BLOCK = [
    (Cut(), OUTSIDE + INSIDE),
    (Cut(tp=2), OUTSIDE + INSIDE // 2),  # 822,607,872
    (Cut(tp=2, sp=True), (OUTSIDE + INSIDE) // 2),
    (Cut(tp=4, cp=2), (OUTSIDE + INSIDE // 4) // 2),
    (Cut(cp=4), (OUTSIDE + INSIDE) // 4),
]


@pytest.mark.parametrize(("cut", "expected"), LLAMA_BLOCK)
def test_llama_block_on_one_card_of_the_cut(cut: Cut, expected: int) -> None:
    assert per_layer_at(LLAMA_3_8B, Shape(1, 8192), cut) == expected


BLOCK_MATRICES, BLOCK_NORMS, TABLE = 218_103_808, 8_192, 525_336_576


@pytest.mark.parametrize(
    ("cut", "index", "params"),
    [
        (Cut(tp=2), 0, (32 * BLOCK_MATRICES + 2 * TABLE) // 2 + 32 * BLOCK_NORMS + 4096),
        # The first stage: 16 blocks and the embedding; the last: 16 blocks, the final norm and the output layer.
        (Cut(tp=2, pp=2), 0, 16 * (BLOCK_MATRICES // 2 + BLOCK_NORMS) + TABLE // 2),  # 2,007,629,824
        (Cut(tp=2, pp=2), 1, 16 * (BLOCK_MATRICES // 2 + BLOCK_NORMS) + TABLE // 2 + 4096),  # 2,007,633,920
        (Cut(pp=4), 1, 8 * (BLOCK_MATRICES + BLOCK_NORMS)),
        # Interleaved: 2 stages × 2 chunks of 8 blocks; stage 0 keeps blocks 1-8 and 17-24.
        (Cut(pp=2, vpp=2), 0, 16 * (BLOCK_MATRICES + BLOCK_NORMS) + TABLE),
    ],
)
def test_a_stage_keeps_its_layers_divided_by_tp_the_norms_whole(cut: Cut, index: int, params: int) -> None:
    assert stage_load(model_layers(LLAMA_3_8B, 0), LLAMA_3_8B.params, 0, None, cut, index).params == params


# Llama 3.1 405B: h = 16,384, kv = 1,024, f = 53,248, v = 128,256. A block's matrices 2 × 16,384² + 2 × 16,384
# × 1,024 + 3 × 16,384 × 53,248 = 3,187,671,040, its norms 32,768; the embedding and the output layer
# 2,101,346,304 each. pp = 16 as Meta trained it: 7, 8 × 14, 7 blocks.
BIG_BLOCK, BIG_NORMS, BIG_TABLE = 3_187_671_040, 32_768, 2_101_346_304


@pytest.mark.parametrize(
    ("index", "params"),
    [
        # The first stage: 7 blocks ÷ 8 and the embedding ÷ 8: 2,789,441,536 + 262,668,288 = 3,052,109,824.
        (0, 7 * (BIG_BLOCK // 8 + BIG_NORMS) + BIG_TABLE // 8),
        # A middle stage: 8 blocks ÷ 8, the norms whole: 8 × 398,491,648 = 3,187,933,184, the most loaded.
        (1, 8 * (BIG_BLOCK // 8 + BIG_NORMS)),
        (14, 8 * (BIG_BLOCK // 8 + BIG_NORMS)),
        # The last: 7 blocks, the final norm whole and the output layer ÷ 8: 3,052,126,208.
        (15, 7 * (BIG_BLOCK // 8 + BIG_NORMS) + 16_384 + BIG_TABLE // 8),
    ],
)
def test_405b_in_16_uneven_stages_keeps_7_8_and_7_blocks(index: int, params: int) -> None:
    layers, cut = model_layers(LLAMA_3_1_405B, 0), Cut(tp=8, pp=16)
    load = stage_load(layers, LLAMA_3_1_405B.params, 0, None, cut, index)
    assert load.params == params
    assert len([layer for layer in load.layers if layer.block]) == (7 if index in (0, 15) else 8)


def test_405b_in_16_uneven_stages_the_most_loaded_card_is_a_middle_stage() -> None:
    run = Run(params=LLAMA_3_1_405B.params, gpus=1024, layers=model_layers(LLAMA_3_1_405B, 0), cut=Cut(tp=8, pp=16))
    assert run.heaviest.params == 3_187_933_184
    # 3,052,109,824 + 3,052,126,208 + 14 × 3,187,933,184: one tensor rank of every stage.
    assert [card.params for card in run.cards] == [3_052_109_824, *[3_187_933_184] * 14, 3_052_126_208]


def test_interleaved_stage_holds_every_pp_th_chunk() -> None:
    load = stage_load(model_layers(LLAMA_3_8B, 0), LLAMA_3_8B.params, 0, None, Cut(pp=2, vpp=2), 0)
    assert [layer.block for layer in load.layers if layer.block] == [*range(1, 9), *range(17, 25)]


def test_a_tied_output_layer_is_a_second_copy_on_the_last_stage() -> None:
    # GPT-3 175B ties its output layer to its embedding (50,257 × 12,288 = 617,558,016): with pp = 2 the last
    # stage keeps a copy, with pp = 1 the one table serves both ends. Its 2,048 positions (25,165,824) are first.
    layers, table, positions, final_norm = model_layers(GPT_3_175B, 0), 617_558_016, 25_165_824, 2 * 12_288
    first, last = (stage_load(layers, GPT_3_175B.params, 0, None, Cut(pp=2), i).params for i in (0, 1))
    assert last - first == final_norm + table - table - positions
    assert stage_load(layers, GPT_3_175B.params, 0, None, Cut(tp=1, sp=False), 0).params == GPT_3_175B.params


@pytest.mark.parametrize(
    ("cut", "index", "expected"),
    [
        (Cut(pp=4, microbatches=8), 0, 4),  # 1F1B's first stage: min(pp, m)
        (Cut(pp=4, microbatches=8), 3, 1),
        (Cut(pp=4, microbatches=2), 0, 2),  # fewer micro-batches than stages
        (Cut(pp=4, vpp=2, microbatches=8), 0, 4 * (1 + Fraction(3, 8))),  # × 1 + (pp − 1)/(pp·vpp)
        (Cut(), 0, 1),
    ],
)
def test_micro_batches_in_flight(cut: Cut, index: int, expected: Fraction) -> None:
    assert in_flight(cut, index) == expected


def _llama(cut: Cut, accounting: Accounting = Accounting.PAPER, **kwargs: object) -> Run:
    activations = for_one_sequence(LLAMA_3_8B, 8192, Recompute.NONE)
    layers = model_layers(LLAMA_3_8B, 0, activations=activations)
    given: dict[str, object] = {"batch": 1, **kwargs}
    return Run(
        params=LLAMA_3_8B.params,
        gpus=8,
        layers=layers,
        largest_layer=LLAMA_3_8B.largest_layer,
        activations=activations,
        seq=8192,
        setup=Setup(accounting),
        cut=cut,
        **given,  # type: ignore[arg-type]
    )


def test_llama_tp2_pp2_the_first_stage_is_the_most_loaded() -> None:
    # 8 GPUs, tp = pp = 2: dp = 2. The first stage holds 2,007,629,824 weights and 2 micro-batches of its 16
    # blocks' activations (822,607,872 each, above); the last stage 4,096 weights more but one micro-batch.
    rows = {row.stage: row for row in report(_llama(Cut(tp=2, pp=2, microbatches=8)))}
    card = 2_007_629_824
    # DP 16 B; ZeRO-1 4 B whole and 12 B ÷ 2; ZeRO-2 2 B whole and 14 B ÷ 2; ZeRO-3 16 B ÷ 2.
    whole_and_split = [(16, 0), (4, 12), (2, 14), (0, 16)]
    assert [rows[s].per_gpu_bytes for s in Stage] == [card * w + card * p // 2 for w, p in whole_and_split]
    assert {row.activation_bytes for row in rows.values()} == {2 * 16 * 822_607_872}
    assert {row.pipeline_stage for row in rows.values()} == {0}


def test_without_activations_the_last_stage_is_the_most_loaded() -> None:
    # ZeRO-3 at rest plus the layer in hand: the last stage's 2,007,633,920 weights × 16 B / 2, and its output
    # layer's half, 262,668,288 weights, assembled with its gradients at 4 B.
    row = report(_llama(Cut(tp=2, pp=2, microbatches=8)))[3]
    assert row.state_peak_bytes == 2_007_633_920 * 8 + 262_668_288 * 4
    assert report(_llama(Cut(tp=2, pp=2), batch=0))[3].pipeline_stage == 1


def test_zero_shards_over_the_data_parallel_group() -> None:
    run = _llama(Cut(tp=2, cp=2))  # dp = 2, the ZeRO group dp × cp = 4
    assert (run.dp, run.zero_group, run.shards, run.replicas) == (2, 4, 4, 1)
    hybrid = _llama(Cut(tp=2, cp=2), shard_size=2)
    assert (hybrid.shards, hybrid.replicas) == (2, 2)
    assert groups_refused(8, 8, 8, cut=Cut(tp=2, cp=2)) == (
        "shard=8 does not divide the 4 cards ZeRO shards over, the data-parallel group with the context-parallel "
        "one: gpus ÷ (tp × pp) = 8 ÷ (2 × 1). Choose one of 1, 2 or 4."
    )
    with pytest.raises(ValueError, match="does not divide the 4 cards ZeRO shards over"):
        _llama(Cut(tp=2, cp=2), shard_size=8)


def test_zero3s_limit_divides_by_tp() -> None:
    # The largest layer, the embedding or the output layer: 525,336,576 weights × (2 + 2) B whole, half with tp = 2.
    whole, cut = _llama(Cut()), _llama(Cut(tp=2))
    assert (whole.assembled_layer_bytes, cut.assembled_layer_bytes) == (2_101_346_304, 1_050_673_152)
    capacity = 1_500_000_000
    assert layer_exceeds_card(_llama(Cut(), capacity=capacity)) is True
    assert layer_exceeds_card(_llama(Cut(tp=2), capacity=capacity)) is False


# Megatron-LM's theoretical_memory_usage.py for Llama 3 8B (docs/parallelism.md works it): with TP = PP = 1 on
# 8 GPUs, its distributed optimizer's 6 + 12/8 B × 8,030,261,248 = 60,226,959,360 B and the activations of
# compute_activation_memory_without_sp, 1.05 × 8192 × (34 × 4096 × 32 + 8 + 4096 + 2 × 128,256 + 2 × 4096)
# = 40,644,762,009.6 B: 100,871,721,369.6 B, which a card holds as 100,871,721,370 whole bytes.
def test_megatron_peak_is_megatrons_report() -> None:
    run = _llama(Cut(), Accounting.MEGATRON)
    assert megatron_activations(LLAMA_3_8B, 8192, 1, Cut(), Recompute.NONE) == Fraction(406_447_620_096, 10)
    assert report(run)[1].peak_bytes == 100_871_721_370
    assert "Megatron-LM's own formula" in report(run)[1].differences[-1]


# With TP = 2, PP = 2, DP = 2 and 8 micro-batches: its most loaded shard keeps
# (218,103,808 × 32 / 2 + 525,336,576) / 2 matrix weights and (8,192 × 32 + 4,096) / 2 norm weights,
# 2,007,631,872, at 6 + 12/2 B: 24,091,582,464 B. Its activations: 1.05 × (8192 × 4096 × (10 + 24/2) × 32
# + 8 × 8192 × 2 + 8192 × 4096 × 2) × min(1, 8/2) = 24,874,038,067.2 B.
MEGATRON_STATES, MEGATRON_ACTIVATIONS = 24_091_582_464, Fraction(248_740_380_672, 10)


def test_megatron_with_tp_pp_and_the_distributed_optimizer() -> None:
    cut = Cut(tp=2, pp=2, microbatches=8)
    assert megatron_activations(LLAMA_3_8B, 8192, 1, cut, Recompute.NONE) == MEGATRON_ACTIVATIONS
    row = report(_llama(cut, Accounting.MEGATRON))[1]
    # Megatron spreads the final norm's 4,096 weights over the stages (÷ pp); the app keeps them on the last
    # stage, where they are: its first stage has 2,048 weights × 12 B fewer.
    assert row.per_gpu_bytes == MEGATRON_STATES - 2_048 * 12
    assert row.peak_bytes == MEGATRON_STATES - 2_048 * 12 + 24_874_038_068


@pytest.mark.parametrize("arch", [LLAMA_3_8B, GPT_3_175B])
def test_an_uncut_run_counts_the_runs_own_figures(arch: Architecture) -> None:
    run = Run(params=arch.params, layers=model_layers(arch, 0))
    (card,) = run.cards
    assert (card.params, card.frozen, card.candidates, card.layers) == (
        run.params,
        run.frozen,
        run.candidates,
        run.model_layers,
    )


def test_a_bare_count_splits_its_weights_by_stage() -> None:
    # 10^9 weights, the first 4 × 10^8 frozen, pp = 2, tp = 2: stage 0 keeps 2.5 × 10^8 weights a card, 2 × 10^8
    # of them frozen; stage 1 trains all of its own.
    loads = [stage_load((), 10**9, 4 * 10**8, 10**7, Cut(tp=2, pp=2), i) for i in (0, 1)]
    assert [(load.params, load.frozen) for load in loads] == [(250_000_000, 200_000_000), (250_000_000, 0)]
    assert {layer.params for layer in loads[0].layers} == {5_000_000}


def test_a_model_of_another_size_drawn_with_these_layers_keeps_each_cards_share() -> None:
    # The bisection for the largest model that fits (with the overheads counted, a whole run of each size) draws
    # a model of 2P weights with Llama's layers: each card keeps twice its share, 2 × 2,007,629,824 weights.
    run = _llama(Cut(tp=2, pp=2, microbatches=8))
    doubled = replace(run, params=2 * LLAMA_3_8B.params)
    assert [card.params for card in doubled.cards] == [2 * 2_007_629_824, 2 * 2_007_633_920]
    # Data parallelism on 80 GB: 80e9 − 26,323,451,904 B of activations leaves 16 B for 3,354,784,256 of a card's
    # weights, its share ceil(X × 2,007,629,824 / 8,030,261,248) of X: X = 13,418,705,821 (one more needs a weight
    # more). With the overheads counted, fewer.
    bare = report(replace(run, capacity=80 * 10**9))[0].max_params_that_fit
    counted = report(replace(run, capacity=80 * 10**9, count_overheads=True))[0].max_params_that_fit
    assert bare == 13_418_705_821
    assert isinstance(counted, int)
    assert counted < bare
