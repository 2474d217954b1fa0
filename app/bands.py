"""The four bands of training state that mixed-precision Adam keeps for every weight."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Band(StrEnum):
    """One class of per-weight training state, in the order the grid stacks them."""

    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    MASTER = "master"
    MOMENTS = "moments"


@dataclass(frozen=True)
class BandSpec:
    """How many bytes one band costs per weight, and what it is."""

    band: Band
    label: str
    precision: str
    nbytes: int
    description: str


@dataclass(frozen=True)
class Recipe:
    """A precision and optimizer recipe: the bytes each band costs per weight."""

    name: str
    title: str
    specs: tuple[BandSpec, ...]
    # Looked up once per grid cell, so kept as a mapping rather than searched.
    _by_band: dict[Band, BandSpec] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if tuple(spec.band for spec in self.specs) != tuple(Band):
            raise ValueError("a recipe lists every band once, in Band order")
        if any(spec.nbytes < 0 for spec in self.specs):
            raise ValueError("a band cannot cost negative bytes")
        object.__setattr__(self, "_by_band", {spec.band: spec for spec in self.specs})

    def spec(self, band: Band) -> BandSpec:
        """The spec of one band."""
        return self._by_band[band]

    def nbytes(self, band: Band) -> int:
        """Bytes per weight of one band."""
        return self.spec(band).nbytes

    @property
    def total(self) -> int:
        """Bytes per weight of all bands together: what plain data parallelism keeps."""
        return sum(spec.nbytes for spec in self.specs)


MIXED_ADAM = Recipe(
    name="mixed-adam",
    title="Mixed-precision Adam",
    specs=(
        BandSpec(Band.WEIGHTS, "Weights", "bf16", 2, "used by the forward and backward passes"),
        BandSpec(Band.GRADIENTS, "Gradients", "bf16", 2, "made by the backward pass"),
        BandSpec(Band.MASTER, "Master copy", "fp32", 4, "what the optimizer updates"),
        BandSpec(Band.MOMENTS, "Adam moments", "fp32 ×2", 8, "two running averages"),
    ),
)
