"""The JSON API, documented in the OpenAPI schema."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.domain.fit import Run, report
from app.domain.scenario import resolve
from app.domain.sharding import layout
from app.domain.stages import Stage
from app.inputs import RunQuery, StepQuery
from app.measured_view import shipped_snapshot
from app.schemas import LayoutOut, MeasuredOut, MemoryOut, StageRow, StepOut

API_TAG = "api"

router = APIRouter(prefix="/api", tags=[API_TAG])


@router.get("/stages", name="api_stages")
def stages() -> list[StageRow]:
    """Bytes per weight, bytes per GPU for a 30B-weight model, and traffic, for 8 GPUs."""
    run = Run()
    return [StageRow.of(row, run.gpus) for row in report(run)]


@router.get("/layout", name="api_layout")
def grid_layout(stage: Stage = Stage.DP) -> LayoutOut:
    """Every cell of the 8 × 8 × 4 grid for one stage: solid where the card holds the state."""
    return LayoutOut.of(layout(stage))


@router.get("/memory", name="api_memory", response_model_exclude_none=True)
def memory(query: Annotated[RunQuery, Query()]) -> MemoryOut:
    """Memory per card, the ZeRO-3 peak, traffic, fit and the largest model that fits, for any run."""
    return MemoryOut.of(resolve(query.inputs()))


@router.get("/step", name="api_step")
def training_step(query: Annotated[StepQuery, Query()]) -> StepOut:
    """One phase of one training step: every cell's state, what moves, the tally and live memory."""
    return StepOut.of(query.stage, query.phase, resolve(query.inputs()))


@router.get("/measured", name="api_measured")
def measured() -> MeasuredOut:
    """What PyTorch held on 8 CPU ranks in one real step (the shipped snapshot), compared with the model."""
    return MeasuredOut.of(shipped_snapshot())
