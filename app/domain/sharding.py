"""Which card holds which band of which weight: the grid itself.

With N cards and N weights, card i is responsible for weight i. A band the stage shards lives
only on the responsible card; every other card shows a dashed gap there, held on its behalf.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from fractions import Fraction
from math import ceil, floor

from app.domain.eighths import COLUMNS
from app.domain.recipes import MIXED_ADAM, Band, Recipe
from app.domain.stages import Stage
from app.domain.state_bytes import DEFAULT_GPUS


class CellState(StrEnum):
    """Solid: this card stores the state. Dashed: another card stores it for this weight.

    Partial: this card stores a part, and other cards the rest; only the step's columns, which
    need not line up with the cards' slices, and a cut model's tensor slices (`cut_grid`) have such cells.
    Absent: a cut model's other pipeline stage keeps these layers; nothing is held on this card's behalf.
    """

    SOLID = "solid"
    PARTIAL = "partial"
    DASHED = "dashed"
    ABSENT = "absent"


@dataclass(frozen=True)
class Cell:
    """One band of one weight as seen from one card."""

    card: int
    weight: int
    band: Band
    state: CellState
    holder: int
    """The card responsible for this weight's slice: where the state lives when it is dashed."""
    replica: bool = False
    """Solid only because hybrid sharding replicates it: with one shard group another card would hold it."""


def owner(weight: int, gpus: int) -> int:
    """The card responsible for a weight's slice of sharded state."""
    return weight % gpus


def cell_state(stage: Stage, band: Band, card: int, weight: int, gpus: int, shards: int | None = None) -> CellState:
    """Whether `card` stores `band` of `weight` under `stage`; each shard group of `shards` cards splits alike."""
    group = gpus if shards is None else shards
    if band not in stage.sharded or owner(weight, group) == card % group:
        return CellState.SOLID
    return CellState.DASHED


def _cell(stage: Stage, band: Band, card: int, weight: int, gpus: int, shards: int) -> Cell:
    state = cell_state(stage, band, card, weight, gpus, shards)
    holder = card - card % shards + owner(weight, shards)  # the owner in this card's own shard group
    # Where a flat arrangement would dash it: the replicas' copy, filled back in by hybrid sharding.
    replica = state is CellState.SOLID and band in stage.sharded and owner(weight, gpus) != card
    return Cell(card, weight, band, state, holder, replica)


MAX_FULL_GRID = 16
"""Up to this many cards the grid draws every card and every weight; beyond, a fixed sample."""


def shown_indices(gpus: int) -> tuple[int, ...]:
    """The cards (and, by the same numbers, the weights) the grid draws.

    Beyond 16 it keeps the first four and the last four, so each drawn card still shows the
    weight it is responsible for, and the gap between them stands for the rest.
    """
    if gpus <= MAX_FULL_GRID:
        return tuple(range(gpus))
    return (0, 1, 2, 3, gpus - 4, gpus - 3, gpus - 2, gpus - 1)


@dataclass(frozen=True)
class Layout:
    """The grid for one stage: the drawn cards × the drawn weights × bands."""

    stage: Stage
    gpus: int
    recipe: Recipe
    shown: tuple[int, ...]
    cells: tuple[Cell, ...]
    shards: int = 0
    """The cards each sharded band is split across: a hybrid run's shard group; 0: all `gpus`."""
    # Every view walks the grid card by card, so the cells are grouped once.
    _by_card: dict[int, tuple[Cell, ...]] = field(init=False, repr=False, compare=False)
    _held: dict[int, Fraction] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        grouped: dict[int, list[Cell]] = {}
        for cell in self.cells:
            grouped.setdefault(cell.card, []).append(cell)
        object.__setattr__(self, "_by_card", {card: tuple(cells) for card, cells in grouped.items()})
        held = {
            card: sum((self.recipe.nbytes(c.band) for c in cells if c.state is CellState.SOLID), Fraction(0))
            for card, cells in self._by_card.items()
        }
        object.__setattr__(self, "_held", held)

    @property
    def weights(self) -> int:
        """How many weights the grid stands for: one per card."""
        return self.gpus

    @property
    def sampled(self) -> bool:
        """Whether some cards and weights are left out of the drawing."""
        return len(self.shown) < self.gpus

    def card_cells(self, card: int) -> tuple[Cell, ...]:
        """One card's cells, weight by weight, bands in order."""
        return self._by_card.get(card, ())

    def held_bytes(self, card: int) -> Fraction:
        """Bytes a card stores for the drawn weights: the sum of its solid cells."""
        return self._held.get(card, Fraction(0))

    @property
    def full_bytes(self) -> Fraction:
        """Bytes a card would store for the drawn weights if it kept everything."""
        return len(self.shown) * self.recipe.total

    def solid_count(self, band: Band) -> int:
        """How many cells of one band are solid, across all cards."""
        return sum(1 for cell in self.cells if cell.band is band and cell.state is CellState.SOLID)


def layout(stage: Stage, gpus: int = DEFAULT_GPUS, recipe: Recipe = MIXED_ADAM, shards: int | None = None) -> Layout:
    """Compute every drawn cell of the grid for a stage; `shards`, a hybrid run's shard group (None: every card)."""
    if gpus < 1:
        raise ValueError("gpus must be at least 1")
    group = gpus if shards is None else shards
    if not 1 <= group <= gpus or gpus % group:
        raise ValueError("a shard group divides the cards")
    shown = shown_indices(gpus)
    cells = tuple(_cell(stage, band, card, weight, gpus, group) for card in shown for weight in shown for band in Band)
    return Layout(stage=stage, gpus=gpus, recipe=recipe, shown=shown, cells=cells, shards=group)


# The step's columns (eighths of the model) against the cards' slices: geometry, as the grid's is.


@dataclass(frozen=True)
class Share:
    """The part of a column that one card's slice covers, as fractions of the column."""

    start: Fraction
    end: Fraction

    @property
    def size(self) -> Fraction:
        """How much of the column."""
        return self.end - self.start

    @property
    def text(self) -> str:
        """The size as people write it: '1', '1/2', '1/128'."""
        size = self.size
        return str(size.numerator) if size.denominator == 1 else f"{size.numerator}/{size.denominator}"


def share(card: int, column: int, gpus: int) -> Share | None:
    """Which part of `column` falls in `card`'s slice of the weights; None if none does."""
    start = max(Fraction(card, gpus), Fraction(column, COLUMNS))
    end = min(Fraction(card + 1, gpus), Fraction(column + 1, COLUMNS))
    if end <= start:
        return None
    return Share((start - Fraction(column, COLUMNS)) * COLUMNS, (end - Fraction(column, COLUMNS)) * COLUMNS)


def holders(column: int, gpus: int) -> range:
    """The cards whose slices cover part of a column."""
    return range(floor(Fraction(column * gpus, COLUMNS)), ceil(Fraction((column + 1) * gpus, COLUMNS)))


def owned_columns(card: int, gpus: int) -> tuple[int, ...]:
    """The columns a card's slice covers, wholly or in part."""
    return tuple(column for column in range(COLUMNS) if share(card, column, gpus) is not None)
