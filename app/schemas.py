"""The JSON API's shapes, as they appear in the OpenAPI schema."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.bands import Band, Recipe
from app.communication import Collective, Transfer
from app.memory import StageFigures
from app.sharding import Cell, CellState, Layout
from app.stages import Stage


class TransferOut(BaseModel):
    """One collective of a training step."""

    collective: Collective
    band: Band
    when: str
    volume_p: int = Field(description="Traffic in units of P, the number of weights.")

    @classmethod
    def of(cls, transfer: Transfer) -> TransferOut:
        """From the domain's transfer."""
        return cls(collective=transfer.collective, band=transfer.band, when=transfer.when, volume_p=transfer.volume_p)


class StageRow(BaseModel):
    """One arrangement's memory and communication."""

    stage: Stage
    title: str
    bytes_per_weight: float = Field(description="Bytes of model state one card keeps per weight of the model.")
    per_gpu_bytes: float = Field(description="Bytes of model state on one card for the model (30B weights).")
    communication_p: int = Field(description="Traffic of one training step in units of P.")
    communication: list[TransferOut]

    @classmethod
    def of(cls, figures: StageFigures) -> StageRow:
        """From the domain's figures."""
        return cls(
            stage=figures.stage,
            title=figures.stage.info.title,
            bytes_per_weight=float(figures.bytes_per_weight),
            per_gpu_bytes=float(figures.per_gpu_bytes),
            communication_p=figures.communication_p,
            communication=[TransferOut.of(t) for t in figures.transfers],
        )


class BandOut(BaseModel):
    """One band of the recipe."""

    band: Band
    label: str
    precision: str
    bytes: int

    @classmethod
    def all_of(cls, recipe: Recipe) -> list[BandOut]:
        """Every band of a recipe, in grid order."""
        return [cls(band=s.band, label=s.label, precision=s.precision, bytes=s.nbytes) for s in recipe.specs]


class CellOut(BaseModel):
    """One grid cell, with the same fields as the page's data-* attributes."""

    card: int = Field(ge=0)
    weight: int = Field(ge=0)
    band: Band
    state: CellState
    holder: int = Field(ge=0, description="The card that holds this state when the cell is dashed.")

    @classmethod
    def of(cls, cell: Cell) -> CellOut:
        """From the domain's cell."""
        return cls(card=cell.card, weight=cell.weight, band=cell.band, state=cell.state, holder=cell.holder)


class LayoutOut(BaseModel):
    """The whole grid for one stage."""

    stage: Stage
    gpus: int
    weights: int
    bands: list[BandOut]
    cells: list[CellOut]

    @classmethod
    def of(cls, grid: Layout) -> LayoutOut:
        """From the domain's layout."""
        return cls(
            stage=grid.stage,
            gpus=grid.gpus,
            weights=grid.weights,
            bands=BandOut.all_of(grid.recipe),
            cells=[CellOut.of(c) for c in grid.cells],
        )
