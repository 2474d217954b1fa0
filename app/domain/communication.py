"""What each arrangement sends between cards in one training step, in units of P.

P is the number of weights. A ring reduce-scatter or all-gather moves about P values through
every card, so each collective below counts as P; the seed text counts the same way.

Where weights are frozen, a collective moves only the weights it needs (`Whose`): gradients exist for
the weights that train, and ZeRO-1 and ZeRO-2 all-gather only what the update changed (DeepSpeed's
stage 1 and 2 flatten and partition only the optimized parameters); ZeRO-3 gathers every weight for the
forward pass, frozen or not, and for the backward those the backward pass reaches.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction

from app.domain.recipes import Band
from app.domain.stages import Stage


class Whose(StrEnum):
    """Which weights a collective moves."""

    EVERY = "every weight"
    TRAINED = "the weights that train"
    REACHED = "the weights the backward pass reaches"
    """From the first layer that trains to the last: autograd goes no further back."""


class Collective(StrEnum):
    """The two halves of an all-reduce, which ZeRO is built from, and the all-reduce between replicas."""

    REDUCE_SCATTER = "reduce-scatter"
    ALL_GATHER = "all-gather"
    ALL_REDUCE = "all-reduce"


class Scope(StrEnum):
    """Which cards a collective runs over (`wire.span` says how many, in how many nodes)."""

    GROUP = "the shard group"
    """The cards a state is split across: all of them, or a hybrid run's shard group."""
    REPLICAS = "the replicas"
    """Hybrid sharding's: one card of each shard group, the cards that keep the same slice."""
    SECONDARY = "hpZ's group"
    """ZeRO++'s hpZ: the cards of the secondary partition, a node's (or whole nodes, which then gather between them)."""
    EXPERTS = "the expert-data-parallel group"
    """A mixture of experts' routed experts with ep × etp ≠ tp: gpus ÷ (pp × ep × etp) cards, ep × etp ranks apart
    (Megatron-LM's expert data-parallel group, DeepSpeed-MoE's), where their gradients are reduced and weights
    gathered; the card's other weights go over the shard group."""


@dataclass(frozen=True)
class Transfer:
    """One collective of one band, in one part of the step."""

    collective: Collective
    band: Band
    when: str
    volume_p: Fraction = Fraction(1)
    """The weights it moves through each card, in units of P, counting each collective over a group as P."""
    whose: Whose = Whose.TRAINED
    scope: Scope = Scope.GROUP
    per_step: int = 1
    """How many times a step runs it: ZeRO-3's passes once a micro-batch (`volume_p` counts them all)."""
    others: bool = False
    """It moves the card's weights outside the routed experts, whose own collective runs over `Scope.EXPERTS`."""

    @property
    def description(self) -> str:
        """E.g. 'all-gather of the weights in the forward pass'."""
        again = f", once in each of the {self.per_step:,} micro-batches" if self.per_step > 1 else ""
        if self.scope is Scope.EXPERTS:
            return f"{self.collective} of the routed experts' {self.band} {self.when}{again}, over {self.scope}"
        outside = " outside the routed experts" if self.others else ""
        return f"{self.collective} of the {self.band}{outside} {self.when}{again}"


_GRADIENT_REDUCE_SCATTER = Transfer(Collective.REDUCE_SCATTER, Band.GRADIENTS, "after the backward pass")
# Stages 2 and 3 keep only their own slice of the gradients, so they send each layer's as soon as it is made.
_LAYERWISE_REDUCE_SCATTER = Transfer(
    Collective.REDUCE_SCATTER, Band.GRADIENTS, "layer by layer during the backward pass"
)

_TRANSFERS: dict[Stage, tuple[Transfer, ...]] = {
    # Data parallelism's all-reduce, written as the two phases it is made of.
    Stage.DP: (
        _GRADIENT_REDUCE_SCATTER,
        Transfer(Collective.ALL_GATHER, Band.GRADIENTS, "to finish the all-reduce"),
    ),
    # Stages 1 and 2 run the same two phases, keep the reduced slice, and gather weights instead.
    Stage.ZERO1: (
        _GRADIENT_REDUCE_SCATTER,
        Transfer(Collective.ALL_GATHER, Band.WEIGHTS, "after the update"),
    ),
    Stage.ZERO2: (
        _LAYERWISE_REDUCE_SCATTER,
        Transfer(Collective.ALL_GATHER, Band.WEIGHTS, "after the update"),
    ),
    # Stage 3 keeps no whole copy of the weights, so it gathers them for each pass instead.
    Stage.ZERO3: (
        Transfer(Collective.ALL_GATHER, Band.WEIGHTS, "in the forward pass", whose=Whose.EVERY),
        Transfer(Collective.ALL_GATHER, Band.WEIGHTS, "in the backward pass", whose=Whose.REACHED),
        _LAYERWISE_REDUCE_SCATTER,
    ),
}


def transfers(
    stage: Stage, gpus: int = 8, shards: int | None = None, hpz: int = 1, microbatches: int = 1
) -> tuple[Transfer, ...]:
    """The collectives one training step runs under this stage; none on a single card.

    `shards` is a hybrid run's shard group (None: every card): its gathers and reduce-scatters stay in
    the group, and each gradient slice is then all-reduced across the replicas, 2P/S. `hpz` is ZeRO++'s
    secondary partition: ZeRO-3's backward gathers from it, inside the node. With `microbatches` above 1,
    ZeRO-3 runs its gathers and its reduce-scatter in each micro-batch (docs/wire.md).
    """
    # One card has nothing to reduce with and nobody to gather from: every stage is data parallelism.
    if gpus == 1:
        return ()
    shards = gpus if shards is None else shards
    if stage is Stage.DP or shards == 1:  # nothing split: data parallelism's all-reduce over every card
        scope = Scope.GROUP if stage is Stage.DP or shards == gpus else Scope.REPLICAS
        return tuple(replace(t, scope=scope) for t in _TRANSFERS[Stage.DP])
    moves = _TRANSFERS[stage]
    if hpz > 1 and stage is Stage.ZERO3:
        moves = tuple(replace(t, scope=Scope.SECONDARY) if t.whose is Whose.REACHED else t for t in moves)
    if microbatches > 1 and stage is Stage.ZERO3:
        # It frees the gathered weights after each pass (FSDP2's reshard_after_forward, DeepSpeed's stage 3) and
        # keeps only its gradients' slice, so each micro-batch gathers again and reduce-scatters its own.
        moves = tuple(replace(t, per_step=microbatches, volume_p=t.volume_p * microbatches) for t in moves)
    if shards < gpus:
        replicas = Transfer(
            Collective.ALL_REDUCE,
            Band.GRADIENTS,
            "of each card's gradient slice across the replicas",
            volume_p=Fraction(2, shards),
            scope=Scope.REPLICAS,
        )
        moves = (*moves, replicas)
    return moves


def communication_p(stage: Stage, gpus: int = 8, shards: int | None = None) -> Fraction:
    """Total traffic of one step, in units of P: 2 for DP, ZeRO-1 and ZeRO-2; 3 for ZeRO-3; 0 on one card."""
    return sum((transfer.volume_p for transfer in transfers(stage, gpus, shards)), start=Fraction(0))
