"""Where a measured moment sits on the model's 21 phases: shared by both measurements, so neither imports the other."""

from __future__ import annotations

_PHASE_OF = {"start": 0, "after-backward": 18, "after-update": 19}
"""Where the measured moments sit on the model's 21 phases; forward and backward by layer."""


def phase_of(part: str, layer: int | None, layers: int) -> int:
    """The model's phase for a measured moment: forward of layer i is phase 1 + i, its backward 2 × layers − i."""
    if part == "forward" and layer is not None:
        return 1 + layer
    if part == "backward" and layer is not None:
        return 2 * layers - layer
    return _PHASE_OF[part]
