"""A pipeline's step: which micro-batch each stage works on when, what each holds, and the bubble.

1F1B (PipeDream-flush, Narayanan et al. 2021, "Efficient large-scale language model training on GPU
clusters using Megatron-LM", §2.2): stage `s` of `pp` runs `pp − s − 1` forwards to fill the pipeline, then
alternates one forward and one backward, then drains the backwards left. A stage keeps a micro-batch's
activations from the start of its forward to the end of its backward, so stage `s` holds at most
`min(pp − s, m)` micro-batches; every stage idles `(pp − 1)` forwards and backwards in all, the bubble,
`(pp − 1) / m` of the ideal step.

Interleaved 1F1B (same paper, §2.2.2): each card keeps `vpp` chunks of the blocks, chunk `c` of card `r`
being virtual stage `c · pp + r`. Its order is Megatron-core's (`forward_backward_pipelining_with_interleaving`,
`get_schedule_table`): forwards go through the micro-batches in groups of `pp` (so their number is a multiple
of `pp`, as Megatron-LM asks), chunk by chunk; card `r` runs
`2 (pp − r − 1) + (vpp − 1) pp` forwards first, then one forward and one backward (the backwards take the
chunks in reverse), then the backwards left. Each chunk's pass takes `1 / vpp` of a whole stage's, so the
bubble shrinks to `(pp − 1) / (m · vpp)`, and the first card holds Megatron's factor
`1 + (pp − 1) / (pp · vpp)` of `pp` micro-batches' worth of its activations.

Times are in a whole stage's forward (`FORWARD` = 1); the backward is twice it (`BACKWARD` = 2), the ratio
Megatron-LM's 1F1B analysis and the Ultra-Scale Playbook take (a backward computes the gradients of both
the inputs and the weights, two matrix products for the forward's one). Sends between stages take no time
here: the wire's time (`wire`) is counted apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from app.domain.loaded import stage_load
from app.domain.parallel import Cut, stage_blocks
from app.domain.run import Run

FORWARD = Fraction(1)
"""A whole stage's forward of one micro-batch: the unit of time."""
BACKWARD = 2 * FORWARD
"""Its backward: twice the forward, as Megatron-LM and the Ultra-Scale Playbook take it."""

DRAWN_SLOTS = 512
"""The most forwards (pp × micro-batches × vpp) `schedule` is asked to lay out: a drawing's worth."""


class Work(StrEnum):
    """What a stage does in a slot."""

    FORWARD = "F"
    BACKWARD = "B"


@dataclass(frozen=True)
class Slot:
    """One pass of one micro-batch through one chunk of a stage's blocks, and when."""

    stage: int
    work: Work
    microbatch: int
    chunk: int
    """Which of the card's `vpp` chunks (0 without interleaving)."""
    start: Fraction
    end: Fraction

    @property
    def label(self) -> str:
        """F3, B3: the pass and the micro-batch."""
        return f"{self.work.value}{self.microbatch}"


@dataclass(frozen=True)
class Held:
    """From `start` on (until the next change), a stage holds `chunks` micro-batches' activations of one chunk."""

    start: Fraction
    chunks: int


@dataclass(frozen=True)
class Schedule:
    """Every stage's slots, in the order it runs them, with their times."""

    pp: int
    vpp: int
    microbatches: int
    stages: tuple[tuple[Slot, ...], ...]

    @property
    def makespan(self) -> Fraction:
        """From the first forward to the last backward, in forwards of a whole stage."""
        return max(slot.end for slots in self.stages for slot in slots)

    @property
    def ideal(self) -> Fraction:
        """The step with no bubble: each stage's m forwards and backwards back to back."""
        return self.microbatches * (FORWARD + BACKWARD)

    @property
    def bubble(self) -> Fraction:
        """Each stage's idle time as a share of the ideal step (the same on every stage)."""
        return (self.makespan - self.ideal) / self.ideal

    @property
    def pipelined(self) -> bool:
        """Whether there is a pipeline at all: with one stage, gradient accumulation and no bubble."""
        return self.pp > 1

    def held(self, stage: int) -> tuple[Held, ...]:
        """What `stage` holds through the step: a chunk's activations from its forward's start to its backward's end.

        At one instant a backward's end frees before a forward's start takes, as the memory does.
        """
        changes: dict[Fraction, int] = {}
        for slot in self.stages[stage]:
            if slot.work is Work.FORWARD:
                changes[slot.start] = changes.get(slot.start, 0) + 1
            else:
                changes[slot.end] = changes.get(slot.end, 0) - 1
        count, points = 0, [Held(Fraction(0), 0)]
        for time in sorted(changes):
            count += changes[time]
            if points[-1].start == time:  # the first forward starts at 0 on stage 0
                points.pop()
            if not points or points[-1].chunks != count:
                points.append(Held(time, count))
        return tuple(points)

    def peak_chunks(self, stage: int) -> int:
        """The most chunk activations `stage` holds at once."""
        return max(point.chunks for point in self.held(stage))


def interleaving_refused(cut: Cut) -> str:
    """Why interleaved 1F1B has no schedule here; empty if it has one (or the pipeline is not interleaved).

    Megatron-LM's interleaved schedule takes the micro-batches in groups of `pp`, so it asks for a multiple of
    `pp` (Narayanan et al. 2021 §2.2.2; torch's `ScheduleInterleaved1F1B` relaxes it its own way).
    """
    if cut.vpp == 1 or cut.microbatches % cut.pp == 0:
        return ""
    return (
        f"Interleaved 1F1B takes the micro-batches in groups of pp = {cut.pp:,}: "
        f"{cut.microbatches:,} micro-batches is not a multiple of it, so its schedule is not drawn."
    )


def warmup(cut: Cut, stage: int) -> int:
    """The forwards `stage` runs before its first backward (Megatron-core's counts)."""
    pp, vpp, m = cut.pp, cut.vpp, cut.microbatches
    if vpp == 1:
        return min(pp - stage - 1, m)
    return min(2 * (pp - stage - 1) + (vpp - 1) * pp, m * vpp)


def peak_in_flight(cut: Cut, stage: int) -> Fraction:
    """The most micro-batches' activations of its blocks `stage` holds at once, in whole stages' worth.

    The forwards before the first backward and the one forward of the steady state before it: 1F1B's
    `min(pp − s, m)`; interleaved, chunks of `1 / vpp` of the stage each, Megatron's
    `pp · (1 + (pp − 1) / (pp · vpp))` on the first stage when there are micro-batches enough.
    """
    chunks = min(warmup(cut, stage) + 1, cut.microbatches * cut.vpp)
    return Fraction(chunks, cut.vpp)


def _forward_order(cut: Cut) -> list[tuple[int, int]]:
    """(micro-batch, chunk) of each forward a card runs: Megatron-core's `get_schedule_table`, groups of pp."""
    pp, vpp, m = cut.pp, cut.vpp, cut.microbatches
    order: list[tuple[int, int]] = []
    for first in range(0, m, pp):
        order += [(mb, chunk) for chunk in range(vpp) for mb in range(first, min(first + pp, m))]
    return order


def _card_order(cut: Cut, stage: int) -> list[tuple[Work, int, int]]:
    """The passes card `stage` runs, in order: warm-up forwards, one forward and one backward, the rest."""
    forwards = _forward_order(cut)
    backwards = [(mb, cut.vpp - 1 - chunk) for mb, chunk in forwards]
    first = warmup(cut, stage)
    order = [(Work.FORWARD, *f) for f in forwards[:first]]
    for i, f in enumerate(forwards[first:]):
        order += [(Work.FORWARD, *f), (Work.BACKWARD, *backwards[i])]
    order += [(Work.BACKWARD, *b) for b in backwards[len(forwards) - first :]]
    return order


def schedule(cut: Cut) -> Schedule:
    """Every stage's slots: each pass starts when its card is free and its input is there.

    A forward of virtual stage `j` needs the same micro-batch's forward on `j − 1`; a backward needs its
    backward on `j + 1`, or on the last virtual stage its own forward. Megatron-core's orders never wait on
    a pass that comes later on the same card, so laying them out card by card, as far as each can go, ends.
    """
    pp, vpp = cut.pp, cut.vpp
    if interleaving_refused(cut):
        raise ValueError(interleaving_refused(cut))
    if pp * vpp * cut.microbatches > DRAWN_SLOTS:
        raise ValueError(f"{pp * vpp * cut.microbatches:,} forwards are more than a drawing's {DRAWN_SLOTS}")
    last = pp * vpp - 1
    duration = {Work.FORWARD: FORWARD / vpp, Work.BACKWARD: BACKWARD / vpp}
    orders = [_card_order(cut, s) for s in range(pp)]
    ends: dict[tuple[Work, int, int], Fraction] = {}
    laid: list[list[Slot]] = [[] for _ in range(pp)]
    free = [Fraction(0)] * pp
    left = sum(len(o) for o in orders)
    while left:
        moved = False
        for s, order in enumerate(orders):
            while len(laid[s]) < len(order):
                work, mb, chunk = order[len(laid[s])]
                virtual = chunk * pp + s
                if work is Work.FORWARD:
                    needs = (Work.FORWARD, mb, virtual - 1) if virtual else None
                else:
                    needs = (Work.BACKWARD, mb, virtual + 1) if virtual < last else (Work.FORWARD, mb, virtual)
                if needs is not None and needs not in ends:
                    break
                start = max(free[s], ends[needs]) if needs is not None else free[s]
                end = start + duration[work]
                ends[(work, mb, virtual)] = free[s] = end
                laid[s].append(Slot(s, work, mb, chunk, start, end))
                left -= 1
                moved = True
        if not moved:
            raise AssertionError(f"the schedule of {cut} waits on itself")
    return Schedule(pp, vpp, cut.microbatches, tuple(tuple(slots) for slots in laid))


def chunk_blocks(cut: Cut, blocks: int) -> tuple[int, ...]:
    """The blocks in each stage's chunk (its whole run without interleaving), stage by stage.

    Interleaved, pp × vpp equal chunks; otherwise `parallel.stage_blocks`' ⌊L/pp⌋ or ⌈L/pp⌉. The timing takes
    every stage's pass as long (`FORWARD`): an uneven split is chosen to even out the first and last stages'
    embedding and output layer, and what a stage holds is counted by its own blocks.
    """
    if cut.vpp > 1:
        return (blocks // (cut.pp * cut.vpp),) * cut.pp
    return stage_blocks(blocks, cut.pp)


def microbatch_activations(run: Run) -> tuple[int, ...]:
    """One micro-batch's activations of each pipeline stage's layers on its card, in bytes, stage by stage.

    The figure the most loaded card is counted with (`Run.cards`: a micro-batch in flight keeps its whole
    stage's activations): each layer's as one card of the cut keeps it (`loaded.stage_load`: Korthikanti's
    Table 2 with t and sp, ÷ cp; the first stage's embedding, the last's final norm and output layer), times the
    micro-batch's sequences. All 0 for a bare weight count or an empty micro-batch.
    """
    cut = run.cut
    return tuple(
        run.batch
        * sum(
            layer.kept
            for layer in stage_load(run.model_layers, run.params, run.frozen, run.largest_layer, cut, index).layers
        )
        for index in range(cut.pp)
    )
