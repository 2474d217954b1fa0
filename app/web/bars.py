"""A card's memory in one bar, on one scale for all four stages: what it keeps at rest, then what it holds in hand.

The bar runs from nothing to the highest peak of the four stages (data parallelism's, in the paper's count),
so a switch from data parallelism to ZeRO-3 shrinks the state at rest to an eighth on 8 cards, as the
memory does. What a card holds for the layer in hand is stacked after its state at rest, on the same scale:
a few percent of the bar, as it is of the memory, so the longest bar is always the most memory. The note
under the cards and the key say so.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from app.domain.activations import Recompute
from app.domain.eighths import COLUMNS
from app.domain.recipes import BandSpec, Recipe
from app.domain.report import LayerExtra, Run, StageReport, TermKind
from app.domain.scenario import Scenario
from app.domain.stages import Stage
from app.domain.units import percent
from app.web.parts import Verdict, verdicts


@dataclass(frozen=True)
class Segment:
    """One stretch of a memory bar, in percent of the bar's scale."""

    css: str
    x: float
    width: float
    label: str


@dataclass(frozen=True)
class BarView:
    """Memory drawn to scale: its parts stacked, and the card's capacity marked where it falls on the bar."""

    segments: tuple[Segment, ...]
    capacity_x: float | None
    label: str
    caption: str = ""
    """The words under the bar: the card's total at its peak ("Peak 69.8 GiB")."""
    verdict: str = ""
    """Under the total, on a line of its own: fits or over by, on the card given; blank without one."""
    fits: bool | None = None
    capacity_marks: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """Where the capacity's line is drawn, if it falls on the bar."""
    captions: tuple[BarView, ...] = field(init=False, repr=False, compare=False)
    """The bar, for its caption under it: empty without one."""
    verdicts: tuple[Verdict, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        marks = () if self.capacity_x is None else (f"{self.capacity_x:.4f}",)
        object.__setattr__(self, "capacity_marks", marks)
        object.__setattr__(self, "captions", (self,) if self.caption else ())
        object.__setattr__(self, "verdicts", verdicts(self.verdict, self.fits))


def legend(recipe: Recipe) -> tuple[BandSpec, ...]:
    """The bands the grid draws, top to bottom; a band of 0 bytes is not drawn."""
    return tuple(spec for spec in recipe.specs if spec.nbytes > 0)


@dataclass(frozen=True)
class BarScale:
    """Bytes to a position along a bar, 0 to 100, linearly."""

    top: int

    def x(self, nbytes: int) -> Fraction:
        """Where `nbytes` from the bar's start falls, in percent of the bar."""
        return Fraction(nbytes * 100, self.top) if self.top else Fraction(0)


def bar_scale(scenario: Scenario) -> BarScale:
    """The one scale of every card's bar: the highest peak of the four stages (state, the layer in hand, overheads).

    The peak is the state at rest and the most held in hand at once (`StageReport.peak_bytes` is
    `rest_bytes + extra.total`), so no stage's bar, at rest or at any phase of its step, runs past the end.
    """
    return BarScale(max(row.peak_bytes for row in scenario.report))


def card_bar(
    scenario: Scenario,
    stage: Stage,
    extra: LayerExtra,
    peak: int | None = None,
    caption: str = "",
    verdict: str = "",
    fits: bool | None = None,
) -> BarView:
    """A card's memory on the scale of all four stages: its state at rest, band by band, the overheads, then in hand.

    `extra`: what it holds in hand, stacked after the state (at rest, the stage's peak's; in a step, the
    phase's). `peak`: in a step, the highest live bytes so far, whose part above what is held now is drawn
    pale after it.
    """
    run, units, row = scenario.run, scenario.units, scenario.report[stage]
    scale = bar_scale(scenario)
    parts = [*state_on_card(row, run)]
    if row.overhead_bytes:  # kept all through the step, as the state is
        look = TermKind.OVERHEADS.look
        parts.append((look.css, row.overhead_bytes, look.label))
    hand = [(f"{kind.look.css} {IN_HAND}", nbytes, kind.label(run.recipe)) for kind, nbytes in extra.parts]
    now = row.rest_bytes + extra.total
    so_far = 0 if peak is None else peak - now
    if so_far > 0:
        hand.append((f"peak {IN_HAND}", so_far, "peak so far, above now"))
    capacity = run.capacity
    said = f"On one card: {units.show(row.rest_bytes)} at rest"
    if extra.total:
        moment = "at the peak" if peak is None else "now"
        said += f" + {units.show(extra.total)} in hand {moment} = {units.show(now)}"
    if so_far > 0 and peak is not None:
        said += f"; {units.show(peak)} at the peak so far"
    return BarView(
        segments=_stacked([*parts, *hand], scale, scenario),
        # A card bigger than the bar's end is said in the caption, not drawn off the end.
        capacity_x=float(scale.x(capacity)) if capacity and capacity <= scale.top else None,
        label=f"{said}, on the scale of the four arrangements, 0 to {units.show(scale.top)}"
        + (f"; the card: {units.show(capacity)}" if capacity else ""),
        caption=caption,
        verdict=verdict,
        fits=fits,
    )


IN_HAND = "in-hand"
"""The class of a bar's stretches held in hand (and the pale peak so far), after its kind's: drawn after the state."""


def _stacked(parts: list[tuple[str, int, str]], scale: BarScale, scenario: Scenario) -> tuple[Segment, ...]:
    """Each part after the one before, from the bar's start: its classes, bytes and name."""
    segments, total = [], 0
    for css, nbytes, text in parts:
        start = scale.x(total)
        total += nbytes
        segments.append(
            Segment(css, float(start), float(scale.x(total) - start), f"{text}: {scenario.units.show(nbytes)}")
        )
    return tuple(segments)


def state_on_card(row: StageReport, run: Run) -> tuple[tuple[str, int, str], ...]:
    """The state a card keeps on its GPU all through the step, term by term: css, bytes and label, from its kind.

    Offloaded bands are the host's, not the card's; a term that is no band (DeepSpeed's fp32 gradients, hpZ's
    copy) is a stretch of its own.
    """
    return tuple((t.kind.look.css, t.nbytes, t.kind.label(run.recipe)) for t in row.on_gpu)


def bar_note(scenario: Scenario, stage: Stage) -> str:
    """What the bars under the cards are drawn to, in a sentence or two."""
    units, capacity = scenario.units, scenario.run.capacity
    top = bar_scale(scenario).top
    said = (
        "The bar under each card is its memory, on one scale for all four arrangements "
        f"(0 to {units.show(top)}, the highest peak), so a switch shows the saving"
    )
    if scenario.report[stage].extra.total:
        said += ": what it keeps at rest, then what it holds in hand for one layer, stacked after it."
    else:
        said += "."
    said = f"{said} {activations_said(scenario, stage)}{overheads_said(scenario, stage)}{frozen_said(scenario)}"
    if capacity is None:
        return said
    where = "the line" if capacity <= top else "beyond the bar's end"
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
    if run.activations is None:  # a weight count alone: the seed's lesson, which has no activations to speak of
        return ""
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
    """The css of each kind a stage's bars draw beyond the bands, which the grid's key has.

    What it keeps at rest, what it holds in hand (its largest layer's, at the peak, has the most), the overheads.
    """
    return tuple(kind.look.css for kind in bar_kinds(row))


def bar_kinds(row: StageReport) -> tuple[TermKind, ...]:
    """Each kind a stage's bars draw beyond the bands, once, in `TermKind`'s order (the key's)."""
    drawn = {t.kind for t in row.on_gpu if t.band is None} | {kind for kind, _ in row.extra.parts}
    if row.overhead_bytes:
        drawn.add(TermKind.OVERHEADS)
    return tuple(kind for kind in TermKind if kind in drawn)
