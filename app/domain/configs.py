"""A run as a DeepSpeed config or an FSDP2 snippet to paste, and a DeepSpeed config read back as a run.

The export says what the domain draws, no more: offload follows `Placement.moved` and
`Placement.home` stage by stage (data parallelism offloads nothing, the weights only at ZeRO-3,
NVMe only at ZeRO-3), so a config never asks DeepSpeed for what the page does not show. The key
names are DeepSpeed's (its `zero_optimization` section and `offload_optimizer`/`offload_param`
blocks, `deepspeed/runtime/zero/config.py` and `offload_config.py`); docs/export.md, "A training
config", lists them.

ZeRO++ (`zero_hpz_partition_size`, `zero_quantized_weights`, `zero_quantized_gradients`) is written
at ZeRO-3 alone, where DeepSpeed reads it. Hybrid sharding has no DeepSpeed config: DeepSpeed's was
MiCS (`mics_shard_size`), removed in its newest release, so `deepspeed_config` refuses it and the
FSDP2 snippet writes it as HSDP, a 2-D device mesh.

The reader answers with URL parameters, as strings, so the web layer validates them with the same
query model as a link. It reads only what changes the picture and lists every other key it met.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeGuard

from app.domain.overheads import DEFAULTS
from app.domain.placement import Home
from app.domain.recipes import BF16, FP32, Band, GradAccum, Optimizer, Recipe, RecipeName
from app.domain.run import MAX_GPUS
from app.domain.sizing import MAX_BATCH, Run
from app.domain.stages import Stage

ZERO_STAGE = {Stage.DP: 0, Stage.ZERO1: 1, Stage.ZERO2: 2, Stage.ZERO3: 3}
STAGE_OF = {number: stage for stage, number in ZERO_STAGE.items()}

NVME_PATH = "/local_nvme"
"""DeepSpeed refuses NVMe offload without a path; its documentation's example, to be edited."""
ADAM_TYPES = frozenset({"adam", "adamw"})
"""DeepSpeed's optimizer types (case-insensitive) that keep Adam's two moments, as the recipes draw them."""
MAX_ELEMENTS = 10**16
"""The count grammar's ceiling (under 10,000T): a bucket beyond it could not be put in a link."""
AUTO = "auto"
"""Hugging Face's placeholder, filled in at launch: the run's own value stands."""

# The URL parameters a DeepSpeed config decides. A key missing from the config means DeepSpeed's
# default, which is the app's too (the buckets' defaults are DeepSpeed's), so each is always answered:
# an empty string is "the default", as a blank form field is.
GOVERNED = (
    "stage",
    "offload",
    "offload_device",
    "pin_memory",
    "reduce_bucket_size",
    "prefetch_bucket_size",
    "max_live_parameters",
    "recipe",
    "grad_accum",
    "batch",
    "shard",
    "hpz",
    "qwz",
    "qgz",
)


class ConfigError(ValueError):
    """A config the app cannot read: the message names the key and the value, for a person."""

    def __init__(self, key: str, value: object, why: str) -> None:
        self.key, self.value = key, value
        super().__init__(f"{key}: {_shown(value)} {why}")


def _shown(value: object) -> str:
    # JSON's own spelling (true, "cpu", 4), shortened: a pasted config may be long.
    text = json.dumps(value, default=str)
    return text if len(text) <= 40 else text[:39] + "…"


class NoConfig(ValueError):
    """A run a framework has no config for: the message says why, and what to use instead, for a person."""

    def __init__(self, parameter: str, message: str) -> None:
        self.parameter = parameter  # the URL parameter that asks for it
        super().__init__(message)


# --- writing -------------------------------------------------------------------------------------


def _refused_parameter(stage: Stage, run: Run) -> str:
    """The URL parameter that asks for what DeepSpeed has no config for; empty where it has one."""
    if cut := cut_parameter(run):
        return cut
    if stage is Stage.DP:
        # Without ZeRO, DeepSpeed's engine refuses bf16 weights with fp32 gradient accumulation
        # (NotImplementedError since deepspeedai/DeepSpeed#7790; #7803 moved its own test to ZeRO-1).
        return "grad_accum" if _kept(run) is GradAccum.FP32 and _bf16(run.recipe) else ""
    return "shard" if run.replicas > 1 else ""


def cut_parameter(run: Run) -> str:
    """The first of tp, pp, cp, ep and etp that cuts the model (above 1); empty where it is not cut.

    Expert parallelism too: DeepSpeed-MoE sets it in the model's code (`deepspeed.moe.layer.MoE(ep_size=…)`), not
    in its JSON config, so neither export can say it.
    """
    return next((name for name in ("tp", "pp", "cp", "ep", "etp") if getattr(run.cut, name) > 1), "")


def cut_refused_here(export: str, run: Run) -> str:
    """Why an export of ZeRO alone cannot say a run whose model is cut: the layout's exports can."""
    cut = run.cut
    experts = "".join(f", {name}={getattr(cut, name)}" for name in ("ep", "etp") if getattr(cut, name) > 1)
    return (
        f"The model is cut across cards (tp={cut.tp}, pp={cut.pp}, cp={cut.cp}{experts}), which {export} cannot say "
        "(ZeRO over whole copies of the model alone). Copy the layout as Megatron-LM arguments, torchtitan or an "
        "FSDP2 + DTensor mesh."
    )


def deepspeed_refused(stage: Stage, run: Run) -> str:
    """Why DeepSpeed has no config for `run` under `stage`, for a person; empty where it has one.

    Hybrid sharding under ZeRO-1 to 3: DeepSpeed's own was MiCS (`mics_shard_size`), removed in its
    newest release (deepspeedai/DeepSpeed#8489). Data parallelism splits nothing, so its config is
    the same with shard groups or without. grad_accum=fp32 with bf16 weights at stage 0: DeepSpeed
    accumulates bf16 gradients in fp32 only under ZeRO.
    """
    parameter = _refused_parameter(stage, run)
    if parameter and parameter == cut_parameter(run):
        return cut_refused_here("DeepSpeed's JSON config", run)
    if parameter == "grad_accum":
        return (
            "grad_accum=fp32 with bf16 weights needs ZeRO in DeepSpeed: without it (stage 0) its engine refuses "
            "data_types.grad_accum_dtype fp32. Use ZeRO-1, which keeps the same state on every card but the "
            "optimizer's, or FSDP2's snippet."
        )
    if not parameter:
        return ""
    return (
        f"shard={run.shards} is hybrid sharding (the state split across {run.shards:,} cards, kept whole by "
        f"each of {run.replicas:,} groups), and DeepSpeed has no config for it: its MiCS (mics_shard_size) was "
        "removed in its newest release. Use FSDP2 instead: its 2-D device mesh (HSDP) splits the state the same way."
    )


def deepspeed_config(stage: Stage, run: Run) -> dict[str, Any]:
    """The DeepSpeed config of `run` under `stage`.

    batch=0 (no activations counted) writes a micro-batch of 1, the least DeepSpeed accepts.
    Raises NoConfig where DeepSpeed has none (`deepspeed_refused`): hybrid sharding, grad_accum=fp32 at stage 0.
    """
    if refused := deepspeed_refused(stage, run):
        raise NoConfig(_refused_parameter(stage, run), refused)
    placement = run.setup.placement
    moved = placement.moved(stage)
    zero: dict[str, Any] = {"stage": ZERO_STAGE[stage]}
    if stage is not Stage.DP:  # stage 0 is DDP-like: the app counts PyTorch DDP's buckets there, not these
        zero["reduce_bucket_size"] = run.overheads.reduce_bucket_size
    device = placement.home(stage).value  # "cpu" or "nvme": Home's values are DeepSpeed's device names
    if moved:
        zero["offload_optimizer"] = _offload(device, placement.pin_memory)
    if Band.WEIGHTS in moved:
        zero["offload_param"] = _offload(device, placement.pin_memory)
    if stage is Stage.ZERO3:
        zero["stage3_prefetch_bucket_size"] = run.overheads.prefetch_bucket_size
        zero["stage3_max_live_parameters"] = run.overheads.max_live_parameters
        zero |= _zeropp(run)
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": max(run.batch, 1),
        "bf16": _bf16_section(run.recipe),
        "zero_optimization": zero,
    }
    # The optimizer, the precision and the gradients' format are the recipe's properties (recipes.py)
    # and the run's grad_accum, never the recipe's name.
    optimizer = run.recipe.optimizer
    if optimizer is Optimizer.SGD_MOMENTUM:
        # DeepSpeed builds a type it has none of from torch.optim by name (engine.py,
        # `_configure_basic_optimizer`); ZeRO takes it only when told it may (its engine asserts).
        config["optimizer"] = {"type": "SGD", "params": {"momentum": SGD_MOMENTUM}}
        config["zero_allow_untested_optimizer"] = True
    elif kind := optimizer.deepspeed:
        config["optimizer"] = {"type": kind}
    else:
        # bitsandbytes' 8-bit Adam (or the user's own): no DeepSpeed type names it, so it is passed in
        # code, `deepspeed.initialize(optimizer=bnb.optim.AdamW8bit(...))`, and ZeRO takes an optimizer
        # of the user's own only when told it may. Written at every stage: the reader knows it by it.
        config["zero_allow_untested_optimizer"] = True
    if _kept(run) is GradAccum.FP32:
        # DeepSpeed's `data_types.grad_accum_dtype` (PR #4713): the gradients accumulated in fp32.
        config["data_types"] = {"grad_accum_dtype": "fp32"}
    return config


SGD_MOMENTUM = 0.9
"""The momentum written for SGD with momentum: a common value, to edit (any above 0 keeps the band)."""


def _kept(run: Run) -> GradAccum:
    """What the run keeps its gradients in, read from its recipe's bands.

    fp32 where the weights that train are narrower (grad_accum=fp32 makes the gradients band fp32,
    `recipes.grad_accum`), else the recipe's own.
    """
    gradients, trained = run.recipe.spec(Band.GRADIENTS).dtype, run.recipe.trained
    return GradAccum.FP32 if gradients.torch == FP32.torch and trained.torch != FP32.torch else GradAccum.BF16


def _pure_bf16(recipe: Recipe) -> bool:
    """bf16 weights that train and no master copy: the update goes straight into the bf16 weights."""
    return recipe.trained.torch == BF16.torch and not recipe.has_master


def _bf16_moments(recipe: Recipe) -> bool:
    return recipe.spec(Band.MOMENTS).copies > 0 and recipe.spec(Band.MOMENTS).dtype.torch == BF16.torch


def _bf16_section(recipe: Recipe) -> dict[str, Any]:
    """DeepSpeed's `bf16` section from the recipe's bands.

    `bf16_master_weights_and_grads` and `bf16_optimizer_states` (DeepSpeed PR #7700, its
    config-json "bf16" section) keep what DeepSpeed would hold in fp32 in bf16: written where the
    recipe has no fp32 master copy beside bf16 weights, and where its moments are bf16.
    """
    section: dict[str, Any] = {"enabled": _bf16(recipe)}
    if _pure_bf16(recipe):
        section["bf16_master_weights_and_grads"] = True
    if _bf16(recipe) and _bf16_moments(recipe):
        section["bf16_optimizer_states"] = True
    return section


def _zeropp(run: Run) -> dict[str, Any]:
    """ZeRO++'s keys in `zero_optimization`, those that are on: DeepSpeed reads them at ZeRO-3 alone."""
    keys: dict[str, Any] = {}
    if run.setup.hpz > 1:
        keys["zero_hpz_partition_size"] = run.setup.hpz
    if run.qwz:
        keys["zero_quantized_weights"] = True
    if run.qgz:
        keys["zero_quantized_gradients"] = True
    return keys


def _offload(device: str, pin_memory: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"device": device, "pin_memory": pin_memory}
    if device == Home.NVME.value:
        block["nvme_path"] = NVME_PATH
    return block


def _bf16(recipe: Recipe) -> bool:
    """Whether the weights that train compute in bf16: DeepSpeed's `bf16.enabled`, FSDP2's `param_dtype`.

    Read from the recipe's format of those weights (`Recipe.trained`): bf16 weights, or QLoRA's bf16
    adapters beside its NF4 ones; fp8 training's weights are bf16 too, fp8 being inside the multiplies.
    """
    return recipe.trained.torch == BF16.torch


def fsdp2_snippet(stage: Stage, run: Run) -> str:
    """PyTorch FSDP2 code for `run` under `stage`: `fully_shard` for ZeRO-2 and 3, a comment for the others.

    Every stage names the recipe's precision (the model's parameter dtype, QLoRA's NF4 and LoRA, fp8's
    conversion) and its optimizer, read from the recipe's properties. Hybrid sharding is a 2-D device
    mesh, (replicas, shards): FSDP2 shards on its second dimension and replicates on its first (HSDP),
    and ZeRO-1's optimizer splits across the mesh's shard group.
    """
    title = f"# {stage.info.title} for this run, in PyTorch."
    recipe = run.recipe
    cls, kwargs = _optimizer(recipe)
    package = cls.split(".")[0]
    extra = [f"import {package}"] if package != "torch" else []
    params = _params(recipe)
    notes, code = _precision(run, ddp=stage in (Stage.DP, Stage.ZERO1))
    if stage is Stage.DP:
        lines = [
            title,
            *notes,
            "# Data parallelism has no fully_shard: every card keeps everything. In PyTorch it is DDP.",
            *extra,
            "import torch",
            "from torch.nn.parallel import DistributedDataParallel",
            "",
            *code,
            "model = DistributedDataParallel(model)",
            f"optimizer = {cls}({params}{kwargs})",
        ]
    elif stage is Stage.ZERO1:
        hybrid = _hybrid(run)
        group = ', process_group=mesh["shard"].get_group()' if hybrid else ""
        lines = [
            title,
            *notes,
            "# ZeRO-1 has no fully_shard: FSDP2 shards the gradients too (ZeRO-2) or everything (ZeRO-3).",
            "# PyTorch's ZeRO-1 is DDP with ZeroRedundancyOptimizer, which splits the optimizer state alone.",
            *extra,
            "import torch",
            *([MESH_IMPORT] if hybrid else []),
            "from torch.distributed.optim import ZeroRedundancyOptimizer",
            "from torch.nn.parallel import DistributedDataParallel",
            "",
            *code,
            *(_mesh(run, "the optimizer state") if hybrid else []),
            "model = DistributedDataParallel(model)",
            f"optimizer = ZeroRedundancyOptimizer({params}, optimizer_class={cls}{group}{kwargs})",
        ]
    else:
        lines = [*_fully_shard(stage, run, title, notes, code, extra), f"optimizer = {cls}({params}{kwargs})"]
    return "\n".join(lines) + "\n"


def _optimizer(recipe: Recipe) -> tuple[str, str]:
    """The optimizer's class in PyTorch (`Optimizer.torch`) and its keyword arguments, ", momentum=0.9"."""
    if recipe.optimizer is Optimizer.SGD_MOMENTUM:
        return recipe.optimizer.torch, f", lr=1e-3, momentum={SGD_MOMENTUM}"
    return recipe.optimizer.torch, ""


def _params(recipe: Recipe) -> str:
    # QLoRA trains its adapters alone: the frozen NF4 weights have no gradient and no optimizer state.
    if recipe.adapters is not None:
        return "[p for p in model.parameters() if p.requires_grad]"
    return "model.parameters()"


def _precision(run: Run, ddp: bool = False) -> tuple[list[str], list[str]]:
    """The model's formats as the recipe's bands say them: comments, and the lines of code that set them."""
    recipe = run.recipe
    lines: list[str] = []
    code: list[str] = []
    if recipe.optimizer is Optimizer.OWN:
        lines.append("# Your own optimizer: torch.optim.AdamW stands for it below.")
    if recipe.adapters is not None:
        lines += [
            f"# QLoRA: the frozen weights in {recipe.spec(Band.WEIGHTS).dtype.name} (bitsandbytes, double-quantised), "
            f"LoRA adapters in {recipe.adapters.name} (peft), updated in place: no master copy.",
            "# from transformers import AutoModelForCausalLM, BitsAndBytesConfig",
            "# from peft import LoraConfig, get_peft_model",
            '# quantization = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", '
            "bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=torch.bfloat16)",
            "# model = AutoModelForCausalLM.from_pretrained(name, quantization_config=quantization)",
            '# model = get_peft_model(model, LoraConfig(r=rank, target_modules="all-linear"))',
        ]
        state = recipe.spec(Band.MOMENTS).dtype
        if state.torch and state.torch != recipe.adapters.torch:
            lines.append(
                f"# Adam's moments in {state.name}, as drawn: torch's AdamW keeps them in the parameters' dtype."
            )
    elif _pure_bf16(recipe):
        moments = recipe.spec(Band.MOMENTS).dtype.name
        lines += [
            f"# Pure bf16: the weights are bf16 and updated in place, no fp32 master copy; the optimizer's state "
            f"takes the weights' dtype ({moments}).",
        ]
        code.append(f"model = model.to({BF16.torch})")
    elif _bf16(recipe):
        lines.append(
            "# Mixed precision: the fp32 parameters are the master copy the optimizer updates, with its state in fp32; "
            + (
                'the passes compute in bf16 under torch.autocast("cuda", dtype=torch.bfloat16).'
                if ddp
                else "FSDP2 casts them to bf16 for the passes (param_dtype)."
            )
        )
    elif ddp:  # fully_shard's own note says it
        lines.append(f"# {recipe.trained.name} weights throughout: no mixed precision.")
    if (matmul := recipe.matmul) is not None:  # fp8 training: the multiplies' format, not the weights'
        lines += [
            f"# {matmul.name} inside the matrix multiplies only: convert the model first (torchao's "
            "float8.convert_to_float8_training); the weights, gradients and optimizer state keep the recipe's formats.",
        ]
        code += ["from torchao.float8 import convert_to_float8_training", "convert_to_float8_training(model)"]
    if ddp and _kept(run) is GradAccum.FP32 and _bf16(recipe):
        lines.append(
            "# grad_accum=fp32: gradients accumulated and kept in fp32 (Megatron-LM's main_grad); DDP reduces them "
            "in the parameters' dtype, fp32 beside a master copy."
        )
    return lines, code


MESH_IMPORT = "from torch.distributed.device_mesh import init_device_mesh"


def _hybrid(run: Run) -> bool:
    return run.replicas > 1


def _mesh(run: Run, split: str) -> list[str]:
    """The 2-D device mesh of hybrid sharding, and what it splits where."""
    return [
        f"# Hybrid sharding: {split} split across each shard group of {run.shards:,} cards, whole in each of "
        f"the {run.replicas:,} groups.",
        "# Ranks are numbered node by node, so a shard group, a row of the mesh, is a node's cards or whole nodes.",
        f'mesh = init_device_mesh("cuda", ({run.replicas}, {run.shards}), mesh_dim_names=("replicate", "shard"))',
    ]


def _fully_shard(
    stage: Stage, run: Run, title: str, precision: list[str], code: list[str], extra: list[str]
) -> list[str]:
    """ZeRO-2 is fully_shard keeping the gathered weights after the forward; ZeRO-3 frees them.

    `precision` and `code` are the recipe's comments and lines (`_precision`), `extra` the optimizer's import.
    """
    placement = run.setup.placement
    reshard, notes = _reshard(stage, run)
    imports, policies, options, mesh = ["fully_shard"], [], [f"reshard_after_forward={reshard}"], []
    if _hybrid(run):
        mesh = [
            *_mesh(run, "the state"),
            '# A 2-D mesh is HSDP: each weight is Replicate() on "replicate" and Shard(0) on "shard".',
            f"# In torchtitan's [parallelism]: data_parallel_replicate_degree={run.replicas}, "
            f"data_parallel_shard_degree={run.shards}.",
        ]
        options.insert(0, "mesh=mesh")
    recipe = run.recipe
    notes = precision + notes
    if _bf16(recipe):
        # reduce_dtype is the gradients' format, the run's grad_accum: fp32 main gradients, or the recipe's bf16.
        fp32 = _kept(run) is GradAccum.FP32
        reduce = FP32.torch if fp32 else BF16.torch
        policy = [f"param_dtype={BF16.torch}"] if recipe.has_master else []  # pure bf16: the model is bf16 already
        if fp32 or policy:
            imports.append("MixedPrecisionPolicy")
            policies.append(f"mp_policy = MixedPrecisionPolicy({', '.join([*policy, f'reduce_dtype={reduce}'])})")
            options.append("mp_policy=mp_policy")
            notes.append(
                f"# reduce_dtype={reduce}: the gradients reduced and kept in "
                + ("fp32 (grad_accum=fp32, Megatron-LM's main_grad)." if fp32 else "bf16, the recipe's gradients band.")
            )
    else:
        notes.append(f"# {recipe.trained.name} weights: no MixedPrecisionPolicy.")
    if placement.moved(stage):
        imports.append("CPUOffloadPolicy")
        policies.append(f"offload_policy = CPUOffloadPolicy(pin_memory={placement.pin_memory})")
        options.append("offload_policy=offload_policy")
        # Unlike DeepSpeed's two blocks, FSDP2's one policy moves everything sharded.
        notes.append("# CPUOffloadPolicy moves the sharded weights too, and the optimizer steps on the CPU.")
        if placement.home(stage) is Home.NVME:
            notes.append("# FSDP2 cannot offload to NVMe: this offloads to the CPU instead.")
    args = ", ".join(options)
    return [
        title,
        *notes,
        *extra,
        "import torch",
        *([MESH_IMPORT] if mesh else []),
        f"from torch.distributed.fsdp import {', '.join(imports)}",
        "",
        *code,
        *mesh,
        *policies,
        "# Each block first, then the whole model, so each block is gathered and freed on its own.",
        "for block in model.layers:",
        f"    fully_shard(block, {args})",
        f"fully_shard(model, {args})",
    ]


def _reshard(stage: Stage, run: Run) -> tuple[str, list[str]]:
    """The reshard_after_forward option, and what the snippet cannot say of ZeRO++: FSDP2 has hpZ, not qwZ or qgZ.

    ZeRO-2 keeps the gathered weights (False), ZeRO-3 frees them (True). An int keeps each weight
    split across that many cards after the forward, so the backward gathers it there: hpZ's
    secondary copy. FSDP2 takes a divisor of the shard group other than 1 and the group itself.
    """
    if stage is not Stage.ZERO3:
        return "False", []
    reshard, notes = "True", []
    if 1 < run.setup.hpz < run.shards:
        reshard = str(run.setup.hpz)
        notes.append(
            f"# ZeRO++'s hpZ: after the forward each weight stays split across {run.setup.hpz:,} cards, so the "
            "backward gathers it from those cards alone."
        )
    if run.qwz or run.qgz:
        notes.append(
            "# ZeRO++'s qwZ and qgZ (int8 weights, int4 gradients on the wire) are DeepSpeed's: "
            "FSDP2 does not quantize what it sends."
        )
    return reshard, notes


# --- reading -------------------------------------------------------------------------------------

_MODELLED_TOP = frozenset(
    {"zero_optimization", "bf16", "fp16", "optimizer", "train_micro_batch_size_per_gpu"}
    | {"zero_allow_untested_optimizer", "data_types"}
)
_BF16_KEYS = ("bf16_master_weights_and_grads", "bf16_optimizer_states")
"""DeepSpeed's switches that keep in bf16 what it would keep in fp32: the master copy and the gradients, the moments."""
_MODELLED_ZERO = frozenset(
    {"stage", "offload_optimizer", "offload_param", "reduce_bucket_size"}
    | {"stage3_prefetch_bucket_size", "stage3_max_live_parameters"}
    | {"zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_gradients", "mics_shard_size"}
)
_SWITCHES = (("zero_quantized_weights", "qwz"), ("zero_quantized_gradients", "qgz"))
"""ZeRO++'s two switches, true or false, and their URL parameters."""
_MODELLED_OFFLOAD = frozenset({"device", "pin_memory"})
_BUCKETS = (
    ("reduce_bucket_size", "reduce_bucket_size", DEFAULTS.reduce_bucket_size),
    ("stage3_prefetch_bucket_size", "prefetch_bucket_size", DEFAULTS.prefetch_bucket_size),
    ("stage3_max_live_parameters", "max_live_parameters", DEFAULTS.max_live_parameters),
)


def read_deepspeed(config: Mapping[str, Any]) -> dict[str, str]:
    """The URL parameters a DeepSpeed config sets, each of `GOVERNED` ("" for the default).

    One left out was "auto" in the config, Hugging Face's placeholder: the run's own value stands.
    ZeRO++'s keys read as hpz, qwz and qgz at any stage, as the buckets are: the run is drawn at
    every stage, and ZeRO-3 shows them. MiCS's shard group (`mics_shard_size` above 0) reads as
    shard, hybrid sharding, which `read_notes` says. Raises ConfigError, naming the key and the
    value, for what DeepSpeed would refuse or the app cannot draw. Keys it does not read are listed
    by `ignored_keys`.
    """
    zero = _section(config, "zero_optimization")
    number = zero.get("stage", 0)
    if not _whole(number) or number not in STAGE_OF:
        raise ConfigError("zero_optimization.stage", number, "is not a ZeRO stage: use 0, 1, 2 or 3.")
    stage = STAGE_OF[int(number)]
    query = {"stage": stage.value, **_offload_query(zero, stage)}
    for key, parameter, default in _BUCKETS:
        if (value := zero.get(key, default)) != AUTO:
            query[parameter] = _bucket(f"zero_optimization.{key}", value, default)
    query |= _zeropp_query(zero)
    if (shard := _mics(zero)) is not None:
        query["shard"] = shard
    if (recipe := _recipe(config)) is not None:
        query["recipe"] = recipe
    if (kept := _grad_accum(config)) is not None:
        query["grad_accum"] = kept
    batch = config.get("train_micro_batch_size_per_gpu", 1)
    if batch != AUTO:
        if not _whole(batch) or not 1 <= batch <= MAX_BATCH:
            raise ConfigError(
                "train_micro_batch_size_per_gpu", batch, f"is not a whole number from 1 to {MAX_BATCH:,}."
            )
        query["batch"] = str(int(batch))
    return query


def read_notes(config: Mapping[str, Any]) -> tuple[str, ...]:
    """What the reading drew otherwise than the config says, or guessed, a sentence each, for a person."""
    notes = []
    zero = config.get("zero_optimization")
    size = zero.get("mics_shard_size") if isinstance(zero, Mapping) else None
    if _whole(size) and size > 0:
        notes.append(
            f"zero_optimization.mics_shard_size: {int(size):,} is MiCS, which DeepSpeed removed in its newest "
            f"release: drawn as hybrid sharding (shard={int(size)}), as FSDP2's HSDP does it."
        )
    if _client_optimizer(config) and _recipe(config) == RecipeName.ADAM_8BIT.value:
        notes.append(
            "No optimizer block and zero_allow_untested_optimizer: true is an optimizer passed in code, which the "
            "config does not name: drawn as bitsandbytes' 8-bit Adam (adam-8bit), the one this app passes so."
        )
    return tuple(notes)


def ignored_keys(config: Mapping[str, Any]) -> tuple[str, ...]:
    """Every key of `config` the reader does not read, dotted from the top ("zero_optimization.overlap_comm")."""
    ignored = [key for key in config if key not in _MODELLED_TOP]
    zero = config.get("zero_optimization")
    if isinstance(zero, Mapping):
        ignored += [f"zero_optimization.{key}" for key in zero if key not in _MODELLED_ZERO]
        for block in ("offload_optimizer", "offload_param"):
            if isinstance(inner := zero.get(block), Mapping):
                ignored += [f"zero_optimization.{block}.{key}" for key in inner if key not in _MODELLED_OFFLOAD]
    sections = (
        ("bf16", {"enabled", *_BF16_KEYS}),
        ("fp16", {"enabled"}),
        ("optimizer", {"type", "params"}),
        ("optimizer.params", {"momentum"}),  # SGD's, the one parameter the app writes
        ("data_types", {"grad_accum_dtype"}),
    )
    for section, known in sections:
        found: Any = config
        for part in section.split("."):
            found = found.get(part) if isinstance(found, Mapping) else None
        if isinstance(found, Mapping):
            ignored += [f"{section}.{key}" for key in found if key not in known]
    return tuple(ignored)


def _whole(value: object) -> TypeGuard[int | float]:
    # JSON has no integers of its own: 5e8 arrives as a float. A bool is an int to Python, not to JSON.
    # An int is whole as it is: turned into a float, one of 309 digits or more would overflow.
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _section(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = config.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(key, value, "should be an object ({...}).")
    return value


def _device(block: Mapping[str, Any], key: str) -> str | None:
    """A block's device: "cpu" or "nvme"; None when there is no block, or it says "none"."""
    device = block.get("device", "none")
    if device not in ("none", "cpu", "nvme"):
        raise ConfigError(f"{key}.device", device, 'is not an offload device: use "cpu", "nvme" or "none".')
    return None if device == "none" else str(device)


def _pin(block: Mapping[str, Any], key: str) -> bool:
    pin = block.get("pin_memory", False)  # DeepSpeed's default, not the app's
    if not isinstance(pin, bool):
        raise ConfigError(f"{key}.pin_memory", pin, "should be true or false.")
    return pin


def _offload_query(zero: Mapping[str, Any], stage: Stage) -> dict[str, str]:
    """offload, offload_device and pin_memory, as `Placement` would give the config back."""
    opt_key, par_key = "zero_optimization.offload_optimizer", "zero_optimization.offload_param"
    optimizer, param = _section(zero, "offload_optimizer"), _section(zero, "offload_param")
    on_opt, on_par = _device(optimizer, opt_key), _device(param, par_key)
    none = {"offload": "none", "offload_device": "", "pin_memory": "1"}
    if on_opt is None and on_par is None:
        return none
    if on_par is not None and stage is not Stage.ZERO3:
        raise ConfigError(f"{par_key}.device", on_par, f"needs ZeRO stage 3, and the stage is {ZERO_STAGE[stage]}.")
    if on_opt is None:
        raise ConfigError(f"{par_key}.device", on_par, "without offload_optimizer is not drawn here: offload both.")
    if stage is Stage.DP:
        raise ConfigError(f"{opt_key}.device", on_opt, "needs ZeRO stage 1, 2 or 3, and the stage is 0.")
    if on_opt == "nvme" and stage is not Stage.ZERO3:
        raise ConfigError(f"{opt_key}.device", on_opt, f"needs ZeRO stage 3, and the stage is {ZERO_STAGE[stage]}.")
    if on_par is not None and on_par != on_opt:
        raise ConfigError(f"{par_key}.device", on_par, f"differs from offload_optimizer's {on_opt!r}: use one device.")
    pin = _pin(optimizer, opt_key)
    if on_par is not None and _pin(param, par_key) != pin:
        raise ConfigError(f"{par_key}.pin_memory", _pin(param, par_key), "differs from offload_optimizer's.")
    if on_par is None:
        offload, device = "optimizer", "nvme" if on_opt == "nvme" else ""
    else:
        offload, device = ("nvme", "") if on_opt == "nvme" else ("optimizer+params", "")
    return {"offload": offload, "offload_device": device, "pin_memory": "1" if pin else "0"}


def _zeropp_query(zero: Mapping[str, Any]) -> dict[str, str]:
    """The hpz, qwz and qgz parameters; one left out was "auto"."""
    query = {}
    key = "zero_optimization.zero_hpz_partition_size"
    if (hpz := zero.get("zero_hpz_partition_size", 1)) != AUTO:
        # DeepSpeed takes 0 (its Field's ge=0) and turns hpZ on above 1: 0 and 1 are both off.
        if not _whole(hpz) or not 0 <= hpz <= MAX_GPUS:
            raise ConfigError(key, hpz, f"is not a whole number of cards from 0 to {MAX_GPUS:,}.")
        query["hpz"] = str(max(int(hpz), 1))
    for name, parameter in _SWITCHES:
        if (value := zero.get(name, False)) != AUTO:
            if not isinstance(value, bool):
                raise ConfigError(f"zero_optimization.{name}", value, "should be true or false.")
            query[parameter] = "1" if value else "0"
    return query


def _mics(zero: Mapping[str, Any]) -> str | None:
    """The shard parameter from MiCS's shard group: "" (every card) where it is off; None for "auto"."""
    size = zero.get("mics_shard_size", -1)  # DeepSpeed's default, off: MiCS is on above 0
    if size == AUTO:
        return None
    if not _whole(size) or size > MAX_GPUS:
        raise ConfigError(
            "zero_optimization.mics_shard_size", size, f"is not a whole number of cards up to {MAX_GPUS:,}."
        )
    return str(int(size)) if size > 0 else ""


def _bucket(key: str, value: object, default: int) -> str:
    # 0 is DeepSpeed's least: its config declares each bucket `Field(..., ge=0)`
    # (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig), and Hugging Face's ZeRO-3 configs write
    # stage3_max_live_parameters: 0. The link says 0 as it is (the field takes it, app/web/fields.py).
    if not _whole(value) or not 0 <= value < MAX_ELEMENTS:
        raise ConfigError(key, value, "is not a whole number of elements (below 1e16).")
    count = int(value)
    return "" if count == default else str(count)  # the default: a shorter link


def _recipe(config: Mapping[str, Any]) -> str | None:
    """The recipe the precision and the optimizer say; None when the precision is left to the launcher ("auto").

    Read as the exports write each recipe (`deepspeed_config`): bf16 with Adam is mixed-adam, and with
    `bf16_master_weights_and_grads` and `bf16_optimizer_states` pure bf16 Adam (bf16-adam); SGD is
    mixed-sgd; no optimizer with `zero_allow_untested_optimizer: true` (a client optimizer) and bf16 is
    adam-8bit, which `read_notes` says. fp16 keeps bf16's bytes. fp8's multiplies and QLoRA's NF4 weights
    are the model's, not the config's: they read as the Adam recipe of their bands (docs/export.md).
    """
    enabled = {}
    for section in ("bf16", "fp16"):
        value = _section(config, section).get("enabled", False)
        if value != AUTO and not isinstance(value, bool):
            raise ConfigError(f"{section}.enabled", value, 'should be true, false or "auto".')
        enabled[section] = value
    if enabled["bf16"] is True and enabled["fp16"] is True:
        raise ConfigError("fp16.enabled", True, "and bf16.enabled are both true: choose one.")
    low = True in enabled.values()
    master, states = _bf16_switches(config, low)
    optimizer = _section(config, "optimizer").get("type", "Adam")
    if not isinstance(optimizer, str) or optimizer.lower() not in ADAM_TYPES | {"sgd"}:
        raise ConfigError(
            "optimizer.type",
            optimizer,
            "is not drawn here: use Adam, AdamW or SGD (8-bit Adam is passed in code).",
        )
    if AUTO in enabled.values() and not low:
        return None
    if optimizer.lower() == "sgd":
        if not low:
            raise ConfigError(
                "optimizer.type", optimizer, "is drawn in mixed precision alone (mixed-sgd): enable bf16."
            )
        return RecipeName.MIXED_SGD.value
    if not low:
        return RecipeName.FP32_ADAM.value
    if master and states:
        return RecipeName.BF16_ADAM.value
    if master or states:
        # bf16 master with fp32 moments is QLoRA's adapters, whose NF4 weights the config cannot say.
        return None
    if _client_optimizer(config):
        return RecipeName.ADAM_8BIT.value
    return RecipeName.MIXED_ADAM.value


def _bf16_switches(config: Mapping[str, Any], low: bool) -> tuple[bool, bool]:
    """`bf16.bf16_master_weights_and_grads` and `bf16.bf16_optimizer_states`, each true or false (absent)."""
    bf16 = _section(config, "bf16")
    switches = []
    for key in _BF16_KEYS:
        value = bf16.get(key, False)
        if not isinstance(value, bool):
            raise ConfigError(f"bf16.{key}", value, "should be true or false.")
        switches.append(value and low)
    return switches[0], switches[1]


def _client_optimizer(config: Mapping[str, Any]) -> bool:
    """No optimizer block, and ZeRO told it may take one of the user's own: an optimizer passed in code."""
    return "optimizer" not in config and config.get("zero_allow_untested_optimizer") is True


def _grad_accum(config: Mapping[str, Any]) -> str | None:
    """The grad_accum parameter from `data_types.grad_accum_dtype`: "fp32", or "bf16" (the recipe's band, the default).

    A choice, so never blank; absent, DeepSpeed's accumulation is the app's default.
    """
    value = _section(config, "data_types").get("grad_accum_dtype", "bf16")
    if value == AUTO:
        return None
    if value not in ("fp32", "bf16", "fp16"):
        raise ConfigError("data_types.grad_accum_dtype", value, 'is not a gradient format: use "fp32" or "bf16".')
    return GradAccum.FP32.value if value == "fp32" else GradAccum.BF16.value
