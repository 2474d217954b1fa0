"""One report per request: every figure of a run, worked out once, for the views to format.

`run_report` computes each stage's `StageReport` (`sizing.stage_report`) once. What only some requests
need is worked out when first asked for, and kept on the report: a stage's training step (a page at
a phase, `/api/step`), the points of one card's memory through it (the step's chart, `/api/timeline`)
and what a switch between two stages changes (a page reached from another stage, the side-by-side page).
A view reads the report and calls nothing that computes.

The value types the views read are re-exported here, so that a view imports the report, not the
modules that compute it (the import contracts in pyproject.toml).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from app.domain.accounting import Accounting
from app.domain.change import Change, change
from app.domain.communication import Collective, Scope, Transfer, Whose
from app.domain.eighths import Column
from app.domain.figures import HostReport, LayerExtra, StageReport, TermBytes
from app.domain.overheads import OverheadItem
from app.domain.run import MAX_BATCH, Run
from app.domain.sizing import UNKNOWN_LAYER_RULE, layer_exceeds_card, stage_report
from app.domain.stages import Stage
from app.domain.step import FIRST_SYNC, LAST_PHASE, PHASES, Beat, Holding, InFlight, Part, Phase, step
from app.domain.terms import Look, Place, TermKind
from app.domain.timeline import POINTS, Instant, Point, timeline
from app.domain.wire import LinkBytes, Span, StepTime

__all__ = [
    "FIRST_SYNC",
    "LAST_PHASE",
    "MAX_BATCH",
    "PHASES",
    "POINTS",
    "UNKNOWN_LAYER_RULE",
    "Accounting",
    "Beat",
    "Change",
    "Collective",
    "Holding",
    "HostReport",
    "InFlight",
    "Instant",
    "LayerExtra",
    "LinkBytes",
    "Look",
    "OverheadItem",
    "Part",
    "Phase",
    "Place",
    "Point",
    "Run",
    "RunReport",
    "Scope",
    "Span",
    "StageReport",
    "StepTime",
    "TermBytes",
    "TermKind",
    "Transfer",
    "Whose",
    "run_report",
]


@dataclass(frozen=True)
class RunReport:
    """Every stage of one run, DP first, and what is worked out only when asked for."""

    run: Run
    stages: tuple[StageReport, ...]
    columns: tuple[Column, ...] = ()
    """The model in eighths, as the step walks across it; empty where no step is drawn."""
    layer_exceeds_card: bool | None = None
    """Whether one assembled layer alone is bigger than the card (`sizing.layer_exceeds_card`)."""
    _steps: dict[Stage, tuple[Phase, ...]] = field(default_factory=dict, compare=False, repr=False)
    _changes: dict[tuple[Stage, Stage], Change] = field(default_factory=dict, compare=False, repr=False)
    _timelines: dict[Stage, tuple[Point, ...]] = field(default_factory=dict, compare=False, repr=False)

    def __iter__(self) -> Iterator[StageReport]:
        return iter(self.stages)

    def __getitem__(self, stage: Stage) -> StageReport:
        return self.stages[list(Stage).index(stage)]

    def step(self, stage: Stage) -> tuple[Phase, ...]:
        """The 53 phases of one step under `stage`: worked out the first time they are asked for."""
        if stage not in self._steps:
            if not self.columns:
                raise ValueError("a report without the model's columns has no step")
            self._steps[stage] = step(stage, self.run, self.columns, self[stage])
        return self._steps[stage]

    def timeline(self, stage: Stage) -> tuple[Point, ...]:
        """One card's memory through the step under `stage`, moment by moment, from its step's figures."""
        if stage not in self._timelines:
            self._timelines[stage] = timeline(self.step(stage))
        return self._timelines[stage]

    def change(self, before: Stage, after: Stage) -> Change:
        """What going from `before` to `after` does to each card, from the two stages' figures."""
        if (before, after) not in self._changes:
            self._changes[before, after] = change(self[before], self[after], self.run.recipe, self.run.zero_group)
        return self._changes[before, after]


def run_report(run: Run, columns: tuple[Column, ...] = ()) -> RunReport:
    """Every stage of `run`, each figure worked out once; `columns` for the step, when one is drawn."""
    return RunReport(
        run=run,
        stages=tuple(stage_report(stage, run) for stage in Stage),
        columns=columns,
        layer_exceeds_card=layer_exceeds_card(run),
    )
