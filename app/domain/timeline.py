"""One card's memory through the step, phase by phase: the points of the chart.

The step (`step.step`) gives each of its 53 phases one figure. A pass column is three phases, its beats
(`step.Beat`), so the chart needs no points between them: one point a phase, each what a card holds then.

- **gather**: the layer's weights assembled from their owners (ZeRO-3), with the activations kept so far;
- **compute**: the layer in hand, with the gradients computed before their reduce-scatter and the
  activations of the moment (the column's highest);
- **discard**: the layer and its gradients gone, the activations kept when the column ends.

The other phases (the start, the synchronisations, the update) are `whole`. So every card rises at
each gather and falls at each discard, and the highest point is the step's highest phase: the peak.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.domain.step import PHASES, Beat, Phase, kept_after_forward

__all__ = ["POINTS", "Instant", "Point", "kept_after_forward", "timeline"]


class Instant(StrEnum):
    """Which moment of the step a point is: one of a pass column's three beats, or a phase outside the passes."""

    WHOLE = "whole"
    """A phase outside the passes."""
    GATHER = "gather"
    """A pass column's gather: its layer's slices arrived."""
    COMPUTE = "compute"
    """A pass column's compute: the layer in hand."""
    DISCARD = "discard"
    """A pass column's discard: the assembled copy dropped."""


_INSTANT = {
    None: Instant.WHOLE,
    Beat.GATHER: Instant.GATHER,
    Beat.COMPUTE: Instant.COMPUTE,
    Beat.DISCARD: Instant.DISCARD,
}
POINTS = PHASES
"""Points in every step's timeline: one a phase."""


@dataclass(frozen=True)
class Point:
    """What one card holds at one phase of the step, in its parts; every card holds the same."""

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


def _point(phase: Phase) -> Point:
    extra = phase.extra
    return Point(
        phase.index,
        _INSTANT[phase.beat],
        phase.state_bytes,
        extra.gathered,
        extra.computed,
        extra.activations,
        phase.overhead_bytes,
        extra.total,
    )


def timeline(phases: tuple[Phase, ...]) -> tuple[Point, ...]:
    """Every point of one card's memory through the step of `phases` (`step.step`), in order."""
    return tuple(_point(phase) for phase in phases)
