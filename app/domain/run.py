"""What the user describes, as the domain computes it: the model, the cluster, the recipe and the card.

A value shared by `sizing` (the report) and `host` (a node's host): in a module of its own, so neither
imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from functools import cached_property

from app.domain.accounting import PAPER, Accounting, Setup, terms
from app.domain.activations import Activations
from app.domain.communication import Whose
from app.domain.eighths import COLUMNS
from app.domain.layers import ColumnMoments, Layer, bare_layers, column_moments, column_weights, first_trained
from app.domain.overheads import DEFAULTS, Overheads
from app.domain.recipes import MIXED_ADAM, Band, Recipe
from app.domain.stages import Stage
from app.domain.state_bytes import DEFAULT_GPUS, DEFAULT_PARAMS
from app.domain.terms import AT_REST, Moment, Place, Term

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
    layers: tuple[Layer, ...] = ()
    """The model's layers in forward order (`layers.model_layers`); empty: a bare count's (`layers.bare_layers`)."""
    activations: Activations | None = None
    """What one sequence keeps, from the model's shape; None for a bare weight count."""
    batch: int = 0
    """Sequences per micro-batch per GPU: 0 counts no activations."""
    overheads: Overheads = DEFAULTS
    """The overheads' settings: their figures are always worked out, to say what they would add."""
    count_overheads: bool = False
    """Whether the peak counts them (`overheads=1`); by default the theory alone, as the paper counts."""
    frozen: int = 0
    """Weights that do not train: they keep their weights band only. Which ones, the layers say."""
    trainable_share: Fraction | None = None
    """The share of the weights that train, where it was entered as one: a model of another size keeps it."""
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
        # Counted in the base model's weights: LoRA freezes all of them, and its adapters are drawn nowhere.
        return (2 * column + 1) * self.base_params < 2 * columns * min(self.frozen, self.base_params)

    @cached_property
    def model_layers(self) -> tuple[Layer, ...]:
        """The layers a step meets, first to last: the model's own, or a bare count's eighths."""
        return self.layers or bare_layers(self.params, self.largest_layer, self.frozen)

    @cached_property
    def base_params(self) -> int:
        """The weights of the model the eighths cut: all of them but LoRA's adapters."""
        return self.params - sum(layer.adapters for layer in self.model_layers)

    @cached_property
    def column_moments(self) -> tuple[ColumnMoments, ...]:
        """Each eighth's moments, forward and backward: DeepSpeed's count holds one module at a time."""
        modules = self.setup.accounting is Accounting.DEEPSPEED
        return column_moments(self.model_layers, self.batch, modules)

    @cached_property
    def candidates(self) -> tuple[Moment, ...]:
        """The moments that can be a card's highest: at rest, and each layer's in each pass, of those that differ."""
        every = (m for column in self.column_moments for m in (*column.forward, *column.backward))
        return (AT_REST, *dict.fromkeys(every))

    def frozen_at(self, params: int) -> int:
        """The frozen weights of a model of `params` weights drawn like this one: the share as entered.

        A share ('0.9') trains int(share × params), as the form reads it; a count, the same proportion.
        """
        if self.trainable_share is not None:
            return params - int(self.trainable_share * params)
        return self.frozen * params // self.params

    @cached_property
    def moved(self) -> dict[Whose, tuple[int, ...]]:
        """Each eighth's weights that a collective of each kind moves (`communication.Whose`)."""
        layers, model = self.model_layers, self.base_params
        first = first_trained(layers)
        # From the first weight that trains, or the start of the layer it is in: that layer is gathered whole.
        reached = model if first is None else min(self.frozen, layers[first].start)
        lows = {Whose.EVERY: 0, Whose.TRAINED: min(self.frozen, model), Whose.REACHED: reached}
        return {whose: column_weights(layers, model, low) for whose, low in lows.items()}

    def moved_params(self, whose: Whose) -> int:
        """The weights a collective of this kind moves in a whole step."""
        return sum(self.moved[whose])

    @property
    def assembled_layer_bytes(self) -> int | None:
        """The largest layer assembled with its gradients: what ZeRO-3 gathers and computes on one card.

        Each layer's gradients are for its weights that train: a frozen layer has its weights alone.
        """
        if self.largest_layer is None:
            return None
        weights, gradients = self.recipe.nbytes(Band.WEIGHTS), self.recipe.nbytes(Band.GRADIENTS)
        return max(
            layer.params * weights + layer.trained * gradients
            for layer in self.model_layers
            if layer.params is not None
        )

    @property
    def deepspeed_layer(self) -> int | None:
        """DeepSpeed's largest layer: the largest module by its own weights, where the layers are known."""
        modules = [layer.module for layer in self.model_layers if layer.module is not None]
        return max(modules) if modules else self.largest_layer
