"""Three ways to count a card: the ZeRO paper's, DeepSpeed's and FSDP2's, each a list of terms.

`paper` is the default: the ZeRO paper's K = 12 and the seed's table. `deepspeed` is what
DeepSpeed's estimators (`estimate_zero2_model_states_mem_needs`, `estimate_zero3_model_states_mem_needs`)
count, and `fsdp2` what `fully_shard` allocates (docs/accounting.md cites the source lines). Each
difference from the paper is a sentence, `differences`, shown on the page beside the figures.

Placement is applied here too: a term whose band is offloaded is given the host's place.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum
from functools import lru_cache

from app.domain.bands import Band, Recipe
from app.domain.card import ACTIVATIONS, Law, Pass, Place, Term, layer_in_hand, model_state
from app.domain.placement import NO_OFFLOAD, Device, Home, Placement
from app.domain.stages import Stage


class Accounting(StrEnum):
    """Whose count of a card's memory."""

    PAPER = "paper"
    DEEPSPEED = "deepspeed"
    FSDP2 = "fsdp2"


@dataclass(frozen=True)
class Setup:
    """How a run is counted and where its bands live."""

    accounting: Accounting = Accounting.PAPER
    placement: Placement = NO_OFFLOAD


PAPER = Setup()

_SHARDING = frozenset({Stage.ZERO1, Stage.ZERO2, Stage.ZERO3})
FSDP_STAGES = frozenset({Stage.ZERO2, Stage.ZERO3})
"""What `fully_shard` does: ZeRO-3, and with `reshard_after_forward=False`, ZeRO-2's memory."""
FP32_GRADIENTS = "fp32 gradients"
KEPT_GATHERED = "kept gathered"


def _fp32_gradients(recipe: Recipe) -> int:
    """Bytes of DeepSpeed's fp32 gradient partition per weight: only where the gradients are narrower."""
    return 4 if recipe.has_master and recipe.nbytes(Band.GRADIENTS) < 4 else 0


def _deepspeed(recipe: Recipe, stage: Stage) -> tuple[Term, ...]:
    state = []
    for term in model_state(recipe):
        if term.band is Band.GRADIENTS:  # ZeRO-3 turns each gradient slice into fp32 as it arrives
            term = replace(term, under=term.under - {Stage.ZERO3})
        state.append(term)
    extra = Term(FP32_GRADIENTS, Law.PER_WEIGHT, _fp32_gradients(recipe), split_by=_SHARDING, trains=True)
    gathered, computed = layer_in_hand(recipe)
    # ZeRO-2 reduces through its buckets (an overhead); ZeRO-3 allocates its layer on one card too.
    layer = (
        replace(gathered, under=frozenset({Stage.ZERO3}), one_card=True),
        replace(computed, under=frozenset({Stage.ZERO3}), one_card=True),
    )
    return (*state, extra, *layer, ACTIVATIONS)


def _fsdp2(recipe: Recipe, stage: Stage) -> tuple[Term, ...]:
    if stage not in FSDP_STAGES:
        return _paper(recipe)
    # The sharded parameter keeps its own dtype, the master's (fp32 under MixedPrecisionPolicy), and
    # its gradient is reduced into that dtype: no separate master copy, fp32 gradients.
    widest = max(recipe.nbytes(Band.WEIGHTS), recipe.nbytes(Band.MASTER))
    sizes = {Band.WEIGHTS: widest, Band.GRADIENTS: widest, Band.MASTER: 0, Band.MOMENTS: recipe.nbytes(Band.MOMENTS)}
    split = frozenset(FSDP_STAGES)
    state = tuple(replace(t, nbytes=sizes[t.band], split_by=split) for t in model_state(recipe) if t.band)
    param, reduce = recipe.nbytes(Band.WEIGHTS), widest
    passes = frozenset({Pass.FORWARD, Pass.BACKWARD})
    gathered = Term("gathered", Law.PER_LAYER, 2 * param, under=frozenset({Stage.ZERO3}), during=passes, one_card=True)
    kept = Term(KEPT_GATHERED, Law.PER_WEIGHT, param, under=frozenset({Stage.ZERO2}), during=passes)
    computed = Term(
        "computed",
        Law.PER_LAYER,
        param + reduce,
        under=split,
        during=frozenset({Pass.BACKWARD}),
        trains=True,
        one_card=True,
    )
    return (*state, gathered, kept, computed, ACTIVATIONS)


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
    if not placement.offloads or term.law is not Law.PER_WEIGHT or term.name == KEPT_GATHERED:
        return term
    if setup.accounting is Accounting.FSDP2 and stage in FSDP_STAGES:
        # CPUOffloadPolicy moves the sharded parameters with their gradients and optimizer state.
        return replace(term, place=_place(Home.CPU, placement))
    band = term.band or Band.MASTER  # DeepSpeed's fp32 gradients go with the optimizer state
    return replace(term, place=_place(placement.band_home(stage, band), placement))


@lru_cache(maxsize=256)
def terms(recipe: Recipe, stage: Stage, setup: Setup = PAPER) -> tuple[Term, ...]:
    """Every term of a card under `stage`, counted as `setup` says and placed where it says."""
    build = {Accounting.PAPER: _paper, Accounting.DEEPSPEED: _deepspeed, Accounting.FSDP2: _fsdp2}
    return tuple(_homed(term, stage, setup) for term in build[setup.accounting](recipe, stage))


def differences(stage: Stage, recipe: Recipe, setup: Setup, padded: bool = False) -> tuple[str, ...]:
    """Every way `setup` counts this stage differently from the paper, one sentence each."""
    said: list[str] = []
    if setup.accounting is Accounting.DEEPSPEED:
        said.extend(_deepspeed_differences(stage, recipe, padded))
    elif setup.accounting is Accounting.FSDP2:
        said.extend(_fsdp2_differences(stage, recipe, setup.placement))
    caveat = setup.placement.caveat(stage)
    if caveat and not (setup.accounting is Accounting.FSDP2 and stage in FSDP_STAGES):
        said.append(caveat)
    return tuple(said)


def _deepspeed_differences(stage: Stage, recipe: Recipe, padded: bool) -> list[str]:
    said = []
    fp32 = _fp32_gradients(recipe)
    if fp32 and stage is Stage.ZERO3:
        narrow = recipe.nbytes(Band.GRADIENTS)
        said.append(
            f"DeepSpeed keeps the gradients' fp32 copy for the update instead of the {narrow}-byte one: "
            f"+{fp32 - narrow} B per weight, sharded."
        )
    elif fp32:
        where = "on every card" if stage is Stage.DP else "sharded"
        said.append(f"DeepSpeed keeps the gradients' fp32 copy for the update: +{fp32} B per weight, {where}.")
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
    if recipe.has_master:
        said.append(
            "FSDP2 keeps each weight's slice in fp32, its own dtype, and no separate master copy; "
            "its gradients are reduced into fp32: +2 B per weight, sharded."
        )
    if stage is Stage.ZERO3:
        said.append(
            "FSDP2 gathers the next layer while it works on this one: two layers' weights at once, "
            "and their gradients in bf16 and fp32 for the reduce-scatter."
        )
    else:
        said.append(
            "FSDP2's ZeRO-2 is fully_shard with reshard_after_forward=False: the weights it gathers stay "
            "whole from the forward to the backward."
        )
    if placement.offloads:
        said.append("FSDP2's CPUOffloadPolicy moves the weights' slices with the optimizer state, all to the CPU.")
        if placement.target is Device.NVME:
            said.append("FSDP2 has no NVMe offload: counted on the CPU.")
    return said
