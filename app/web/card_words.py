"""A card in one sentence, for a screen reader: what it keeps of which weights (or columns), read from its cells.

A card draws some thirty cells, each with its own name; read one by one, eight cards are 256 images. The
sentence says the same as the cells in one breath, e.g. "GPU 3 keeps the bf16 weights and the bf16 gradients
of every weight, and the fp32 master copy and Adam's two fp32 moments of weight 3: 153.7 GiB." It is built
from the cells the view draws (their band, solid, part filled or dashed, in hand, on the host), not worded per
stage: each set of bands is named with the weights it is kept for, as the grid draws them, whatever the stage,
the cards, the recipe, the offload or the phase.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from app.domain.recipes import Band, Recipe
from app.domain.report import Holding
from app.domain.sharding import CellState

if TYPE_CHECKING:  # grid_view builds its cards' sentences here
    from app.web.grid_view import ColumnView

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
    card = _Read(columns)
    said = f"{title} keeps {card.kept(noun, count, recipe, nothing=True)}"
    for column, holdings in card.in_hand.items():
        held = [f"{recipe.phrase(tuple(bands))} of {noun} {column}, {_HOW[how]}" for how, bands in holdings.items()]
        said += f"; for this phase it also holds {_listed(held)}"
    hosted = _Read(host)
    if hosted.whole or hosted.part:
        said += f"; its host keeps {hosted.kept(noun, count, recipe, nothing=False)}"
    return f"{said}: {figure}." if figure else f"{said}."


class _Read:
    """A card's (or its host's) columns, read once: each band's columns kept whole, kept in part, held for now.

    The page's hot loop reads some 256 cells a click: one pass, no object a cell.
    """

    def __init__(self, columns: tuple[ColumnView, ...]) -> None:
        self.drawn: list[int] = []
        self.whole: dict[Band, list[int]] = {}
        self.part: dict[Band, list[tuple[int, str]]] = {}
        self.in_hand: dict[int, dict[Holding, list[Band]]] = {}
        solid, partial, held = CellState.SOLID, CellState.PARTIAL, Holding.HELD
        for column in columns:
            number = column.weight
            if number is None:  # a gap, standing for the columns left out
                continue
            self.drawn.append(number)
            for cell in column.cells:
                state, holding = cell.state, cell.holding
                if holding in _HOW:  # on the card for this phase only
                    self.in_hand.setdefault(number, {}).setdefault(holding, []).append(cell.band)
                elif state is solid and (holding is None or holding is held):
                    self.whole.setdefault(cell.band, []).append(number)
                elif state is partial and cell.share:
                    self.part.setdefault(cell.band, []).append((number, cell.share))

    def kept(self, noun: str, count: int, recipe: Recipe, nothing: bool) -> str:
        """Each set of bands kept for the same columns, named with them; `nothing`: say what is kept of none."""
        by_extent: dict[Extent, list[Band]] = {}
        for spec in recipe.specs:  # the bands' order, weights first
            extent = (tuple(self.whole.get(spec.band, ())), tuple(self.part.get(spec.band, ())))
            if extent[0] or extent[1]:
                by_extent.setdefault(extent, []).append(spec.band)
        present = _stored(recipe)
        pieces = [
            f"{_ALL.get(len(bands), 'every band') if tuple(bands) == present else recipe.phrase(tuple(bands))} "
            f"of {_where(extent, self.drawn, noun)}"
            for extent, bands in by_extent.items()
        ]
        some = {column for whole, part in by_extent for column in (*whole, *(c for c, _ in part))}
        if nothing and len(some) < count:
            others = count - len(some)
            pieces.append(
                f"nothing of the other {others:,} {noun}" + ("s" if others > 1 else "") if some else "nothing"
            )
        return _listed(pieces)


@lru_cache(maxsize=64)
def _stored(recipe: Recipe) -> tuple[Band, ...]:
    """The bands a recipe keeps (of more than 0 bytes), in order: what "all four bands" means for it."""
    return tuple(spec.band for spec in recipe.specs if spec.nbytes > 0)


def _where(extent: Extent, drawn: list[int], noun: str) -> str:
    """The columns of an extent in words: "every weight", "weights 2 and 3", "half of column 1"."""
    whole, part = extent
    if not part and list(whole) == drawn:  # every column drawn, and so those left out, as the drawn ones are
        return f"every {noun}"
    said = [f"{noun}{'s' if len(whole) > 1 else ''} {_listed([str(c) for c in whole], comma='')}"] if whole else []
    said += [f"{'half' if share == '1/2' else share} of {noun} {column}" for column, share in part]
    return _listed(said, comma="")


def _listed(items: list[str], comma: str = ",") -> str:
    """'a', 'a and b' ('a, and b' with the comma), 'a, b and c' ('a, b, and c')."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])}{comma} and {items[-1]}"
