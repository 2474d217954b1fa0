"""A run written as a DeepSpeed config and an FSDP2 snippet, and a DeepSpeed config read back."""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any

import pytest

from app.domain.accounting import Setup
from app.domain.configs import ConfigError, deepspeed_config, fsdp2_snippet, ignored_keys, read_deepspeed
from app.domain.overheads import DEFAULTS
from app.domain.placement import Device, Offload, Placement
from app.domain.recipes import RECIPES, RecipeName
from app.domain.sizing import Run
from app.domain.stages import Stage


def run_with(
    offload: Offload = Offload.NONE,
    device: Device = Device.CPU,
    pin: bool = True,
    recipe: RecipeName = RecipeName.MIXED_ADAM,
    batch: int = 1,
) -> Run:
    return Run(recipe=RECIPES[recipe], batch=batch, setup=Setup(placement=Placement(offload, device, pin)))


ADAM = {"type": "Adam"}
BF16 = {"enabled": True}
CPU = {"device": "cpu", "pin_memory": True}
NVME = {"device": "nvme", "pin_memory": True, "nvme_path": "/local_nvme"}
Z3 = {"stage3_prefetch_bucket_size": 50_000_000, "stage3_max_live_parameters": 1_000_000_000}


def written(zero: dict[str, Any], batch: int = 1, bf16: bool = True, optimizer: bool = True) -> dict[str, Any]:
    config: dict[str, Any] = {"train_micro_batch_size_per_gpu": batch, "bf16": {"enabled": bf16}}
    config["zero_optimization"] = zero
    if optimizer:
        config["optimizer"] = ADAM
    return config


@pytest.mark.parametrize(
    ("stage", "run", "expected"),
    [
        # No offload: the stage and the buckets DeepSpeed reads at that stage.
        (Stage.DP, run_with(), written({"stage": 0})),
        (Stage.ZERO1, run_with(), written({"stage": 1, "reduce_bucket_size": 500_000_000})),
        (Stage.ZERO2, run_with(), written({"stage": 2, "reduce_bucket_size": 500_000_000})),
        (Stage.ZERO3, run_with(), written({"stage": 3, "reduce_bucket_size": 500_000_000, **Z3})),
        # Data parallelism offloads nothing, whatever was asked.
        (Stage.DP, run_with(Offload.NVME), written({"stage": 0})),
        # ZeRO-1 and 2 offload the optimizer, to the CPU even when NVMe was asked: NVMe needs ZeRO-3.
        (
            Stage.ZERO1,
            run_with(Offload.OPTIMIZER, pin=False),
            written(
                {
                    "stage": 1,
                    "reduce_bucket_size": 500_000_000,
                    "offload_optimizer": {"device": "cpu", "pin_memory": False},
                }
            ),
        ),
        (
            Stage.ZERO2,
            run_with(Offload.NVME),
            written({"stage": 2, "reduce_bucket_size": 500_000_000, "offload_optimizer": CPU}),
        ),
        # The weights only at ZeRO-3.
        (
            Stage.ZERO2,
            run_with(Offload.OPTIMIZER_PARAMS),
            written({"stage": 2, "reduce_bucket_size": 500_000_000, "offload_optimizer": CPU}),
        ),
        (
            Stage.ZERO3,
            run_with(Offload.OPTIMIZER_PARAMS),
            written(
                {"stage": 3, "reduce_bucket_size": 500_000_000, "offload_optimizer": CPU, "offload_param": CPU, **Z3}
            ),
        ),
        (
            Stage.ZERO3,
            run_with(Offload.OPTIMIZER, Device.NVME),
            written({"stage": 3, "reduce_bucket_size": 500_000_000, "offload_optimizer": NVME, **Z3}),
        ),
        (
            Stage.ZERO3,
            run_with(Offload.NVME),
            written(
                {"stage": 3, "reduce_bucket_size": 500_000_000, "offload_optimizer": NVME, "offload_param": NVME, **Z3}
            ),
        ),
        # fp32 Adam: no bf16; batch=0 (no activations) writes DeepSpeed's least micro-batch, 1.
        (Stage.DP, run_with(recipe=RecipeName.FP32_ADAM, batch=0), written({"stage": 0}, bf16=False)),
        (Stage.DP, run_with(batch=12), written({"stage": 0}, batch=12)),
        # SGD has no DeepSpeed type: the user's own optimizer, which ZeRO must be told it may use.
        (
            Stage.ZERO1,
            run_with(recipe=RecipeName.MIXED_SGD),
            {**written({"stage": 1, "reduce_bucket_size": 500_000_000}, optimizer=False)}
            | {"zero_allow_untested_optimizer": True},
        ),
        (Stage.DP, run_with(recipe=RecipeName.ADAM_8BIT), written({"stage": 0}, optimizer=False)),
    ],
)
def test_deepspeed_config_per_stage_and_offload(stage: Stage, run: Run, expected: dict[str, Any]) -> None:
    assert deepspeed_config(stage, run) == expected


def test_the_buckets_are_the_runs_settings() -> None:
    settings = replace(DEFAULTS, reduce_bucket_size=2, prefetch_bucket_size=3, max_live_parameters=4)
    zero = deepspeed_config(Stage.ZERO3, replace(run_with(), overheads=settings))["zero_optimization"]
    assert (zero["reduce_bucket_size"], zero["stage3_prefetch_bucket_size"], zero["stage3_max_live_parameters"]) == (
        2,
        3,
        4,
    )


def _calls(snippet: str) -> list[ast.Call]:
    calls = [node for node in ast.walk(ast.parse(snippet)) if isinstance(node, ast.Call)]
    return sorted(calls, key=lambda call: (call.lineno, call.col_offset))  # in reading order


def _keywords(call: ast.Call) -> dict[str, str]:
    return {str(k.arg): ast.unparse(k.value) for k in call.keywords}


@pytest.mark.parametrize(("stage", "reshard"), [(Stage.ZERO2, "False"), (Stage.ZERO3, "True")])
def test_fsdp2_shards_each_block_then_the_model(stage: Stage, reshard: str) -> None:
    snippet = fsdp2_snippet(stage, run_with(Offload.OPTIMIZER, pin=False))
    shards = [call for call in _calls(snippet) if ast.unparse(call.func) == "fully_shard"]
    assert [ast.unparse(call.args[0]) for call in shards] == ["block", "model"]
    for call in shards:
        assert _keywords(call) == {
            "reshard_after_forward": reshard,
            "mp_policy": "mp_policy",
            "offload_policy": "offload_policy",
        }
    policies = {ast.unparse(c.func): _keywords(c) for c in _calls(snippet)}
    assert policies["MixedPrecisionPolicy"] == {"param_dtype": "torch.bfloat16", "reduce_dtype": "torch.float32"}
    assert policies["CPUOffloadPolicy"] == {"pin_memory": "False"}
    assert "from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy, CPUOffloadPolicy" in snippet


def test_fsdp2_without_offload_or_mixed_precision_names_neither() -> None:
    snippet = fsdp2_snippet(Stage.ZERO3, run_with(recipe=RecipeName.FP32_ADAM))
    assert "from torch.distributed.fsdp import fully_shard\n" in snippet
    assert "Policy(" not in snippet
    assert "# fp32 weights: no MixedPrecisionPolicy." in snippet


def test_fsdp2_says_it_cannot_offload_to_nvme() -> None:
    snippet = fsdp2_snippet(Stage.ZERO3, run_with(Offload.NVME))
    assert "CPUOffloadPolicy(pin_memory=True)" in snippet
    assert "# FSDP2 cannot offload to NVMe" in snippet


@pytest.mark.parametrize(
    ("stage", "says"),
    [(Stage.DP, "# Data parallelism has no fully_shard"), (Stage.ZERO1, "# ZeRO-1 has no fully_shard")],
)
def test_fsdp2_has_no_fully_shard_below_zero2(stage: Stage, says: str) -> None:
    snippet = fsdp2_snippet(stage, run_with(Offload.OPTIMIZER))
    assert says in snippet
    assert "fully_shard(" not in snippet
    ast.parse(snippet)  # still Python


@pytest.mark.slow
# torch without numpy says so on import, and ZeroRedundancyOptimizer scripts a function with torch.jit.
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")
@pytest.mark.parametrize("stage", list(Stage))
def test_fsdp2_imports_exist_in_the_installed_torch(stage: Stage) -> None:
    imports = [line for line in fsdp2_snippet(stage, run_with(Offload.OPTIMIZER)).splitlines() if "import" in line]
    exec("\n".join(imports), {})  # our own snippet's import lines


# --- reading -------------------------------------------------------------------------------------

NOTHING = {"offload": "none", "offload_device": "", "pin_memory": "1"}
BUCKETS = {"reduce_bucket_size": "", "prefetch_bucket_size": "", "max_live_parameters": ""}


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # Nothing: DeepSpeed's defaults, stage 0 in fp32 with a micro-batch of 1.
        ({}, {"stage": "dp", **NOTHING, **BUCKETS, "recipe": "fp32-adam", "batch": "1"}),
        (
            {"zero_optimization": {"stage": 2, "reduce_bucket_size": 2e8}, "bf16": {"enabled": True}},
            {"stage": "zero2", **NOTHING, **BUCKETS, "reduce_bucket_size": "200000000", "recipe": "mixed-adam"}
            | {"batch": "1"},
        ),
        # fp16 keeps bf16's bytes; AdamW Adam's moments. DeepSpeed's pin_memory defaults to false.
        (
            {
                "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}},
                "fp16": {"enabled": True},
                "optimizer": {"type": "AdamW", "params": {"lr": 1e-4}},
                "train_micro_batch_size_per_gpu": 4,
            },
            {"stage": "zero3", "offload": "optimizer", "offload_device": "", "pin_memory": "0", **BUCKETS}
            | {"recipe": "mixed-adam", "batch": "4"},
        ),
        (
            {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "pin_memory": True}}},
            {"stage": "zero3", "offload": "optimizer", "offload_device": "nvme", "pin_memory": "1", **BUCKETS}
            | {"recipe": "fp32-adam", "batch": "1"},
        ),
        (
            {
                "zero_optimization": {
                    "stage": 3,
                    "offload_optimizer": {"device": "nvme"},
                    "offload_param": {"device": "nvme"},
                }
            },
            {"stage": "zero3", "offload": "nvme", "offload_device": "", "pin_memory": "0", **BUCKETS}
            | {"recipe": "fp32-adam", "batch": "1"},
        ),
        # "auto" (Hugging Face's) leaves the run's own value: the parameter is not answered.
        (
            {
                "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"},
                "bf16": {"enabled": "auto"},
                "train_micro_batch_size_per_gpu": "auto",
            },
            {"stage": "zero3", **NOTHING, "max_live_parameters": ""},
        ),
        # A device of "none" is no offload.
        (
            {"zero_optimization": {"stage": 1, "offload_optimizer": {"device": "none"}}, "bf16": {"enabled": True}},
            {"stage": "zero1", **NOTHING, **BUCKETS, "recipe": "mixed-adam", "batch": "1"},
        ),
    ],
)
def test_read_deepspeed(config: dict[str, Any], expected: dict[str, str]) -> None:
    assert read_deepspeed(config) == expected


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"zero_optimization": {"stage": 4}}, "zero_optimization.stage: 4 is not a ZeRO stage"),
        ({"zero_optimization": {"stage": -1}}, "zero_optimization.stage: -1 is not a ZeRO stage"),
        ({"zero_optimization": {"stage": "3"}}, 'zero_optimization.stage: "3" is not a ZeRO stage'),
        ({"zero_optimization": {"stage": True}}, "zero_optimization.stage: true is not a ZeRO stage"),
        ({"zero_optimization": {"stage": 2.5}}, "zero_optimization.stage: 2.5 is not a ZeRO stage"),
        ({"zero_optimization": []}, "zero_optimization: [] should be an object"),
        (
            {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "gpu"}}},
            'zero_optimization.offload_optimizer.device: "gpu" is not an offload device',
        ),
        (
            {
                "zero_optimization": {
                    "stage": 2,
                    "offload_optimizer": {"device": "cpu"},
                    "offload_param": {"device": "cpu"},
                }
            },
            'zero_optimization.offload_param.device: "cpu" needs ZeRO stage 3, and the stage is 2',
        ),
        (
            {"zero_optimization": {"stage": 2, "offload_optimizer": {"device": "nvme"}}},
            'zero_optimization.offload_optimizer.device: "nvme" needs ZeRO stage 3, and the stage is 2',
        ),
        (
            {"zero_optimization": {"stage": 0, "offload_optimizer": {"device": "cpu"}}},
            'zero_optimization.offload_optimizer.device: "cpu" needs ZeRO stage 1, 2 or 3',
        ),
        (
            {"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}},
            'zero_optimization.offload_param.device: "cpu" without offload_optimizer',
        ),
        (
            {
                "zero_optimization": {
                    "stage": 3,
                    "offload_optimizer": {"device": "cpu"},
                    "offload_param": {"device": "nvme"},
                }
            },
            'zero_optimization.offload_param.device: "nvme" differs',
        ),
        (
            {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": "yes"}}},
            'zero_optimization.offload_optimizer.pin_memory: "yes" should be true or false',
        ),
        (
            {"zero_optimization": {"stage": 1, "reduce_bucket_size": -5}},
            "zero_optimization.reduce_bucket_size: -5 is not a whole number of elements",
        ),
        (
            {"zero_optimization": {"stage": 3, "stage3_max_live_parameters": 1e20}},
            "zero_optimization.stage3_max_live_parameters: 1e+20 is not a whole number",
        ),
        ({"bf16": {"enabled": 1}}, "bf16.enabled: 1 should be true, false or"),
        ({"bf16": True}, "bf16: true should be an object"),
        ({"bf16": {"enabled": True}, "fp16": {"enabled": True}}, "fp16.enabled: true and bf16.enabled are both true"),
        ({"optimizer": {"type": "Lion"}}, 'optimizer.type: "Lion" is not drawn here'),
        ({"train_micro_batch_size_per_gpu": 0}, "train_micro_batch_size_per_gpu: 0 is not a whole number from 1"),
        ({"train_micro_batch_size_per_gpu": 10**6}, "train_micro_batch_size_per_gpu: 1000000 is not a whole number"),
    ],
)
def test_a_bad_config_is_refused_naming_the_key_and_the_value(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        read_deepspeed(config)
    assert str(raised.value).startswith(message)
    assert isinstance(raised.value, ValueError)
    assert message.startswith(raised.value.key)


def test_a_long_value_is_shortened_in_the_message() -> None:
    with pytest.raises(ConfigError, match="…") as raised:
        read_deepspeed({"optimizer": {"type": "x" * 500}})
    assert len(str(raised.value)) < 150


def test_keys_not_read_are_listed_dotted() -> None:
    config = {
        "gradient_clipping": 1.0,
        "zero_optimization": {
            "stage": 3,
            "overlap_comm": True,
            "offload_optimizer": {"device": "nvme", "nvme_path": "/nvme"},
            "offload_param": {"device": "nvme", "buffer_count": 5},
        },
        "bf16": {"enabled": True, "immediate_grad_update": True},
        "optimizer": {"type": "Adam", "params": {"lr": 1e-4}},
        "train_micro_batch_size_per_gpu": 2,
    }
    assert ignored_keys(config) == (
        "gradient_clipping",
        "zero_optimization.overlap_comm",
        "zero_optimization.offload_optimizer.nvme_path",
        "zero_optimization.offload_param.buffer_count",
        "bf16.immediate_grad_update",
        "optimizer.params",
    )
    read_deepspeed(config)  # and they change nothing


@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("offload", list(Offload))
def test_what_is_written_reads_back_as_the_placement_at_that_stage(stage: Stage, offload: Offload) -> None:
    run = run_with(offload, pin=False)
    read = read_deepspeed(deepspeed_config(stage, run))
    assert read["stage"] == stage.value
    device = Device(read["offload_device"] or "cpu")
    again = Placement(Offload(read["offload"]), device, read["pin_memory"] == "1")
    placement = run.setup.placement
    assert again.moved(stage) == placement.moved(stage)
    assert again.home(stage) == placement.home(stage) or not placement.moved(stage)


# DeepSpeed takes 0 for each bucket (its config's Field(..., ge=0)), and Hugging Face's ZeRO-3 configs
# write stage3_max_live_parameters: 0: the run read keeps the 0, as JSON's integer or its float.
@pytest.mark.parametrize(
    ("key", "parameter"),
    [
        ("reduce_bucket_size", "reduce_bucket_size"),
        ("stage3_prefetch_bucket_size", "prefetch_bucket_size"),
        ("stage3_max_live_parameters", "max_live_parameters"),
    ],
)
@pytest.mark.parametrize("zero", [0, 0.0])
def test_a_bucket_of_0_reads_as_0(key: str, parameter: str, zero: float) -> None:
    read = read_deepspeed({"zero_optimization": {"stage": 3, key: zero}})
    assert read[parameter] == "0"


def test_a_bucket_of_0_written_reads_back_as_0() -> None:
    settings = replace(DEFAULTS, reduce_bucket_size=0, prefetch_bucket_size=0, max_live_parameters=0)
    config = deepspeed_config(Stage.ZERO3, replace(run_with(), overheads=settings))
    read = read_deepspeed(config)
    assert (read["reduce_bucket_size"], read["prefetch_bucket_size"], read["max_live_parameters"]) == ("0", "0", "0")


# JSON's integers have no bound, and Python reads them whole: one of 401 digits is more than a float
# holds (about 1.8e308), and must be refused as too large, like 1e20, not crash turning it into one.
HUGE = 10**400
SHOWN_HUGE = "1" + "0" * 38 + "…"  # ConfigError's value, cut at 40 characters


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"zero_optimization": {"stage": HUGE}}, f"zero_optimization.stage: {SHOWN_HUGE} is not a ZeRO stage"),
        (
            {"zero_optimization": {"stage": 1, "reduce_bucket_size": HUGE}},
            f"zero_optimization.reduce_bucket_size: {SHOWN_HUGE} is not a whole number of elements",
        ),
        (
            {"zero_optimization": {"stage": 3, "stage3_max_live_parameters": -HUGE}},
            f"zero_optimization.stage3_max_live_parameters: -{SHOWN_HUGE[:-2]}… is not a whole number",
        ),
        (
            {"train_micro_batch_size_per_gpu": HUGE},
            f"train_micro_batch_size_per_gpu: {SHOWN_HUGE} is not a whole number from 1",
        ),
    ],
)
def test_an_integer_too_large_for_a_float_is_refused_by_name(config: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        read_deepspeed(config)
    assert str(raised.value).startswith(message)
