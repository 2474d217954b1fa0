"""A run written as a DeepSpeed config and an FSDP2 snippet, and a DeepSpeed config read back."""

from __future__ import annotations

import ast
from dataclasses import replace
from typing import Any

import pytest

from app.domain.accounting import Setup
from app.domain.configs import (
    ConfigError,
    NoConfig,
    deepspeed_config,
    deepspeed_refused,
    fsdp2_snippet,
    ignored_keys,
    read_deepspeed,
    read_notes,
)
from app.domain.overheads import DEFAULTS
from app.domain.placement import Device, Offload, Placement
from app.domain.recipes import BF16 as BF16_TYPE
from app.domain.recipes import (
    FP8,
    MIXED_ADAM,
    RECIPES,
    Band,
    BandSpec,
    GradAccum,
    Optimizer,
    Recipe,
    RecipeName,
    custom_recipe,
    grad_accum,
)
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
        # SGD is torch.optim's, by name, which ZeRO must be told it may use.
        (
            Stage.ZERO1,
            run_with(recipe=RecipeName.MIXED_SGD),
            {**written({"stage": 1, "reduce_bucket_size": 500_000_000}, optimizer=False)}
            | {"optimizer": {"type": "SGD", "params": {"momentum": 0.9}}, "zero_allow_untested_optimizer": True},
        ),
        # bitsandbytes' 8-bit Adam is passed in code: no optimizer block, and ZeRO told it may, at every stage.
        (
            Stage.DP,
            run_with(recipe=RecipeName.ADAM_8BIT),
            written({"stage": 0}, optimizer=False) | {"zero_allow_untested_optimizer": True},
        ),
        # grad_accum=fp32: DeepSpeed's data_types.grad_accum_dtype.
        (
            Stage.ZERO2,
            Run(recipe=grad_accum(MIXED_ADAM, GradAccum.FP32)),
            written({"stage": 2, "reduce_bucket_size": 500_000_000}) | {"data_types": {"grad_accum_dtype": "fp32"}},
        ),
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


def zeropp(hpz: int = 1, qwz: bool = False, qgz: bool = False, gpus: int = 16, nodes: int = 2) -> Run:
    """A run with ZeRO++ on `gpus` cards in `nodes` nodes, mixed-precision Adam, a micro-batch of 1."""
    return Run(gpus=gpus, nodes=nodes, batch=1, setup=Setup(hpz=hpz), qwz=qwz, qgz=qgz)


def hybrid(gpus: int = 8, nodes: int = 2, shard: int = 4, recipe: RecipeName = RecipeName.MIXED_ADAM) -> Run:
    """A run whose states are split across shard groups of `shard` cards."""
    return Run(gpus=gpus, nodes=nodes, shard_size=shard, recipe=RECIPES[recipe], batch=1)


Z3_BUCKETS = {"stage": 3, "reduce_bucket_size": 500_000_000, **Z3}


@pytest.mark.parametrize(
    ("stage", "run", "expected"),
    [
        # 16 cards in 2 nodes of 8: hpZ's copy across a node's 8, int8 weights and int4 gradients on the wire.
        (
            Stage.ZERO3,
            zeropp(8, qwz=True, qgz=True),
            written(
                Z3_BUCKETS
                | {"zero_hpz_partition_size": 8, "zero_quantized_weights": True, "zero_quantized_gradients": True}
            ),
        ),
        # Each on its own; what is off is left to DeepSpeed's default (1, false, false).
        (Stage.ZERO3, zeropp(8), written(Z3_BUCKETS | {"zero_hpz_partition_size": 8})),
        (Stage.ZERO3, zeropp(qwz=True), written(Z3_BUCKETS | {"zero_quantized_weights": True})),
        (Stage.ZERO3, zeropp(qgz=True), written(Z3_BUCKETS | {"zero_quantized_gradients": True})),
        (
            Stage.ZERO3,
            zeropp(4, qgz=True),
            written(Z3_BUCKETS | {"zero_hpz_partition_size": 4, "zero_quantized_gradients": True}),
        ),
        # DeepSpeed reads ZeRO++ at ZeRO-3 alone: below it, the stage's config as it was.
        (Stage.ZERO2, zeropp(8, qwz=True, qgz=True), written({"stage": 2, "reduce_bucket_size": 500_000_000})),
        (Stage.ZERO1, zeropp(8, qwz=True, qgz=True), written({"stage": 1, "reduce_bucket_size": 500_000_000})),
        (Stage.DP, zeropp(8, qwz=True, qgz=True), written({"stage": 0})),
    ],
)
def test_zeropp_is_written_in_zero_optimization_at_zero3(stage: Stage, run: Run, expected: dict[str, Any]) -> None:
    assert deepspeed_config(stage, run) == expected


@pytest.mark.parametrize("stage", [Stage.ZERO1, Stage.ZERO2, Stage.ZERO3])
@pytest.mark.parametrize(
    ("run", "says"),
    [
        # 8 cards in 2 nodes, a shard group of 4: 8 / 4 = 2 groups.
        (hybrid(), "shard=4 is hybrid sharding (the state split across 4 cards, kept whole by each of 2 groups)"),
        # 16 cards in 4 nodes, a shard group of 2 inside each: 16 / 2 = 8 groups.
        (
            hybrid(16, 4, 2),
            "shard=2 is hybrid sharding (the state split across 2 cards, kept whole by each of 8 groups)",
        ),
    ],
)
def test_hybrid_sharding_has_no_deepspeed_config(stage: Stage, run: Run, says: str) -> None:
    with pytest.raises(NoConfig) as raised:
        deepspeed_config(stage, run)
    message = str(raised.value)
    assert message.startswith(says)
    assert "MiCS (mics_shard_size) was removed" in message
    assert message.endswith("Use FSDP2 instead: its 2-D device mesh (HSDP) splits the state the same way.")
    assert raised.value.parameter == "shard"
    assert isinstance(raised.value, ValueError)


def test_data_parallelism_splits_nothing_so_its_config_is_the_same_with_shard_groups() -> None:
    assert deepspeed_config(Stage.DP, hybrid()) == written({"stage": 0})


@pytest.mark.parametrize("stage", list(Stage))
def test_one_shard_group_of_every_card_is_no_hybrid(stage: Stage) -> None:
    whole = hybrid(8, 2, 8)  # shard=8 on 8 cards: one group, ZeRO as it is
    assert deepspeed_config(stage, whole) == deepspeed_config(stage, replace(whole, shard_size=None))
    assert fsdp2_snippet(stage, whole) == fsdp2_snippet(stage, replace(whole, shard_size=None))


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
    # The gradients reduced in the recipe's bf16: grad_accum=fp32 reduces them in fp32 (the property test).
    assert policies["MixedPrecisionPolicy"] == {"param_dtype": "torch.bfloat16", "reduce_dtype": "torch.bfloat16"}
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


def _call(snippet: str, name: str) -> ast.Call:
    (call,) = [c for c in _calls(snippet) if ast.unparse(c.func) == name]
    return call


@pytest.mark.parametrize(
    ("run", "mesh"),
    [
        # 2 nodes of 4, a shard group of 4 (a node): 8 / 4 = 2 groups of 4.
        (hybrid(8, 2, 4), "(2, 4)"),
        # 2 nodes of 8, a shard group of 4 (half a node): 16 / 4 = 4 groups.
        (hybrid(16, 2, 4), "(4, 4)"),
        # 4 nodes of 8, a shard group of 16 (two whole nodes): 32 / 16 = 2 groups.
        (hybrid(32, 4, 16), "(2, 16)"),
    ],
)
@pytest.mark.parametrize(("stage", "reshard"), [(Stage.ZERO2, "False"), (Stage.ZERO3, "True")])
def test_fsdp2_writes_hybrid_sharding_as_a_2d_mesh(run: Run, mesh: str, stage: Stage, reshard: str) -> None:
    snippet = fsdp2_snippet(stage, run)
    made = _call(snippet, "init_device_mesh")
    assert [ast.unparse(a) for a in made.args] == ["'cuda'", mesh]
    assert _keywords(made) == {"mesh_dim_names": "('replicate', 'shard')"}
    assert f'mesh = init_device_mesh("cuda", {mesh}, mesh_dim_names=("replicate", "shard"))' in snippet.splitlines()
    shards = [call for call in _calls(snippet) if ast.unparse(call.func) == "fully_shard"]
    assert [_keywords(call) for call in shards] == [
        {"mesh": "mesh", "reshard_after_forward": reshard, "mp_policy": "mp_policy"}
    ] * 2
    assert "from torch.distributed.device_mesh import init_device_mesh" in snippet
    assert '# A 2-D mesh is HSDP: each weight is Replicate() on "replicate" and Shard(0) on "shard".' in snippet
    replicas, shards_in_group = mesh.strip("()").split(", ")
    assert (
        f"# In torchtitan's [parallelism]: data_parallel_replicate_degree={replicas}, "
        f"data_parallel_shard_degree={shards_in_group}." in snippet
    )


def test_fsdp2_without_hybrid_has_no_mesh() -> None:
    snippet = fsdp2_snippet(Stage.ZERO3, run_with())
    assert "mesh" not in snippet
    assert [_keywords(c) for c in _calls(snippet) if ast.unparse(c.func) == "fully_shard"] == [
        {"reshard_after_forward": "True", "mp_policy": "mp_policy"}
    ] * 2


def test_fsdp2_zero1_splits_the_optimizer_across_the_shard_group() -> None:
    snippet = fsdp2_snippet(Stage.ZERO1, hybrid(8, 2, 4))
    assert _keywords(_call(snippet, "ZeroRedundancyOptimizer")) == {
        "optimizer_class": "torch.optim.AdamW",
        "process_group": "mesh['shard'].get_group()",
    }
    assert [ast.unparse(a) for a in _call(snippet, "init_device_mesh").args] == ["'cuda'", "(2, 4)"]
    # DDP averages the gradients over every card, as hybrid sharding's ZeRO-1 does.
    assert _keywords(_call(snippet, "DistributedDataParallel")) == {}


def test_fsdp2_zero1_without_hybrid_splits_across_every_card() -> None:
    snippet = fsdp2_snippet(Stage.ZERO1, run_with())
    assert _keywords(_call(snippet, "ZeroRedundancyOptimizer")) == {"optimizer_class": "torch.optim.AdamW"}
    assert "mesh" not in snippet


def test_fsdp2_data_parallelism_is_ddp_with_shard_groups_too() -> None:
    assert fsdp2_snippet(Stage.DP, hybrid()) == fsdp2_snippet(Stage.DP, run_with())


@pytest.mark.parametrize(
    ("run", "reshard"),
    [
        # hpZ's copy across a node's 8 of 16 cards: FSDP2 reshards to 8 after the forward.
        (zeropp(8), "8"),
        (zeropp(4), "4"),
        # hpz=16 on 16 cards is the shard group itself, which FSDP2 does not take as an int.
        (zeropp(16), "True"),
        (zeropp(qwz=True, qgz=True), "True"),
    ],
)
def test_fsdp2_writes_hpz_as_an_int_reshard_after_forward(run: Run, reshard: str) -> None:
    snippet = fsdp2_snippet(Stage.ZERO3, run)
    reshards = {_keywords(c)["reshard_after_forward"] for c in _calls(snippet) if ast.unparse(c.func) == "fully_shard"}
    assert reshards == {reshard}
    assert ("# ZeRO++'s hpZ" in snippet) == (reshard != "True")


@pytest.mark.parametrize(("qwz", "qgz"), [(True, False), (False, True), (True, True)])
def test_fsdp2_says_it_has_no_qwz_or_qgz(qwz: bool, qgz: bool) -> None:
    says = "# ZeRO++'s qwZ and qgZ (int8 weights, int4 gradients on the wire) are DeepSpeed's"
    assert says in fsdp2_snippet(Stage.ZERO3, zeropp(qwz=qwz, qgz=qgz))
    assert says not in fsdp2_snippet(Stage.ZERO2, zeropp(qwz=qwz, qgz=qgz))  # ZeRO++ is ZeRO-3's


@pytest.mark.slow
# torch without numpy says so on import, and ZeroRedundancyOptimizer scripts a function with torch.jit.
@pytest.mark.filterwarnings("ignore::UserWarning", "ignore::DeprecationWarning")
@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("run", [run_with(Offload.OPTIMIZER), hybrid()], ids=["offload", "hybrid"])
def test_fsdp2_imports_exist_in_the_installed_torch(stage: Stage, run: Run) -> None:
    imports = [line for line in fsdp2_snippet(stage, run).splitlines() if "import" in line]
    exec("\n".join(imports), {})  # our own snippet's import lines


# --- reading -------------------------------------------------------------------------------------

NOTHING = {"offload": "none", "offload_device": "", "pin_memory": "1"}
BUCKETS = {"reduce_bucket_size": "", "prefetch_bucket_size": "", "max_live_parameters": ""}
UNSET = {"hpz": "1", "qwz": "0", "qgz": "0", "shard": "", "grad_accum": "bf16"}
"""No ZeRO++, no MiCS and no grad_accum_dtype: hpZ off, no quantizing, every card one shard group and the
recipe's gradients (the defaults, blank)."""


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # Nothing: DeepSpeed's defaults, stage 0 in fp32 with a micro-batch of 1.
        ({}, {"stage": "dp", **NOTHING, **BUCKETS, **UNSET, "recipe": "fp32-adam", "batch": "1"}),
        (
            {"zero_optimization": {"stage": 2, "reduce_bucket_size": 2e8}, "bf16": {"enabled": True}},
            {
                "stage": "zero2",
                **NOTHING,
                **BUCKETS,
                **UNSET,
                "reduce_bucket_size": "200000000",
                "recipe": "mixed-adam",
            }
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
            {"stage": "zero3", "offload": "optimizer", "offload_device": "", "pin_memory": "0", **BUCKETS, **UNSET}
            | {"recipe": "mixed-adam", "batch": "4"},
        ),
        (
            {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "pin_memory": True}}},
            {
                "stage": "zero3",
                "offload": "optimizer",
                "offload_device": "nvme",
                "pin_memory": "1",
                **BUCKETS,
                **UNSET,
            }
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
            {"stage": "zero3", "offload": "nvme", "offload_device": "", "pin_memory": "0", **BUCKETS, **UNSET}
            | {"recipe": "fp32-adam", "batch": "1"},
        ),
        # "auto" (Hugging Face's) leaves the run's own value: the parameter is not answered.
        (
            {
                "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto"},
                "bf16": {"enabled": "auto"},
                "train_micro_batch_size_per_gpu": "auto",
            },
            {"stage": "zero3", **NOTHING, "max_live_parameters": "", **UNSET},
        ),
        # A device of "none" is no offload.
        (
            {"zero_optimization": {"stage": 1, "offload_optimizer": {"device": "none"}}, "bf16": {"enabled": True}},
            {"stage": "zero1", **NOTHING, **BUCKETS, **UNSET, "recipe": "mixed-adam", "batch": "1"},
        ),
        # ZeRO++'s three keys, as DeepSpeed's tutorial writes them.
        (
            {
                "zero_optimization": {
                    "stage": 3,
                    "zero_quantized_weights": True,
                    "zero_hpz_partition_size": 8,
                    "zero_quantized_gradients": True,
                }
            },
            {"stage": "zero3", **NOTHING, **BUCKETS, **UNSET, "hpz": "8", "qwz": "1", "qgz": "1"}
            | {"recipe": "fp32-adam", "batch": "1"},
        ),
        # 0 is hpZ off too (DeepSpeed turns it on above 1); false is said as 0.
        (
            {"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 0, "zero_quantized_weights": False}},
            {"stage": "zero3", **NOTHING, **BUCKETS, **UNSET, "recipe": "fp32-adam", "batch": "1"},
        ),
        # "auto" leaves the run's own.
        (
            {"zero_optimization": {"stage": 3, "zero_hpz_partition_size": "auto", "zero_quantized_gradients": "auto"}},
            {"stage": "zero3", **NOTHING, **BUCKETS, "qwz": "0", "shard": "", "grad_accum": "bf16"}
            | {"recipe": "fp32-adam", "batch": "1"},
        ),
        # MiCS's shard group is hybrid sharding's; -1, DeepSpeed's default, and 0 are every card.
        (
            {"zero_optimization": {"stage": 3, "mics_shard_size": 4}},
            {"stage": "zero3", **NOTHING, **BUCKETS, **UNSET, "shard": "4", "recipe": "fp32-adam", "batch": "1"},
        ),
        (
            {"zero_optimization": {"stage": 3, "mics_shard_size": -1}},
            {"stage": "zero3", **NOTHING, **BUCKETS, **UNSET, "recipe": "fp32-adam", "batch": "1"},
        ),
        (
            {"zero_optimization": {"stage": 3, "mics_shard_size": 0.0}},
            {"stage": "zero3", **NOTHING, **BUCKETS, **UNSET, "recipe": "fp32-adam", "batch": "1"},
        ),
        # The recipes as the exports write them: bf16 master and moments, SGD, a client optimizer.
        (
            {"bf16": {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True}},
            {"stage": "dp", **NOTHING, **BUCKETS, **UNSET, "recipe": "bf16-adam", "batch": "1"},
        ),
        (
            {"bf16": {"enabled": True}, "optimizer": {"type": "sgd", "params": {"momentum": 0.9}}},
            {"stage": "dp", **NOTHING, **BUCKETS, **UNSET, "recipe": "mixed-sgd", "batch": "1"},
        ),
        (
            {"bf16": {"enabled": True}, "zero_allow_untested_optimizer": True},
            {"stage": "dp", **NOTHING, **BUCKETS, **UNSET, "recipe": "adam-8bit", "batch": "1"},
        ),
        # bf16 master with fp32 moments is QLoRA's adapters: the config cannot say the NF4 weights.
        (
            {"bf16": {"enabled": True, "bf16_master_weights_and_grads": True}},
            {"stage": "dp", **NOTHING, **BUCKETS, **UNSET, "batch": "1"},
        ),
        # The bf16 switches mean nothing without bf16.
        (
            {"bf16": {"enabled": False, "bf16_optimizer_states": True}},
            {"stage": "dp", **NOTHING, **BUCKETS, **UNSET, "recipe": "fp32-adam", "batch": "1"},
        ),
        # grad_accum_dtype: fp32 is grad_accum=fp32; bf16 is the recipe's band (the default); "auto" the run's own.
        (
            {"bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "fp32"}},
            {"stage": "dp", **NOTHING, **BUCKETS, **UNSET, "grad_accum": "fp32", "recipe": "mixed-adam", "batch": "1"},
        ),
        (
            {"bf16": {"enabled": True}, "data_types": {"grad_accum_dtype": "bf16"}},
            {"stage": "dp", **NOTHING, **BUCKETS, **UNSET, "recipe": "mixed-adam", "batch": "1"},
        ),
        (
            {"data_types": {"grad_accum_dtype": "auto"}},
            {"stage": "dp", **NOTHING, **BUCKETS, "hpz": "1", "qwz": "0", "qgz": "0", "shard": ""}
            | {"recipe": "fp32-adam", "batch": "1"},
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
        ({"optimizer": {"type": "Lion"}}, 'optimizer.type: "Lion" is not drawn here: use Adam, AdamW or SGD'),
        ({"optimizer": {"type": "SGD"}}, 'optimizer.type: "SGD" is drawn in mixed precision alone (mixed-sgd)'),
        ({"bf16": {"enabled": True, "bf16_optimizer_states": 1}}, "bf16.bf16_optimizer_states: 1 should be true"),
        ({"data_types": {"grad_accum_dtype": "int8"}}, 'data_types.grad_accum_dtype: "int8" is not a gradient'),
        ({"train_micro_batch_size_per_gpu": 0}, "train_micro_batch_size_per_gpu: 0 is not a whole number from 1"),
        ({"train_micro_batch_size_per_gpu": 10**6}, "train_micro_batch_size_per_gpu: 1000000 is not a whole number"),
        (
            {"zero_optimization": {"stage": 3, "zero_hpz_partition_size": -1}},
            "zero_optimization.zero_hpz_partition_size: -1 is not a whole number of cards from 0 to 4,096",
        ),
        (
            {"zero_optimization": {"stage": 3, "zero_hpz_partition_size": "8"}},
            'zero_optimization.zero_hpz_partition_size: "8" is not a whole number of cards',
        ),
        (
            {"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 8.5}},
            "zero_optimization.zero_hpz_partition_size: 8.5 is not a whole number of cards",
        ),
        (
            {"zero_optimization": {"stage": 3, "zero_hpz_partition_size": 4097}},
            "zero_optimization.zero_hpz_partition_size: 4097 is not a whole number of cards",
        ),
        (
            {"zero_optimization": {"stage": 3, "zero_quantized_weights": 1}},
            "zero_optimization.zero_quantized_weights: 1 should be true or false",
        ),
        (
            {"zero_optimization": {"stage": 3, "zero_quantized_gradients": "true"}},
            'zero_optimization.zero_quantized_gradients: "true" should be true or false',
        ),
        (
            {"zero_optimization": {"stage": 3, "mics_shard_size": 4097}},
            "zero_optimization.mics_shard_size: 4097 is not a whole number of cards up to 4,096",
        ),
        (
            {"zero_optimization": {"stage": 3, "mics_shard_size": "4"}},
            'zero_optimization.mics_shard_size: "4" is not a whole number of cards',
        ),
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
            "zero_hpz_partition_size": 8,
            "zero_quantized_weights": True,
            "mics_shard_size": 8,
            "mics_hierarchical_params_gather": True,
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
        "zero_optimization.mics_hierarchical_params_gather",
        "zero_optimization.offload_optimizer.nvme_path",
        "zero_optimization.offload_param.buffer_count",
        "bf16.immediate_grad_update",
        "optimizer.params.lr",
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


@pytest.mark.parametrize(
    ("hpz", "qwz", "qgz"),
    [(1, False, False), (8, False, False), (1, True, False), (1, False, True), (8, True, True), (16, True, False)],
)
def test_zeropp_written_reads_back_as_the_same_run(hpz: int, qwz: bool, qgz: bool) -> None:
    run = zeropp(hpz, qwz, qgz)  # 16 cards in 2 nodes
    read = read_deepspeed(deepspeed_config(Stage.ZERO3, run))
    assert (read["hpz"], read["qwz"], read["qgz"], read["shard"]) == (str(hpz), str(int(qwz)), str(int(qgz)), "")
    again = Run(
        gpus=16, nodes=2, batch=1, setup=Setup(hpz=int(read["hpz"])), qwz=read["qwz"] == "1", qgz=read["qgz"] == "1"
    )
    assert again == run


def test_mics_is_read_as_hybrid_sharding_and_says_so() -> None:
    config = {"zero_optimization": {"stage": 3, "mics_shard_size": 4}}
    assert read_deepspeed(config)["shard"] == "4"
    assert read_notes(config) == (
        "zero_optimization.mics_shard_size: 4 is MiCS, which DeepSpeed removed in its newest release: drawn as "
        "hybrid sharding (shard=4), as FSDP2's HSDP does it.",
    )
    assert "zero_optimization.mics_shard_size" not in ignored_keys(config)  # read, not set aside


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"zero_optimization": {"stage": 3}},
        {"zero_optimization": {"stage": 3, "mics_shard_size": -1}},
        {"zero_optimization": {"stage": 3, "mics_shard_size": 0}},
        {"zero_optimization": {"stage": 3, "mics_shard_size": "auto"}},
        {"zero_optimization": []},
    ],
)
def test_no_mics_no_note(config: dict[str, Any]) -> None:
    assert read_notes(config) == ()


# --- every recipe's exports against its bands --------------------------------------------------------

# What each optimizer keeps a weight in the moments band, its class in PyTorch and its DeepSpeed block:
# written here by hand, from the optimizers' own documentation, not read from the app. A new optimizer
# fails until it is added. None: no DeepSpeed type, an optimizer passed in code.
MOMENT_VALUES = {Optimizer.ADAM: 2, Optimizer.SGD_MOMENTUM: 1, Optimizer.ADAM_8BIT: 2, Optimizer.OWN: None}
TORCH_CLASS = {
    Optimizer.ADAM: "torch.optim.AdamW",
    Optimizer.SGD_MOMENTUM: "torch.optim.SGD",
    Optimizer.ADAM_8BIT: "bitsandbytes.optim.AdamW8bit",
    Optimizer.OWN: "torch.optim.AdamW",
}
DEEPSPEED_OPTIMIZER = {
    Optimizer.ADAM: {"type": "Adam"},
    Optimizer.SGD_MOMENTUM: {"type": "SGD", "params": {"momentum": 0.9}},
    Optimizer.ADAM_8BIT: None,
    Optimizer.OWN: None,
}


def kept_in(recipe: Recipe, kept: GradAccum = GradAccum.BF16) -> Run:
    return Run(recipe=grad_accum(recipe, kept))


def disagreements(recipe: Recipe, stage: Stage, kept: GradAccum = GradAccum.BF16) -> list[str]:
    """Where a recipe's DeepSpeed config or FSDP2 snippet under `stage` says otherwise than its bands."""
    run = kept_in(recipe, kept)
    if deepspeed_refused(stage, run):  # grad_accum=fp32 at stage 0: tested with the round trip
        run = kept_in(recipe, kept := GradAccum.BF16)
    config, snippet = deepspeed_config(stage, run), fsdp2_snippet(stage, run)
    found = []
    # Autograd makes a weight's gradient in that weight's dtype: bf16 gradients are bf16 weights that train.
    bf16 = recipe.spec(Band.GRADIENTS).dtype.torch == "torch.bfloat16"
    pure = bf16 and not recipe.has_master  # the update goes straight into bf16 weights
    moments = recipe.spec(Band.MOMENTS)
    bf16_moments = moments.copies > 0 and moments.dtype == BF16_TYPE
    section = config["bf16"]
    if section["enabled"] is not bf16:
        found.append(f"bf16.enabled is {section['enabled']}, the gradients band is {recipe.spec(Band.GRADIENTS)}")
    if recipe.has_master and not bf16:
        found.append("a master copy beside weights that train in fp32: no mixed precision to keep it for")
    if section.get("bf16_master_weights_and_grads", False) is not pure:
        found.append(f"bf16_master_weights_and_grads for a master band of {recipe.spec(Band.MASTER).shown} B")
    if section.get("bf16_optimizer_states", False) is not (bf16 and bf16_moments):
        found.append(f"bf16_optimizer_states for moments in {moments.precision}")
    if config.get("optimizer") != DEEPSPEED_OPTIMIZER[recipe.optimizer]:
        found.append(f"optimizer {config.get('optimizer')} for {recipe.optimizer}")
    if config.get("zero_allow_untested_optimizer", False) is not (recipe.optimizer is not Optimizer.ADAM):
        found.append(f"zero_allow_untested_optimizer for {recipe.optimizer} at {stage}")
    # grad_accum=fp32 widens a narrower gradients band; fp32 gradients (fp32 Adam) are accumulated in fp32 anyway.
    widened = kept is GradAccum.FP32 and recipe.nbytes(Band.GRADIENTS) < 4
    if config.get("data_types") != ({"grad_accum_dtype": "fp32"} if widened else None):
        found.append(f"data_types {config.get('data_types')} for grad_accum={kept}")
    if recipe.optimizer is Optimizer.ADAM and moments.dtype.torch == "":
        found.append(f"DeepSpeed's Adam keeps its moments in a torch dtype, not {moments.dtype}")
    if (values := MOMENT_VALUES[recipe.optimizer]) is not None and moments.copies != values:
        found.append(f"{recipe.optimizer} keeps {values} values a weight, the moments band {moments}")
    # FSDP2: the optimizer named at every stage, and the model's parameter dtype.
    named = (
        f"optimizer_class={TORCH_CLASS[recipe.optimizer]}" if stage is Stage.ZERO1 else TORCH_CLASS[recipe.optimizer]
    )
    if f"{named}(" not in snippet and f"{named}," not in snippet and f"{named})" not in snippet:
        found.append(f"FSDP2's snippet does not name {TORCH_CLASS[recipe.optimizer]}")
    if ("model = model.to(torch.bfloat16)" in snippet) is not (
        pure and recipe.spec(Band.WEIGHTS).dtype.torch == "torch.bfloat16"
    ):
        found.append("FSDP2's model dtype and the weights band disagree")
    if ("convert_to_float8_training(model)" in snippet) is not (recipe.matmul == FP8):
        found.append(f"FSDP2's snippet and the multiplies' format, {recipe.matmul}, disagree")
    nf4 = recipe.spec(Band.WEIGHTS).dtype.name == "nf4"
    if ('bnb_4bit_quant_type="nf4"' in snippet and "LoraConfig(" in snippet) is not nf4:
        found.append("FSDP2's snippet and the NF4 weights disagree")
    if stage in (Stage.ZERO2, Stage.ZERO3):
        policies = {ast.unparse(c.func): _keywords(c) for c in _calls(snippet)}
        expected = {}
        if bf16 and recipe.has_master:
            expected["param_dtype"] = "torch.bfloat16"
        if bf16 and (recipe.has_master or kept is GradAccum.FP32):
            expected["reduce_dtype"] = "torch.float32" if kept is GradAccum.FP32 else "torch.bfloat16"
        if policies.get("MixedPrecisionPolicy", {}) != expected:
            found.append(f"FSDP2's MixedPrecisionPolicy {policies.get('MixedPrecisionPolicy')}, expected {expected}")
    return found


# Custom recipes whose weights and gradients are one size: 1 B weights with 2 B gradients name no
# precision a framework trains in, and their exports take the weights' (no mixed precision).
EVERY_RECIPE = [*RECIPES.values(), custom_recipe(2, 2, 4, 4), custom_recipe(4, 4, 0, 8), custom_recipe(2, 2, 0, 4)]


@pytest.mark.parametrize("kept", list(GradAccum))
@pytest.mark.parametrize("recipe", EVERY_RECIPE, ids=lambda r: r.title)
@pytest.mark.parametrize("stage", list(Stage))
def test_every_recipes_exports_agree_with_its_bands(recipe: Recipe, stage: Stage, kept: GradAccum) -> None:
    assert disagreements(recipe, stage, kept) == []


# Each preset's exports, by hand: the model's dtype in FSDP2, the optimizer named, DeepSpeed's bf16 section
# (master kept in bf16, moments in bf16). Independent of the bands: a preset whose bands change fails here.
PRESET_EXPORTS = {
    RecipeName.MIXED_ADAM: ("fp32+bf16", "torch.optim.AdamW(", {"enabled": True}),
    RecipeName.FP32_ADAM: ("fp32", "torch.optim.AdamW(", {"enabled": False}),
    RecipeName.BF16_ADAM: (
        "bf16",
        "torch.optim.AdamW(",
        {"enabled": True, "bf16_master_weights_and_grads": True, "bf16_optimizer_states": True},
    ),
    RecipeName.MIXED_SGD: (
        "fp32+bf16",
        "torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)",
        {"enabled": True},
    ),
    RecipeName.ADAM_8BIT: ("fp32+bf16", "bitsandbytes.optim.AdamW8bit(", {"enabled": True}),
    RecipeName.FP8_ADAM: ("fp32+bf16", "torch.optim.AdamW(", {"enabled": True}),
    RecipeName.QLORA_NF4: ("nf4", "torch.optim.AdamW(", {"enabled": True, "bf16_master_weights_and_grads": True}),
}


@pytest.mark.parametrize("name", list(PRESET_EXPORTS))
def test_each_presets_exports_by_hand(name: RecipeName) -> None:
    model, optimizer, bf16 = PRESET_EXPORTS[name]
    run = Run(recipe=RECIPES[name])
    snippet = fsdp2_snippet(Stage.ZERO3, run)
    assert deepspeed_config(Stage.ZERO3, run)["bf16"] == bf16
    assert optimizer in snippet
    assert ("param_dtype=torch.bfloat16" in snippet) is (model == "fp32+bf16")
    assert ("model = model.to(torch.bfloat16)" in snippet) is (model == "bf16")
    assert ('bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True' in snippet) is (model == "nf4")


# The fp8-adam as first declared: weights 1 B, named fp8, where fp8 is only inside the multiplies.
WRONG_FP8 = Recipe(
    "fp8-adam",
    "fp8 Adam, wrongly",
    Optimizer.ADAM,
    (
        BandSpec(Band.WEIGHTS, "Weights", FP8, 1, "used"),
        BandSpec(Band.GRADIENTS, "Gradients", BF16_TYPE, 1, "made"),
        *RECIPES[RecipeName.MIXED_ADAM].specs[2:],
    ),
)
# SGD declared with Adam's two moments: its exports would say SGD while the page draws Adam's state.
WRONG_SGD = replace(RECIPES[RecipeName.MIXED_ADAM], name="sgd", optimizer=Optimizer.SGD_MOMENTUM)
# 8-bit Adam's moments declared as bf16: DeepSpeed's bf16_optimizer_states would be written for bitsandbytes'.
WRONG_8BIT = replace(
    RECIPES[RecipeName.ADAM_8BIT],
    specs=(*RECIPES[RecipeName.ADAM_8BIT].specs[:3], replace(RECIPES[RecipeName.BF16_ADAM].specs[3])),
)


@pytest.mark.parametrize(
    ("recipe", "stage", "first"),
    [
        (WRONG_FP8, Stage.ZERO3, "bf16.enabled is False"),
        (WRONG_SGD, Stage.ZERO1, "SGD with momentum keeps 1 values a weight"),
    ],
)
def test_a_recipe_whose_exports_disagree_with_its_bands_is_caught(recipe: Recipe, stage: Stage, first: str) -> None:
    assert disagreements(recipe, stage)[0].startswith(first)


# --- there and back: every recipe's DeepSpeed config read back --------------------------------------

CANNOT = {
    RecipeName.FP8_ADAM: (
        "mixed-adam",
        "fp8 is in the model (torchao's convert_to_float8_training, Transformer Engine), not DeepSpeed's JSON",
    ),
    RecipeName.QLORA_NF4: (
        None,
        "NF4 and LoRA are the model's (bitsandbytes, peft): the JSON says bf16 adapters with no master and fp32 "
        "moments, so the run's own recipe stands",
    ),
}
"""The presets DeepSpeed's JSON cannot tell apart, what they read back as (None: not answered), and why."""


@pytest.mark.parametrize("kept", list(GradAccum))
@pytest.mark.parametrize("name", [name for name in RECIPES if name is not RecipeName.CUSTOM])
@pytest.mark.parametrize("stage", list(Stage))
def test_every_recipes_deepspeed_config_reads_back_as_that_recipe(
    stage: Stage, name: RecipeName, kept: GradAccum
) -> None:
    run = kept_in(RECIPES[name], kept)
    if stage is Stage.DP and kept is GradAccum.FP32 and RECIPES[name].trained == BF16_TYPE:
        with pytest.raises(NoConfig, match="grad_accum=fp32 with bf16 weights needs ZeRO") as refused:
            deepspeed_config(stage, run)
        assert refused.value.parameter == "grad_accum"
        return
    read = read_deepspeed(deepspeed_config(stage, run))
    expected = CANNOT[name][0] if name in CANNOT else name.value
    assert read.get("recipe") == expected
    # fp32 gradients already (fp32 Adam): grad_accum=fp32 changes nothing, and reads back as the recipe's own.
    assert read["grad_accum"] == (kept if RECIPES[name].nbytes(Band.GRADIENTS) < 4 else GradAccum.BF16).value
    assert read["stage"] == stage.value


def test_a_client_optimizer_read_as_8bit_adam_says_so() -> None:
    config = deepspeed_config(Stage.ZERO2, Run(recipe=RECIPES[RecipeName.ADAM_8BIT]))
    assert any("8-bit Adam (adam-8bit)" in note for note in read_notes(config))
    assert read_notes(deepspeed_config(Stage.ZERO2, Run())) == ()


@pytest.mark.parametrize("name", list(RecipeName))
@pytest.mark.parametrize("stage", list(Stage))
def test_the_apps_own_keys_are_never_ignored(stage: Stage, name: RecipeName) -> None:
    recipe = RECIPES[name] if name is not RecipeName.CUSTOM else custom_recipe(2, 2, 4, 8)
    config = deepspeed_config(stage, kept_in(recipe, GradAccum.FP32 if stage is not Stage.DP else GradAccum.BF16))
    assert ignored_keys(config) == ()


def test_8bit_adams_zero1_snippet_imports_bitsandbytes() -> None:
    snippet = fsdp2_snippet(Stage.ZERO1, Run(recipe=RECIPES[RecipeName.ADAM_8BIT]))
    assert "import bitsandbytes\n" in snippet
    assert "optimizer_class=bitsandbytes.optim.AdamW8bit)" in snippet
