"""A training run sized against a card: memory per stage, the peak, fit, and the largest model and micro-batch.

The model states, as the ZeRO paper's Table 2 counts them, plus the layer in hand and, when the
model's shape is known and the micro-batch is not empty, the activations. One peak, the highest
moment of the step, is behind the verdict, the headroom and every "largest ... that fits".
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import cached_property

from app.domain import card
from app.domain.accounting import KEPT_GATHERED, PAPER, Setup, differences, terms
from app.domain.activations import Activations
from app.domain.bands import MIXED_ADAM, Band, Recipe
from app.domain.card import Law, Moment, Place, Term, term_bytes
from app.domain.columns import COLUMNS
from app.domain.communication import communication_p, transfers
from app.domain.host import HostReport, host_report
from app.domain.memory import DEFAULT_GPUS, DEFAULT_PARAMS, per_gpu_bytes
from app.domain.overheads import DEFAULTS, OverheadItem, Overheads, overhead_items, total
from app.domain.quantities import LARGEST_COUNT
from app.domain.stages import Stage

MAX_GPUS = 4096
MAX_BATCH = 65536
"""The largest micro-batch per GPU the form takes, and the most "largest micro-batch" reports."""


@dataclass(frozen=True)
class Run:
    """What the user describes: the model, the cluster, the recipe and the card."""

    params: int = DEFAULT_PARAMS
    gpus: int = DEFAULT_GPUS
    recipe: Recipe = MIXED_ADAM
    largest_layer: int | None = None
    capacity: int | None = None
    column_layers: tuple[int | None, ...] = ()
    """Each eighth's largest layer (`columns.model_columns`); empty: the largest layer for each."""
    activations: Activations | None = None
    """What one sequence keeps, from the model's shape; None for a bare weight count."""
    batch: int = 0
    """Sequences per micro-batch per GPU: 0 counts no activations."""
    overheads: Overheads = DEFAULTS
    """The overheads' settings: their figures are always worked out, to say what they would add."""
    count_overheads: bool = False
    """Whether the peak counts them (`overheads=1`); by default the theory alone, as the paper counts."""
    frozen: int = 0
    """Weights that do not train, the first ones a forward pass meets: they keep their weights band only."""
    setup: Setup = PAPER
    """Whose accounting, and what is offloaded where."""
    nodes: int = 1
    """The machines the cards are in, an equal number each: host memory and NVMe are per node."""
    zero_init: bool = True
    """DeepSpeed's `zero.Init`: each process builds only its slice of the model, not a whole fp32 copy."""
    host_memory: int | None = None
    """One node's CPU RAM, for the host's verdict; None: no verdict."""
    nvme_space: int | None = None
    """One node's NVMe space, for ZeRO-Infinity's verdict; None: no verdict."""

    def __post_init__(self) -> None:
        if self.params < 1:
            raise ValueError("a model has at least one weight")
        if not 1 <= self.gpus <= MAX_GPUS:
            raise ValueError(f"gpus is between 1 and {MAX_GPUS}")
        if self.largest_layer is not None and not 1 <= self.largest_layer <= self.params:
            raise ValueError("the largest layer has between 1 weight and the whole model")
        if self.capacity is not None and self.capacity < 1:
            raise ValueError("a card has at least one byte")
        if not 0 <= self.batch <= MAX_BATCH:
            raise ValueError(f"a micro-batch has between 0 and {MAX_BATCH:,} sequences")
        if self.column_layers and len(self.column_layers) != COLUMNS:
            raise ValueError(f"a model has {COLUMNS} eighths")
        if not 0 <= self.frozen <= self.params:
            raise ValueError("the frozen weights are between none and all of the model's")
        if self.nodes < 1 or self.gpus % self.nodes:
            raise ValueError(f"{self.gpus} GPUs do not split evenly across {self.nodes} nodes")

    @property
    def gpus_per_node(self) -> int:
        """The cards in each node."""
        return self.gpus // self.nodes

    def terms(self, stage: Stage) -> tuple[Term, ...]:
        """Every term of a card under `stage`, counted and placed as the run's setup says."""
        return terms(self.recipe, stage, self.setup)

    def band_places(self, stage: Stage) -> dict[Band, Place]:
        """Where each band of model state lives under `stage`: on the card, or offloaded to its host."""
        return {t.band: t.place for t in self.terms(stage) if t.band is not None}

    def on_host(self, stage: Stage) -> frozenset[Band]:
        """The bands a card's host keeps for it under `stage`: none without offload."""
        return frozenset(band for band, place in self.band_places(stage).items() if place is not Place.GPU)

    def frozen_column(self, column: int, columns: int = COLUMNS) -> bool:
        """Whether most of one of `columns` equal columns of the weights is frozen (its middle is)."""
        return (2 * column + 1) * self.params < 2 * columns * self.frozen

    @cached_property
    def moments(self) -> tuple[Moment, ...]:
        """Every moment of the step that can be a card's highest, with its layer in hand and activations."""
        layers = self.column_layers or (self.largest_layer,) * COLUMNS
        kept = self.activations.per_column if self.activations else (0,) * COLUMNS
        frozen = tuple(self.frozen_column(column) for column in range(COLUMNS))
        return card.moments(layers, tuple(self.batch * k for k in kept), frozen)

    @cached_property
    def candidates(self) -> tuple[Moment, ...]:
        """The moments that differ: a bare count's 16 passes are two moments, forward and backward."""
        return tuple(dict.fromkeys(self.moments))

    @property
    def assembled_layer_bytes(self) -> int | None:
        """One whole layer's weights and gradients: what ZeRO-3 gathers and computes on one card.

        A frozen largest layer has no gradients to compute: its weights alone.
        """
        if self.largest_layer is None:
            return None
        layers = self.column_layers or (self.largest_layer,)
        frozen = self.frozen_column(layers.index(max(layers, key=lambda n: n or 0)), len(layers))
        gradients = 0 if frozen else self.recipe.nbytes(Band.GRADIENTS)
        return self.largest_layer * (self.recipe.nbytes(Band.WEIGHTS) + gradients)


@dataclass(frozen=True)
class StageReport:
    """One stage of one run."""

    stage: Stage
    bytes_per_weight: Fraction
    """What one card keeps per weight of the model, padding included: per_gpu_bytes / params."""
    per_gpu_bytes: int
    communication_p: int
    communication_bytes: int
    peak_bytes: int
    """The whole GPU peak: model states, the layer in hand and activations at the highest moment."""
    state_peak_bytes: int
    """Model states and the layer in hand at their own highest moment, as the ZeRO paper counts."""
    activation_bytes: int
    """Activations at the moment of `peak_bytes`."""
    overheads: tuple[OverheadItem, ...]
    """The overheads at that moment, counted in `peak_bytes` only with `overheads=1`."""
    overhead_bytes: int
    """Those counted: all of them, or 0."""
    fits: bool | None
    headroom_bytes: int | None
    max_params_that_fit: int | None
    """None without a capacity, and when not even a model of one largest layer fits."""
    max_batch_that_fits: int | None
    """None without a capacity or activations, and when not even an empty micro-batch fits."""
    host: HostReport
    """Each node's host, and each card's PCIe traffic."""
    differences: tuple[str, ...] = ()
    """How the run's accounting and placement count this stage differently from the paper, a sentence each."""


UNKNOWN_LAYER_RULE = (
    "The largest layer is unknown, so peaks count model states only, as the ZeRO paper's Table 2 does: "
    "enter the largest layer to add what a card assembles or computes for one layer."
)
"""Said in the same words wherever a peak is shown without the largest layer."""


def communication_bytes(stage: Stage, run: Run) -> int:
    """Bytes through each card per step: P weights × the bytes of the band each collective moves.

    Only trainable weights have gradients to move; every weight, frozen or not, is gathered.
    """
    trains = run.params - run.frozen
    return sum(
        t.volume_p * (trains if t.band is Band.GRADIENTS else run.params) * run.recipe.nbytes(t.band)
        for t in transfers(stage, run.gpus)
    )


@dataclass(frozen=True)
class LayerExtra:
    """What a card holds beyond its state while it works on one layer."""

    gathered: int
    """The layer's whole weights, assembled from their owners (ZeRO-3)."""
    computed: int
    """The layer's whole gradients, computed here before they are reduce-scattered (ZeRO-2 and 3)."""
    activations: int = 0
    """The micro-batch's activations kept at that moment."""

    @property
    def total(self) -> int:
        """All of it together."""
        return self.gathered + self.computed + self.activations


def layer_extra(stage: Stage, run: Run, moment: Moment) -> LayerExtra:
    """What a card holds beyond its state while it works on one layer of `layer` weights.

    ZeRO-3 assembles the layer's whole weights, in forward and again in backward; in backward
    ZeRO-2 and ZeRO-3 also compute the layer's whole gradients before reduce-scattering them to
    their owners. Data parallelism and ZeRO-1 write into buffers they already keep, and one card
    has nobody to share with. An unknown layer adds nothing: model states only. The activations
    are the moment's.
    """
    held = {"gathered": 0, "computed": 0, "activations": 0}
    for term in run.terms(stage):
        if term.place is Place.GPU and (term.during != card.ALL_PASSES or term.law is Law.PER_LAYER):
            name = "gathered" if term.name == KEPT_GATHERED else term.name
            held[name] += term_bytes(term, stage, run.params, run.gpus, moment, run.frozen)
    return LayerExtra(held["gathered"], held["computed"], held["activations"])


def peak_moment(stage: Stage, run: Run) -> Moment:
    """The highest moment of a card's step: the one every peak, bar and verdict is drawn at."""
    return card.peak_moment(stage, run.params, run.gpus, run.terms(stage), run.candidates, run.frozen)


def peak_extra(stage: Stage, run: Run) -> LayerExtra:
    """What a card holds beyond its state at its highest moment."""
    return layer_extra(stage, run, peak_moment(stage, run))


def theory_peak_bytes(stage: Stage, run: Run) -> int:
    """The theory's peak: model states, the layer in hand and activations at the step's highest moment."""
    return card.peak_bytes(stage, run.params, run.gpus, run.terms(stage), run.candidates, run.frozen)


def overheads(stage: Stage, run: Run) -> tuple[OverheadItem, ...]:
    """The overheads a card holds at its highest moment, counted or not.

    The allocator keeps what it reserved at the peak, so they are drawn the same at every moment.
    """
    recipe, moment = run.recipe, peak_moment(stage, run)
    return overhead_items(
        stage,
        run.params - run.frozen,  # DDP buckets the gradients of the weights that train, and only those
        run.gpus,
        recipe.nbytes(Band.WEIGHTS),
        recipe.nbytes(Band.GRADIENTS),
        theory_peak_bytes(stage, run),
        moment.layer,
        run.overheads,
    )


def counted_overhead_bytes(stage: Stage, run: Run) -> int:
    """The overheads the peak counts: all of them with `overheads=1`, none by default."""
    return total(overheads(stage, run)) if run.count_overheads else 0


def peak_bytes(stage: Stage, run: Run) -> int:
    """The most a card holds during the step: the theory's peak, plus the overheads when counted."""
    return theory_peak_bytes(stage, run) + counted_overhead_bytes(stage, run)


def state_peak_bytes(stage: Stage, run: Run) -> int:
    """The peak of model states and the layer in hand alone: the ZeRO paper's and the seed's figure."""
    return theory_peak_bytes(stage, replace(run, batch=0))


def _peak_for(stage: Stage, run: Run, params: int) -> int:
    """The peak of a model of another size, frozen in the same proportion, with the moments drawn."""
    frozen = run.frozen * params // run.params
    if run.count_overheads:  # they depend on the size (DDP's buckets, the margin): worked out afresh
        return peak_bytes(stage, replace(run, params=params, frozen=frozen))
    # The layers and activations of the shape drawn, kept as they are: the bisection asks some
    # hundred peaks a page, and the moments do not change with the size.
    return card.peak_bytes(stage, params, run.gpus, run.terms(stage), run.candidates, frozen)


def max_params_that_fit(stage: Stage, run: Run) -> int | None:
    """The largest weight count whose peak fits the card, the largest layer kept as it is.

    The same test as the verdict: a model of this many weights fits, one more does not. None
    when even a model made of just its largest layer does not fit. Past LARGEST_COUNT, the most
    the form reads, it says only that some larger model fits: with every per-weight band offloaded
    the card's peak stops growing with the model, and there is no largest.
    """
    if run.capacity is None:
        return None
    smallest = run.largest_layer or 1
    if _peak_for(stage, run, smallest) > run.capacity:
        return None
    capacity = run.capacity
    low, high = smallest, smallest + 1
    while _peak_for(stage, run, high) <= capacity:  # the peak grows with the weights: double past it
        if high > LARGEST_COUNT:  # with every per-weight band offloaded, the card's peak no longer grows
            return high
        low, high = high, high * 2
    return _last_fitting(lambda params: _peak_for(stage, run, params) <= capacity, low, high)


def _last_fitting(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The largest n from `low` (which fits) below `high` (which does not) that fits, by bisection."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def max_batch_that_fits(stage: Stage, run: Run) -> int | None:
    """The largest micro-batch whose peak fits the card, the model kept as it is.

    The same test as the verdict: this many sequences fit, one more does not. None without a
    capacity or activations, or when the model does not fit even with no micro-batch; at most
    MAX_BATCH.
    """
    if run.capacity is None or run.activations is None:
        return None
    capacity = run.capacity

    def fits(batch: int) -> bool:
        return peak_bytes(stage, replace(run, batch=batch)) <= capacity

    if not fits(0):
        return None
    if fits(MAX_BATCH):
        return MAX_BATCH
    return _last_fitting(fits, 0, MAX_BATCH)


def stage_report(stage: Stage, run: Run) -> StageReport:
    """Memory, traffic and fit of one stage."""
    peak = peak_bytes(stage, run)
    items = overheads(stage, run)
    capacity = run.capacity
    state = per_gpu_bytes(stage, run.params, run.gpus, run.recipe, run.frozen, run.setup)
    return StageReport(
        stage=stage,
        # Not bytes_per_weight(stage, gpus, recipe), the 1/N of a model that divides evenly: a slice
        # is padded to whole weights, and 7 weights on 16 cards keep 1 weight's bytes each, not 7/16.
        bytes_per_weight=Fraction(state, run.params),
        per_gpu_bytes=state,
        communication_p=communication_p(stage, run.gpus),
        communication_bytes=communication_bytes(stage, run),
        peak_bytes=peak,
        state_peak_bytes=state_peak_bytes(stage, run),
        activation_bytes=peak_extra(stage, run).activations,
        overheads=items,
        overhead_bytes=total(items) if run.count_overheads else 0,
        fits=None if capacity is None else peak <= capacity,
        headroom_bytes=None if capacity is None else capacity - peak,
        max_params_that_fit=max_params_that_fit(stage, run),
        max_batch_that_fits=max_batch_that_fits(stage, run),
        host=host_report(stage, run),
        differences=differences(stage, run.recipe, run.setup, padded=run.params % run.gpus != 0),
    )


def report(run: Run) -> tuple[StageReport, ...]:
    """Every stage of a run, DP first."""
    return tuple(stage_report(stage, run) for stage in Stage)


def layer_exceeds_card(run: Run) -> bool | None:
    """Whether one assembled layer alone is bigger than the card; None when either is unknown.

    If it is, sharding state cannot help: the layer itself must be split across cards, which is
    tensor parallelism.
    """
    if run.capacity is None or run.assembled_layer_bytes is None:
        return None
    return run.assembled_layer_bytes > run.capacity
