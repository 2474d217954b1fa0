"""The model cut across 8 ranks as PyTorch ran it (FSDP2 + TP, a 2-stage pipeline), set against the model.

`zero-bands measure` runs, after the other arrangements, the two of `app.measure.cut_runner` on the same
8 gloo ranks, and the snapshot records them under `cut`: for every rank and parameter, the bytes of its
local shard's weights, gradients, Adam's moments and step counter; for the pipeline, each stage's
activations at their peak and the micro-batches they belong to. This module reads them (no torch) and
sets each rank against the model's figure for its layout, every byte of difference named; the tests
require the unnamed rest to be 0.

The model's figure for one rank comes from one function, `cut_card_bytes` (and `cut_band_bytes` band by
band): the domain's count of the cut (`Run.cut`, `Run.cards`), the states of the rank's pipeline stage's
weights ÷ tp, sharded by the ZeRO stage over the data-parallel group (`Run.shards`). The dataclasses are
also the JSON of `/api/measured` (its `cut` field).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from app.domain.loaded import in_flight as loaded_in_flight
from app.domain.parallel import Cut
from app.domain.recipes import Band, Recipe
from app.domain.run import Run
from app.domain.stages import Stage
from app.domain.state_bytes import band_bytes

BANDS = (Band.WEIGHTS, Band.GRADIENTS, Band.MOMENTS)
"""The bands fp32 training keeps: no master copy (the weights are what Adam updates)."""

BAND_TITLES = {Band.WEIGHTS: "Weights", Band.GRADIENTS: "Gradients", Band.MOMENTS: "Adam's moments"}


def cut_run(params: int, largest_layer: int, cut: Cut, dp: int, recipe: Recipe) -> Run:
    """The measured layout as the domain sees it: the toy's weights on tp × pp × dp cards, cut by `cut`."""
    return Run(params=params, gpus=cut.model_parallel * dp, recipe=recipe, largest_layer=largest_layer, cut=cut)


def cut_band_bytes(band: Band, stage: Stage, run: Run, index: int = 0) -> int:
    """The model's bytes of one band on a card of pipeline stage `index`: the domain's count of the cut.

    The card keeps its stage's weights ÷ tp (`Run.cards`, `loaded.stage_load`), and ZeRO's `stage` shards
    their state over the data-parallel group (`Run.shards`). The one place the comparison takes the model's
    figure from.
    """
    card = run.cards[index]
    return band_bytes(stage, band, card.params, run.shards, run.recipe)


def cut_card_bytes(stage: Stage, run: Run, index: int = 0) -> int:
    """The model's bytes of model state on a card of pipeline stage `index`: every band of `cut_band_bytes`."""
    return sum(cut_band_bytes(band, stage, run, index) for band in Band)


def in_flight(schedule: str, cut: Cut, index: int) -> int:
    """Micro-batches whose activations pipeline stage `index` keeps at its busiest.

    1F1B: the domain's count (`loaded.in_flight`: min(pp − index, microbatches), Narayanan et al. 2021, §2.2);
    GPipe runs every micro-batch's forward before any backward, so every stage keeps all of them.
    """
    return int(loaded_in_flight(cut, index)) if schedule == "1F1B" else cut.microbatches


@dataclass(frozen=True)
class ParamHeld:
    """One parameter on one rank: its whole shape, its local shard's, how it is placed, and its bytes."""

    name: str
    shape: tuple[int, ...]
    local_shape: tuple[int, ...]
    placements: str
    """The DTensor's placements on the mesh, as torch prints them; empty for a plain tensor."""
    weights: int
    gradients: int
    moments: int
    """Adam's two moments together."""
    counters: int
    """Adam's step counter for this parameter (4 B)."""

    def nbytes(self, band: Band) -> int:
        """Bytes of one band (0 for the master copy fp32 training does not keep)."""
        return {Band.WEIGHTS: self.weights, Band.GRADIENTS: self.gradients, Band.MOMENTS: self.moments}.get(band, 0)


@dataclass(frozen=True)
class CutRankHeld:
    """One rank: where it sits on the mesh, what it holds, and (for a pipeline) its activations at their peak."""

    rank: int
    place: str
    """Its coordinates on the mesh, in words: "dp 0, tp 1" or "stage 0, dp 2"."""
    stage_index: int
    """Its pipeline stage (0 without a pipeline)."""
    params: tuple[ParamHeld, ...]
    peak_activation_bytes: int
    peak_microbatches: int

    def band_bytes(self, band: Band) -> int:
        """Bytes of one band over the rank's parameters."""
        return sum(p.nbytes(band) for p in self.params)

    @property
    def counters_bytes(self) -> int:
        """Adam's step counters: one 4-byte tensor per parameter."""
        return sum(p.counters for p in self.params)

    @property
    def measured_bytes(self) -> int:
        """Everything the rank keeps of model state: every band and the counters."""
        return sum(self.band_bytes(band) for band in BANDS) + self.counters_bytes


@dataclass(frozen=True)
class CutMeasured:
    """One cut arrangement as PyTorch ran it."""

    key: str
    """tp, pp-1F1B or pp-GPipe."""
    title: str
    schedule: str
    """The pipeline's schedule (1F1B, GPipe); empty without a pipeline."""
    seconds: float
    stage: Stage
    """ZeRO's stage over the data-parallel group: ZeRO-3 (FSDP2) with TP, plain data parallelism in the pipeline."""
    tp: int
    pp: int
    dp: int
    params: int
    """Weights of the whole model."""
    largest_layer: int
    """Weights of its largest layer (the MLP's up or down; one Linear in the pipeline)."""
    microbatches: int
    activation_per_microbatch: int
    """Bytes one micro-batch's forward keeps on a stage, by hand: each Linear keeps its input (0 with TP)."""
    ranks: tuple[CutRankHeld, ...]

    @property
    def cut(self) -> Cut:
        """The layout as the domain declares it."""
        return Cut(tp=self.tp, pp=self.pp, microbatches=self.microbatches)

    def run(self, recipe: Recipe) -> Run:
        """The same layout as the model sees it."""
        return cut_run(self.params, self.largest_layer, self.cut, self.dp, recipe)


@dataclass(frozen=True)
class CutSnapshot:
    """The cut arrangements as the snapshot records them."""

    arrangements: tuple[CutMeasured, ...]


def _param(data: Mapping[str, Any]) -> ParamHeld:
    return ParamHeld(
        name=str(data["name"]),
        shape=tuple(int(n) for n in data["shape"]),
        local_shape=tuple(int(n) for n in data["local_shape"]),
        placements=str(data["placements"]),
        weights=int(data["weights"]),
        gradients=int(data["gradients"]),
        moments=int(data["moments"]),
        counters=int(data["counters"]),
    )


def _mesh(data: Mapping[str, Any]) -> dict[str, int]:
    return {str(name): int(size) for name, size in zip(data["names"], data["shape"], strict=True)}


def parse_cut(data: Mapping[str, Any]) -> CutSnapshot:
    """The cut arrangements from the snapshot's `cut`; KeyError, TypeError or ValueError if malformed."""
    tp = data["tp"]
    mesh, toy = _mesh(tp["mesh"]), tp["model"]
    hidden = int(toy["hidden"])
    # Each block: q, k, v and o (h × h each) and the MLP's up and down (4h × h each): 12 h².
    found = [
        CutMeasured(
            key="tp",
            title=str(tp["title"]),
            schedule="",
            seconds=float(tp["seconds"]),
            stage=Stage.ZERO3,
            tp=mesh["tp"],
            pp=1,
            dp=mesh["dp"],
            params=int(toy["blocks"]) * 12 * hidden * hidden,
            largest_layer=4 * hidden * hidden,
            microbatches=1,
            activation_per_microbatch=0,
            ranks=tuple(
                CutRankHeld(
                    int(r["rank"]),
                    f"dp {r['dp_rank']}, tp {r['tp_rank']}",
                    0,
                    tuple(_param(p) for p in r["params"]),
                    0,
                    0,
                )
                for r in tp["ranks"]
            ),
        )
    ]
    pp = data["pp"]
    mesh, toy = _mesh(pp["mesh"]), pp["model"]
    layers, rows, columns = int(toy["layers"]), int(toy["rows"]), int(toy["columns"])
    # Each Linear keeps its input for the weight's gradient: micro-batch rows × columns in fp32.
    per_microbatch = layers // mesh["pp"] * int(pp["microbatch_rows"]) * columns * 4
    for schedule in pp["schedules"]:
        found.append(
            CutMeasured(
                key=f"pp-{schedule['name']}",
                title=f"{pp['title']}, {schedule['name']}",
                schedule=str(schedule["name"]),
                seconds=float(schedule["seconds"]),
                stage=Stage.DP,
                tp=1,
                pp=mesh["pp"],
                dp=mesh["dp"],
                params=layers * rows * columns,
                largest_layer=rows * columns,
                microbatches=int(pp["microbatches"]),
                activation_per_microbatch=per_microbatch,
                ranks=tuple(
                    CutRankHeld(
                        int(r["rank"]),
                        f"stage {r['stage']}, dp {r['dp_rank']}",
                        int(r["stage"]),
                        tuple(_param(p) for p in r["params"]),
                        int(r["activations"]["peak_bytes"]),
                        int(r["activations"]["peak_microbatches"]),
                    )
                    for r in schedule["ranks"]
                ),
            )
        )
    return CutSnapshot(tuple(found))


# The comparison.


class CutReason(StrEnum):
    """A named cause of a difference between the model's bytes and the measured ones."""

    STEP_COUNTERS = "step-counters"


@dataclass(frozen=True)
class CutDifference:
    """Bytes by which the measurement exceeds the model (negative: falls short), and why."""

    reason: CutReason
    bytes: int
    text: str


@dataclass(frozen=True)
class BandAgreement:
    """One band on one rank: the model's bytes against the local shards' measured ones."""

    band: Band
    title: str
    model_bytes: int
    measured_bytes: int


@dataclass(frozen=True)
class ActivationAgreement:
    """One rank's activations at their peak: micro-batches in flight and their bytes, the model's and measured."""

    model_microbatches: int
    measured_microbatches: int
    model_bytes: int
    measured_bytes: int


@dataclass(frozen=True)
class CutRankAgreement:
    """One rank against the model's figure for its place in the layout, every byte of difference named."""

    rank: int
    place: str
    stage_index: int
    model_bytes: int
    measured_bytes: int
    bands: tuple[BandAgreement, ...]
    differences: tuple[CutDifference, ...]
    unexplained_bytes: int
    activations: ActivationAgreement | None
    """A pipeline's activations at their peak; None without a pipeline (not measured)."""


@dataclass(frozen=True)
class CutAgreement:
    """One cut arrangement against the model."""

    key: str
    title: str
    schedule: str
    seconds: float
    stage: Stage
    tp: int
    pp: int
    dp: int
    params: int
    microbatches: int
    recipe: str
    ranks: tuple[CutRankAgreement, ...]
    placements: tuple[tuple[str, str, tuple[int, ...], tuple[int, ...]], ...]
    """Rank 0's parameters: name, placements, whole shape and local shape."""

    @property
    def unexplained(self) -> int:
        """The largest unnamed difference over the ranks, in bytes."""
        return max(abs(r.unexplained_bytes) for r in self.ranks)

    @property
    def activations_agree(self) -> bool:
        """Whether every rank's activations at their peak are the model's (True when not measured)."""
        return all(
            a is None or (a.model_bytes, a.model_microbatches) == (a.measured_bytes, a.measured_microbatches)
            for a in (r.activations for r in self.ranks)
        )


@dataclass(frozen=True)
class CutComparison:
    """Every cut arrangement against the model."""

    arrangements: tuple[CutAgreement, ...]

    @property
    def unexplained(self) -> int:
        """The largest unnamed difference over every arrangement and rank, in bytes."""
        return max(a.unexplained for a in self.arrangements)


def _rank_agreement(measured: CutMeasured, rank: CutRankHeld, run: Run) -> CutRankAgreement:
    def band(b: Band) -> int:
        return cut_band_bytes(b, measured.stage, run, rank.stage_index)

    model = cut_card_bytes(measured.stage, run, rank.stage_index)
    differences = []
    if rank.counters_bytes:
        differences.append(
            CutDifference(
                CutReason.STEP_COUNTERS,
                rank.counters_bytes,
                f"Adam's step counters: {rank.counters_bytes // 4} × 4 B, one for each parameter tensor the rank "
                "updates (a plain tensor, not cut). The model counts no counters.",
            )
        )
    activations = None
    if measured.pp > 1:
        held = in_flight(measured.schedule, measured.cut, rank.stage_index)
        activations = ActivationAgreement(
            held, rank.peak_microbatches, held * measured.activation_per_microbatch, rank.peak_activation_bytes
        )
    return CutRankAgreement(
        rank=rank.rank,
        place=rank.place,
        stage_index=rank.stage_index,
        model_bytes=model,
        measured_bytes=rank.measured_bytes,
        bands=tuple(BandAgreement(b, BAND_TITLES[b], band(b), rank.band_bytes(b)) for b in BANDS),
        differences=tuple(differences),
        unexplained_bytes=rank.measured_bytes - model - sum(d.bytes for d in differences),
        activations=activations,
    )


def compare_cut(cut: CutSnapshot, recipe: Recipe) -> CutComparison:
    """Every cut arrangement against the model, in `recipe` (the snapshot's fp32 one)."""
    return CutComparison(
        tuple(
            CutAgreement(
                key=m.key,
                title=m.title,
                schedule=m.schedule,
                seconds=m.seconds,
                stage=m.stage,
                tp=m.tp,
                pp=m.pp,
                dp=m.dp,
                params=m.params,
                microbatches=m.microbatches,
                recipe=recipe.name,
                ranks=tuple(_rank_agreement(m, r, m.run(recipe)) for r in m.ranks),
                placements=tuple((p.name, p.placements, p.shape, p.local_shape) for p in m.ranks[0].params),
            )
            for m in cut.arrangements
        )
    )
