"""What would make it fit: the run's own knobs, each turned until the card holds the step, with its figure.

Where a run's peak is over its card, each knob is tried on its own, and each change is a run resolved again
from the inputs changed (`scenario.resolve`) whose peak is the verdict's (`sizing.peak_bytes`): no figure
here is written by hand. The knobs, in the order of how little they change the run:

1. recompute, none → selective → full: the same step, more compute;
2. the micro-batch, the largest that fits (the report's bisection, `sizing.max_batch_that_fits`);
3. the sequence, the longest power of two that fits;
4. offload, the optimizer, then the optimizer and the weights;
5. the next ZeRO stage, and ZeRO-3 where the next does not fit;
6. the model cut across cards (`parallel.Cut`), each degree the least that fits: sequence parallelism where
   tensor parallelism is on; tensor parallelism inside a node; expert parallelism (a mixture of experts: the
   least ep dividing the routed experts and a stage's cards); context parallelism (a shaped model's
   sequence); pipeline stages; and, with a pipeline, fewer micro-batches in flight. Each says what it
   costs in time (`Fix.bubble`, the pipeline's idle share of the step; `Fix.between_nodes`, its traffic
   leaving the node);
7. more GPUs, the fewest that fit (`MAX_GPUS` at most).

Where no one knob fits under a stage below ZeRO-3, two are turned: ZeRO-3, with each of the changes that
make the run fit under ZeRO-3 (Llama 3.1 405B on 1,024 GPUs under data parallelism: ZeRO-3 and full
recomputation).

A change that takes almost nothing off the peak (less than `SMALL` of it) is said to, apart: selective
recomputation on a model with tiled attention keeps all but the log-sum-exp (Llama 3 70B at 4,096 tokens:
123.75 → 123.67 GiB), and the run's own selective is weighed against none the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any

from app.domain.activations import Recompute
from app.domain.parallel import MAX_STAGES
from app.domain.placement import Offload
from app.domain.run import MAX_GPUS, Run
from app.domain.scenario import Inputs, Scenario
from app.domain.sizing import peak_bytes
from app.domain.stages import Stage

SMALL = Fraction(1, 100)
"""A change that takes less than this share off the peak saves almost nothing."""
SHORTEST_SEQ = 256
"""The shortest sequence suggested: shorter, a language model learns little from a step."""
_STRONGER = {
    Recompute.NONE: (Recompute.SELECTIVE, Recompute.FULL),
    Recompute.SELECTIVE: (Recompute.FULL,),
    Recompute.FULL: (),
}
_MORE_OFFLOAD = {
    Offload.NONE: (Offload.OPTIMIZER, Offload.OPTIMIZER_PARAMS),
    Offload.OPTIMIZER: (Offload.OPTIMIZER_PARAMS,),
    Offload.OPTIMIZER_PARAMS: (),
    Offload.NVME: (),
}


@dataclass(frozen=True)
class Fix:
    """One knob of the run changed, and the card's peak under the stage with it."""

    knob: str
    """The query parameter changed: recompute, batch, seq, offload, stage or gpus."""
    value: str
    """Its new value, as the query writes it: 'full', '1', '4096', 'optimizer', 'zero3', '128'."""
    peak_bytes: int
    """The peak of the changed run, as the verdict counts it."""
    capacity: int
    saved_bytes: int
    """What the change takes off the run's peak."""
    current: bool = False
    """Whether it is the run's own setting, weighed against the knob's weaker one (its selective against none)."""
    then: tuple[str, str] | None = None
    """A second knob turned with this one, and its value: ZeRO-3's own change, where no one knob fits."""
    bubble: Fraction = Fraction(0)
    """For pp and microbatches, the pipeline's bubble with the change: its idle time over the ideal step's,
    (pp − 1) / microbatches (÷ vpp when interleaved); 0 for every other knob."""
    between_nodes: bool = False
    """Whether the knob's own traffic crosses nodes: context parallelism's gathers of keys and values, the
    pipeline's sends between stages, expert parallelism's all-to-all (tensor and sequence parallelism stay in a
    node)."""

    @property
    def headroom_bytes(self) -> int:
        """What is left on the card with the change: negative, what it still misses by."""
        return self.capacity - self.peak_bytes

    @property
    def fits(self) -> bool:
        """Whether the changed run fits its card."""
        return self.peak_bytes <= self.capacity

    @property
    def small(self) -> bool:
        """Whether it takes almost nothing off the peak: less than `SMALL` of the peak before it."""
        return self.saved_bytes < SMALL * (self.peak_bytes + self.saved_bytes)


@dataclass(frozen=True)
class Fixes:
    """What would make a run fit under one stage."""

    changes: tuple[Fix, ...] = ()
    """The changes that take more than a little off: those that fit first, each group in the knobs' order."""
    small: tuple[Fix, ...] = ()
    """The changes, and the run's own selective recomputation, that take almost nothing off."""


def fixes(scenario: Scenario, stage: Stage) -> Fixes:
    """The changes of one knob that would make `scenario`'s run fit under `stage`; none where it fits.

    Empty without a capacity, without the inputs the scenario was resolved from, or where the run fits.
    """
    run, inputs = scenario.run, scenario.inputs
    capacity = run.capacity
    if capacity is None or inputs is None:
        return Fixes()
    peak = scenario.report[stage].peak_bytes
    if peak <= capacity:
        return Fixes()
    tried = [f for f in _tried(scenario, inputs, stage, peak, capacity) if f.saved_bytes > 0]
    big = [f for f in tried if not f.small]
    small = [f for f in tried if f.small]
    if own := _own_recompute(scenario, inputs, stage, peak, capacity):
        small.insert(0, own)
    fitting = tuple(f for f in big if f.fits)
    if not fitting and stage is not Stage.ZERO3:
        fitting = tuple(
            replace(f, knob="stage", value=Stage.ZERO3.value, saved_bytes=peak - f.peak_bytes, then=(f.knob, f.value))
            for f in fixes(scenario, Stage.ZERO3).changes
            if f.fits
        )
    return Fixes(fitting + tuple(f for f in big if not f.fits), tuple(small))


def _peak(scenario: Scenario, stage: Stage, **knobs: Any) -> int | None:
    """The peak under `stage` of the run entered with `knobs` changed; None where that is no run."""
    changed = scenario.changed(**knobs)
    if changed is None:
        return None
    try:
        return peak_bytes(stage, changed.run)
    except ValueError:
        return None


def _fix(scenario: Scenario, stage: Stage, peak: int, capacity: int, **knobs: Any) -> Fix | None:
    """The run with one knob changed (`knobs`, one item), and its peak; None where that is no run."""
    ((knob, value),) = knobs.items()
    changed = _peak(scenario, stage, **knobs)
    return None if changed is None else Fix(knob, str(value), changed, capacity, peak - changed)


def _tried(scenario: Scenario, inputs: Inputs, stage: Stage, peak: int, capacity: int) -> Iterator[Fix]:
    """Each knob turned on its own, in the order of how little it changes the run."""
    shaped = scenario.architecture is not None  # a bare count has no activations to recompute or shorten
    candidates: list[Fix | None] = []
    if shaped:
        for level in _STRONGER[inputs.recompute]:
            candidates.append(_fix(scenario, stage, peak, capacity, recompute=level))
        candidates.append(_batch(scenario, inputs, stage, peak, capacity))
        candidates.append(_seq(scenario, inputs, stage, peak, capacity))
    placement = scenario.run.setup.placement
    moved = placement.moved(stage)
    for offload in _MORE_OFFLOAD[inputs.offload]:
        # Offload moves nothing under DP, and the weights' slices only under ZeRO-3: a choice that moves no
        # more than the last is the same run on this card.
        if (more := replace(placement, offload=offload).moved(stage)) != moved:
            candidates.append(_fix(scenario, stage, peak, capacity, offload=offload))
            moved = more
    stages = list(Stage)
    # The next stage; and ZeRO-3, where it fits and the next does not.
    for after in stages[stages.index(stage) + 1 :]:
        changed = scenario.report[after].peak_bytes
        if after is stages[stages.index(stage) + 1] or (after is Stage.ZERO3 and changed <= capacity):
            candidates.append(Fix("stage", after, changed, capacity, peak - changed))
    candidates += _cut(scenario, inputs, stage, peak, capacity)
    candidates.append(_gpus(scenario, inputs, stage, peak, capacity))
    yield from (f for f in candidates if f is not None)


CUT_KNOBS = ("sp", "tp", "ep", "cp", "pp", "microbatches")
"""The cut's knobs, in the order tried: sequence parallelism costs no bytes on the wire that tensor parallelism
does not already send; tensor parallelism stays inside a node; expert parallelism (a mixture of experts alone)
sends each token to its experts and back, an all-to-all in or between nodes; context parallelism gathers keys
and values; the pipeline idles."""


def _cut(scenario: Scenario, inputs: Inputs, stage: Stage, peak: int, capacity: int) -> list[Fix | None]:
    """The cut's knobs, each turned on its own to the least that fits (or the most tried, with what it misses)."""
    run = scenario.run
    per_node = run.gpus_per_node
    found: list[Fix | None] = []
    if inputs.tp > 1 and not inputs.sp:
        found.append(_cut_fix(scenario, stage, peak, capacity, "sp", True))
    # Tensor parallelism's group stays inside a node: each divisor of a node's cards above the run's own.
    found.append(_least(scenario, stage, peak, capacity, "tp", _above(inputs.tp, per_node)))
    found.append(expert_fix(scenario, stage))
    if scenario.architecture is not None:  # context parallelism splits a sequence's activations
        found.append(_least(scenario, stage, peak, capacity, "cp", _above(inputs.cp, run.gpus // inputs.tp)))
    found.append(_least(scenario, stage, peak, capacity, "pp", _above(inputs.pp, run.gpus // inputs.tp)))
    if inputs.pp > 1 and inputs.microbatches > 1:
        # 1F1B keeps min(pp, microbatches) micro-batches in flight on the first stage: fewer keep less, and idle more.
        fewer = range(inputs.microbatches - 1, 0, -1)
        found.append(_most(scenario, stage, peak, capacity, "microbatches", fewer))
    return found


def expert_fix(scenario: Scenario, stage: Stage) -> Fix | None:
    """Expert parallelism's least degree that fits under `stage` (or the most tried, with what it still misses).

    None for a dense model, a run without a capacity or inputs, or one whose ep is already the most.
    """
    arch, inputs, capacity = scenario.architecture, scenario.inputs, scenario.run.capacity
    if arch is None or arch.moe is None or inputs is None or capacity is None:
        return None
    degrees = ep_degrees(arch.moe.experts, scenario.run.gpus // inputs.pp, inputs.ep, inputs.etp or inputs.tp)
    return _least(scenario, stage, scenario.report[stage].peak_bytes, capacity, "ep", degrees)


def ep_degrees(experts: int, stage: int, now: int, expert_tp: int) -> list[int]:
    """The expert-parallel degrees above `now` to try, least first.

    Each divides the routed experts (every card keeps as many whole ones) and, times the experts' tensor-parallel
    degree, a pipeline stage's cards.
    """
    return [d for d in range(now + 1, experts + 1) if experts % d == 0 and stage % (d * expert_tp) == 0]


def all_to_all_between_nodes(run: Run) -> bool:
    """Whether expert parallelism's all-to-all leaves the node.

    Its group is ep × etp neighbouring ranks (Megatron-LM's expert order, etp fastest, then ep): inside a node
    only where that many divide a node's cards.
    """
    group = run.cut.ep * run.cut.expert_tp
    return run.nodes > 1 and run.gpus_per_node % group != 0


def _above(now: int, within: int) -> list[int]:
    """The degrees above `now` that a cut of `within` cards could take: its divisors, each a multiple of `now`.

    Up to the form's most (`MAX_STAGES`): each is a report of its own, and stages past it are no run's.
    """
    return [d for d in range(now + 1, min(within, MAX_STAGES) + 1) if within % d == 0 and d % now == 0]


def _least(scenario: Scenario, stage: Stage, peak: int, capacity: int, knob: str, degrees: list[int]) -> Fix | None:
    """The least degree that fits; where none does, the largest that is a run, with what it still misses."""
    last = None
    for degree in degrees:
        fix = _cut_fix(scenario, stage, peak, capacity, knob, degree)
        if fix is not None:
            if fix.fits:
                return fix
            last = fix
    return last


def _most(scenario: Scenario, stage: Stage, peak: int, capacity: int, knob: str, values: range) -> Fix | None:
    """The most (of `values`, largest first) that fits; where none does, the last that is a run."""
    return _least(scenario, stage, peak, capacity, knob, list(values))


def _cut_fix(scenario: Scenario, stage: Stage, peak: int, capacity: int, knob: str, value: int | bool) -> Fix | None:
    """The run with one of the cut's knobs changed, its peak from the report, and what the cut then costs in time."""
    changed = scenario.changed(**{knob: value})
    if changed is None:
        return None
    try:
        after = peak_bytes(stage, changed.run)
    except ValueError:
        return None
    run = changed.run
    cut = run.cut
    piped = knob in ("pp", "microbatches")
    # What the knob's own traffic crosses: tensor (and sequence) parallelism stays in a node; a context-parallel
    # group is tp × cp neighbouring ranks; the pipeline's stages are gpus / pp ranks apart, so with more than one
    # node some stage's neighbour is in another.
    between = (
        (knob == "cp" and cut.tp * cut.cp > run.gpus_per_node)
        or (piped and run.nodes > 1)
        or (knob == "ep" and all_to_all_between_nodes(run))
    )
    shown = "1" if value is True else str(value)
    bubble = cut.bubble if piped else Fraction(0)
    return Fix(knob, shown, after, capacity, peak - after, bubble=bubble, between_nodes=between)


def _batch(scenario: Scenario, inputs: Inputs, stage: Stage, peak: int, capacity: int) -> Fix | None:
    """The largest micro-batch that fits (the report's own bisection); 1 where none does, with what it misses."""
    if inputs.batch <= 1:
        return None
    largest = scenario.report[stage].max_batch_that_fits
    batch = largest if largest else 1  # 0 sequences is no training: one, with what it still misses
    if batch >= inputs.batch:
        return None
    return _fix(scenario, stage, peak, capacity, batch=batch)


def _seq(scenario: Scenario, inputs: Inputs, stage: Stage, peak: int, capacity: int) -> Fix | None:
    """The longest power of two shorter than the run's sequence that fits; the shortest tried where none does."""
    seq = 1 << (scenario.seq - 1).bit_length() - 1 if scenario.seq > 1 else 0
    last = None
    while seq >= SHORTEST_SEQ:
        last = _fix(scenario, stage, peak, capacity, seq=seq)
        if last is not None and last.fits:
            return last
        seq //= 2
    return last


def _gpus(scenario: Scenario, inputs: Inputs, stage: Stage, peak: int, capacity: int) -> Fix | None:
    """The fewest GPUs that fit, the nodes' size kept; None where even `MAX_GPUS` do not, or groups are fixed.

    A card's peak does not grow with the cards (each keeps a slice, or the same whole copy), so the fewest is
    found by bisection over the counts the nodes allow.
    """
    if inputs.shard is not None or inputs.hpz > 1 or stage is Stage.DP:
        return None  # hybrid groups are sized to the cluster; DP keeps the same whole copy on any count
    # Whole nodes, each a whole number of the cut's model-parallel groups (tp × pp × cp divides the cards).
    step = math.lcm(inputs.gpus_per_node or 1, inputs.tp * inputs.pp * inputs.cp)
    counts = range(inputs.gpus + step - inputs.gpus % step, MAX_GPUS + 1, step)

    def fitting(gpus: int) -> Fix | None:
        changed = _peak(scenario, stage, gpus=gpus, nodes=None)
        fix = None if changed is None else Fix("gpus", str(gpus), changed, capacity, peak - changed)
        return fix if fix is not None and fix.fits else None

    if not counts or (found := fitting(counts[-1])) is None:
        return None
    low, high = -1, len(counts) - 1  # counts[high] fits; counts[low] does not (or is below the first)
    while high - low > 1:
        middle = (low + high) // 2
        if (fix := fitting(counts[middle])) is not None:
            high, found = middle, fix
        else:
            low = middle
    return found


def _own_recompute(scenario: Scenario, inputs: Inputs, stage: Stage, peak: int, capacity: int) -> Fix | None:
    """The run's own selective recomputation, weighed against none, where it takes almost nothing off."""
    if inputs.recompute is not Recompute.SELECTIVE:
        return None
    without = _peak(scenario, stage, recompute=Recompute.NONE)
    if without is None:
        return None
    own = Fix("recompute", Recompute.SELECTIVE, peak, capacity, without - peak, current=True)
    return own if own.small else None
