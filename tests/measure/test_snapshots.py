"""The shipped measurement against the model: every byte of difference per rank named, by hand.

The toy: 8 layers of 64 × 64 = 4,096 weights, 32,768 in all, in fp32 on 8 ranks, set against the
`fp32-adam` recipe (weights 4 B, gradients 4 B, no master copy, moments 8 B per weight). HSDP runs the
same 8 ranks as 2 shard groups of 4, so the model it is set against is ZeRO-3 with a shard group of 4.
"""

from __future__ import annotations

import itertools
import json
from fractions import Fraction

import pytest

from app.domain.recipes import RECIPES, Band, RecipeName
from app.domain.sharding import CellState
from app.domain.stages import Stage
from app.domain.state_bytes import per_gpu_bytes
from app.measure import SNAPSHOT
from app.measure.phases import phase_of
from app.measure.snapshots import (
    CURVE_NOTES,
    IMPLS,
    Impl,
    Reason,
    SnapshotError,
    cell_measures,
    compare,
    comparison,
    parse,
)

SNAP = parse(json.loads(SNAPSHOT.read_text()))
LAYER = 4096
P = 8 * LAYER
ALL = tuple((m.stage, m.impl) for m in SNAP.arrangements)

# Hand calculations, per rank: the model's bytes for fp32-adam, and each named difference.
# DP: 16 B × P. ZeRO-1: (4 + 4) × P + 8 × P/8. ZeRO-2: 4 × P + (4 + 8) × P/8. ZeRO-3: 16 × P/8.
MODEL = {Stage.DP: 16 * P, Stage.ZERO1: 8 * P + P, Stage.ZERO2: 4 * P + 12 * LAYER, Stage.ZERO3: 16 * LAYER}
# HSDP: ZeRO-3 split across a shard group of 4, not 8: 8 layers × 4,096 weights × 16 B / 4 = 131,072 B.
HSDP_REST = 8 * 4096 * 16 // 4
MODELS = {(stage, impl): MODEL[stage] for stage, impl in ALL} | {(Stage.ZERO3, Impl.HSDP): HSDP_REST}
# Adam keeps a 4-byte step count per tensor it updates: 8 layers (DDP, FSDP2), one (its own layer
# for ZeroRedundancyOptimizer, FSDP1's flat parameter on each rank). FSDP1's flat parameter has no
# padding: 32,768 divides by 8. ZeRO-2 under FSDP keeps 1/8 of the weights between steps, not all:
# 7/8 × 4 B × P fewer.
RESHARDED = -7 * 4 * LAYER
NAMED: dict[tuple[Stage, Impl], dict[Reason, int]] = {
    (Stage.DP, Impl.DDP): {Reason.STEP_COUNTERS: 32},
    (Stage.ZERO1, Impl.ZERO_REDUNDANCY): {Reason.STEP_COUNTERS: 4},
    (Stage.ZERO2, Impl.FSDP1): {Reason.STEP_COUNTERS: 4, Reason.PADDING: 0, Reason.RESHARDED_WEIGHTS: RESHARDED},
    (Stage.ZERO2, Impl.FSDP2): {Reason.STEP_COUNTERS: 32, Reason.RESHARDED_WEIGHTS: RESHARDED},
    (Stage.ZERO3, Impl.FSDP1): {Reason.STEP_COUNTERS: 4, Reason.PADDING: 0},
    (Stage.ZERO3, Impl.FSDP2): {Reason.STEP_COUNTERS: 32},
    (Stage.ZERO3, Impl.HSDP): {Reason.STEP_COUNTERS: 32},
}


def test_the_snapshot_holds_all_seven_arrangements_on_8_ranks() -> None:
    assert tuple((stage, impl) for stage in Stage for impl in IMPLS[stage]) == ALL
    assert (SNAP.world_size, SNAP.precision, SNAP.recipe.name, SNAP.model.params) == (8, "fp32", "fp32-adam", P)
    assert all(len(m.ranks) == 8 for m in SNAP.arrangements)


@pytest.mark.parametrize(("stage", "impl"), ALL)
def test_every_rank_is_the_model_plus_the_named_differences_exactly(stage: Stage, impl: Impl) -> None:
    agreement = compare(SNAP, SNAP.arrangement(stage, impl))
    named = NAMED[(stage, impl)]
    for rank in agreement.ranks:
        assert rank.model_bytes == MODELS[(stage, impl)]
        assert {d.reason: d.bytes for d in rank.differences} == named
        # No tolerance: what the names do not cover must be nothing at all.
        assert rank.storage_bytes == MODELS[(stage, impl)] + sum(named.values())
        assert rank.unexplained_bytes == 0
    assert agreement.unexplained == 0


@pytest.mark.parametrize(("stage", "impl", "agreeing"), [
    (Stage.DP, Impl.DDP, 192),
    (Stage.ZERO1, Impl.ZERO_REDUNDANCY, 192),
    # The weights: the model keeps them whole on every card, FSDP only layer i on rank i: 56 cells differ.
    (Stage.ZERO2, Impl.FSDP1, 192 - 56),
    (Stage.ZERO2, Impl.FSDP2, 0),
    (Stage.ZERO3, Impl.FSDP1, 192),
    (Stage.ZERO3, Impl.FSDP2, 0),
    # A 1/4 strip in every cell, where the model draws two whole layers a card and none of the rest.
    (Stage.ZERO3, Impl.HSDP, 0),
])  # fmt: skip
def test_cells_agree_where_the_pattern_is_the_models(stage: Stage, impl: Impl, agreeing: int) -> None:
    measured = SNAP.arrangement(stage, impl)
    agreement, cells = compare(SNAP, measured), cell_measures(SNAP, measured)
    # 8 ranks × 8 layers × 3 drawn bands (fp32 Adam has no master copy).
    assert agreement.cells == len(cells) == 192
    assert agreement.cells_agreeing == sum(1 for cell in cells if cell.agrees) == agreeing


def test_fsdp2_holds_one_eighth_strip_of_every_cell_where_its_rows_fall() -> None:
    for cell in cell_measures(SNAP, SNAP.arrangement(Stage.ZERO3, Impl.FSDP2)):
        assert cell.state is CellState.PARTIAL
        assert (cell.share, cell.start) == (Fraction(1, 8), Fraction(cell.card, 8))


# Rank r is in group r // 4 at place r % 4, and holds rows 16 × (r % 4) to 16 × (r % 4) + 15 of 64.
HSDP_PLACES = [(0, 0), (1, 1), (2, 2), (3, 3), (4, 0), (5, 1), (6, 2), (7, 3)]


@pytest.mark.parametrize(("rank", "place"), HSDP_PLACES)
def test_hsdp_holds_a_quarter_strip_of_every_cell_the_same_in_both_groups(rank: int, place: int) -> None:
    cells = [c for c in cell_measures(SNAP, SNAP.arrangement(Stage.ZERO3, Impl.HSDP)) if c.card == rank]
    assert len(cells) == 8 * 3
    for cell in cells:
        assert cell.state is CellState.PARTIAL
        assert (cell.share, cell.start) == (Fraction(1, 4), Fraction(place, 4))
    # The model's grid for a shard group of 4: each card keeps a quarter of the model, two whole layers,
    # the card in the same place of the other group the same two.
    assert {c.weight for c in cells if c.model is CellState.SOLID} == {2 * place, 2 * place + 1}
    assert all(c.model is CellState.DASHED for c in cells if c.weight not in (2 * place, 2 * place + 1))


@pytest.mark.parametrize(("rank", "place"), HSDP_PLACES)
def test_each_hsdp_rank_keeps_a_quarter_of_the_model_as_flat_zero3_on_4_cards_does(rank: int, place: int) -> None:
    agreement = compare(SNAP, SNAP.arrangement(Stage.ZERO3, Impl.HSDP))
    held = agreement.ranks[rank]
    assert held.rank == rank
    # By hand: 8 layers × 4,096 weights × 16 B (4 + 4 + 0 + 8) / 4 = 131,072 B, plus Adam's 8 step counters.
    assert held.storage_bytes - held.counters_bytes == 8 * 4096 * 16 // 4 == 131_072
    assert held.counters_bytes == 8 * 4
    # Band by band, a quarter of each layer: weights and gradients 4 B × 1,024, moments 8 B × 1,024.
    assert {(x.weights, x.gradients, x.master, x.moments) for x in held.layers} == {(4096, 4096, 0, 8192)}
    assert {x.start for x in held.layers} == {place * 1024}
    # The model's card in a shard group of 4 of 8 keeps what flat ZeRO-3 on 4 cards keeps.
    assert held.model_bytes == per_gpu_bytes(Stage.ZERO3, P, 4, RECIPES[RecipeName.FP32_ADAM]) == 131_072
    assert held.unexplained_bytes == 0


@pytest.mark.parametrize(
    ("stage", "impl", "shards", "replicas", "nodes"),
    [
        (Stage.DP, Impl.DDP, 8, 1, 1),
        (Stage.ZERO2, Impl.FSDP2, 8, 1, 1),
        (Stage.ZERO3, Impl.FSDP1, 8, 1, 1),
        (Stage.ZERO3, Impl.FSDP2, 8, 1, 1),
        # torch's 2 × 4 mesh: the model's run is a shard group of 4 on each of 2 nodes of 4.
        (Stage.ZERO3, Impl.HSDP, 4, 2, 2),
    ],
)
def test_the_models_run_takes_the_shard_group_torch_built(
    stage: Stage, impl: Impl, shards: int, replicas: int, nodes: int
) -> None:
    measured = SNAP.arrangement(stage, impl)
    run = SNAP.run(measured)
    assert (run.gpus, run.shards, run.replicas, run.nodes) == (8, shards, replicas, nodes)
    assert measured.shard_size == (None if shards == 8 else shards)


def test_fsdp1_and_zero_redundancy_put_layer_i_on_rank_i() -> None:
    for stage, impl in ((Stage.ZERO3, Impl.FSDP1), (Stage.ZERO1, Impl.ZERO_REDUNDANCY)):
        moments = [c for c in cell_measures(SNAP, SNAP.arrangement(stage, impl)) if c.band is Band.MOMENTS]
        assert {(c.card, c.weight) for c in moments if c.share == 1} == {(i, i) for i in range(8)}
        assert all(c.share == 0 for c in moments if c.card != c.weight)


def _curve(stage: Stage, impl: Impl) -> list[tuple[int, int, int]]:
    return [(p.phase, p.model_bytes, p.measured_bytes) for p in compare(SNAP, SNAP.arrangement(stage, impl)).curve]


@pytest.mark.parametrize(
    ("impl", "rest"),
    [
        (Impl.FSDP2, 16 * LAYER + 32),  # 16 B × P/8 and 8 step counters
        (Impl.HSDP, 16 * 2 * LAYER + 32),  # 16 B × P/4 and 8 step counters
    ],
)
def test_zero3_fsdp2_gathers_one_layer_at_a_time_as_the_model_does(impl: Impl, rest: int) -> None:
    curve = _curve(Stage.ZERO3, impl)
    # Forward: one layer's fp32 weights gathered (4 × 4,096). Backward: its weights and gradients.
    assert [m for _, _, m in curve] == [rest] + [rest + 4 * LAYER] * 8 + [rest + 8 * LAYER] * 8 + [rest] * 2
    # The model, phase by phase through forward and backward, is the same but for the 32 B of counters.
    assert all(model + 32 == measured for phase, model, measured in curve if phase <= 16)


def test_zero2_fsdp2_climbs_in_forward_and_steps_down_as_gradients_leave() -> None:
    measured = [m for _, _, m in _curve(Stage.ZERO2, Impl.FSDP2)]
    forward, backward = measured[1:9], measured[9:17]
    assert [b - a for a, b in zip(measured[:8], forward, strict=True)] == [4 * LAYER] * 8
    assert backward[0] - forward[-1] == 4 * LAYER  # the last layer's gradients computed
    assert [a - b for a, b in itertools.pairwise(backward)] == [4 * LAYER] * 7


@pytest.mark.parametrize("stage", [Stage.ZERO2, Stage.ZERO3])
def test_fsdp1_with_one_flat_parameter_gathers_the_whole_model_and_its_gradients_pile_up(stage: Stage) -> None:
    curve = _curve(stage, Impl.FSDP1)
    # At rest both stages hold 16 B × P/8 (all four bands of 1/8, fp32 Adam) + 4 B of one step counter.
    rest = 16 * LAYER + 4
    measured = [m for _, _, m in curve]
    # Forward: the one unit, the root, gathers all 8 layers' fp32 weights (4 B × P) and keeps them.
    assert measured[:9] == [rest] + [rest + 4 * P] * 8
    # Backward: each layer's fp32 gradients (4 B × 4,096) appear as autograd computes them, and stay
    # until the last: layer 7's first, then 6 ... 0.
    assert measured[9:17] == [rest + 4 * P + k * 4 * LAYER for k in range(1, 9)]
    assert measured[17:] == [rest, rest]
    # The peak, at Backward 0: the whole model's weights and gradients gathered, 327,684 B.
    assert max(measured) == measured[16] == 65_540 + 131_072 + 131_072


def test_fsdp1_curves_are_not_the_models_and_the_notes_do_not_say_they_are() -> None:
    # The model's ZeRO-3 peak: 16 B × P/8 + one layer's weights and gradients (8 B × 4,096) = 98,304 B.
    zero3 = compare(SNAP, SNAP.arrangement(Stage.ZERO3, Impl.FSDP1))
    assert max(p.model_bytes for p in zero3.curve) == 98_304
    assert zero3.curve_gap == 327_684 - 98_304
    # The model's ZeRO-2 peak: its 180,224 B at rest + one layer's gradients, 16,384 B = 196,608 B.
    zero2 = compare(SNAP, SNAP.arrangement(Stage.ZERO2, Impl.FSDP1))
    assert max(p.model_bytes for p in zero2.curve) == 196_608
    assert zero2.curve_gap == 327_684 - 196_608
    for stage in (Stage.ZERO2, Stage.ZERO3):
        note = CURVE_NOTES[(stage, Impl.FSDP1)]
        assert note.startswith("Not the model's shape.")
        assert "as the model draws" not in note
        assert "gradients appear" in note


def test_the_curves_that_do_agree_differ_only_by_the_step_counters() -> None:
    gaps = {(m.stage, m.impl): compare(SNAP, m).curve_gap for m in SNAP.arrangements}
    assert gaps[(Stage.DP, Impl.DDP)] == 32
    assert gaps[(Stage.ZERO1, Impl.ZERO_REDUNDANCY)] == 4
    assert gaps[(Stage.ZERO3, Impl.FSDP2)] == 32
    assert gaps[(Stage.ZERO3, Impl.HSDP)] == 32


def test_measured_moments_sit_on_the_models_phases() -> None:
    # Read with the snapshot: each moment knows its phase on the model's step, as the curve sets it.
    moments = SNAP.arrangements[0].ranks[0].phases
    assert [p.phase for p in moments] == [phase_of(p.part, p.layer, 8) for p in moments]
    assert [p.phase for p in moments] == [0, *range(2, 48, 3), 50, 51]  # each layer's compute
    assert [p.phase for p in compare(SNAP, SNAP.arrangements[0]).curve] == [p.phase for p in moments]


def test_the_comparison_is_the_snapshot_with_every_arrangement_compared() -> None:
    whole = comparison(SNAP)
    assert (whole.torch, whole.world_size, whole.precision, whole.seconds) == (
        SNAP.torch,
        SNAP.world_size,
        SNAP.precision,
        SNAP.seconds,
    )
    assert (whole.recipe, whole.layers, whole.layer_weights) == ("fp32-adam", 8, LAYER)
    assert whole.arrangements == tuple(compare(SNAP, m) for m in SNAP.arrangements)
    # Each compared rank is the rank as read, with its agreement added.
    for agreement, measured in zip(whole.arrangements, SNAP.arrangements, strict=True):
        assert (agreement.stage, agreement.impl, agreement.title, agreement.seconds) == (
            measured.stage,
            measured.impl,
            measured.title,
            measured.seconds,
        )
        for compared, held in zip(agreement.ranks, measured.ranks, strict=True):
            assert (compared.rank, compared.layers, compared.phases) == (held.rank, held.layers, held.phases)
            assert (compared.counters_bytes, compared.storage_bytes) == (held.counters_bytes, held.storage_bytes)


@pytest.mark.parametrize(
    "broken",
    [{}, {"format": 2}, {"format": 1, "torch": "x"}, {**json.loads(SNAPSHOT.read_text()), "recipe": "bf17"}],
)
def test_a_broken_snapshot_is_refused_with_a_reason(broken: dict[str, object]) -> None:
    with pytest.raises(SnapshotError):
        parse(broken)
