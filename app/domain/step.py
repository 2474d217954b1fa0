"""One training step, phase by phase: what each card holds, what moves, and what it costs.

The grid's weights are the model's layers, in order, one layer per card: card i is responsible
for layer i. A step is 21 phases for every stage, so a phase number means the same moment
whichever arrangement is shown:

  0        the step begins, state at rest
  1 - 8    forward, layer 1 to layer 8
  9 - 16   backward, layer 8 to layer 1
  17, 18   gradient synchronisation (data parallelism's all-reduce is both halves)
  19       optimizer update
  20       weight synchronisation, where the stage needs it
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from app.domain.bands import MIXED_ADAM, Band, Recipe
from app.domain.communication import Collective
from app.domain.sharding import CellState
from app.domain.stages import Stage

LAYERS = 8
PHASES = 1 + 2 * LAYERS + 4
LAST_PHASE = PHASES - 1


class Part(StrEnum):
    """Which part of the step a phase belongs to."""

    START = "start"
    FORWARD = "forward"
    BACKWARD = "backward"
    GRADIENT_SYNC = "gradient-sync"
    UPDATE = "update"
    WEIGHT_SYNC = "weight-sync"


class Holding(StrEnum):
    """A cell during the step: kept, present only for now, or held elsewhere."""

    HELD = "held"
    GATHERED = "gathered"
    DASHED = "dashed"

    @property
    def state(self) -> CellState:
        """The grid's solid or dashed: a gathered cell is on the card, for now."""
        return CellState.DASHED if self is Holding.DASHED else CellState.SOLID


@dataclass(frozen=True)
class InFlight:
    """A collective in flight during a phase: what moves, whose layers, and how much, in units of P."""

    collective: Collective
    band: Band
    layers: tuple[int, ...]
    volume_p: Fraction

    @property
    def description(self) -> str:
        """E.g. 'all-gather of layer 3's weights'."""
        if len(self.layers) == 1:
            return f"{self.collective} of layer {self.layers[0] + 1}'s {self.band}"
        return f"{self.collective} of every layer's {self.band}"


@dataclass(frozen=True)
class Phase:
    """One moment of the step under one stage."""

    stage: Stage
    index: int
    part: Part
    layer: int | None
    transfers: tuple[InFlight, ...]
    active: frozenset[tuple[int, Band]]
    """The (layer, band) cells this phase works on."""
    holdings: tuple[tuple[tuple[Holding, ...], ...], ...]
    """holdings[card][layer][band], bands in Band order."""
    tally_p: Fraction
    """Traffic so far this step, this phase included, in units of P."""

    def holding(self, card: int, layer: int, band: Band) -> Holding:
        """What one card has of one band of one layer during this phase."""
        return self.holdings[card][layer][_BANDS.index(band)]

    @property
    def title(self) -> str:
        """A heading for the phase."""
        return _title(self)


_BANDS = tuple(Band)


def _at_rest(stage: Stage, card: int, layer: int, band: Band) -> Holding:
    return Holding.HELD if band not in stage.sharded or card == layer else Holding.DASHED


def _part(index: int) -> tuple[Part, int | None]:
    if index == 0:
        return Part.START, None
    if index <= LAYERS:
        return Part.FORWARD, index - 1
    if index <= 2 * LAYERS:
        return Part.BACKWARD, 2 * LAYERS - index
    return {
        2 * LAYERS + 1: (Part.GRADIENT_SYNC, None),
        2 * LAYERS + 2: (Part.GRADIENT_SYNC, None),
        2 * LAYERS + 3: (Part.UPDATE, None),
        2 * LAYERS + 4: (Part.WEIGHT_SYNC, None),
    }[index]


def _transfers(stage: Stage, index: int, part: Part, layer: int | None) -> tuple[InFlight, ...]:
    every = tuple(range(LAYERS))
    slice_p = Fraction(1, LAYERS)
    sharded = stage.sharded
    if part is Part.FORWARD and layer is not None and Band.WEIGHTS in sharded:
        return (InFlight(Collective.ALL_GATHER, Band.WEIGHTS, (layer,), slice_p),)
    if part is Part.BACKWARD and layer is not None:
        moves: list[InFlight] = []
        if Band.WEIGHTS in sharded:  # ZeRO-3 gathers the layer again to compute its gradients
            moves.append(InFlight(Collective.ALL_GATHER, Band.WEIGHTS, (layer,), slice_p))
        if Band.GRADIENTS in sharded:  # ZeRO-2 and -3 send each layer's gradients to their owner at once
            moves.append(InFlight(Collective.REDUCE_SCATTER, Band.GRADIENTS, (layer,), slice_p))
        return tuple(moves)
    if part is Part.GRADIENT_SYNC and Band.GRADIENTS not in sharded:
        if index == 2 * LAYERS + 1:
            return (InFlight(Collective.REDUCE_SCATTER, Band.GRADIENTS, every, Fraction(1)),)
        if stage is Stage.DP:  # the second half of the all-reduce: every card gets every sum
            return (InFlight(Collective.ALL_GATHER, Band.GRADIENTS, every, Fraction(1)),)
    if part is Part.WEIGHT_SYNC and Band.MASTER in sharded and Band.WEIGHTS not in sharded:
        return (InFlight(Collective.ALL_GATHER, Band.WEIGHTS, every, Fraction(1)),)
    return ()


def _active(part: Part, layer: int | None) -> frozenset[tuple[int, Band]]:
    every = range(LAYERS)
    if part is Part.FORWARD and layer is not None:
        return frozenset({(layer, Band.WEIGHTS)})
    if part is Part.BACKWARD and layer is not None:
        return frozenset({(layer, Band.WEIGHTS), (layer, Band.GRADIENTS)})
    if part is Part.GRADIENT_SYNC:
        return frozenset((layer_, Band.GRADIENTS) for layer_ in every)
    if part is Part.UPDATE:
        return frozenset((layer_, band) for layer_ in every for band in (Band.WEIGHTS, Band.MASTER, Band.MOMENTS))
    if part is Part.WEIGHT_SYNC:
        return frozenset((layer_, Band.WEIGHTS) for layer_ in every)
    return frozenset()


def _holding(stage: Stage, part: Part, layer: int | None, card: int, layer_: int, band: Band) -> Holding:
    rest = _at_rest(stage, card, layer_, band)
    if rest is Holding.HELD or layer_ != layer:
        return rest
    # Another card's layer, present on this card only while it is being used.
    if part is Part.FORWARD and band is Band.WEIGHTS:
        return Holding.GATHERED
    if part is Part.BACKWARD and band in (Band.WEIGHTS, Band.GRADIENTS):
        return Holding.GATHERED
    return rest


def step(stage: Stage) -> tuple[Phase, ...]:
    """Every phase of one training step under a stage, with its running traffic tally."""
    phases: list[Phase] = []
    tally = Fraction(0)
    for index in range(PHASES):
        part, layer = _part(index)
        transfers = _transfers(stage, index, part, layer)
        tally += sum((t.volume_p for t in transfers), start=Fraction(0))
        holdings = tuple(
            tuple(tuple(_holding(stage, part, layer, card, layer_, band) for band in Band) for layer_ in range(LAYERS))
            for card in range(LAYERS)
        )
        phases.append(Phase(stage, index, part, layer, transfers, _active(part, layer), holdings, tally))
    return tuple(phases)


def live_table(phases: tuple[Phase, ...], params: int, recipe: Recipe = MIXED_ADAM) -> tuple[tuple[Fraction, ...], ...]:
    """Every card's live bytes at every phase: table[phase][card]."""
    return tuple(tuple(live_bytes(phase, card, params, recipe) for card in range(LAYERS)) for phase in phases)


def peak_so_far(table: tuple[tuple[Fraction, ...], ...], index: int) -> tuple[Fraction, ...]:
    """Each card's highest live bytes from the start of the step to phase `index`."""
    return tuple(max(row[card] for row in table[: index + 1]) for card in range(LAYERS))


def live_bytes(phase: Phase, card: int, params: int, recipe: Recipe = MIXED_ADAM) -> Fraction:
    """What one card holds during a phase: kept and gathered cells, each layer P/8 weights."""
    per_layer = Fraction(params, LAYERS)
    return sum(
        (
            recipe.nbytes(band) * per_layer
            for layer in range(LAYERS)
            for band in Band
            if phase.holding(card, layer, band) is not Holding.DASHED
        ),
        start=Fraction(0),
    )


def _title(phase: Phase) -> str:
    layer = None if phase.layer is None else phase.layer + 1
    return {
        Part.START: "The step begins: state at rest",
        Part.FORWARD: f"Forward pass, layer {layer}",
        Part.BACKWARD: f"Backward pass, layer {layer}",
        Part.GRADIENT_SYNC: "Gradient synchronisation",
        Part.UPDATE: "Optimizer update",
        Part.WEIGHT_SYNC: "Weight synchronisation",
    }[phase.part]


def explanation(phase: Phase) -> str:
    """What happens in this phase, in words for students."""
    stage, part = phase.stage, phase.part
    owner = None if phase.layer is None else f"GPU {phase.layer}"
    k = None if phase.layer is None else phase.layer + 1
    sharded = stage.sharded
    if part is Part.START:
        return "Every card holds its state at rest: the picture without the step."
    if part is Part.FORWARD:
        if Band.WEIGHTS in sharded:
            return (
                f"The cards all-gather layer {k}'s weights from {owner}, which keeps them, use them on "
                "their own batch, and discard them at once."
            )
        return f"Each card runs layer {k} on its own batch with its own copy of the weights. Nothing moves."
    if part is Part.BACKWARD:
        if Band.WEIGHTS in sharded:
            return (
                f"The cards gather layer {k}'s weights again, compute its gradients, reduce-scatter them to "
                f"{owner} and discard both."
            )
        if Band.GRADIENTS in sharded:
            return (
                f"Each card computes layer {k}'s gradients and reduce-scatters them at once: {owner} receives "
                "the sum, the others drop theirs."
            )
        return f"Each card computes layer {k}'s gradients into its full gradient buffer. Nothing moves yet."
    if part is Part.GRADIENT_SYNC:
        first = phase.index == 2 * LAYERS + 1
        if Band.GRADIENTS in sharded:
            return "Nothing to do: each layer's gradients were reduce-scattered during the backward pass."
        if stage is Stage.DP:
            if first:
                return "All-reduce, first half: a reduce-scatter leaves each card the summed gradients of one slice."
            return "All-reduce, second half: an all-gather gives every card every summed gradient."
        if first:
            return "A reduce-scatter gives each card the summed gradients of the layer it updates."
        return "Nothing more to do: each card has the gradients it needs."
    if part is Part.UPDATE:
        if stage is Stage.DP:
            return "Every card applies the same update to every weight: eight cards repeating one job."
        return "Each card updates only its own layer: the fp32 master copy and moments, then its bf16 weights."
    if Band.MASTER in sharded and Band.WEIGHTS not in sharded:
        return "An all-gather sends each card's updated weights to every card: the whole model, everywhere, again."
    if stage is Stage.DP:
        return "Nothing to do: every card already computed the same new weights."
    return "Nothing to do: each card keeps only its own layer, which it has just updated."
