from __future__ import annotations

import itertools

import pytest

from app.domain.recipes import MIXED_ADAM, RECIPES, Band, RecipeName
from app.domain.stages import Stage, stage_explanation


@pytest.mark.parametrize(
    ("stage", "sharded"),
    [
        (Stage.DP, set()),
        (Stage.ZERO1, {Band.MASTER, Band.MOMENTS}),
        (Stage.ZERO2, {Band.MASTER, Band.MOMENTS, Band.GRADIENTS}),
        (Stage.ZERO3, set(Band)),
    ],
)
def test_each_stage_shards_what_the_seed_says(stage: Stage, sharded: set[Band]) -> None:
    assert stage.sharded == sharded


def test_each_stage_shards_everything_the_previous_one_did() -> None:
    stages = list(Stage)
    for earlier, later in itertools.pairwise(stages):
        assert earlier.sharded < later.sharded


def test_every_stage_has_its_name() -> None:
    titles = [stage.info.title for stage in Stage]
    assert titles == ["Data parallelism", "ZeRO-1", "ZeRO-2", "ZeRO-3"]


@pytest.mark.parametrize(
    ("recipe", "named", "bytes_of_total"),
    [
        ("mixed-adam", "the fp32 master copy and Adam's two fp32 moments", "12 of the 16 bytes"),
        ("fp32-adam", "Adam's two fp32 moments", "8 of the 16 bytes"),
        ("bf16-adam", "Adam's two bf16 moments", "4 of the 8 bytes"),
        ("mixed-sgd", "the fp32 master copy and the fp32 momentum", "8 of the 12 bytes"),
    ],
)
def test_zero1_names_the_optimizer_state_the_recipe_really_keeps(recipe: str, named: str, bytes_of_total: str) -> None:
    text = stage_explanation(Stage.ZERO1, RECIPES[RecipeName(recipe)], 8)
    assert f"({named}, {bytes_of_total})" in text
    assert ("master copy" in text) is RECIPES[RecipeName(recipe)].has_master


@pytest.mark.parametrize("stage", list(Stage))
def test_on_one_card_every_stage_is_explained_as_data_parallelism(stage: Stage) -> None:
    text = stage_explanation(stage, MIXED_ADAM, 1)
    assert "nothing moves" in text
    assert "all-gather" not in text
    assert "reduce-scatter" not in text


def test_zero2_reduce_scatters_during_the_backward_pass_not_after_it() -> None:
    assert "during the backward pass" in stage_explanation(Stage.ZERO2, MIXED_ADAM, 8).lower()


# What a student reads under each stage, whole: the text is the page's, so it is checked as it reads.
# The figures in it are the ZeRO paper's: K = 12 of mixed-precision Adam's 16 bytes (section 3.1), and
# ZeRO-3's traffic of 3Ψ against data parallelism's 2Ψ (section 7.2.2, "1.5x").
EXPLANATIONS = [
    (
        Stage.DP,
        8,
        "Every card holds a full copy of all the bands for every weight. After the backward pass the cards "
        "all-reduce their gradients, then each one applies the same update and gets the same answer. The copies "
        "are identical, so most of this memory stores nothing new.",
    ),
    (
        Stage.ZERO1,
        8,
        "The optimizer state (the fp32 master copy and Adam's two fp32 moments, 12 of the 16 bytes) is split: "
        "each card keeps it only for the slice of weights it is responsible for and updates only that slice. The "
        "updated weights are then all-gathered so every card has the current weights for the next forward pass.",
    ),
    (
        Stage.ZERO2,
        8,
        "A card only needs the gradients of the slice it updates. During the backward pass each layer's gradients "
        "are reduce-scattered as soon as they are computed: each card receives the summed gradients for its own "
        "slice and drops the rest. The traffic is the same as data parallelism's, because an all-reduce is a "
        "reduce-scatter plus an all-gather.",
    ),
    (
        Stage.ZERO3,
        8,
        "Each card stores only its slice of the model. When the forward or backward pass reaches a layer, the "
        "cards all-gather that layer's weights, use them and discard them again. A card holds its slice plus one "
        "assembled layer, so the largest single layer must still fit on one card. The extra all-gathers raise the "
        "traffic from 2P to 3P.",
    ),
    (
        Stage.ZERO3,
        1,
        "With one card there is no other card to share with: every stage keeps everything, as data parallelism "
        "does, and nothing moves between cards.",
    ),
]


@pytest.mark.parametrize(("stage", "gpus", "text"), EXPLANATIONS)
def test_each_stage_is_explained_as_the_page_says_it(stage: Stage, gpus: int, text: str) -> None:
    assert stage_explanation(stage, MIXED_ADAM, gpus) == text
