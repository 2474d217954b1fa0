"""The JSON API, documented in the OpenAPI schema."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.domain.report import Run, run_report
from app.domain.scenario import resolve
from app.domain.sharding import layout
from app.measure.snapshots import comparison
from app.web.config_view import MAX_CONFIG_BYTES, ConfigBody, ConfigQuery, Refused, pasted_url, read_body, written
from app.web.inputs import LayoutQuery, RunQuery, StepQuery
from app.web.measured_view import shipped_snapshot
from app.web.schemas import ConfigReadOut, LayoutOut, MeasuredOut, MemoryOut, StageRow, StepOut, TimelineOut

API_TAG = "api"

router = APIRouter(prefix="/api", tags=[API_TAG])


@router.get("/stages", name="api_stages")
def stages() -> list[StageRow]:
    """Bytes per weight, bytes per GPU for a 30B-weight model, and traffic, for 8 GPUs."""
    return [StageRow.of(row) for row in run_report(Run())]


@router.get("/layout", name="api_layout", response_model_exclude_none=True)
def grid_layout(query: Annotated[LayoutQuery, Query()]) -> LayoutOut:
    """Every drawn cell of one stage's grid for a run (8 GPUs by default), as the page draws it.

    A card per GPU and a weight per card, 4 bands each: solid where the card holds the state. Up to
    16 GPUs all are drawn; more, the first four and the last four. With the model cut (tp, pp or cp above 1),
    `cut_cards`: each card the page's cut grid draws, its pipeline stage, tensor rank and absent columns, and with
    a mixture of experts the routed experts it keeps.
    """
    run = resolve(query.inputs()).run
    moe = run.architecture.moe if run.architecture is not None else None
    return LayoutOut.of(layout(query.stage, run.gpus, run.recipe), run.cut, moe.experts if moe else 0, run.dense_stages)


@router.get("/memory", name="api_memory", response_model_exclude_none=True)
def memory(query: Annotated[RunQuery, Query()]) -> MemoryOut:
    """Memory per card, the ZeRO-3 peak, traffic, fit and the largest model that fits, for any run."""
    return MemoryOut.of(resolve(query.inputs()))


@router.get("/step", name="api_step")
def training_step(query: Annotated[StepQuery, Query()]) -> StepOut:
    """One phase of one training step: every cell's state, what moves, the tally and live memory."""
    return StepOut.of(query.stage, query.phase, resolve(query.inputs()))


@router.get("/timeline", name="api_timeline")
def memory_timeline(query: Annotated[RunQuery, Query()]) -> TimelineOut:
    """One card's memory through one training step, under each stage: the points the step's chart draws.

    One point a phase, a pass column's three among them: its gather, the layer in hand, and its discard.
    ZeRO-3 rises at each gather and falls at each discard; activations rise through the forward pass and fall
    through the backward.
    """
    return TimelineOut.of(resolve(query.inputs()))


@router.get("/measured", name="api_measured")
def measured() -> MeasuredOut:
    """What PyTorch held on 8 CPU ranks in one real step (the shipped snapshot), compared with the model."""
    return MeasuredOut(comparison(shipped_snapshot()))


_WRITTEN: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "A DeepSpeed config (JSON), or as text an FSDP2 snippet, Megatron-LM's arguments, "
        "torchtitan's TOML or a device mesh.",
        "content": {"application/json": {"schema": {"type": "object"}}, "text/plain": {"schema": {"type": "string"}}},
    }
}


@router.get("/config", name="api_config", response_class=Response, responses=_WRITTEN)
def config(query: Annotated[ConfigQuery, Query()]) -> Response:
    """A run under one stage as a DeepSpeed config (JSON), an FSDP2 snippet or its layout (text). docs/export.md.

    The layout: Megatron-LM's arguments, torchtitan's [parallelism] (TOML), an FSDP2 + DTensor device mesh;
    torchtitan and the mesh have no ZeRO-1 (a 422 naming stage).

    A hybrid-sharded run (shard) has no DeepSpeed config: a 422 says so and points to FSDP2.
    """
    scenario = resolve(query.inputs())
    return written(query.format, query.stage, scenario.run, scenario.architecture, scenario.model_title)


# The body is read by hand, to stop at the cap before holding more: documented here instead.
_CONFIG_BODY: dict[str, object] = {
    "requestBody": {
        "required": True,
        "description": f"A DeepSpeed config, a JSON object of at most {MAX_CONFIG_BYTES} bytes.",
        "content": {"application/json": {"schema": {"type": "object"}}},
    }
}
_REFUSED: dict[str, Any] = {
    "description": "Not read, and why.",
    "content": {"application/json": {"schema": {"type": "object"}}},
}


@router.post(
    "/config",
    name="api_config_read",
    response_model=ConfigReadOut,
    responses={413: _REFUSED, 422: _REFUSED},
    openapi_extra=_CONFIG_BODY,
)
async def read_config(
    request: Request, query: Annotated[RunQuery, Query()], body: ConfigBody
) -> Response | ConfigReadOut:
    """A DeepSpeed config (the body) read as a run; the query gives what it does not hold (model, gpus...)."""
    try:
        pasted = read_body(body, query)
    except Refused as refused:
        return refused.json()
    return ConfigReadOut(
        url=pasted_url(request, pasted), query=pasted.parameters, ignored=list(pasted.ignored), notes=list(pasted.notes)
    )
