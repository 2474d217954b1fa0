"""The four bands of training state a recipe keeps for every weight, and the recipes.

A recipe is declared once, by its properties: its optimizer, the format (`Dtype`, with its bits) and
count of each band, and what the page says of it. Whether it keeps a master copy, its bytes a weight,
its DeepSpeed and FSDP2 exports (`configs.py`), the form's help and the API are read from these.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from fractions import Fraction
from functools import cached_property
from typing import Any

from app.domain.units import per_weight


class Band(StrEnum):
    """One class of per-weight training state, in the order the grid stacks them."""

    WEIGHTS = "weights"
    GRADIENTS = "gradients"
    MASTER = "master"
    MOMENTS = "moments"


@dataclass(frozen=True)
class Dtype:
    """A number format a band is kept in: its name and its bits a weight, its block constants included."""

    name: str
    bits: Fraction
    """Bits a weight. A blockwise format adds its blocks' constants, spread over the weights of a block."""
    torch: str = ""
    """torch's dtype for it where the passes compute in it ("torch.bfloat16"); blank for a storage format."""


FP32 = Dtype("fp32", Fraction(32), "torch.float32")
BF16 = Dtype("bf16", Fraction(16), "torch.bfloat16")
FP8 = Dtype("fp8", Fraction(8), "torch.float8_e4m3fn")
INT8_BLOCKWISE = Dtype("int8", 8 + Fraction(32, 256))
"""bitsandbytes' blockwise 8-bit optimizer state: an int8 a weight and one fp32 absmax per block of 256.

bitsandbytes/optim/optimizer.py (bitsandbytes-foundation/bitsandbytes), `Optimizer2State.init_state`:
`blocks = n // 256` (plus one for a remainder), then `absmax1` and `absmax2`, each `blocks` fp32
values, beside the uint8 `state1` and `state2` (commit 51294d9; an older one, 06029dd, had blocks of 2048). A tensor
under `min_8bit_size` (4,096) elements keeps fp32 state: norms and biases, left out here.
"""
NF4_DOUBLE_QUANT = Dtype("nf4", 4 + Fraction(8, 64) + Fraction(32, 64 * 256))
"""QLoRA's 4-bit NormalFloat with double quantization (Dettmers et al. 2023, section 3): 4 bits a
weight, an 8-bit absmax per block of 64 weights, and an fp32 constant per 256 of those blocks:
4 + 8/64 + 32/(64·256) = 4.127 bits, which is 2113/4096 B."""


def entered(nbytes: int) -> Dtype:
    """The format of a custom band: as many bytes as entered.

    2 bytes are taken for bf16 and 4 for fp32 in the exports (their torch dtype), as they always were:
    a custom recipe names no format, and those are the formats of that size a trainer keeps.
    """
    return Dtype(f"{nbytes} B", Fraction(8 * nbytes), {2: BF16.torch, 4: FP32.torch}.get(nbytes, ""))


class Optimizer(StrEnum):
    """The optimizer a recipe steps with, as a person names it."""

    ADAM = "Adam"
    SGD_MOMENTUM = "SGD with momentum"
    ADAM_8BIT = "8-bit blockwise Adam"
    OWN = "your own optimizer"

    @property
    def deepspeed(self) -> str:
        """DeepSpeed's `optimizer.type` for it; blank where DeepSpeed has none (the user's own optimizer)."""
        return "Adam" if self is Optimizer.ADAM else ""

    @property
    def torch(self) -> str:
        """The optimizer's class in PyTorch code, for the ZeRO-1 snippet; AdamW stands for the user's own."""
        return {
            Optimizer.SGD_MOMENTUM: "torch.optim.SGD",
            Optimizer.ADAM_8BIT: "bitsandbytes.optim.AdamW8bit",
        }.get(self, "torch.optim.AdamW")


@dataclass(frozen=True)
class BandSpec:
    """One band of a recipe: its format, how many values of it a weight keeps, and what it is."""

    band: Band
    label: str
    dtype: Dtype
    copies: int
    """Values of `dtype` a weight keeps in this band: Adam's two moments; 0 for a band not kept."""
    description: str
    noun: str = ""
    """How a sentence names the band, e.g. "Adam's two fp32 moments"; blank: from the label."""

    # Asked some thousand times a never-seen page: worked out once for each band.
    @cached_property
    def nbytes(self) -> Fraction:
        """Bytes a weight: an exact fraction (blockwise formats add their constants), whole for most."""
        return self.dtype.bits * self.copies / 8

    @property
    def shown(self) -> str:
        """Its bytes a weight as the legend says them: '2', '2.03', '0.516' (`bytes_a_weight`)."""
        return bytes_a_weight(self.nbytes)

    @property
    def precision(self) -> str:
        """The format as the legend says it: 'bf16', 'fp32 ×2', 'none'."""
        if self.copies == 0:
            return "none"
        return self.dtype.name + (f" ×{self.copies}" if self.copies > 1 else "")

    @property
    def phrase(self) -> str:
        """The band named in a sentence: its noun, or 'the' and its label."""
        return self.noun or f"the {self.label[:1].lower()}{self.label[1:]}"


@dataclass(frozen=True)
class Recipe:
    """A precision and optimizer recipe: its optimizer and the format of each band."""

    name: str
    title: str
    optimizer: Optimizer
    specs: tuple[BandSpec, ...]
    note: str = ""
    """What the page says of the recipe beside the run (why it saves what it saves); blank for nothing."""
    without_lora: str = ""
    """What the page adds to `note` where the run has no LoRA adapters (every weight drawn as if it trains)."""
    with_lora: str = ""
    """What the page adds to `note` where LoRA's adapters train: what the app counts of them and leaves out."""
    matmul: Dtype | None = None
    """The format inside the matrix multiplies, where not the weights' (fp8 training)."""
    adapters: Dtype | None = None
    """The format of the weights that train, where they are adapters beside frozen weights (QLoRA)."""
    # Looked up once per grid cell, so kept as a mapping rather than searched.
    _by_band: dict[Band, BandSpec] = field(init=False, repr=False, compare=False)
    _hash: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if tuple(spec.band for spec in self.specs) != tuple(Band):
            raise ValueError("a recipe lists every band once, in Band order")
        if any(spec.copies < 0 or spec.dtype.bits < 0 for spec in self.specs):
            raise ValueError("a band cannot cost negative bytes")
        object.__setattr__(self, "_by_band", {spec.band: spec for spec in self.specs})
        object.__setattr__(self, "_hash", hash((self.name, self.title, self.specs)))

    # A recipe keys the figures' memos and is hashed on every figure: its hash is worked out once.
    def __hash__(self) -> int:
        return self._hash

    def spec(self, band: Band) -> BandSpec:
        """The spec of one band."""
        return self._by_band[band]

    def nbytes(self, band: Band) -> Fraction:
        """Bytes per weight of one band, exact."""
        return self.spec(band).nbytes

    @property
    def total(self) -> Fraction:
        """Bytes per weight of all bands together: what plain data parallelism keeps."""
        return sum((spec.nbytes for spec in self.specs), Fraction(0))

    @property
    def has_master(self) -> bool:
        """Whether the optimizer keeps a separate master copy of the weights."""
        return self.nbytes(Band.MASTER) > 0

    @property
    def trained(self) -> Dtype:
        """The format of the weights that train, as the passes compute with them: the exports' precision."""
        return self.adapters or self.spec(Band.WEIGHTS).dtype

    @property
    def sizes(self) -> str:
        """The bytes of each band, weights first: '2/2/4/8', '0.516/2/0/8'."""
        return "/".join(bytes_a_weight(spec.nbytes) for spec in self.specs)

    def phrase(self, bands: frozenset[Band] | tuple[Band, ...]) -> str:
        """The stored bands among `bands`, named in a sentence: 'the fp32 master copy and Adam's two moments'."""
        names = [spec.phrase for spec in self.specs if spec.band in bands and spec.nbytes > 0]
        if len(names) <= 1:
            return "".join(names) or "nothing"
        return ", ".join(names[:-1]) + " and " + names[-1]


def bytes_a_weight(nbytes: Fraction) -> str:
    """A band's bytes a weight as a reader expects: whole as they are ('2'), else to three figures ('2.03', '0.516')."""
    if nbytes.denominator == 1:
        return str(nbytes.numerator)
    return per_weight(nbytes)


_PASSES = "used by the forward and backward passes"

MIXED_ADAM = Recipe(
    name="mixed-adam",
    title="Mixed-precision Adam",
    optimizer=Optimizer.ADAM,
    specs=(
        BandSpec(Band.WEIGHTS, "Weights", BF16, 1, _PASSES, "the bf16 weights"),
        BandSpec(Band.GRADIENTS, "Gradients", BF16, 1, "made by the backward pass", "the bf16 gradients"),
        BandSpec(Band.MASTER, "Master copy", FP32, 1, "what the optimizer updates", "the fp32 master copy"),
        BandSpec(Band.MOMENTS, "Adam moments", FP32, 2, "two running averages", "Adam's two fp32 moments"),
    ),
)


def _recipe(
    name: str,
    title: str,
    optimizer: Optimizer,
    *specs: tuple[str, Dtype, int, str, str],
    note: str = "",
    without_lora: str = "",
    with_lora: str = "",
    matmul: Dtype | None = None,
    adapters: Dtype | None = None,
) -> Recipe:
    """A recipe from its optimizer and, for each band in order, its label, format, count, description and noun."""
    bands = tuple(BandSpec(band, *spec) for band, spec in zip(Band, specs, strict=True))
    return Recipe(name, title, optimizer, bands, note, without_lora, with_lora, matmul, adapters)


# One member for each recipe of `RECIPES`, in its order: `RECIPES` is built through this enum, so a
# recipe without a member cannot be declared, and `tests/domain/test_recipes.py` fails for a member
# without a recipe. (The docstring is the API schema's description.)
class RecipeName(StrEnum):
    """The recipes a person can pick; CUSTOM means 'enter the bytes of each band'."""

    MIXED_ADAM = "mixed-adam"
    FP32_ADAM = "fp32-adam"
    BF16_ADAM = "bf16-adam"
    MIXED_SGD = "mixed-sgd"
    ADAM_8BIT = "adam-8bit"
    FP8_ADAM = "fp8-adam"
    QLORA_NF4 = "qlora-nf4"
    CUSTOM = "custom"


# Each preset names what its bands are, so the legend stays true when the recipe changes; everything
# else a recipe means (the exports, the form's help, the API) is read from these properties.
RECIPES: dict[RecipeName, Recipe] = {
    RecipeName(recipe.name): recipe
    for recipe in (
        MIXED_ADAM,
        _recipe(
            "fp32-adam",
            "fp32 Adam",
            Optimizer.ADAM,
            ("Weights", FP32, 1, _PASSES, "the fp32 weights"),
            ("Gradients", FP32, 1, "made by the backward pass", "the fp32 gradients"),
            ("Master copy", FP32, 0, "not needed: the weights are already fp32", "no master copy"),
            ("Adam moments", FP32, 2, "two running averages", "Adam's two fp32 moments"),
        ),
        _recipe(
            "bf16-adam",
            "Pure bf16 Adam",
            Optimizer.ADAM,
            ("Weights", BF16, 1, f"{_PASSES}, and updated in place", "the bf16 weights"),
            ("Gradients", BF16, 1, "made by the backward pass", "the bf16 gradients"),
            ("Master copy", BF16, 0, "none: updates go straight into the bf16 weights", "no master copy"),
            ("Adam moments", BF16, 2, "two running averages", "Adam's two bf16 moments"),
        ),
        _recipe(
            "mixed-sgd",
            "Mixed-precision SGD with momentum",
            Optimizer.SGD_MOMENTUM,
            ("Weights", BF16, 1, _PASSES, "the bf16 weights"),
            ("Gradients", BF16, 1, "made by the backward pass", "the bf16 gradients"),
            ("Master copy", FP32, 1, "what the optimizer updates", "the fp32 master copy"),
            ("Momentum", FP32, 1, "one running average", "the fp32 momentum"),
        ),
        _recipe(
            "adam-8bit",
            "Mixed precision, 8-bit Adam",
            Optimizer.ADAM_8BIT,
            ("Weights", BF16, 1, _PASSES, "the bf16 weights"),
            ("Gradients", BF16, 1, "made by the backward pass", "the bf16 gradients"),
            ("Master copy", FP32, 1, "what the optimizer updates", "the fp32 master copy"),
            (
                "Adam moments",
                INT8_BLOCKWISE,
                2,
                "two running averages, quantised in blocks of 256 with an fp32 scale each (bitsandbytes)",
                "Adam's two 8-bit moments",
            ),
        ),
        _recipe(
            "fp8-adam",
            "fp8 matmuls, mixed-precision Adam",
            Optimizer.ADAM,
            ("Weights", BF16, 1, f"{_PASSES}, cast to fp8 inside each matrix multiply", "the bf16 weights"),
            ("Gradients", BF16, 1, "made by the backward pass", "the bf16 gradients"),
            ("Master copy", FP32, 1, "what the optimizer updates", "the fp32 master copy"),
            ("Adam moments", FP32, 2, "two running averages", "Adam's two fp32 moments"),
            matmul=FP8,
            note=(
                "fp8 training (torchao's float8, Transformer Engine) runs only the matrix multiplies in fp8: "
                "the weights stay bf16 beside an fp32 master copy and Adam's fp32 moments, so the state is "
                "mixed-precision Adam's 16 B a weight. Each fp8 cast of a weight is made for its multiply and "
                "freed; fp8 saves time and some activations, not this state. (Transformer Engine may keep an fp8 "
                "copy of the weights across micro-batches, 1 B a weight more, not counted here.)"
            ),
        ),
        _recipe(
            "qlora-nf4",
            "QLoRA: NF4 frozen weights, bf16 adapters",
            Optimizer.ADAM,
            (
                "Weights",
                NF4_DOUBLE_QUANT,
                1,
                "frozen, 4-bit NormalFloat, dequantised to bf16 for each multiply",
                "the NF4 weights",
            ),
            ("Gradients", BF16, 1, "made by the backward pass, for the adapters", "the bf16 gradients"),
            ("Master copy", BF16, 0, "none: the bf16 adapters are updated in place", "no master copy"),
            ("Adam moments", FP32, 2, "two running averages, for the adapters", "Adam's two fp32 moments"),
            adapters=BF16,
            note=(
                "QLoRA's NF4 weights (4.127 bits a weight, double-quantised: Dettmers et al. 2023) are frozen: they "
                "train only through LoRA's adapters."
            ),
            without_lora=(
                "Give a LoRA rank: without one every weight is drawn with gradients and moments, as if NF4 weights "
                "could train."
            ),
            with_lora=(
                "The app counts the adapters' own weights at the NF4 weights' 0.516 B, where QLoRA keeps them in "
                "bf16 (2 B): 1.48 B an adapter weight left out, and the bf16 copy of the layer dequantised for each "
                "multiply, which is freed after it."
            ),
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
        # The optimizer is not named: the exports take it for one DeepSpeed has no type for.
        Optimizer.OWN,
        tuple(
            BandSpec(band, label, entered(size), 1, "as entered", f"the {label[:1].lower()}{label[1:]} ({size} B)")
            for band, label, size in zip(Band, labels, sizes, strict=True)
        ),
    )


class GradAccum(StrEnum):
    """What a card accumulates and keeps its gradients in, from the backward to the update (`grad_accum`)."""

    BF16 = "bf16"
    """The recipe's own gradients band (2 B in mixed precision)."""
    FP32 = "fp32"
    """An fp32 buffer: Megatron-LM's main_grad (`--accumulate-allreduce-grads-in-fp32`,
    megatron/training/arguments.py) and nanotron's `FP32GradientAccumulator`
    (src/nanotron/optim/gradient_accumulator.py, a `torch.zeros(..., dtype=torch.float)` buffer)."""


RecipeRule = Callable[[Recipe, Any], Recipe]
"""An input's meaning to the domain, where the run has no attribute of its own for it: the recipe it makes of
the recipe chosen (`Inputs.ruled`, applied by `scenario.resolve`). Changing the run's recipe, not a card's
terms, keeps every figure and every label that reads a band (the grid, the key, the API's bands, the step's
words) on one recipe. One function (`grad_accum`) is all the domain needs of a new input."""

ACCUMULATED = BandSpec(
    Band.GRADIENTS,
    "Gradients",
    FP32,
    1,
    "made by the backward pass, accumulated and kept in fp32 for the update (grad_accum=fp32)",
    "the fp32 accumulated gradients",
)
"""The gradients band of `grad_accum=fp32`: Megatron-LM's main_grad, nanotron's fp32 accumulator."""


def grad_accum(recipe: Recipe, kept: GradAccum) -> Recipe:
    """`grad_accum=fp32`: the recipe with its gradients band in fp32, 4 B a trainable weight, where it was narrower.

    With mixed-precision Adam that is 2 + 4 + 4 + 8 = 18 B a weight, Megatron-LM's count
    (megatron/training/theoretical_memory_usage.py). The band splits as the gradients do, and the gradients
    a layer computes in hand are fp32 too. A band already 4 B (fp32-adam) is left as it is.
    """
    if kept is GradAccum.BF16 or recipe.nbytes(Band.GRADIENTS) >= ACCUMULATED.nbytes:
        return recipe
    specs = tuple(ACCUMULATED if spec.band is Band.GRADIENTS else spec for spec in recipe.specs)
    return replace(recipe, specs=specs)


def recipes_help() -> str:
    """The recipe field's help: each preset's name and bytes a band, read from `RECIPES`, then custom's."""
    listed = [
        f"`{name}` {recipe.sizes}"
        + (f" (K = {recipe.nbytes(Band.MASTER) + recipe.nbytes(Band.MOMENTS)})" if i == 0 else "")
        for i, (name, recipe) in enumerate(RECIPES.items())
    ]
    return ", ".join(listed) + f", or `{RecipeName.CUSTOM}` with the four `*_bytes` below"
