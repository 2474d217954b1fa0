"""The query parameters that describe a run, shared by the page and the API.

One Pydantic model, so both validate the same way and the OpenAPI schema documents exactly
what is accepted: the count and size grammars are the domain's own patterns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from app.domain.accounting import Accounting
from app.domain.activations import MAX_SEQ, Recompute
from app.domain.architecture import PRESETS, ModelName
from app.domain.bands import MAX_CUSTOM_BAND_BYTES, RecipeName
from app.domain.fit import MAX_BATCH, MAX_GPUS
from app.domain.measured import IMPLS, Impl, default_impl
from app.domain.memory import DEFAULT_GPUS
from app.domain.overheads import DEFAULTS, Overheads
from app.domain.placement import Device, Offload, cluster_of
from app.domain.quantities import BYTES_PATTERN, COUNT_PATTERN, ByteUnit, ambiguity, parse_bytes, parse_count
from app.domain.scenario import DEFAULT_MODEL, Inputs
from app.domain.stages import Stage
from app.domain.step import LAST_PHASE
from app.domain.trainable import MAX_LORA_RANK, LoraTargets, parse_trainable
from app.web.form_view import FieldProblem

_COUNT_EXAMPLES = (
    "a number of weights under 10,000T, such as 7.5B, 7.5e9 or 7,500,000,000 (at most four digits before K, M, B or T)"
)
_BYTES_EXAMPLES = "a memory size, such as 80GB, 80GiB or 80e9 (at most four digits before GB, GiB, TB or TiB)"

# What a person is told when a text field does not match its pattern (the regex itself is no help).
FIELD_HINTS = {
    "params": _COUNT_EXAMPLES,
    "largest_layer": _COUNT_EXAMPLES,
    "capacity": _BYTES_EXAMPLES,
    "cuda_context": _BYTES_EXAMPLES,
    "nccl_per_group": _BYTES_EXAMPLES,
    "reduce_bucket_size": _COUNT_EXAMPLES.replace("weights", "elements"),
    "prefetch_bucket_size": _COUNT_EXAMPLES.replace("weights", "elements"),
    "max_live_parameters": _COUNT_EXAMPLES.replace("weights", "elements"),
    "host_memory": _BYTES_EXAMPLES.replace("80GB, 80GiB or 80e9", "2TB, 1.5TiB or 2e12"),
    "nvme_space": _BYTES_EXAMPLES.replace("80GB, 80GiB or 80e9", "30TB, 28TiB or 30e12"),
    "trainable": "a number of weights (1.5B), a fraction from 0 to 1 (0.25) or a percentage (25%)",
}
# The fields read as memory sizes, where a bare G or T deserves its own answer (GB or GiB?).
SIZE_FIELDS = frozenset({"capacity", "cuda_context", "nccl_per_group", "host_memory", "nvme_space"})


class Theme(StrEnum):
    """How the page is drawn: for a screen close by, or for the back of a room (`?theme=projector`)."""

    DEFAULT = "default"
    PROJECTOR = "projector"

    @property
    def other(self) -> Theme:
        """The theme the page's toggle switches to."""
        return Theme.DEFAULT if self is Theme.PROJECTOR else Theme.PROJECTOR


# A fraction of the weights (0.25, 1), a percentage (25%), or a count (1.5B): whether a count is within
# the model's weights depends on the model, which no pattern can say; the validator below does.
TRAINABLE_PATTERN = rf"^\s*(?:0|1|0?\.\d+|1\.0+|\d{{1,3}}(?:\.\d+)?\s*%)\s*$|{COUNT_PATTERN}"


def _blank_or(pattern: str) -> str:
    # An empty field means "not given": forms send empty strings for blank inputs.
    return f"^$|{pattern}"


def _count(text: str | None) -> int | None:
    return parse_count(text) if text and text.strip() else None


def _size(text: str | None) -> int | None:
    return parse_bytes(text) if text and text.strip() else None


class RunQuery(BaseModel):
    """A training run: model, cluster, recipe and card. Every field is optional."""

    model_config = ConfigDict(extra="ignore")

    model: ModelName | None = Field(
        None,
        description="A preset model; 'custom' uses params. Defaults to the seed's 30B, or custom if params is given.",
    )
    params: str | None = Field(
        None,
        pattern=_blank_or(COUNT_PATTERN),
        description=f"Weights of a custom model: {_COUNT_EXAMPLES}. A preset model brings its own count.",
    )
    gpus: int = Field(DEFAULT_GPUS, ge=1, le=MAX_GPUS, description="Number of GPUs (data-parallel cards).")
    recipe: RecipeName = Field(RecipeName.MIXED_ADAM, description="Precision and optimizer recipe.")
    weights_bytes: int | None = Field(None, ge=1, le=MAX_CUSTOM_BAND_BYTES, description="Custom recipe only.")
    gradients_bytes: int | None = Field(None, ge=0, le=MAX_CUSTOM_BAND_BYTES, description="Custom recipe only.")
    master_bytes: int | None = Field(None, ge=0, le=MAX_CUSTOM_BAND_BYTES, description="Custom recipe only.")
    moments_bytes: int | None = Field(None, ge=0, le=MAX_CUSTOM_BAND_BYTES, description="Custom recipe only.")
    largest_layer: str | None = Field(
        None,
        pattern=_blank_or(COUNT_PATTERN),
        description="Weights ZeRO-3 gathers at once. Defaults to the larger of the embedding and one block.",
    )
    capacity: str | None = Field(
        None, pattern=_blank_or(BYTES_PATTERN), description=f"One card's memory: {_BYTES_EXAMPLES}."
    )
    units: ByteUnit = Field(ByteUnit.GIB, description="GiB (2^30 bytes, as the seed) or GB (10^9, as the ZeRO paper).")
    batch: int = Field(
        1, ge=0, le=MAX_BATCH, description="Sequences per micro-batch, per GPU; 0 counts no activations."
    )
    seq: int | None = Field(
        None, ge=1, le=MAX_SEQ, description="Tokens per sequence. Defaults to the model's context, or 4096."
    )
    recompute: Recompute = Field(
        Recompute.NONE,
        description="What each block recomputes in the backward: none, selective (the attention scores) or full.",
    )

    @field_validator("seq", mode="before")
    @classmethod
    def _blank_is_the_context(cls, value: object) -> object:
        # The form sends a blank field as an empty string: the model's own context.
        return None if value == "" else value

    overheads: bool = Field(
        False,
        description="1: count the overheads (CUDA context, NCCL buffers, buckets, fragmentation) in the peak; "
        "0: the theory alone, as the ZeRO paper counts. docs/overheads.md.",
    )
    cuda_context: str | None = Field(
        None, pattern=_blank_or(BYTES_PATTERN), description=f"The CUDA context per process: {_BYTES_EXAMPLES}."
    )
    nccl_per_group: str | None = Field(
        None, pattern=_blank_or(BYTES_PATTERN), description=f"NCCL's buffers per communicator: {_BYTES_EXAMPLES}."
    )
    process_groups: int = Field(DEFAULTS.process_groups, ge=0, le=64, description="Communicators per process.")
    gradient_as_bucket_view: bool = Field(
        DEFAULTS.gradient_as_bucket_view, description="DDP's gradients as views into its buckets (1): no copy."
    )
    reduce_bucket_size: str | None = Field(
        None, pattern=_blank_or(COUNT_PATTERN), description="DeepSpeed's reduce_bucket_size, in elements (5e8)."
    )
    prefetch_bucket_size: str | None = Field(
        None, pattern=_blank_or(COUNT_PATTERN), description="ZeRO-3's stage3_prefetch_bucket_size, in elements (5e7)."
    )
    max_live_parameters: str | None = Field(
        None, pattern=_blank_or(COUNT_PATTERN), description="ZeRO-3's stage3_max_live_parameters, in elements (1e9)."
    )
    fragmentation: int = Field(
        DEFAULTS.fragmentation, ge=0, le=100, description="Percent the caching allocator holds beyond its tensors."
    )

    trainable: str | None = Field(
        None,
        pattern=_blank_or(TRAINABLE_PATTERN),
        description="Weights that train: a count (1.5B) or a fraction of the model's (0.25 or 25%); the first "
        "weights a forward pass meets are the frozen ones. Default: all, or none of the model's with LoRA.",
    )
    lora_rank: int | None = Field(None, ge=1, le=MAX_LORA_RANK, description="LoRA's rank r; none: no adapters.")
    lora_targets: LoraTargets = Field(
        LoraTargets.QKVO, description="The matrices of each block with adapters: qv, qkvo or all-linear."
    )

    @field_validator("lora_rank", mode="before")
    @classmethod
    def _blank_is_no_lora(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("trainable")
    @classmethod
    def _within_the_model(cls, text: str | None, info: ValidationInfo) -> str | None:
        if text is None or not text.strip():
            return None
        model, params = info.data.get("model"), info.data.get("params")
        # The model's count as the run will resolve it: a preset's own, a custom count, or the seed's.
        if model in (None, ModelName.CUSTOM):
            base = parse_count(params) if params else PRESETS[DEFAULT_MODEL].params
        else:
            base = PRESETS[model].params
        try:
            parse_trainable(text, base)
        except ValueError as exc:
            # A sentence of its own: the error pages show it as it is, without pydantic's "Value error, ".
            raise PydanticCustomError("trainable", str(exc)) from None
        return text

    offload: Offload = Field(
        Offload.NONE,
        description="What leaves the card: none; optimizer (ZeRO-Offload: master copy, moments and the update); "
        "optimizer+params (ZeRO-3's weights' slices too); nvme (ZeRO-Infinity: both, on NVMe).",
    )
    offload_device: Device | None = Field(
        None, description="Where optimizer and optimizer+params go: cpu (the default) or nvme (ZeRO-3 only)."
    )
    pin_memory: bool = Field(True, description="Offloaded state in page-locked CPU memory, DeepSpeed's pin_memory.")
    nodes: int | None = Field(
        None, ge=1, le=MAX_GPUS, description="Machines the GPUs are in. Default: nodes of 8 where 8 divides gpus."
    )
    gpus_per_node: int | None = Field(
        None, ge=1, le=MAX_GPUS, description="GPUs in each node; host memory is per node."
    )
    host_memory: str | None = Field(
        None, pattern=_blank_or(BYTES_PATTERN), description="One node's CPU RAM, for the host's verdict: 2TB or 2TiB."
    )
    nvme_space: str | None = Field(
        None, pattern=_blank_or(BYTES_PATTERN), description="One node's NVMe space, for ZeRO-Infinity's verdict."
    )
    accounting: Accounting = Field(
        Accounting.PAPER,
        description="Whose count: paper (the ZeRO paper's, the default), deepspeed (DeepSpeed's estimators), "
        "fsdp2 (what fully_shard allocates) or megatron (Megatron-LM's theoretical memory). docs/accounting.md.",
    )
    zero_init: bool = Field(
        True, description="DeepSpeed's zero.Init: each process builds only its slice (1), or the whole model (0)."
    )

    @field_validator("offload", mode="before")
    @classmethod
    def _plus_typed_in_an_address(cls, value: object) -> object:
        # A "+" typed into an address bar arrives as a space: "optimizer params" is what was meant.
        return "optimizer+params" if isinstance(value, str) and value.split() == ["optimizer", "params"] else value

    @field_validator("offload_device", "nodes", "gpus_per_node", mode="before")
    @classmethod
    def _blank_is_the_default(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("offload_device")
    @classmethod
    def _not_against_nvme(cls, device: Device | None, info: ValidationInfo) -> Device | None:
        if device is Device.CPU and info.data.get("offload") is Offload.NVME:
            raise PydanticCustomError("offload_device", "offload=nvme puts the state on NVMe, not on the CPU.")
        return device

    @field_validator("nodes")
    @classmethod
    def _whole_nodes(cls, nodes: int | None, info: ValidationInfo) -> int | None:
        gpus = info.data.get("gpus", DEFAULT_GPUS)
        if nodes is not None and gpus % nodes:
            raise PydanticCustomError("cluster", f"{gpus} GPUs do not split evenly across {nodes} nodes.")
        return nodes

    @field_validator("gpus_per_node")
    @classmethod
    def _a_whole_cluster(cls, per_node: int | None, info: ValidationInfo) -> int | None:
        gpus = info.data.get("gpus", DEFAULT_GPUS)
        try:
            cluster_of(gpus, info.data.get("nodes"), per_node)
        except ValueError as exc:
            raise PydanticCustomError("cluster", str(exc)) from None
        return per_node

    def settings(self) -> Overheads:
        """The overheads' settings: each given one, else its default."""
        given = {
            "cuda_context": _size(self.cuda_context),
            "nccl_per_group": _size(self.nccl_per_group),
            "reduce_bucket_size": _count(self.reduce_bucket_size),
            "prefetch_bucket_size": _count(self.prefetch_bucket_size),
            "max_live_parameters": _count(self.max_live_parameters),
        }
        return replace(
            DEFAULTS,
            process_groups=self.process_groups,
            gradient_as_bucket_view=self.gradient_as_bucket_view,
            fragmentation=self.fragmentation,
            **{name: value for name, value in given.items() if value is not None},
        )

    def inputs(self) -> Inputs:
        """The domain's inputs, with texts read as counts and sizes."""
        return Inputs(
            model=self.model,
            params=_count(self.params),
            gpus=self.gpus,
            recipe=self.recipe,
            band_bytes=(self.weights_bytes, self.gradients_bytes, self.master_bytes, self.moments_bytes),
            largest_layer=_count(self.largest_layer),
            capacity=_size(self.capacity),
            units=self.units,
            batch=self.batch,
            seq=self.seq,
            recompute=self.recompute,
            overheads=self.settings(),
            count_overheads=self.overheads,
            trainable=self.trainable,
            lora_rank=self.lora_rank,
            lora_targets=self.lora_targets,
            offload=self.offload,
            offload_device=self.offload_device,
            pin_memory=self.pin_memory,
            nodes=self.nodes,
            gpus_per_node=self.gpus_per_node,
            host_memory=_size(self.host_memory),
            nvme_space=_size(self.nvme_space),
            accounting=self.accounting,
            zero_init=self.zero_init,
        )

    def canonical(self) -> dict[str, str]:
        """The parameters that differ from the defaults, for short, shareable links."""
        values = self.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
        # A preset brings its own count and a preset recipe its own bytes: the form sends them
        # back read-only, and they would only lengthen the link.
        ignored = set()
        if self.model not in (None, ModelName.CUSTOM):
            ignored.add("params")
        if self.recipe is not RecipeName.CUSTOM:
            ignored |= {"weights_bytes", "gradients_bytes", "master_bytes", "moments_bytes"}
        if self.offload_device is Device.CPU:  # the form's choice when nothing asks for NVMe: the default
            ignored.add("offload_device")
        return {
            key: str(value)
            for key, value in values.items()
            if key in RunQuery.model_fields and key not in ignored and value != ""
        }


class StepQuery(RunQuery):
    """A phase of one training step under one stage, for the run's weights and recipe."""

    stage: Stage = Field(Stage.DP, description="The arrangement.")
    phase: int = Field(0, ge=0, le=LAST_PHASE, description="0: at rest; 1-8 forward; 9-16 backward; 17-20 after.")


class LayoutQuery(RunQuery):
    """The grid of one stage for a run: its cards and its recipe's bands; the rest of the run is checked, not used."""

    stage: Stage = Field(Stage.DP, description="The arrangement.")


class PageQuery(RunQuery):
    """The page's parameters: a run, the stage to draw, and a moment of the step."""

    stage: Stage = Field(Stage.DP, description="The arrangement to draw.")
    phase: int | None = Field(None, ge=0, le=LAST_PHASE, description="A phase of one training step; none: at rest.")
    previous: Stage | None = Field(
        None, alias="from", description="The stage shown before this one: the cells that changed are marked."
    )
    theme: Theme = Field(Theme.DEFAULT, description="'projector': larger type and a layout for the back of a room.")


class CompareQuery(RunQuery):
    """Two stages of one run, side by side."""

    left: Stage = Field(Stage.ZERO1, description="The arrangement drawn on the left.")
    right: Stage = Field(Stage.ZERO3, description="The arrangement drawn on the right.")
    theme: Theme = Field(Theme.DEFAULT, description="'projector': larger type and a layout for the back of a room.")


NOT_MEASURED = "not_measured"
"""The error type of an implementation asked for a stage it was not measured for."""


class MeasuredQuery(BaseModel):
    """One measured arrangement: the stage, and for ZeRO-2 and 3 which FSDP."""

    model_config = ConfigDict(extra="ignore")

    stage: Stage = Field(Stage.DP, description="The arrangement.")
    impl: Impl | None = Field(
        None,
        description="ddp (dp), zero-redundancy (zero1), fsdp1 or fsdp2 (zero2, zero3); none: fsdp2 for zero2, zero3.",
    )
    theme: Theme = Field(Theme.DEFAULT, description="'projector': larger type and a layout for the back of a room.")

    @field_validator("impl")
    @classmethod
    def _measured(cls, impl: Impl | None, info: ValidationInfo) -> Impl | None:
        stage = info.data.get("stage")
        if impl is not None and isinstance(stage, Stage) and impl not in IMPLS[stage]:
            choices = " or ".join(i.value for i in IMPLS[stage])
            # A sentence of its own: the error pages show it as it is, without pydantic's "Value error, ".
            raise PydanticCustomError(
                NOT_MEASURED,
                "impl={impl} was not measured for {stage}: choose {choices}",
                {
                    "impl": impl.value,
                    "stage": stage.info.title.lower() if stage is Stage.DP else stage.info.title,
                    "choices": choices,
                },
            )
        return impl

    @property
    def chosen(self) -> Impl:
        """The implementation to show."""
        return self.impl or default_impl(self.stage)


class Controls(StrEnum):
    """What an embed lets the reader change."""

    STAGES = "stages"
    """The stage switcher."""
    STEP = "step"
    """The stage switcher and the training step's controls."""
    NONE = "none"
    """Nothing: just the picture."""


class EmbedQuery(PageQuery):
    """An embed's parameters: the page's, and what the embed shows around the picture."""

    controls: Controls = Field(Controls.STAGES, description="stages: the switcher; step: and the step; none: neither.")
    calculator: bool = Field(False, description="Show the run form, the table and ZeRO-3's limit (1) or not (0).")
    live: str | None = Field(
        None, max_length=12, description="A live session's code: the embed follows its teacher, whose run it draws."
    )

    def options(self) -> tuple[tuple[str, str], ...]:
        """The embed's own parameters that differ from the defaults, for its links."""
        kept = self.model_dump(mode="json", include={"controls", "calculator"}, exclude_defaults=True)
        return tuple((key, str(int(value)) if isinstance(value, bool) else str(value)) for key, value in kept.items())


_BAND_FIELDS = ("weights_bytes", "gradients_bytes", "master_bytes", "moments_bytes")


def _field_message(name: str, error: Mapping[str, Any], typed: str) -> str:
    """What to put beside a form field whose value was rejected; the value only where it explains why."""
    reading = ambiguity(typed, show_input=True) if name in SIZE_FIELDS else None
    if reading:
        return f"Ambiguous: {reading}."
    if name in FIELD_HINTS:
        return f"Enter {FIELD_HINTS[name]}, or leave it blank."
    if name == "gpus":
        return f"Enter a whole number of GPUs between 1 and {MAX_GPUS}."
    if name == "batch":
        return f"Enter a whole number of sequences per GPU between 0 and {MAX_BATCH:,} (0: no activations)."
    if name == "seq":
        return f"Enter a whole number of tokens between 1 and {MAX_SEQ:,}, or leave it blank for the model's context."
    if name == "trainable":
        said = str(error.get("msg", "this is not a number of weights"))
        return f"{said[:1].upper()}{said[1:]}: enter a count (1.5B) or a fraction (0.25 or 25%), or leave it blank."
    if name == "lora_rank":
        return f"Enter a whole LoRA rank between 1 and {MAX_LORA_RANK:,}, or leave it blank for no adapters."
    if name in ("nodes", "gpus_per_node", "offload_device") and error.get("type") in ("cluster", "offload_device"):
        return str(error.get("msg"))  # the cluster's or the device's own sentence, naming both values
    if name in ("nodes", "gpus_per_node"):
        return f"Enter a whole number between 1 and {MAX_GPUS}, or leave it blank."
    if name == "fragmentation":
        return "Enter a whole percent between 0 and 100."
    if name == "process_groups":
        return "Enter a whole number of process groups between 0 and 64."
    if name in _BAND_FIELDS:
        return (
            f"Enter a whole number of bytes between {1 if name == 'weights_bytes' else 0} and {MAX_CUSTOM_BAND_BYTES}."
        )
    expected = (error.get("ctx") or {}).get("expected")
    return f"Choose one of {expected}." if expected else "This value is not understood."


@dataclass(frozen=True)
class SetAside:
    """A page request read as far as it can be: the valid parameters, and what was set aside."""

    query: PageQuery
    """The request with every invalid parameter treated as not given."""
    problems: tuple[FieldProblem, ...]
    """The run form's fields that were set aside, with what was typed."""
    errors: tuple[dict[str, Any], ...]
    """Every rejected parameter's error, located as FastAPI locates them (("query", name))."""
    fell_back: frozenset[str] = frozenset()
    """The rejected fields drawn with the value on the screen instead of their default."""

    @property
    def notice(self) -> bool:
        """Whether a parameter outside the form (the stage or the phase) was rejected."""
        return any(e["loc"][1] not in RunQuery.model_fields for e in self.errors)


def set_aside(
    params: Mapping[str, str], model: type[PageQuery] = PageQuery, shown: Mapping[str, str] | None = None
) -> SetAside:
    """Read a page's (or an embed's) query parameters, setting aside each invalid one.

    An invalid field of the run form takes its value in `shown` (the run on the screen when the
    form was sent), so a typo redraws nothing: 0 GPUs typed over 16 keeps the 16 cards drawn. A
    field `shown` lacks, or holds no better, is treated as not given.
    """
    data = dict(params)
    fallback = {k: v for k, v in (shown or {}).items() if k in RunQuery.model_fields}
    fell_back: set[str] = set()
    problems: list[FieldProblem] = []
    errors: list[dict[str, Any]] = []
    while True:
        try:
            query = model.model_validate(data)
        except ValidationError as exc:
            rejected = {str(e["loc"][0]): e for e in exc.errors() if e["loc"] and e["loc"][0] in data}
            if not rejected:  # nothing left to set aside: cannot happen, every field has a default
                raise
            for name, error in rejected.items():
                typed = data.pop(name)
                if name in fell_back:
                    continue  # the value on the screen was no better: reported already, as typed
                errors.append({**error, "loc": ("query", name)})
                if name in RunQuery.model_fields:
                    problems.append(FieldProblem(name, typed, _field_message(name, error, typed)))
                if name in fallback and fallback[name] != typed:
                    data[name] = fallback[name]
                    fell_back.add(name)
        else:
            drawn_from_screen = frozenset(n for n in fell_back if n in query.model_fields_set)
            return SetAside(query, tuple(problems), tuple(errors), drawn_from_screen)
