"""What the user describes, as the domain computes it: the model, the cluster, the recipe and the card.

A value shared by `sizing` (the report) and `host` (a node's host): in a module of its own, so neither
imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from app.domain.accounting import PAPER, Setup, terms
from app.domain.activations import Activations
from app.domain.eighths import COLUMNS
from app.domain.overheads import DEFAULTS, Overheads
from app.domain.recipes import MIXED_ADAM, Band, Recipe
from app.domain.stages import Stage
from app.domain.state_bytes import DEFAULT_GPUS, DEFAULT_PARAMS
from app.domain.terms import Moment, Place, Term
from app.domain.terms import moments as step_moments  # `Run.moments` is this run's own

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
    """Each eighth's largest layer (`eighths.model_columns`); empty: the largest layer for each."""
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
        return step_moments(layers, tuple(self.batch * k for k in kept), frozen)

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
