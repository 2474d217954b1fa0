"""What would make it fit, under the verdict: each change found by the domain (`fixes.fixes`), as a link.

"full recomputation: fits, 47.1 GiB left". The words name the knob and its new value; the figure is the
changed run's, as the verdict counts it. A change that saves almost nothing says so, with the peaks before
and after it.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.fixes import Fix, fixes
from app.domain.placement import Offload
from app.domain.scenario import Scenario
from app.domain.stages import Stage
from app.web.links import Links

_OFFLOADED = {
    Offload.OPTIMIZER.value: "offload the optimizer",
    Offload.OPTIMIZER_PARAMS.value: "offload the optimizer and the weights",
}


@dataclass(frozen=True)
class FixLine:
    """One change under the verdict: its words, its figure, where it leads and its class."""

    label: str
    figure: str
    href: str
    css: str


def label(fix: Fix) -> str:
    """The change in words: 'full recomputation', 'micro-batch 1', 'sequence 4,096', 'ZeRO-3', '128 GPUs'."""
    match fix.knob:
        case "recompute":
            return f"{fix.value} recomputation"
        case "batch":
            return f"micro-batch {int(fix.value):,}"
        case "seq":
            return f"sequence {int(fix.value):,}"
        case "offload":
            return _OFFLOADED[fix.value]
        case "stage":
            return Stage(fix.value).info.title
        case _:
            return f"{int(fix.value):,} GPUs"


def fix_lines(scenario: Scenario, stage: Stage, link: Links, phase: int | None) -> tuple[FixLine, ...]:
    """The changes that would make the run fit under `stage`, then those that save almost nothing; none if it fits."""
    found, units = fixes(scenario, stage), scenario.units
    lines = []
    for fix in found.changes:
        figure = (
            f"fits, {units.show(fix.headroom_bytes)} left"
            if fix.fits
            else f"still over by {units.show(-fix.headroom_bytes)}"
        )
        lines.append(FixLine(label(fix), figure, _href(fix, link, stage, phase), "fix fits" if fix.fits else "fix"))
    for fix in found.small:
        before, after = units.show(fix.peak_bytes + fix.saved_bytes), units.show(fix.peak_bytes)
        figure = f"saves almost nothing, {units.show(fix.saved_bytes)}: peak {before} → {after}"
        # The run's own setting leads to the run without it: what it saves is what that gives up.
        href = link.setting(fix.knob, None).at(stage, phase) if fix.current else _href(fix, link, stage, phase)
        lines.append(FixLine(label(fix) + (", as now" if fix.current else ""), figure, href, "fix small"))
    return tuple(lines)


def _href(fix: Fix, link: Links, stage: Stage, phase: int | None) -> str:
    """The same view with the change made: the next stage's, or this stage's with the knob set."""
    if fix.knob == "stage":
        return link.at(Stage(fix.value), phase)
    changed = link.setting(fix.knob, fix.value)
    return (changed.setting("nodes", None) if fix.knob == "gpus" else changed).at(stage, phase)
