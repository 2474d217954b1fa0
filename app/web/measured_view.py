"""The "Measured in PyTorch" view: the model's grid beside what PyTorch held, their agreement, and the step's curve."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from urllib.parse import urlencode

from app import APP_NAME
from app.domain.recipes import BandSpec
from app.domain.sharding import CellState
from app.domain.stages import Stage
from app.measure import SNAPSHOT
from app.measure.activation_snapshots import ActivationsComparison, TermTable, compare_activations
from app.measure.cut_snapshots import CutAgreement, CutComparison, CutDifference, compare_cut
from app.measure.offload_snapshots import SETUP as OFFLOAD_SETUP
from app.measure.offload_snapshots import OffloadComparison, OffloadDifference
from app.measure.snapshots import (
    CURVE_NOTES,
    FSDP1_DIFFERENCES,
    IMPLS,
    PATTERN_NOTES,
    Agreement,
    CellMeasure,
    Impl,
    Snapshot,
    cell_measures,
    compare,
    default_impl,
    offload_comparison,
    parse,
)
from app.web.bars import legend
from app.web.grid_view import band_height
from app.web.inputs import Theme
from app.web.stage_view import StageLink

HIDDEN_GAP = Fraction(1, 4)
"""Lines closer than this, in the SVG's units (40 high), are drawn on top of each other: 3 px strokes."""

STRIP_STEPS = 48
"""A partial cell's strip is drawn in 48ths of the cell (the CSS's from-N and to-N classes)."""


@lru_cache(maxsize=1)
def shipped_snapshot() -> Snapshot:
    """The snapshot that ships with the app: read once, no torch needed."""
    return parse(json.loads(SNAPSHOT.read_text()))


@dataclass(frozen=True)
class MeasuredCell:
    """One band of one layer on one rank, as drawn."""

    css: str
    label: str
    state: CellState
    share: str


@dataclass(frozen=True)
class MeasuredCard:
    """One rank: a column of cells per layer, and its total bytes."""

    index: int
    title: str
    columns: tuple[tuple[MeasuredCell, ...], ...]
    total: str


@dataclass(frozen=True)
class RankRow:
    """One rank of the agreement table, its bytes written out."""

    rank: int
    model: str
    measured: str
    difference: str
    reasons: tuple[str, ...]
    reasons_words: str = field(init=False, repr=False, compare=False)
    """The named differences in one cell: "none" where there are none."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "reasons_words", "; ".join(self.reasons) or "none")


@dataclass(frozen=True)
class CurveRow:
    """One moment of the step, model against measured, its bytes written out."""

    label: str
    model: str
    measured: str


@dataclass(frozen=True)
class Curve:
    """The step's live bytes as two lines in an SVG of 100 × 40, and as a table."""

    model_points: str
    measured_points: str
    top: str
    rows: tuple[CurveRow, ...]
    note: str
    summary: str
    coincide: str
    """When the measured line lies on the model's and hides it: a sentence saying so; otherwise empty."""
    coincides: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "coincides", (self.coincide,) if self.coincide else ())


@dataclass(frozen=True)
class TermRowView:
    """One term of an activations table, its bytes written out."""

    term: str
    formula: str
    formula_bytes: str
    measured: str
    difference: str
    reason: str


@dataclass(frozen=True)
class ActivationsTableView:
    """One block (or output layer) under one recompute choice: the formula's terms against the measured."""

    id: str
    caption: str
    rows: tuple[TermRowView, ...]
    formula_total: str
    measured_total: str
    difference: str
    summary: str
    excluded: str
    note: str
    excluded_words: str = field(init=False, repr=False, compare=False)
    """What the table leaves out, and its note after it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "excluded_words", f"{self.excluded} {self.note}" if self.note else self.excluded)


@dataclass(frozen=True)
class ActivationsView:
    """The section "Activations, formula against measurement"."""

    intro: str
    tables: tuple[ActivationsTableView, ...]
    kernels: tuple[str, ...]


@dataclass(frozen=True)
class OffloadCategoryRow:
    """One category of what CPUOffloadPolicy places on a rank's CPU."""

    title: str
    model: str
    measured: str


@dataclass(frozen=True)
class OffloadComputeRow:
    """One moment of the step on the compute side, model against measured."""

    label: str
    model_gathered: str
    measured_gathered: str
    model_backward: str
    measured_backward: str
    difference: str
    reasons: tuple[str, ...]
    reasons_words: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "reasons_words", "; ".join(self.reasons) or "none")


@dataclass(frozen=True)
class OffloadView:
    """The section "CPU offload, measured": ZeRO-3 under FSDP2's CPUOffloadPolicy against the model."""

    heading: str
    intro: str
    agreement: str
    model_href: str
    rows: tuple[RankRow, ...]
    """Each rank's CPU under FSDP2's offload."""
    categories: tuple[OffloadCategoryRow, ...]
    compute_summary: str
    compute: tuple[OffloadComputeRow, ...]
    differences: tuple[str, ...]


@dataclass(frozen=True)
class CutBandRow:
    """One band on rank 0 of a cut arrangement: the model's bytes against its local shards'."""

    title: str
    model: str
    measured: str


@dataclass(frozen=True)
class CutPlacementRow:
    """One parameter on rank 0: its whole shape, its local shard's, and its DTensor placements."""

    name: str
    shape: str
    placements: str


@dataclass(frozen=True)
class CutActivationRow:
    """One rank of a pipeline: the activations it keeps at their peak, the model's and measured."""

    rank: int
    place: str
    model_microbatches: int
    measured_microbatches: int
    model: str
    measured: str


@dataclass(frozen=True)
class CutArrangementView:
    """One cut arrangement: each rank against the model's figure for its layout."""

    id: str
    heading: str
    intro: str
    agreement: str
    rows: tuple[RankRow, ...]
    bands: tuple[CutBandRow, ...]
    placements: tuple[CutPlacementRow, ...]
    activations: tuple[CutActivationRow, ...]
    activations_summary: str
    differences: tuple[str, ...]
    activation_tables: tuple[tuple[CutActivationRow, ...], ...] = field(init=False, repr=False, compare=False)
    """The activations' table where a pipeline keeps them (none with TP alone)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "activation_tables", (self.activations,) if self.activations else ())


@dataclass(frozen=True)
class CutView:
    """The section "The model cut across the ranks, measured"."""

    heading: str
    intro: str
    arrangements: tuple[CutArrangementView, ...]


@dataclass(frozen=True)
class MeasuredView:
    """The whole page for one arrangement."""

    title: str
    stage: Stage
    impl: Impl
    heading: str
    theme: Theme
    stage_links: tuple[StageLink, ...]
    impl_links: tuple[StageLink, ...]
    impl_note: str
    """Where both FSDPs were measured: how FSDP1 differs, in one sentence; otherwise empty."""
    precision: str
    model_cards: tuple[MeasuredCard, ...]
    measured_cards: tuple[MeasuredCard, ...]
    agreement: str
    cells: str
    rows: tuple[RankRow, ...]
    differences: tuple[str, ...]
    pattern: str
    curve: Curve
    legend: tuple[BandSpec, ...]
    back_href: str
    source: str
    activations: ActivationsView
    offload: OffloadView | None
    """Under ZeRO-3, the stage whose weights' slices it moves: FSDP2's CPU offload, measured."""
    cut: CutView
    """FSDP2 + TP and a 2-stage pipeline on the same ranks, under every stage: the model cut across cards."""
    impl_switches: tuple[tuple[StageLink, ...], ...] = field(init=False, repr=False, compare=False)
    """The implementations' switch, where there is a choice of them."""
    impl_notes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    offloads: tuple[OffloadView, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        several = len(self.impl_links) > 1
        object.__setattr__(self, "impl_switches", (self.impl_links,) if several else ())
        object.__setattr__(self, "impl_notes", (self.impl_note,) if several and self.impl_note else ())
        object.__setattr__(self, "offloads", (self.offload,) if self.offload else ())


def _bytes(n: int) -> str:
    return f"{n:,} B"


def _signed(n: int) -> str:
    return "0 B" if n == 0 else f"{'+' if n > 0 else '−'}{abs(n):,} B"


def _share(share: Fraction) -> str:
    return str(share.numerator) if share.denominator == 1 else f"{share.numerator}/{share.denominator}"


def _cell(cell: CellMeasure, spec: BandSpec, *, measured: bool) -> MeasuredCell:
    where = f"GPU {cell.card}, layer {cell.weight}, {spec.label} ({spec.precision}, {spec.shown} B)"
    state = cell.state if measured else cell.model
    share = cell.share if measured else Fraction(int(cell.model is CellState.SOLID))
    css = f"cell band-{cell.band} {state} nb-{band_height(spec.nbytes)}"
    if state is CellState.PARTIAL:
        start = cell.start * STRIP_STEPS
        end = (cell.start + cell.share) * STRIP_STEPS
        css += f" from-{round(start)} to-{round(end)}"
        said = f"measured: holds {_share(share)} of it, from {_share(cell.start)} of the way in"
    elif measured:
        said = "measured: holds all of it" if state is CellState.SOLID else "measured: holds none of it"
    else:
        said = "the model: stored here" if state is CellState.SOLID else "the model: another card stores it"
    return MeasuredCell(css, f"{where}: {said}.", state, _share(share))


def _cards(
    agreement: Agreement, measures: tuple[CellMeasure, ...], specs: tuple[BandSpec, ...], *, measured: bool
) -> tuple[MeasuredCard, ...]:
    by_band = {spec.band: spec for spec in specs}
    ranks = {r.rank: r for r in agreement.ranks}
    cards = []
    for rank in sorted(ranks):
        columns = []
        for layer in sorted({c.weight for c in measures}):
            cells = [c for c in measures if c.card == rank and c.weight == layer]
            columns.append(tuple(_cell(c, by_band[c.band], measured=measured) for c in cells))
        total = ranks[rank].storage_bytes if measured else ranks[rank].model_bytes
        cards.append(MeasuredCard(rank, f"GPU {rank}", tuple(columns), _bytes(total)))
    return tuple(cards)


def _curve(agreement: Agreement, stage: Stage, impl: Impl) -> Curve:
    points = agreement.curve
    top = max(max(p.model_bytes, p.measured_bytes) for p in points)
    last = len(points) - 1

    def line(values: list[int]) -> str:
        return " ".join(f"{i * 100 / last:.2f},{40 - v / top * 36:.2f}" for i, v in enumerate(values))

    model_peak, measured_peak = max(p.model_bytes for p in points), max(p.measured_bytes for p in points)
    gap = agreement.curve_gap
    hidden = Fraction(gap * 36, top) < HIDDEN_GAP
    return Curve(
        model_points=line([p.model_bytes for p in points]),
        measured_points=line([p.measured_bytes for p in points]),
        top=_bytes(top),
        rows=tuple(CurveRow(p.label, _bytes(p.model_bytes), _bytes(p.measured_bytes)) for p in points),
        note=CURVE_NOTES[(stage, impl)],
        summary=f"Live bytes on rank 0 through the step: measured peak {_bytes(measured_peak)}, "
        f"the model's {_bytes(model_peak)}.",
        coincide=f"The lines coincide: within {_bytes(gap)} of each other at every moment, so the measured line "
        "hides the model's dashed one."
        if hidden
        else "",
    )


BLOCK_TITLES = {
    "gpt": "GPT-style block (Korthikanti et al. 2022's: LayerNorm, scores kept, dropout)",
    "llama": "Llama-style block (RMSNorm, grouped-query attention, rotary, SwiGLU, flash-style attention)",
}
CHOICE_TITLES = {"none": "nothing recomputed", "selective": "the attention core recomputed", "full": "all recomputed"}


def _activations_table(table: TermTable) -> ActivationsTableView:
    named = {"gpt": "GPT", "llama": "Llama"}[table.block]
    part = BLOCK_TITLES[table.block] if table.part == "block" else f"{named}'s output layer"
    choice = "" if table.part != "block" else f", {table.recompute.value}: {CHOICE_TITLES[table.recompute.value]}"
    rows = tuple(
        TermRowView(
            term=row.name,
            formula=row.formula if row.formula_bytes else f"not counted ({row.formula})",
            formula_bytes=_bytes(row.formula_bytes) if row.formula_bytes else "—",
            measured=_bytes(row.measured_bytes),
            difference=_signed(row.difference),
            reason=row.reason or ("agrees" if row.difference == 0 else "unexplained"),
        )
        for row in table.rows
    )
    unexplained = table.unexplained
    return ActivationsTableView(
        id=f"act-{table.block}-{'head' if table.part != 'block' else table.recompute.value}",
        caption=f"{part}{choice}",
        rows=rows,
        formula_total=_bytes(table.formula_bytes),
        measured_total=_bytes(table.measured_bytes),
        difference=_signed(table.measured_bytes - table.formula_bytes),
        summary="every byte of difference is named." if unexplained == 0 else f"{unexplained:,} B unexplained.",
        excluded=table.excluded,
        note=table.note,
    )


def activations_view(comparison: ActivationsComparison) -> ActivationsView:
    """The activations section: every table, and torch's CPU kernels that keep more."""
    c = comparison
    return ActivationsView(
        intro=(
            f"Two small blocks run one forward pass in {c.dtype} on the CPU (s = {c.seq}, b = {c.batch}, "
            f"h = {c.hidden}, a = {c.heads}, v = {c.vocab}), and saved-tensor hooks record every tensor autograd keeps "
            "for the backward, counted by storage (a tensor saved twice, or as a view, once). The formula is "
            "activations.py's, evaluated at the same dimensions (docs/activations.md derives it)."
        ),
        tables=tuple(_activations_table(t) for t in c.tables),
        kernels=tuple(k.text for k in c.kernels),
    )


def _reasons(differences: tuple[OffloadDifference, ...]) -> tuple[str, ...]:
    return tuple(f"{d.reason.value.replace('-', ' ')} {_signed(d.bytes)}" for d in differences)


def offload_view(comparison: OffloadComparison, page: str, theme: Theme) -> OffloadView:
    """The offload section: each rank's CPU against the model's, and the compute path moment by moment."""
    c = comparison
    ranks, first = c.ranks, c.ranks[0]
    unexplained = c.unexplained
    query = {
        "stage": c.stage.value,
        "accounting": OFFLOAD_SETUP.accounting.value,
        "offload": OFFLOAD_SETUP.placement.offload.value,
        **theme_of(theme),
    }
    peak = max(c.compute, key=lambda point: point.measured_bytes)
    model_peak = max(point.model_bytes for point in c.compute)
    texts = [d.text for r in ranks for d in r.differences] + [d.text for p in c.compute for d in p.differences]
    return OffloadView(
        heading="CPU offload, measured: FSDP2's CPUOffloadPolicy",
        intro=(
            f"One more run of the same toy on the same {len(ranks)} ranks: {c.title}. The sharded weights stay "
            f"{c.param_dtype} and the layers compute in {c.compute_dtype}, as the {c.recipe} recipe says. On this "
            "CPU-only machine everything is on the CPU, so what the policy places there (the weights' slices, "
            "their gradients and Adam's state) is recorded apart from what the compute path allocates for the "
            "layer in hand, which a GPU would hold. The model beside it counts fsdp2 with offload=optimizer+params."
        ),
        agreement=(
            f"On each rank's CPU: {_bytes(first.measured_bytes)} against the model's {_bytes(first.model_bytes)} "
            f"({_signed(first.measured_bytes - first.model_bytes)}); "
            + ("every byte of difference is named." if unexplained == 0 else f"{unexplained:,} B unexplained.")
        ),
        model_href=f"{page}?{urlencode(query)}",
        rows=tuple(
            RankRow(
                r.rank,
                _bytes(r.model_bytes),
                _bytes(r.measured_bytes),
                _signed(r.measured_bytes - r.model_bytes),
                _reasons(r.differences),
            )
            for r in ranks
        ),
        categories=tuple(
            OffloadCategoryRow(k.title, _bytes(k.model_bytes), _bytes(k.measured_bytes)) for k in first.categories
        ),
        compute_summary=(
            f"The compute path on rank 0 peaks at {_bytes(peak.measured_bytes)} ({peak.label}), the model's GPU "
            f"terms at {_bytes(model_peak)}"
            + (", alike on every rank." if all(p.ranks_alike for p in c.compute) else ", differing between ranks.")
        ),
        compute=tuple(
            OffloadComputeRow(
                p.label,
                _bytes(p.model_gathered),
                _bytes(p.measured_gathered),
                _bytes(p.model_backward),
                _bytes(p.measured_backward),
                _signed(p.measured_bytes - p.model_bytes),
                _reasons(p.differences),
            )
            for p in c.compute
        ),
        differences=tuple(dict.fromkeys(texts)),
    )


CUT_INTROS = {
    "tp": (
        "{n} ranks on a {dp} × {tp} mesh (dp, tp): ranks 0-{last} are the tensor-parallel group of dp 0, the rest "
        "that of dp 1. A toy of 2 transformer-like blocks (attention's q, k, v and o, 64 × 64; the MLP's up and "
        "down, 256 × 64; bias-free, no norms: {params:,} weights) is cut by parallelize_module: q, k, v and up "
        "ColwiseParallel (each rank a quarter of the rows, one head of 4), o and down RowwiseParallel (a quarter "
        "of the columns), then fully_shard over dp splits each local shard's rows in 2 (ZeRO-3 over the data-"
        "parallel pair). After two Adam steps in {recipe}, each rank's bytes are read from the DTensors' local "
        "shards. The model's figure: the states ÷ tp = {tp}, sharded by ZeRO-3 over dp = {dp}."
    ),
    "pp": (
        "{n} ranks on a {pp} × {dp} mesh (pp, dp): the grid's toy of 8 Linear layers of 64 × 64 ({params:,} weights) "
        "cut into 2 stages by torch.distributed.pipelining, layers 0-3 on ranks 0-3 (stage 0) and 4-7 on ranks 4-7 "
        "(stage 1), each stage's gradients all-reduced across its 4 data-parallel ranks (plain data parallelism, "
        "no ZeRO). Each step runs {m} micro-batches of 4 rows under {schedule}; two steps, with Adam in {recipe}. The "
        "model's figure: the stage's 4 layers' states, whole on each of its data-parallel ranks."
    ),
}
ACTIVATION_WORDS = {
    "1F1B": "1F1B runs a micro-batch's backward as soon as it can: stage s keeps min(pp − s, m) micro-batches",
    "GPipe": "GPipe runs every micro-batch's forward before any backward: each stage keeps all m micro-batches",
}


def _cut_arrangement(c: CutAgreement) -> CutArrangementView:
    ranks, first = c.ranks, c.ranks[0]
    unexplained = c.unexplained
    held = {r.measured_bytes - r.model_bytes for r in ranks}
    spread = f"{_signed(held.pop())} a rank" if len(held) == 1 else "differing from rank to rank"
    key = c.key.split("-")[0]
    intro = CUT_INTROS[key].format(
        n=len(ranks), dp=c.dp, tp=c.tp, pp=c.pp, last=c.tp - 1, params=c.params, recipe=c.recipe,
        m=c.microbatches, schedule=c.schedule,
    )  # fmt: skip
    activations = tuple(
        CutActivationRow(
            r.rank,
            r.place,
            r.activations.model_microbatches,
            r.activations.measured_microbatches,
            _bytes(r.activations.model_bytes),
            _bytes(r.activations.measured_bytes),
        )
        for r in ranks
        if r.activations is not None
    )
    summary = (
        f"{ACTIVATION_WORDS[c.schedule]} (m = {c.microbatches}); each keeps, per micro-batch, the input of each of "
        "its 4 Linear layers (4 rows × 64 × 4 B), counted by saved-tensor hooks in the stage's forward. "
        + ("Every rank at its peak holds the model's micro-batches and bytes." if c.activations_agree else "")
        if c.schedule
        else ""
    )
    return CutArrangementView(
        id=f"cut-{c.key.lower()}",
        heading=c.title,
        intro=intro,
        agreement=(
            f"Measured on {len(ranks)} ranks: {_bytes(sum(r.measured_bytes for r in ranks))} against the model's "
            f"{_bytes(sum(r.model_bytes for r in ranks))} ({spread}); "
            + ("every byte of difference is named." if unexplained == 0 else f"{unexplained:,} B unexplained.")
        ),
        rows=tuple(
            RankRow(
                r.rank,
                _bytes(r.model_bytes),
                _bytes(r.measured_bytes),
                _signed(r.measured_bytes - r.model_bytes),
                _reasons_cut(r.differences),
            )
            for r in ranks
        ),
        bands=tuple(CutBandRow(b.title, _bytes(b.model_bytes), _bytes(b.measured_bytes)) for b in first.bands),
        placements=tuple(
            CutPlacementRow(
                name,
                f"{' × '.join(map(str, shape))} → {' × '.join(map(str, local))}",
                placements or "a plain tensor",
            )
            for name, placements, shape, local in c.placements
        ),
        activations=activations,
        activations_summary=summary,
        differences=tuple(dict.fromkeys(d.text for r in ranks for d in r.differences)),
    )


def _reasons_cut(differences: tuple[CutDifference, ...]) -> tuple[str, ...]:
    return tuple(f"{d.reason.value.replace('-', ' ')} {_signed(d.bytes)}" for d in differences)


def cut_view(comparison: CutComparison) -> CutView:
    """The section on the model cut across the ranks: FSDP2 + TP, then the pipeline under each schedule."""
    return CutView(
        heading="The model cut across the ranks, measured: tensor and pipeline parallelism",
        intro=(
            "Three more runs on the same 8 CPU ranks, each rank's bytes of weights, gradients and Adam's moments set "
            "against the model's figure for its layout, the domain's count of the cut: the states of its pipeline "
            "stage's layers ÷ tp, sharded by ZeRO over its data-parallel group."
        ),
        arrangements=tuple(_cut_arrangement(a) for a in comparison.arrangements),
    )


def theme_of(theme: Theme) -> dict[str, str]:
    """The theme as query parameters: none for the default."""
    return {} if theme is Theme.DEFAULT else {"theme": theme.value}


def _address(base: str, stage: Stage, impl: Impl | None, theme: Theme) -> str:
    query = {"stage": stage.value}
    if impl is not None and impl is not default_impl(stage):
        query["impl"] = impl.value
    if theme is not Theme.DEFAULT:
        query["theme"] = theme.value
    return f"{base}?{urlencode(query)}"


def measured_view(
    stage: Stage, impl: Impl, base: str, page: str, theme: Theme = Theme.DEFAULT, snapshot: Snapshot | None = None
) -> MeasuredView:
    """The view of one measured arrangement; `base` is this page's path and `page` the main page's."""
    snap = snapshot or shipped_snapshot()
    measured = snap.arrangement(stage, impl)
    agreement, measures = compare(snap, measured), cell_measures(snap, measured)
    specs = legend(snap.recipe)
    ranks = agreement.ranks
    model_total, measured_total = sum(r.model_bytes for r in ranks), sum(r.storage_bytes for r in ranks)
    differences = tuple(dict.fromkeys(d.text for r in ranks for d in r.differences))
    per_rank = {r.storage_bytes - r.model_bytes for r in ranks}
    spread = f"{_signed(per_rank.pop())} a card" if len(per_rank) == 1 else "differing from card to card"
    rows = tuple(
        RankRow(
            rank=r.rank,
            model=_bytes(r.model_bytes),
            measured=_bytes(r.storage_bytes),
            difference=_signed(r.storage_bytes - r.model_bytes),
            reasons=tuple(f"{d.reason.value.replace('-', ' ')} {_signed(d.bytes)}" for d in r.differences),
        )
        for r in ranks
    )
    unexplained = agreement.unexplained
    return MeasuredView(
        title=f"{stage.info.title}, measured in PyTorch ({impl.label}) · {APP_NAME}",
        stage=stage,
        impl=impl,
        heading=f"{stage.info.title} as {measured.title}",
        theme=theme,
        stage_links=tuple(
            StageLink(s, s.info.title, s.info.summary, _address(base, s, None, theme), s is stage) for s in Stage
        ),
        impl_links=tuple(
            StageLink(stage, i.label, "", _address(base, stage, i, theme), i is impl) for i in IMPLS[stage]
        ),
        impl_note=FSDP1_DIFFERENCES.get(stage, ""),
        precision=(
            f"Measured in {snap.precision} on {snap.world_size} CPU ranks (gloo, torch {snap.torch}), so the model "
            f"beside it is {snap.recipe.title} ({snap.recipe.sizes} B per weight): "
            f"a toy of {snap.model.layers} layers of {snap.model.rows} × {snap.model.columns} weights. bf16 mixed "
            "precision runs on gloo under FSDP, but DDP and ZeroRedundancyOptimizer have no bf16 master copy, so "
            "every arrangement here is measured in fp32 to be drawn against one recipe (the CPU offload, below "
            "under ZeRO-3, runs in mixed precision on its own)."
        ),
        model_cards=_cards(agreement, measures, specs, measured=False),
        measured_cards=_cards(agreement, measures, specs, measured=True),
        agreement=(
            f"Measured on {len(ranks)} ranks together: {_bytes(measured_total)} against the model's "
            f"{_bytes(model_total)}, {float(agreement.ratio):.2%} of its bytes ({spread}); "
            + ("every byte of difference is named below." if unexplained == 0 else f"{unexplained:,} B unexplained.")
        ),
        cells=f"{agreement.cells_agreeing} of {agreement.cells} cells hold exactly what the model draws.",
        rows=rows,
        differences=differences,
        pattern=PATTERN_NOTES[impl],
        curve=_curve(agreement, stage, impl),
        legend=specs,
        back_href=f"{page}?{urlencode({'stage': stage.value, **theme_of(theme)})}",
        source=f"Snapshot: torch {snap.torch}, measured in {snap.seconds:.0f} s by zero-bands measure.",
        activations=activations_view(compare_activations(snap.activations)),
        offload=offload_view(offload_comparison(snap), page, theme) if stage is Stage.ZERO3 else None,
        cut=cut_view(compare_cut(snap.cut, snap.recipe)),
    )
