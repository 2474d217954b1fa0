"""One training step of a run, phase by phase: what each card holds, what moves, and what it costs.

The columns are the model in eighths, first layer to last (`eighths`). Card c is responsible for
the c-th of N equal slices of the weights, so with 8 cards it owns column c, with 16 half a column,
with 4 two columns. A step is 53 phases for every stage and every run, so a phase number means the
same moment whichever arrangement is shown:

  0         the step begins, state at rest
  1 - 24    forward, column 0 to column 7, three beats a column: gather, compute, discard
  25 - 48   backward, column 7 to column 0, the same three beats
  49, 50    gradient synchronisation (data parallelism's all-reduce is both halves)
  51        optimizer update
  52        weight synchronisation, where the stage needs it

A pass column is three phases (`Beat`) under every stage, so that the seed's "collect that layer's
weights, use them, and discard them again immediately" is a click each: the gather (ZeRO-3's all-gather;
under the other stages nothing arrives), the compute (the layer in hand), the discard (the assembled copy
dropped and, in the backward, ZeRO-2 and 3's reduce-scatter of the gradients). Links numbered before the
beats (21 phases) are read with `from_old_phase`.

Every card's live memory is its state at rest (`state_bytes.per_gpu_bytes`) plus what it holds at the
moment (`sizing.layer_extra`). The compute beat holds the column's highest moment, the most loaded card's
moments (`StageCard.columns`: its stage's layers ÷ tp with the other micro-batches in flight, Megatron's activations
under its accounting) that the table's peak is the highest of; the gather holds no more than it and the discard
what is left between layers, so the step's highest figure is the peak.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction

from app.domain.communication import Collective, Scope, Transfer, Whose
from app.domain.eighths import COLUMNS, Column
from app.domain.figures import HostReport, LayerExtra, StageReport
from app.domain.host import host_report
from app.domain.layers import ColumnMoments
from app.domain.recipes import Band
from app.domain.run import Run, StageCard
from app.domain.sharding import CellState, Share, share
from app.domain.sizing import counted_overhead_bytes, layer_extra, loaded_card
from app.domain.stages import OPTIMIZER_STATE, Stage
from app.domain.state_bytes import per_gpu_bytes
from app.domain.terms import AT_REST, Moment, Pass
from app.domain.wire import experts_apart, moved_params, split


class Beat(StrEnum):
    """Which of its three phases a pass column is in."""

    GATHER = "gather"
    """The layer's slices arrive from their owners (ZeRO-3); under the other stages nothing arrives."""
    COMPUTE = "compute"
    """The layer computes: activations in the forward, gradients in the backward."""
    DISCARD = "discard"
    """The assembled copy is dropped; in the backward ZeRO-2 and 3 reduce-scatter the gradients and drop them."""


BEATS = tuple(Beat)
PASS_PHASES = 2 * COLUMNS * len(BEATS)
PHASES = 1 + PASS_PHASES + 4
LAST_PHASE = PHASES - 1
FIRST_SYNC = PASS_PHASES + 1
"""The first of the two gradient-synchronisation phases."""
OLD_PHASES = 21
"""Phases a step had before each pass column was three: links of that time say `phase21=`."""


def from_old_phase(old: int) -> int:
    """The phase now nearest to a phase of the 21-phase step: a pass column's was its layer in hand, the compute.

    0 stays 0; the old 1-16 (one a pass column) become their compute beats, 3 × old − 1; 17-20 follow the
    passes, old + 32.
    """
    if not 0 <= old < OLD_PHASES:
        raise ValueError(f"the old step had phases 0 to {OLD_PHASES - 1}")
    if old == 0:
        return 0
    if old <= 2 * COLUMNS:
        return len(BEATS) * old - 1
    return old - 2 * COLUMNS - 1 + FIRST_SYNC


class Part(StrEnum):
    """Which part of the step a phase belongs to."""

    START = "start"
    FORWARD = "forward"
    BACKWARD = "backward"
    GRADIENT_SYNC = "gradient-sync"
    UPDATE = "update"
    WEIGHT_SYNC = "weight-sync"


class Holding(StrEnum):
    """What a card has of one band of one column during a phase."""

    HELD = "held"
    """Kept on this card: all of the column."""
    PARTIAL = "partial"
    """Kept on this card: its slice, part of the column; the rest is held by other cards."""
    GATHERED = "gathered"
    """Assembled here from the cards that hold it, for this phase only, then discarded."""
    SENT = "sent"
    """Computed here (gradients), then reduce-scattered to the cards that own them and dropped."""
    DASHED = "dashed"
    """Not here: other cards hold it."""

    @property
    def state(self) -> CellState:
        """The grid's solid, partial or dashed: gathered and sent cells are on the card, for now."""
        return {Holding.DASHED: CellState.DASHED, Holding.PARTIAL: CellState.PARTIAL}.get(self, CellState.SOLID)


@dataclass(frozen=True)
class InFlight:
    """A collective in flight during a phase: what moves, whose columns, and how much, in units of P."""

    collective: Collective
    band: Band
    columns: tuple[int, ...]
    volume_p: Fraction
    whose: Whose = Whose.TRAINED
    """Which of the columns' weights it moves."""
    scope: Scope = Scope.GROUP
    """Which cards it runs over: the shard group, the replicas, or hpZ's group inside the node."""
    inside: Fraction = Fraction(0)
    """Bytes one card sends for it over the link inside its node (`wire.split`)."""
    between: Fraction = Fraction(0)
    """Bytes one card sends for it between nodes."""

    @property
    def description(self) -> str:
        """E.g. 'all-gather of column 3's weights'."""
        if self.scope is Scope.REPLICAS:
            return f"{self.collective} of every column's {self.band} slice across the replicas"
        if len(self.columns) == 1:
            return f"{self.collective} of column {self.columns[0]}'s {self.band}"
        return f"{self.collective} of every column's {self.band}"


@dataclass(frozen=True)
class HostMove:
    """What one card's PCIe link carries during a phase: a band's slice down to its host, or up."""

    band: Band
    down: bool
    nbytes: int

    @property
    def description(self) -> str:
        """E.g. 'the gradients' slice down to the host'."""
        return f"the {self.band}' slice {'down to the host' if self.down else 'up from the host'}"


@dataclass(frozen=True)
class Phase:
    """One moment of the step under one stage, for one run."""

    stage: Stage
    gpus: int
    index: int
    part: Part
    column: int | None
    transfers: tuple[InFlight, ...]
    tally_p: Fraction
    """Traffic so far this step, this phase included, in units of P."""
    state_bytes: int
    """What every card keeps at rest."""
    extra: LayerExtra
    """What every card holds beyond that for the layer in hand."""
    overhead_bytes: int = 0
    """The overheads, when counted: the same at every moment (`sizing.overheads`)."""
    frozen: bool = False
    """Whether the column in hand is frozen: the backward computes no gradients for it."""
    pcie: tuple[HostMove, ...] = ()
    """What crosses a card's PCIe link in this phase, with offload."""
    pcie_bytes: int = 0
    """A card's PCIe bytes so far this step, this phase included: `host.HostReport.pcie_bytes_per_step` at the end."""
    on_host: frozenset[Band] = frozenset()
    """The bands that live on the host, not the card: the update of those is the CPU's."""
    peak_bytes_so_far: int = 0
    """The highest live bytes from the start of the step to this phase, this one included."""
    reached: bool = True
    """False for a backward phase over a column the backward pass does not reach: nothing before it trains."""
    trained: int | None = None
    """Of the layer in hand's weights, those that train (gradients computed); None where unknown or at rest."""
    column_trains: tuple[int, int] = (0, 0)
    """The column in hand's weights that train, and all its weights (adapters included); (0, 0) for no column."""
    stops_here: bool = False
    """Whether the backward pass stops in the column in hand: the column before it is never reached."""
    trains_all: bool = True
    """Whether every weight of the model trains: the weights' all-gather after the update sends the whole model."""
    shards: int = 0
    """The cards a sharded band is split across (a hybrid run's shard group); 0: all `gpus`."""
    inside_so_far: Fraction = Fraction(0)
    """Bytes one card has sent inside its node so far this step, this phase included."""
    between_so_far: Fraction = Fraction(0)
    """Bytes one card has sent between nodes so far this step, this phase included."""
    beat: Beat | None = None
    """Which of its column's three phases a pass phase is; None outside the passes."""
    cut: bool = False
    """Whether the model is cut across cards (tp, pp, cp, ep): a card keeps only its share of a column."""

    @property
    def group(self) -> int:
        """The cards a sharded band is split across."""
        return self.shards or self.gpus

    def slice_of(self, card: int, column: int) -> Share | None:
        """The part of `column` in `card`'s slice: each shard group splits the weights alike."""
        return share(card % self.group, column, self.group)

    @property
    def live_bytes(self) -> int:
        """What each card holds during this phase; every card holds the same amount."""
        return self.state_bytes + self.extra.total + self.overhead_bytes

    @property
    def sharded(self) -> frozenset[Band]:
        """The bands split across cards; none on one card."""
        return self.stage.sharded if self.group > 1 else frozenset()

    def holding(self, card: int, column: int, band: Band) -> Holding:
        """What one card has of one band of one column during this phase."""
        rest = _at_rest(self, card, column, band)
        # A band on the host comes up to the card for the layer in hand, the card's own slice too.
        if column != self.column or not self.reached or (rest is Holding.HELD and band not in self.on_host):
            return rest
        # The weights are assembled for the gather and the compute, and dropped at the discard; the gradients
        # exist from the compute, and leave at the discard's reduce-scatter.
        if band is Band.WEIGHTS and self.part in (Part.FORWARD, Part.BACKWARD) and self.beat is not Beat.DISCARD:
            return Holding.GATHERED
        if band is Band.GRADIENTS and self.part is Part.BACKWARD and self.beat is not Beat.GATHER:
            return Holding.SENT
        return rest

    def active(self, card: int, column: int, band: Band) -> bool:
        """Whether this phase works on one card's band of one column: the cells its text names."""
        part = self.part
        if part in (Part.FORWARD, Part.BACKWARD):
            return self.reached and column == self.column and band in self._beat_bands()
        if part is Part.UPDATE:
            updates_all = not self.sharded & set(OPTIMIZER_STATE)
            mine = updates_all or self.slice_of(card, column) is not None
            # With the optimizer on the host, the card's weights wait for the new ones to come up.
            updated = OPTIMIZER_STATE if Band.MASTER in self.on_host else (Band.WEIGHTS, *OPTIMIZER_STATE)
            return mine and band in updated
        if self.pcie and not self.transfers:  # down to the host or up from it: the card's own slice
            return any(m.band is band for m in self.pcie) and self.slice_of(card, column) is not None
        # Synchronisation works on exactly the band its collectives move, in every column.
        return any(t.band is band and column in t.columns for t in self.transfers)

    @property
    def weights_arrive(self) -> bool:
        """Whether a pass column's weights come to the card for it: split by ZeRO-3, or on the host."""
        return Band.WEIGHTS in self.sharded or Band.WEIGHTS in self.on_host

    @property
    def beat_word(self) -> str:
        """A pass phase's beat as it happens under this stage: only ZeRO-3 (or offloaded weights) gathers.

        Under data parallelism, ZeRO-1 and ZeRO-2 the weights are already whole on the card (with the model
        cut, its share of them), so the first beat gathers nothing; the last drops nothing unless gradients
        are sent (ZeRO-2's reduce-scatter in the backward).
        """
        if self.beat is Beat.GATHER and not self.weights_arrive:
            return "weights here"
        if self.beat is Beat.DISCARD and not (self.weights_arrive or self.transfers):
            return "nothing to drop"
        return str(self.beat) if self.beat else ""

    def _beat_bands(self) -> frozenset[Band]:
        """The bands a pass phase works on: what arrives at the gather, what computes, what the discard lets go.

        Where nothing arrives or goes (a band the stage keeps whole), that beat works on nothing.
        """
        arrives = self.weights_arrive
        if self.beat is Beat.GATHER:
            return frozenset({Band.WEIGHTS} if arrives else ())
        sent = {Band.GRADIENTS} if self.transfers else set()
        if self.beat is Beat.DISCARD:
            return frozenset(({Band.WEIGHTS} if arrives else set()) | sent)
        return frozenset({Band.WEIGHTS, Band.GRADIENTS} if self.part is Part.BACKWARD else {Band.WEIGHTS})

    @property
    def title(self) -> str:
        """A heading for the phase."""
        if self.pcie and self.part is Part.GRADIENT_SYNC:
            return "Gradients down to the host"
        if self.pcie and self.part is Part.WEIGHT_SYNC:
            return "Weights up from the host" + (", then all-gathered" if self.transfers else "")
        beat = f": {self.beat_word}" if self.beat else ""
        return {
            Part.START: "The step begins: state at rest",
            Part.FORWARD: f"Forward pass, column {self.column}{beat}",
            Part.BACKWARD: f"Backward pass, column {self.column}{beat}",
            Part.GRADIENT_SYNC: "Gradient synchronisation",
            Part.UPDATE: "Optimizer update",
            Part.WEIGHT_SYNC: "Weight synchronisation",
        }[self.part]


def _at_rest(phase: Phase, card: int, column: int, band: Band) -> Holding:
    if band not in phase.sharded:
        return Holding.HELD
    part = phase.slice_of(card, column)
    if part is None:
        return Holding.DASHED
    return Holding.HELD if part.size == 1 else Holding.PARTIAL


def _part(index: int) -> tuple[Part, int | None, Beat | None]:
    if index == 0:
        return Part.START, None, None
    if index < FIRST_SYNC:
        walked, beat = divmod(index - 1, len(BEATS))  # the pass columns walked before this one, and its beat
        if walked < COLUMNS:
            return Part.FORWARD, walked, BEATS[beat]
        return Part.BACKWARD, 2 * COLUMNS - 1 - walked, BEATS[beat]
    part = {FIRST_SYNC: Part.GRADIENT_SYNC, FIRST_SYNC + 1: Part.GRADIENT_SYNC, FIRST_SYNC + 2: Part.UPDATE}
    return part.get(index, Part.WEIGHT_SYNC), None, None


MoveKey = tuple[Collective, Band, Whose]
Scopes = dict[MoveKey, Scope]


def _transfers(
    stage: Stage,
    sharded: frozenset[Band],
    index: int,
    at: tuple[Part, int | None, Beat | None],
    run: Run,
    scopes: Scopes,
) -> tuple[InFlight, ...]:
    """The collectives of a phase, each of a column's weights or every column's (volumes: `_volumes`)."""
    part, column, beat = at
    every = tuple(range(COLUMNS))
    replicated = Scope.REPLICAS if stage is not Stage.DP and not sharded and run.replicas > 1 else Scope.GROUP
    if part is Part.FORWARD and column is not None and Band.WEIGHTS in sharded and beat is Beat.GATHER:
        return (InFlight(Collective.ALL_GATHER, Band.WEIGHTS, (column,), Fraction(0), Whose.EVERY),)
    if part is Part.BACKWARD and column is not None:
        if Band.WEIGHTS in sharded and beat is Beat.GATHER:  # ZeRO-3 gathers the layers again for their gradients
            scope = scopes[Collective.ALL_GATHER, Band.WEIGHTS, Whose.REACHED]
            return (InFlight(Collective.ALL_GATHER, Band.WEIGHTS, (column,), Fraction(0), Whose.REACHED, scope),)
        if Band.GRADIENTS in sharded and beat is Beat.DISCARD:  # ZeRO-2 and -3 send each layer's gradients at once
            return (InFlight(Collective.REDUCE_SCATTER, Band.GRADIENTS, (column,), Fraction(0)),)
        return ()
    if part is Part.GRADIENT_SYNC and Band.GRADIENTS not in sharded:
        if index == FIRST_SYNC:
            return (InFlight(Collective.REDUCE_SCATTER, Band.GRADIENTS, every, Fraction(0), scope=replicated),)
        if not sharded:  # the second half of data parallelism's all-reduce: every card gets every sum
            return (InFlight(Collective.ALL_GATHER, Band.GRADIENTS, every, Fraction(0), scope=replicated),)
    if part is Part.GRADIENT_SYNC and index == FIRST_SYNC + 1 and sharded and run.replicas > 1:
        # Hybrid sharding: each shard group reduced its own gradients; the replicas sum their slices.
        return (InFlight(Collective.ALL_REDUCE, Band.GRADIENTS, every, Fraction(0), scope=Scope.REPLICAS),)
    if part is Part.WEIGHT_SYNC and Band.MASTER in sharded and Band.WEIGHTS not in sharded:
        return (InFlight(Collective.ALL_GATHER, Band.WEIGHTS, every, Fraction(0)),)
    return ()


def _column_weights(
    run: Run, card: StageCard, whose: Whose, columns: tuple[int, ...], scope: Scope = Scope.GROUP
) -> int:
    """The weights a collective of this kind moves over `columns`: the model's, or with the model cut `card`'s.

    A cut card's own (`wire.moved_params`) are spread over the eighths as the model's are, rounded so that
    the eighths sum to them exactly: the step's tally ends at the table's. Where its routed experts go over
    their own group, its experts' (`scope` `Scope.EXPERTS`) and its others' are spread so each.
    """
    eighths = run.moved[whose]
    if not run.cut.cuts:
        return sum(eighths[column] for column in columns)
    own, whole = moved_params(run, whose, card, scope), sum(eighths)
    if not whole:
        return 0
    return sum(own * sum(eighths[: c + 1]) // whole - own * sum(eighths[:c]) // whole for c in columns)


def _volumes(
    stage: Stage, run: Run, moves: tuple[InFlight, ...], card: StageCard, per_step: dict[MoveKey, int]
) -> tuple[InFlight, ...]:
    """The collectives with their volumes: the weights of their columns each moves, in units of P, and bytes.

    Summed over the step they are the table's traffic (`sizing.communication_p`, `wire.link_bytes`): of the
    most loaded card's weights with the model cut, each ZeRO-3 collective once a micro-batch (`per_step`); a
    collective that moves nothing (a frozen column's gradients) is left out. Where the card's routed experts go
    over their expert-data-parallel group (`wire.experts_apart`), a collective's bytes are its others' over the
    shard group and its experts' over theirs, each by its own links: the table's two lines in one.
    """
    kept = []
    whole = card.params if run.cut.cuts else run.params
    scopes = (Scope.GROUP, Scope.EXPERTS) if experts_apart(run, card) else (Scope.GROUP,)
    for move in moves:
        parts = [
            (move.scope if scope is Scope.GROUP else scope, _column_weights(run, card, move.whose, move.columns, scope))
            for scope in scopes
        ]
        weights = sum(part for _, part in parts)
        if weights:
            times = per_step.get((move.collective, move.band, move.whose), 1)
            inside = between = Fraction(0)
            for scope, part in parts:
                as_transfer = Transfer(move.collective, move.band, "", whose=move.whose, scope=scope, per_step=times)
                _, part_inside, part_between = split(as_transfer, part, stage, run)
                inside, between = inside + part_inside, between + part_between
            volume = Fraction(weights * times, whole)
            if move.scope is Scope.REPLICAS and move.collective is Collective.ALL_REDUCE:
                volume *= Fraction(2, run.shards)  # each card's slice, both halves of the all-reduce
            kept.append(replace(move, volume_p=volume, inside=inside, between=between))
    return tuple(kept)


def _moment(stage: Stage, run: Run, columns: tuple[ColumnMoments, ...], part: Part, column: int | None) -> Moment:
    """The card's moment in a phase: the highest of the column's layers in that pass, else at rest.

    `columns` are the most loaded card's (`StageCard.columns`): its own layers, with the pipeline's other
    micro-batches in flight and, under Megatron's accounting, its activations. A backward phase over a column
    the backward pass does not reach (or another pipeline stage's) holds nothing for it.
    """
    if column is None or part not in (Part.FORWARD, Part.BACKWARD):
        return AT_REST
    moments = columns[column]
    choices = moments.forward if part is Part.FORWARD else moments.backward
    return max(choices, key=lambda m: layer_extra(stage, run, m).total, default=AT_REST)


def kept_after_forward(columns: tuple[ColumnMoments, ...]) -> tuple[int, ...]:
    """The activations a card keeps when the forward pass leaves each column: its last layer's stack."""
    kept: list[int] = []
    for column in columns:
        kept.append(max((m.activation for m in column.forward), default=kept[-1] if kept else 0))
    return tuple(kept)


def _beat_extra(
    stage: Stage, run: Run, at: tuple[Part, int | None, Beat | None], moment: Moment, kept: tuple[int, ...]
) -> LayerExtra:
    """What a card holds beyond its state in one beat of a pass column (in hand: the compute's, `moment`).

    The activations kept when a forward column ends are those of its last layer (`kept_after_forward`); a
    backward column starts with them and ends with those of the column before it. The gather holds the
    layer's weights and the activations as the column begins, never more than the compute (the highest
    moment, which may be a later layer's); the discard, what is left between layers: the activations, and
    a term that lasts the pass (FSDP2's ZeRO-2 keeps the whole model gathered).
    """
    part, column, beat = at
    in_hand = layer_extra(stage, run, moment)
    if column is None or beat is Beat.COMPUTE or (part is Part.BACKWARD and moment is AT_REST):
        return in_hand
    earlier = kept[column - 1] if column else 0
    forward = part is Part.FORWARD
    entering, leaving = (earlier, kept[column]) if forward else (kept[column], earlier)
    which = Pass.FORWARD if forward else Pass.BACKWARD
    if beat is Beat.DISCARD:
        return layer_extra(stage, run, Moment(which, None, leaving))
    gathered = layer_extra(stage, run, Moment(which, moment.layer, entering, trained=0))
    return gathered if gathered.total <= in_hand.total else in_hand


def _host_moves(host: HostReport, fetched: bool, part: Part, beat: Beat | None, index: int) -> tuple[HostMove, ...]:
    """PCIe in a phase: gradients down after the backward, weights up after the CPU's update.

    With the weights on the host, each pass's gathers fetch them instead: a card's slice twice a
    step, drawn as an equal share in each of the 16 pass columns' gathers (averaged over the cards).
    """
    if index == FIRST_SYNC + 1 and host.gradients_down:
        return (HostMove(Band.GRADIENTS, True, host.gradients_down),)
    if part in (Part.FORWARD, Part.BACKWARD) and beat is Beat.GATHER and fetched and host.weights_up:
        first = (index - 1) // len(BEATS)
        share = host.weights_up * (first + 1) // (2 * COLUMNS) - host.weights_up * first // (2 * COLUMNS)
        return (HostMove(Band.WEIGHTS, False, share),)
    if part is Part.WEIGHT_SYNC and not fetched and host.weights_up:
        return (HostMove(Band.WEIGHTS, False, host.weights_up),)
    return ()


def step(stage: Stage, run: Run, columns: tuple[Column, ...], row: StageReport | None = None) -> tuple[Phase, ...]:
    """Every phase of one training step of `run` under a stage, with its running traffic tally.

    `row`, the stage's report when the caller has it, gives the state at rest, the overheads and the
    host, so that they are not worked out again.
    """
    if len(columns) != COLUMNS:
        raise ValueError(f"a step walks across {COLUMNS} columns")
    sharded = stage.sharded if run.shards > 1 else frozenset()
    if row is None:
        state = per_gpu_bytes(stage, run.params, run.shards, run.recipe, run.frozen, run.setup)
        overhead, host = counted_overhead_bytes(stage, run), host_report(stage, run)
    else:
        state, overhead, host = row.per_gpu_bytes, row.overhead_bytes, row.host
    phases: list[Phase] = []
    tally = inside = between = Fraction(0)
    # The scopes are the step's own collectives' (`Run.transfers`): the shard group's, hpZ's, the replicas'.
    step_transfers = row.transfers if row else run.transfers(stage)
    # The routed experts' own collectives (`Scope.EXPERTS`) ride with the others' in each phase (`_volumes`).
    scopes: Scopes = {(t.collective, t.band, t.whose): t.scope for t in step_transfers if t.scope is not Scope.EXPERTS}
    per_step = {(t.collective, t.band, t.whose): t.per_step for t in step_transfers}
    pcie = 0
    on_host = run.on_host(stage)
    highest = 0
    # The most loaded card's step: its own layers' moments, whose highest is the table's peak.
    card = loaded_card(stage, run)
    card_columns = card.columns
    kept = kept_after_forward(card_columns)
    for index in range(PHASES):
        at = _part(index)
        part, column, beat = at
        # Data parallelism on one card still has nobody to all-reduce with (nor a card alone in its ZeRO group).
        moving = _transfers(stage, sharded, index, at, run, scopes) if run.zero_group > 1 else ()
        transfers = _volumes(stage, run, moving, card, per_step)
        tally += sum((t.volume_p for t in transfers), start=Fraction(0))
        inside += sum((t.inside for t in transfers), start=Fraction(0))
        between += sum((t.between for t in transfers), start=Fraction(0))
        moment = _moment(stage, run, card_columns, part, column)
        extra = _beat_extra(stage, run, at, moment, kept)
        frozen = column is not None and run.frozen_column(column)
        # Reached is the model's: the backward reaches another stage's column, on that stage's cards.
        reached = part is not Part.BACKWARD or column is None or bool(run.column_moments[column].backward)
        moves = _host_moves(host, Band.WEIGHTS in on_host, part, beat, index) if on_host else ()
        pcie += sum(move.nbytes for move in moves)
        highest = max(highest, state + extra.total + overhead)
        phases.append(
            Phase(
                stage,
                run.gpus,
                index,
                part,
                column,
                transfers,
                tally,
                state,
                extra,
                overhead,
                frozen,
                moves,
                pcie,
                on_host,
                highest,
                reached,
                moment.trained if moment.layer is not None else None,
                (run.moved[Whose.TRAINED][column], run.moved[Whose.EVERY][column]) if column is not None else (0, 0),
                part is Part.BACKWARD
                and column is not None
                and column > 0
                and not run.column_moments[column - 1].backward,
                not run.frozen,
                run.shards,
                inside,
                between,
                beat,
                run.cut.cuts,
            )
        )
    return tuple(phases)


def peak_so_far(phases: tuple[Phase, ...], index: int) -> int:
    """The highest live bytes from the start of the step to phase `index`."""
    return phases[index].peak_bytes_so_far
