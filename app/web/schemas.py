"""The JSON API's shapes, as they appear in the OpenAPI schema."""

from __future__ import annotations

from fractions import Fraction
from typing import TYPE_CHECKING, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    GetJsonSchemaHandler,
    RootModel,
    SerializerFunctionWrapHandler,
    create_model,
    model_serializer,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from app.domain.activations import Recompute, upcast_saved
from app.domain.architecture import ModelName
from app.domain.cut_grid import cut_drawn, rank, stage_columns
from app.domain.eighths import COLUMNS
from app.domain.expert_grid import card_experts, expert_rank
from app.domain.fixes import Fix, Fixes
from app.domain.fixes import fixes as what_fits
from app.domain.parallel import Cut
from app.domain.placement import Device, Offload
from app.domain.recipes import Band, Recipe
from app.domain.report import (
    ANY_SIZE,
    LAST_PHASE,
    POINTS,
    Accounting,
    Beat,
    Collective,
    CutLink,
    CutWire,
    Holding,
    Instant,
    LinkBytes,
    Parallel,
    Part,
    Run,
    Scope,
    StageReport,
    StepTime,
    Transfer,
    Whose,
)
from app.domain.scenario import Scenario
from app.domain.sharding import Cell, CellState, Layout, Share, holders, share, shown_indices
from app.domain.stages import Stage
from app.domain.step_text import explanation
from app.domain.units import ByteUnit, factor_text
from app.measure.snapshots import Comparison
from app.web.fields import FIELDS, Kind, RunField


class TransferOut(BaseModel):
    """One collective of a training step."""

    collective: Collective
    band: Band
    when: str
    volume_p: float = Field(
        description="Traffic in units of P, the number of weights (a cut model's card's), where every weight trains."
    )
    whose: Whose = Field(
        description="Which weights it moves where some are frozen: gradients and ZeRO-1 and ZeRO-2's gather move "
        "those that train; ZeRO-3 gathers every weight forward, and backward those the backward pass reaches."
    )

    @classmethod
    def of(cls, transfer: Transfer) -> TransferOut:
        """From the domain's transfer."""
        return cls(
            collective=transfer.collective,
            band=transfer.band,
            when=transfer.when,
            volume_p=float(transfer.volume_p),
            whose=transfer.whose,
        )


class StageRow(BaseModel):
    """One arrangement's memory and communication."""

    stage: Stage
    title: str
    bytes_per_weight: float = Field(description="Bytes of model state one card keeps per weight of the model.")
    per_gpu_bytes: int = Field(description="Bytes of model state on one card for the model (30B weights).")
    communication_p: float = Field(
        description="Traffic of one training step in units of P (a cut model's card's weights): less where frozen."
    )
    communication: list[TransferOut]

    @classmethod
    def of(cls, row: StageReport) -> StageRow:
        """From the domain's report of one stage of a run."""
        return cls(
            stage=row.stage,
            title=row.stage.info.title,
            bytes_per_weight=float(row.bytes_per_weight),
            per_gpu_bytes=row.per_gpu_bytes,
            communication_p=float(row.communication_p),
            communication=[TransferOut.of(t) for t in row.transfers],
        )


def _exact(nbytes: Fraction) -> int | float:
    """Bytes a weight for JSON: an int where whole, as before; else the float (exact: a power of two below)."""
    return nbytes.numerator if nbytes.denominator == 1 else float(nbytes)


class BandOut(BaseModel):
    """One band of the recipe."""

    band: Band
    label: str
    precision: str
    bytes: int | float = Field(
        description="Bytes a weight: whole for most formats, a blockwise format's exact fraction as a decimal "
        "(8-bit Adam's moments 2.03125, NF4's weights 0.515869140625)."
    )

    @classmethod
    def all_of(cls, recipe: Recipe) -> list[BandOut]:
        """Every band of a recipe, in grid order."""
        return [cls(band=s.band, label=s.label, precision=s.precision, bytes=_exact(s.nbytes)) for s in recipe.specs]


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


class CutCardOut(BaseModel):
    """One drawn card of a cut model: its place in Megatron's rank order and the columns it does not keep."""

    card: int = Field(ge=0, description="The GPU, 0-based.")
    pipeline_stage: int = Field(ge=0, description="Its pipeline stage, 0-based (0 with pp = 1).")
    tensor_rank: int = Field(
        ge=0, description="Its rank in its tensor-parallel group: it keeps the rank-th 1/tp slice."
    )
    context_rank: int = Field(ge=0, description="Its rank in its context-parallel group (0 with cp = 1).")
    data_parallel_rank: int = Field(ge=0, description="Its data-parallel rank: its place in ZeRO's group, with cp.")
    columns: list[int] = Field(description="The model's eighths (0 to 7, by weight) its stage keeps all or part of.")
    absent_columns: list[int] = Field(
        description="The eighths another pipeline stage keeps: absent from this card, not held on its behalf."
    )
    experts: list[int] | None = Field(
        None,
        description="A mixture of experts' routed experts this card keeps in each of its stage's mixture-of-experts "
        "blocks (0-based): its expert-parallel rank's experts / ep (Megatron's order etp, ep, edp, pp); the others "
        "are not here. Absent for a dense model.",
    )
    expert_parallel_rank: int | None = Field(None, ge=0, description="Its rank in its expert-parallel group.")
    expert_data_parallel_rank: int | None = Field(
        None, ge=0, description="Its place in the expert-data-parallel group, over which ZeRO shards the experts."
    )

    @classmethod
    def all_of(
        cls, cut: Cut, gpus: int, experts: int = 0, dense_stages: frozenset[int] = frozenset()
    ) -> list[CutCardOut]:
        """The cards the page's cut grid draws (every one up to 16; beyond, whole tensor groups; 4 a stage past 2).

        `experts`: the model's routed experts a block (0: dense), which each card's are listed of, but on the
        `dense_stages`, whose blocks all have a dense MLP (DeepSeek-V3's first in 16): their cards keep none.
        """
        found = []
        for card in cut_drawn(cut, gpus):
            here = rank(card, cut, gpus)
            own = stage_columns(here.stage, cut.pp)
            routed = expert_rank(card, cut, gpus) if experts else None
            found.append(
                cls(
                    card=card,
                    pipeline_stage=here.stage,
                    tensor_rank=here.tp,
                    context_rank=here.cp,
                    data_parallel_rank=here.dp,
                    columns=list(own),
                    absent_columns=[c for c in range(COLUMNS) if c not in own],
                    experts=(list(card_experts(card, cut, gpus, experts)) if here.stage not in dense_stages else [])
                    if experts
                    else None,
                    expert_parallel_rank=routed.ep if routed else None,
                    expert_data_parallel_rank=routed.edp if routed else None,
                )
            )
        return found


class LayoutOut(BaseModel):
    """The whole grid for one stage."""

    stage: Stage
    gpus: int
    weights: int
    bands: list[BandOut]
    cells: list[CellOut]
    cut_cards: list[CutCardOut] | None = Field(
        None,
        description="With tp, pp, cp or ep above 1, or a mixture of experts: each card the page's cut grid draws, "
        "its pipeline stage, tensor rank and the model's eighths it keeps and lacks, and the routed experts it keeps "
        "(docs/parallelism.md, the grid of a cut model; docs/moe.md, the experts on the grid). "
        "`cells` stay ZeRO's picture alone, one weight a card. Absent without a cut or experts.",
    )

    @classmethod
    def of(
        cls, grid: Layout, cut: Cut | None = None, experts: int = 0, dense_stages: frozenset[int] = frozenset()
    ) -> LayoutOut:
        """From the domain's layout; `cut`, the run's cut, whose cards are listed when it cuts the model.

        Or when the model has `experts` (routed, a block; 0: dense): their columns are drawn as a cut's.
        """
        return cls(
            stage=grid.stage,
            gpus=grid.gpus,
            weights=grid.weights,
            bands=BandOut.all_of(grid.recipe),
            cells=[CellOut.of(c) for c in grid.cells],
            cut_cards=None
            if cut is None or not (cut.cuts or experts)
            else CutCardOut.all_of(cut, grid.gpus, experts, dense_stages),
        )


class OverheadOut(BaseModel):
    """One overhead on one card, at its highest moment."""

    name: str
    bytes: int
    source: str = Field(description="Where its default comes from: an issue, documentation or the code.")
    parameter: str = Field(description="The URL parameter that sets it.")


class LinkOut(BaseModel):
    """One collective of a step, and one card's bytes for it over each link."""

    collective: Collective
    band: Band
    when: str
    scope: Scope = Field(
        description="The cards it runs over: the shard group, the replicas, hpZ's group, or a mixture of experts' "
        "expert-data-parallel group (its routed experts' own collective, where ep × etp differs from tp)."
    )
    cards: int = Field(description="n: the cards it runs over.")
    nodes: int = Field(description="k: the nodes those cards are in.")
    algorithm: str = Field(description="The algorithm and what it sends a card, e.g. a ring's (n−1)/n.")
    on_the_wire: str = Field(description="int8 (qwZ) or int4 (qgZ) where ZeRO++ quantizes it; empty otherwise.")
    buffer_bytes: int = Field(description="The bytes it gathers or reduces, as they are on the wire.")
    inside_bytes: int = Field(description="Bytes one card sends over the link inside its node.")
    between_bytes: int = Field(description="Bytes one card sends between nodes.")

    @classmethod
    def of(cls, link: LinkBytes) -> LinkOut:
        """From the domain's collective by link."""
        t = link.transfer
        return cls(
            collective=t.collective,
            band=t.band,
            when=t.when,
            scope=t.scope,
            cards=link.span.cards,
            nodes=link.span.nodes,
            algorithm=link.algorithm,
            on_the_wire=link.quantized,
            buffer_bytes=link.buffer,
            inside_bytes=link.inside,
            between_bytes=link.between,
        )


class TimeOut(BaseModel):
    """An estimate of one step's time, from the links' bandwidths and the card's peak: not a measurement."""

    inside_seconds: float = Field(description="One card's bytes inside its node at the nvlink bandwidth.")
    between_seconds: float = Field(description="One card's bytes between nodes at the network bandwidth.")
    wire_seconds: float = Field(description="Both, one after the other.")
    compute_seconds: float | None = Field(
        None, description="6 × weights × tokens (batch × seq) at tflops × mfu; absent with an empty micro-batch."
    )
    hides: bool | None = Field(
        None, description="Whether wire_seconds ≤ compute_seconds: the traffic can hide behind the compute."
    )

    @classmethod
    def of(cls, time: StepTime) -> TimeOut:
        """From the domain's estimate."""
        return cls(
            inside_seconds=float(time.inside),
            between_seconds=float(time.between),
            wire_seconds=float(time.wire),
            compute_seconds=None if time.compute is None else float(time.compute),
            hides=time.hides,
        )


class CutLinkOut(BaseModel):
    """One kind of the model cut's traffic in a step, and the most loaded card's bytes for it on each link."""

    kind: Parallel = Field(
        description="tp (the activations' all-reduces), pp (the stages' sends), cp (K and V) or ep (the experts' "
        "all-to-alls)."
    )
    description: str
    algorithm: str
    count: int = Field(description="How many such collectives or sends the card takes part in a step.")
    buffer_bytes: int = Field(description="The bytes of one: the tensor a collective reduces, or one send carries.")
    inside_bytes: int = Field(description="Bytes the card sends for them inside its node in a step.")
    between_bytes: int = Field(description="Bytes the card sends for them between nodes in a step.")

    @classmethod
    def of(cls, link: CutLink) -> CutLinkOut:
        """From the domain's line of the cut's traffic."""
        return cls(
            kind=link.kind,
            description=link.description,
            algorithm=link.algorithm,
            count=link.count,
            buffer_bytes=link.buffer,
            inside_bytes=link.inside,
            between_bytes=link.between,
        )


class CutOut(BaseModel):
    """The model cut's own traffic (tensor, pipeline, context parallelism), its time and the pipeline's bubble.

    Apart from ZeRO's collectives (`collectives`, `time`): an estimate from peak figures, not a measurement.
    """

    known: bool = Field(description="False for a bare weight count: without b · s · h no traffic is counted.")
    links: list[CutLinkOut] = Field(description="The most loaded card's cut traffic, one line a kind.")
    inside_bytes: int = Field(description="Their bytes inside the card's node in a step.")
    between_bytes: int = Field(description="Their bytes between nodes in a step.")
    inside_seconds: float
    between_seconds: float
    wire_seconds: float = Field(description="Both, one after the other.")
    compute_seconds: float | None = Field(
        None, description="6 × weights × tokens × microbatches / (tp × pp × cp) at tflops × mfu: one card's share."
    )
    bubble: float = Field(description="The pipeline bubble's share of the ideal step: (pp − 1) / microbatches / vpp.")
    bubble_seconds: float | None = Field(None, description="bubble × compute_seconds.")
    step_seconds: float | None = Field(
        None, description="compute + bubble + the cut's wire, none of it hidden: an upper bound (ZeRO's aside)."
    )

    @classmethod
    def of(cls, cut: CutWire) -> CutOut:
        """From the domain's figures."""
        return cls(
            known=cut.known,
            links=[CutLinkOut.of(link) for link in cut.links],
            inside_bytes=cut.inside_bytes,
            between_bytes=cut.between_bytes,
            inside_seconds=float(cut.inside_seconds),
            between_seconds=float(cut.between_seconds),
            wire_seconds=float(cut.wire),
            compute_seconds=None if cut.compute is None else float(cut.compute),
            bubble=float(cut.bubble),
            bubble_seconds=None if cut.bubble_seconds is None else float(cut.bubble_seconds),
            step_seconds=None if cut.step is None else float(cut.step),
        )


class FixOut(BaseModel):
    """One knob of the run changed so that it fits, or comes nearer: its peak worked out as the verdict's."""

    knob: str = Field(
        description="The query parameter changed: recompute, batch, seq, offload, stage, sp, tp, ep (a mixture "
        "of experts), cp, pp, microbatches or gpus."
    )
    value: str = Field(description="Its new value, as the query writes it.")
    peak_bytes: int = Field(description="The peak of the run so changed, counted as peak_bytes.")
    headroom_bytes: int = Field(description="The capacity less that peak: negative, what it still misses by.")
    fits: bool = Field(description="Whether the run so changed fits the card.")
    saved_bytes: int = Field(description="What the change takes off this stage's peak_bytes.")
    small: bool = Field(
        description="Whether it takes almost nothing off (under 1% of the peak); the run's own selective "
        "recomputation is weighed against none."
    )
    then: dict[str, str] | None = Field(
        None,
        description="A second knob turned with this one, where no one knob fits: ZeRO-3's own change, "
        'e.g. {"recompute": "full"} with stage zero3.',
    )

    bubble: float = Field(
        0.0,
        description="For pp and microbatches: the pipeline's bubble with the change, its idle time over the ideal "
        "step's compute, (pp − 1) / microbatches (÷ vpp); 0 for other knobs.",
    )
    between_nodes: bool = Field(
        False,
        description="Whether the change's own traffic crosses nodes: context parallelism's gathers of keys and "
        "values, the pipeline's sends, expert parallelism's all-to-all.",
    )

    @classmethod
    def all_of(cls, found: Fixes) -> list[FixOut] | None:
        """Those that take more than a little off, then those that take almost nothing; None for none."""
        every = [*found.changes, *found.small]
        return [cls.of(fix) for fix in every] or None

    @classmethod
    def of(cls, fix: Fix) -> FixOut:
        """From the domain's change."""
        return cls(
            knob=fix.knob,
            value=fix.value,
            peak_bytes=fix.peak_bytes,
            headroom_bytes=fix.headroom_bytes,
            fits=fix.fits,
            saved_bytes=fix.saved_bytes,
            small=fix.small,
            then=None if fix.then is None else dict([fix.then]),
            bubble=float(fix.bubble),
            between_nodes=fix.between_nodes,
        )


class MemoryRow(BaseModel):
    """One stage of the described run."""

    stage: Stage
    bytes_per_weight: float
    per_gpu_bytes: int = Field(
        description="Model states on one card at rest; a sharded band is one slice of ceil(P/N) weights. With the "
        "model cut (tp, pp, cp), the most loaded card's: its pipeline stage's weights (pipeline_stage) ÷ tp, "
        "sharded over its data-parallel group of dp × cp cards; a mixture of experts' routed experts ÷ (ep × etp), "
        "sharded over the edp cards of their expert-data-parallel group (expert_params_per_gpu)."
    )
    communication_p: float = Field(
        description="Traffic of one step in units of P; 0 on one card, less where weights are frozen."
    )
    communication_bytes: int = Field(description="Bytes through each card per step: P × the bytes of each band moved.")
    inside_bytes: int = Field(
        description="Bytes one card sends inside its node per step: each collective's (n−1)/n kept, by link."
    )
    between_bytes: int = Field(description="Bytes one card sends between nodes per step.")
    collectives: list[LinkOut] = Field(description="The step's collectives, each by link.")
    time: TimeOut
    cut: CutOut | None = Field(
        None, description="The model cut's own traffic by link, its time and the bubble (only with tp, pp or cp > 1)."
    )
    peak_bytes: int = Field(
        description="The whole GPU peak: the state plus, at the step's highest moment, what a card holds beyond it "
        "(for ZeRO-3 one assembled layer's weights and gradients, for ZeRO-2 one layer's gradients) and the "
        "activations kept by then. Equal to state_peak_bytes when no activations are counted. With the model "
        "cut, the most loaded card's (pipeline_stage): its stage's state and layers ÷ tp, and the activations "
        "of its micro-batches in flight."
    )
    state_peak_bytes: int = Field(
        description="Model states and the layer in hand at their own highest moment, without activations: the "
        "seed's and the ZeRO paper's figure. Model states only when the largest layer is unknown."
    )
    activation_bytes: int = Field(
        description="Activations at the moment of peak_bytes, on the most loaded card (pipeline_stage), its "
        "micro-batches in flight included; with accounting=megatron, Megatron-LM's own formula."
    )
    activation_bytes_per_layer: int | None = Field(
        None,
        description="What one block keeps for its backward on the most loaded card, for one micro-batch "
        "(Korthikanti et al. 2022's per-layer figure, Table 2 with tp and sp, ÷ cp; under full recomputation "
        "the block's input). Absent for a bare weight count, which has no shape.",
    )
    pipeline_stage: int | None = Field(
        None,
        description="The pipeline stage (0-based) of the most loaded card these figures are for: the first "
        "(the embedding and the most micro-batches in flight) or the last (the output layer and the logits), "
        "whichever holds more at its peak. Absent without a pipeline (pp = 1).",
    )
    logits_bytes: int | None = Field(
        None, description="The loss's fp32 log-probabilities, 4 × vocab × seq × batch; absent without a shape."
    )
    params_per_gpu: int | None = Field(
        None,
        description="The weights the most loaded card keeps state for, before ZeRO shards them: its stage's "
        "attention, shared experts and embeddings ÷ tp, its routed experts ÷ (ep × etp), the router and norms "
        "whole; under accounting=megatron, Megatron-LM's formula's most loaded shard (its blocks spread evenly over "
        "the pp stages). Only for a mixture of experts.",
    )
    expert_params_per_gpu: int | None = Field(
        None,
        description="Of params_per_gpu, the routed experts' weights, whose state ZeRO shards over the "
        "expert-data-parallel group (edp cards); the rest over dp × cp. Only for a mixture of experts, where 0 is a "
        "value: a card of dense blocks alone (DeepSeek-V3's first pipeline stage).",
    )
    logits_upcast_bytes: int | None = Field(
        None,
        description="The logits upcast to fp32 for the loss (Hugging Face's logits.float(), Megatron-LM's fused "
        "cross entropy), 4 × vocab × seq × batch: alive while the loss is computed, beside the log-probabilities, "
        "not kept for the backward, so not in activation_bytes; absent without a shape.",
    )
    overhead_bytes: int = Field(description="The overheads counted in peak_bytes: their sum with overheads=1, else 0.")
    overheads: list[OverheadOut] = Field(
        description="Every overhead at the peak, counted or not; their sum is what overheads=1 adds."
    )
    fits: bool | None = Field(None, description="Whether the peak fits the capacity (only with a capacity).")
    headroom_bytes: int | None = Field(
        None,
        description="The capacity less peak_bytes, which already holds the activations (and the overheads with "
        "overheads=1): what is left over, negative when over (only with a capacity).",
    )
    max_params_that_fit: int | None = Field(
        None,
        description="Largest model whose peak fits, by the same test as fits, with the largest layer unchanged, "
        "exact (only with a capacity; null when not even a model of one largest layer fits, or when any size fits: "
        "see any_size_fits).",
    )
    any_size_fits: bool | None = Field(
        None,
        description="True where a model of any size fits: every band that grows with the weights is offloaded and "
        "no layer is known, so the card's peak does not grow with the model (max_params_that_fit is then null).",
    )
    max_batch_that_fits: int | None = Field(
        None,
        description="Largest micro-batch per GPU whose peak fits, by the same test as fits, at most 65,536 (only "
        "with a capacity and a model's shape; null when not even an empty micro-batch fits).",
    )
    gpu_bytes: int = Field(description="What one card holds on its GPU at its peak, as placed: peak_bytes.")
    cpu_bytes_per_node: int = Field(
        description="One node's CPU RAM for training state; with accounting=deepspeed, DeepSpeed's estimator's."
    )
    pinned_bytes_per_node: int = Field(description="Of which page-locked: offloaded state with pin_memory=1.")
    nvme_bytes_per_node: int = Field(description="State on one node's NVMe (offload=nvme, ZeRO-3).")
    pcie_bytes_per_step: int = Field(
        description="Bytes over one card's PCIe link per step, both ways, apart from communication_bytes."
    )
    host_fits: bool | None = Field(
        None, description="Whether a node's CPU RAM (and NVMe, with nvme_space) holds it (only with host_memory)."
    )
    differences: list[str] = Field(
        description="Every way this stage is counted differently from the ZeRO paper, a sentence each."
    )
    fixes: list[FixOut] | None = Field(
        None,
        description="Where the peak is over the card: the run's knobs turned one at a time (recompute, "
        "micro-batch, sequence, offload, the next stage, more GPUs), those that fit first (only when over).",
    )

    @model_serializer(mode="wrap")
    def _null_when_nothing_fits(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # /api/memory leaves out every None (without a capacity there is no fit to tell), but with a
        # capacity "not even one largest layer fits" is an answer: null, not a field gone missing.
        data: dict[str, Any] = handler(self)
        if self.fits is not None:
            data.setdefault("max_params_that_fit", None)
            if self.activation_bytes_per_layer is not None:
                data.setdefault("max_batch_that_fits", None)
        return data

    @classmethod
    def __get_pydantic_json_schema__(cls, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        # The schema of its fields, as without the serializer above: its return type says only "a dict".
        return handler({key: value for key, value in schema.items() if key != "serialization"})

    @classmethod
    def of(cls, row: StageReport, run: Run, found: Fixes | None = None) -> MemoryRow:
        """From the domain's report, and what would make it fit (`fixes.fixes`)."""
        shape = run.activations
        moe = run.architecture is not None and run.architecture.moe is not None
        return cls(
            stage=row.stage,
            bytes_per_weight=float(row.bytes_per_weight),
            per_gpu_bytes=row.per_gpu_bytes,
            communication_p=float(row.communication_p),
            communication_bytes=row.communication_bytes,
            inside_bytes=row.inside_bytes,
            between_bytes=row.between_bytes,
            collectives=[LinkOut.of(link) for link in row.links],
            time=TimeOut.of(row.time),
            cut=CutOut.of(row.cut) if run.cut.cuts else None,
            peak_bytes=row.peak_bytes,
            state_peak_bytes=row.state_peak_bytes,
            activation_bytes=row.activation_bytes,
            activation_bytes_per_layer=run.activation_per_layer,
            pipeline_stage=row.pipeline_stage if run.cut.pp > 1 else None,
            logits_bytes=shape.logits * run.batch if shape else None,
            # For a mixture of experts always, 0 experts too (DeepSeek-V3's first stage keeps only dense blocks).
            params_per_gpu=row.card_params if moe else None,
            expert_params_per_gpu=row.expert_params if moe else None,
            logits_upcast_bytes=upcast_saved(shape.architecture, shape.shape).nbytes * run.batch
            if shape and shape.architecture
            else None,
            overhead_bytes=row.overhead_bytes,
            overheads=[
                OverheadOut(name=o.name, bytes=o.nbytes, source=o.source, parameter=o.parameter) for o in row.overheads
            ],
            fits=row.fits,
            headroom_bytes=row.headroom_bytes,
            max_params_that_fit=None if row.max_params_that_fit is ANY_SIZE else row.max_params_that_fit,
            any_size_fits=True if row.max_params_that_fit is ANY_SIZE else None,
            max_batch_that_fits=row.max_batch_that_fits,
            gpu_bytes=row.peak_bytes,
            cpu_bytes_per_node=row.host.cpu_bytes,
            pinned_bytes_per_node=row.host.pinned_bytes,
            nvme_bytes_per_node=row.host.nvme_bytes,
            pcie_bytes_per_step=row.host.pcie_bytes_per_step,
            host_fits=row.host.fits,
            differences=list(row.differences),
            fixes=None if found is None else FixOut.all_of(found),
        )


class ConfigOut(BaseModel):
    """The model read from a config.json: its title, the weights derived, and the count it publishes."""

    title: str = Field(description="`_name_or_path`, else the config's `model_type`.")
    params: int = Field(description="The weights derived from the config's shapes.")
    published_params: int | None = Field(None, description="The count the config states (`num_parameters`).")
    config: str = Field(description="The keys read, as compact JSON: what a link carries.")

    @classmethod
    def of(cls, scenario: Scenario) -> ConfigOut | None:
        """From a scenario; None where no config was given."""
        config = scenario.inputs.config if scenario.inputs else None
        if config is None:
            return None
        return cls(title=config.title, params=config.params, published_params=config.published, config=config.minimal)


class _ResolvedByHand(BaseModel):
    """The run as computed: presets resolved and defaults filled in."""

    model: ModelName
    params: int
    config: ConfigOut | None = Field(None, description="The model's config.json, where one was given.")
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
    batch: int = Field(description="Sequences per micro-batch, per GPU.")
    seq: int = Field(description="Tokens per sequence: as given, else the model's context.")
    recompute: Recompute
    overheads: bool = Field(description="Whether the peak counts the overheads (overheads=1).")
    trainable_params: int = Field(description="Weights that train, LoRA's adapters included.")
    frozen_params: int = Field(description="Weights that do not train: their weights band only.")
    adapter_params: int = Field(description="LoRA's adapter weights, counted in params; 0 without LoRA.")
    activations_counted: bool = Field(
        description="False for a bare weight count (no shape to count them from) or an empty micro-batch."
    )
    accounting: Accounting
    offload: Offload
    offload_device: Device = Field(description="Where the offloaded state goes, as asked (NVMe needs ZeRO-3).")
    pin_memory: bool
    nodes: int
    gpus_per_node: int
    zero_init: bool
    host_memory: int | None = None
    nvme_space: int | None = None
    shard: int = Field(description="The shard group: every GPU, unless hybrid sharding splits them.")
    replicas: int = Field(description="The shard groups, each keeping a whole copy: gpus / shard.")
    hpz: int = Field(description="ZeRO++'s hpZ partition size; 1: off.")
    qwz: bool
    qgz: bool
    nvlink: int = Field(description="GB/s one GPU sends inside its node.")
    network: int = Field(description="Gb/s one GPU sends between nodes.")
    tflops: int = Field(description="The card's dense bf16 peak, TFLOP/s.")
    mfu: int = Field(description="Percent of the peak the step reaches.")
    tp: int = Field(description="Tensor-parallel degree.")
    sp: bool = Field(description="Sequence parallelism (with tp > 1).")
    pp: int = Field(description="Pipeline stages.")
    vpp: int = Field(description="Virtual pipeline stages per GPU (interleaved 1F1B).")
    microbatches: int = Field(description="Micro-batches per step per data-parallel rank.")
    cp: int = Field(description="Context-parallel degree.")
    dp: int = Field(description="The data-parallel degree: gpus / (tp × pp × cp).")
    ep: int = Field(description="Expert-parallel degree: the routed experts split across this many GPUs.")
    etp: int = Field(description="Expert tensor-parallel degree (as tp unless set).")
    edp: int = Field(
        description="The expert-data-parallel degree, over which ZeRO shards the experts' state: "
        "gpus / (pp × ep × etp)."
    )
    largest_layer_per_gpu: int | None = Field(
        None,
        description="What of the largest layer the most loaded card assembles under ZeRO-3: a mixture-of-experts "
        "block's non-routed weights ÷ tp (router and norms whole) and its own experts ÷ (ep × etp), or the "
        "embedding ÷ tp, whichever is larger. Only for a mixture of experts.",
    )
    active_params: int | None = Field(
        None,
        description="The weights one token's step computes with (6 × active weights × tokens): all but the "
        "routed experts its router did not choose; memory keeps all of params. Only for a mixture of experts.",
    )
    capacity_factor: str = Field(
        description="A mixture of experts' capacity factor, each expert's input padded to it (1.25), or dropless."
    )


def _factor(scenario: Scenario) -> str:
    factor = scenario.inputs.capacity_factor if scenario.inputs else None
    return "dropless" if factor is None else factor_text(factor)


def _echoed(field: RunField) -> Any:
    """The echo's type for a declared field: its enumeration, a switch's bool, else a whole number."""
    return field.choices or {Kind.SWITCH: bool}.get(field.kind, int)


# The inputs whose declaration says how the run used them (`RunField.applied`) are echoed from it: a new
# input needs no line here.
if TYPE_CHECKING:
    ResolvedInputs = _ResolvedByHand
else:
    ResolvedInputs = create_model(
        "ResolvedInputs",
        __base__=_ResolvedByHand,
        __doc__=_ResolvedByHand.__doc__,
        **{f.echo: (_echoed(f), Field(description=f.help)) for f in FIELDS if f.echoed},
    )


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
                config=ConfigOut.of(scenario),
                gpus=run.gpus,
                recipe=run.recipe.name,
                bands=BandOut.all_of(run.recipe),
                largest_layer=run.largest_layer,
                largest_layer_source=scenario.largest_layer_source,
                assembled_layer_bytes=run.assembled_layer_bytes,
                layer_exceeds_card=scenario.report.layer_exceeds_card,
                capacity=run.capacity,
                units=scenario.units,
                batch=run.batch,
                seq=scenario.seq,
                recompute=run.activations.recompute if run.activations else Recompute.NONE,
                overheads=run.count_overheads,
                trainable_params=run.params - run.frozen,
                frozen_params=run.frozen,
                adapter_params=scenario.adapters,
                activations_counted=run.activations is not None and run.batch > 0,
                accounting=run.setup.accounting,
                offload=run.setup.placement.offload,
                offload_device=run.setup.placement.target,
                pin_memory=run.setup.placement.pin_memory,
                nodes=run.nodes,
                gpus_per_node=run.gpus_per_node,
                zero_init=run.zero_init,
                host_memory=run.host_memory,
                nvme_space=run.nvme_space,
                shard=run.shards,
                replicas=run.replicas,
                hpz=run.setup.hpz,
                qwz=run.qwz,
                qgz=run.qgz,
                nvlink=run.links.nvlink,
                network=run.links.network,
                tflops=run.links.tflops,
                mfu=run.links.mfu,
                tp=run.cut.tp,
                sp=run.cut.sp,
                pp=run.cut.pp,
                vpp=run.cut.vpp,
                microbatches=run.cut.microbatches,
                cp=run.cut.cp,
                dp=run.dp,
                ep=run.cut.ep,
                etp=run.cut.expert_tp,
                edp=run.cut.edp(run.gpus),
                active_params=run.active_params if run.active_params != run.params else None,
                largest_layer_per_gpu=run.largest_layer_on_card if run.active_params != run.params else None,
                capacity_factor=_factor(scenario),
                **{str(f.echo): f.applied(scenario) for f in FIELDS if f.echoed},
            ),
            stages=[MemoryRow.of(row, run, what_fits(scenario, row.stage)) for row in scenario.report],
            notes=list(scenario.notes),
        )


class StepTransferOut(BaseModel):
    """A collective in flight during a phase."""

    collective: Collective
    band: Band
    columns: list[int] = Field(description="The columns (eighths of the model) moved.")
    volume_p: float = Field(description="Traffic in units of P.")


class ColumnOut(BaseModel):
    """One of the step's 8 columns: an eighth of the model, in forward order."""

    index: int
    label: str = Field(description="What it stands for, e.g. 'layers 41–51 of 80'.")
    largest_layer: int | None = Field(description="Most weights assembled at once while working on it.")
    holders: list[int] = Field(description="The first and last card whose slices cover part of it.")


class StepCellOut(BaseModel):
    """One card's band of one column during the phase."""

    card: int
    column: int
    band: Band
    state: CellState
    holding: Holding = Field(
        description="held; partial (this card's slice, part of the column); gathered (assembled here for this "
        "phase only); sent (gradients computed here, then reduce-scattered to their owners); dashed (not here)."
    )
    share: str = Field(description="The part of the column in this card's slice, e.g. '1', '1/2', '0'.")
    active: bool = Field(description="Whether the phase works on this cell, as its explanation says.")


class StepOut(BaseModel):
    """One phase of one training step of the run under one stage."""

    stage: Stage
    phase: int
    last_phase: int
    part: Part
    column: int | None = Field(description="The column being computed; none outside the passes.")
    beat: Beat | None = Field(
        description="Which of the column's three phases: gather (its slices arrive), compute, discard (the "
        "assembled copy dropped, the backward's gradients sent); none outside the passes."
    )
    title: str
    explanation: str
    transfers: list[StepTransferOut]
    tally_p: float = Field(description="Traffic so far this step, this phase included, in units of P.")
    gpus: int
    cards: list[int] = Field(description="The cards drawn: all up to 16, else the first four and the last four.")
    columns: list[ColumnOut]
    state_bytes: int = Field(description="What every card keeps at rest.")
    gathered_bytes: int = Field(description="One layer's weights assembled on every card during this phase.")
    computed_bytes: int = Field(description="One layer's gradients computed on every card before the reduce-scatter.")
    activation_bytes: int = Field(description="Activations every card keeps now, for the backward pass.")
    live_bytes: int = Field(description="What each card holds now: the four above added up; the same on every card.")
    peak_bytes_so_far: int = Field(description="The most live bytes from phase 0 to this one.")
    cells: list[StepCellOut]

    @classmethod
    def of(cls, stage: Stage, index: int, scenario: Scenario) -> StepOut:
        """From the domain's step of the run."""
        run, columns = scenario.run, scenario.columns
        phase = scenario.report.step(stage)[index]
        cards = shown_indices(run.gpus)
        return cls(
            stage=stage,
            phase=index,
            last_phase=LAST_PHASE,
            part=phase.part,
            column=phase.column,
            beat=phase.beat,
            title=phase.title,
            explanation=explanation(phase, run.recipe, columns),
            transfers=[
                StepTransferOut(
                    collective=t.collective, band=t.band, columns=list(t.columns), volume_p=float(t.volume_p)
                )
                for t in phase.transfers
            ],
            tally_p=float(phase.tally_p),
            gpus=run.gpus,
            cards=list(cards),
            columns=[
                ColumnOut(
                    index=c.index,
                    label=c.label,
                    largest_layer=c.largest_layer,
                    holders=[holders(c.index, run.gpus)[0], holders(c.index, run.gpus)[-1]],
                )
                for c in columns
            ],
            state_bytes=phase.state_bytes,
            gathered_bytes=phase.extra.gathered,
            computed_bytes=phase.extra.computed,
            activation_bytes=phase.extra.activations,
            live_bytes=phase.live_bytes,
            peak_bytes_so_far=phase.peak_bytes_so_far,
            cells=[
                StepCellOut(
                    card=card,
                    column=column.index,
                    band=band,
                    state=holding.state,
                    holding=holding,
                    share=_share_text(share(card, column.index, run.gpus)),
                    active=phase.active(card, column.index, band),
                )
                for card in cards
                for column in columns
                for band in Band
                # A frozen column keeps its weights only, as the page draws it.
                if band is Band.WEIGHTS or not run.frozen_column(column.index)
                for holding in (phase.holding(card, column.index, band),)
            ],
        )


class PointOut(BaseModel):
    """What one card holds at one phase of the step: every card holds the same."""

    phase: int
    instant: Instant = Field(
        description="whole (a phase outside the passes); in a pass column, its three phases: gather (the layer's "
        "weights assembled), compute (the layer in hand), discard (the assembled copy dropped, gradients sent)."
    )
    live_bytes: int = Field(description="All of it: the five below added up.")
    state_bytes: int = Field(description="What the card keeps at rest.")
    gathered_bytes: int = Field(description="A layer's weights assembled here (ZeRO-3), for the layer in hand.")
    computed_bytes: int = Field(description="A layer's gradients computed here before their reduce-scatter.")
    activation_bytes: int = Field(description="Activations kept for the backward pass.")
    overhead_bytes: int = Field(description="The overheads counted (overheads=1): the same at every instant.")


class StageTimelineOut(BaseModel):
    """One card's memory through one training step under one stage."""

    stage: Stage
    peak_bytes: int = Field(description="The highest point: the stage's peak, as /api/memory gives it.")
    points: list[PointOut]


class TimelineOut(BaseModel):
    """One card's memory through one training step, under each stage: the points of the step's chart."""

    last_phase: int
    points_per_step: int = Field(description="One a phase: the live_bytes of each phase in /api/step.")
    stages: list[StageTimelineOut]

    @classmethod
    def of(cls, scenario: Scenario) -> TimelineOut:
        """From the report's timeline of each stage."""
        report = scenario.report
        return cls(
            last_phase=LAST_PHASE,
            points_per_step=POINTS,
            stages=[
                StageTimelineOut(
                    stage=row.stage,
                    peak_bytes=row.peak_bytes,
                    points=[
                        PointOut(
                            phase=p.phase,
                            instant=p.instant,
                            live_bytes=p.nbytes,
                            state_bytes=p.state,
                            gathered_bytes=p.gathered,
                            computed_bytes=p.computed,
                            activation_bytes=p.activations,
                            overhead_bytes=p.overheads,
                        )
                        for p in report.timeline(row.stage)
                    ],
                )
                for row in report
            ],
        )


def _share_text(part: Share | None) -> str:
    return "0" if part is None else part.text


# The measurement: the domain's dataclasses are its JSON, field for field.


class MeasuredOut(RootModel[Comparison]):
    """The shipped measurement snapshot and its comparison with the model."""

    # The fields' descriptions are the domain's attribute docstrings, so each is written once, beside its field.
    model_config = ConfigDict(use_attribute_docstrings=True)


class ConfigReadOut(BaseModel):
    """A DeepSpeed config read as a run (POST /api/config)."""

    url: str = Field(description="The page's address for the run: the run of the query, with what the config sets.")
    query: dict[str, str] = Field(description="The run's URL parameters that differ from the defaults, stage first.")
    ignored: list[str] = Field(description="The config's keys not read, dotted from the top (gradient_clipping).")
    notes: list[str] = Field(
        default_factory=list, description="What the reading says of a key it read another way (MiCS as HSDP)."
    )
