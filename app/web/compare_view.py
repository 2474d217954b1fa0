"""The side-by-side view: two stages of the same run, each grid compact, and the difference between them."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import urlencode

from app import APP_NAME
from app.domain.recipes import BandSpec
from app.domain.scenario import Scenario
from app.domain.stages import Stage
from app.domain.units import gpus_label, p_units, per_weight
from app.web.bars import legend
from app.web.cut_view import cut_cards
from app.web.grid_view import CardGap, CardView, rest_cards
from app.web.inputs import Theme
from app.web.links import compare_address
from app.web.stage_view import StageLink, weights_said

CUT_WORDS = (
    "The model is cut: each card shows its pipeline stage's eighths of the model (another stage's hatched) and, "
    "part filled, its tensor slice. The frames of its stages and tensor groups are on the main page."
)


@dataclass(frozen=True)
class CompareSide:
    """One stage of the two: its switcher (keeping the other side), figures and compact grid."""

    side: str
    """'left' or 'right': also the prefix of every id inside."""
    stage: Stage
    title: str
    summary: str
    links: tuple[StageLink, ...]
    bytes_per_weight: str
    per_gpu: str
    peak: str
    communication: str
    cards: tuple[CardView | CardGap, ...]
    change: str
    """What going from the other side to this one does to each card."""
    cut: tuple[str, ...] = ()
    """With the model cut: what its cards show (their stage's columns, their tensor slice), and what is not drawn."""


@dataclass(frozen=True)
class CompareView:
    """Two stages of one run side by side, and the difference a student can point at."""

    title: str
    summary: str
    left: CompareSide
    right: CompareSide
    difference: str
    legend: tuple[BandSpec, ...]
    back_href: str
    capacity: str | None
    theme: Theme = Theme.DEFAULT
    notes: tuple[str, ...] = ()
    """What the run drawn is not quite what was asked, as the page says it (a count set aside, a layer too big)."""
    capacity_words: str = field(init=False, repr=False, compare=False)
    """After the summary: the card given."""
    note_lists: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "capacity_words", f", on cards of {self.capacity}" if self.capacity else "")
        object.__setattr__(self, "note_lists", (self.notes,) if self.notes else ())


def compare_view(
    left: Stage,
    right: Stage,
    scenario: Scenario,
    base: str,
    page: str,
    run: tuple[tuple[str, str], ...],
    theme: Theme = Theme.DEFAULT,
) -> CompareView:
    """`left` and `right` of the run, drawn to one scale; `base` is this page's path, `page` the main page's.

    `run` is the run's parameters as the page keeps them; every link also keeps the theme.
    """
    if theme is not Theme.DEFAULT:
        run = (*run, ("theme", theme.value))
    rows = {r.stage: r for r in scenario.report}
    run_, units = scenario.run, scenario.units

    def side(name: str, stage: Stage, other: Stage) -> CompareSide:
        row = rows[stage]
        links = tuple(
            StageLink(
                s,
                s.info.title,
                s.info.summary,
                compare_address(base, s, other, run) if name == "left" else compare_address(base, other, s, run),
                s is stage,
            )
            for s in Stage
        )
        moved = scenario.report.change(other, stage)
        return CompareSide(
            side=name,
            stage=stage,
            title=stage.info.title,
            summary=stage.info.summary,
            links=links,
            bytes_per_weight=per_weight(row.bytes_per_weight),
            per_gpu=units.show(row.per_gpu_bytes),
            peak=units.show(row.peak_bytes),
            communication=p_units(row.communication_p),
            cards=(
                cut_cards(scenario, stage, row, None if other is stage else other)
                if run_.cut.cuts
                else rest_cards(scenario, stage, row, None if other is stage else moved)
            ),
            change=moved.sentence,
            cut=(CUT_WORDS,) if run_.cut.cuts else (),
        )

    a, b = rows[left], rows[right]
    if a.per_gpu_bytes == b.per_gpu_bytes:
        difference = f"Both keep {units.show(a.per_gpu_bytes)} on each card."
    else:
        more, less = (a, b) if a.per_gpu_bytes > b.per_gpu_bytes else (b, a)
        difference = (
            f"{less.stage.info.title} keeps {units.show(more.per_gpu_bytes - less.per_gpu_bytes)} less on each card "
            f"than {more.stage.info.title}: {units.show(less.per_gpu_bytes)} "
            f"instead of {units.show(more.per_gpu_bytes)}."
        )
    return CompareView(
        title=f"{left.info.title} beside {right.info.title} · {APP_NAME}",
        summary=f"{scenario.model_title}, {weights_said(run_)}, on {gpus_label(run_.gpus)} with {run_.recipe.title}",
        left=side("left", left, right),
        right=side("right", right, left),
        difference=difference,
        legend=legend(scenario.recipe),
        back_href=f"{page}?{urlencode({'stage': left.value, **dict(run)})}",
        capacity=None if run_.capacity is None else units.show(run_.capacity),
        theme=theme,
        notes=scenario.notes,
    )
