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
    """The change in words: 'full recomputation', 'micro-batch 1', 'sequence 4,096', 'ZeRO-3', '128 GPUs'.

    Two knobs: 'ZeRO-3 and full recomputation'.
    """
    words = _words(fix.knob, fix.value)
    return words if fix.then is None else f"{words} and {_words(*fix.then)}"


def _words(knob: str, value: str) -> str:
    match knob:
        case "recompute":
            return f"{value} recomputation"
        case "batch":
            return f"micro-batch {int(value):,}"
        case "seq":
            return f"sequence {int(value):,}"
        case "offload":
            return _OFFLOADED[value]
        case "stage":
            return Stage(value).info.title
        case "sp":
            return "sequence parallelism"
        case "tp" | "pp" | "cp" | "ep":
            return f"{knob} {int(value):,}"
        case "microbatches":
            return f"{int(value):,} micro-batch" + ("" if value == "1" else "es")
        case _:
            return f"{int(value):,} GPUs"


def cost(fix: Fix) -> str:
    """What a cut costs in time, for a person: the pipeline's bubble, traffic that leaves the node; empty otherwise.

    'the pipeline idles 3/8 of the step's compute ((pp − 1) / micro-batches), its sends between nodes';
    a bubble of a whole number of steps is '1× the step's compute'.
    """
    knob = fix.knob if fix.then is None else fix.then[0]
    match knob:
        case "sp":
            return "the same bytes on the wire as tp's all-reduces, as a reduce-scatter and an all-gather"
        case "tp":
            return "every layer's activations all-reduced in the node, forward and backward"
        case "cp":
            where = "between nodes" if fix.between_nodes else "in the node"
            return f"every layer's keys and values gathered {where}"
        case "ep":
            where = "between nodes" if fix.between_nodes else "in the node"
            return f"every expert block's tokens sent to their experts and back, an all-to-all {where}"
        case "pp" | "microbatches":
            bubble = fix.bubble
            idle = f"{bubble.numerator}/{bubble.denominator} of" if bubble.denominator > 1 else f"{bubble.numerator}×"
            sends = ", its sends between nodes" if fix.between_nodes else ""
            return f"the pipeline idles {idle} the step's compute ((pp − 1) / micro-batches){sends}"
        case _:
            return ""


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
        if why := cost(fix):
            figure += f"; {why}"
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
        return (link if fix.then is None else _set(link, *fix.then)).at(Stage(fix.value), phase)
    return _set(link, fix.knob, fix.value).at(stage, phase)


def _set(link: Links, knob: str, value: str) -> Links:
    """The run's addresses with one knob set; more GPUs leave the nodes to their default."""
    changed = link.setting(knob, value)
    return changed.setting("nodes", None) if knob == "gpus" else changed
