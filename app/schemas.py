"""The JSON API's shapes, as they appear in the OpenAPI schema."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.domain.architecture import ModelName
from app.domain.bands import Band, Recipe
from app.domain.communication import Collective, Transfer, transfers
from app.domain.fit import Run, StageReport, layer_exceeds_card, report
from app.domain.quantities import ByteUnit
from app.domain.scenario import Scenario
from app.domain.sharding import Cell, CellState, Layout
from app.domain.stages import Stage
from app.domain.step import LAST_PHASE, LAYERS, Holding, Part, explanation, live_table, peak_so_far, step


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
    def of(cls, row: StageReport) -> StageRow:
        """From the domain's report of one stage."""
        return cls(
            stage=row.stage,
            title=row.stage.info.title,
            bytes_per_weight=float(row.bytes_per_weight),
            per_gpu_bytes=float(row.per_gpu_bytes),
            communication_p=row.communication_p,
            communication=[TransferOut.of(t) for t in transfers(row.stage)],
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


class MemoryRow(BaseModel):
    """One stage of the described run."""

    stage: Stage
    bytes_per_weight: float
    per_gpu_bytes: float = Field(description="Model states on one card at rest.")
    communication_p: int
    communication_bytes: int = Field(description="Bytes through each card per step: P × the bytes of each band moved.")
    peak_bytes: float = Field(description="Most held during a step: for ZeRO-3, the shard plus one assembled layer.")
    fits: bool | None = Field(None, description="Whether the peak fits the capacity (only with a capacity).")
    headroom_bytes: float | None = Field(None, description="Capacity left for activations (only with a capacity).")
    max_params_that_fit: int | None = Field(
        None, description="Largest model whose states fit on each card (only with a capacity)."
    )

    @classmethod
    def of(cls, row: StageReport) -> MemoryRow:
        """From the domain's report."""
        return cls(
            stage=row.stage,
            bytes_per_weight=float(row.bytes_per_weight),
            per_gpu_bytes=float(row.per_gpu_bytes),
            communication_p=row.communication_p,
            communication_bytes=row.communication_bytes,
            peak_bytes=float(row.peak_bytes),
            fits=row.fits,
            headroom_bytes=None if row.headroom_bytes is None else float(row.headroom_bytes),
            max_params_that_fit=row.max_params_that_fit,
        )


class ResolvedInputs(BaseModel):
    """The run as computed: presets resolved and defaults filled in."""

    model: ModelName
    params: int
    gpus: int
    recipe: str
    bands: list[BandOut]
    largest_layer: int | None = None
    largest_layer_source: str
    assembled_layer_bytes: int | None = Field(
        None, description="One layer's weights and gradients, gathered by ZeRO-3."
    )
    layer_exceeds_card: bool | None = Field(
        None, description="True: ZeRO cannot help; the layer needs tensor parallelism."
    )
    capacity: int | None = None
    units: ByteUnit


class MemoryOut(BaseModel):
    """Memory, traffic and fit of every stage for the described run."""

    inputs: ResolvedInputs
    stages: list[MemoryRow]
    notes: list[str] = Field(description="Things in the request the person should check.")

    @classmethod
    def of(cls, scenario: Scenario) -> MemoryOut:
        """From a resolved scenario."""
        run = scenario.run
        return cls(
            inputs=ResolvedInputs(
                model=scenario.model,
                params=run.params,
                gpus=run.gpus,
                recipe=run.recipe.name,
                bands=BandOut.all_of(run.recipe),
                largest_layer=run.largest_layer,
                largest_layer_source=scenario.largest_layer_source,
                assembled_layer_bytes=run.assembled_layer_bytes,
                layer_exceeds_card=layer_exceeds_card(run),
                capacity=run.capacity,
                units=scenario.units,
            ),
            stages=[MemoryRow.of(row) for row in report(run)],
            notes=list(scenario.notes),
        )


class StepTransferOut(BaseModel):
    """A collective in flight during a phase."""

    collective: Collective
    band: Band
    layers: list[int] = Field(description="The layers moved, 0-based; layer i belongs to card i.")
    volume_p: float = Field(description="Traffic in units of P.")


class StepCellOut(BaseModel):
    """One card's band of one layer during the phase."""

    card: int
    weight: int = Field(description="The layer, 0-based, as the grid's data-weight.")
    band: Band
    state: CellState
    holding: Holding
    active: bool


class StepOut(BaseModel):
    """One phase of one training step under one stage, on 8 cards with 8 layers."""

    stage: Stage
    phase: int
    last_phase: int
    part: Part
    layer: int | None = Field(description="The layer being computed, 0-based; none outside the passes.")
    title: str
    explanation: str
    transfers: list[StepTransferOut]
    tally_p: float = Field(description="Traffic so far this step, this phase included, in units of P.")
    live_bytes: list[float] = Field(description="Each card's memory now, for the run's weights and recipe.")
    peak_bytes_so_far: list[float]
    cells: list[StepCellOut]

    @classmethod
    def of(cls, stage: Stage, index: int, run: Run) -> StepOut:
        """From the domain's step."""
        phases = step(stage)
        phase = phases[index]
        live = live_table(phases[: index + 1], run.params, run.recipe)
        return cls(
            stage=stage,
            phase=index,
            last_phase=LAST_PHASE,
            part=phase.part,
            layer=phase.layer,
            title=phase.title,
            explanation=explanation(phase),
            transfers=[
                StepTransferOut(collective=t.collective, band=t.band, layers=list(t.layers), volume_p=float(t.volume_p))
                for t in phase.transfers
            ],
            tally_p=float(phase.tally_p),
            live_bytes=[float(b) for b in live[-1]],
            peak_bytes_so_far=[float(b) for b in peak_so_far(live, index)],
            cells=[
                StepCellOut(
                    card=card,
                    weight=layer,
                    band=band,
                    state=phase.holding(card, layer, band).state,
                    holding=phase.holding(card, layer, band),
                    active=(layer, band) in phase.active,
                )
                for card in range(LAYERS)
                for layer in range(LAYERS)
                for band in Band
            ],
        )
