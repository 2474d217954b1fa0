"""What PyTorch really held on 8 ranks, read from the measurement's snapshot, set against the model.

The snapshot (written by `zero-bands measure`, shipped with the app) records, for each arrangement
and each rank, the bytes of every layer's weights, gradients, master copy and Adam moments after one
real step, the optimizer's step counters, the bytes of the distinct storages behind them, and the
rank's live bytes at every layer's forward and backward. This module reads it (no torch needed)
and compares it with the grid and the step that the rest of the domain draws for the same run:
the toy model's weights, 8 cards and the snapshot's recipe, and for hybrid sharding (HSDP) the shard
group torch split the weights across. Every byte of difference per rank is
named; what is left unnamed is `unexplained`, and the tests require it to be 0.

The comparison's dataclasses are also the JSON of `/api/measured`, field for field: the web layer
serialises them as they are, so a field is named and documented here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction
from typing import Any

from app.domain.eighths import model_columns
from app.domain.recipes import RECIPES, Band, Recipe, RecipeName
from app.domain.sharding import CellState, layout
from app.domain.sizing import Run
from app.domain.stages import Stage
from app.domain.state_bytes import band_bytes, per_gpu_bytes
from app.domain.step import Holding, Phase, step
from app.measure.activation_snapshots import (
    ActivationsComparison,
    ActivationsSnapshot,
    compare_activations,
    parse_activations,
)
from app.measure.cut_snapshots import CutComparison, CutSnapshot, compare_cut, parse_cut
from app.measure.offload_snapshots import OffloadComparison, OffloadSnapshot, compare_offload, parse_offload
from app.measure.phases import phase_of

SNAPSHOT_FORMAT = 1


class Impl(StrEnum):
    """The PyTorch implementation of an arrangement."""

    DDP = "ddp"
    ZERO_REDUNDANCY = "zero-redundancy"
    FSDP1 = "fsdp1"
    FSDP2 = "fsdp2"
    HSDP = "hsdp"
    """FSDP2 on a 2-D mesh: hybrid sharding, each state split across a shard group, replicated across groups."""

    @property
    def label(self) -> str:
        """Its name for people."""
        return _IMPL_TITLES[self]


_IMPL_TITLES = {
    Impl.DDP: "DDP",
    Impl.ZERO_REDUNDANCY: "ZeroRedundancyOptimizer",
    Impl.FSDP1: "FSDP1",
    Impl.FSDP2: "FSDP2",
    Impl.HSDP: "HSDP",
}

IMPLS: dict[Stage, tuple[Impl, ...]] = {
    Stage.DP: (Impl.DDP,),
    Stage.ZERO1: (Impl.ZERO_REDUNDANCY,),
    Stage.ZERO2: (Impl.FSDP1, Impl.FSDP2),
    Stage.ZERO3: (Impl.FSDP1, Impl.FSDP2, Impl.HSDP),
}
"""Which implementations were measured for each stage, in the snapshot's order."""

DEFAULT_IMPLS: dict[Stage, Impl] = {
    Stage.DP: Impl.DDP,
    Stage.ZERO1: Impl.ZERO_REDUNDANCY,
    Stage.ZERO2: Impl.FSDP2,
    Stage.ZERO3: Impl.FSDP2,
}
"""The one shown when none is asked for: the one whose step has the model's shape (FSDP2 wraps each layer)."""

FSDP1_DIFFERENCES: dict[Stage, str] = {
    Stage.ZERO2: (
        "FSDP1, one click away, wraps all 8 layers in one flat parameter, so it keeps every layer's gradients until "
        "the backward pass ends, where FSDP2 and the model reduce-scatter each layer's gradients as it finishes."
    ),
    Stage.ZERO3: (
        "FSDP1, one click away, wraps all 8 layers in one flat parameter, so it gathers the whole model before "
        "layer 0 and keeps it until the backward pass ends, where FSDP2 and the model gather one layer at a time."
    ),
}
"""For the stages measured under both FSDPs: how FSDP1's step differs from the model's, in one sentence."""


def default_impl(stage: Stage) -> Impl:
    """The implementation shown for a stage when none is asked for."""
    return DEFAULT_IMPLS[stage]


@dataclass(frozen=True)
class LayerHeld:
    """What one rank held of one layer after the step, in bytes per band."""

    weights: int
    gradients: int
    master: int
    moments: int
    """Adam's two moments together."""
    start: int
    """Where this rank's part of the layer begins, in weights (0 when it holds all or none)."""

    def nbytes(self, band: Band) -> int:
        """Bytes of one band."""
        return {
            Band.WEIGHTS: self.weights,
            Band.GRADIENTS: self.gradients,
            Band.MASTER: self.master,
            Band.MOMENTS: self.moments,
        }[band]


@dataclass(frozen=True)
class LiveBytes:
    """A rank's live bytes of model state at one moment of the step (activations not counted)."""

    part: str
    """start, forward, backward, after-backward or after-update."""
    layer: int | None
    phase: int
    """The model's step phase this moment is set against (0-20)."""
    bytes: int


@dataclass(frozen=True)
class RankHeld:
    """One rank after the step, and its live bytes during it."""

    rank: int
    layers: tuple[LayerHeld, ...]
    counters_bytes: int
    """Bytes of the optimizer's step counters: one 4-byte count per tensor it keeps state for."""
    storage_bytes: int
    """Bytes of the distinct storages behind all of it, shared storage once: what the rank really holds."""
    phases: tuple[LiveBytes, ...]

    def band_bytes(self, band: Band) -> int:
        """Bytes of one band over all layers."""
        return sum(layer.nbytes(band) for layer in self.layers)

    @property
    def viewed(self) -> int:
        """The bytes the tensors themselves cover: every band of every layer, and the counters."""
        return sum(self.band_bytes(band) for band in Band) + self.counters_bytes

    @property
    def padding(self) -> int:
        """Storage no tensor covers: the padding of a flat buffer."""
        return self.storage_bytes - self.viewed


@dataclass(frozen=True)
class Measured:
    """One arrangement as PyTorch ran it."""

    stage: Stage
    impl: Impl
    title: str
    seconds: float
    shard_size: int | None
    """The ranks each weight is split across when fewer than all, as torch built them (HSDP's shard group, the
    second dimension of its mesh); None: every rank, or none. The model's run takes it as `Run.shard_size`."""
    ranks: tuple[RankHeld, ...]


@dataclass(frozen=True)
class ToyModel:
    """The model trained: equal bias-free layers of rows × columns weights."""

    layers: int
    rows: int
    columns: int

    @property
    def layer_weights(self) -> int:
        """Weights in one layer."""
        return self.rows * self.columns

    @property
    def params(self) -> int:
        """Weights in the model."""
        return self.layers * self.layer_weights


@dataclass(frozen=True)
class Snapshot:
    """The whole measurement."""

    torch: str
    world_size: int
    precision: str
    recipe: Recipe
    model: ToyModel
    seconds: float
    arrangements: tuple[Measured, ...]
    activations: ActivationsSnapshot
    """Two small blocks' saved tensors, term by term (`app.measure.activation_snapshots`)."""
    offload: OffloadSnapshot
    """ZeRO-3 with FSDP2's CPU offload, in mixed precision (`app.measure.offload_snapshots`)."""
    cut: CutSnapshot
    """The model cut across the ranks: FSDP2 + TP, and a 2-stage pipeline (`app.measure.cut_snapshots`)."""

    def arrangement(self, stage: Stage, impl: Impl) -> Measured:
        """One arrangement; KeyError if it was not measured."""
        for measured in self.arrangements:
            if (measured.stage, measured.impl) == (stage, impl):
                return measured
        raise KeyError(f"{stage}/{impl} was not measured")

    def run(self, measured: Measured) -> Run:
        """The same run as the model sees it: the toy's weights on the snapshot's ranks, one layer at a time.

        Under hybrid sharding each shard group is drawn as a node of its own (2 nodes of 4 for HSDP's 2 × 4
        mesh), the layout FSDP2's HSDP is meant for: sharded inside a node, replicated across nodes.
        """
        shards = measured.shard_size or self.world_size
        return Run(
            params=self.model.params,
            gpus=self.world_size,
            recipe=self.recipe,
            largest_layer=self.model.layer_weights,
            shard_size=measured.shard_size,
            nodes=self.world_size // shards,
        )


class SnapshotError(ValueError):
    """The snapshot cannot be read: the message says what is wrong."""


def _rank(data: Mapping[str, Any], layers: int) -> RankHeld:
    def moment(part: str, layer: int | None, nbytes: int) -> LiveBytes:
        return LiveBytes(part, layer, phase_of(part, layer, layers), nbytes)

    return RankHeld(
        rank=int(data["rank"]),
        layers=tuple(
            LayerHeld(int(x["weights"]), int(x["gradients"]), int(x["master"]), int(x["moments"]), int(x["start"]))
            for x in data["layers"]
        ),
        counters_bytes=int(data["counters"]),
        storage_bytes=int(data["storage"]),
        phases=tuple(
            moment(str(p["part"]), None if p["layer"] is None else int(p["layer"]), int(p["bytes"]))
            for p in data["phases"]
        ),
    )


def parse(data: Mapping[str, Any]) -> Snapshot:
    """The snapshot from its JSON. Raises SnapshotError when it is not a snapshot this app can read."""
    try:
        if data["format"] != SNAPSHOT_FORMAT:
            raise SnapshotError(f"snapshot format {data['format']!r}, expected {SNAPSHOT_FORMAT}")
        model = data["model"]
        toy = ToyModel(int(model["layers"]), int(model["rows"]), int(model["columns"]))
        return Snapshot(
            torch=str(data["torch"]),
            world_size=int(data["world_size"]),
            precision=str(data["precision"]),
            recipe=RECIPES[RecipeName(data["recipe"])],
            model=toy,
            seconds=float(data["seconds"]),
            arrangements=tuple(
                Measured(
                    stage=Stage(a["stage"]),
                    impl=Impl(a["impl"]),
                    title=str(a["title"]),
                    seconds=float(a["seconds"]),
                    shard_size=None if a["shard_size"] is None else int(a["shard_size"]),
                    ranks=tuple(_rank(r, toy.layers) for r in a["ranks"]),
                )
                for a in data["arrangements"]
            ),
            activations=parse_activations(data["activations"]),
            offload=parse_offload(data["offload"], toy.layers),
            cut=parse_cut(data["cut"]),
        )
    except (KeyError, TypeError, ValueError) as error:
        if isinstance(error, SnapshotError):
            raise
        raise SnapshotError(f"not a measurement snapshot: {error!r}") from error


# The comparison.


class Reason(StrEnum):
    """A named cause of a difference between the model's bytes and the measured ones."""

    STEP_COUNTERS = "step-counters"
    PADDING = "padding"
    RESHARDED_WEIGHTS = "resharded-weights"


@dataclass(frozen=True)
class Difference:
    """Bytes by which one rank's measurement exceeds the model (negative: falls short), and why."""

    reason: Reason
    bytes: int
    """Measured minus model; negative when PyTorch holds less."""
    text: str


@dataclass(frozen=True)
class RankAgreement(RankHeld):
    """One rank: what it held, its live bytes through the step, and its agreement with the model."""

    model_bytes: int
    """What the model says this card keeps."""
    differences: tuple[Difference, ...]
    unexplained_bytes: int
    """Measured minus model minus the named differences: 0 when the explanation is complete."""


@dataclass(frozen=True)
class CellMeasure:
    """One band of one layer on one rank: the model's state, and the measured share of the layer."""

    card: int
    weight: int
    band: Band
    model: CellState
    share: Fraction
    """The part of the layer's band the rank holds: 0, 1, or a part such as 1/8."""
    start: Fraction
    """Where that part begins, as a fraction of the layer."""

    @property
    def state(self) -> CellState:
        """Solid, partial or dashed, as measured."""
        if self.share == 0:
            return CellState.DASHED
        return CellState.SOLID if self.share == 1 else CellState.PARTIAL

    @property
    def agrees(self) -> bool:
        """Whether the rank holds what the model draws: all of it where solid, none where dashed."""
        return self.state is self.model


@dataclass(frozen=True)
class CurvePoint:
    """One moment of the step: the model's live bytes against rank 0's measured ones."""

    phase: int
    label: str
    model_bytes: int
    measured_bytes: int
    ranks_alike: bool


@dataclass(frozen=True)
class Agreement(Measured):
    """One arrangement as PyTorch ran it, against the model: rank by rank, and moment by moment."""

    ranks: tuple[RankAgreement, ...]
    cells_agreeing: int
    """Cells (rank × layer × band) that hold exactly what the model draws."""
    cells: int
    """Cells compared: every rank's layers, in the bands that cost bytes."""
    curve: tuple[CurvePoint, ...]

    @property
    def unexplained(self) -> int:
        """The largest unnamed difference over the ranks, in bytes."""
        return max(abs(r.unexplained_bytes) for r in self.ranks)

    @property
    def curve_gap(self) -> int:
        """The largest distance between the measured live bytes and the model's over the step, in bytes."""
        return max(abs(point.measured_bytes - point.model_bytes) for point in self.curve)

    @property
    def ratio(self) -> Fraction:
        """Measured bytes over model bytes, summed over ranks: 1 is exact."""
        return Fraction(sum(r.storage_bytes for r in self.ranks), sum(r.model_bytes for r in self.ranks))


@dataclass(frozen=True)
class Comparison:
    """The measurement snapshot and its comparison with the model."""

    torch: str
    world_size: int
    precision: str
    recipe: str
    """The model's recipe the measurement is set against."""
    layers: int
    layer_weights: int
    seconds: float
    """Wall time of the whole measurement."""
    arrangements: tuple[Agreement, ...]
    activations: ActivationsComparison
    """Two small blocks' activations, formula against measurement, every byte of difference named."""
    offload: OffloadComparison
    """ZeRO-3 with FSDP2's CPU offload: the CPU-placed state and the compute path against the model."""
    cut: CutComparison
    """The model cut across the ranks (FSDP2 + TP, a 2-stage pipeline): each rank against its layout's figure."""


def _differences(snapshot: Snapshot, measured: Measured, rank: RankHeld) -> tuple[Difference, ...]:
    shards = snapshot.run(measured).shards
    found: list[Difference] = []
    if rank.counters_bytes:
        count = rank.counters_bytes // 4
        found.append(
            Difference(
                Reason.STEP_COUNTERS,
                rank.counters_bytes,
                f"Adam's step counters: {count} × 4 B, one for each parameter tensor this rank updates "
                f"({'the flat parameter' if measured.impl is Impl.FSDP1 else 'one per layer it keeps state for'}). "
                "The model counts no counters.",
            )
        )
    if measured.impl is Impl.FSDP1 or rank.padding:
        total = snapshot.model.params
        found.append(
            Difference(
                Reason.PADDING,
                rank.padding,
                f"Padding of the flat parameter: {rank.padding:,} B, since {total:,} weights divide by "
                f"{shards} into equal slices."
                if rank.padding == 0
                else f"Padding: {rank.padding:,} B of storage that no tensor covers, so the slices are equal.",
            )
        )
    model_weights = band_bytes(measured.stage, Band.WEIGHTS, snapshot.model.params, shards, snapshot.recipe)
    extra_weights = rank.band_bytes(Band.WEIGHTS) - model_weights
    if extra_weights and measured.stage is Stage.ZERO2 and measured.impl in (Impl.FSDP1, Impl.FSDP2):
        found.append(
            Difference(
                Reason.RESHARDED_WEIGHTS,
                extra_weights,
                f"Weights resharded after the backward pass: {measured.impl.label} keeps only this rank's "
                f"1/{shards} of the weights between steps and gathers them again in the next forward "
                "pass; the model's ZeRO-2 keeps them whole. In fp32 the shard is also what Adam updates.",
            )
        )
    return tuple(found)


def _label(point: LiveBytes) -> str:
    if point.layer is not None:
        return f"{point.part.capitalize()} {point.layer}"
    return {"start": "Start", "after-backward": "After backward", "after-update": "After update"}[point.part]


_AT_REST: dict[Holding, CellState] = {
    Holding.HELD: CellState.SOLID,
    Holding.PARTIAL: CellState.PARTIAL,
    Holding.DASHED: CellState.DASHED,
}
"""A card's holding at the start of the step, as a cell of the grid."""


def _phases(snapshot: Snapshot, measured: Measured) -> tuple[Phase, ...]:
    """The model's step for the arrangement's run: its 8 columns are the toy's 8 layers."""
    toy = snapshot.model
    return step(measured.stage, snapshot.run(measured), model_columns(toy.params, None, toy.layer_weights))


def cell_measures(snapshot: Snapshot, measured: Measured) -> tuple[CellMeasure, ...]:
    """Every drawn cell of the model's grid (bands of no bytes left out), with the share each rank held.

    The model's cell is what the step says the card keeps at rest: under hybrid sharding each shard group
    splits the layers alike (with 4 cards a group, card c keeps layers 2(c mod 4) and 2(c mod 4) + 1).
    """
    toy = snapshot.model
    grid = layout(measured.stage, snapshot.world_size, snapshot.recipe)
    rest = _phases(snapshot, measured)[0]
    by_rank = {r.rank: r for r in measured.ranks}
    cells = []
    for cell in grid.cells:
        if snapshot.recipe.nbytes(cell.band) == 0:
            continue
        full = toy.layer_weights * snapshot.recipe.nbytes(cell.band)
        held = by_rank[cell.card].layers[cell.weight]
        share = Fraction(held.nbytes(cell.band), full)
        start = Fraction(held.start, toy.layer_weights) if share else Fraction(0)
        model = _AT_REST[rest.holding(cell.card, cell.weight, cell.band)]
        cells.append(CellMeasure(cell.card, cell.weight, cell.band, model, share, start))
    return tuple(cells)


def _rank_agreement(snapshot: Snapshot, measured: Measured, rank: RankHeld, model_bytes: int) -> RankAgreement:
    differences = _differences(snapshot, measured, rank)
    unexplained = rank.storage_bytes - model_bytes - sum(d.bytes for d in differences)
    # The rank as read, then how it agrees with the model.
    return RankAgreement(**vars(rank), model_bytes=model_bytes, differences=differences, unexplained_bytes=unexplained)


def compare(snapshot: Snapshot, measured: Measured) -> Agreement:
    """The arrangement against the model's grid, bytes per card and step for the same run."""
    run, toy = snapshot.run(measured), snapshot.model
    cells = cell_measures(snapshot, measured)
    model_bytes = per_gpu_bytes(measured.stage, toy.params, run.shards, snapshot.recipe)
    phases = _phases(snapshot, measured)
    first = measured.ranks[0]
    curve = tuple(
        CurvePoint(
            phase=point.phase,
            label=_label(point),
            model_bytes=phases[point.phase].live_bytes,
            measured_bytes=point.bytes,
            ranks_alike=all(r.phases[i].bytes == point.bytes for r in measured.ranks),
        )
        for i, point in enumerate(first.phases)
    )
    return Agreement(
        stage=measured.stage,
        impl=measured.impl,
        title=measured.title,
        seconds=measured.seconds,
        shard_size=measured.shard_size,
        ranks=tuple(_rank_agreement(snapshot, measured, r, model_bytes) for r in measured.ranks),
        cells_agreeing=sum(1 for cell in cells if cell.agrees),
        cells=len(cells),
        curve=curve,
    )


def comparison(snapshot: Snapshot) -> Comparison:
    """The whole snapshot against the model: what `/api/measured` serves."""
    toy = snapshot.model
    return Comparison(
        torch=snapshot.torch,
        world_size=snapshot.world_size,
        precision=snapshot.precision,
        recipe=snapshot.recipe.name,
        layers=toy.layers,
        layer_weights=toy.layer_weights,
        seconds=snapshot.seconds,
        arrangements=tuple(compare(snapshot, m) for m in snapshot.arrangements),
        activations=compare_activations(snapshot.activations),
        offload=offload_comparison(snapshot),
        cut=compare_cut(snapshot.cut, snapshot.recipe),
    )


def offload_comparison(snapshot: Snapshot) -> OffloadComparison:
    """The offload arrangement against the model, on the snapshot's toy and ranks."""
    toy = snapshot.model
    return compare_offload(snapshot.offload, toy.params, snapshot.world_size, toy.layer_weights, toy.layers)


CURVE_NOTES: dict[tuple[Stage, Impl], str] = {
    (Stage.DP, Impl.DDP): (
        "Nothing is gathered or freed: every rank keeps everything, so both lines are flat, apart by the step counters."
    ),
    (Stage.ZERO1, Impl.ZERO_REDUNDANCY): (
        "Flat, as the model draws: the weights and gradients stay whole on every rank; only Adam's moments are split."
    ),
    (Stage.ZERO2, Impl.FSDP1): (
        "Not the model's shape. With one flat parameter the only FSDP unit is the root: SHARD_GRAD_OP gathers all 8 "
        "layers before the first one runs and keeps them until the backward pass ends, a plateau of the whole model's "
        "weights where the model's ZeRO-2 keeps them whole anyway. In the backward pass each layer's gradients appear "
        "as autograd computes them, and all 8 stay, in no .grad, until the last is made: only then does FSDP1 sum them "
        "into the flat parameter's gradient and reduce-scatter it. So the line climbs layer by layer to its peak at "
        "Backward 0, the whole model's weights and gradients, where the model holds one layer's gradients at a time."
    ),
    (Stage.ZERO2, Impl.FSDP2): (
        "fully_shard gathers each layer as the forward pass reaches it and keeps it (no reshard after forward), so the "
        "line climbs layer by layer; in the backward pass each layer's gradients are reduce-scattered and its weights "
        "freed once it is done, so the line steps down: ZeRO-2's gradients leaving."
    ),
    (Stage.ZERO3, Impl.FSDP1): (
        "Not the model's shape. With one flat parameter the only FSDP unit is the root, and FSDP1 does not free the "
        "root's parameters after forward: FULL_SHARD gathers all 8 layers once, before layer 0 runs, and keeps them "
        "until the backward pass ends, the whole model where the model gathers one layer at a time. In the backward "
        "pass each layer's gradients appear as autograd computes them, and all 8 stay, in no .grad, until the last "
        "is made; then FSDP1 sums them into the flat parameter's gradient and reduce-scatters it. The peak, at "
        "Backward 0, is the whole model's weights and gradients. Wrap each layer as its own unit to gather one "
        "at a time."
    ),
    (Stage.ZERO3, Impl.FSDP2): (
        "fully_shard gathers one layer, uses it and frees it: the gathered layer appears and disappears, forward and "
        "backward, as the model draws it."
    ),
    (Stage.ZERO3, Impl.HSDP): (
        "The same shape as FSDP2 on 8 ranks, higher by what each rank keeps: fully_shard gathers one layer from "
        "the rank's group of 4, uses it and frees it, forward and backward, as the model draws it. Each layer's "
        "gradients are reduce-scattered inside the group, then each rank's slice is all-reduced with the same "
        "slice in the other group."
    ),
}
"""Why each measured curve has the shape it has, beside the model's."""


PATTERN_NOTES: dict[Impl, str] = {
    Impl.DDP: (
        "Every rank holds every band of every layer, as the model draws. DDP is built with "
        "gradient_as_bucket_view=True, so the gradients are views into DDP's communication buckets; with its default "
        "(False) each rank would keep the gradients twice, in .grad and in the buckets: another 131,072 B here."
    ),
    Impl.ZERO_REDUNDANCY: (
        "ZeroRedundancyOptimizer partitions the parameters greedily by size, each to the rank with the fewest bytes "
        "so far. With 8 equal layers that is one layer per rank, layer i on rank i: the model's picture. DDP is built "
        "with gradient_as_bucket_view=True; with its default (False) each rank would keep the gradients a second "
        "time in DDP's buckets: another 131,072 B here."
    ),
    Impl.FSDP1: (
        "FSDP1 flattens all 8 layers into one buffer and cuts it into 8 contiguous slices: rank i's slice is exactly "
        "layer i, the model's picture."
    ),
    Impl.FSDP2: (
        "FSDP2 cuts every parameter along its first dimension: each rank holds 8 of the 64 rows, 1/8, of every "
        "layer. The bytes are the model's; the pattern is a strip in every cell instead of one whole column."
    ),
    Impl.HSDP: (
        "FSDP2 on a 2 × 4 mesh cuts every parameter along its first dimension across a shard group of 4 ranks: "
        "each rank holds 16 of the 64 rows, 1/4, of every layer. Ranks 0-3 are one group and 4-7 the other, "
        "each holding the whole state once, so rank r and rank r + 4 hold the same rows. The bytes are the "
        "model's with shard groups of 4, twice flat ZeRO-3's on 8 cards; the pattern is a strip in every cell "
        "instead of two whole columns."
    ),
}
"""How each implementation lays the shards out, against the model's card-i-holds-weight-i."""
