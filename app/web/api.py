"""The JSON API, documented in the OpenAPI schema."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app.domain.fit import Run, report
from app.domain.measured import comparison
from app.domain.scenario import resolve
from app.domain.sharding import layout
from app.web.inputs import LayoutQuery, RunQuery, StepQuery
from app.web.measured_view import shipped_snapshot
from app.web.schemas import LayoutOut, MeasuredOut, MemoryOut, StageRow, StepOut

API_TAG = "api"

router = APIRouter(prefix="/api", tags=[API_TAG])


@router.get("/stages", name="api_stages")
def stages() -> list[StageRow]:
    """Bytes per weight, bytes per GPU for a 30B-weight model, and traffic, for 8 GPUs."""
    run = Run()
    return [StageRow.of(row, run.gpus) for row in report(run)]


@router.get("/layout", name="api_layout")
def grid_layout(query: Annotated[LayoutQuery, Query()]) -> LayoutOut:
    """Every drawn cell of one stage's grid for a run (8 GPUs by default), as the page draws it.

    A card per GPU and a weight per card, 4 bands each: solid where the card holds the state. Up to
    16 GPUs all are drawn; more, the first four and the last four.
    """
    run = resolve(query.inputs()).run
    return LayoutOut.of(layout(query.stage, run.gpus, run.recipe))


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
    return MeasuredOut(comparison(shipped_snapshot()))
