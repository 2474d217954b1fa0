"""A training run sized against a card: memory per stage, the ZeRO-3 peak, fit, and the largest model.

Model states only, as the ZeRO paper's Table 2 counts them: activations, buffers and
fragmentation come out of the headroom.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from app.domain.bands import MIXED_ADAM, Band, Recipe
from app.domain.communication import communication_p, transfers
from app.domain.memory import DEFAULT_GPUS, DEFAULT_PARAMS, bytes_per_weight
from app.domain.stages import Stage

MAX_GPUS = 4096


@dataclass(frozen=True)
class Run:
    """What the user describes: the model, the cluster, the recipe and the card."""

    params: int = DEFAULT_PARAMS
    gpus: int = DEFAULT_GPUS
    recipe: Recipe = MIXED_ADAM
    largest_layer: int | None = None
    capacity: int | None = None

    def __post_init__(self) -> None:
        if self.params < 1:
            raise ValueError("a model has at least one weight")
        if not 1 <= self.gpus <= MAX_GPUS:
            raise ValueError(f"gpus is between 1 and {MAX_GPUS}")
        if self.largest_layer is not None and not 1 <= self.largest_layer <= self.params:
            raise ValueError("the largest layer has between 1 weight and the whole model")
        if self.capacity is not None and self.capacity < 1:
            raise ValueError("a card has at least one byte")

    @property
    def assembled_layer_bytes(self) -> int | None:
        """One whole layer's weights and gradients: what ZeRO-3 gathers and computes on one card."""
        if self.largest_layer is None:
            return None
        return self.largest_layer * (self.recipe.nbytes(Band.WEIGHTS) + self.recipe.nbytes(Band.GRADIENTS))


@dataclass(frozen=True)
class StageReport:
    """One stage of one run."""

    stage: Stage
    bytes_per_weight: Fraction
    per_gpu_bytes: Fraction
    communication_p: int
    communication_bytes: int
    peak_bytes: Fraction
    fits: bool | None
    headroom_bytes: Fraction | None
    max_params_that_fit: int | None


def communication_bytes(stage: Stage, run: Run) -> int:
    """Bytes through each card per step: P weights × the bytes of the band each collective moves."""
    return sum(t.volume_p * run.params * run.recipe.nbytes(t.band) for t in transfers(stage))


def peak_bytes(stage: Stage, run: Run) -> Fraction:
    """The most a card holds during the step.

    ZeRO-3 holds one assembled layer, weights and (in backward) gradients, on top of its shard;
    ZeRO-2 holds one layer's whole gradients until they are reduce-scattered. Data parallelism
    and ZeRO-1 keep everything they use at rest already. Unknown layer: the state at rest.
    """
    state = run.params * bytes_per_weight(stage, run.gpus, run.recipe)
    if run.largest_layer is None:
        return state
    if stage is Stage.ZERO3 and run.assembled_layer_bytes is not None:
        return state + run.assembled_layer_bytes
    if stage is Stage.ZERO2:
        return state + run.largest_layer * run.recipe.nbytes(Band.GRADIENTS)
    return state


def max_params_that_fit(stage: Stage, gpus: int, capacity: int, recipe: Recipe = MIXED_ADAM) -> int:
    """The largest weight count whose model states fit on each card."""
    return int(capacity // bytes_per_weight(stage, gpus, recipe))


def stage_report(stage: Stage, run: Run) -> StageReport:
    """Memory, traffic and fit of one stage."""
    per_weight = bytes_per_weight(stage, run.gpus, run.recipe)
    peak = peak_bytes(stage, run)
    capacity = run.capacity
    return StageReport(
        stage=stage,
        bytes_per_weight=per_weight,
        per_gpu_bytes=run.params * per_weight,
        communication_p=communication_p(stage),
        communication_bytes=communication_bytes(stage, run),
        peak_bytes=peak,
        fits=None if capacity is None else peak <= capacity,
        headroom_bytes=None if capacity is None else capacity - peak,
        max_params_that_fit=None if capacity is None else max_params_that_fit(stage, run.gpus, capacity, run.recipe),
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
