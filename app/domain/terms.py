"""What sits on one card: a list of terms, each with a size law, a place and the stages that split it.

Every figure of memory the app shows is a sum of these terms at some moment of the step:

- the four bands of model state are per-weight terms, split N ways by the stages that shard them;
- what a card holds for the layer in hand (ZeRO-3's gathered weights, ZeRO-2 and 3's gradients
  before their reduce-scatter) are per-layer terms, there only while that layer is worked on.

A new kind of state (activations, a fixed overhead, state offloaded to the CPU) is one more term:
see docs/architecture.md for the walk-through. The fit test is `card_bytes` at the highest moment
of the step (`peak_bytes`), the one function behind the verdict, the largest model that fits, the
step and the API.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from functools import lru_cache

from app.domain.recipes import Band, Recipe
from app.domain.stages import Stage


class Law(StrEnum):
    """What a term's size grows with."""

    PER_WEIGHT = "per weight"
    """Bytes for every weight of the model (or of a card's slice of it, where split)."""
    PER_LAYER = "per layer in hand"
    """Bytes for every weight of the layer a card is working on, while it works on it."""
    PER_TOKEN = "per token"
    """The micro-batch's activations: the bytes its tokens keep at the moment, which the moment carries."""
    FIXED = "fixed"
    """Bytes per process, whatever the model."""


class Place(StrEnum):
    """Where a term's bytes live."""

    GPU = "gpu"
    CPU_PINNED = "cpu-pinned"
    CPU_PAGEABLE = "cpu-pageable"
    NVME = "nvme"


class Pass(StrEnum):
    """Which part of the step a moment is in, as far as memory is concerned."""

    REST = "rest"
    FORWARD = "forward"
    BACKWARD = "backward"


@dataclass(frozen=True)
class Moment:
    """A moment of the step: at rest, or working on a layer of `layer` weights in a pass."""

    part: Pass = Pass.REST
    layer: int | None = None
    """Weights of the layer in hand; None at rest, or when the layer's size is unknown."""
    activation: int = 0
    """Bytes of activations the micro-batch keeps at this moment (`layers.column_moments`)."""
    trained: int | None = None
    """Of the layer in hand's weights, those that train: its backward computes their gradients.
    None: all of them."""


AT_REST = Moment()
ALL_PASSES = frozenset(Pass)


@dataclass(frozen=True)
class Term:
    """One kind of state on a card."""

    name: str
    law: Law
    nbytes: Fraction | int
    """Bytes per unit of its law (per weight, per weight of the layer, per token, or in all): a band's
    may be a fraction (a blockwise format's constants spread over its weights); `term_bytes` is whole."""
    split_by: frozenset[Stage] = frozenset()
    """Stages that split it across the cards (a per-weight term); each card then keeps a padded 1/N."""
    under: frozenset[Stage] = frozenset(Stage)
    """Stages under which the term is there at all."""
    during: frozenset[Pass] = ALL_PASSES
    """The parts of the step during which it is there."""
    place: Place = Place.GPU
    band: Band | None = None
    """The band of state it is, for the four bands of model state."""
    trains: bool = False
    """Only trainable weights have it (gradients, master copy, moments); a frozen weight does not."""
    one_card: bool = False
    """A per-layer term allocated even on one card (DeepSpeed's and FSDP2's gather buffers)."""
    group: int | None = None
    """The cards a split term is split across, where not the shard group's (hpZ's secondary partition)."""


def shard_weights(params: int, gpus: int) -> int:
    """Weights in one card's slice of a split term: P/N, rounded up (the padding)."""
    return -(-params // gpus)


def _stages_splitting(band: Band) -> frozenset[Stage]:
    return frozenset(stage for stage in Stage if band in stage.sharded)


# Pure functions of the recipe, asked for on every figure: built once for each.
@lru_cache(maxsize=64)
def model_state(recipe: Recipe) -> tuple[Term, ...]:
    """The four bands of model state: bytes per weight each, split by the stages that shard them."""
    return tuple(
        Term(
            spec.band.value,
            Law.PER_WEIGHT,
            spec.nbytes,
            split_by=_stages_splitting(spec.band),
            band=spec.band,
            trains=spec.band is not Band.WEIGHTS,
        )
        for spec in recipe.specs
    )


@lru_cache(maxsize=64)
def layer_in_hand(recipe: Recipe) -> tuple[Term, ...]:
    """What a card holds for the layer it works on, beyond its state.

    ZeRO-3 assembles the layer's whole weights, in the forward pass and again in the backward; in the
    backward ZeRO-2 and ZeRO-3 also compute the layer's whole gradients before reduce-scattering them
    to their owners. Data parallelism and ZeRO-1 write into buffers they already keep.
    """
    return (
        Term(
            "gathered",
            Law.PER_LAYER,
            recipe.nbytes(Band.WEIGHTS),
            under=_stages_splitting(Band.WEIGHTS),
            during=frozenset({Pass.FORWARD, Pass.BACKWARD}),
        ),
        Term(
            "computed",
            Law.PER_LAYER,
            recipe.nbytes(Band.GRADIENTS),
            under=_stages_splitting(Band.GRADIENTS),
            during=frozenset({Pass.BACKWARD}),
            trains=True,
        ),
    )


ACTIVATIONS = Term("activations", Law.PER_TOKEN, 1, during=frozenset({Pass.FORWARD, Pass.BACKWARD}))
"""Kept from a layer's forward to its backward, then freed: none at rest or after the backward."""


def term_bytes(term: Term, stage: Stage, params: int, gpus: int, moment: Moment = AT_REST, frozen: int = 0) -> int:
    """Bytes of one term on one card at one moment of the step; `frozen` weights keep no trainable term.

    A count of weights times a band's bytes a weight is rounded up to whole bytes here, the one place
    a fraction meets a count: a blockwise format keeps a whole block's constant for a part block
    (bitsandbytes rounds its blocks up), and a card holds no part of a byte.
    """
    if stage not in term.under or moment.part not in term.during:
        return 0
    if term.law is Law.PER_WEIGHT:
        count = params - frozen if term.trains else params
        return math.ceil(term.nbytes * (shard_weights(count, term.group or gpus) if stage in term.split_by else count))
    if term.law is Law.PER_LAYER:
        # One card has nobody to gather from or send to: its layer is already whole, in its buffers.
        if moment.layer is None or not (gpus > 1 or term.one_card):
            return 0
        # Gradients are computed for the layer's weights that train, and only those.
        return math.ceil(term.nbytes * (moment.trained if term.trains and moment.trained is not None else moment.layer))
    if term.law is Law.PER_TOKEN:
        return math.ceil(term.nbytes * moment.activation)
    return math.ceil(term.nbytes)


def card_bytes(
    stage: Stage,
    params: int,
    gpus: int,
    terms: tuple[Term, ...],
    moment: Moment = AT_REST,
    place: Place = Place.GPU,
    frozen: int = 0,
) -> int:
    """Bytes on one card in `place` at one moment: the sum of its `terms` there (`accounting.terms`)."""
    return sum(term_bytes(t, stage, params, gpus, moment, frozen) for t in terms if t.place is place)


def peak_moment(
    stage: Stage, params: int, gpus: int, terms: tuple[Term, ...], candidates: tuple[Moment, ...], frozen: int = 0
) -> Moment:
    """The highest of a card's moments on its GPU (the first, of equals): where the fit test looks."""
    _, changing = _gpu_terms(terms)
    return max(candidates, key=lambda m: sum(term_bytes(t, stage, params, gpus, m, frozen) for t in changing))


def peak_bytes(
    stage: Stage, params: int, gpus: int, terms: tuple[Term, ...], candidates: tuple[Moment, ...], frozen: int = 0
) -> int:
    """The most a card holds on its GPU during the step, at its highest moment: the fit test's one figure."""
    steady, changing = _gpu_terms(terms)
    base = sum(term_bytes(t, stage, params, gpus, frozen=frozen) for t in steady)
    return base + max(sum(term_bytes(t, stage, params, gpus, m, frozen) for t in changing) for m in candidates)


@lru_cache(maxsize=64)
def _gpu_terms(all_terms: tuple[Term, ...]) -> tuple[tuple[Term, ...], tuple[Term, ...]]:
    """A card's GPU terms: those the same at every moment, and those that change with the moment.

    Those the same are added once: the bisection for the largest model that fits asks for some
    hundred peaks a page.
    """
    terms = [t for t in all_terms if t.place is Place.GPU]
    steady = tuple(t for t in terms if t.during == ALL_PASSES and t.law is not Law.PER_LAYER)
    return steady, tuple(t for t in terms if t.during != ALL_PASSES or t.law is Law.PER_LAYER)
