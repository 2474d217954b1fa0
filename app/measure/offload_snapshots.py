"""FSDP2's CPU offload as PyTorch ran it on 8 ranks, set against the model's `fsdp2` accounting.

`zero-bands measure` runs one more arrangement after the seven of `app.measure.snapshots`: ZeRO-3 with
`fully_shard(offload_policy=CPUOffloadPolicy(pin_memory=False), mp_policy=MixedPrecisionPolicy(
param_dtype=bfloat16))`, the same toy on the same 8 gloo ranks. On a CPU-only machine everything is
"on the CPU", so the snapshot keeps apart what the policy places there (the sharded parameters'
storage, their gradients and Adam's state, by category) from what the compute path allocates for the
layer in hand (the unsharded copy, the all-gathers' flat outputs, the unsharded gradients and the
reduce-scatter input), which a GPU would hold. The first is set against the model's CPU bytes
(`per_gpu_bytes` in CPU_PINNED and CPU_PAGEABLE), the second against its GPU terms moment by moment,
and every byte of difference is named; the tests require the unnamed rest to be 0.

The dataclasses are also the JSON of `/api/measured` (its `offload` field), field for field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.domain.accounting import Accounting, Setup, fsdp2_dtypes, terms
from app.domain.placement import Offload, Placement
from app.domain.recipes import RECIPES, Band, Recipe, RecipeName
from app.domain.stages import Stage
from app.domain.state_bytes import band_bytes, per_gpu_bytes
from app.domain.terms import AT_REST, Moment, Pass, Place, TermKind, term_bytes
from app.measure.phases import phase_of

SETUP = Setup(Accounting.FSDP2, Placement(Offload.OPTIMIZER_PARAMS))
"""The model's counterpart: FSDP2's count, weights' slices and optimizer state offloaded (the moments pageable)."""

CATEGORIES = ("params", "grads", "optimizer")
"""What CPUOffloadPolicy places on the CPU, in the snapshot's names (the step counters apart)."""

CATEGORY_TITLES = {"params": "Weights' slices", "grads": "Gradients' slices", "optimizer": "Adam's moments"}


@dataclass(frozen=True)
class Placed:
    """Bytes of one category on the CPU: its storages, and what its tensors cover."""

    name: str
    storage: int
    viewed: int


@dataclass(frozen=True)
class ComputeBytes:
    """What the compute path holds at one moment beyond the sharded state, by kind, in bytes."""

    part: str
    layer: int | None
    phase: int
    """The model's step phase (0-20), as `app.measure.snapshots.phase_of` places it."""
    placed: int
    """The CPU-placed state at this moment: it should not move."""
    unsharded: int
    """Each parameter's unsharded copy, in param_dtype."""
    all_gather: int
    """The all-gathers' flat outputs: a prefetched group's, or the one kept until the next copy-in."""
    grads: int
    """The unsharded gradients, in param_dtype."""
    reduce_scatter: int
    """Reduce-scatter inputs, in reduce_dtype, kept until the next layer reduces."""

    @property
    def total(self) -> int:
        """All of it."""
        return self.unsharded + self.all_gather + self.grads + self.reduce_scatter


@dataclass(frozen=True)
class OffloadRankHeld:
    """One rank: what the policy placed on the CPU after the step, and the compute path through it."""

    rank: int
    placed: tuple[Placed, ...]
    counters_bytes: int
    """Adam's step counters: a 4-byte tensor per parameter, on the CPU with the state."""
    devices: tuple[str, ...]
    pinned: bool
    phases: tuple[ComputeBytes, ...]

    @property
    def placed_bytes(self) -> int:
        """Everything on the CPU: the three categories' storages and the counters."""
        return sum(p.storage for p in self.placed) + self.counters_bytes

    def category(self, name: str) -> Placed:
        """One category."""
        (found,) = (p for p in self.placed if p.name == name)
        return found


@dataclass(frozen=True)
class OffloadSnapshot:
    """The offload arrangement as the snapshot records it."""

    stage: Stage
    title: str
    recipe: Recipe
    """The model's recipe it is set against: bf16 compute, fp32 slices."""
    seconds: float
    param_dtype: str
    """The sharded parameters' dtype, as measured."""
    compute_dtype: str
    ranks: tuple[OffloadRankHeld, ...]


def _moment(data: Mapping[str, Any], layers: int) -> ComputeBytes:
    part, layer = str(data["part"]), None if data["layer"] is None else int(data["layer"])
    by = data["by"]
    moment = ComputeBytes(
        part,
        layer,
        phase_of(part, layer, layers),
        int(data["placed"]),
        int(by["unsharded"]),
        int(by["all-gather"]),
        int(by["grads"]),
        int(by["reduce-scatter"]),
    )
    if moment.total != int(data["compute"]):
        raise ValueError(f"compute bytes {data['compute']} are not the sum of their kinds, {moment.total}")
    return moment


def parse_offload(data: Mapping[str, Any], layers: int) -> OffloadSnapshot:
    """The offload arrangement from the snapshot's `offload`; KeyError, TypeError or ValueError if malformed."""
    ranks = tuple(
        OffloadRankHeld(
            rank=int(r["rank"]),
            placed=tuple(Placed(name, int(r["placed"][name]), int(r["viewed"][name])) for name in CATEGORIES),
            counters_bytes=int(r["placed"]["counters"]),
            devices=tuple(str(d) for d in r["devices"]),
            pinned=bool(r["pinned"]),
            phases=tuple(_moment(p, layers) for p in r["phases"]),
        )
        for r in data["ranks"]
    )
    dtypes = data["ranks"][0]["dtypes"]
    return OffloadSnapshot(
        stage=Stage(data["stage"]),
        title=str(data["title"]),
        recipe=RECIPES[RecipeName(data["recipe"])],
        seconds=float(data["seconds"]),
        param_dtype=str(dtypes["params"]),
        compute_dtype=str(dtypes["compute"]),
        ranks=ranks,
    )


# The comparison.


class OffloadReason(StrEnum):
    """A named cause of a difference between the model's offload bytes and the measured ones."""

    STEP_COUNTERS = "step-counters"
    PADDING = "padding"
    PAGEABLE = "pageable"
    FIRST_REDUCE = "first-reduce"
    NOTHING_TO_PREFETCH = "nothing-to-prefetch"


@dataclass(frozen=True)
class OffloadDifference:
    """Bytes by which the measurement exceeds the model (negative: falls short), and why."""

    reason: OffloadReason
    bytes: int
    text: str


@dataclass(frozen=True)
class CategoryAgreement:
    """One category on one rank's CPU: the model's bytes against the measured storage."""

    name: str
    title: str
    model_bytes: int
    measured_bytes: int


@dataclass(frozen=True)
class OffloadRankAgreement:
    """One rank's CPU: what the policy placed there against the model's, every byte of difference named."""

    rank: int
    measured_bytes: int
    model_pinned_bytes: int
    model_pageable_bytes: int
    categories: tuple[CategoryAgreement, ...]
    differences: tuple[OffloadDifference, ...]
    unexplained_bytes: int

    @property
    def model_bytes(self) -> int:
        """The model's CPU bytes, pinned and not."""
        return self.model_pinned_bytes + self.model_pageable_bytes


@dataclass(frozen=True)
class ComputeAgreement:
    """One moment of the step: the compute path's bytes (a GPU's) against the model's GPU terms."""

    phase: int
    label: str
    model_gathered: int
    """The model's weights in hand: the `gathered` term (ZeRO-3's two layers in param_dtype)."""
    measured_gathered: int
    """The unsharded copy and the all-gathers' flat outputs."""
    model_backward: int
    """The model's `computed` term: the layer's gradients and a reduce-scatter input."""
    measured_backward: int
    """The unsharded gradients and the reduce-scatter inputs held."""
    differences: tuple[OffloadDifference, ...]
    unexplained_bytes: int
    ranks_alike: bool

    @property
    def model_bytes(self) -> int:
        """All the model counts on the card at this moment (activations apart)."""
        return self.model_gathered + self.model_backward

    @property
    def measured_bytes(self) -> int:
        """All the compute path held."""
        return self.measured_gathered + self.measured_backward


@dataclass(frozen=True)
class OffloadComparison:
    """The offload arrangement against the model, rank by rank on the CPU and moment by moment on the card."""

    stage: Stage
    title: str
    recipe: str
    seconds: float
    param_dtype: str
    compute_dtype: str
    pinned: bool
    devices: tuple[str, ...]
    ranks: tuple[OffloadRankAgreement, ...]
    compute: tuple[ComputeAgreement, ...]
    """Rank 0's moments (`ranks_alike` says whether every rank's are the same)."""

    @property
    def unexplained(self) -> int:
        """The largest unnamed difference, on any rank's CPU or at any moment, in bytes."""
        return max(
            max(abs(r.unexplained_bytes) for r in self.ranks), max(abs(c.unexplained_bytes) for c in self.compute)
        )


def _model_categories(offload: OffloadSnapshot, params: int, gpus: int) -> dict[str, int]:
    def band(b: Band) -> int:
        return band_bytes(offload.stage, b, params, gpus, offload.recipe, setup=SETUP)

    return {
        "params": band(Band.WEIGHTS),
        "grads": band(Band.GRADIENTS),
        "optimizer": band(Band.MASTER) + band(Band.MOMENTS),
    }


def _cpu_differences(rank: OffloadRankHeld, model_pinned: int) -> tuple[OffloadDifference, ...]:
    found = []
    if rank.counters_bytes:
        found.append(
            OffloadDifference(
                OffloadReason.STEP_COUNTERS,
                rank.counters_bytes,
                f"Adam's step counters: {rank.counters_bytes // 4} × 4 B, one for each layer's weight, on the CPU "
                "with the state. The model counts no counters.",
            )
        )
    padding = sum(p.storage - p.viewed for p in rank.placed)
    found.append(
        OffloadDifference(
            OffloadReason.PADDING,
            padding,
            "Padding: FSDP2 pads each parameter's first dimension to a multiple of the ranks; "
            + (
                "the 64 rows divide by 8, so none."
                if padding == 0
                else f"{padding:,} B of storage that no tensor covers on this rank."
            ),
        )
    )
    if model_pinned and not rank.pinned:
        found.append(
            OffloadDifference(
                OffloadReason.PAGEABLE,
                0,
                f"Pageable, not pinned: the model counts these {model_pinned:,} B in page-locked memory, "
                "CPUOffloadPolicy's default, but pinning needs an accelerator, so the measurement runs "
                "pin_memory=False. The bytes are the same; Adam's moments are pageable either way (the "
                "optimizer makes them with zeros_like).",
            )
        )
    return tuple(found)


def _rank_agreement(offload: OffloadSnapshot, rank: OffloadRankHeld, params: int, gpus: int) -> OffloadRankAgreement:
    def model(place: Place) -> int:
        return per_gpu_bytes(offload.stage, params, gpus, offload.recipe, setup=SETUP, place=place)

    pinned, pageable = model(Place.CPU_PINNED), model(Place.CPU_PAGEABLE)
    by_model = _model_categories(offload, params, gpus)
    categories = tuple(
        CategoryAgreement(p.name, CATEGORY_TITLES[p.name], by_model[p.name], p.storage) for p in rank.placed
    )
    differences = _cpu_differences(rank, pinned)
    unexplained = rank.placed_bytes - pinned - pageable - sum(d.bytes for d in differences)
    return OffloadRankAgreement(rank.rank, rank.placed_bytes, pinned, pageable, categories, differences, unexplained)


def _label(point: ComputeBytes) -> str:
    if point.layer is not None:
        return f"{point.part.capitalize()} {point.layer}"
    return {"start": "Start", "after-backward": "After backward", "after-update": "After update"}[point.part]


def _compute_agreement(
    offload: OffloadSnapshot, point: ComputeBytes, params: int, gpus: int, layer: int, layers: int, alike: bool
) -> ComputeAgreement:
    all_terms = terms(offload.recipe, offload.stage, SETUP)
    moment = Moment(Pass(point.part), layer) if point.layer is not None else AT_REST

    def model(kind: TermKind) -> int:
        return sum(
            term_bytes(t, offload.stage, params, gpus, moment)
            for t in all_terms
            if t.place is Place.GPU and t.kind is kind
        )

    # ZeRO-2's kept weights would be gathered too; under ZeRO-3 that term is 0.
    model_gathered = model(TermKind.GATHERED)
    model_backward = model(TermKind.COMPUTED)
    dtypes = fsdp2_dtypes(offload.recipe)
    found = []
    # The model's backward counts a reduce-scatter input held at every layer; the first layer of the
    # backward has none before it: only its own comes, after the hook.
    if point.part == "backward" and point.layer == layers - 1 and point.reduce_scatter == 0:
        found.append(
            OffloadDifference(
                OffloadReason.FIRST_REDUCE,
                -dtypes.reduce * layer,
                f"Backward {point.layer} is the first layer to reduce: no earlier layer's reduce-scatter input "
                f"({dtypes.reduce} B × {layer:,} weights, reduce_dtype) is held yet; its own comes after its "
                "gradients, once the hook has fired.",
            )
        )
    # The model counts a second layer's flat output at every layer; the last layer of the backward has
    # nothing left to prefetch.
    if point.part == "backward" and point.layer == 0 and point.all_gather == 0:
        found.append(
            OffloadDifference(
                OffloadReason.NOTHING_TO_PREFETCH,
                -dtypes.param * layer,
                f"Backward 0 is the last layer: nothing is left to prefetch, so no second all-gather output "
                f"({dtypes.param} B × {layer:,} weights, param_dtype) sits beside it.",
            )
        )
    measured_gathered = point.unsharded + point.all_gather
    measured_backward = point.grads + point.reduce_scatter
    unexplained = measured_gathered + measured_backward - model_gathered - model_backward - sum(d.bytes for d in found)
    return ComputeAgreement(
        phase=point.phase,
        label=_label(point),
        model_gathered=model_gathered,
        measured_gathered=measured_gathered,
        model_backward=model_backward,
        measured_backward=measured_backward,
        differences=tuple(found),
        unexplained_bytes=unexplained,
        ranks_alike=alike,
    )


def compare_offload(offload: OffloadSnapshot, params: int, gpus: int, layer: int, layers: int) -> OffloadComparison:
    """The offload arrangement against the model: `params` weights on `gpus` ranks, layers of `layer` weights."""
    first = offload.ranks[0]
    compute = tuple(
        _compute_agreement(
            offload,
            point,
            params,
            gpus,
            layer,
            layers,
            all(r.phases[i].total == point.total for r in offload.ranks),
        )
        for i, point in enumerate(first.phases)
    )
    return OffloadComparison(
        stage=offload.stage,
        title=offload.title,
        recipe=offload.recipe.name,
        seconds=offload.seconds,
        param_dtype=offload.param_dtype,
        compute_dtype=offload.compute_dtype,
        pinned=all(r.pinned for r in offload.ranks),
        devices=tuple(sorted({d for r in offload.ranks for d in r.devices})),
        ranks=tuple(_rank_agreement(offload, r, params, gpus) for r in offload.ranks),
        compute=compute,
    )
