"""The step's chart: one card's memory through the step, each stage a line, drawn as server-side SVG.

x is the step's 53 phases, a pass column's three beats among them (its gather, the layer in hand, its
discard), so ZeRO-3's line rises at each gather and falls at each discard. y is bytes, from
0. The first drawing lays the four stages over one another on one scale, data parallelism's flat
line above ZeRO-3's sawtooth; a second gives the stage shown alone, on its own scale, so that its
rises stay visible (ZeRO-3's 7.5e9-byte gather is 1.6% of data parallelism's 447 GiB). The phase
shown is a band with its label. The lines differ by dash as well as by weight and colour, for print in black and white.

The builder formats `RunReport.timeline`: the coordinates are the figures on the drawing's scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from app.domain.report import FIRST_SYNC, PHASES, Point
from app.domain.scenario import Scenario
from app.domain.stages import Stage
from app.domain.units import ByteUnit

WIDTH = 600.0
"""The drawings' width in SVG units: at 600 px a unit is a pixel, and the 16-unit text 16 px (narrower, the
text takes up to 30 units: static/app.css, "Memory over time")."""
TEXT = 30.0
"""The largest the text is drawn, in SVG units (a box under 420 px): every label is laid out for it."""
EM = {"digit": 0.7, "narrow": 0.4, "upper": 0.8, "lower": 0.68}
"""A character's advance in ems, at least bold sans-serif's in Chromium (DejaVu Sans Bold: "ZeRO-3" 4.15 em)."""
ABOVE, BELOW_BASELINE = 0.96, 0.24
"""A line of text's box in ems above and below its baseline, as Chromium draws it (0.95 and 0.2), and a little."""
LINE = TEXT * (ABOVE + BELOW_BASELINE) + 1
"""The least distance between two labels one above the other: a line of the largest text, and a unit."""
LEFT, TOP = 62.0, 62.0
"""The least room for the bytes' ticks; room for the unit's name and the phase's label above the plot, a line of
the largest text clear of the highest tick's label."""
RIGHT = 134.0
"""Room for the stages' labels, the widest ("ZeRO-3", bold) at the largest text, ending at the drawing's edge."""
BELOW = 40.0
"""Room under the plot for the passes' names (their baseline 30 under it)."""
LABEL_GAP = LINE
"""The least distance between two stages' labels, one above the other."""
TICK_GAP = LINE
"""The least distance between two ticks of the bytes' scale, so their labels never touch."""
SECTIONS = (("forward", 1, 1 + (FIRST_SYNC - 1) // 2), ("backward", 1 + (FIRST_SYNC - 1) // 2, FIRST_SYNC),
            ("update", FIRST_SYNC, PHASES))  # fmt: skip
"""The passes' names under the x axis, each over its phases [first, end)."""


def text_width(text: str, size: float = TEXT) -> float:
    """How wide `text` is drawn at `size` units, at most: so that no label is laid out over another or the edge."""
    kinds = ("digit" if c.isdigit() else "upper" if c.isupper() else "lower" if c.isalpha() else "narrow" for c in text)
    return sum(EM[kind] for kind in kinds) * size


@dataclass(frozen=True)
class Tick:
    """A line across the plot at a round number of bytes, and its label."""

    y: float
    label: str


@dataclass(frozen=True)
class LineView:
    """One stage's line: its points as an SVG polyline, a step per instant, and its label at the right."""

    stage: Stage
    name: str
    points: str
    current: bool
    label_y: float
    count: int
    """How many points the polyline has: two per instant, where it begins and where it ends."""
    css: str = field(init=False, repr=False, compare=False)
    """The line's classes, its label's after "line-label": the stage, and the one shown."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", f"{self.stage} current" if self.current else str(self.stage))


@dataclass(frozen=True)
class Section:
    """A pass's name under the x axis, and where its phases begin; `anchor`: how its text sits on `x`."""

    label: str
    x: float
    start: float
    anchor: str = "middle"


@dataclass(frozen=True)
class PanelView:
    """One drawing: its lines on one scale, the ticks, the passes and the phase shown."""

    css: str
    height: float
    label: str
    """What it shows, for a screen reader (aria-label) and as its <title>."""
    unit: str
    ticks: tuple[Tick, ...]
    lines: tuple[LineView, ...]
    sections: tuple[Section, ...]
    now_x: float
    now_width: float
    now_label: str
    now_label_x: float
    now_y: float
    """The stage shown's figure at the phase (its layer in hand), where a dot marks it."""
    plot_top: float = TOP
    plot_left: float = LEFT
    plot_right: float = WIDTH - RIGHT
    plot_bottom: float = field(init=False, repr=False, compare=False)
    """The plot's floor: zero bytes."""
    view_box: str = field(init=False, repr=False, compare=False)
    """The SVG's viewBox."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "plot_bottom", self.height - BELOW)
        object.__setattr__(self, "view_box", f"0 0 {WIDTH:g} {self.height:g}")


@dataclass(frozen=True)
class ChartRow:
    """One stage in the chart's table: the lowest and highest a card holds, and what it holds at the phase."""

    stage: Stage
    name: str
    lowest: str
    highest: str
    now: str
    current: bool
    css: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", "current" if self.current else None)


@dataclass(frozen=True)
class ChartView:
    """The step's chart: one drawing of every stage, one of the stage shown alone, and their table."""

    caption: str
    panels: tuple[PanelView, ...]
    rows: tuple[ChartRow, ...]


def _x(phase: int, fraction: float, left: float = LEFT) -> float:
    width = (WIDTH - RIGHT - left) / PHASES
    return left + (phase + fraction) * width


def _sections(left: float) -> tuple[Section, ...]:
    """The passes' names, each centred under its phases unless it would cross its neighbour or the edge.

    The last ("update", four phases) is narrower than its name: it starts at its first phase instead.
    """
    placed: list[Section] = []
    end = 0.0
    for name, first, stop in SECTIONS:
        start, half = _x(first, 0, left), text_width(name) / 2
        middle = (start + _x(stop, 0, left)) / 2
        if middle - half >= end and middle + half <= WIDTH:
            placed.append(Section(name, middle, start))
            end = middle + half
        else:
            placed.append(Section(name, max(start, end) + 4, start, "start"))
            end = max(start, end) + 4 + 2 * half
    return tuple(placed)


def _nice_top(highest: float, steps: int) -> tuple[float, float]:
    """A round top for the scale and a round step between ticks, in units: at most `steps` steps."""
    if highest <= 0:
        return 1.0, 1.0
    power = 10 ** math.floor(math.log10(highest))
    for multiple in (0.1, 0.2, 0.25, 0.5, 1.0, 2.0, 2.5, 5.0, 10.0):
        step = multiple * power
        if math.ceil(highest / step - 1e-9) <= steps:
            return math.ceil(highest / step - 1e-9) * step, step
    return 10 * power, 10 * power  # pragma: no cover - 10 × power always has a single step


def _number(value: float) -> str:
    return f"{value:,.10g}"


def _labels(wanted: list[tuple[Stage, float]], top: float, bottom: float) -> dict[Stage, float]:
    """The stages' labels beside their lines' ends, moved apart where the lines end close together."""
    placed: dict[Stage, float] = {}
    order = sorted(wanted, key=lambda item: item[1])
    last = -math.inf
    for stage, y in order:
        last = max(y, last + LABEL_GAP)
        placed[stage] = last
    overflow = max(placed.values(), default=bottom) - bottom
    if overflow > 0:  # the lowest went under the plot: move them all up, no higher than its top
        placed = {stage: max(top, y - overflow) for stage, y in placed.items()}
    return placed


def _panel(
    css: str,
    label: str,
    height: float,
    lines: dict[Stage, tuple[Point, ...]],
    current: Stage,
    index: int,
    units: ByteUnit,
) -> PanelView:
    bottom = height - BELOW
    highest = max(p.nbytes for points in lines.values() for p in points) / units.size
    # The ticks' labels at least TICK_GAP apart, so the largest text never overlaps.
    axis_top, step = _nice_top(highest, min(5, int((bottom - TOP) // TICK_GAP)))

    def y_of(nbytes: int) -> float:
        return bottom - (nbytes / units.size) / axis_top * (bottom - TOP)

    ticks = tuple(
        Tick(y_of(round(k * step * units.size)), _number(k * step)) for k in range(round(axis_top / step) + 1)
    )
    # The ticks' labels end 6 units left of the plot and the unit's name is above them: room for the widest.
    left = max(LEFT, max(text_width(t.label) for t in ticks) + 10)
    views = []
    for stage, points in lines.items():
        coordinates = []
        for point in points:
            y = y_of(point.nbytes)
            coordinates += [(_x(point.phase, 0, left), y), (_x(point.phase, 1, left), y)]
        views.append((stage, " ".join(f"{x:.2f},{y:.2f}" for x, y in coordinates), len(coordinates)))
    # The lowest label's box ends above the plot's floor, clear of the passes' names under it.
    floor = bottom - TEXT * BELOW_BASELINE - 1
    ends = _labels([(stage, y_of(points[-1].nbytes) + 5) for stage, points in lines.items()], TOP + 5, floor)
    shown = lines[current][index]
    now_label = f"Phase {index}: {units.show(shown.nbytes)}"
    # The phase's label stays over the plot, right of the unit's name and left of the stages' labels.
    half = text_width(now_label) / 2
    middle = _x(index, 0.5, left)
    lowest = max(left, 4 + text_width(units.value) + 8) + half
    return PanelView(
        css=css,
        height=height,
        label=label,
        unit=units.value,
        ticks=ticks,
        lines=tuple(
            LineView(
                stage, stage.info.title if stage is not Stage.DP else "DP", points, stage is current, ends[stage], n
            )
            for stage, points, n in views
        ),
        sections=_sections(left),
        now_x=_x(index, 0, left),
        now_width=_x(index, 1, left) - _x(index, 0, left),
        now_label=now_label,
        now_label_x=max(min(middle, WIDTH - RIGHT - half), lowest),
        now_y=y_of(shown.nbytes),
        plot_left=left,
    )


def _range(points: tuple[Point, ...], units: ByteUnit) -> tuple[str, str]:
    return units.show(min(p.nbytes for p in points)), units.show(max(p.nbytes for p in points))


def _span(points: tuple[Point, ...], units: ByteUnit) -> str:
    lowest, highest = _range(points, units)
    return f"{lowest} flat" if lowest == highest else f"from {lowest} to {highest}"


def chart_view(stage: Stage, scenario: Scenario, index: int) -> ChartView:
    """The chart of one card's memory through the step, at phase `index` under `stage`."""
    report, units = scenario.report, scenario.units
    lines = {s: report.timeline(s) for s in Stage}
    now = {s: lines[s][index] for s in Stage}
    title = stage.info.title
    every = "; ".join(f"{s.info.title} {_span(lines[s], units)}" for s in Stage)
    holds = f"At phase {index}, {title} holds {units.show(now[stage].nbytes)}."
    panels = [
        _panel(
            "chart-all",
            f"One card's memory through the step, the four stages on one scale: {every}. {holds}",
            240.0,
            lines,
            stage,
            index,
            units,
        )
    ]
    # Drawn for every stage, so that the chart is as tall whichever stage is shown.
    panels.append(
        _panel(
            "chart-own",
            f"{title} alone, on its own scale: {_span(lines[stage], units)}. {holds}",
            190.0,
            {stage: lines[stage]},
            stage,
            index,
            units,
        )
    )
    rows = tuple(
        ChartRow(s, s.info.title, *_range(lines[s], units), units.show(now[s].nbytes), s is stage) for s in Stage
    )
    caption = (
        f"One card's memory through the step, in {units.value}: each column of a pass in three phases, its "
        "gather, the layer in hand, its discard."
    )
    return ChartView(caption=caption, panels=tuple(panels), rows=rows)
