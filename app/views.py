"""View models: one frozen dataclass per thing a template draws, built from the domain.

Every figure the page prints is formatted here from the domain's numbers, so templates only
lay things out and tests can check the same values the page shows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from app.bands import MIXED_ADAM, Band, BandSpec, Recipe
from app.memory import DEFAULT_GPUS, DEFAULT_PARAMS, StageFigures, all_stage_figures
from app.sharding import Cell, CellState, Layout, layout
from app.stages import Stage, StageInfo
from app.units import gib, per_weight

LinkFor = Callable[[Stage], str]

APP_NAME = "ZeRO Bands"


@dataclass(frozen=True)
class StageLink:
    """One tab of the stage switcher."""

    stage: Stage
    title: str
    summary: str
    href: str
    current: bool


@dataclass(frozen=True)
class CellView:
    """One band of one weight on one card."""

    card: int
    weight: int
    band: Band
    state: CellState
    holder: int
    nbytes: int
    label: str
    focusable: bool


@dataclass(frozen=True)
class ColumnView:
    """One weight's stack of bands on one card."""

    weight: int
    responsible: bool
    cells: tuple[CellView, ...]


@dataclass(frozen=True)
class CardView:
    """One GPU: its columns and its total."""

    index: int
    title: str
    columns: tuple[ColumnView, ...]
    held_bytes: int
    full_bytes: int
    bytes_per_weight: str
    model_bytes: str


@dataclass(frozen=True)
class TableRow:
    """One row of the comparison table."""

    stage: Stage
    title: str
    href: str
    bytes_per_weight: str
    per_gpu: str
    communication: str
    breakdown: tuple[str, ...]
    current: bool


@dataclass(frozen=True)
class StageView:
    """Everything drawn for the chosen stage."""

    stage: Stage
    info: StageInfo
    shards_anything: bool
    gpus: int
    full_bytes_per_weight: int
    params_label: str
    bytes_per_weight: str
    per_gpu: str
    share_of_dp: str
    cards: tuple[CardView, ...]
    rows: tuple[TableRow, ...]


@dataclass(frozen=True)
class PageView:
    """The page: switcher and legend always, and either the stage's view or an error."""

    title: str
    links: tuple[StageLink, ...]
    legend: tuple[BandSpec, ...]
    content: StageView | None = None
    error: str | None = None


def params_label(params: int) -> str:
    """A weight count the way people say it: 30B, 7.5B, 350M."""
    for scale, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
        if params >= scale:
            return f"{params / scale:g}{suffix}"
    return str(params)


def cell_label(cell: Cell, recipe: Recipe) -> str:
    """What a person hovering, focusing or listening to a cell is told."""
    spec = recipe.spec(cell.band)
    where = f"GPU {cell.card}, weight {cell.weight}, {spec.label} ({spec.precision}, {spec.nbytes} B)"
    if cell.state is CellState.DASHED:
        return f"{where}: not stored here. GPU {cell.holder} holds it on this weight's behalf."
    if cell.holder == cell.card:
        return f"{where}: stored on this card, which is responsible for weight {cell.weight}."
    return f"{where}: stored on this card; every card keeps its own copy."


def stage_links(current: Stage | None, link: LinkFor) -> tuple[StageLink, ...]:
    """The switcher, with the current stage marked."""
    return tuple(
        StageLink(stage, stage.info.title, stage.info.summary, link(stage), stage is current) for stage in Stage
    )


def legend(recipe: Recipe = MIXED_ADAM) -> tuple[BandSpec, ...]:
    """The bands, top to bottom as the grid stacks them."""
    return recipe.specs


def _card_view(grid: Layout, card: int, figures: StageFigures) -> CardView:
    recipe = grid.recipe
    cells = grid.card_cells(card)
    columns = tuple(
        ColumnView(
            weight=weight,
            responsible=weight == card and bool(grid.stage.sharded),
            cells=tuple(
                CellView(
                    card=c.card,
                    weight=c.weight,
                    band=c.band,
                    state=c.state,
                    holder=c.holder,
                    nbytes=recipe.nbytes(c.band),
                    label=cell_label(c, recipe),
                    # One tab stop for the whole grid; the arrow keys move within it.
                    focusable=c.card == 0 and c.weight == 0 and c.band is Band.WEIGHTS,
                )
                for c in cells
                if c.weight == weight and recipe.nbytes(c.band) > 0
            ),
        )
        for weight in range(grid.weights)
    )
    return CardView(
        index=card,
        title=f"GPU {card}",
        columns=columns,
        held_bytes=grid.held_bytes(card),
        full_bytes=grid.full_bytes,
        bytes_per_weight=per_weight(figures.bytes_per_weight),
        model_bytes=gib(figures.per_gpu_bytes),
    )


def table_rows(current: Stage | None, link: LinkFor, figures: tuple[StageFigures, ...]) -> tuple[TableRow, ...]:
    """The seed's comparison table, one row per stage's figures."""
    return tuple(
        TableRow(
            stage=f.stage,
            title=f.stage.info.title,
            href=link(f.stage),
            bytes_per_weight=per_weight(f.bytes_per_weight),
            per_gpu=gib(f.per_gpu_bytes),
            communication=f"{f.communication_p}P",
            breakdown=tuple(t.description for t in f.transfers),
            current=f.stage is current,
        )
        for f in figures
    )


def stage_view(stage: Stage, link: LinkFor, gpus: int = DEFAULT_GPUS, params: int = DEFAULT_PARAMS) -> StageView:
    """The grid, totals and table for one stage."""
    rows = all_stage_figures(params=params, gpus=gpus)
    figures = {f.stage: f for f in rows}
    chosen = figures[stage]
    grid = layout(stage, gpus)
    return StageView(
        stage=stage,
        info=stage.info,
        shards_anything=bool(stage.sharded),
        gpus=gpus,
        full_bytes_per_weight=grid.recipe.total,
        params_label=params_label(params),
        bytes_per_weight=per_weight(chosen.bytes_per_weight),
        per_gpu=gib(chosen.per_gpu_bytes),
        share_of_dp=f"{float(chosen.bytes_per_weight / figures[Stage.DP].bytes_per_weight):.0%}",
        cards=tuple(_card_view(grid, card, chosen) for card in range(gpus)),
        rows=table_rows(stage, link, rows),
    )


def page_view(stage: Stage, link: LinkFor) -> PageView:
    """The page for a stage."""
    return PageView(
        title=f"{stage.info.title} · {APP_NAME}",
        links=stage_links(stage, link),
        legend=legend(),
        content=stage_view(stage, link),
    )


def error_view(message: str, link: LinkFor) -> PageView:
    """The page when the request could not be understood: the message, and a way on."""
    return PageView(title=f"Not understood · {APP_NAME}", links=stage_links(None, link), legend=legend(), error=message)
