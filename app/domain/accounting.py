"""Four ways to count a card: the ZeRO paper's, DeepSpeed's, FSDP2's and Megatron-LM's, each a list of terms.

`paper` is the default: the ZeRO paper's K = 12 and the seed's table. `deepspeed` is what
DeepSpeed's estimators (`estimate_zero2_model_states_mem_needs`, `estimate_zero3_model_states_mem_needs`)
count, `fsdp2` what `fully_shard` allocates, and `megatron` what Megatron-LM's
`compute_weight_and_optimizer_memory` counts (docs/accounting.md cites the source lines). Each
difference from the paper is a sentence, `differences`, shown on the page beside the figures.

Placement is applied here too: a term whose band is offloaded is given the host's place.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from fractions import Fraction
from functools import lru_cache

from app.domain.placement import NO_OFFLOAD, Device, Home, Offload, Placement
from app.domain.recipes import Band, Recipe
from app.domain.recipes import bytes_a_weight as _b
from app.domain.stages import Stage
from app.domain.terms import ACTIVATIONS, Law, Pass, Place, Term, TermKind, layer_in_hand, model_state


class Accounting(StrEnum):
    """Whose count of a card's memory."""

    PAPER = "paper"
    DEEPSPEED = "deepspeed"
    FSDP2 = "fsdp2"
    MEGATRON = "megatron"

    @property
    def label(self) -> str:
        """The form's name for it."""
        return _WORDS[self][0]

    @property
    def counts(self) -> str:
        """What it counts, for the API's and the docs' list of choices."""
        return _WORDS[self][1]


# An accounting's words, said once: the form, the API's description and docs/url-options.md read them.
_WORDS = {
    Accounting.PAPER: ("The ZeRO paper's", "the ZeRO paper's count, the default"),
    Accounting.DEEPSPEED: ("DeepSpeed's estimators'", "what DeepSpeed's estimators count"),
    Accounting.FSDP2: ("FSDP2's fully_shard", "what fully_shard allocates"),
    Accounting.MEGATRON: ("Megatron-LM's", "Megatron-LM's theoretical memory"),
}


@dataclass(frozen=True)
class Setup:
    """How a run is counted and where its bands live."""

    accounting: Accounting = Accounting.PAPER
    placement: Placement = NO_OFFLOAD
    hpz: int = 1
    """ZeRO++'s hpZ partition size (`zero_hpz_partition_size`): ZeRO-3 keeps a second, bf16 copy of the
    weights split across this many cards, a node's; 1: none."""


PAPER = Setup()

_SHARDING = frozenset({Stage.ZERO1, Stage.ZERO2, Stage.ZERO3})
FSDP_STAGES = frozenset({Stage.ZERO2, Stage.ZERO3})
"""What `fully_shard` does: ZeRO-3, and with `reshard_after_forward=False`, ZeRO-2's memory."""
MEGATRON_SHARDED = frozenset({Band.MASTER, Band.MOMENTS})
"""What Megatron-LM's distributed optimizer splits: the optimizer's own state, 12/d of the 18 B."""


def _fp32_gradients(recipe: Recipe) -> int:
    """Bytes of DeepSpeed's fp32 gradient partition per weight: only where the gradients are narrower."""
    return 4 if recipe.has_master and recipe.nbytes(Band.GRADIENTS) < 4 else 0


def _deepspeed(recipe: Recipe, stage: Stage) -> tuple[Term, ...]:
    state = []
    for term in model_state(recipe):
        if term.band is Band.GRADIENTS:  # ZeRO-3 turns each gradient slice into fp32 as it arrives
            term = replace(term, under=term.under - {Stage.ZERO3})
        state.append(term)
    extra = Term(TermKind.FP32_GRADIENTS, Law.PER_WEIGHT, _fp32_gradients(recipe), split_by=_SHARDING, trains=True)
    gathered, computed = layer_in_hand(recipe)
    # ZeRO-2 reduces through its buckets (an overhead); ZeRO-3 allocates its layer on one card too.
    layer = (
        replace(gathered, under=frozenset({Stage.ZERO3}), one_card=True),
        # Its estimator's flat 4 B per weight of the largest layer: frozen or not, it does not ask.
        replace(computed, under=frozenset({Stage.ZERO3}), one_card=True, trains=False),
    )
    return (*state, extra, *layer, ACTIVATIONS)


@dataclass(frozen=True)
class Fsdp2Dtypes:
    """The bytes per weight of each dtype `fully_shard` uses, read from a recipe (docs/accounting.md).

    The recipe's weights are MixedPrecisionPolicy's `param_dtype` and its gradients the `reduce_dtype`;
    the sharded parameter keeps its original dtype, the master's where there is one.
    """

    param: Fraction
    """`param_dtype`: the all-gathered weights and the gradients autograd computes from them."""
    reduce: Fraction
    """`reduce_dtype`: the reduce-scatter's input (defaults to `param_dtype`)."""
    orig: Fraction
    """The sharded parameter's own dtype: what the optimizer updates, and its gradient's slice."""
    moments: Fraction


def fsdp2_dtypes(recipe: Recipe) -> Fsdp2Dtypes:
    """FSDP2's dtypes for `recipe`: no master copy, the sharded slice in the wider of weights and master."""
    param, master = recipe.nbytes(Band.WEIGHTS), recipe.nbytes(Band.MASTER)
    return Fsdp2Dtypes(param, recipe.nbytes(Band.GRADIENTS), max(param, master), recipe.nbytes(Band.MOMENTS))


def _fsdp2(recipe: Recipe, stage: Stage) -> tuple[Term, ...]:
    if stage not in FSDP_STAGES:
        return _paper(recipe)
    dtypes = fsdp2_dtypes(recipe)
    # The sharded parameter stays in its original dtype and the optimizer updates it: no master copy.
    # Its gradient's slice is cast back to that dtype after the reduce-scatter.
    sizes = {
        Band.WEIGHTS: dtypes.orig,
        Band.GRADIENTS: dtypes.orig,
        Band.MASTER: Fraction(0),
        Band.MOMENTS: dtypes.moments,
    }
    split = frozenset(FSDP_STAGES)
    state = tuple(replace(t, nbytes=sizes[t.band], split_by=split) for t in model_state(recipe) if t.band)
    passes = frozenset({Pass.FORWARD, Pass.BACKWARD})
    # Two layers' worth in param_dtype: the layer's unsharded copy, and beside it an all-gather's flat
    # output (in forward the layer's own, kept until the next copy-in; in backward the next one's, prefetched).
    gathered = Term(
        TermKind.GATHERED, Law.PER_LAYER, 2 * dtypes.param, under=frozenset({Stage.ZERO3}), during=passes, one_card=True
    )
    # reshard_after_forward=False: every layer stays unsharded, in param_dtype, until its backward: gathered
    # weights still, held as long as a pass lasts.
    kept = Term(TermKind.GATHERED, Law.PER_WEIGHT, dtypes.param, under=frozenset({Stage.ZERO2}), during=passes)
    # The backward's layer: its unsharded gradients in param_dtype, and a reduce-scatter input in
    # reduce_dtype (the previous layer's, held until this one reduces, then this layer's own).
    computed = Term(
        TermKind.COMPUTED,
        Law.PER_LAYER,
        dtypes.param + dtypes.reduce,
        under=split,
        during=frozenset({Pass.BACKWARD}),
        trains=True,
        one_card=True,
    )
    return (*state, gathered, kept, computed, ACTIVATIONS)


def megatron_gradients(recipe: Recipe) -> Fraction:
    """Bytes per weight of Megatron-LM's `main_grad` buffer: fp32 where a master copy trains narrower weights.

    With bf16 Megatron accumulates and all-reduces gradients in fp32 (`accumulate_allreduce_grads_in_fp32`);
    without a master copy the recipe's own gradients are the buffer's.
    """
    return max(Fraction(4), recipe.nbytes(Band.GRADIENTS)) if recipe.has_master else recipe.nbytes(Band.GRADIENTS)


def _megatron(recipe: Recipe, stage: Stage) -> tuple[Term, ...]:
    # Every stage but data parallelism is the distributed optimizer: the master copy and the moments are
    # split d ways; the weights' and main gradients' contiguous buffers stay whole on every card. Nothing
    # is gathered or reduce-scattered into a buffer of its own: both write into the whole buffers.
    grads = megatron_gradients(recipe)
    state = (
        replace(
            t,
            nbytes=grads if t.band is Band.GRADIENTS else t.nbytes,
            split_by=_SHARDING if t.band in MEGATRON_SHARDED else frozenset(),
        )
        for t in model_state(recipe)
    )
    return (*state, ACTIVATIONS)


def _paper(recipe: Recipe, stage: Stage | None = None) -> tuple[Term, ...]:
    return (*model_state(recipe), *layer_in_hand(recipe), ACTIVATIONS)


def _place(home: Home, placement: Placement) -> Place:
    if home is Home.NVME:
        return Place.NVME
    if home is Home.CPU:
        return Place.CPU_PINNED if placement.pin_memory else Place.CPU_PAGEABLE
    return Place.GPU


def _homed(term: Term, stage: Stage, setup: Setup) -> Term:
    placement = setup.placement
    band = term.kind.moves_with
    if not placement.offloads or term.law is not Law.PER_WEIGHT or band is None:
        return term
    if setup.accounting is Accounting.MEGATRON:  # its count has no offload: everything stays on the card
        return term
    if setup.accounting is Accounting.FSDP2 and stage in FSDP_STAGES:
        # CPUOffloadPolicy moves the sharded parameters with their gradients and optimizer state; Adam
        # makes its moments with zeros_like of the slice, which does not pin them.
        if term.band is Band.MOMENTS:
            return replace(term, place=Place.CPU_PAGEABLE)
        return replace(term, place=_place(Home.CPU, placement))
    return replace(term, place=_place(placement.band_home(stage, band), placement))


@lru_cache(maxsize=256)
def terms(recipe: Recipe, stage: Stage, setup: Setup = PAPER) -> tuple[Term, ...]:
    """Every term of a card under `stage`, counted as `setup` says and placed where it says."""
    build = {
        Accounting.PAPER: _paper,
        Accounting.DEEPSPEED: _deepspeed,
        Accounting.FSDP2: _fsdp2,
        Accounting.MEGATRON: _megatron,
    }
    built = build[setup.accounting](recipe, stage)
    if setup.hpz > 1:
        built = (*built, secondary_weights(recipe, setup.hpz))
    return tuple(_homed(term, stage, setup) for term in built)


def secondary_weights(recipe: Recipe, hpz: int) -> Term:
    """The secondary partition of ZeRO++'s hpZ: ZeRO-3's weights again, split across `hpz` cards, kept through the step.

    The ZeRO++ paper's 2Ψ/hpz more per card, at the weights' own bytes (bf16 in mixed precision).
    """
    return Term(
        TermKind.SECONDARY_WEIGHTS,
        Law.PER_WEIGHT,
        recipe.nbytes(Band.WEIGHTS),
        split_by=frozenset({Stage.ZERO3}),
        under=frozenset({Stage.ZERO3}),
        group=hpz,
    )


def differences(
    stage: Stage,
    recipe: Recipe,
    setup: Setup,
    padded: bool = False,
    module: int | None = None,
    frozen: bool = False,
) -> tuple[str, ...]:
    """Every way `setup` counts this stage differently from the paper, one sentence each.

    `module` is the model's largest module by its own weights, DeepSpeed's largest layer, where known.
    """
    said: list[str] = []
    if setup.accounting is Accounting.DEEPSPEED:
        hosted = Band.MASTER in setup.placement.moved(stage)
        said.extend(_deepspeed_differences(stage, recipe, padded, hosted, module))
        if frozen:
            said.append(
                "DeepSpeed's estimators count every weight as one that trains; here the frozen weights keep "
                "their weights band only, as the engine holds them, and the largest layer's 4 B stay."
            )
    elif setup.accounting is Accounting.FSDP2:
        said.extend(_fsdp2_differences(stage, recipe, setup.placement))
    elif setup.accounting is Accounting.MEGATRON:
        said.extend(_megatron_differences(stage, recipe, padded, setup.placement))
    caveat = setup.placement.caveat(stage)
    own_offload = (setup.accounting is Accounting.FSDP2 and stage in FSDP_STAGES) or (
        setup.accounting is Accounting.MEGATRON
    )
    if caveat and not own_offload:
        said.append(caveat)
    return tuple(said)


def _deepspeed_differences(stage: Stage, recipe: Recipe, padded: bool, hosted: bool, module: int | None) -> list[str]:
    said = []
    fp32 = _fp32_gradients(recipe)
    host = ", on the host with the optimizer state" if hosted else ""
    if fp32 and stage is Stage.ZERO3:
        narrow = recipe.nbytes(Band.GRADIENTS)
        said.append(
            f"DeepSpeed keeps the gradients' fp32 copy for the update instead of the {_b(narrow)}-byte one: "
            f"+{_b(fp32 - narrow)} B per weight, sharded{host}."
        )
    elif fp32:
        where = "on every card" if stage is Stage.DP else "sharded"
        said.append(
            f"DeepSpeed keeps the gradients' fp32 copy for the update: +{_b(Fraction(fp32))} B per weight, "
            f"{where}{host}."
        )
    if stage is Stage.ZERO1:
        said.append("DeepSpeed has no estimator for ZeRO-1: counted as ZeRO-2's, with the gradients kept whole.")
    if stage is Stage.ZERO2:
        said.append(
            "DeepSpeed's ZeRO-2 reduces gradients through its bucket, an overhead: no layer of whole gradients."
        )
    if stage is Stage.ZERO3:
        said.append(
            "DeepSpeed counts 4 B for each weight of the largest layer, its weights and gradients assembled, "
            "even on one card."
        )
        if module is not None:
            said.append(
                f"DeepSpeed's largest layer is the largest module by its own weights, {module:,} here: an "
                "embedding or one matrix, not a whole block, as ZeRO-3 gathers one module at a time."
            )
    if padded and stage is not Stage.DP:
        said.append(
            "DeepSpeed's estimator does not round a slice up to whole weights: here, where the cards do not "
            "divide the weights evenly, it counts a few bytes less."
        )
    return said


def _fsdp2_differences(stage: Stage, recipe: Recipe, placement: Placement) -> list[str]:
    if stage not in FSDP_STAGES:
        return [f"FSDP2's fully_shard has no {stage.info.title}: counted as the paper counts it."]
    said = []
    dtypes = fsdp2_dtypes(recipe)
    if recipe.has_master:
        extra = dtypes.orig - recipe.nbytes(Band.WEIGHTS)
        said.append(
            f"FSDP2 keeps each weight's slice in its own {_b(dtypes.orig)}-byte dtype and updates it there: no "
            "separate master copy. MixedPrecisionPolicy casts only the gathered copy to the "
            f"{_b(dtypes.param)}-byte param_dtype."
        )
        said.append(
            f"FSDP2 reduce-scatters the gradients in reduce_dtype ({_b(dtypes.reduce)} B here, the recipe's gradients) "
            f"and casts each slice back to the weights' {_b(dtypes.orig)}-byte dtype: +{_b(extra)} B per weight "
            f"each for the weights' and the gradients' slices, −{_b(recipe.nbytes(Band.MASTER))} B for the master "
            "copy, sharded."
        )
    if stage is Stage.ZERO3:
        said.append(
            f"FSDP2 holds two layers' weights in param_dtype ({_b(dtypes.param)} B) while it works on one: the layer "
            "and an all-gather's flat output (its own until the next copy-in, or the next layer's, prefetched); in "
            f"the backward also the layer's gradients ({_b(dtypes.param)} B) and a reduce-scatter input "
            f"({_b(dtypes.reduce)} B)."
        )
    else:
        said.append(
            "FSDP2's ZeRO-2 is fully_shard with reshard_after_forward=False: the weights it gathers stay "
            f"whole, in param_dtype ({_b(dtypes.param)} B), from the forward to the backward, and only the slice "
            "stays between steps."
        )
    said.append(
        "FSDP2 cuts each parameter along its first dimension and pads that dimension to a multiple of the "
        "cards: every card keeps ceil(rows / N) rows of each parameter's weights, a little more than an even "
        "split of the model where a parameter's rows do not divide."
    )
    if placement.offloads:
        said.append(
            "FSDP2's CPUOffloadPolicy moves the weights' slices, their gradients and the optimizer state to the "
            "CPU; with pin_memory, the default, the weights' and gradients' slices are page-locked, Adam's moments "
            "(the optimizer's zeros_like of the slice) are not."
        )
        if placement.offload is Offload.OPTIMIZER:
            said.append("FSDP2 has no offload of the optimizer alone: counted as CPUOffloadPolicy, weights too.")
        if placement.target is Device.NVME:
            said.append("FSDP2 has no NVMe offload: counted on the CPU.")
    return said


def _megatron_differences(stage: Stage, recipe: Recipe, padded: bool, placement: Placement) -> list[str]:
    said = []
    grads = megatron_gradients(recipe)
    wide = grads - recipe.nbytes(Band.GRADIENTS)
    if wide:
        said.append(
            f"Megatron-LM accumulates and reduces the gradients in an fp32 main_grad buffer: +{_b(wide)} B per weight, "
            f"on every card, and {_b(grads)} B a gradient on the wire."
        )
    whole = recipe.nbytes(Band.WEIGHTS) + grads
    split = sum((recipe.nbytes(band) for band in MEGATRON_SHARDED), Fraction(0))
    if stage is Stage.DP:
        said.append(
            f"Data parallelism is Megatron-LM without its distributed optimizer: {_b(whole + split)} B per weight on "
            "every card."
        )
        return said
    if stage is not Stage.ZERO1:
        said.append(
            f"Megatron-LM's count has no {stage.info.title}: counted as its distributed optimizer, ZeRO-1's "
            "arrangement (Megatron-FSDP, which splits more, is not in that count)."
        )
        # Its collectives (`wire`) stay the stage's: the same bytes as the distributed optimizer's for ZeRO-2,
        # Megatron-FSDP's gathers for ZeRO-3; the sentence says which, beside the memory counted.
        said.append(
            "Its traffic is ZeRO-3's, as Megatron-FSDP runs it: the weights gathered for each pass and the main_grad "
            "reduce-scattered, 3P where the distributed optimizer sends 2P; its memory stays the distributed "
            "optimizer's."
            if stage is Stage.ZERO3
            else "Its traffic is the distributed optimizer's: the main_grad reduce-scattered as the backward pass "
            "makes it, the weights all-gathered after the update."
        )
    said.append(
        "Megatron-LM's distributed optimizer splits only the master copy and the moments: "
        f"{_b(whole)} + {_b(split)}/N B per weight. The weights' and main gradients' buffers stay whole on every "
        "card; the reduce-scatter and the all-gather write into them, with no buffer of a layer's own."
    )
    if padded:
        said.append(
            "Megatron-LM's formula divides the optimizer state by the cards without rounding a slice up to "
            "whole weights: here, where the cards do not divide the weights evenly, it counts a few bytes less."
        )
    if placement.offloads:
        said.append(
            "Megatron-LM's count has no offload (its --optimizer-cpu-offload is not in it): counted on the card."
        )
    return said
