from __future__ import annotations

from fractions import Fraction

import pytest

from app.domain.bands import Band
from app.domain.communication import Collective
from app.domain.fit import Run, peak_bytes
from app.domain.stages import Stage
from app.domain.step import LAST_PHASE, LAYERS, PHASES, Holding, Part, live_bytes, step

PARAMS = 30 * 10**9


@pytest.mark.parametrize(("stage", "p"), [(Stage.DP, 2), (Stage.ZERO1, 2), (Stage.ZERO2, 2), (Stage.ZERO3, 3)])
def test_the_tally_ends_the_step_at_the_seed_figures(stage: Stage, p: int) -> None:
    phases = step(stage)
    assert len(phases) == PHASES == 21
    assert phases[LAST_PHASE].tally_p == p
    tallies = [phase.tally_p for phase in phases]
    assert tallies == sorted(tallies)


def test_zero3_never_exceeds_its_shard_plus_one_assembled_layer_and_reaches_it() -> None:
    shard = Fraction(PARAMS * 16, LAYERS)
    layer = Fraction(PARAMS, LAYERS)
    bound = shard + layer * (2 + 2)
    live = [live_bytes(phase, card, PARAMS) for phase in step(Stage.ZERO3) for card in range(LAYERS)]
    assert max(live) == bound
    assert min(live) == shard
    # The same bound the sizing page reports as ZeRO-3's peak, for layers of P/8 weights.
    assert bound == peak_bytes(Stage.ZERO3, Run(params=PARAMS, gpus=8, largest_layer=PARAMS // LAYERS))


@pytest.mark.parametrize("stage", [Stage.ZERO1, Stage.ZERO2])
def test_stages_one_and_two_never_hold_less_than_at_rest(stage: Stage) -> None:
    phases = step(stage)
    for card in range(LAYERS):
        at_rest = live_bytes(phases[0], card, PARAMS)
        assert all(live_bytes(phase, card, PARAMS) >= at_rest for phase in phases)


def test_zero2_peak_matches_the_sizing_page() -> None:
    top = max(live_bytes(phase, 3, PARAMS) for phase in step(Stage.ZERO2))
    assert top == peak_bytes(Stage.ZERO2, Run(params=PARAMS, gpus=8, largest_layer=PARAMS // LAYERS))


def test_zero3_forward_gathers_the_layer_then_discards_it() -> None:
    phases = step(Stage.ZERO3)
    forward_3 = phases[3]
    assert (forward_3.part, forward_3.layer) == (Part.FORWARD, 2)
    assert [forward_3.holding(card, 2, Band.WEIGHTS) for card in range(LAYERS)] == [
        Holding.HELD if card == 2 else Holding.GATHERED for card in range(LAYERS)
    ]
    assert phases[4].holding(0, 2, Band.WEIGHTS) is Holding.DASHED
    assert [(t.collective, t.band, t.layers) for t in forward_3.transfers] == [
        (Collective.ALL_GATHER, Band.WEIGHTS, (2,))
    ]


def test_zero3_backward_gathers_weights_again_and_reduce_scatters_gradients() -> None:
    backward_8 = step(Stage.ZERO3)[9]
    assert (backward_8.part, backward_8.layer) == (Part.BACKWARD, 7)
    assert [t.collective for t in backward_8.transfers] == [Collective.ALL_GATHER, Collective.REDUCE_SCATTER]
    assert backward_8.holding(0, 7, Band.GRADIENTS) is Holding.GATHERED
    assert backward_8.holding(7, 7, Band.GRADIENTS) is Holding.HELD


def test_data_parallelism_shows_the_all_reduce_as_its_two_halves() -> None:
    phases = step(Stage.DP)
    sync = [t for phase in phases if phase.part is Part.GRADIENT_SYNC for t in phase.transfers]
    assert [(t.collective, t.band) for t in sync] == [
        (Collective.REDUCE_SCATTER, Band.GRADIENTS),
        (Collective.ALL_GATHER, Band.GRADIENTS),
    ]
    assert all(h is Holding.HELD for phase in phases for card in phase.holdings for layer in card for h in layer)


def test_zero1_gathers_updated_weights_and_zero3_needs_no_final_gather() -> None:
    assert [t.collective for t in step(Stage.ZERO1)[LAST_PHASE].transfers] == [Collective.ALL_GATHER]
    assert step(Stage.ZERO3)[LAST_PHASE].transfers == ()
    assert step(Stage.ZERO3)[LAST_PHASE].title == "Weight synchronisation"
