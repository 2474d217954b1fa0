"""What would make it fit: issue 45's three runs, each change's peak checked by hand from its terms.

Llama 3 70B (70,553,706,496 weights, 80 blocks, h = 8,192, f = 28,672, 64 heads, 8 KV heads of 128,
v = 128,256; its largest layer the output head, 1,050,673,152 weights), Llama 3.1 405B (405,853,388,800
weights, 126 blocks, h = 16,384, f = 53,248, 128 heads; its largest layer a block, 3,187,703,808) and
Llama 3 8B with rank-16 LoRA (8,030,261,248 frozen weights, 13,631,488 adapters, 32 blocks, h = 4,096).
A card of 80 GB is 80e9 bytes; of 24 GB, 24e9.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from app.domain.activations import Recompute
from app.domain.architecture import ModelName
from app.domain.fixes import Fix, Fixes, all_to_all_between_nodes, ep_degrees, expert_fix, fixes
from app.domain.placement import Offload
from app.domain.scenario import Inputs, resolve
from app.domain.sizing import peak_bytes
from app.domain.stages import Stage

GB = 10**9
L70 = Inputs(model=ModelName.LLAMA_3_70B, gpus=64, capacity=80 * GB, seq=4096, recompute=Recompute.SELECTIVE)
L405 = Inputs(model=ModelName.LLAMA_3_1_405B, gpus=1024, capacity=80 * GB)
LORA = Inputs(model=ModelName.LLAMA_3_8B, gpus=1, capacity=24 * GB, lora_rank=16)

# Llama 3 70B under ZeRO-3 with full recomputation, seq 4,096, at the backward of its output head:
STATE_70 = 16 * 70_553_706_496 // 64  # 16 B a weight, a 64th each: 17,638,426,624
HEAD_70 = 2 * 2 * 1_050_673_152  # the head's bf16 weights gathered and its bf16 gradients computed
SBH_70 = 2 * 4096 * 8192  # one block's kept input, 2sbh
LOGITS_70 = 4 * 4096 * 128_256  # 4sbv
FULL_70 = STATE_70 + HEAD_70 + 80 * SBH_70 + 2 * SBH_70 + LOGITS_70  # + the final norm's and the head's inputs
# What selective recomputation leaves out on Llama (tiled attention): each block's fp32 log-sum-exp, 4asb.
LSE_70 = 80 * 4 * 64 * 4096

# Llama 3.1 405B under ZeRO-3, no recomputation, seq 512, at the backward of its last block:
S, H, F = 512, 16_384, 53_248
BLOCK_405 = 6 * 2 * S * H + 2 * 2 * S * 1024 + 4 * 128 * S + 4 * 2 * S * F  # 321,126,400 a block
SEQ512_405 = 16 * 405_853_388_800 // 1024 + 2 * 2 * 3_187_703_808 + 126 * BLOCK_405

# Llama 3.1 405B under ZeRO-3 at its default sequence, 8,192 tokens (its training length, not its 131,072-token
# context), with full recomputation, at the backward of its last block: the block gathered (bf16 weights) and its
# bf16 gradients computed, the 125 blocks before it keeping their input (2sbh) and the last one recomputed whole.
S8 = 8192
BLOCK_405_8K = 6 * 2 * S8 * H + 2 * 2 * S8 * 1024 + 4 * 128 * S8 + 4 * 2 * S8 * F  # 16 × BLOCK_405: 5,138,022,400
STATE_405 = 16 * 405_853_388_800 // 1024  # 6,341,459,200
FULL_405 = STATE_405 + 2 * 2 * 3_187_703_808 + 125 * 2 * S8 * H + BLOCK_405_8K
# Without recomputation its peak is at the output head's backward: all 126 blocks' activations, the final norm's
# and the head's inputs (2sbh each) and the fp32 logits (4sbv).
ACTS_405_8K = 126 * BLOCK_405_8K + 2 * 2 * S8 * H + 4 * S8 * 128_256

# Llama 3 8B, LoRA on one card, full recomputation, seq 8,192, at the forward of its output head:
STATE_LORA = 2 * 8_030_261_248 + 16 * 13_631_488  # bf16 frozen weights; the adapters' whole 16 B
SBH_8 = 2 * 8192 * 4096
FULL_LORA = STATE_LORA + 32 * SBH_8 + 2 * SBH_8 + 4 * 8192 * 128_256


def _found(inputs: Inputs, stage: Stage) -> Fixes:
    return fixes(resolve(inputs), stage)


def _first(found: Fixes, knob: str, value: str | None = None) -> Fix:
    return next(fix for fix in found.changes if fix.knob == knob and value in (None, fix.value))


def test_the_hand_figures_are_the_apps() -> None:
    assert FULL_70 == 29_445_392_384
    assert BLOCK_405 == 321_126_400
    assert SEQ512_405 == 59_554_200_832
    assert FULL_LORA == 22_763_020_288
    assert BLOCK_405_8K == 16 * BLOCK_405 == 5_138_022_400
    assert FULL_405 == 57_784_728_832


def test_llama_3_1_trains_at_8192_tokens_by_default() -> None:
    scenario = resolve(L405)
    assert (scenario.seq, scenario.run.seq, scenario.architecture.context) == (8192, 8192, 131_072)  # type: ignore[union-attr]
    assert scenario.report[Stage.ZERO3].activation_bytes == ACTS_405_8K == 652_130_385_920


@pytest.mark.parametrize(
    ("inputs", "stage", "over"),
    [
        (L70, Stage.ZERO3, 123.67315864562988),  # "over by 49.2 GiB" on 74.5 GiB
        # At 8,192 tokens, its default now (ACTS_405_8K of activations; at its whole 131,072-token context, the
        # old default, 9,731.2 GiB: "over by 9,656.7 GiB").
        (L405, Stage.ZERO3, 621.077819108963),
        (LORA, Stage.DP, 60.23096466064453),  # seq 8,192: "over by 37.9 GiB"
    ],
)
def test_the_issues_runs_are_over(inputs: Inputs, stage: Stage, over: float) -> None:
    assert peak_bytes(stage, resolve(inputs).run) / 2**30 == pytest.approx(over)


@pytest.mark.parametrize(
    ("inputs", "stage", "knob", "value", "peak"),
    [
        (L70, Stage.ZERO3, "recompute", "full", FULL_70),  # 47.1 GiB left
        (L405, Stage.ZERO3, "recompute", "full", FULL_405),  # 20.7 GiB left
        (L405, Stage.ZERO3, "seq", "512", SEQ512_405),  # 19.0 GiB left; 1,024 tokens' blocks alone are 80.9e9
        (LORA, Stage.DP, "recompute", "full", FULL_LORA),  # 1.2 GiB left on 24 GB
    ],
)
def test_a_change_that_fits(inputs: Inputs, stage: Stage, knob: str, value: str, peak: int) -> None:
    fix = _first(_found(inputs, stage), knob, value)
    assert (fix.value, fix.peak_bytes, fix.fits) == (value, peak, True)
    assert fix.headroom_bytes == inputs.capacity - peak  # type: ignore[operator]
    assert fix.saved_bytes == peak_bytes(stage, resolve(inputs).run) - peak


def test_the_figures_as_the_issue_gives_them() -> None:
    assert round((80 * GB - FULL_70) / 2**30, 1) == 47.1
    assert round((80 * GB - FULL_405) / 2**30, 1) == 20.7
    assert round((80 * GB - SEQ512_405) / 2**30, 1) == 19.0
    # The issue's "2.8 GiB left" is on a card of 24 GiB; on one of 24 GB (its "over by 37.9"), 1.2.
    assert round((24 * 2**30 - FULL_LORA) / 2**30, 1) == 2.8
    assert round((24 * GB - FULL_LORA) / 2**30, 1) == 1.2


def test_those_that_fit_come_first_in_the_knobs_order() -> None:
    found = _found(L70, Stage.ZERO3)
    assert [(f.knob, f.value, f.fits) for f in found.changes] == [
        ("recompute", "full", True),
        ("seq", "2048", True),
        # The cut's knobs after the stage's, each the least that fits (64 cards in 8 nodes of 8).
        ("tp", "4", True),
        ("cp", "2", True),
        ("pp", "2", True),
        ("offload", Offload.OPTIMIZER, False),
        ("offload", Offload.OPTIMIZER_PARAMS, False),
    ]


def test_selective_recompute_on_llama_saves_almost_nothing() -> None:
    (own,) = _found(L70, Stage.ZERO3).small
    assert (own.knob, own.value, own.current, own.small) == ("recompute", "selective", True, True)
    assert own.saved_bytes == LSE_70  # 0.078 GiB of 123.7
    # From none, selective is a change of its own, and as small.
    small = _found(replace(L70, recompute=Recompute.NONE), Stage.ZERO3).small
    assert [(f.knob, f.value, f.saved_bytes, f.current) for f in small] == [("recompute", "selective", LSE_70, False)]


def test_offloading_saves_almost_nothing_where_activations_dominate() -> None:
    found = _found(L405, Stage.ZERO3)
    assert [(f.knob, f.value) for f in found.changes] == [
        ("recompute", "full"),
        ("seq", "512"),
        ("cp", "16"),  # the sequence split 16 ways fits as 512 tokens do
        ("pp", "16"),  # Meta's own 16 stages of 7, 8 × 14, 7 blocks (uneven stages) fit
        ("tp", "8"),  # a node's 8 cards: still over
    ]
    small = found.small
    assert [(f.knob, f.value) for f in small] == [
        ("recompute", "selective"),
        ("offload", Offload.OPTIMIZER),
        ("offload", Offload.OPTIMIZER_PARAMS),
    ]


# The seed's 30B (8 equal layers of 3.75e9) on 8 cards of 80 GB, no activations. Under ZeRO-2 a card keeps
# the bf16 weights whole (60e9), a slice of the rest, 14 B a weight / n, and one layer's bf16 gradients
# (7.5e9): on 8 cards 60 + 52.5 + 7.5 = 120e9. Offloading the optimizer (the master, the moments and the
# gradients' slices) leaves the weights and the layer's gradients: 67.5e9. ZeRO-3 keeps 16/8 × 30e9 = 60e9
# and a layer's weights and gradients, 15e9: 75e9. More cards fit when 420e9 / n <= 12.5e9: from 34, each
# a slice of ceil(30e9 / 34) = 882,352,942 weights.
SEED = Inputs(gpus=8, capacity=80 * GB)


def test_the_next_stage_and_the_fewest_gpus() -> None:
    found = _found(SEED, Stage.ZERO2)
    assert [(f.knob, f.value, f.peak_bytes) for f in found.changes] == [
        ("offload", Offload.OPTIMIZER, 67_500_000_000),
        ("stage", Stage.ZERO3, 75 * GB),
        # tp 4 (dp 2): a card keeps a quarter of each layer, 7.5e9 weights: 15e9 of bf16 weights, 14 B a weight
        # of the rest over dp 2 (52.5e9), a layer's quarter of bf16 gradients (1.875e9). tp 2 keeps 86.25e9.
        ("tp", "4", 15 * GB + 52_500_000_000 + 1_875_000_000),
        # pp 4 (dp 2): a stage keeps 2 whole layers, 7.5e9 weights: 15e9 + 52.5e9 and one layer's bf16
        # gradients, 7.5e9. pp 2 keeps 30e9 + 52.5e9 + 7.5e9 = 90e9.
        ("pp", "4", 75 * GB),
        ("gpus", "34", 60 * GB + 14 * 882_352_942 + 7_500_000_000),
    ]
    tp, pp = found.changes[2:4]
    assert (tp.bubble, tp.between_nodes) == (Fraction(0), False)  # tp stays in the node, never idles
    # One micro-batch through 4 stages: the pipeline idles (4 − 1) / 1 = 3 steps' compute; one node, no sends out.
    assert (pp.bubble, pp.between_nodes) == (Fraction(3), False)
    # The less cut, by hand above, does not fit: the report's figures agree.
    assert resolve(replace(SEED, tp=2)).report[Stage.ZERO2].peak_bytes == 86_250_000_000
    assert resolve(replace(SEED, pp=2)).report[Stage.ZERO2].peak_bytes == 90 * GB
    assert resolve(replace(SEED, gpus=33)).report[Stage.ZERO2].fits is False


@pytest.mark.parametrize(
    ("inputs", "stage"),
    [(SEED, Stage.ZERO3), (replace(SEED, capacity=None), Stage.DP), (replace(SEED, capacity=480 * GB), Stage.DP)],
)
def test_nothing_to_change(inputs: Inputs, stage: Stage) -> None:
    assert _found(inputs, stage) == Fixes()


def test_a_scenario_without_its_inputs_has_no_changes() -> None:
    scenario = resolve(LORA)
    assert fixes(replace(scenario, inputs=None), Stage.DP) == Fixes()


@pytest.mark.parametrize("stage", [Stage.DP])
def test_where_no_one_knob_fits_zero3_and_its_own_change_do(stage: Stage) -> None:
    # Llama 3.1 405B on 1,024 GPUs: below ZeRO-3 the state alone (16 B a weight, split only in part) is over
    # 80 GB whatever else is turned; ZeRO-3 with full recomputation peaks at FULL_405 (by hand, above), with a
    # sequence of 512 at SEQ512_405.
    scenario = resolve(L405)
    found = fixes(scenario, stage)
    first, second = found.changes[:2]
    assert (first.knob, first.value, first.then, first.peak_bytes) == (
        "stage",
        "zero3",
        ("recompute", "full"),
        FULL_405,
    )
    assert (second.then, second.peak_bytes) == (("seq", "512"), SEQ512_405)
    assert first.saved_bytes == scenario.report[stage].peak_bytes - FULL_405
    assert not any(f.fits for f in found.changes if f.then is None)


@pytest.mark.parametrize("stage", [Stage.ZERO1, Stage.ZERO2])
def test_under_zero1_and_2_uneven_stages_fit_alone(stage: Stage) -> None:
    # 126 blocks in 32 stages of 3 or 4 (uneven, `parallel.stage_blocks`): a stage's state and its micro-batches'
    # activations fit an 80 GB card where no divisor of 126 among the cards' divisors did.
    first = fixes(resolve(L405), stage).changes[0]
    assert (first.knob, first.value, first.then, first.fits) == ("pp", "32", None, True)


# --- the cut's knobs ---------------------------------------------------------------------------------

# Llama 3 70B on 64 cards (8 nodes of 8) under ZeRO-1, already cut tp 2 × pp 4 with 8 micro-batches.
PIPED = replace(L70, tp=2, pp=4, microbatches=8)


def test_fewer_micro_batches_in_flight_fit_and_idle_more() -> None:
    found = _found(PIPED, Stage.ZERO1)
    fewer = _first(found, "microbatches")
    # The most micro-batches that fit: 1 does, 2 does not (1F1B's first stage keeps min(pp, m) in flight).
    assert (fewer.value, fewer.fits) == ("1", True)
    assert resolve(replace(PIPED, microbatches=2)).report[Stage.ZERO1].fits is False
    assert fewer.peak_bytes == resolve(replace(PIPED, microbatches=1)).report[Stage.ZERO1].peak_bytes
    # (4 − 1) / 1: the pipeline idles 3 steps' compute, where 8 micro-batches idled 3/8; stages in other nodes.
    assert (fewer.bubble, fewer.between_nodes) == (Fraction(3), True)
    assert _first(found, "pp").bubble == Fraction(15, 8)  # pp 16: (16 − 1) / 8


def test_sequence_parallelism_is_tried_where_tensor_parallelism_is_on() -> None:
    sp = next(f for f in [*_found(PIPED, Stage.ZERO1).changes] if f.knob == "sp")
    assert (sp.value, sp.bubble, sp.between_nodes) == ("1", Fraction(0), False)
    assert sp.peak_bytes == resolve(replace(PIPED, sp=True)).report[Stage.ZERO1].peak_bytes
    assert not any(f.knob == "sp" for f in _found(L70, Stage.ZERO3).changes)  # no tp: no sp


@pytest.mark.parametrize(
    ("inputs", "stage", "cp", "between"),
    [
        (L70, Stage.ZERO3, "2", False),  # cp 2 × tp 1 = 2 neighbouring cards, in a node of 8
        (PIPED, Stage.ZERO1, "4", False),  # tp 2 × cp 4 = 8: one node
        (L405, Stage.ZERO3, "16", True),  # 16 cards of one sequence span two nodes of 8
    ],
)
def test_context_parallelism_says_whether_its_gathers_leave_the_node(
    inputs: Inputs, stage: Stage, cp: str, between: bool
) -> None:
    fix = _first(_found(inputs, stage), "cp")
    assert (fix.value, fix.between_nodes, fix.bubble) == (cp, between, Fraction(0))


def test_each_cut_is_the_least_degree_that_fits() -> None:
    # Llama 3 70B under ZeRO-3: tp 4 fits, tp 2 does not; the figures are the report's.
    scenario = resolve(L70)
    tp = _first(fixes(scenario, Stage.ZERO3), "tp")
    assert tp.peak_bytes == resolve(replace(L70, tp=4)).report[Stage.ZERO3].peak_bytes <= 80 * GB
    assert resolve(replace(L70, tp=2)).report[Stage.ZERO3].peak_bytes > 80 * GB


def test_more_gpus_under_a_cut_are_whole_tensor_parallel_groups() -> None:
    # The seed's 30B cut tp 2 on 8 × 40 GB under ZeRO-2: a card keeps half of each layer, 15e9 weights, their
    # bf16 copy whole (30e9), 14 B a weight of the rest over dp = gpus / 2, and half a layer's bf16 gradients
    # (3.75e9). 68 cards (dp 34): 14 × ceil(15e9 / 34) = 6,176,470,594, 39,926,470,594 in all, under 40e9;
    # 66 (dp 33) keep 14 × 454,545,455 more, 40,113,636,370: over. 67 is no whole number of tp groups.
    fix = _first(_found(replace(SEED, capacity=40 * GB, tp=2), Stage.ZERO2), "gpus")
    assert (fix.value, fix.peak_bytes) == ("68", 30 * GB + 14 * 441_176_471 + 3_750_000_000)
    assert resolve(replace(SEED, capacity=40 * GB, tp=2, gpus=66)).report[Stage.ZERO2].peak_bytes == 40_113_636_370


# --- expert parallelism ---------------------------------------------------------------------------

# Mixtral 8x7B (8 routed experts a block) on 16 × 80 GB cards in 2 nodes, and DeepSeek-V3 (256) in 16 stages of 64.
MIX = Inputs(model=ModelName.MIXTRAL_8X7B, gpus=16, nodes=2, capacity=80 * GB, batch=1, seq=4096)
DSV3 = Inputs(model=ModelName.DEEPSEEK_V3, gpus=1024, nodes=128, capacity=80 * GB, batch=1, seq=4096, pp=16)


@pytest.mark.parametrize(
    ("experts", "stage", "now", "expert_tp", "degrees"),
    [
        (8, 16, 1, 1, [2, 4, 8]),  # the divisors of 8 above 1, each dividing 16
        (8, 8, 1, 2, [2, 4]),  # ep 8 × etp 2 = 16 does not divide 8 cards
        (8, 16, 2, 1, [4, 8]),
        (256, 64, 1, 1, [2, 4, 8, 16, 32, 64]),  # 128 and 256 divide the experts, not a stage's 64 cards
        (32, 24, 1, 1, [2, 4, 8]),  # gpt-oss's 32 on 24: 16 and 32 do not divide 24
        (8, 16, 8, 1, []),
    ],
)
def test_the_expert_parallel_degrees_tried(
    experts: int, stage: int, now: int, expert_tp: int, degrees: list[int]
) -> None:
    assert ep_degrees(experts, stage, now, expert_tp) == degrees


@pytest.mark.parametrize(("inputs", "stage"), [(MIX, Stage.ZERO1), (MIX, Stage.ZERO3), (DSV3, Stage.ZERO1)])
def test_the_ep_fix_is_the_run_resolved_with_that_ep(inputs: Inputs, stage: Stage) -> None:
    """Its peak is the report's for the run entered with that ep: the least tried that fits, else the most."""
    fix = expert_fix(resolve(inputs), stage)
    assert fix is not None
    assert fix.knob == "ep"
    experts = 8 if inputs.model is ModelName.MIXTRAL_8X7B else 256
    tried = ep_degrees(experts, inputs.gpus // inputs.pp, 1, 1)
    peaks = {ep: resolve(replace(inputs, ep=ep, etp=1)).report[stage].peak_bytes for ep in tried}
    fitting = [ep for ep in tried if peaks[ep] <= 80 * GB]
    assert int(fix.value) == (fitting[0] if fitting else tried[-1])
    assert fix.peak_bytes == peaks[int(fix.value)]
    assert fix.saved_bytes == resolve(inputs).report[stage].peak_bytes - fix.peak_bytes


def test_a_dense_model_tries_no_ep() -> None:
    assert expert_fix(resolve(L70), Stage.ZERO3) is None
    assert all(fix.knob != "ep" for fix in _found(L70, Stage.ZERO3).changes)


@pytest.mark.parametrize(
    ("inputs", "between"),
    [
        # ep 8 × etp 1 = 8 neighbouring ranks: a node's 8 cards.
        (replace(MIX, ep=8, etp=1), False),
        # tp 2 (etp as tp) × ep 8 = 16 ranks: two nodes.
        (replace(MIX, tp=2, ep=8), True),
        # ep 8 on nodes of 4 cards: 8 ranks, two nodes.
        (replace(MIX, nodes=4, ep=8, etp=1), True),
        # One node: nothing leaves it.
        (replace(MIX, gpus=8, nodes=1, ep=8, etp=1), False),
    ],
)
def test_expert_parallelisms_all_to_all_in_or_between_nodes(inputs: Inputs, between: bool) -> None:
    assert all_to_all_between_nodes(resolve(inputs).run) is between


@pytest.mark.parametrize(
    ("inputs", "stage", "ep", "between"),
    [
        # Mixtral under ZeRO-2 with full recomputation (its experts' activations at 4,096 tokens, ~0.94 GB a block
        # without it, keep every ep over): ep 4, two experts a card, fits (69.7 GB) where ep 2 does not (93.0 GB);
        # its all-to-all among 4 neighbouring ranks, in a node of 8.
        (replace(MIX, recompute=Recompute.FULL), Stage.ZERO2, 4, False),
        # DeepSeek-V3 under data parallelism: ep 16 on a stage of 64, 16 ranks on nodes of 8: between nodes.
        (DSV3, Stage.DP, 16, True),
    ],
)
def test_the_least_ep_that_fits_is_offered_with_its_all_to_all(
    inputs: Inputs, stage: Stage, ep: int, between: bool
) -> None:
    fix = _first(_found(inputs, stage), "ep")
    assert (fix.value, fix.fits, fix.between_nodes) == (str(ep), True, between)
    assert fix.peak_bytes == resolve(replace(inputs, ep=ep)).report[stage].peak_bytes <= 80 * GB
    # The degree below it (half) is still over: the least that fits.
    assert resolve(replace(inputs, ep=ep // 2)).report[stage].peak_bytes > 80 * GB
