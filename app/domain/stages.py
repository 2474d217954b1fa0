"""The four arrangements: plain data parallelism and ZeRO stages 1, 2 and 3."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.domain.bands import Band


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
        """Names and a plain-words explanation, for people."""
        return _INFO[self]


@dataclass(frozen=True)
class StageInfo:
    """What a student reads about one stage."""

    title: str
    summary: str
    explanation: str


# Each stage shards everything the previous one did, plus one more class of state.
_SHARDED: dict[Stage, frozenset[Band]] = {
    Stage.DP: frozenset(),
    Stage.ZERO1: frozenset({Band.MASTER, Band.MOMENTS}),
    Stage.ZERO2: frozenset({Band.MASTER, Band.MOMENTS, Band.GRADIENTS}),
    Stage.ZERO3: frozenset(Band),
}

_INFO: dict[Stage, StageInfo] = {
    Stage.DP: StageInfo(
        title="Data parallelism",
        summary="Every card keeps everything.",
        explanation=(
            "Every card holds a full copy of all four bands for every weight. After the backward "
            "pass the cards all-reduce their gradients, then each one applies the same update and "
            "gets the same answer. The copies are identical, so most of this memory stores "
            "nothing new."
        ),
    ),
    Stage.ZERO1: StageInfo(
        title="ZeRO-1",
        summary="Split the optimizer state.",
        explanation=(
            "The optimizer state (the fp32 master copy and Adam's two moments, 12 of the 16 bytes) "
            "is split: each card keeps it only for the slice of weights it is responsible for and "
            "updates only that slice. The updated weights are then all-gathered so every card has "
            "the current weights for the next forward pass."
        ),
    ),
    Stage.ZERO2: StageInfo(
        title="ZeRO-2",
        summary="Split the gradients as well.",
        explanation=(
            "A card only needs the gradients of the slice it updates. The gradients are "
            "reduce-scattered: each card receives the summed gradients for its own slice and drops "
            "the others as soon as they have been sent where they are needed. The traffic is the "
            "same as data parallelism's, because an all-reduce is a reduce-scatter plus an "
            "all-gather."
        ),
    ),
    Stage.ZERO3: StageInfo(
        title="ZeRO-3",
        summary="Split the weights themselves.",
        explanation=(
            "Each card stores only its slice of the model. When the forward or backward pass "
            "reaches a layer, the cards all-gather that layer's weights, use them and discard them "
            "again. A card holds its slice plus one assembled layer, so the largest single layer "
            "must still fit on one card. The extra all-gathers raise the traffic from 2P to 3P."
        ),
    ),
}
