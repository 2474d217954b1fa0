"""The pipeline's schedule beside the cards in the step: stages × time, the bubble, and what each stage holds.

Drawn when the run has a pipeline (pp > 1) and the schedule is small enough to read (`drawable`); otherwise
its figures are said in words. Every figure comes from `app.domain.schedule`; here they are placed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from app.domain.parallel import Cut
from app.domain.scenario import Scenario
from app.domain.schedule import (
    BACKWARD,
    DRAWN_SLOTS,
    FORWARD,
    Schedule,
    Slot,
    Work,
    chunk_blocks,
    interleaving_refused,
    microbatch_activations,
    peak_in_flight,
    schedule,
)
from app.domain.units import percent
from app.web.parts import shown

WIDTH = 600.0
"""The drawing's viewBox width: its text at 22 units is about 11 px in the step's 300 px column."""
GUTTER = 52.0
"""Room left of the time axis for the stage's name."""
SLOT_HEIGHT = 34.0
STRIP_HEIGHT = 24.0
"""Each stage's activations held, under its slots, on one scale for every stage."""
ROW_GAP = 10.0
AXIS_HEIGHT = 30.0
LABEL_UNITS = 13.0
"""A digit's width at the slots' 22-unit text: a label is written only where its box has room for it."""
LARGE_LABEL_UNITS = 18.0
"""A digit's width at the projector's 30-unit text (16 px at its column's width): the labels kept there."""
MAX_DRAWN_STAGES = 16
"""More stages than this make rows too thin to read beside the cards: their figures are said in words."""
EMBED_ENDS = 3
"""In an embed, a pipeline of more than 2 × 3 stages draws its first three and last three (static/embed.css): the
drawing spans the frame's width, so 16 rows would be a page of their own (about 1,400 px at 760 px)."""
LEFT_OUT_HEIGHT = 40.0
"""The line between the first and the last stages drawn that says how many are left out."""


@dataclass(frozen=True)
class SlotBox:
    """One pass drawn: its box, its label where it fits, and its words for a pointer."""

    x: float
    y: float
    width: float
    height: float
    css: str
    label: str
    label_css: str
    title: str
    label_x: float = field(init=False, repr=False, compare=False)
    label_y: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "label_x", self.x + self.width / 2)
        object.__setattr__(self, "label_y", self.y + self.height / 2 + 8)


@dataclass(frozen=True)
class PipelineRow:
    """One stage's row: its name, its time idle behind its passes, its passes, and what it holds."""

    name: str
    y: float
    slots: tuple[SlotBox, ...]
    held_area: str
    """The activations it holds over the step, as an SVG path filled down to its strip's foot."""
    order: str
    """Its passes in order, for the table: "F0, F1, F2, F3, B0, F4, …"."""
    most: str
    """The most it holds at once: "4 micro-batches, 4.0 GiB"."""
    stage: int = 0
    """Its stage's number (an embed may leave stages out)."""
    name_y: float = field(init=False, repr=False, compare=False)
    strip_y: float = field(init=False, repr=False, compare=False)
    labelled: tuple[SlotBox, ...] = field(init=False, repr=False, compare=False)
    """The slots wide enough to write their micro-batch in."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labelled", tuple(b for b in self.slots if b.label))
        object.__setattr__(self, "name_y", self.y + SLOT_HEIGHT / 2 + 8)
        object.__setattr__(self, "strip_y", self.y + SLOT_HEIGHT)


@dataclass(frozen=True)
class ScheduleDrawing:
    """The drawing: one row a stage, on one time axis."""

    rows: tuple[PipelineRow, ...]
    height: float
    plot_width: float
    time_words: str
    label: str
    """The drawing in a sentence, for a screen reader (its table says every pass)."""
    css: str = "schedule-svg"
    """"schedule-svg roomy": every stage, left out of an embed that draws the ends (`ends`); "… ends": those."""
    left_out: tuple[tuple[float, str], ...] = ()
    """Where the stages left out would be, and how many, in words: (y, words); none where every stage is drawn."""
    view_box: str = field(init=False, repr=False, compare=False)
    pattern: str = field(init=False, repr=False, compare=False)
    """The idle hatch's id, one a drawing (the page has both drawings)."""
    plot_left: float = field(init=False, repr=False, compare=False)
    time_y: float = field(init=False, repr=False, compare=False)
    slot_height: float = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "slot_height", SLOT_HEIGHT)
        object.__setattr__(self, "pattern", "schedule-idle-ends" if self.left_out else "schedule-idle")
        object.__setattr__(self, "view_box", f"0 0 {WIDTH:g} {self.height:g}")
        object.__setattr__(self, "plot_left", GUTTER)
        object.__setattr__(self, "time_y", self.height - 6)


@dataclass(frozen=True)
class ScheduleView:
    """The pipeline's schedule in the step: its drawing (or why none), the bubble and what the stages hold."""

    heading: str
    bubble: str
    """"bubble: (pp − 1)/m = 3/8 = 37.5% of the ideal step"."""
    holds: str
    """What the first and the last stage hold at most, and what that is in bytes."""
    drawing: ScheduleDrawing | None
    ends: ScheduleDrawing | None = None
    """In an embed, the first and the last stages only, with more than 2 × `EMBED_ENDS` (static/embed.css)."""
    why_not: str = ""
    """Why the schedule is said in words and not drawn; blank when drawn."""
    interleaved: bool = False
    drawings: tuple[ScheduleDrawing, ...] = field(init=False, repr=False, compare=False)
    embed_drawings: tuple[ScheduleDrawing, ...] = field(init=False, repr=False, compare=False)
    why_nots: tuple[str, ...] = field(init=False, repr=False, compare=False)
    chunk_keys: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The key's word on the chunks' shades, with interleaving."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "drawings", shown(self.drawing))
        object.__setattr__(self, "embed_drawings", shown(self.ends))
        object.__setattr__(self, "why_nots", shown(self.why_not))
        words = "lighter: a card's odd-numbered chunks (chunk 1, 3, …)" if self.interleaved else ""
        object.__setattr__(self, "chunk_keys", shown(words))


def _bubble(cut: Cut, bubble: Fraction) -> str:
    formula = "(pp − 1)/(m · vpp)" if cut.vpp > 1 else "(pp − 1)/m"
    figures = f"{cut.pp - 1}/({cut.microbatches} · {cut.vpp})" if cut.vpp > 1 else f"{cut.pp - 1}/{cut.microbatches}"
    reduced = f"{bubble.numerator}/{bubble.denominator}"
    fraction = figures if reduced == figures else f"{figures} = {reduced}"
    return f"Bubble: {formula} = {fraction} = {percent(bubble)} of the ideal step."


def _worth(count: Fraction) -> str:
    whole = count.denominator == 1
    number = f"{count.numerator}" if whole else f"{float(count):g}"
    return f"{number} micro-batch{'' if count == 1 else 'es'}{'' if whole else chr(8217) + ' worth'}"


def _holds(scenario: Scenario, cut: Cut, stage_bytes: tuple[int, ...]) -> str:
    """What the first and the last stage hold at most, in micro-batches and bytes (a micro-batch's: `stage_bytes`)."""
    first, last = peak_in_flight(cut, 0), peak_in_flight(cut, cut.pp - 1)
    units, end = scenario.units, cut.pp - 1
    why = (
        "pp (1 + (pp − 1)/(pp · vpp)), Megatron's factor"
        if cut.vpp > 1 and cut.microbatches > cut.pp
        else f"min(pp, m) = {min(cut.pp, cut.microbatches)}"
    )
    if not any(stage_bytes):
        return (
            f"Held at most: S0 {_worth(first)} ({why}); S{end} {_worth(last)}. No activations are counted "
            "(a bare weight count, or no micro-batch)."
        )
    split = tuple(n * cut.vpp for n in chunk_blocks(cut, scenario.architecture.layers)) if scenario.architecture else ()
    # Uneven stages (Llama 3's 7, 8 × 14, 7) say the first's and the last's own blocks.
    blocks = (
        f"a stage's {split[0]} blocks" if len(set(split)) == 1 else f"S0's {split[0]} and S{end}'s {split[-1]} blocks"
    )
    return (
        f"Held at most: S0 {_worth(first)} ({why}) = {units.show(first * stage_bytes[0])}; S{end} "
        f"{_worth(last)} = {units.show(last * stage_bytes[end])}. A micro-batch of {blocks} on "
        f"one card of the cut: S0 {units.show(stage_bytes[0])}, S{end} {units.show(stage_bytes[end])} with the "
        "output layer's."
    )


def _slot_box(slot: Slot, y: float, scale: float, vpp: int) -> SlotBox:
    width = float((slot.end - slot.start) * scale)
    digits = str(slot.microbatch)
    label = digits if width >= LABEL_UNITS * len(digits) + 2 else ""
    # The projector's larger text keeps only the labels its boxes still hold (static/projector.css).
    large = " large" if width >= LARGE_LABEL_UNITS * len(digits) + 2 else ""
    work = "forward" if slot.work is Work.FORWARD else "backward"
    odd = " odd" if slot.chunk % 2 else ""
    label_css = "slot-label odd" if slot.chunk % 2 else "slot-label"
    chunk = f", chunk {slot.chunk}" if vpp > 1 else ""
    return SlotBox(
        x=GUTTER + float(slot.start * scale),
        y=y,
        width=width,
        height=SLOT_HEIGHT,
        css=f"slot {work}{odd}",
        label=label,
        label_css=label_css + large,
        title=f"Stage {slot.stage}: {slot.label}, the {work} of micro-batch {slot.microbatch}{chunk}, "
        f"from {_time(slot.start)} to {_time(slot.end)}",
    )


def _time(t: Fraction) -> str:
    return f"{t.numerator}" if t.denominator == 1 else f"{float(t):g}"


def _held_area(plan: Schedule, stage: int, top: float, scale: float, chunk: Fraction, most: Fraction) -> str:
    """A step path of the chunks held over time, each `chunk` high, `most` reaching the strip's top."""
    foot = top + STRIP_HEIGHT
    end = GUTTER + float(plan.makespan * scale)
    points = [f"M{GUTTER:.2f},{foot:.2f}"]
    level = foot
    for point in plan.held(stage):
        x = GUTTER + float(point.start * scale)
        points.append(f"L{x:.2f},{level:.2f}")
        level = foot - (STRIP_HEIGHT - 4) * float(point.chunks * chunk / most) if most else foot
        points.append(f"L{x:.2f},{level:.2f}")
    points.append(f"L{end:.2f},{foot:.2f} Z")
    return " ".join(points)


def _drawn_stages(pp: int, ends: bool) -> tuple[int, ...]:
    """The stages drawn: every one, or with `ends` the first and the last `EMBED_ENDS`."""
    if not ends:
        return tuple(range(pp))
    return (*range(EMBED_ENDS), *range(pp - EMBED_ENDS, pp))


def _drawing(scenario: Scenario, plan: Schedule, stage_bytes: tuple[int, ...], ends: bool = False) -> ScheduleDrawing:
    """The schedule's drawing: every stage, or (`ends`, for an embed) the first and the last few, saying the rest."""
    pp, vpp = plan.pp, plan.vpp
    plot_width = WIDTH - GUTTER - 4
    scale = Fraction(plot_width).limit_denominator(1000) / plan.makespan
    # A chunk's activations on each stage's card; without any (a bare count), every chunk drawn alike.
    chunks = tuple(Fraction(b, vpp) if any(stage_bytes) else Fraction(1) for b in stage_bytes)
    most = max(plan.peak_chunks(s) * chunks[s] for s in range(pp))
    rows = []
    drawn = _drawn_stages(pp, ends)
    row_height = SLOT_HEIGHT + STRIP_HEIGHT + ROW_GAP
    # With the ends only, a line in words after the first few says the stages left out.
    skip = LEFT_OUT_HEIGHT if ends else 0.0
    left_out = ((4 + EMBED_ENDS * row_height + LEFT_OUT_HEIGHT / 2 + 2, _left_out_words(pp)),) if ends else ()
    for position, s in enumerate(drawn):
        slots = plan.stages[s]
        y = 4 + position * row_height + (skip if position >= EMBED_ENDS else 0.0)
        count = Fraction(plan.peak_chunks(s), vpp)
        bytes_words = f", {scenario.units.show(count * stage_bytes[s])}" if stage_bytes[s] else ""
        rows.append(
            PipelineRow(
                name=f"S{s}",
                y=y,
                slots=tuple(_slot_box(slot, y, float(scale), vpp) for slot in slots),
                held_area=_held_area(plan, s, y + SLOT_HEIGHT, float(scale), chunks[s], most),
                order=", ".join(f"{slot.label} chunk {slot.chunk}" if vpp > 1 else slot.label for slot in slots),
                most=f"{_worth(count)}{bytes_words}",
                stage=s,
            )
        )
    height = 4 + len(drawn) * row_height + skip + AXIS_HEIGHT
    makespan = _time(plan.makespan)
    only = f", stages S{EMBED_ENDS} to S{pp - EMBED_ENDS - 1} left out" if ends else ""
    return ScheduleDrawing(
        rows=tuple(rows),
        height=height,
        plot_width=plot_width,
        time_words=f"time → {makespan} forwards (a backward: {_time(BACKWARD / FORWARD)})",
        label=(
            f"The pipeline's schedule: {pp} stages over {makespan} forwards' time, {plan.microbatches} micro-batches"
            f"{f' in {vpp} chunks a card' if vpp > 1 else ''}{only}; the table below lists each stage's passes."
        ),
        css="schedule-svg ends" if ends else ("schedule-svg roomy" if pp > 2 * EMBED_ENDS else "schedule-svg"),
        left_out=left_out,
    )


def _left_out_words(pp: int) -> str:
    """The line standing for the stages an embed leaves out."""
    first, last = EMBED_ENDS, pp - EMBED_ENDS - 1
    return f"⋮ S{first} to S{last}: {last - first + 1} more stages, left out here"


def drawable(cut: Cut) -> str:
    """Why the schedule is said in words and not drawn; empty when it is drawn."""
    if refused := interleaving_refused(cut):
        return refused
    if cut.pp > MAX_DRAWN_STAGES or cut.pp * cut.vpp * cut.microbatches > DRAWN_SLOTS:
        return (
            f"{cut.pp:,} stages × {cut.microbatches:,} micro-batches{f' × {cut.vpp:,} chunks' if cut.vpp > 1 else ''}"
            " are too many passes to draw beside the cards: the figures below are the schedule's."
        )
    return ""


def schedule_view(scenario: Scenario) -> ScheduleView | None:
    """The pipeline's schedule, or None when there is no pipeline (pp = 1): then nothing changes."""
    cut = scenario.run.cut
    if cut.pp == 1:
        return None
    stage_bytes = microbatch_activations(scenario.run)
    why_not = drawable(cut)
    plan = None if why_not else schedule(cut)
    kind = f"interleaved 1F1B, {cut.vpp} chunks a card" if cut.vpp > 1 else "1F1B"
    return ScheduleView(
        heading=f"Pipeline: {kind}, {cut.pp} stages, {cut.microbatches} micro-batches",
        bubble=_bubble(cut, plan.bubble if plan else cut.bubble),
        holds=_holds(scenario, cut, stage_bytes),
        drawing=_drawing(scenario, plan, stage_bytes) if plan else None,
        ends=_drawing(scenario, plan, stage_bytes, ends=True) if plan and cut.pp > 2 * EMBED_ENDS else None,
        why_not=why_not,
        interleaved=cut.vpp > 1,
    )
