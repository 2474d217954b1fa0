"""FSDP2's count of a card, by hand: what `fully_shard` allocates (docs/accounting.md cites torch's lines).

FSDP2 keeps each sharded parameter in its own dtype (fp32 under mixed precision) and updates it there, so
there is no master copy; the gradient's slice is cast back to that dtype. The weights it gathers are in
`param_dtype` (the recipe's weights), the reduce-scatter's input in `reduce_dtype` (the recipe's gradients).
"""

from __future__ import annotations

import pytest

from app.domain.accounting import FSDP_STAGES, Accounting, Setup, differences, fsdp2_dtypes, terms
from app.domain.bands import MIXED_ADAM, RECIPES, Band, Recipe, RecipeName, custom_recipe
from app.domain.card import AT_REST, Moment, Pass, Place, card_bytes
from app.domain.memory import band_bytes, per_gpu_bytes
from app.domain.placement import Device, Offload, Placement
from app.domain.stages import Stage

FSDP2 = Setup(Accounting.FSDP2)
OFFLOADED = Setup(Accounting.FSDP2, Placement(Offload.OPTIMIZER_PARAMS))
UNPINNED = Setup(Accounting.FSDP2, Placement(Offload.OPTIMIZER_PARAMS, pin_memory=False))
WIDE_REDUCE = custom_recipe(2, 4, 4, 8)
"""bf16 compute with reduce_dtype=fp32: 4-byte gradients beside 2-byte weights."""


def _recipe(name: str) -> Recipe:
    return WIDE_REDUCE if name == "wide-reduce" else RECIPES[RecipeName(name)]


# Bytes per weight of each band's slice, by hand: weights and gradients in the wider of weights and
# master (the sharded parameter's own dtype), no master copy, the recipe's moments.
BANDS = [
    ("mixed-adam", 4, 4, 0, 8),
    ("fp32-adam", 4, 4, 0, 8),
    ("bf16-adam", 2, 2, 0, 4),
    ("mixed-sgd", 4, 4, 0, 4),
    ("adam-8bit", 4, 4, 0, 2),
    ("wide-reduce", 4, 4, 0, 8),
]


@pytest.mark.parametrize(("recipe", "weights", "gradients", "master", "moments"), BANDS)
@pytest.mark.parametrize("stage", sorted(FSDP_STAGES))
def test_each_band_is_a_slice_in_the_sharded_parameters_dtype(
    recipe: str, weights: int, gradients: int, master: int, moments: int, stage: Stage
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
]


@pytest.mark.parametrize(("recipe", "param", "reduce", "orig"), DTYPES)
def test_the_recipe_names_fsdp2s_dtypes(recipe: str, param: int, reduce: int, orig: int) -> None:
    dtypes = fsdp2_dtypes(_recipe(recipe))
    assert (dtypes.param, dtypes.reduce, dtypes.orig) == (param, reduce, orig)


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
