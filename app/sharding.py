"""Which card holds which band of which weight: the grid itself.

With N cards and N weights, card i is responsible for weight i. A band the stage shards lives
only on the responsible card; every other card shows a dashed gap there, held on its behalf.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.bands import MIXED_ADAM, Band, Recipe
from app.memory import DEFAULT_GPUS
from app.stages import Stage


class CellState(StrEnum):
    """Solid: this card stores the state. Dashed: another card stores it for this weight."""

    SOLID = "solid"
    DASHED = "dashed"


@dataclass(frozen=True)
class Cell:
    """One band of one weight as seen from one card."""

    card: int
    weight: int
    band: Band
    state: CellState
    holder: int
    """The card responsible for this weight's slice: where the state lives when it is dashed."""


def owner(weight: int, gpus: int) -> int:
    """The card responsible for a weight's slice of sharded state."""
    return weight % gpus


def cell_state(stage: Stage, band: Band, card: int, weight: int, gpus: int) -> CellState:
    """Whether `card` stores `band` of `weight` under `stage`."""
    if band not in stage.sharded or owner(weight, gpus) == card:
        return CellState.SOLID
    return CellState.DASHED


@dataclass(frozen=True)
class Layout:
    """The whole grid for one stage: cards × weights × bands."""

    stage: Stage
    gpus: int
    recipe: Recipe
    cells: tuple[Cell, ...]

    @property
    def weights(self) -> int:
        """How many weights the grid draws: one per card."""
        return self.gpus

    def card_cells(self, card: int) -> tuple[Cell, ...]:
        """One card's cells, weight by weight, bands in order."""
        return tuple(cell for cell in self.cells if cell.card == card)

    def held_bytes(self, card: int) -> int:
        """Bytes a card stores for the grid's weights: the sum of its solid cells."""
        return sum(self.recipe.nbytes(cell.band) for cell in self.card_cells(card) if cell.state is CellState.SOLID)

    @property
    def full_bytes(self) -> int:
        """Bytes a card would store for the grid's weights if it kept everything."""
        return self.weights * self.recipe.total

    def solid_count(self, band: Band) -> int:
        """How many cells of one band are solid, across all cards."""
        return sum(1 for cell in self.cells if cell.band is band and cell.state is CellState.SOLID)


def layout(stage: Stage, gpus: int = DEFAULT_GPUS, recipe: Recipe = MIXED_ADAM) -> Layout:
    """Compute every cell of the grid for a stage."""
    if gpus < 1:
        raise ValueError("gpus must be at least 1")
    cells = tuple(
        Cell(card, weight, band, cell_state(stage, band, card, weight, gpus), owner(weight, gpus))
        for card in range(gpus)
        for weight in range(gpus)
        for band in Band
    )
    return Layout(stage=stage, gpus=gpus, recipe=recipe, cells=cells)
