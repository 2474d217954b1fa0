"""A card's memory bar: what it keeps at rest, what it holds for one layer, and its peak.

The bar runs from nothing to the stage's peak on one card, so the layer a card holds in hand is
what moves it through a step. When that layer is small against the state at rest (a big model on
few cards), the part at rest is drawn shortened, behind a break, to three quarters of the bar: one
layer then still takes a quarter, where to scale it would be a sliver of a few pixels. The label
and the note under the cards say which of the two a bar is.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from app.domain.activations import Recompute
from app.domain.eighths import COLUMNS
from app.domain.recipes import BandSpec, Recipe
from app.domain.report import LayerExtra, Run, StageReport
from app.domain.scenario import NO_SHAPE, Scenario
from app.domain.stages import Stage
from app.domain.units import percent

REST_SHARE = Fraction(3, 4)
"""Where a broken bar puts the end of the state at rest: the layer in hand gets the other quarter."""


@dataclass(frozen=True)
class Segment:
    """One stretch of a memory bar, in percent of the bar's scale."""

    css: str
    x: float
    width: float
    label: str


@dataclass(frozen=True)
class BarView:
    """A card's memory drawn to scale: its bands stacked, and the card's capacity marked."""

    segments: tuple[Segment, ...]
    capacity_x: float | None
    rest_x: float | None
    """Where the state at rest ends, marked when something is drawn beyond it."""
    broken: bool
    """Whether the part at rest is drawn shortened, behind a break, so that one layer shows."""
    label: str
    verdict: str
    fits: bool | None


def legend(recipe: Recipe) -> tuple[BandSpec, ...]:
    """The bands the grid draws, top to bottom; a band of 0 bytes is not drawn."""
    return tuple(spec for spec in recipe.specs if spec.nbytes > 0)


@dataclass(frozen=True)
class BarScale:
    """Bytes to a position along a bar, 0 to 100: linear, or with the part at rest shortened."""

    rest: int
    top: int
    broken: bool

    def x(self, nbytes: int) -> Fraction:
        """Where `nbytes` from the bar's start falls, in percent of the bar."""
        if not self.top:
            return Fraction(0)
        if not self.broken:
            return Fraction(nbytes * 100, self.top)
        if nbytes <= self.rest:
            return REST_SHARE * 100 * Fraction(nbytes, self.rest)
        return REST_SHARE * 100 + (1 - REST_SHARE) * 100 * Fraction(nbytes - self.rest, self.top - self.rest)


def stage_scale(scenario: Scenario, stage: Stage) -> BarScale:
    """The bar of one stage: to its peak, broken where one layer would be under a quarter of it."""
    row = scenario.report[stage]
    # The overheads, when counted, are there at rest too: the tick is after them.
    rest, top = row.rest_bytes, row.peak_bytes
    layer = top - rest
    return BarScale(rest, top, broken=0 < layer * 4 < top)


def shared_scale(top: int) -> BarScale:
    """One linear scale for bars that are compared side by side."""
    return BarScale(top, top, broken=False)


def bar_view(
    scenario: Scenario, stage: Stage, extra: LayerExtra, peak: int, label: str, scale: BarScale | None = None
) -> BarView:
    """A card's memory: its bands at rest, then what it holds for one layer, then the peak so far.

    The same drawing at rest (the extra is the largest layer's, so the bar reaches the peak) and
    during a step (the extra is the layer in hand, and a lighter stretch runs on to the peak so far).
    """
    run, units, row = scenario.run, scenario.units, scenario.report[stage]
    scale = scale or stage_scale(scenario, stage)
    segments: list[Segment] = []
    total = 0

    # Positions are worked out from bytes each time, so a broken scale bends at the right place.
    def add(css: str, nbytes: int, text: str) -> None:
        nonlocal total
        start = scale.x(total)
        total += nbytes
        end = scale.x(total)
        segments.append(Segment(css, float(start), float(end - start), f"{text}: {units.show(nbytes)}"))

    for css, nbytes, text in state_on_card(row, run):
        add(css, nbytes, text)
    overhead = row.overhead_bytes
    if overhead:  # kept all through the step, as the state is
        add("overheads", overhead, "overheads: CUDA context, NCCL buffers, buckets and fragmentation")
    if extra.gathered:
        add("gathered", extra.gathered, "one layer's weights, assembled from their owners")
    if extra.computed:
        add("sent", extra.computed, "one layer's gradients, computed here before they are reduce-scattered")
    if extra.activations:
        add("activations", extra.activations, "activations kept for the backward pass")
    now = row.per_gpu_bytes + extra.total + overhead
    if peak > now:
        add("peak", peak - now, "peak so far, above now")
    capacity = run.capacity
    # A card bigger than the bar's end is said in the label, not drawn off the end.
    capacity_x = float(scale.x(capacity)) if capacity and capacity <= scale.top else None
    return BarView(
        segments=tuple(segments),
        capacity_x=capacity_x,
        rest_x=float(scale.x(scale.rest)) if scale.rest < scale.top else None,
        broken=scale.broken,
        label=f"{label}: {units.show(peak)}" + (f" of {units.show(capacity)}" if capacity else ""),
        verdict="",
        fits=None,
    )


FP32_GRADIENTS_LABEL = "fp32 gradients, DeepSpeed's copy for the update"


def state_on_card(row: StageReport, run: Run) -> tuple[tuple[str, int, str], ...]:
    """The state a card keeps on its GPU all through the step, band by band: css, bytes and label.

    Offloaded bands are the host's, not the card's; DeepSpeed's fp32 gradients are a stretch of their own.
    """
    return tuple(
        (f"band-{t.band}", t.nbytes, run.recipe.spec(t.band).label)
        if t.band is not None
        else ("fp32-gradients", t.nbytes, FP32_GRADIENTS_LABEL)
        for t in row.on_gpu
    )


def bar_note(scenario: Scenario, stage: Stage) -> str:
    """What the bars under the cards are drawn to, in a sentence or two."""
    scale, units, capacity = stage_scale(scenario, stage), scenario.units, scenario.run.capacity
    rest, top = units.show(scale.rest), units.show(scale.top)
    if scale.rest == scale.top:
        said = f"The bar under each card is its memory, {top}, each band as long as its bytes."
    elif scale.broken:
        said = (
            f"The bar under each card runs to the peak on one card, {top}. The part at rest ({rest}, up to the tick) "
            "is drawn shortened behind the break, so that one layer in hand shows."
        )
    else:
        said = (
            f"The bar under each card runs from 0 to the peak on one card, {top}; "
            f"the tick marks what it keeps at rest, {rest}."
        )
    said = f"{said} {activations_said(scenario, stage)}{overheads_said(scenario, stage)}{frozen_said(scenario)}"
    if capacity is None:
        return said
    where = "the line" if capacity <= scale.top else "beyond the bar's end"
    return f"{said} The card's {units.show(capacity)} is {where}."


def overheads_said(scenario: Scenario, stage: Stage) -> str:
    """What the hatched part of the bars is, when the overheads are counted."""
    overhead = scenario.report[stage].overhead_bytes
    if not overhead:
        return ""
    return (
        f" Hatched: {scenario.units.show(overhead)} of overheads, memory a real run holds beyond the theory all "
        "through the step (the list under the table says what each is)."
    )


def frozen_said(scenario: Scenario) -> str:
    """What the cards leave out of frozen weights, in a sentence; blank when every weight trains."""
    run = scenario.run
    if not run.frozen:
        return ""
    trains = run.params - run.frozen
    lora = ""
    if scenario.adapters:
        added = f"LoRA's adapter weights, added to the model's {run.params - scenario.adapters:,}"
        lora = f", all of them {added}" if scenario.adapters == trains else f", {scenario.adapters:,} of them {added}"
    drawn = (
        "In the picture the frozen weights are the first columns; the figures under each card count what ZeRO "
        "really keeps, an equal share of the trainable weights' state on every card."
    )
    if scenario.adapters:
        drawn = (
            "The adapters sit in every block, too few to draw: the picture shows the frozen model, and the "
            "figures count the adapters, each block's layer in hand computing gradients for its own."
        )
    elif all(run.frozen_column(column) for column in range(COLUMNS)):
        share = percent(Fraction(trains, run.params))
        drawn = f"The trainable weights, {share} of the model, are too few to draw as a column: the figures count them."
    return (
        f" {run.frozen:,} weights are frozen and {trains:,} train{lora}: a frozen weight has no gradient and needs "
        f"no optimizer state, so its columns keep the weights band only. {drawn} Only the weights that train "
        "are reduce-scattered and, under ZeRO-1 and ZeRO-2, all-gathered after the update; ZeRO-3 gathers "
        "every weight for the forward pass, and again for the backward from the first layer that trains."
    )


def activations_said(scenario: Scenario, stage: Stage) -> str:
    """What the bars count of the micro-batch's activations, in a sentence."""
    run = scenario.run
    if run.activations is None:
        return NO_SHAPE
    sequences = f"{run.batch:,} {'sequence' if run.batch == 1 else 'sequences'} of {scenario.seq:,} tokens"
    if not run.batch:
        return "With no sequence in the micro-batch, no activations are counted."
    kept = scenario.units.show(scenario.report[stage].activation_bytes)
    how = _RECOMPUTED[run.activations.recompute]
    return f"Violet: the activations of {sequences} per GPU, {how}, {kept} at the peak."


_RECOMPUTED = {
    Recompute.NONE: "with nothing recomputed",
    Recompute.SELECTIVE: "with the attention core recomputed",
    Recompute.FULL: "with each layer's input kept and the layer recomputed",
}


def bar_keys(row: StageReport) -> tuple[str, ...]:
    """What of one layer a stage's bars draw: its largest layer's, at the peak, has the most."""
    extra = row.extra
    return (
        *(("fp32-gradients",) if any(t.band is None for t in row.on_gpu) else ()),
        *(("gathered",) if extra.gathered else ()),
        *(("sent",) if extra.computed else ()),
        *(("activations",) if extra.activations else ()),
        *(("overheads",) if row.overhead_bytes else ()),
    )
