"""One card's memory through the training step, moment by moment: the points of the chart.

The step (`step.step`) gives each of its 21 phases one figure, what a card holds at the phase's
highest moment. Inside a pass phase a card holds three amounts in turn, and the chart draws each:

- **before** the phase's gather: what it holds entering the phase, its state, its overheads and the
  activations kept so far;
- **in hand**: the phase's own figure (`Phase.live_bytes`), with the layer gathered, the gradients
  computed before their reduce-scatter and the activations of the moment (`Phase.extra`);
- **after** the discard: the layer and its gradients gone, the activations kept when the phase ends.

The other phases (the start, the synchronisations, the update) hold one amount each, `whole`.

The activations kept when a forward phase ends are those of its column's last layer: the highest of
the column's forward moments (`Run.column_moments`, a stack that only grows in the forward). A
backward phase starts with them and ends with those of the column before it, its own layers' freed.
A per-weight term that lasts through both passes (FSDP2's ZeRO-2 keeps the whole model gathered)
stays between the layers: the amount between two layers is `sizing.layer_extra` at a moment with
no layer in hand. A backward phase the backward pass does not reach holds what the step says it
holds, at each of its three points. So every card rises at each gather and falls at each discard, and
the highest point is the step's highest phase: the peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.domain.eighths import COLUMNS
from app.domain.figures import LayerExtra
from app.domain.run import Run
from app.domain.sizing import layer_extra
from app.domain.step import Part, Phase
from app.domain.terms import Moment, Pass


class Instant(StrEnum):
    """Where in its phase a point is."""

    WHOLE = "whole"
    """A phase outside the passes: one amount all through it."""
    BEFORE = "before"
    """Entering a pass phase, before its gather."""
    IN_HAND = "in hand"
    """The layer in hand: the phase's own figure."""
    AFTER = "after"
    """Leaving a pass phase, after its discard."""


_PASS = (Instant.BEFORE, Instant.IN_HAND, Instant.AFTER)
POINTS = 1 + 2 * COLUMNS * len(_PASS) + 4
"""Points in every step's timeline: one for each phase outside the passes, three for each pass phase."""


@dataclass(frozen=True)
class Point:
    """What one card holds at one instant of the step, in its parts; every card holds the same."""

    phase: int
    instant: Instant
    state: int
    """The state at rest on the card (`Phase.state_bytes`)."""
    gathered: int
    """The layer's weights assembled from their owners (ZeRO-3), or FSDP2's kept gathered weights."""
    computed: int
    """The layer's gradients, computed before their reduce-scatter (ZeRO-2 and 3)."""
    activations: int
    overheads: int
    """The overheads counted (`Phase.overhead_bytes`): the same at every instant."""
    in_hand: int = 0
    """All a card holds beyond its state: the three above and any other kind held in hand (`LayerExtra.total`)."""

    @property
    def nbytes(self) -> int:
        """All of it together."""
        return self.state + self.in_hand + self.overheads


def _point(phase: Phase, instant: Instant, extra: LayerExtra) -> Point:
    return Point(
        phase.index,
        instant,
        phase.state_bytes,
        extra.gathered,
        extra.computed,
        extra.activations,
        phase.overhead_bytes,
        extra.total,
    )


def kept_after_forward(run: Run) -> tuple[int, ...]:
    """The activations a card keeps when the forward pass leaves each column: its last layer's stack."""
    kept: list[int] = []
    for column in run.column_moments:
        kept.append(max((m.activation for m in column.forward), default=kept[-1] if kept else 0))
    return tuple(kept)


def timeline(phases: tuple[Phase, ...], run: Run) -> tuple[Point, ...]:
    """Every point of one card's memory through the step of `phases` (`step.step` of `run`), in order."""
    kept = kept_after_forward(run)
    between: dict[tuple[Pass, int], LayerExtra] = {}

    def between_layers(part: Pass, activation: int, stage_phase: Phase) -> LayerExtra:
        # What a card holds in a pass with no layer in hand: the activations, and a term that lasts the pass.
        if (part, activation) not in between:
            between[part, activation] = layer_extra(stage_phase.stage, run, Moment(part, None, activation))
        return between[part, activation]

    points: list[Point] = []
    for phase in phases:
        column = phase.column
        if phase.part not in (Part.FORWARD, Part.BACKWARD) or column is None:
            points.append(_point(phase, Instant.WHOLE, phase.extra))
            continue
        if not phase.reached:  # nothing in hand: the step's figure all through the phase
            points.extend(_point(phase, instant, phase.extra) for instant in _PASS)
            continue
        earlier = kept[column - 1] if column else 0
        if phase.part is Part.FORWARD:
            part, entering, leaving = Pass.FORWARD, earlier, kept[column]
        else:
            part, entering, leaving = Pass.BACKWARD, kept[column], earlier
        points.append(_point(phase, Instant.BEFORE, between_layers(part, entering, phase)))
        points.append(_point(phase, Instant.IN_HAND, phase.extra))
        points.append(_point(phase, Instant.AFTER, between_layers(part, leaving, phase)))
    return tuple(points)
