"""The four arrangements: plain data parallelism and ZeRO stages 1, 2 and 3."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from app.domain.recipes import Band, Recipe, bytes_a_weight


class Stage(StrEnum):
    """An arrangement of training state across cards."""

    DP = "dp"
    ZERO1 = "zero1"
    ZERO2 = "zero2"
    ZERO3 = "zero3"

    @property
    def sharded(self) -> frozenset[Band]:
        """The bands this stage splits across cards; the rest every card keeps whole."""
        return _SHARDED[self]

    @property
    def info(self) -> StageInfo:
        """The stage's names, for people."""
        return _INFO[self]


@dataclass(frozen=True)
class StageInfo:
    """What a student reads about one stage."""

    title: str
    summary: str


# Each stage shards everything the previous one did, plus one more class of state.
_SHARDED: dict[Stage, frozenset[Band]] = {
    Stage.DP: frozenset(),
    Stage.ZERO1: frozenset({Band.MASTER, Band.MOMENTS}),
    Stage.ZERO2: frozenset({Band.MASTER, Band.MOMENTS, Band.GRADIENTS}),
    Stage.ZERO3: frozenset(Band),
}

_INFO: dict[Stage, StageInfo] = {
    Stage.DP: StageInfo("Data parallelism", "Every card keeps everything."),
    Stage.ZERO1: StageInfo("ZeRO-1", "Split the optimizer state."),
    Stage.ZERO2: StageInfo("ZeRO-2", "Split the gradients as well."),
    Stage.ZERO3: StageInfo("ZeRO-3", "Split the weights themselves."),
}

OPTIMIZER_STATE = (Band.MASTER, Band.MOMENTS)


def stage_explanation(stage: Stage, recipe: Recipe, gpus: int) -> str:
    """What a stage does, in plain words, for this recipe and number of cards."""
    if gpus == 1:
        return (
            "With one card there is no other card to share with: every stage keeps everything, as data "
            "parallelism does, and nothing moves between cards."
        )
    optimizer = recipe.phrase(OPTIMIZER_STATE)
    k = bytes_a_weight(sum((recipe.nbytes(band) for band in OPTIMIZER_STATE), Fraction(0)))
    if stage is Stage.DP:
        return (
            "Every card holds a full copy of all the bands for every weight. After the backward pass the "
            "cards all-reduce their gradients, then each one applies the same update and gets the same "
            "answer. The copies are identical, so most of this memory stores nothing new."
        )
    if stage is Stage.ZERO1:
        return (
            f"The optimizer state ({optimizer}, {k} of the {bytes_a_weight(recipe.total)} bytes) is split: each card "
            "keeps it only for the slice of weights it is responsible for and updates only that slice. The updated "
            "weights are then all-gathered so every card has the current weights for the next forward pass."
        )
    if stage is Stage.ZERO2:
        return (
            "A card only needs the gradients of the slice it updates. During the backward pass each layer's "
            "gradients are reduce-scattered as soon as they are computed: each card receives the summed "
            "gradients for its own slice and drops the rest. The traffic is the same as data "
            "parallelism's, because an all-reduce is a reduce-scatter plus an all-gather."
        )
    return (
        "Each card stores only its slice of the model. When the forward or backward pass reaches a layer, "
        "the cards all-gather that layer's weights, use them and discard them again. A card holds its slice "
        "plus one assembled layer, so the largest single layer must still fit on one card. The extra "
        "all-gathers raise the traffic from 2P to 3P."
    )


def across_nodes(stage: Stage, gpus: int, shards: int) -> str:
    """What hybrid sharding adds to a stage's explanation; blank where it does not apply (ZeRO++: `zeropp`)."""
    if not stage.sharded or gpus == 1 or shards == gpus:
        return ""
    return (
        f"Hybrid sharding: each shard group of {shards:,} cards splits the state as above, and each of the "
        f"{gpus // shards:,} groups keeps a whole copy. The gathers and reduce-scatters stay inside a group; "
        f"only each gradient slice is all-reduced across the groups, 2P/{shards:,} more."
    )
