"""FSDP2's and Megatron-LM's counts of a card, by hand (docs/accounting.md cites their source lines).

FSDP2 keeps each sharded parameter in its own dtype (fp32 under mixed precision) and updates it there, so
there is no master copy; the gradient's slice is cast back to that dtype. The weights it gathers are in
`param_dtype` (the recipe's weights), the reduce-scatter's input in `reduce_dtype` (the recipe's gradients).

Megatron-LM keeps its weights and fp32 main gradients whole on every card, and its distributed optimizer
splits the master copy and the moments: 18 B per weight, or 6 + 12/d (`theoretical_memory_usage.py`).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from app.domain.accounting import FSDP_STAGES, Accounting, Setup, differences, fsdp2_dtypes, terms
from app.domain.architecture import LLAMA_3_8B
from app.domain.placement import Device, Offload, Placement
from app.domain.recipes import MIXED_ADAM, RECIPES, Band, Recipe, RecipeName, custom_recipe
from app.domain.stages import Stage
from app.domain.state_bytes import band_bytes, per_gpu_bytes
from app.domain.terms import AT_REST, Moment, Pass, Place, card_bytes

FSDP2 = Setup(Accounting.FSDP2)
OFFLOADED = Setup(Accounting.FSDP2, Placement(Offload.OPTIMIZER_PARAMS))
UNPINNED = Setup(Accounting.FSDP2, Placement(Offload.OPTIMIZER_PARAMS, pin_memory=False))
WIDE_REDUCE = custom_recipe(2, 4, 4, 8)
"""bf16 compute with reduce_dtype=fp32: 4-byte gradients beside 2-byte weights."""
NARROW_MASTER = custom_recipe(4, 4, 2, 8)
"""A master copy narrower than the weights it keeps (a custom recipe allows it)."""


def _recipe(name: str) -> Recipe:
    custom = {"wide-reduce": WIDE_REDUCE, "narrow-master": NARROW_MASTER}
    return custom[name] if name in custom else RECIPES[RecipeName(name)]


# Bytes per weight of each band's slice, by hand: weights and gradients in the wider of weights and
# master (the sharded parameter's own dtype), no master copy, the recipe's moments.
BANDS = [
    ("mixed-adam", 4, 4, 0, 8),
    ("fp32-adam", 4, 4, 0, 8),
    ("bf16-adam", 2, 2, 0, 4),
    ("mixed-sgd", 4, 4, 0, 4),
    ("adam-8bit", 4, 4, 0, Fraction(65, 32)),  # bitsandbytes: 2 int8 moments + 2 fp32 absmax per 256
    ("wide-reduce", 4, 4, 0, 8),
]


@pytest.mark.parametrize(("recipe", "weights", "gradients", "master", "moments"), BANDS)
@pytest.mark.parametrize("stage", sorted(FSDP_STAGES))
def test_each_band_is_a_slice_in_the_sharded_parameters_dtype(
    recipe: str, weights: int, gradients: int, master: int, moments: int | Fraction, stage: Stage
) -> None:
    # 10**9 weights on 8 cards: slices of 125,000,000 weights, at rest.
    expected = {Band.WEIGHTS: weights, Band.GRADIENTS: gradients, Band.MASTER: master, Band.MOMENTS: moments}
    for band, nbytes in expected.items():
        assert band_bytes(stage, band, 10**9, 8, _recipe(recipe), setup=FSDP2) == nbytes * 125_000_000


# (recipe, param_dtype, reduce_dtype, original dtype), in bytes.
DTYPES = [
    ("mixed-adam", 2, 2, 4),
    ("fp32-adam", 4, 4, 4),
    ("bf16-adam", 2, 2, 2),
    ("wide-reduce", 2, 4, 4),
    # The slice stays in the wider of the two: the 4-byte weights, not the 2-byte master.
    ("narrow-master", 4, 4, 4),
]


@pytest.mark.parametrize(("recipe", "param", "reduce", "orig"), DTYPES)
def test_the_recipe_names_fsdp2s_dtypes(recipe: str, param: int, reduce: int, orig: int) -> None:
    dtypes = fsdp2_dtypes(_recipe(recipe))
    assert (dtypes.param, dtypes.reduce, dtypes.orig) == (Fraction(param), Fraction(reduce), Fraction(orig))


# (stage, params, gpus, bytes at rest on one card), mixed-adam: 16 B per weight of the slice, which is
# ceil(P / N) weights; ZeRO-2 too, since its gathered weights are freed after the backward.
AT_REST_BYTES = [
    (Stage.ZERO3, 10**9, 8, 16 * 125_000_000),
    (Stage.ZERO2, 10**9, 8, 16 * 125_000_000),
    (Stage.ZERO3, 10, 8, 16 * 2),
    (Stage.ZERO3, 32_768, 8, 65_536),
    (Stage.ZERO3, 7, 1, 16 * 7),
]


@pytest.mark.parametrize(("stage", "params", "gpus", "expected"), AT_REST_BYTES)
def test_a_card_at_rest_keeps_its_slices(stage: Stage, params: int, gpus: int, expected: int) -> None:
    assert per_gpu_bytes(stage, params, gpus, MIXED_ADAM, setup=FSDP2) == expected


L = 4096
"""Weights of the layer in hand."""
P = 8 * L

# (recipe, stage, pass, bytes beyond the slices while working on one layer of L weights, on 8 cards).
# ZeRO-3: 2 layers in param_dtype, and in the backward the layer's gradients in param_dtype and a
# reduce-scatter input in reduce_dtype. ZeRO-2: every weight kept whole in param_dtype, plus the backward's.
IN_HAND = [
    ("mixed-adam", Stage.ZERO3, Pass.FORWARD, 2 * 2 * L),
    ("mixed-adam", Stage.ZERO3, Pass.BACKWARD, 2 * 2 * L + (2 + 2) * L),
    ("wide-reduce", Stage.ZERO3, Pass.BACKWARD, 2 * 2 * L + (2 + 4) * L),
    ("fp32-adam", Stage.ZERO3, Pass.FORWARD, 2 * 4 * L),
    ("fp32-adam", Stage.ZERO3, Pass.BACKWARD, 2 * 4 * L + (4 + 4) * L),
    ("mixed-adam", Stage.ZERO2, Pass.FORWARD, 2 * P),
    ("mixed-adam", Stage.ZERO2, Pass.BACKWARD, 2 * P + (2 + 2) * L),
]


@pytest.mark.parametrize(("recipe", "stage", "part", "extra"), IN_HAND)
def test_the_layer_in_hand(recipe: str, stage: Stage, part: Pass, extra: int) -> None:
    chosen = _recipe(recipe)
    all_terms = terms(chosen, stage, FSDP2)
    rest = card_bytes(stage, P, 8, all_terms, AT_REST)
    assert card_bytes(stage, P, 8, all_terms, Moment(part, L)) - rest == extra


def test_one_card_still_allocates_its_gather_and_reduce_scatter_buffers() -> None:
    # With one card FSDP2 copies the slice into the unsharded buffers and the gradients into the
    # reduce-scatter's: the paper counts nothing for the layer in hand there.
    all_terms = terms(MIXED_ADAM, Stage.ZERO3, FSDP2)
    assert card_bytes(Stage.ZERO3, P, 1, all_terms, Moment(Pass.BACKWARD, L)) - 16 * P == 8 * L
    paper = terms(MIXED_ADAM, Stage.ZERO3)
    assert card_bytes(Stage.ZERO3, P, 1, paper, Moment(Pass.BACKWARD, L)) == 16 * P


# (setup, stage, bytes per card in each place at rest, mixed-adam, 32,768 weights on 8 cards): the
# toy that `zero-bands measure` runs. CPUOffloadPolicy moves all three slices, the weights' and
# gradients' (4 + 4 B) pinned and Adam's moments (8 B, made by zeros_like) pageable; ZeRO-2's kept
# weights stay on the card during the passes.
PINNED, PAGEABLE = 32_768, 32_768
PLACES = [
    (FSDP2, Stage.ZERO3, {Place.GPU: 65_536, Place.CPU_PINNED: 0, Place.CPU_PAGEABLE: 0}),
    (OFFLOADED, Stage.ZERO3, {Place.GPU: 0, Place.CPU_PINNED: PINNED, Place.CPU_PAGEABLE: PAGEABLE}),
    (UNPINNED, Stage.ZERO3, {Place.GPU: 0, Place.CPU_PINNED: 0, Place.CPU_PAGEABLE: 65_536}),
    (OFFLOADED, Stage.ZERO2, {Place.GPU: 0, Place.CPU_PINNED: PINNED, Place.CPU_PAGEABLE: PAGEABLE}),
    (Setup(Accounting.FSDP2, Placement(Offload.OPTIMIZER)), Stage.ZERO3, {Place.GPU: 0, Place.CPU_PINNED: PINNED}),
    (Setup(Accounting.FSDP2, Placement(Offload.NVME)), Stage.ZERO3, {Place.NVME: 0, Place.CPU_PINNED: PINNED}),
]


@pytest.mark.parametrize(("setup", "stage", "expected"), PLACES)
def test_cpu_offload_policy_moves_the_slices(setup: Setup, stage: Stage, expected: dict[Place, int]) -> None:
    for place, nbytes in expected.items():
        assert per_gpu_bytes(stage, P, 8, MIXED_ADAM, setup=setup, place=place) == nbytes


def test_under_offload_the_card_keeps_only_the_layer_in_hand() -> None:
    gpu = [t for t in terms(MIXED_ADAM, Stage.ZERO3, OFFLOADED) if t.place is Place.GPU]
    assert card_bytes(Stage.ZERO3, P, 8, tuple(gpu), Moment(Pass.FORWARD, L)) == 2 * 2 * L
    assert card_bytes(Stage.ZERO3, P, 8, tuple(gpu), Moment(Pass.BACKWARD, L)) == 2 * 2 * L + 4 * L
    zero2 = terms(MIXED_ADAM, Stage.ZERO2, OFFLOADED)
    assert card_bytes(Stage.ZERO2, P, 8, zero2, Moment(Pass.FORWARD, L)) == 2 * P


@pytest.mark.parametrize("stage", [Stage.DP, Stage.ZERO1])
def test_the_stages_fully_shard_has_not_are_the_papers(stage: Stage) -> None:
    assert terms(MIXED_ADAM, stage, FSDP2) == terms(MIXED_ADAM, stage)
    assert differences(stage, MIXED_ADAM, FSDP2) == (
        f"FSDP2's fully_shard has no {stage.info.title}: counted as the paper counts it.",
    )


def _said(stage: Stage, recipe: Recipe, setup: Setup) -> str:
    return " ".join(differences(stage, recipe, setup))


# (recipe, stage, setup, phrases the differences say, phrases they do not).
SAID = [
    ("mixed-adam", Stage.ZERO3, FSDP2, ("no separate master copy", "+2 B per weight", "−4 B", "two layers"), ()),
    ("fp32-adam", Stage.ZERO3, FSDP2, ("two layers", "pads"), ("master copy",)),
    ("mixed-adam", Stage.ZERO2, FSDP2, ("reshard_after_forward=False", "param_dtype (2 B)"), ("two layers",)),
    ("wide-reduce", Stage.ZERO3, FSDP2, ("reduce_dtype (4 B here", "+2 B per weight"), ()),
    ("mixed-adam", Stage.ZERO3, OFFLOADED, ("CPUOffloadPolicy", "page-locked"), ("NVMe", "optimizer alone")),
    (
        "mixed-adam",
        Stage.ZERO3,
        Setup(Accounting.FSDP2, Placement(Offload.OPTIMIZER)),
        ("no offload of the optimizer alone",),
        (),
    ),
    ("mixed-adam", Stage.ZERO3, Setup(Accounting.FSDP2, Placement(Offload.NVME)), ("no NVMe offload",), ()),
    (
        "mixed-adam",
        Stage.ZERO3,
        Setup(Accounting.FSDP2, Placement(Offload.OPTIMIZER_PARAMS, Device.NVME)),
        ("no NVMe offload",),
        (),
    ),
]


@pytest.mark.parametrize(("recipe", "stage", "setup", "said", "unsaid"), SAID)
def test_every_difference_from_the_paper_is_said(
    recipe: str, stage: Stage, setup: Setup, said: tuple[str, ...], unsaid: tuple[str, ...]
) -> None:
    text = _said(stage, _recipe(recipe), setup)
    assert all(phrase in text for phrase in said), text
    assert not any(phrase in text for phrase in unsaid), text
    # FSDP2 says its own offload caveats; DeepSpeed's (weights need ZeRO-3) are not repeated.
    assert "needs ZeRO-3" not in text


# Megatron-LM's count (docs/accounting.md, "Megatron-LM"): `compute_weight_and_optimizer_memory` in
# megatron/training/theoretical_memory_usage.py. Its parameter count for Llama 3 8B, worked out by hand
# with that file's formula (hidden 4096, 32 layers, 32 heads, 8 query groups, kv_channels 4096 / 32 =
# 128, ffn 14336, vocab 128256, swiglu, RMSNorm, untied embeddings, no bias, TP = PP = 1):
#   self_attn_term   = 2 × 4096 × 4096 × (1 + 8/32) × (128 × 32 / 4096) = 41,943,040
#   dense_mlp_params = 2 × 4096 × 14336 × 3/2                           = 176,160,768
#   layernorm_params = 2 × 4096 × 1 (RMSNorm: norm_size 1)              = 8,192
#   a layer: 218,112,000; × 32 = 6,979,584,000; + final_layernorm 4096 = 6,979,588,096
#   padded_vocab_size: 128256 is 1002 × 128 (make_vocab_size_divisible_by × TP), so no padding;
#   embedding_size = 4096 × 128256 = 525,336,576, twice (untied) = 1,050,673,152
#   most loaded shard = 6,979,588,096 + 1,050,673,152 = 8,030,261,248
MEGATRON_LLAMA_3_8B = 8_030_261_248
MEGATRON = Setup(Accounting.MEGATRON)


def test_megatrons_count_of_llama_3_8b_is_the_apps() -> None:
    assert 2 * 4096 * 4096 * 5 // 4 == 41_943_040
    layer = 41_943_040 + 2 * 4096 * 14336 * 3 // 2 + 2 * 4096
    assert 32 * layer + 4096 + 2 * 4096 * 128_256 == MEGATRON_LLAMA_3_8B
    assert LLAMA_3_8B.params == MEGATRON_LLAMA_3_8B


# (stage, Megatron's weight_and_optimizer_memory for Llama 3 8B on 8 GPUs, TP = PP = 1, in bytes), as its
# `num_bytes_per_parameter` gives it: 18 B without the distributed optimizer, 6 + 12/8 = 7.5 B with it.
# The app's figure is per_gpu_bytes, a card at rest: what the API's `per_gpu_bytes` and the CLI's "per GPU" print.
MEGATRON_FIGURES = [
    (Stage.DP, 144_544_702_464),  # 18 × 8,030,261,248
    (Stage.ZERO1, 60_226_959_360),  # 7.5 × 8,030,261,248
    (Stage.ZERO2, 60_226_959_360),  # no ZeRO-2 in Megatron's count: its distributed optimizer
    (Stage.ZERO3, 60_226_959_360),
]


@pytest.mark.parametrize(("stage", "expected"), MEGATRON_FIGURES)
def test_megatron_reproduces_its_theoretical_figure_for_llama_3_8b(stage: Stage, expected: int) -> None:
    distributed = stage is not Stage.DP
    megatron = MEGATRON_LLAMA_3_8B * (6 + 12 / 8 if distributed else 18)
    assert megatron == expected
    assert per_gpu_bytes(stage, MEGATRON_LLAMA_3_8B, 8, MIXED_ADAM, setup=MEGATRON) == expected


# (recipe, bytes per weight kept whole, bytes per weight split N ways by the distributed optimizer): the
# table of Megatron's docs/user-guide/features/dist_optimizer.md, "bf16 parameters, fp32 gradients" 6 + 12/d
# and "fp32 parameters, fp32 gradients" 8 + 8/d; the others read from the recipe with fp32 main gradients
# where there is a master copy.
MEGATRON_BANDS = [
    ("mixed-adam", 2 + 4, 4 + 8),
    ("fp32-adam", 4 + 4, 0 + 8),
    ("bf16-adam", 2 + 2, 0 + 4),
    ("mixed-sgd", 2 + 4, 4 + 4),
    ("adam-8bit", 2 + 4, 4 + Fraction(65, 32)),
    ("wide-reduce", 2 + 4, 4 + 8),
]


@pytest.mark.parametrize(("recipe", "whole", "split"), MEGATRON_BANDS)
@pytest.mark.parametrize(("stage", "gpus"), [(Stage.DP, 8), (Stage.ZERO1, 8), (Stage.ZERO3, 8), (Stage.ZERO1, 1)])
def test_megatron_keeps_its_buffers_whole_and_splits_the_optimizer_state(
    recipe: str, whole: int, split: int | Fraction, stage: Stage, gpus: int
) -> None:
    # 10**9 weights: a slice of 125,000,000 on 8 cards; data parallelism splits nothing.
    slice_ = 10**9 if stage is Stage.DP else 10**9 // gpus
    assert per_gpu_bytes(stage, 10**9, gpus, _recipe(recipe), setup=MEGATRON) == whole * 10**9 + split * slice_


@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("part", [Pass.FORWARD, Pass.BACKWARD])
def test_megatron_holds_no_buffer_for_the_layer_in_hand(stage: Stage, part: Pass) -> None:
    # The reduce-scatter and the all-gather write into the whole buffers: only the activations move.
    all_terms = terms(MIXED_ADAM, stage, MEGATRON)
    rest = card_bytes(stage, P, 8, all_terms, AT_REST)
    assert card_bytes(stage, P, 8, all_terms, Moment(part, L, activation=1000)) - rest == 1000


@pytest.mark.parametrize("offload", [Offload.OPTIMIZER, Offload.OPTIMIZER_PARAMS, Offload.NVME])
def test_megatrons_count_has_no_offload(offload: Offload) -> None:
    setup = Setup(Accounting.MEGATRON, Placement(offload))
    assert terms(MIXED_ADAM, Stage.ZERO3, setup) == terms(MIXED_ADAM, Stage.ZERO3, MEGATRON)
    assert per_gpu_bytes(Stage.ZERO3, P, 8, MIXED_ADAM, setup=setup, place=Place.CPU_PINNED) == 0
    text = _said(Stage.ZERO3, MIXED_ADAM, setup)
    assert "--optimizer-cpu-offload" in text
    assert "needs ZeRO-3" not in text


# (recipe, stage, padded, the sentences, in order): the stages Megatron has no counterpart for are said.
BUFFERS = (
    "Megatron-LM's distributed optimizer splits only the master copy and the moments: {} B per weight. The "
    "weights' and main gradients' buffers stay whole on every card; the reduce-scatter and the all-gather "
    "write into them, with no buffer of a layer's own."
)
MAIN_GRAD = (
    "Megatron-LM accumulates and reduces the gradients in an fp32 main_grad buffer: +2 B per weight, on every card, "
    "and 4 B a gradient on the wire."
)
PADDED = (
    "Megatron-LM's formula divides the optimizer state by the cards without rounding a slice up to whole weights: "
    "here, where the cards do not divide the weights evenly, it counts a few bytes less."
)


def _no(stage: str) -> str:
    return (
        f"Megatron-LM's count has no {stage}: counted as its distributed optimizer, ZeRO-1's arrangement "
        "(Megatron-FSDP, which splits more, is not in that count)."
    )


TRAFFIC_ZERO2 = (
    "Its traffic is the distributed optimizer's: the main_grad reduce-scattered as the backward pass makes it, "
    "the weights all-gathered after the update."
)
TRAFFIC_ZERO3 = (
    "Its traffic is ZeRO-3's, as Megatron-FSDP runs it: the weights gathered for each pass and the main_grad "
    "reduce-scattered, 3P where the distributed optimizer sends 2P; its memory stays the distributed optimizer's."
)


MEGATRON_SAID = [
    (
        "mixed-adam",
        Stage.DP,
        True,
        [
            MAIN_GRAD,
            "Data parallelism is Megatron-LM without its distributed optimizer: 18 B per weight on every card.",
        ],
    ),
    ("mixed-adam", Stage.ZERO1, False, [MAIN_GRAD, BUFFERS.format("6 + 12/N")]),
    ("mixed-adam", Stage.ZERO1, True, [MAIN_GRAD, BUFFERS.format("6 + 12/N"), PADDED]),
    ("mixed-adam", Stage.ZERO2, False, [MAIN_GRAD, _no("ZeRO-2"), TRAFFIC_ZERO2, BUFFERS.format("6 + 12/N")]),
    ("mixed-adam", Stage.ZERO3, False, [MAIN_GRAD, _no("ZeRO-3"), TRAFFIC_ZERO3, BUFFERS.format("6 + 12/N")]),
    ("fp32-adam", Stage.ZERO1, False, [BUFFERS.format("8 + 8/N")]),
    (
        "fp32-adam",
        Stage.DP,
        False,
        ["Data parallelism is Megatron-LM without its distributed optimizer: 16 B per weight on every card."],
    ),
]


@pytest.mark.parametrize(("recipe", "stage", "padded", "said"), MEGATRON_SAID)
def test_every_megatron_difference_is_a_sentence(recipe: str, stage: Stage, padded: bool, said: list[str]) -> None:
    assert list(differences(stage, _recipe(recipe), MEGATRON, padded)) == said


# How much more than a formula that does not pad the page counts where the cards do not divide the
# weights (docs/accounting.md). A slice is padded to whole weights: ceil(P/N) − P/N < 1 weight, at most
# (N − 1)/N when P = kN + 1, times the bytes per weight of the bands split N ways. DeepSpeed's estimators
# truncate their figure, int(18 × P/N), so they drop the 18/N B of the last weight as well: the page is
# then a whole 18 B ahead wherever 18/N < 1, that is N ≥ 19. Megatron's formula keeps the fraction.
# P = 32 × 1000 + 1 = 32,001 weights on N = 32 cards (4 nodes of 8): a slice of 1,001 weights, against
# 32,001/32 = 1,000.03125. 18 × 1,001 = 18,018 and 12 × 1,001 = 12,012 (the page's split bands);
# int(18 × 1,000.03125) = int(18,000.5625) = 18,000; 12 × 1,000.03125 = 12,000.375.
@pytest.mark.parametrize(
    ("setup", "stage", "whole", "page", "formula", "more"),
    [
        # DeepSpeed's ZeRO-2: 2P whole, 2 + 4 + 4 + 8 = 18 B split: 2P + int(18P/N) by its estimator.
        (Setup(Accounting.DEEPSPEED), Stage.ZERO2, 2 * 32_001, 18_018, 18_000, 18),
        # ZeRO-3 at rest: the 18 B all split (the 4 B of the largest layer is the layer in hand).
        (Setup(Accounting.DEEPSPEED), Stage.ZERO3, 0, 18_018, 18_000, 18),
        # ZeRO-3 with the optimizer offloaded keeps the 2-byte weights' slice: int(2P/N) = int(2,000.0625).
        (Setup(Accounting.DEEPSPEED, Placement(Offload.OPTIMIZER)), Stage.ZERO3, 0, 2_002, 2_000, 2),
        # Megatron-LM: 6P whole, 12 B split, 6P + 12P/N: 11.625 B = 12 × 31/32 less, and never 12.
        (MEGATRON, Stage.ZERO1, 6 * 32_001, 12_012, Fraction(96_003, 8), Fraction(93, 8)),
    ],
)
def test_the_padding_at_its_worst_is_one_weight_of_the_split_bands(
    setup: Setup, stage: Stage, whole: int, page: int, formula: int | Fraction, more: int | Fraction
) -> None:
    assert per_gpu_bytes(stage, 32_001, 32, MIXED_ADAM, setup=setup) == whole + page
    assert page - formula == more


DEEPSPEED = Setup(Accounting.DEEPSPEED)
OFFLOAD_OPTIMIZER = Setup(Accounting.DEEPSPEED, Placement(Offload.OPTIMIZER))

# (recipe, stage, setup, bytes on one card's GPU, in its host's pinned RAM), 10**9 weights on 8 cards:
# slices of 125,000,000 weights. DeepSpeed adds a 4 B fp32 gradient slice only where the recipe's
# gradients are narrower than fp32, and keeps it with the optimizer state, wherever that is.
DEEPSPEED_PLACES = [
    # ZeRO-2: 2 B weights whole (2e9) + (2 grads + 4 master + 8 moments + 4 fp32) × 1.25e8 = 4.25e9.
    ("mixed-adam", Stage.ZERO2, DEEPSPEED, 4_250_000_000, 0),
    # No master copy, so no fp32 copy of the gradients either: 2e9 + (2 + 0 + 4) × 1.25e8 = 2.75e9.
    ("bf16-adam", Stage.ZERO2, DEEPSPEED, 2_750_000_000, 0),
    # 4 B gradients are already fp32: 2e9 + (4 + 4 + 8) × 1.25e8 = 4e9, no fp32 copy.
    ("wide-reduce", Stage.ZERO2, DEEPSPEED, 4_000_000_000, 0),
    # ZeRO-1 offloading the optimizer: weights and gradients whole on the card (2 + 2 B × 1e9); the
    # master, moments and fp32 gradients' slices on the host, (4 + 8 + 4) × 1.25e8 = 2e9.
    ("mixed-adam", Stage.ZERO1, OFFLOAD_OPTIMIZER, 4_000_000_000, 2_000_000_000),
]


@pytest.mark.parametrize(("recipe", "stage", "setup", "gpu", "pinned"), DEEPSPEED_PLACES)
def test_deepspeeds_fp32_gradients_are_for_narrow_gradients_and_live_with_the_optimizer(
    recipe: str, stage: Stage, setup: Setup, gpu: int, pinned: int
) -> None:
    chosen = _recipe(recipe)
    assert per_gpu_bytes(stage, 10**9, 8, chosen, setup=setup) == gpu
    assert per_gpu_bytes(stage, 10**9, 8, chosen, setup=setup, place=Place.CPU_PINNED) == pinned


def test_deepspeeds_fp32_gradients_are_for_the_weights_that_train() -> None:
    # Half of 10**9 weights frozen: 2 B for every weight (2e9), and 2 + 4 + 8 + 4 B for each of a card's
    # 62,500,000 of the 5e8 that train (1.125e9).
    assert per_gpu_bytes(Stage.ZERO2, 10**9, 8, MIXED_ADAM, frozen=5 * 10**8, setup=DEEPSPEED) == 3_125_000_000


FP32_COPY = "DeepSpeed keeps the gradients' fp32 copy for the update"
NO_ROUNDING = (
    "DeepSpeed's estimator does not round a slice up to whole weights: here, where the cards do not divide the "
    "weights evenly, it counts a few bytes less."
)
ZERO2_BUCKET = "DeepSpeed's ZeRO-2 reduces gradients through its bucket, an overhead: no layer of whole gradients."
ZERO3_LAYER = (
    "DeepSpeed counts 4 B for each weight of the largest layer, its weights and gradients assembled, even on one card."
)

# (recipe, stage, setup, padded, what DeepSpeed's count says, word for word). Mixed-precision Adam's 2 B
# gradients get a 4 B fp32 copy: +4 B, or under ZeRO-3, where it replaces the 2 B slice, +4 − 2 = +2 B.
DEEPSPEED_SAID = [
    ("mixed-adam", Stage.DP, DEEPSPEED, True, (f"{FP32_COPY}: +4 B per weight, on every card.",)),
    (
        "mixed-adam",
        Stage.ZERO1,
        DEEPSPEED,
        True,
        (
            f"{FP32_COPY}: +4 B per weight, sharded.",
            "DeepSpeed has no estimator for ZeRO-1: counted as ZeRO-2's, with the gradients kept whole.",
            NO_ROUNDING,
        ),
    ),
    ("mixed-adam", Stage.ZERO2, DEEPSPEED, False, (f"{FP32_COPY}: +4 B per weight, sharded.", ZERO2_BUCKET)),
    (
        "mixed-adam",
        Stage.ZERO3,
        DEEPSPEED,
        True,
        (f"{FP32_COPY} instead of the 2-byte one: +2 B per weight, sharded.", ZERO3_LAYER, NO_ROUNDING),
    ),
    (
        "mixed-adam",
        Stage.ZERO3,
        Setup(Accounting.DEEPSPEED, Placement(Offload.OPTIMIZER)),
        False,
        (
            f"{FP32_COPY} instead of the 2-byte one: +2 B per weight, sharded, on the host with the optimizer state.",
            ZERO3_LAYER,
        ),
    ),
    ("fp32-adam", Stage.ZERO2, DEEPSPEED, False, (ZERO2_BUCKET,)),  # 4 B gradients: no copy to add
    ("mixed-adam", Stage.DP, DEEPSPEED, False, (f"{FP32_COPY}: +4 B per weight, on every card.",)),
]


@pytest.mark.parametrize(("recipe", "stage", "setup", "padded", "said"), DEEPSPEED_SAID)
def test_every_deepspeed_difference_word_for_word(
    recipe: str, stage: Stage, setup: Setup, padded: bool, said: tuple[str, ...]
) -> None:
    assert differences(stage, _recipe(recipe), setup, padded) == said


FSDP2_SLICE = (
    "FSDP2 keeps each weight's slice in its own 4-byte dtype and updates it there: no separate master copy. "
    "MixedPrecisionPolicy casts only the gathered copy to the 2-byte param_dtype."
)
# Mixed-precision Adam: slices in the master's 4 B, +4 − 2 = +2 B each for weights and gradients, −4 B master.
FSDP2_REDUCE = (
    "FSDP2 reduce-scatters the gradients in reduce_dtype (2 B here, the recipe's gradients) and casts each slice "
    "back to the weights' 4-byte dtype: +2 B per weight each for the weights' and the gradients' slices, −4 B for "
    "the master copy, sharded."
)
FSDP2_PADS = (
    "FSDP2 cuts each parameter along its first dimension and pads that dimension to a multiple of the cards: every "
    "card keeps ceil(rows / N) rows of each parameter's weights, a little more than an even split of the model "
    "where a parameter's rows do not divide."
)
FSDP2_SAID = [
    (
        Stage.ZERO3,
        FSDP2,
        (
            FSDP2_SLICE,
            FSDP2_REDUCE,
            "FSDP2 holds two layers' weights in param_dtype (2 B) while it works on one: the layer and an "
            "all-gather's flat output (its own until the next copy-in, or the next layer's, prefetched); in the "
            "backward also the layer's gradients (2 B) and a reduce-scatter input (2 B).",
            FSDP2_PADS,
        ),
    ),
    (
        Stage.ZERO2,
        Setup(Accounting.FSDP2, Placement(Offload.OPTIMIZER, Device.NVME)),
        (
            FSDP2_SLICE,
            FSDP2_REDUCE,
            "FSDP2's ZeRO-2 is fully_shard with reshard_after_forward=False: the weights it gathers stay whole, in "
            "param_dtype (2 B), from the forward to the backward, and only the slice stays between steps.",
            FSDP2_PADS,
            "FSDP2's CPUOffloadPolicy moves the weights' slices, their gradients and the optimizer state to the "
            "CPU; with pin_memory, the default, the weights' and gradients' slices are page-locked, Adam's moments "
            "(the optimizer's zeros_like of the slice) are not.",
            "FSDP2 has no offload of the optimizer alone: counted as CPUOffloadPolicy, weights too.",
            "FSDP2 has no NVMe offload: counted on the CPU.",
        ),
    ),
]


@pytest.mark.parametrize(("stage", "setup", "said"), FSDP2_SAID)
def test_every_fsdp2_difference_word_for_word(stage: Stage, setup: Setup, said: tuple[str, ...]) -> None:
    assert differences(stage, MIXED_ADAM, setup) == said


def test_fsdp2s_moments_are_the_pageable_part() -> None:
    # Mixed-precision SGD, 32,768 weights on 8 cards, slices of 4,096: the weights' and gradients' slices
    # (4 + 4 B) pinned, 32,768 B; the momentum (4 B), made by zeros_like, pageable, 16,384 B.
    setup = Setup(Accounting.FSDP2, Placement(Offload.OPTIMIZER_PARAMS))
    sgd = RECIPES[RecipeName.MIXED_SGD]
    assert per_gpu_bytes(Stage.ZERO3, P, 8, sgd, setup=setup, place=Place.CPU_PINNED) == 32_768
    assert per_gpu_bytes(Stage.ZERO3, P, 8, sgd, setup=setup, place=Place.CPU_PAGEABLE) == 16_384


# The placement's caveat, where the count does not say its own: (recipe, stage, setup, the differences).
CAVEATED = [
    (
        "mixed-adam",
        Stage.DP,
        Setup(placement=Placement(Offload.OPTIMIZER)),
        ("Data parallelism offloads nothing: DeepSpeed's offload needs ZeRO-1 or above.",),
    ),
    (
        "fp32-adam",
        Stage.ZERO2,
        Setup(Accounting.DEEPSPEED, Placement(Offload.OPTIMIZER_PARAMS)),
        (ZERO2_BUCKET, "ZeRO-2 keeps its weights on the card: offloading them needs ZeRO-3."),
    ),
]


@pytest.mark.parametrize(("recipe", "stage", "setup", "said"), CAVEATED)
def test_the_placements_caveat_is_said_where_the_count_has_none_of_its_own(
    recipe: str, stage: Stage, setup: Setup, said: tuple[str, ...]
) -> None:
    assert differences(stage, _recipe(recipe), setup) == said  # padded left to its default, False


def test_megatrons_count_says_it_has_no_offload() -> None:
    said = differences(Stage.ZERO1, MIXED_ADAM, Setup(Accounting.MEGATRON, Placement(Offload.OPTIMIZER)))
    assert (
        said[-1]
        == "Megatron-LM's count has no offload (its --optimizer-cpu-offload is not in it): counted on the card."
    )
    # Without padded, DeepSpeed's ZeRO-1 says nothing of rounding.
    assert NO_ROUNDING not in differences(Stage.ZERO1, MIXED_ADAM, DEEPSPEED)
