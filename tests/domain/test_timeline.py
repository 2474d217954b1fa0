"""One card's memory through the step: the chart's points, against hand calculations."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.accounting import Accounting
from app.domain.activations import Recompute
from app.domain.architecture import ModelName
from app.domain.presets import PRESETS
from app.domain.report import RunReport
from app.domain.scenario import Inputs, resolve
from app.domain.stages import Stage
from app.domain.step import Part
from app.domain.timeline import POINTS, Instant, Point
from tests.conftest import examples

SEED = 30 * 10**9
LAYER = SEED // 8
"""The seed's 8 equal layers: one a column."""


def _report(**inputs: object) -> RunReport:
    return resolve(Inputs(**inputs)).report  # type: ignore[arg-type]


def _moves(points: tuple[Point, ...]) -> tuple[list[tuple[Point, Point]], list[tuple[Point, Point]]]:
    """The rises and the falls between one point and the next."""
    pairs = list(itertools.pairwise(points))
    return [(a, b) for a, b in pairs if b.nbytes > a.nbytes], [(a, b) for a, b in pairs if b.nbytes < a.nbytes]


def test_every_step_has_53_points_one_a_phase() -> None:
    points = _report().timeline(Stage.ZERO3)
    assert POINTS == 53 == len(points)
    assert [p.phase for p in points] == list(range(53))
    assert [p.instant for p in points[:4]] == [Instant.WHOLE, Instant.GATHER, Instant.COMPUTE, Instant.DISCARD]


def test_zero3_rises_at_each_of_16_gathers_and_falls_at_each_of_16_discards() -> None:
    points = _report().timeline(Stage.ZERO3)
    rest = SEED * 16 // 8  # 2 + 2 + 4 + 8 bytes a weight, each card an eighth: 60,000,000,000 B, 55.9 GiB
    gathered = LAYER * 2  # one layer's bf16 weights, whole: 7,500,000,000 B
    rises, falls = _moves(points)
    # Each gather rises by the layer; each backward compute by its gradients; each discard falls to rest.
    assert [b.instant for _, b in rises] == [Instant.GATHER] * 8 + [Instant.GATHER, Instant.COMPUTE] * 8
    assert [b.instant for _, b in falls] == [Instant.DISCARD] * 16
    assert {p.nbytes for p in points if p.instant in (Instant.WHOLE, Instant.DISCARD)} == {rest}
    forward = [p for p in points if p.instant is not Instant.DISCARD and 0 < p.phase <= 24]
    gathers = [p for p in points if p.instant is Instant.GATHER and p.phase > 24]
    backward = [p for p in points if p.instant is Instant.COMPUTE and 24 < p.phase < 49]
    assert {p.nbytes for p in forward + gathers} == {rest + gathered}  # 67,500,000,000 B: 62.9 GiB
    assert {p.nbytes for p in backward} == {rest + gathered + LAYER * 2}  # and the layer's gradients: 69.8 GiB
    assert f"{(rest + gathered) / 2**30:.1f}" == "62.9"
    assert {(p.gathered, p.computed) for p in backward} == {(gathered, LAYER * 2)}


@pytest.mark.parametrize(
    ("stage", "rest", "forward", "backward"),
    [
        (Stage.DP, SEED * 16, 0, 0),  # 480,000,000,000 B, 447.0 GiB, flat
        (Stage.ZERO1, SEED * (2 + 2) + SEED * 12 // 8, 0, 0),
        (Stage.ZERO2, SEED * 2 + SEED * 14 // 8, 0, LAYER * 2),  # the layer's gradients before their reduce-scatter
        (Stage.ZERO3, SEED * 16 // 8, LAYER * 2, LAYER * 4),
    ],
)
def test_each_stage_in_hand_over_its_rest(stage: Stage, rest: int, forward: int, backward: int) -> None:
    points = _report().timeline(stage)
    for point in points:
        # The gather holds the layer's weights (ZeRO-3), the compute the layer in hand, the discard nothing.
        computed = forward if point.phase <= 24 else backward
        added = {Instant.GATHER: forward, Instant.COMPUTE: computed}.get(point.instant, 0)
        assert point.nbytes == rest + added
        assert point.state == rest
    rises, falls = _moves(points)
    assert (len(rises), len(falls)) == {0: (0, 0), LAYER * 2: (8, 8), LAYER * 4: (24, 16)}[backward]


def test_data_parallelism_is_flat_without_activations() -> None:
    assert {p.nbytes for p in _report().timeline(Stage.DP)} == {SEED * 16}
    assert f"{SEED * 16 / 2**30:.1f}" == "447.0"


# Llama 3 8B at s = 8192 (docs/activations.md): a block keeps 1,376,780,288 B, the output layer
# 2 × 67,108,864 B (the final norm's and the head's inputs) and 4,202,692,608 B of log-probabilities;
# the embedding keeps nothing. Column 0 is the embedding and blocks 1-3.
BLOCK = 1_376_780_288
OUTPUT = 2 * 67_108_864 + 4_202_692_608
LLAMA_8B = PRESETS[ModelName("llama-3-8b")].params


@pytest.mark.parametrize("stage", list(Stage))
def test_activations_rise_through_the_forward_and_fall_through_the_backward(stage: Stage) -> None:
    points = _report(model=ModelName("llama-3-8b"), seq=8192).timeline(stage)
    forward = [p.activations for p in points if 1 <= p.phase <= 24]
    backward = [p.activations for p in points if 25 <= p.phase <= 48]
    assert forward == sorted(forward)
    assert backward == sorted(backward, reverse=True)
    assert points[0].activations == points[-1].activations == 0
    after = [p.activations for p in points if p.instant is Instant.DISCARD and p.phase <= 24]
    assert after[0] == 3 * BLOCK
    assert after[-1] == 32 * BLOCK + OUTPUT == 48_393_879_552
    # The backward starts with all of them, and leaves each column with the column before it's.
    before = [p.activations for p in points if p.instant is Instant.GATHER and p.phase > 24]
    assert before == after[::-1]
    assert [p.activations for p in points if p.instant is Instant.DISCARD and p.phase > 24] == [*after[-2::-1], 0]


def test_data_parallelism_with_activations_is_its_state_and_them() -> None:
    points = _report(model=ModelName("llama-3-8b"), seq=8192).timeline(Stage.DP)
    assert {p.state for p in points} == {LLAMA_8B * 16}
    assert {p.gathered + p.computed + p.overheads for p in points} == {0}
    assert max(p.nbytes for p in points) == LLAMA_8B * 16 + 32 * BLOCK + OUTPUT


def test_the_points_are_the_steps_own_figures() -> None:
    report = _report(model=ModelName("llama-3-8b"), seq=4096, count_overheads=True)
    for stage in Stage:
        phases, points = report.step(stage), report.timeline(stage)
        assert report.timeline(stage) is points  # worked out once
        for point in points:
            phase = phases[point.phase]
            assert (point.state, point.overheads) == (phase.state_bytes, phase.overhead_bytes)
            assert point.nbytes == phase.live_bytes
        assert {p.phase for p in points if p.instant is Instant.WHOLE} == {
            phase.index for phase in phases if phase.part not in (Part.FORWARD, Part.BACKWARD)
        }


def _check(report: RunReport, stage: Stage) -> None:
    """What holds of every timeline: the step's figures at its moments, continuous between them, and the peak."""
    phases, points = report.step(stage), report.timeline(stage)
    assert len(points) == POINTS
    assert max(p.nbytes for p in points) == max(p.live_bytes for p in phases) == report[stage].peak_bytes
    for first in range(1, 49, 3):
        # A column's gather and discard hold no more than its compute, the layer in hand; a backward column
        # the backward pass does not reach holds the step's figure, nothing in hand, all through.
        gather, in_hand, discard = points[first : first + 3]
        if not phases[first].reached:
            assert gather.nbytes == in_hand.nbytes == discard.nbytes
        assert in_hand.nbytes == phases[first + 1].live_bytes
        assert in_hand.nbytes >= max(gather.nbytes, discard.nbytes)
    assert points[0].nbytes == points[-1].nbytes == phases[0].live_bytes


@settings(max_examples=examples(40), deadline=None)
@given(
    model=st.sampled_from([ModelName("llama-3-8b"), ModelName("gpt-3-175b"), None]),
    gpus=st.integers(1, 128),
    seq=st.sampled_from([None, 512, 4096]),
    batch=st.integers(1, 4),
    recompute=st.sampled_from(list(Recompute)),
    accounting=st.sampled_from(list(Accounting)),
    trainable=st.sampled_from([None, "50%", "10%"]),
    overheads=st.booleans(),
)
def test_every_timeline_holds_the_steps_moments_and_peaks_at_the_peak(
    model: ModelName | None,
    gpus: int,
    seq: int | None,
    batch: int,
    recompute: Recompute,
    accounting: Accounting,
    trainable: str | None,
    overheads: bool,
) -> None:
    report = _report(
        model=model,
        gpus=gpus,
        seq=seq,
        batch=batch,
        recompute=recompute,
        accounting=accounting,
        trainable=trainable,
        count_overheads=overheads,
    )
    for stage in Stage:
        _check(report, stage)
