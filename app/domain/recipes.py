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
    noun: str = ""
    """How a sentence names the band, e.g. "Adam's two fp32 moments"; blank: from the label."""

    @property
    def phrase(self) -> str:
        """The band named in a sentence: its noun, or 'the' and its label."""
        return self.noun or f"the {self.label[:1].lower()}{self.label[1:]}"


@dataclass(frozen=True)
class Recipe:
    """A precision and optimizer recipe: the bytes each band costs per weight."""

    name: str
    title: str
    specs: tuple[BandSpec, ...]
    # Looked up once per grid cell, so kept as a mapping rather than searched.
    _by_band: dict[Band, BandSpec] = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if tuple(spec.band for spec in self.specs) != tuple(Band):
            raise ValueError("a recipe lists every band once, in Band order")
        if any(spec.nbytes < 0 for spec in self.specs):
            raise ValueError("a band cannot cost negative bytes")
        object.__setattr__(self, "_by_band", {spec.band: spec for spec in self.specs})
        object.__setattr__(self, "_hash", hash((self.name, self.title, self.specs)))

    # A recipe keys the figures' memos and is hashed on every figure: its hash is worked out once.
    def __hash__(self) -> int:
        return self._hash

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

    @property
    def has_master(self) -> bool:
        """Whether the optimizer keeps a separate master copy of the weights."""
        return self.nbytes(Band.MASTER) > 0

    def phrase(self, bands: frozenset[Band] | tuple[Band, ...]) -> str:
        """The stored bands among `bands`, named in a sentence: 'the fp32 master copy and Adam's two moments'."""
        names = [spec.phrase for spec in self.specs if spec.band in bands and spec.nbytes > 0]
        if len(names) <= 1:
            return "".join(names) or "nothing"
        return ", ".join(names[:-1]) + " and " + names[-1]


MIXED_ADAM = Recipe(
    name="mixed-adam",
    title="Mixed-precision Adam",
    specs=(
        BandSpec(Band.WEIGHTS, "Weights", "bf16", 2, "used by the forward and backward passes", "the bf16 weights"),
        BandSpec(Band.GRADIENTS, "Gradients", "bf16", 2, "made by the backward pass", "the bf16 gradients"),
        BandSpec(Band.MASTER, "Master copy", "fp32", 4, "what the optimizer updates", "the fp32 master copy"),
        BandSpec(Band.MOMENTS, "Adam moments", "fp32 ×2", 8, "two running averages", "Adam's two fp32 moments"),
    ),
)


def _recipe(name: str, title: str, *specs: tuple[str, str, int, str, str]) -> Recipe:
    return Recipe(name, title, tuple(BandSpec(band, *spec) for band, spec in zip(Band, specs, strict=True)))


class RecipeName(StrEnum):
    """The recipes a person can pick; CUSTOM means 'enter the bytes of each band'."""

    MIXED_ADAM = "mixed-adam"
    FP32_ADAM = "fp32-adam"
    BF16_ADAM = "bf16-adam"
    MIXED_SGD = "mixed-sgd"
    ADAM_8BIT = "adam-8bit"
    CUSTOM = "custom"


# Each preset names what its bands are, so the legend stays true when the recipe changes.
RECIPES: dict[RecipeName, Recipe] = {
    RecipeName(recipe.name): recipe
    for recipe in (
        MIXED_ADAM,
        _recipe(
            "fp32-adam",
            "fp32 Adam",
            ("Weights", "fp32", 4, "used by the forward and backward passes", "the fp32 weights"),
            ("Gradients", "fp32", 4, "made by the backward pass", "the fp32 gradients"),
            ("Master copy", "none", 0, "not needed: the weights are already fp32", "no master copy"),
            ("Adam moments", "fp32 ×2", 8, "two running averages", "Adam's two fp32 moments"),
        ),
        _recipe(
            "bf16-adam",
            "Pure bf16 Adam",
            ("Weights", "bf16", 2, "used by the forward and backward passes, and updated in place", "the bf16 weights"),
            ("Gradients", "bf16", 2, "made by the backward pass", "the bf16 gradients"),
            ("Master copy", "none", 0, "none: updates go straight into the bf16 weights", "no master copy"),
            ("Adam moments", "bf16 ×2", 4, "two running averages", "Adam's two bf16 moments"),
        ),
        _recipe(
            "mixed-sgd",
            "Mixed-precision SGD with momentum",
            ("Weights", "bf16", 2, "used by the forward and backward passes", "the bf16 weights"),
            ("Gradients", "bf16", 2, "made by the backward pass", "the bf16 gradients"),
            ("Master copy", "fp32", 4, "what the optimizer updates", "the fp32 master copy"),
            ("Momentum", "fp32", 4, "one running average", "the fp32 momentum"),
        ),
        _recipe(
            "adam-8bit",
            "Mixed precision, 8-bit Adam",
            ("Weights", "bf16", 2, "used by the forward and backward passes", "the bf16 weights"),
            ("Gradients", "bf16", 2, "made by the backward pass", "the bf16 gradients"),
            ("Master copy", "fp32", 4, "what the optimizer updates", "the fp32 master copy"),
            ("Adam moments", "int8 ×2", 2, "two running averages, quantised", "Adam's two 8-bit moments"),
        ),
    )
}

MAX_CUSTOM_BAND_BYTES = 16


def custom_recipe(weights: int, gradients: int, master: int, moments: int) -> Recipe:
    """A recipe from bytes per band; each 0-16, and the weights at least 1 (a model has weights)."""
    sizes = (weights, gradients, master, moments)
    if not all(0 <= size <= MAX_CUSTOM_BAND_BYTES for size in sizes):
        raise ValueError(f"each band costs 0 to {MAX_CUSTOM_BAND_BYTES} bytes per weight")
    if weights < 1:
        raise ValueError("the weights band costs at least 1 byte per weight")
    labels = [spec.label for spec in MIXED_ADAM.specs]
    return Recipe(
        "custom",
        f"Custom ({'/'.join(map(str, sizes))})",
        tuple(
            BandSpec(band, label, f"{size} B", size, "as entered", f"the {label[:1].lower()}{label[1:]} ({size} B)")
            for band, label, size in zip(Band, labels, sizes, strict=True)
        ),
    )
