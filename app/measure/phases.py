"""Where a measured moment sits on the model's 53 phases: shared by both measurements, so neither imports the other."""

from __future__ import annotations

from app.domain.step import from_old_phase

_PHASE_OF = {"start": 0, "after-backward": 18, "after-update": 19}
"""Where the measured moments sit on the 21 phases of one a pass column (`from_old_phase` reads them now)."""


def phase_of(part: str, layer: int | None, layers: int) -> int:
    """The model's phase for a measured moment: a layer's compute, in hand (forward of layer i, the old 1 + i)."""
    if part == "forward" and layer is not None:
        return from_old_phase(1 + layer)
    if part == "backward" and layer is not None:
        return from_old_phase(2 * layers - layer)
    return from_old_phase(_PHASE_OF[part])
