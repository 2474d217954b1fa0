"""The step's chart: one card's memory through the step, each stage a line, drawn as server-side SVG.

x is the step's moments: its 21 phases, a pass phase in three (before its gather, the layer in hand,
after its discard), so ZeRO-3's line rises at each gather and falls at each discard. y is bytes, from
0. The first drawing lays the four stages over one another on one scale, data parallelism's flat
line above ZeRO-3's sawtooth; a second gives the stage shown alone, on its own scale, so that its
rises stay visible (ZeRO-3's 7.5e9-byte gather is 1.6% of data parallelism's 447 GiB). The phase
shown is a band with its label. The lines differ by dash as well as by weight and colour, for print in black and white.

The builder formats `RunReport.timeline`: the coordinates are the figures on the drawing's scale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from app.domain.report import LAST_PHASE, Instant, Point
from app.domain.scenario import Scenario
from app.domain.stages import Stage
from app.domain.units import ByteUnit

WIDTH = 600.0
"""The drawings' width in SVG units: at 600 px a unit is a pixel, and the 16-unit text 16 px (narrower, the
text takes up to 24 units: static/app.css, "Memory over time")."""
LEFT, RIGHT, TOP = 62.0, 110.0, 42.0
"""Room for the bytes' ticks, the stages' labels, and the phase's label above the plot."""
BELOW = 40.0
"""Room under the plot for the passes' names."""
LABEL_GAP = 26.0
"""The least distance between two stages' labels, one above the other."""
TICK_GAP = 30.0
"""The least distance between two ticks of the bytes' scale."""
SPANS: dict[Instant, tuple[float, float]] = {
    Instant.WHOLE: (0.0, 1.0),
    Instant.BEFORE: (0.0, 0.25),
    Instant.IN_HAND: (0.25, 0.75),
    Instant.AFTER: (0.75, 1.0),
}
"""The part of its phase's width each instant is drawn across."""
SECTIONS = (("forward", 1, 9), ("backward", 9, 17), ("update", 17, LAST_PHASE + 1))
"""The passes' names under the x axis, each over its phases [first, end)."""


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
    """A pass's name under the x axis, and where its phases begin."""

    label: str
    x: float
    start: float


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


def _x(phase: int, fraction: float) -> float:
    width = (WIDTH - RIGHT - LEFT) / (LAST_PHASE + 1)
    return LEFT + (phase + fraction) * width


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
    views = []
    for stage, points in lines.items():
        coordinates = []
        for point in points:
            start, end = SPANS[point.instant]
            y = y_of(point.nbytes)
            coordinates += [(_x(point.phase, start), y), (_x(point.phase, end), y)]
        views.append((stage, " ".join(f"{x:.2f},{y:.2f}" for x, y in coordinates), len(coordinates)))
    ends = _labels([(stage, y_of(points[-1].nbytes) + 5) for stage, points in lines.items()], TOP + 5, bottom)
    shown = next(p for p in lines[current] if p.phase == index and p.instant in (Instant.WHOLE, Instant.IN_HAND))
    now_label = f"Phase {index}: {units.show(shown.nbytes)}"
    # About half a digit's width a character at 24 units, the largest text: keep the label inside the drawing.
    half = 6.8 * len(now_label)
    middle = _x(index, 0.5)
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
        sections=tuple(Section(name, (_x(first, 0) + _x(end, 0)) / 2, _x(first, 0)) for name, first, end in SECTIONS),
        now_x=_x(index, 0),
        now_width=_x(index, 1) - _x(index, 0),
        now_label=now_label,
        now_label_x=min(max(middle, LEFT + half), WIDTH - half - 2),
        now_y=y_of(shown.nbytes),
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
    now = {s: next(p for p in lines[s] if p.phase == index and p.instant is not Instant.BEFORE) for s in Stage}
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
        f"One card's memory through the step, in {units.value}: each phase of a pass in three, before the gather, "
        "with the layer in hand, after the discard."
    )
    return ChartView(caption=caption, panels=tuple(panels), rows=rows)
