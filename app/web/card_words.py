"""A card in one sentence, for a screen reader: what it keeps of which weights (or columns), read from its cells.

A card draws some thirty cells, each with its own name; read one by one, eight cards are 256 images. The
sentence says the same as the cells in one breath, e.g. "GPU 3 keeps the bf16 weights and the bf16 gradients
of every weight, and the fp32 master copy and Adam's two fp32 moments of weight 3: 153.7 GiB." It is built
from the cells the view draws (their band, solid, part filled or dashed, in hand, on the host), not worded per
stage: each set of bands is named with the weights it is kept for, as the grid draws them, whatever the stage,
the cards, the recipe, the offload or the phase.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from app.domain.recipes import Band, Recipe
from app.domain.report import Holding
from app.domain.sharding import CellState

if TYPE_CHECKING:  # grid_view builds its cards' sentences here
    from app.web.grid_view import CellView, ColumnView

_HOW = {Holding.GATHERED: "assembled from their owners", Holding.SENT: "computed here, to be sent on"}
"""What a card does with what it holds in hand for the phase, by holding."""

_ALL = {2: "both bands", 3: "all three bands", 4: "all four bands"}

Extent = tuple[tuple[int, ...], tuple[tuple[int, str], ...]]
"""Where a band is kept: the columns kept whole, and each column kept in part with its share ("1/2")."""


def holding_sentence(
    title: str,
    noun: str,
    count: int,
    recipe: Recipe,
    columns: tuple[ColumnView, ...],
    host: tuple[ColumnView, ...] = (),
    figure: str = "",
) -> str:
    """One card's cells in a sentence: what it keeps, what it holds for the phase, what its host keeps; its figure.

    `noun`: what a column is ("weight", or in the step "column"); `count`: how many the grid stands for (the
    other columns of a sampled grid are left out of the drawing, held like the drawn ones the card is not
    responsible for); `host`: the columns of its host's strip.
    """
    said = f"{title} keeps {_kept(_cells(columns), noun, count, recipe, nothing=True)}"
    for column, holdings in _in_hand(_cells(columns)).items():
        held = [f"{recipe.phrase(tuple(bands))} of {noun} {column}, {_HOW[how]}" for how, bands in holdings.items()]
        said += f"; for this phase it also holds {_listed(held)}"
    hosted = _cells(host)
    if any(_whole(c) or _part(c) for _, c in hosted):
        said += f"; its host keeps {_kept(hosted, noun, count, recipe, nothing=False)}"
    return f"{said}: {figure}." if figure else f"{said}."


def _cells(columns: tuple[ColumnView, ...]) -> list[tuple[int, CellView]]:
    """Each drawn cell with its column's number (a gap, standing for the columns left out, has none)."""
    return [(column.weight, cell) for column in columns if column.weight is not None for cell in column.cells]


def _whole(cell: CellView) -> bool:
    """Kept all through, whole, on the card (or its host): not only for the phase."""
    return cell.state is CellState.SOLID and cell.holding in (None, Holding.HELD)


def _part(cell: CellView) -> bool:
    """Kept all through, its slice only."""
    return cell.state is CellState.PARTIAL and bool(cell.share)


def _kept(cells: list[tuple[int, CellView]], noun: str, count: int, recipe: Recipe, nothing: bool) -> str:
    """Each set of bands kept for the same columns, named with them; `nothing`: say what is kept of none."""
    drawn = sorted({column for column, _ in cells})
    extents: dict[Band, tuple[set[int], dict[int, str]]] = {}
    for column, cell in cells:
        whole, part = extents.setdefault(cell.band, (set(), {}))
        if _whole(cell):
            whole.add(column)
        elif _part(cell):
            part[column] = cell.share
    by_extent: dict[Extent, list[Band]] = {}
    for band in Band:  # the bands' order, weights first
        if band in extents and any(extents[band]):
            whole, part = extents[band]
            by_extent.setdefault((tuple(sorted(whole)), tuple(sorted(part.items()))), []).append(band)
    present = [spec.band for spec in recipe.specs if spec.nbytes > 0]
    pieces = [
        f"{_ALL.get(len(bands), 'every band') if bands == present else recipe.phrase(tuple(bands))} "
        f"of {_where(extent, drawn, noun)}"
        for extent, bands in by_extent.items()
    ]
    some = {column for whole, part in by_extent for column in (*whole, *(c for c, _ in part))}
    if nothing and len(some) < count:
        others = count - len(some)
        pieces.append(f"nothing of the other {others:,} {noun}" + ("s" if others > 1 else "") if some else "nothing")
    return _listed(pieces)


def _where(extent: Extent, drawn: list[int], noun: str) -> str:
    """The columns of an extent in words: "every weight", "weights 2 and 3", "half of column 1"."""
    whole, part = extent
    if not part and list(whole) == drawn:  # every column drawn, and so those left out, as the drawn ones are
        return f"every {noun}"
    said = [f"{noun}{'s' if len(whole) > 1 else ''} {_listed([str(c) for c in whole], comma='')}"] if whole else []
    said += [f"{'half' if share == '1/2' else share} of {noun} {column}" for column, share in part]
    return _listed(said, comma="")


def _in_hand(cells: Iterable[tuple[int, CellView]]) -> dict[int, dict[Holding, list[Band]]]:
    """What the card holds for the phase only, column by column: the bands assembled, and those computed to send."""
    held: dict[int, dict[Holding, list[Band]]] = {}
    for column, cell in cells:
        if cell.holding in _HOW:
            held.setdefault(column, {}).setdefault(cell.holding, []).append(cell.band)
    return held


def _listed(items: list[str], comma: str = ",") -> str:
    """'a', 'a and b' ('a, and b' with the comma), 'a, b and c' ('a, b, and c')."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])}{comma} and {items[-1]}"
