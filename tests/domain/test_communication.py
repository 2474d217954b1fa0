from __future__ import annotations

import pytest

from app.domain.communication import Collective, communication_p, transfers
from app.domain.recipes import Band
from app.domain.stages import Stage


@pytest.mark.parametrize(("stage", "p"), [(Stage.DP, 2), (Stage.ZERO1, 2), (Stage.ZERO2, 2), (Stage.ZERO3, 3)])
def test_traffic_per_step_matches_the_seed(stage: Stage, p: int) -> None:
    assert communication_p(stage) == p


def test_data_parallel_all_reduce_is_a_reduce_scatter_plus_an_all_gather() -> None:
    assert [(t.collective, t.band) for t in transfers(Stage.DP)] == [
        (Collective.REDUCE_SCATTER, Band.GRADIENTS),
        (Collective.ALL_GATHER, Band.GRADIENTS),
    ]


@pytest.mark.parametrize("stage", [Stage.ZERO1, Stage.ZERO2])
def test_stages_one_and_two_run_the_same_two_phases_and_gather_weights(stage: Stage) -> None:
    assert [(t.collective, t.band) for t in transfers(stage)] == [
        (Collective.REDUCE_SCATTER, Band.GRADIENTS),
        (Collective.ALL_GATHER, Band.WEIGHTS),
    ]


def test_stage_three_gathers_weights_in_forward_and_in_backward() -> None:
    gathers = [t.when for t in transfers(Stage.ZERO3) if t.collective is Collective.ALL_GATHER]
    assert gathers == ["in the forward pass", "in the backward pass"]
    assert all(t.band is Band.WEIGHTS for t in transfers(Stage.ZERO3) if t.collective is Collective.ALL_GATHER)
    assert transfers(Stage.ZERO3)[-1].description == (
        "reduce-scatter of the gradients layer by layer during the backward pass"
    )


@pytest.mark.parametrize("stage", [Stage.ZERO2, Stage.ZERO3])
def test_stages_that_shard_gradients_send_them_during_the_backward_pass(stage: Stage) -> None:
    scatter = [t for t in transfers(stage) if t.collective is Collective.REDUCE_SCATTER]
    assert [t.when for t in scatter] == ["layer by layer during the backward pass"]


@pytest.mark.parametrize("stage", list(Stage))
def test_one_card_moves_nothing(stage: Stage) -> None:
    assert transfers(stage, 1) == ()
    assert communication_p(stage, 1) == 0
