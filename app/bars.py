"""A card's memory bar: what it keeps at rest, what it holds for one layer, and its peak, to scale."""

from __future__ import annotations

from fractions import Fraction

from app.domain.fit import LayerExtra
from app.domain.memory import band_bytes, per_gpu_bytes
from app.domain.scenario import Scenario
from app.domain.stages import Stage
from app.view_models import BarView, Segment, legend


def bar_view(scenario: Scenario, stage: Stage, scale: Fraction, extra: LayerExtra, peak: int, label: str) -> BarView:
    """A card's memory to scale: its bands at rest, then what it holds for one layer, then its peak.

    The same drawing at rest (the extra is the largest layer's, so the bar reaches the peak) and
    during a step (the extra is the layer in hand, and a lighter stretch runs on to the peak so far).
    """
    run, units = scenario.run, scenario.units
    segments: list[Segment] = []
    x = 0.0

    def add(css: str, nbytes: int, text: str) -> None:
        nonlocal x
        width = float(nbytes / scale * 100)
        segments.append(Segment(css, x, width, f"{text}: {units.show(nbytes)}"))
        x += width

    for spec in legend(run.recipe):
        add(f"band-{spec.band}", band_bytes(stage, spec.band, run.params, run.gpus, run.recipe), spec.label)
    if extra.gathered:
        add("gathered", extra.gathered, "one layer's weights, assembled from their owners")
    if extra.computed:
        add("sent", extra.computed, "one layer's gradients, computed here before they are reduce-scattered")
    now = per_gpu_bytes(stage, run.params, run.gpus, run.recipe) + extra.total
    if peak > now:
        add("peak", peak - now, "peak so far, above now")
    capacity = run.capacity
    return BarView(
        segments=tuple(segments),
        capacity_x=float(Fraction(capacity) / scale * 100) if capacity else None,
        label=f"{label}: {units.show(peak)}" + (f" of {units.show(capacity)}" if capacity else ""),
        verdict="",
        fits=None,
    )
