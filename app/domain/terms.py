"""What sits on one card: a list of terms, each with a size law, a place and the stages that split it.

Every figure of memory the app shows is a sum of these terms at some moment of the step:

- the four bands of model state are per-weight terms, split N ways by the stages that shard them;
- what a card holds for the layer in hand (ZeRO-3's gathered weights, ZeRO-2 and 3's gradients
  before their reduce-scatter) are per-layer terms, there only while that layer is worked on.

Each term is of a `TermKind`, one declaration that says what it is and how every view shows it (its
label, its key entry, its colour's CSS name); a new kind of state is one more member of it and the
terms of that kind: see docs/architecture.md for the walk-through. The fit test is `card_bytes` at the highest moment
of the step (`peak_bytes`), the one function behind the verdict, the largest model that fits, the
step and the API.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum, StrEnum
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
class Look:
    """How every view shows one kind of term: the bar's tooltip, the key's line and the colour's CSS name.

    The colour itself is in static/app.css, under `.bar rect.<css>` (a test holds every kind to one). A band's
    bar and key say its recipe's words instead ("bf16 weights · bf16, 2 B", `TermKind.label`), as its bytes
    and dtype are the recipe's.
    """

    label: str
    """What the bar's stretch is called in its tooltip ("fp32 gradients, DeepSpeed's copy for the update")."""
    css: str
    """The class of its stretch of a bar; the key's swatch is `bar-<css>` (a band's is `<css> solid`)."""
    colour: str
    """The key's name for its colour ("Pale amber"), which the key's line starts with."""
    short: str
    """The key's few words after the colour ("fp32 gradients")."""
    long: str
    """The key's longer words, one click away, after the colour."""
    compact: str | None = None
    """An embed's compact key's words; None: the compact key leaves it out (it keeps to what most runs draw)."""


class TermKind(Enum):
    """What a term is, each said once: its plain noun, its band, where it goes when offloaded, and its `Look`.

    A term of a new kind is drawn and keyed by the views from this declaration alone; the key lists the kinds
    in this order. `OVERHEADS` is no term (a share of the rest, `sizing.overheads`) but is drawn as one.
    """

    noun: str
    """The kind in a sentence, after "the" ("the fp32 gradients")."""
    band: Band | None
    """The band of model state it is, for the four bands (the grid draws them as cells too); None for the rest."""
    moves_with: Band | None
    """Offloaded, it goes where this band goes (`accounting._homed`); None: it stays on the card."""
    in_hand: bool
    """Drawn in the second bar, what a card holds for the layer in hand, rather than the bar at rest."""
    look: Look

    def __init__(self, noun: str, band: Band | None, moves_with: Band | None, in_hand: bool, look: Look) -> None:
        self.noun, self.band, self.moves_with, self.in_hand, self.look = noun, band, moves_with, in_hand, look

    WEIGHTS = (
        "weights",
        Band.WEIGHTS,
        Band.WEIGHTS,
        False,
        Look("weights", "band-weights", "Blue", "weights", "the weights the passes compute with.", "weights"),
    )
    GRADIENTS = (
        "gradients",
        Band.GRADIENTS,
        Band.GRADIENTS,
        False,
        Look(
            "gradients",
            "band-gradients",
            "Orange",
            "gradients",
            "the gradients the backward pass computes.",
            "gradients",
        ),
    )
    MASTER = (
        "master copy",
        Band.MASTER,
        Band.MASTER,
        False,
        Look(
            "master copy",
            "band-master",
            "Bluish green",
            "master copy",
            "the copy of the weights the optimizer updates.",
            "master copy",
        ),
    )
    MOMENTS = (
        "optimizer's moments",
        Band.MOMENTS,
        Band.MOMENTS,
        False,
        Look("moments", "band-moments", "Reddish purple", "moments", "the optimizer's moments.", "moments"),
    )
    FP32_GRADIENTS = (
        "fp32 gradients",
        None,
        Band.MASTER,  # DeepSpeed's fp32 gradients go with the optimizer state
        False,
        Look(
            "fp32 gradients, DeepSpeed's copy for the update",
            "fp32-gradients",
            "Pale amber",
            "fp32 gradients",
            "fp32 gradients, DeepSpeed's copy for the update.",
        ),
    )
    SECONDARY_WEIGHTS = (
        "secondary weights",
        None,
        None,  # hpZ keeps its copy on the card, to gather from inside the node
        False,
        Look(
            "hpZ's second copy of the weights, split inside the node",
            "secondary-weights",
            "Pale blue",
            "hpZ's copy",
            "ZeRO++'s hpZ, a second copy of the weights split across the node's cards.",
        ),
    )
    GATHERED = (
        "gathered",
        None,
        None,  # a working copy on the card, whatever is offloaded (FSDP2's kept ones too)
        True,
        Look(
            "one layer's weights, assembled from their owners",
            "gathered",
            "Grey",
            "gathered weights",
            "one layer's weights, assembled from the cards that own them.",
            "a layer's weights, assembled",
        ),
    )
    COMPUTED = (
        "computed",
        None,
        None,
        True,
        Look(
            "one layer's gradients, computed here before they are reduce-scattered",
            "sent",
            "Dark amber",
            "its gradients",
            "one layer's gradients, computed before the reduce-scatter.",
            "a layer's gradients",
        ),
    )
    ACTIVATIONS = (
        "activations",
        None,
        None,
        True,
        Look(
            "activations kept for the backward pass",
            "activations",
            "Violet",
            "activations",
            "activations, kept from each layer's forward pass for its backward.",
            "activations",
        ),
    )
    OVERHEADS = (
        "overheads",
        None,
        None,
        False,
        Look(
            "overheads: CUDA context, NCCL buffers, buckets and fragmentation",
            "overheads",
            "Hatched",
            "overheads",
            "overheads, kept all through the step (the list under the table says what each is).",
            "overheads",
        ),
    )

    def __repr__(self) -> str:
        # The value is the whole declaration: a failing test's message names the member alone.
        return f"TermKind.{self.name}"

    @classmethod
    def of_band(cls, band: Band) -> TermKind:
        """The kind that is `band` of model state."""
        return _BAND_KINDS[band]

    def label(self, recipe: Recipe) -> str:
        """What a bar calls it: a band as `recipe` names it ("bf16 weights"), else its own label."""
        return recipe.spec(self.band).label if self.band is not None else self.look.label


_BAND_KINDS = {kind.band: kind for kind in TermKind if kind.band is not None}


@dataclass(frozen=True)
class Term:
    """One kind of state on a card."""

    kind: TermKind
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
    trains: bool = False
    """Only trainable weights have it (gradients, master copy, moments); a frozen weight does not."""
    one_card: bool = False
    """A per-layer term allocated even on one card (DeepSpeed's and FSDP2's gather buffers)."""
    group: int | None = None
    """The cards a split term is split across, where not the shard group's (hpZ's secondary partition)."""

    def __post_init__(self) -> None:
        # Most bands are whole bytes a weight: kept as an int, a card's sum is integer arithmetic, some
        # thousand times a page, where a Fraction's costs ten times more (bench.render's never-seen run).
        if isinstance(self.nbytes, Fraction) and self.nbytes.denominator == 1:
            object.__setattr__(self, "nbytes", int(self.nbytes))

    @property
    def band(self) -> Band | None:
        """The band of state it is, for the four bands of model state (its kind's)."""
        return self.kind.band


@dataclass(frozen=True)
class Experts:
    """Of a card's weights, the routed experts': ZeRO shards their state over a group of its own.

    Megatron-LM's distributed optimizer and DeepSpeed-MoE shard the routed experts' state over the
    expert-data-parallel group (`parallel.Cut.edp`), the rest over dp × cp: two slices, each padded.
    """

    weights: int = 0
    """The card's routed-expert weights (its experts ÷ ep × etp), of its `params`."""
    frozen: int = 0
    """Of those, the weights that do not train."""
    group: int = 1
    """The cards their state is sharded over: the expert-data-parallel group."""


NO_EXPERTS = Experts()
"""A card whose experts (if any) shard with the rest: one slice of all its weights."""


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
            TermKind.of_band(spec.band),
            Law.PER_WEIGHT,
            spec.nbytes,
            split_by=_stages_splitting(spec.band),
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
            TermKind.GATHERED,
            Law.PER_LAYER,
            recipe.nbytes(Band.WEIGHTS),
            under=_stages_splitting(Band.WEIGHTS),
            during=frozenset({Pass.FORWARD, Pass.BACKWARD}),
        ),
        Term(
            TermKind.COMPUTED,
            Law.PER_LAYER,
            recipe.nbytes(Band.GRADIENTS),
            under=_stages_splitting(Band.GRADIENTS),
            during=frozenset({Pass.BACKWARD}),
            trains=True,
        ),
    )


ACTIVATIONS = Term(TermKind.ACTIVATIONS, Law.PER_TOKEN, 1, during=frozenset({Pass.FORWARD, Pass.BACKWARD}))
"""Kept from a layer's forward to its backward, then freed: none at rest or after the backward."""


def term_bytes(
    term: Term,
    stage: Stage,
    params: int,
    gpus: int,
    moment: Moment = AT_REST,
    frozen: int = 0,
    experts: Experts = NO_EXPERTS,
) -> int:
    """Bytes of one term on one card at one moment of the step; `frozen` weights keep no trainable term.

    A count of weights times a band's bytes a weight is rounded up to whole bytes here, the one place
    a fraction meets a count: a blockwise format keeps a whole block's constant for a part block
    (bitsandbytes rounds its blocks up), and a card holds no part of a byte. A split term's `experts`
    are a slice of their own, over their group.
    """
    if stage not in term.under or moment.part not in term.during:
        return 0
    if term.law is Law.PER_WEIGHT:
        count = params - frozen if term.trains else params
        if stage not in term.split_by:
            return math.ceil(term.nbytes * count)
        if not experts.weights:
            return math.ceil(term.nbytes * shard_weights(count, term.group or gpus))
        own = experts.weights - experts.frozen if term.trains else experts.weights
        slices = shard_weights(count - own, term.group or gpus) + shard_weights(own, experts.group)
        return math.ceil(term.nbytes * slices)
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
    experts: Experts = NO_EXPERTS,
) -> int:
    """Bytes on one card in `place` at one moment: the sum of its `terms` there (`accounting.terms`)."""
    return sum(term_bytes(t, stage, params, gpus, moment, frozen, experts) for t in terms if t.place is place)


def peak_moment(
    stage: Stage,
    params: int,
    gpus: int,
    terms: tuple[Term, ...],
    candidates: tuple[Moment, ...],
    frozen: int = 0,
    experts: Experts = NO_EXPERTS,
) -> Moment:
    """The highest of a card's moments on its GPU (the first, of equals): where the fit test looks."""
    _, changing = _gpu_terms(terms)
    return max(candidates, key=lambda m: sum(term_bytes(t, stage, params, gpus, m, frozen, experts) for t in changing))


def peak_bytes(
    stage: Stage,
    params: int,
    gpus: int,
    terms: tuple[Term, ...],
    candidates: tuple[Moment, ...],
    frozen: int = 0,
    experts: Experts = NO_EXPERTS,
) -> int:
    """The most a card holds on its GPU during the step, at its highest moment: the fit test's one figure."""
    steady, changing = _gpu_terms(terms)
    base = sum(term_bytes(t, stage, params, gpus, frozen=frozen, experts=experts) for t in steady)
    return base + max(sum(term_bytes(t, stage, params, gpus, m, frozen, experts) for t in changing) for m in candidates)


@lru_cache(maxsize=64)
def _gpu_terms(all_terms: tuple[Term, ...]) -> tuple[tuple[Term, ...], tuple[Term, ...]]:
    """A card's GPU terms: those the same at every moment, and those that change with the moment.

    Those the same are added once: the bisection for the largest model that fits asks for some
    hundred peaks a page.
    """
    terms = [t for t in all_terms if t.place is Place.GPU]
    steady = tuple(t for t in terms if t.during == ALL_PASSES and t.law is not Law.PER_LAYER)
    return steady, tuple(t for t in terms if t.during != ALL_PASSES or t.law is Law.PER_LAYER)
