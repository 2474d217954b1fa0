"""Every input of a run, declared once: the one place a run field is named.

A field's line says its name, its label, where it sits in the form (always shown, or in which fold),
its kind and limits, how its text is read, its help, what the form says of a bad value, how the
picture describes what it draws instead of a value set aside, which key of the API's `inputs` echoes
it, its row of docs/url-options.md, the form's words, and, for an input `Inputs` has no attribute for,
its domain rule. From this list come the query models (`app/web/inputs.py`),
every part of the form (`form_view.py`), the set-aside wording (`set_aside_view.py`), the options of
`zero-bands table` (`app/cli`), the OpenAPI schema and the option table of the docs (cog). The field
walk (tests/web/test_fields.py) takes every field through every one of those places.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import Enum, StrEnum
from typing import Any

from app.domain.accounting import Accounting
from app.domain.activations import MAX_SEQ, Recompute
from app.domain.architecture import ModelName
from app.domain.hardware import CARDS, H100_FABRIC
from app.domain.hf_config import MODEL_TYPES
from app.domain.overheads import DEFAULTS
from app.domain.parallel import MAX_STAGES
from app.domain.placement import Device, Offload
from app.domain.recipes import (
    MAX_CUSTOM_BAND_BYTES,
    Band,
    GradAccum,
    RecipeName,
    RecipeRule,
    bytes_a_weight,
    grad_accum,
    recipes_help,
)
from app.domain.scenario import Inputs, Scenario
from app.domain.sizing import MAX_BATCH, MAX_GPUS
from app.domain.state_bytes import DEFAULT_GPUS
from app.domain.trainable import MAX_LORA_RANK, LoraTargets
from app.domain.units import (
    BYTES_PATTERN,
    COUNT_PATTERN,
    FACTOR_PATTERN,
    ZERO_BYTES_PATTERN,
    ZERO_COUNT_PATTERN,
    ByteUnit,
    count_label,
    factor_text,
    gpus_label,
)


class Group(StrEnum):
    """Where a field sits in the run form."""

    SHOWN = "shown"
    """Always shown: model, weights, GPUs, card memory, recipe, units."""
    MORE = "more"
    """Folded under "Micro-batch, frozen weights, LoRA, bytes per band and largest layer"."""
    HOST = "host"
    """Folded under "Offload, nodes and whose accounting" (`#more-host`)."""
    WIRE = "wire"
    """Folded under "Across nodes: hybrid sharding, ZeRO++ and the links" (`#more-wire`)."""
    CUT = "cut"
    """Folded under "The model cut across cards: tensor, pipeline, context and expert parallelism" (`#more-cut`)."""
    ADDRESS = "address"
    """Not in the form: set in the address (the overheads' settings, named in the overheads' table)."""


FOLDS = (Group.MORE, Group.HOST, Group.WIRE, Group.CUT)
"""The form's folded parts, in the order of the form."""


class Kind(StrEnum):
    """How a field's text is read."""

    CHOICE = "choice"
    """One of an enumeration's values."""
    SWITCH = "switch"
    """1 or 0."""
    WHOLE = "whole"
    """A whole number within limits."""
    COUNT = "count"
    """A count of weights or elements: 7.5B, 7.5e9, 7,500,000,000 (`units.parse_count`)."""
    SIZE = "size"
    """A memory size: 80GB, 80GiB, 80e9 (`units.parse_bytes`)."""
    TRAINABLE = "trainable"
    """A count, a fraction or a percentage of the model's weights (`trainable.parse_trainable`)."""
    FACTOR = "factor"
    """A decimal above 0, read exactly: 1.25 (`units.parse_factor`)."""
    CONFIG = "config"
    """A Hugging Face config.json's text (`hf_config.read_text`): a textarea, a file on the command line."""


# A fraction of the weights (0.25, 1), a percentage (25%), or a count (1.5B): whether a count is within
# the model's weights depends on the model, which no pattern can say; the query model's validator does.
TRAINABLE_PATTERN = rf"^\s*(?:0|1|0?\.\d+|1\.0+|\d{{1,3}}(?:\.\d+)?\s*%)\s*$|{COUNT_PATTERN}"
_PATTERNS = {
    Kind.COUNT: COUNT_PATTERN,
    Kind.SIZE: BYTES_PATTERN,
    Kind.TRAINABLE: TRAINABLE_PATTERN,
    Kind.FACTOR: FACTOR_PATTERN,
}
_ZERO_PATTERNS = {Kind.COUNT: ZERO_COUNT_PATTERN, Kind.SIZE: ZERO_BYTES_PATTERN}

_COUNT_EXAMPLES = (
    "a number of weights under 10,000T, such as 7.5B, 7.5e9 or 7,500,000,000 (at most four digits before K, M, B or T)"
)
_ELEMENTS = _COUNT_EXAMPLES.replace("weights", "elements")
_BYTES_EXAMPLES = "a memory size, such as 80GB, 80GiB or 80e9 (at most four digits before GB, GiB, TB or TiB)"

Drawn = Callable[[Scenario], "str | None"]
"""What the picture uses for a field, in words; None where it uses nothing (then `Field.none` says it)."""


@dataclass(frozen=True)
class RunField:
    """One input of a run, everywhere it appears."""

    name: str
    """The URL parameter, the query model's field, `--name` on the command line (with dashes)."""
    label: str
    """The form's label; the set-aside notice names the field by it."""
    group: Group
    kind: Kind
    default: Any
    """The value when not given: None where the run derives it (`Field.doc_default` says how)."""
    help: str
    """One or two sentences: the OpenAPI description and the command line's help."""
    drawn: Drawn
    """How the picture's value is said when a bad one was set aside: "a micro-batch of 1"."""
    doc: str
    """Its row in docs/url-options.md: what it means, in Markdown."""
    doc_default: str
    """Its row's default, in Markdown."""
    choices: type[Enum] | None = None
    """The enumeration a CHOICE field takes its values from."""
    low: int | None = None
    high: int | None = None
    blank: bool = False
    """Whether an empty value means the default: a form sends an empty string for a blank field."""
    message: str = ""
    """What the form says beside a bad value; empty: from the kind (`{said}` is the refusal's own words)."""
    none: str = ""
    """What the picture uses where `drawn` says None: "no card memory, so no fit check"."""
    fallback: str = "the default"
    """Why the picture uses what `drawn` says, where the value was set aside: "the default", or what a blank
    value follows where the default depends on another field."""
    echo: str | None = None
    """The key of the API's `inputs` that gives the value the run used; None where it is not echoed."""
    into: str = ""
    """Where the value goes in the domain's `Inputs`: an attribute, `band_bytes.<i>` or `overheads.<name>`."""
    band: Band | None = None
    """The band whose bytes a custom recipe's field sets: its label comes from the recipe drawn."""
    zero: bool = False
    """Whether a count or a size of 0 is a value: "none of it" (a whole number says so with `low`)."""
    rule: RecipeRule | None = None
    """The field's domain meaning, where `Inputs` has no attribute of its own for it: the domain's function
    that makes the run's recipe of the one chosen by the value (`Inputs.ruled`, applied by `resolve`). A new
    input needs no other domain record."""
    form_label: str = ""
    """The form's label, where it says more than `label` (the unit typed in); empty: `label`."""
    labels: tuple[tuple[str, str], ...] = ()
    """The form's words for each value of a CHOICE or SWITCH field; empty: the value itself, or On and Off."""
    placeholder: str | Callable[[Scenario], str] | None = None
    """The form's grey text in an empty text or number field, or how the run says it; None: none."""
    tip: str | None = ""
    """The form's tooltip on a text or number field; None: the help; empty: none."""
    inputmode: str = ""
    """The keyboard a phone shows for a text field ("decimal" for a count); empty: the browser's."""
    required: bool = False
    """Whether the form's field may not be left empty."""
    suggestions: tuple[tuple[str, str], ...] = ()
    """Values the form offers under a text field (a datalist), each with its words."""

    @property
    def pattern(self) -> str | None:
        """The grammar of a text field, with an empty value allowed (the default), and 0 where it is taken."""
        found = _PATTERNS.get(self.kind)
        if found is None:
            return None
        return f"^$|{_ZERO_PATTERNS[self.kind]}|{found}" if self.zero else f"^$|{found}"

    @property
    def option(self) -> str:
        """The command line's option: `--largest-layer`."""
        return "--" + self.name.replace("_", "-")

    @property
    def field_id(self) -> str:
        """The run form's id for the field (app/web/form_view.py, templates/_form.html)."""
        return "f-layer" if self.name == "largest_layer" else f"f-{self.name}"

    def applied(self, scenario: Scenario) -> Any:
        """The value the run used, as the API echoes it: the value its rule was given (its default if none)."""
        return scenario.ruled_value(self.rule, self.default) if self.rule is not None else None

    @property
    def echoed(self) -> bool:
        """Whether the API's echo of the inputs takes the field from its declaration (`applied`).

        A field with a rule; the others' echo is said in `schemas.ResolvedInputs`, from the run's attributes.
        """
        return bool(self.echo) and self.rule is not None

    @property
    def list_id(self) -> str:
        """The id of the form's list of suggestions for the field (`suggestions`)."""
        return "f-cards" if self.name == "capacity" else f"{self.field_id}-list"

    @property
    def target(self) -> str:
        """Where the value goes in `Inputs` (see `into`)."""
        return self.into or self.name

    @property
    def values(self) -> tuple[str, ...]:
        """A CHOICE field's accepted values."""
        return tuple(str(c.value) for c in self.choices or ())

    def hint(self) -> str | None:
        """What a text the grammar refuses should have been: "a memory size, such as 80GB…"."""
        if self.kind is Kind.SIZE:
            said = _BYTES_EXAMPLES.replace("80GB, 80GiB or 80e9", _SIZE_EXAMPLES.get(self.name, "80GB, 80GiB or 80e9"))
        elif self.kind is Kind.COUNT:
            said = _ELEMENTS if self.group is Group.ADDRESS else _COUNT_EXAMPLES
        elif self.kind is Kind.TRAINABLE:
            return "a number of weights (1.5B), a fraction from 0 to 1 (0.25) or a percentage (25%)"
        elif self.kind is Kind.FACTOR:
            return "a number above 0, such as 1, 1.25 or 2"
        else:
            return None
        return f"0 or {said}" if self.zero else said


_SIZE_EXAMPLES = {"host_memory": "2TB, 1.5TiB or 2e12", "nvme_space": "30TB, 28TiB or 30e12"}


def _size_or_none(size: int | None, scenario: Scenario) -> str | None:
    return None if size is None else scenario.units.show(size)


def _band(band: Band) -> Drawn:
    return lambda s: f"{bytes_a_weight(s.recipe.nbytes(band))} B"


def _capacity(scenario: Scenario) -> str:
    factor = scenario.inputs.capacity_factor if scenario.inputs else None
    return "dropless experts" if factor is None else f"capacity factor {factor_text(factor)}"


def _setting(name: str) -> Drawn:
    # The overheads' settings: the value drawn is the setting's own, as the overheads' table names it.
    return lambda s: f"{name}={getattr(s.run.overheads, name)}"


def _recomputed(s: Scenario) -> str:
    chosen = s.run.activations.recompute if s.run.activations else Recompute.NONE
    return "no recomputation" if chosen is Recompute.NONE else f"{chosen} recomputation"


def _lora(s: Scenario) -> str:
    return f"LoRA's {s.adapters:,} adapter weights" if s.adapters else "no LoRA"


def _hybrid(s: Scenario) -> str:
    run = s.run
    if run.replicas == 1:
        return "every card in one shard group"
    return f"shard groups of {gpus_label(run.shards)}, {run.replicas:,} replicas"


def _switch(on: bool, name: str) -> str:
    return f"{name} {'on' if on else 'off'}"


_WIRE_WHOLE = 100_000
"""The most GB/s, Gb/s or TFLOP/s the form takes: far beyond any link or card."""


def _cluster(s: Scenario) -> str:
    nodes = s.run.nodes
    return f"{nodes:,} {'node' if nodes == 1 else 'nodes'} of {gpus_label(s.run.gpus_per_node)}"


_RUN_WHERE = "page, embed, API, CLI"


def _band_field(band: Band, label: str) -> RunField:
    low = 1 if band is Band.WEIGHTS else 0
    return RunField(
        f"{band.value}_bytes", f"Bytes per weight, {label}", Group.MORE, Kind.WHOLE, None,
        "Custom recipe only.", _band(band),
        f"bytes per weight of the {label} band, {low}–{MAX_CUSTOM_BAND_BYTES}, with `recipe=custom` "
        "(a 0-byte band is not drawn); a preset recipe sets its own",
        "the recipe's",
        low=low, high=MAX_CUSTOM_BAND_BYTES,
        message=f"Enter a whole number of bytes between {low} and {MAX_CUSTOM_BAND_BYTES}.",
        echo="bands", into=f"band_bytes.{list(Band).index(band)}", band=band,
    )  # fmt: skip


def _count_setting(name: str, help: str, doc: str) -> RunField:
    # 0 is a value: DeepSpeed's config takes it for each of the three buckets, `reduce_bucket_size:
    # int = Field(pp_int(5e8), ge=0)`, and `prefetch_bucket_size` and `max_live_parameters` (aliases
    # stage3_prefetch_bucket_size and stage3_max_live_parameters) the same, `ge=0`
    # (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig); the overheads count 0 elements as 0 B.
    default = getattr(DEFAULTS, name)
    return RunField(
        name, name, Group.ADDRESS, Kind.COUNT, None, f"{help} 0 or more, as DeepSpeed takes.", _setting(name),
        f"{doc}; `0` or more, as DeepSpeed's config takes", f"{default:.0e}".replace("+0", ""),
        into=f"overheads.{name}", zero=True,
    )  # fmt: skip


FIELDS: tuple[RunField, ...] = (
    RunField(
        "model", "Model", Group.SHOWN, Kind.CHOICE, None,
        "A preset model; 'custom' uses params. Defaults to the seed's 30B, or custom if params is given.",
        lambda s: s.model_title,
        "`seed-30b` (30B weights in 8 equal layers, as the lesson draws them), `zero-7.5b` (a bare count), "
        "`llama-3-8b`, `llama-3-70b`, `llama-3.1-405b`, `gpt-3-175b` (architectures, so the largest layer is "
        "derived), or `custom`",
        "`seed-30b`, or `custom` when `params` is given",
        choices=ModelName, echo="model",
    ),
    RunField(
        "params", "Weights", Group.SHOWN, Kind.COUNT, None,
        f"Weights of a custom model: {_COUNT_EXAMPLES}. A preset model brings its own count.",
        lambda s: f"{count_label(s.run.params)} weights",
        "weights of a custom model: `7.5e9`, `7.5e+09`, `7500000000`, `7,500,000,000` or `7.5B` (K, M, B, T)",
        "30B",
        echo="params",
        inputmode="decimal",
    ),
    # Read before the fields a model's shape decides (the trainable count, the cut's heads, blocks and experts).
    RunField(
        "config", "Model config.json", Group.MORE, Kind.CONFIG, None,
        "A Hugging Face config.json (its text, at most 64 KB): the model is read from its keys and takes "
        "precedence over model and params.",
        lambda s: s.model_title,
        "a Hugging Face `config.json`, pasted (or uploaded on the page, or `--config FILE` on the command line), "
        f"of `model_type` {', '.join(f'`{t}`' for t in MODEL_TYPES)}: the architecture is read from its keys and "
        "takes precedence over `model` and `params`; a link carries only the keys read. "
        "[moe.md](moe.md#a-model-from-its-configjson)",
        "none: the model chosen",
        message="Paste a Hugging Face config.json of at most 64 KB, or leave it blank.",
        none="the model chosen", echo="config",
        form_label="Or paste a model's config.json", placeholder='{"model_type": "mixtral", …}',
        tip="A Hugging Face config.json; the model is read from it",
    ),
    RunField(
        "gpus", "GPUs", Group.SHOWN, Kind.WHOLE, DEFAULT_GPUS, "Number of GPUs (data-parallel cards).",
        lambda s: gpus_label(s.run.gpus),
        f"1–{MAX_GPUS}. Up to 16 the grid draws every card and weight; beyond, the first four and last four with "
        "an ellipsis. Totals stay exact.",
        str(DEFAULT_GPUS),
        low=1, high=MAX_GPUS, message=f"Enter a whole number of GPUs between 1 and {MAX_GPUS}.", echo="gpus",
        required=True,
    ),
    RunField(
        "capacity", "Card memory", Group.SHOWN, Kind.SIZE, None, f"One card's memory: {_BYTES_EXAMPLES}.",
        lambda s: _size_or_none(s.run.capacity, s),
        "one card's memory: `80GB` (10⁹), `80GiB` (2³⁰) or bytes (`80e9`, at least a million with no unit); a bare "
        "`80G`, or `80` with no unit, is refused with a message naming both readings; the form offers RTX 4090, "
        "V100, A100 40/80, H100, H200, MI300X",
        "none: no fit check",
        none="no card memory, so no fit check", echo="capacity",
        placeholder="e.g. 80GiB", tip="80GB is 80×10⁹ bytes, 80GiB 80×2³⁰; blank for no fit check",
        suggestions=tuple((card.entry, f"{card.name}, {card.gib} GiB") for card in CARDS),
    ),
    RunField(
        "recipe", "Recipe", Group.SHOWN, Kind.CHOICE, RecipeName.MIXED_ADAM, "Precision and optimizer recipe.",
        lambda s: s.recipe.title,
        recipes_help(),
        "`mixed-adam`",
        choices=RecipeName, echo="recipe",
    ),
    RunField(
        "units", "Units", Group.SHOWN, Kind.CHOICE, ByteUnit.GIB,
        "GiB (2^30 bytes, as the seed) or GB (10^9, as the ZeRO paper).",
        lambda s: s.units.value,
        "`GiB` or `GB`", "`GiB`",
        choices=ByteUnit, echo="units",
    ),
    RunField(
        "batch", "Micro-batch", Group.MORE, Kind.WHOLE, 1,
        "Sequences per micro-batch, per GPU; 0 counts no activations.",
        lambda s: f"a micro-batch of {s.run.batch:,}",
        f"sequences per micro-batch, per GPU, 0–{MAX_BATCH:,}; `0` counts no activations. A bare weight count has "
        "no shape, so it has no activations whatever the batch",
        "1",
        low=0, high=MAX_BATCH,
        message=f"Enter a whole number of sequences per GPU between 0 and {MAX_BATCH:,} (0: no activations).",
        echo="batch",
        form_label="Micro-batch per GPU (sequences)", tip="0 counts no activations",
    ),
    RunField(
        "seq", "Sequence length", Group.MORE, Kind.WHOLE, None,
        "Tokens per sequence. Defaults to the model's training length (8,192 for Llama 3 and 3.1), or 4096.",
        lambda s: f"sequences of {s.seq:,} tokens",
        f"tokens per sequence, 1–{MAX_SEQ:,}",
        "the length the model was trained at: 8,192 for Llama 3 and Llama 3.1 (whose context, 131,072, came in a "
        "last, short stage), 2,048 for GPT-3; else 4,096",
        low=1, high=MAX_SEQ, blank=True,
        message=f"Enter a whole number of tokens between 1 and {MAX_SEQ:,}, or leave it blank for the model's "
        "training length.",
        echo="seq",
        form_label="Sequence length (tokens)", placeholder=lambda s: f"{s.seq:,}",
        tip="Blank for the model's training length",
    ),
    RunField(
        "recompute", "Recomputation", Group.MORE, Kind.CHOICE, Recompute.NONE,
        "What each block recomputes in the backward: none, selective (the attention scores) or full.",
        _recomputed,
        "`none`, `selective` (the attention scores recomputed, Korthikanti et al. 2022) or `full` (each block's "
        "input kept, the block run again in the backward); [docs/activations.md](activations.md)",
        "`none`",
        choices=Recompute, echo="recompute",
        labels=(
            (Recompute.NONE, "None: keep every activation"),
            (Recompute.SELECTIVE, "Selective: recompute the attention core"),
            (Recompute.FULL, "Full: keep each layer's input only"),
        ),
    ),
    RunField(
        "overheads", "Overheads", Group.ADDRESS, Kind.SWITCH, False,
        "1: count the overheads (CUDA context, NCCL buffers, buckets, fragmentation) in the peak; "
        "0: the theory alone, as the ZeRO paper counts. docs/overheads.md.",
        lambda s: f"overheads={int(s.run.count_overheads)}",
        "`1` counts the overheads in the peak, as a hatched band kept apart from the theory; `0` keeps the theory "
        "the ZeRO paper and the seed count. With a card's memory, the table says what they would add, one click "
        "away. [docs/overheads.md](overheads.md)",
        "`0`",
        echo="overheads", into="count_overheads",
    ),
    # An overhead's size of 0 leaves it out, as process_groups=0 and fragmentation=0 do theirs.
    RunField(
        "cuda_context", "cuda_context", Group.ADDRESS, Kind.SIZE, None,
        f"The CUDA context per process: 0 or {_BYTES_EXAMPLES}.", _setting("cuda_context"),
        "the CUDA context per process, as a memory size (`0.5GiB`, or bytes); `0` leaves it out", "400 MiB",
        into="overheads.cuda_context", zero=True,
    ),
    RunField(
        "nccl_per_group", "nccl_per_group", Group.ADDRESS, Kind.SIZE, None,
        f"NCCL's buffers per communicator: 0 or {_BYTES_EXAMPLES}.", _setting("nccl_per_group"),
        "NCCL's buffers per communicator, as a memory size (`0.5GiB`, or bytes); `0` leaves them out", "688 MiB",
        into="overheads.nccl_per_group", zero=True,
    ),
    RunField(
        "process_groups", "process_groups", Group.ADDRESS, Kind.WHOLE, DEFAULTS.process_groups,
        "Communicators per process.", _setting("process_groups"),
        "communicators per process, 0–64", str(DEFAULTS.process_groups),
        low=0, high=64, message="Enter a whole number of process groups between 0 and 64.",
        into="overheads.process_groups",
    ),
    RunField(
        "gradient_as_bucket_view", "gradient_as_bucket_view", Group.ADDRESS, Kind.SWITCH,
        DEFAULTS.gradient_as_bucket_view,
        "DDP's gradients as views into its buckets (1): no copy.", _setting("gradient_as_bucket_view"),
        "`1`: DDP's gradients are views into its buckets, so data parallelism keeps no second copy",
        f"`{int(DEFAULTS.gradient_as_bucket_view)}`",
        into="overheads.gradient_as_bucket_view",
    ),
    _count_setting(
        "reduce_bucket_size", "DeepSpeed's reduce_bucket_size, in elements (5e8).",
        "DeepSpeed's `reduce_bucket_size`, in elements (`5e8`)",
    ),
    _count_setting(
        "prefetch_bucket_size", "ZeRO-3's stage3_prefetch_bucket_size, in elements (5e7).",
        "DeepSpeed's `stage3_prefetch_bucket_size`, in elements (`5e7`)",
    ),
    _count_setting(
        "max_live_parameters", "ZeRO-3's stage3_max_live_parameters, in elements (1e9).",
        "DeepSpeed's `stage3_max_live_parameters`, in elements (`1e9`)",
    ),
    RunField(
        "fragmentation", "fragmentation", Group.ADDRESS, Kind.WHOLE, DEFAULTS.fragmentation,
        "Percent the caching allocator holds beyond its tensors.", _setting("fragmentation"),
        "percent the caching allocator holds beyond its tensors, 0–100", str(DEFAULTS.fragmentation),
        low=0, high=100, message="Enter a whole percent between 0 and 100.", into="overheads.fragmentation",
    ),
    RunField(
        "trainable", "Trainable weights", Group.MORE, Kind.TRAINABLE, None,
        "Weights that train: a count (1.5B) or a fraction of the model's (0.25 or 25%); the first "
        "weights a forward pass meets are the frozen ones. Default: all, or none of the model's with LoRA.",
        lambda s: f"{s.run.params - s.run.frozen:,} trainable weights",
        "weights that train: a count (`1.5B`) or a fraction of the model's (`0.25`, `25%`); the first weights a "
        "forward pass meets are the frozen ones, and a frozen weight keeps its weights band only (drawn without "
        "the other three)",
        "all; with LoRA, none of the model's",
        message="{said}: enter a count (1.5B) or a fraction (0.25 or 25%), or leave it blank.",
        echo="trainable_params",
        placeholder="all", tip="A count (1.5B) or a fraction (0.25 or 25%); the first weights are the frozen ones",
    ),
    RunField(
        "lora_rank", "LoRA rank", Group.MORE, Kind.WHOLE, None, "LoRA's rank r; none: no adapters.", _lora,
        f"LoRA's rank (1–{MAX_LORA_RANK}). The adapters' r·(d_in + d_out) weights per matrix are added to the model "
        "and train; a bare weight count has no shapes to count them from",
        "no LoRA",
        low=1, high=MAX_LORA_RANK, blank=True,
        message=f"Enter a whole LoRA rank between 1 and {MAX_LORA_RANK:,}, or leave it blank for no adapters.",
        echo="adapter_params",
        placeholder="no LoRA",
    ),
    RunField(
        "lora_targets", "LoRA targets", Group.MORE, Kind.CHOICE, LoraTargets.QKVO,
        "The matrices of each block with adapters: qv, qkvo or all-linear.", _lora,
        "the matrices of each block LoRA adapts: `qv`, `qkvo` or `all-linear` (peft's: every linear layer of the "
        "blocks, not the head)",
        "`qkvo`",
        choices=LoraTargets, echo="adapter_params",
        labels=(
            (LoraTargets.QV, "Q and V (the LoRA paper's)"),
            (LoraTargets.QKVO, "Q, K, V and O"),
            (LoraTargets.ALL_LINEAR, "Every linear layer of the blocks"),
        ),
    ),
    _band_field(Band.WEIGHTS, "weights"),
    _band_field(Band.GRADIENTS, "gradients"),
    _band_field(Band.MASTER, "master copy"),
    _band_field(Band.MOMENTS, "moments"),
    RunField(
        "largest_layer", "Largest layer", Group.MORE, Kind.COUNT, None,
        "Weights ZeRO-3 gathers at once. Defaults to the larger of the embedding and one block.",
        lambda s: None if s.run.largest_layer is None else f"a largest layer of {s.run.largest_layer:,} weights",
        "weights ZeRO-3 gathers at once",
        "the larger of the embedding table and one block",
        none="no largest layer", echo="largest_layer",
        form_label="Largest layer (weights)", inputmode="decimal",
        placeholder=lambda s: "unknown" if s.run.largest_layer is None else "derived",
        tip="Weights ZeRO-3 gathers at once; blank for the model's own",
    ),
    RunField(
        "grad_accum", "Gradients kept in", Group.MORE, Kind.CHOICE, GradAccum.BF16,
        "The gradients between the backward and the update: bf16, the recipe's band, or fp32, 4 B a trainable weight "
        "(Megatron-LM's main_grad, nanotron's fp32 accumulator).",
        lambda s: f"gradients kept in {s.ruled_value(grad_accum, GradAccum.BF16)}",
        "`bf16`, the recipe's gradients band, or `fp32`: the gradients accumulated and kept in fp32, 4 B a trainable "
        "weight, as Megatron-LM's main_grad (`--accumulate-allreduce-grads-in-fp32`) and nanotron's fp32 "
        "accumulator keep them; with mixed-precision Adam, Megatron-LM's 18 B a weight",
        "`bf16`",
        choices=GradAccum, echo="grad_accum", rule=grad_accum,
        labels=((GradAccum.BF16, "The recipe's (bf16 in mixed precision)"), (GradAccum.FP32, "fp32 (main gradients)")),
    ),
    RunField(
        "offload", "Offload", Group.HOST, Kind.CHOICE, Offload.NONE,
        "What leaves the card: none; optimizer (ZeRO-Offload: master copy, moments and the update); "
        "optimizer+params (ZeRO-3's weights' slices too); nvme (ZeRO-Infinity: both, on NVMe).",
        lambda s: f"offload={s.run.setup.placement.offload.value}",
        "what leaves the card: `none`; `optimizer` (ZeRO-Offload: the master copy, the moments and the update, "
        "with the gradients' slice under ZeRO-2 and 3); `optimizer+params` (ZeRO-3's weights' slices too); `nvme` "
        "(ZeRO-Infinity: both, on NVMe). Data parallelism offloads nothing; weights and NVMe need ZeRO-3",
        "`none`",
        choices=Offload, echo="offload",
        labels=(
            (Offload.NONE, "Nothing: all on the card"),
            (Offload.OPTIMIZER, "Optimizer state (ZeRO-Offload)"),
            (Offload.OPTIMIZER_PARAMS, "Optimizer and weights (ZeRO-3)"),
            (Offload.NVME, "Both, to NVMe (ZeRO-Infinity)"),
        ),
    ),
    RunField(
        "offload_device", "Offload to", Group.HOST, Kind.CHOICE, None,
        "Where optimizer and optimizer+params go: cpu (the default) or nvme (ZeRO-3 only).",
        lambda s: "offload to NVMe" if s.run.setup.placement.target is Device.NVME else "offload to the CPU",
        "`cpu` or `nvme`, for `optimizer` and `optimizer+params`; with `offload=nvme`, which is NVMe, it is ignored",
        "`cpu`",
        choices=Device, blank=True, echo="offload_device",
        fallback="as the offload chosen implies with no device given",
        labels=((Device.CPU, "CPU RAM"), (Device.NVME, "NVMe (ZeRO-3)")),
    ),
    RunField(
        "pin_memory", "Host memory for it", Group.HOST, Kind.SWITCH, True,
        "Offloaded state in page-locked CPU memory, DeepSpeed's pin_memory.",
        lambda s: "pinned host memory" if s.run.setup.placement.pin_memory else "pageable host memory",
        "`1`: offloaded state in page-locked CPU memory (counted as pinned), `0`: pageable",
        "`1`",
        echo="pin_memory",
        labels=(("1", "Pinned (page-locked)"), ("0", "Pageable")),
    ),
    RunField(
        "nodes", "Nodes", Group.HOST, Kind.WHOLE, None,
        "Machines the GPUs are in. Default: nodes of 8 where 8 divides gpus.", _cluster,
        "the machines the GPUs are in; times `gpus_per_node` it is `gpus`, and alone it must divide it. Host "
        "memory is per node",
        "nodes of 8 where 8 divides `gpus`, else one node",
        low=1, high=MAX_GPUS, blank=True,
        message=f"Enter a whole number between 1 and {MAX_GPUS}, or leave it blank.", echo="nodes",
        placeholder=lambda s: str(s.run.nodes), tip="Blank: from the GPUs per node",
    ),
    RunField(
        "gpus_per_node", "GPUs per node", Group.HOST, Kind.WHOLE, None,
        "GPUs in each node; host memory is per node.", _cluster,
        "GPUs in each node; alone it must divide `gpus`",
        "8 where 8 divides `gpus`, else `gpus`",
        low=1, high=MAX_GPUS, blank=True,
        message=f"Enter a whole number between 1 and {MAX_GPUS}, or leave it blank.", echo="gpus_per_node",
        placeholder=lambda s: str(s.run.gpus_per_node),
        tip="Blank: nodes of 8 where 8 divides the GPUs, else one node",
    ),
    RunField(
        "host_memory", "CPU RAM per node", Group.HOST, Kind.SIZE, None,
        "One node's CPU RAM, for the host's verdict: 2TB or 2TiB.",
        lambda s: _size_or_none(s.run.host_memory, s),
        "one node's CPU RAM, as `capacity` is written (`2TB`, `1.5TiB`): the host's verdict",
        "none: no verdict",
        none="no host memory, so no verdict on it", echo="host_memory",
        placeholder="e.g. 2TB", tip="Blank for no verdict on the host",
    ),
    # A node may have no NVMe drive (0): ZeRO-Infinity then does not fit, which is a verdict. A node
    # with no CPU RAM, or a card with no memory, is no machine: host_memory and capacity start above 0.
    RunField(
        "nvme_space", "NVMe per node", Group.HOST, Kind.SIZE, None,
        "One node's NVMe space, for ZeRO-Infinity's verdict; 0: a node without NVMe.",
        lambda s: _size_or_none(s.run.nvme_space, s),
        "one node's NVMe space, for ZeRO-Infinity; `0`, a node without NVMe",
        "none: no verdict",
        none="no NVMe space, so no verdict on it", echo="nvme_space", zero=True,
        placeholder="e.g. 30TB", tip="Blank for no verdict on the NVMe",
    ),
    RunField(
        "accounting", "Counted as", Group.HOST, Kind.CHOICE, Accounting.PAPER,
        "Whose count: " + ", ".join(f"{a.value} ({a.counts})" for a in Accounting) + ". docs/accounting.md.",
        lambda s: f"the {s.run.setup.accounting.value} accounting",
        ", ".join(f"`{a.value}` ({a.counts})" for a in Accounting)
        + "; every difference is a sentence on the page. [accounting.md](accounting.md)",
        "`paper`",
        choices=Accounting, echo="accounting",
        labels=tuple((a, a.label) for a in Accounting),
    ),
    RunField(
        "zero_init", "Building the model (DeepSpeed)", Group.HOST, Kind.SWITCH, True,
        "DeepSpeed's zero.Init: each process builds only its slice (1), or the whole model (0).",
        lambda s: "zero.Init" if s.run.zero_init else "the whole model built first",
        "DeepSpeed's `zero.Init`: `1`, each process builds only its slice; `0`, the whole model in fp32 first "
        "(DeepSpeed's CPU figure)",
        "`1`",
        echo="zero_init",
        labels=(("1", "zero.Init: in slices"), ("0", "Whole, then split")),
    ),
    RunField(
        "shard", "Shard group (GPUs)", Group.WIRE, Kind.WHOLE, None,
        "Hybrid sharding (FSDP2's HSDP): split each state across this many GPUs and replicate across the "
        "groups. It divides gpus, and fits in a node or is whole nodes. Default: every GPU.",
        _hybrid,
        "hybrid sharding, FSDP2's HSDP: each state split across a shard group of this many GPUs and replicated "
        "across gpus/shard groups; it divides `gpus` and fits in a node or is whole nodes. "
        "[wire.md](wire.md)",
        "every GPU: one group",
        low=1, high=MAX_GPUS, blank=True,
        message=f"Enter a whole number of GPUs between 1 and {MAX_GPUS} that divides the GPUs, or leave it blank.",
        echo="shard",
        placeholder=lambda s: str(s.run.shards), tip=None,
    ),
    RunField(
        "hpz", "hpZ partition (GPUs)", Group.WIRE, Kind.WHOLE, 1,
        "ZeRO++'s hpZ (zero_hpz_partition_size): ZeRO-3 keeps a second copy of the weights split across this "
        "many GPUs, a node's, so the backward's gather stays inside the node. 1: off.",
        lambda s: f"hpz={s.run.setup.hpz}",
        "ZeRO++'s hpZ, DeepSpeed's `zero_hpz_partition_size`: ZeRO-3 keeps a second copy of the weights split "
        "across this many GPUs (ideally a node's), 2Ψ/hpz bytes more a card; `1` is off. [wire.md](wire.md)",
        "`1`",
        low=1, high=MAX_GPUS, message=f"Enter a whole number of GPUs between 1 and {MAX_GPUS} (1: no hpZ).",
        echo="hpz",
        placeholder="", tip=None,
    ),
    RunField(
        "qwz", "qwZ: weights gathered in int8", Group.WIRE, Kind.SWITCH, False,
        "ZeRO++'s qwZ (zero_quantized_weights): ZeRO-3 all-gathers its weights in int8.",
        lambda s: _switch(s.run.qwz, "qwZ"),
        "ZeRO++'s qwZ, DeepSpeed's `zero_quantized_weights`: `1`, ZeRO-3 all-gathers its weights in int8 "
        "(1 B a weight on the wire); stored as before",
        "`0`",
        echo="qwz",
    ),
    RunField(
        "qgz", "qgZ: gradients reduced in int4", Group.WIRE, Kind.SWITCH, False,
        "ZeRO++'s qgZ (zero_quantized_gradients): ZeRO-3 reduce-scatters its gradients in int4.",
        lambda s: _switch(s.run.qgz, "qgZ"),
        "ZeRO++'s qgZ, DeepSpeed's `zero_quantized_gradients`: `1`, ZeRO-3 reduce-scatters its gradients in "
        "int4 (half a byte a weight on the wire)",
        "`0`",
        echo="qgz",
    ),
    RunField(
        "nvlink", "Link inside a node (GB/s a GPU)", Group.WIRE, Kind.WHOLE, H100_FABRIC.nvlink,
        "What one GPU sends each second over the link inside its node, in GB/s: H100's NVLink 4 by default.",
        lambda s: f"{s.run.links.nvlink:,} GB/s inside a node",
        f"GB/s one GPU sends inside its node, 1–{_WIRE_WHOLE:,}; H100 SXM's NVLink 4 is 900 GB/s both ways, "
        "450 each way. [wire.md](wire.md)",
        str(H100_FABRIC.nvlink),
        low=1, high=_WIRE_WHOLE, message=f"Enter whole GB/s between 1 and {_WIRE_WHOLE:,}.", echo="nvlink",
        placeholder="", tip=None,
    ),
    RunField(
        "network", "Link between nodes (Gb/s, bits: 400 = 50 GB/s)", Group.WIRE, Kind.WHOLE, H100_FABRIC.network,
        "What one GPU sends each second between nodes, in Gb/s: one 400 Gb/s InfiniBand NDR port by default.",
        lambda s: f"{s.run.links.network:,} Gb/s between nodes",
        f"Gb/s (bits) one GPU sends between nodes, 1–{_WIRE_WHOLE:,}; a DGX H100 has one 400 Gb/s ConnectX-7 "
        "port per GPU. [wire.md](wire.md)",
        str(H100_FABRIC.network),
        low=1, high=_WIRE_WHOLE, message=f"Enter whole Gb/s between 1 and {_WIRE_WHOLE:,}.", echo="network",
        placeholder="", tip=None,
    ),
    RunField(
        "tflops", "Card's bf16 peak (TFLOP/s)", Group.WIRE, Kind.WHOLE, H100_FABRIC.tflops,
        "The card's dense bf16 peak in TFLOP/s, for the compute time: H100 SXM's 989 by default.",
        lambda s: f"{s.run.links.tflops:,} TFLOP/s",
        f"the card's dense bf16 peak, TFLOP/s, 1–{_WIRE_WHOLE:,}; H100 SXM's is 989 (1,979 with sparsity)",
        str(H100_FABRIC.tflops),
        low=1, high=_WIRE_WHOLE, message=f"Enter whole TFLOP/s between 1 and {_WIRE_WHOLE:,}.", echo="tflops",
        placeholder="", tip=None,
    ),
    RunField(
        "mfu", "MFU (%)", Group.WIRE, Kind.WHOLE, H100_FABRIC.mfu,
        "The share of the peak the step reaches, in percent: 40 by default, as Llama 3 reports on H100s.",
        lambda s: f"an MFU of {s.run.links.mfu}%",
        "percent of the peak the step's matrix multiplies reach, 1–100; Llama 3's pre-training reports 38–43%",
        str(H100_FABRIC.mfu),
        low=1, high=100, message="Enter a whole percent between 1 and 100.", echo="mfu",
        placeholder="", tip=None,
    ),
    RunField(
        "tp", "Tensor parallel (GPUs)", Group.CUT, Kind.WHOLE, 1,
        "Tensor parallelism: each layer's matrices split across this many GPUs of one node (Megatron-LM's "
        "--tensor-model-parallel-size). 1: off.",
        lambda s: f"tp={s.run.cut.tp}",
        f"tensor-parallel degree, 1–{MAX_GPUS:,}: each layer's matrices split across this many GPUs, inside a node; "
        "`tp × pp × cp` divides `gpus`. [parallelism.md](parallelism.md)",
        "`1`",
        low=1, high=MAX_GPUS, message=f"Enter a whole number of GPUs between 1 and {MAX_GPUS:,} (1: no tensor "
        "parallelism).",
        echo="tp", placeholder="", tip=None,
    ),
    RunField(
        "sp", "Sequence parallel", Group.CUT, Kind.SWITCH, False,
        "Sequence parallelism (with tp > 1): the activations outside the matrices split along the sequence "
        "across the tensor-parallel group (--sequence-parallel).",
        lambda s: _switch(s.run.cut.sp, "sequence parallelism"),
        "`1`: sequence parallelism, Korthikanti et al. 2022: the norms' and dropouts' activations split across "
        "the tensor-parallel group; needs `tp` above 1",
        "`0`",
        echo="sp",
    ),
    RunField(
        "pp", "Pipeline stages", Group.CUT, Kind.WHOLE, 1,
        "Pipeline parallelism: the blocks split into this many stages, each on its own GPUs "
        "(--pipeline-model-parallel-size). 1: off.",
        lambda s: f"pp={s.run.cut.pp}",
        f"pipeline stages, 1–{MAX_STAGES:,}: each keeps a run of the blocks; it divides the model's blocks. "
        "[parallelism.md](parallelism.md)",
        "`1`",
        low=1, high=MAX_STAGES,
        message=f"Enter a whole number of stages between 1 and {MAX_STAGES:,} (1: no pipeline).",
        echo="pp", placeholder="", tip=None,
    ),
    RunField(
        "vpp", "Virtual stages per GPU", Group.CUT, Kind.WHOLE, 1,
        "Interleaved 1F1B: each GPU keeps this many separate runs of the blocks, which shrinks the bubble "
        "(--num-layers-per-virtual-pipeline-stage). 1: plain 1F1B.",
        lambda s: f"vpp={s.run.cut.vpp}",
        "virtual pipeline stages per GPU, 1–128, interleaved 1F1B (Narayanan et al. 2021); needs `pp` above 1",
        "`1`",
        low=1, high=128, message="Enter a whole number between 1 and 128 (1: no interleaving).",
        echo="vpp", placeholder="", tip=None,
    ),
    RunField(
        "microbatches", "Micro-batches per step", Group.CUT, Kind.WHOLE, 1,
        "Micro-batches each data-parallel rank runs per step (gradient accumulation): what fills the pipeline.",
        lambda s: f"{s.run.cut.microbatches:,} micro-batches a step",
        f"micro-batches per step per data-parallel rank, 1–{MAX_BATCH:,}: the gradient accumulation, and the "
        "pipeline's bubble, (pp − 1) / microbatches",
        "`1`",
        low=1, high=MAX_BATCH, message=f"Enter a whole number between 1 and {MAX_BATCH:,}.",
        echo="microbatches", placeholder="", tip=None,
    ),
    RunField(
        "cp", "Context parallel (GPUs)", Group.CUT, Kind.WHOLE, 1,
        "Context parallelism: each sequence split across this many GPUs (--context-parallel-size). 1: off.",
        lambda s: f"cp={s.run.cut.cp}",
        f"context-parallel degree, 1–{MAX_STAGES:,}: each sequence split across this many GPUs, which gather the "
        "keys and values (ring attention). [parallelism.md](parallelism.md)",
        "`1`",
        low=1, high=MAX_STAGES, message=f"Enter a whole number of GPUs between 1 and {MAX_STAGES:,} (1: no context "
        "parallelism).",
        echo="cp", placeholder="", tip=None,
    ),
    RunField(
        "ep", "Expert parallel (GPUs)", Group.CUT, Kind.WHOLE, 1,
        "Expert parallelism: a mixture of experts' routed experts split across this many GPUs, each keeping "
        "whole experts (--expert-model-parallel-size). 1: off.",
        lambda s: f"ep={s.run.cut.ep}",
        f"expert-parallel degree, 1–{MAX_GPUS:,}: a mixture of experts' routed experts split across this many GPUs; "
        "it divides the experts, and `ep × etp` divides `gpus ÷ pp`. [parallelism.md](parallelism.md)",
        "`1`",
        low=1, high=MAX_GPUS, message=f"Enter a whole number of GPUs between 1 and {MAX_GPUS:,} (1: no expert "
        "parallelism).",
        echo="ep", placeholder="", tip=None,
    ),
    RunField(
        "etp", "Expert tensor parallel (GPUs)", Group.CUT, Kind.WHOLE, 0,
        "Expert tensor parallelism: each routed expert's matrices split across this many GPUs of a node "
        "(--expert-tensor-parallel-size). 0: as tp.",
        lambda s: f"etp={s.run.cut.expert_tp}",
        f"expert tensor-parallel degree, 0–{MAX_GPUS:,}: each routed expert's matrices split across this many GPUs, "
        "inside a node; `0` takes `tp`, as Megatron-LM does",
        "`0` (as `tp`)",
        low=0, high=MAX_GPUS, message=f"Enter a whole number of GPUs between 0 and {MAX_GPUS:,} (0: as tp).",
        echo="etp", placeholder="", tip=None,
    ),
    RunField(
        "capacity_factor", "Expert capacity factor", Group.CUT, Kind.FACTOR, None,
        "A mixture of experts' capacity factor: each expert's input padded to factor × tokens × top-k / experts "
        "rows (--moe-expert-capacity-factor with --moe-pad-expert-input-to-capacity). Blank: dropless.",
        _capacity,
        "a mixture of experts' capacity factor (`1.25`): each expert's input padded to ⌈factor × tokens × top-k ÷ "
        "experts⌉ rows, as Megatron-LM's `--moe-expert-capacity-factor` with `--moe-pad-expert-input-to-capacity`; "
        "its activations grow with it. [moe.md](moe.md)",
        "blank: dropless (each expert takes the tokens routed to it)",
        message="{said}: enter a factor above 0 (1.25), or leave it blank for dropless experts.",
        echo="capacity_factor",
        placeholder="dropless", tip="Blank: dropless; 1.25 pads each expert to 1.25 × its even share",
        inputmode="decimal",
    ),
)  # fmt: skip
"""Every run field, in the order the query models read them: a rule across fields reads the earlier ones."""

BY_NAME = {f.name: f for f in FIELDS}
SIZE_FIELDS = frozenset(f.name for f in FIELDS if f.kind is Kind.SIZE)
"""The fields read as memory sizes, where a bare G or T deserves its own answer (GB or GiB?)."""
FIELD_HINTS = {f.name: hint for f in FIELDS if (hint := f.hint()) is not None}
"""What a person is told when a text field does not match its pattern (the regex itself is no help)."""


def in_group(group: Group) -> tuple[RunField, ...]:
    """The fields of one part of the form, in its order."""
    return tuple(f for f in FIELDS if f.group is group)


def read(inputs: Inputs, field: RunField) -> Any:
    """A field's value in `Inputs`, wherever its `into` (or its `rule`) puts it."""
    if field.rule is not None:
        return next((value for rule, value in inputs.ruled if rule is field.rule), field.default)
    where, _, key = field.target.partition(".")
    value = getattr(inputs, where)
    if where == "band_bytes":
        return value[int(key)]
    return getattr(value, key) if key else value


_DEFAULTS = tuple((f, read(Inputs(), f)) for f in FIELDS)
"""Each field with its value when nothing is given: read once, as every form asks which were given."""


def given(inputs: Inputs) -> frozenset[str]:
    """The fields given a value other than their default; a preset recipe's bands are its own, not given."""
    custom = inputs.recipe is RecipeName.CUSTOM
    return frozenset(f.name for f, default in _DEFAULTS if read(inputs, f) != default and (custom or f.band is None))


def unfolded(given: Iterable[str], custom_recipe: bool, problems: Iterable[str] = ()) -> frozenset[Group]:
    """The folds of the form shown open: those holding a value given, or a value set aside.

    The one place this is decided. `given` are the fields given a value other than their default. A
    custom recipe opens the fold its bands are in: they are the recipe's inputs, given or not.
    """
    names = {*given, *problems}
    if custom_recipe:
        names |= {f.name for f in FIELDS if f.band is not None}
    return frozenset(BY_NAME[n].group for n in names if n in BY_NAME and BY_NAME[n].group in FOLDS)


def doc_table() -> str:
    """The run options' table of docs/url-options.md (written there by cog; checked by a quick test)."""
    lines = ["| option | where | meaning | default |", "|---|---|---|---|"]
    lines += [f"| `{f.name}` | {_RUN_WHERE} | {f.doc} | {f.doc_default} |" for f in FIELDS]
    return "\n".join(lines)
