"""A run as a DeepSpeed config or an FSDP2 snippet to paste, and a DeepSpeed config read back as a run.

The export says what the domain draws, no more: offload follows `Placement.moved` and
`Placement.home` stage by stage (data parallelism offloads nothing, the weights only at ZeRO-3,
NVMe only at ZeRO-3), so a config never asks DeepSpeed for what the page does not show. The key
names are DeepSpeed's (its `zero_optimization` section and `offload_optimizer`/`offload_param`
blocks, `deepspeed/runtime/zero/config.py` and `offload_config.py`); docs/export.md, "A training
config", lists them.

The reader answers with URL parameters, as strings, so the web layer validates them with the same
query model as a link. It reads only what changes the picture and lists every other key it met.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeGuard

from app.domain.overheads import DEFAULTS
from app.domain.placement import Home
from app.domain.recipes import Band, RecipeName
from app.domain.sizing import MAX_BATCH, Run
from app.domain.stages import Stage

ZERO_STAGE = {Stage.DP: 0, Stage.ZERO1: 1, Stage.ZERO2: 2, Stage.ZERO3: 3}
STAGE_OF = {number: stage for stage, number in ZERO_STAGE.items()}

NVME_PATH = "/local_nvme"
"""DeepSpeed refuses NVMe offload without a path; its documentation's example, to be edited."""
ADAM_RECIPES = frozenset({RecipeName.MIXED_ADAM, RecipeName.FP32_ADAM, RecipeName.BF16_ADAM})
"""Recipes whose optimizer DeepSpeed has a type for; SGD and 8-bit Adam are the user's own optimizer."""
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
    "batch",
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


# --- writing -------------------------------------------------------------------------------------


def deepspeed_config(stage: Stage, run: Run) -> dict[str, Any]:
    """The DeepSpeed config of `run` under `stage`.

    batch=0 (no activations counted) writes a micro-batch of 1, the least DeepSpeed accepts.
    """
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
    config: dict[str, Any] = {
        "train_micro_batch_size_per_gpu": max(run.batch, 1),
        "bf16": {"enabled": _bf16(run)},
        "zero_optimization": zero,
    }
    if RecipeName(run.recipe.name) in ADAM_RECIPES:
        config["optimizer"] = {"type": "Adam"}
    elif stage is not Stage.DP:
        # ZeRO refuses an optimizer of the user's own unless told it may (DeepSpeed's engine asserts).
        config["zero_allow_untested_optimizer"] = True
    return config


def _offload(device: str, pin_memory: bool) -> dict[str, Any]:
    block: dict[str, Any] = {"device": device, "pin_memory": pin_memory}
    if device == Home.NVME.value:
        block["nvme_path"] = NVME_PATH
    return block


def _bf16(run: Run) -> bool:
    # Two-byte weights are bf16 here (the recipes' weights band); four are fp32, no mixed precision.
    return run.recipe.nbytes(Band.WEIGHTS) == 2


def fsdp2_snippet(stage: Stage, run: Run) -> str:
    """PyTorch FSDP2 code for `run` under `stage`: `fully_shard` for ZeRO-2 and 3, a comment for the others."""
    title = f"# {stage.info.title} for this run, in PyTorch."
    if stage is Stage.DP:
        lines = [
            title,
            "# Data parallelism has no fully_shard: every card keeps everything. In PyTorch it is DDP.",
            "from torch.nn.parallel import DistributedDataParallel",
            "",
            "model = DistributedDataParallel(model)",
        ]
    elif stage is Stage.ZERO1:
        lines = [
            title,
            "# ZeRO-1 has no fully_shard: FSDP2 shards the gradients too (ZeRO-2) or everything (ZeRO-3).",
            "# PyTorch's ZeRO-1 is DDP with ZeroRedundancyOptimizer, which splits the optimizer state alone.",
            "import torch",
            "from torch.distributed.optim import ZeroRedundancyOptimizer",
            "from torch.nn.parallel import DistributedDataParallel",
            "",
            "model = DistributedDataParallel(model)",
            "optimizer = ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW)",
        ]
    else:
        lines = _fully_shard(stage, run, title)
    return "\n".join(lines) + "\n"


def _fully_shard(stage: Stage, run: Run, title: str) -> list[str]:
    """ZeRO-2 is fully_shard keeping the gathered weights after the forward; ZeRO-3 frees them."""
    placement = run.setup.placement
    imports, policies, notes = ["fully_shard"], [], []
    options = [f"reshard_after_forward={stage is Stage.ZERO3}"]
    if _bf16(run):
        imports.append("MixedPrecisionPolicy")
        policies.append("mp_policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)")
        options.append("mp_policy=mp_policy")
    else:
        notes.append("# fp32 weights: no MixedPrecisionPolicy.")
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
        "import torch",
        f"from torch.distributed.fsdp import {', '.join(imports)}",
        "",
        *policies,
        "# Each block first, then the whole model, so each block is gathered and freed on its own.",
        "for block in model.layers:",
        f"    fully_shard(block, {args})",
        f"fully_shard(model, {args})",
    ]


# --- reading -------------------------------------------------------------------------------------

_MODELLED_TOP = frozenset({"zero_optimization", "bf16", "fp16", "optimizer", "train_micro_batch_size_per_gpu"})
_MODELLED_ZERO = frozenset(
    {"stage", "offload_optimizer", "offload_param", "reduce_bucket_size"}
    | {"stage3_prefetch_bucket_size", "stage3_max_live_parameters"}
)
_MODELLED_OFFLOAD = frozenset({"device", "pin_memory"})
_BUCKETS = (
    ("reduce_bucket_size", "reduce_bucket_size", DEFAULTS.reduce_bucket_size),
    ("stage3_prefetch_bucket_size", "prefetch_bucket_size", DEFAULTS.prefetch_bucket_size),
    ("stage3_max_live_parameters", "max_live_parameters", DEFAULTS.max_live_parameters),
)


def read_deepspeed(config: Mapping[str, Any]) -> dict[str, str]:
    """The URL parameters a DeepSpeed config sets, each of `GOVERNED` ("" for the default).

    One left out was "auto" in the config, Hugging Face's placeholder: the run's own value stands.
    Raises ConfigError, naming the key and the value, for what DeepSpeed would refuse or the app
    cannot draw. Keys it does not read are listed by `ignored_keys`.
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
    if (recipe := _recipe(config)) is not None:
        query["recipe"] = recipe
    batch = config.get("train_micro_batch_size_per_gpu", 1)
    if batch != AUTO:
        if not _whole(batch) or not 1 <= batch <= MAX_BATCH:
            raise ConfigError(
                "train_micro_batch_size_per_gpu", batch, f"is not a whole number from 1 to {MAX_BATCH:,}."
            )
        query["batch"] = str(int(batch))
    return query


def ignored_keys(config: Mapping[str, Any]) -> tuple[str, ...]:
    """Every key of `config` the reader does not read, dotted from the top ("zero_optimization.overlap_comm")."""
    ignored = [key for key in config if key not in _MODELLED_TOP]
    zero = config.get("zero_optimization")
    if isinstance(zero, Mapping):
        ignored += [f"zero_optimization.{key}" for key in zero if key not in _MODELLED_ZERO]
        for block in ("offload_optimizer", "offload_param"):
            if isinstance(inner := zero.get(block), Mapping):
                ignored += [f"zero_optimization.{block}.{key}" for key in inner if key not in _MODELLED_OFFLOAD]
    for section, known in (("bf16", {"enabled"}), ("fp16", {"enabled"}), ("optimizer", {"type"})):
        if isinstance(inner := config.get(section), Mapping):
            ignored += [f"{section}.{key}" for key in inner if key not in known]
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


def _bucket(key: str, value: object, default: int) -> str:
    # 0 is DeepSpeed's least: its config declares each bucket `Field(..., ge=0)`
    # (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig), and Hugging Face's ZeRO-3 configs write
    # stage3_max_live_parameters: 0. The link says 0 as it is (the field takes it, app/web/fields.py).
    if not _whole(value) or not 0 <= value < MAX_ELEMENTS:
        raise ConfigError(key, value, "is not a whole number of elements (below 1e16).")
    count = int(value)
    return "" if count == default else str(count)  # the default: a shorter link


def _recipe(config: Mapping[str, Any]) -> str | None:
    """mixed-adam or fp32-adam; None when the precision is left to the launcher ("auto")."""
    enabled = {}
    for section in ("bf16", "fp16"):
        value = _section(config, section).get("enabled", False)
        if value != AUTO and not isinstance(value, bool):
            raise ConfigError(f"{section}.enabled", value, 'should be true, false or "auto".')
        enabled[section] = value
    if enabled["bf16"] is True and enabled["fp16"] is True:
        raise ConfigError("fp16.enabled", True, "and bf16.enabled are both true: choose one.")
    optimizer = _section(config, "optimizer").get("type", "Adam")
    if not isinstance(optimizer, str) or optimizer.lower() not in ADAM_TYPES:
        raise ConfigError("optimizer.type", optimizer, "is not drawn here: the recipes are Adam's (Adam or AdamW).")
    if True in enabled.values():  # fp16 keeps the same bytes as bf16: 2-byte weights, an fp32 master copy
        return RecipeName.MIXED_ADAM.value
    if AUTO in enabled.values():
        return None
    return RecipeName.FP32_ADAM.value
