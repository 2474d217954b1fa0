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
