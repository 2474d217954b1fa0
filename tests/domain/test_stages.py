from __future__ import annotations

import itertools

import pytest

from app.domain.bands import Band
from app.domain.stages import Stage


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


def test_every_stage_is_explained() -> None:
    titles = [stage.info.title for stage in Stage]
    assert titles == ["Data parallelism", "ZeRO-1", "ZeRO-2", "ZeRO-3"]
    assert all(len(stage.info.explanation) > 100 for stage in Stage)
