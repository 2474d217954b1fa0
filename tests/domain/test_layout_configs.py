"""The layout as Megatron-LM's arguments, torchtitan's sections and a device mesh: each by hand, and read back."""

from __future__ import annotations

import argparse
import ast
import json
import math
import re
import shlex
import subprocess
import sys
import tomllib

import pytest

from app.domain.activations import Recompute
from app.domain.architecture import ModelName
from app.domain.configs import NoConfig, deepspeed_config, deepspeed_refused
from app.domain.layout_configs import (
    MESH_DIMS,
    DataGroups,
    data_groups,
    expert_mesh_shape,
    global_batch,
    megatron_args,
    megatron_gpus,
    megatron_text,
    mesh_shape,
    mesh_snippet,
    model_note,
    read_megatron,
    read_torchtitan,
    torchtitan_sections,
    torchtitan_toml,
)
from app.domain.recipes import GradAccum, RecipeName
from app.domain.scenario import Inputs, Scenario, resolve
from app.domain.stages import Stage

# Llama 3 8B (32 blocks) on 16 cards in 2 nodes of 8: tp 2 × pp 2 × dp 4, sequence parallel, 8 micro-batches.
L8 = Inputs(model=ModelName.LLAMA_3_8B, gpus=16, nodes=2, batch=1, seq=4096, tp=2, sp=True, pp=2, microbatches=8)
# 32 cards in 4 nodes: tp 2 × pp 2 (2 virtual stages each) × cp 2 × dp 4, selective recomputation, 2 sequences.
L8_CP = Inputs(
    model=ModelName.LLAMA_3_8B,
    gpus=32,
    nodes=4,
    batch=2,
    seq=8192,
    tp=2,
    pp=2,
    vpp=2,
    cp=2,
    microbatches=4,
    recompute=Recompute.SELECTIVE,
)
# A weight count alone, no cut: the seed's 30B on 8 cards.
BARE = Inputs()
# Hybrid sharding under a cut: 16 cards, tp 2 → dp 8, split into 2 groups of 4.
HYBRID = Inputs(model=ModelName.LLAMA_3_8B, gpus=16, nodes=2, batch=1, tp=2, shard=4)
HYBRID_CP = Inputs(model=ModelName.LLAMA_3_8B, gpus=16, nodes=2, batch=1, cp=2, shard=4)
FP32 = Inputs(model=ModelName.LLAMA_3_8B, gpus=8, batch=1, tp=8, recipe=RecipeName.FP32_ADAM)
# Uneven stages: Llama 3.1 405B's 126 blocks in 16 stages as Meta trained it (7, 8 × 14, 7), and Llama 3 8B's
# 32 in 5 (6, 7, 7, 6, 6: the middle stages differ).
L405 = Inputs(model=ModelName.LLAMA_3_1_405B, gpus=1024, nodes=128, batch=1, seq=8192, tp=8, pp=16)
L8_PP5 = Inputs(model=ModelName.LLAMA_3_8B, gpus=40, nodes=5, batch=1, pp=5)


def scenario(inputs: Inputs) -> Scenario:
    return resolve(inputs)


L8_ARGS_ZERO1 = (
    *("--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2", "--context-parallel-size", "1"),
    "--sequence-parallel",
    "--use-distributed-optimizer",
    # 1 sequence × 8 micro-batches × dp 4 = 32, by hand.
    *("--micro-batch-size", "1", "--global-batch-size", "32", "--seq-length", "4096"),
    "--bf16",
    *("--num-layers", "32", "--hidden-size", "4096", "--ffn-hidden-size", "14336", "--num-attention-heads", "32"),
    *("--group-query-attention", "--num-query-groups", "8"),
    *("--max-position-embeddings", "4096", "--position-embedding-type", "rope"),
    *("--swiglu", "--normalization", "RMSNorm", "--disable-bias-linear", "--untie-embeddings-and-output-weights"),
)


def test_llama_3_8b_cut_in_four_as_megatron_arguments_by_hand() -> None:
    s = scenario(L8)
    assert megatron_args(Stage.ZERO1, s.run, s.architecture) == L8_ARGS_ZERO1


@pytest.mark.parametrize(
    ("stage", "zero"),
    [
        (Stage.DP, ()),
        (Stage.ZERO1, ("--use-distributed-optimizer",)),
        (Stage.ZERO2, ("--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                       "optim_grads")),
        (Stage.ZERO3, ("--use-distributed-optimizer", "--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                       "optim_grads_params")),
    ],
)  # fmt: skip
def test_each_stage_is_megatrons_distributed_optimizer_or_its_fsdp(stage: Stage, zero: tuple[str, ...]) -> None:
    s = scenario(L8)
    args = megatron_args(stage, s.run, s.architecture)
    start = args.index("--sequence-parallel") + 1
    assert args[start : start + len(zero)] == zero
    assert args[start + len(zero)] == "--micro-batch-size"


def test_virtual_stages_context_parallelism_and_recomputation_as_megatron_arguments() -> None:
    s = scenario(L8_CP)
    args = megatron_args(Stage.ZERO3, s.run, s.architecture)
    assert args[:8] == (
        *("--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2"),
        *("--num-virtual-stages-per-pipeline-rank", "2", "--context-parallel-size", "2"),
    )
    # dp = 32 / (2 × 2 × 2) = 4; 2 sequences × 4 micro-batches × 4 = 32.
    assert args[args.index("--global-batch-size") + 1] == "32"
    assert args[args.index("--micro-batch-size") + 1] == "2"
    assert args[args.index("--recompute-granularity") :][:2] == ("--recompute-granularity", "selective")
    assert "--sequence-parallel" not in args


@pytest.mark.parametrize(
    ("inputs", "bf16", "fp32_grads"),
    [
        (L8, True, False),
        (FP32, False, False),
        (Inputs(model=ModelName.LLAMA_3_8B, gpus=8, batch=1, tp=2, ruled=()), True, False),
    ],
)
def test_megatrons_precision_is_the_recipes(inputs: Inputs, bf16: bool, fp32_grads: bool) -> None:
    s = scenario(inputs)
    args = megatron_args(Stage.ZERO1, s.run, s.architecture)
    assert ("--bf16" in args) is bf16
    assert ("--accumulate-allreduce-grads-in-fp32" in args) is fp32_grads


def test_fp32_gradient_accumulation_is_megatrons_accumulate_in_fp32() -> None:
    from app.domain.recipes import grad_accum

    s = resolve(Inputs(model=ModelName.LLAMA_3_8B, gpus=8, batch=1, tp=2, ruled=((grad_accum, GradAccum.FP32),)))
    assert "--accumulate-allreduce-grads-in-fp32" in megatron_args(Stage.ZERO1, s.run, s.architecture)


def test_a_weight_count_has_no_shape_arguments_and_says_so() -> None:
    s = scenario(BARE)
    args = megatron_args(Stage.ZERO3, s.run, None)
    assert "--num-layers" not in args
    assert "is not known for a weight count" in megatron_text(Stage.ZERO3, s.run, None)


def test_hybrid_sharding_under_a_cut_is_two_distributed_optimizer_instances() -> None:
    s = scenario(HYBRID)
    assert s.run.dp == 8
    assert data_groups(Stage.ZERO3, s.run) == DataGroups(2, 4)
    args = megatron_args(Stage.ZERO1, s.run, s.architecture)
    assert args[args.index("--num-distributed-optimizer-instances") + 1] == "2"


RUNS = [L8, L8_CP, BARE, HYBRID, HYBRID_CP, FP32, L405, L8_PP5]


def test_uneven_stages_are_megatrons_first_and_last_stages_blocks() -> None:
    s = scenario(L405)
    args = megatron_args(Stage.ZERO1, s.run, s.architecture)
    assert args[:8] == (
        *("--tensor-model-parallel-size", "8", "--pipeline-model-parallel-size", "16"),
        *("--decoder-first-pipeline-num-layers", "7", "--decoder-last-pipeline-num-layers", "7"),
    )
    assert "# Uneven stages of 7, 8 × 14, 7 blocks" in megatron_text(Stage.ZERO1, s.run, s.architecture)
    # Megatron-LM's check: the 126 − 7 − 7 = 112 blocks left divide between the 14 middle stages, 8 each.
    assert (126 - 7 - 7) % 14 == 0


def test_uneven_middle_stages_are_megatrons_layout_string() -> None:
    s = scenario(L8_PP5)
    args = megatron_args(Stage.ZERO1, s.run, s.architecture)
    layout = args[args.index("--pipeline-model-parallel-layout") + 1]
    assert layout == "Et*6|t*7|t*7|t*6|t*6L"
    # Unrolled as Megatron-LM's `parse_str_to_list` does: x*n is n xs, | between stages.
    stages = re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), layout).split("|")
    assert [stage.count("t") for stage in stages] == [6, 7, 7, 6, 6]
    assert (stages[0][0], stages[-1][-1]) == ("E", "L")


def test_uneven_stages_are_torchtitans_fewer_layers_on_the_first_and_last() -> None:
    # torchtitan counts the embedding and the output layer as a block each: (126 + 1 + 1) / 8 = 16 stages of 8,
    # the first and last 8 − 1 = 7.
    s = scenario(L405)
    parallelism = torchtitan_sections(Stage.ZERO3, s.run, s.architecture)["parallelism"]
    assert parallelism["pipeline_parallel_layers_per_stage"] == 8
    assert parallelism["pipeline_parallel_first_stage_less_layers"] == 1
    assert parallelism["pipeline_parallel_last_stage_less_layers"] == 1
    # Middle stages that differ it cannot say: left out, and said.
    s = scenario(L8_PP5)
    text = torchtitan_toml(Stage.ZERO3, s.run, s.architecture)
    assert "pipeline_parallel_layers_per_stage" not in tomllib.loads(text)["parallelism"]
    assert "# Stages of 6, 7 × 2, 6 × 2 blocks: torchtitan's layers_per_stage" in text


@pytest.mark.parametrize("inputs", RUNS)
@pytest.mark.parametrize("stage", list(Stage))
def test_megatrons_arguments_read_back_as_the_layout(inputs: Inputs, stage: Stage) -> None:
    s = scenario(inputs)
    read = read_megatron(megatron_text(stage, s.run, s.architecture))
    cut = s.run.cut
    assert read.cut.tp == cut.tp
    assert read.cut.sp == cut.sp
    assert read.cut.pp == cut.pp
    assert read.cut.vpp == cut.vpp
    assert read.cut.cp == cut.cp
    assert read.stage is stage
    assert read.batch == max(s.run.batch, 1)
    assert megatron_gpus(read, cut.microbatches) == s.run.gpus
    assert read.namespace.seq_length == s.run.seq
    if s.architecture is not None:
        arch = s.architecture
        ns = read.namespace
        assert (ns.num_layers, ns.hidden_size, ns.ffn_hidden_size) == (arch.layers, arch.hidden, arch.ffn)
        assert (ns.num_attention_heads, ns.num_query_groups) == (arch.heads, arch.kv_heads)
        assert ns.untie_embeddings_and_output_weights is not arch.tied_embeddings
        assert ns.add_bias_linear is arch.biases


# --- torchtitan -----------------------------------------------------------------------------------


def test_llama_3_8b_cut_in_four_as_torchtitans_sections_by_hand() -> None:
    s = scenario(L8)
    assert torchtitan_sections(Stage.ZERO3, s.run, s.architecture) == {
        "parallelism": {
            "data_parallel_replicate_degree": 1,
            "data_parallel_shard_degree": 4,
            "fsdp_reshard_after_forward": "always",
            "tensor_parallel_degree": 2,
            "enable_sequence_parallel": True,
            "pipeline_parallel_degree": 2,
            "pipeline_parallel_schedule": "1F1B",
            "num_pp_microbatches": 8,
            "context_parallel_degree": 1,
            "pipeline_parallel_layers_per_stage": 16,  # 32 blocks / 2 stages
            "pipeline_parallel_first_stage_less_layers": 0,
            "pipeline_parallel_last_stage_less_layers": 0,
        },
        "training": {
            "num_tokens_per_microbatch_per_dp_rank": 4096,  # 1 sequence of 4,096 tokens
            "num_tokens_per_train_step": 131072,  # × 8 micro-batches × dp 4
            "max_context_length": 4096,
            "mixed_precision_param": "bfloat16",
        },
    }


def test_interleaving_is_torchtitans_interleaved_schedule_with_blocks_per_virtual_stage() -> None:
    s = scenario(L8_CP)
    parallelism = torchtitan_sections(Stage.ZERO2, s.run, s.architecture)["parallelism"]
    assert parallelism["pipeline_parallel_schedule"] == "Interleaved1F1B"
    assert parallelism["pipeline_parallel_layers_per_stage"] == 8  # 32 blocks / (2 stages × 2 virtual)
    assert parallelism["fsdp_reshard_after_forward"] == "never"
    assert parallelism["context_parallel_degree"] == 2


def test_data_parallelism_is_torchtitans_replicate_degree() -> None:
    s = scenario(L8)
    parallelism = torchtitan_sections(Stage.DP, s.run, s.architecture)["parallelism"]
    assert (parallelism["data_parallel_replicate_degree"], parallelism["data_parallel_shard_degree"]) == (4, 1)
    assert "fsdp_reshard_after_forward" not in parallelism


@pytest.mark.parametrize("write", [torchtitan_toml, mesh_snippet])
def test_zero1_has_no_torchtitan_nor_fsdp2_export_and_says_why(write: object) -> None:
    s = scenario(L8)
    with pytest.raises(NoConfig) as refused:
        write(Stage.ZERO1, s.run, s.architecture)  # type: ignore[operator]
    assert refused.value.parameter == "stage"
    assert "--use-distributed-optimizer is ZeRO-1" in str(refused.value)


@pytest.mark.parametrize("inputs", RUNS)
@pytest.mark.parametrize("stage", [Stage.DP, Stage.ZERO2, Stage.ZERO3])
def test_torchtitans_toml_reads_back_as_the_layout(inputs: Inputs, stage: Stage) -> None:
    s = scenario(inputs)
    text = torchtitan_toml(stage, s.run, s.architecture)
    assert tomllib.loads(text)["parallelism"] == torchtitan_sections(stage, s.run, s.architecture)["parallelism"]
    read = read_torchtitan(text, s.architecture.layers if s.architecture else None)
    cut = s.run.cut
    assert (read.cut.tp, read.cut.sp, read.cut.pp, read.cut.vpp, read.cut.cp) == (
        cut.tp,
        cut.sp,
        cut.pp,
        cut.vpp,
        cut.cp,
    )
    assert read.cut.microbatches == cut.microbatches
    # One data-parallel card shards nothing: torchtitan's shard degree of 1 is data parallelism, at any stage.
    drawn = stage if s.run.dp > 1 else Stage.DP
    assert (read.stage, read.gpus, read.batch, read.seq) == (drawn, s.run.gpus, max(s.run.batch, 1), s.run.seq)


# --- the device mesh ------------------------------------------------------------------------------


def _mesh_call(code: str) -> ast.Call:
    calls = [
        node
        for node in ast.walk(ast.parse(code))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "init_device_mesh"
    ]
    assert len(calls) == 1
    return calls[0]


@pytest.mark.parametrize("inputs", RUNS)
@pytest.mark.parametrize("stage", [Stage.DP, Stage.ZERO2, Stage.ZERO3])
def test_the_mesh_snippet_is_python_whose_mesh_spans_every_card(inputs: Inputs, stage: Stage) -> None:
    s = scenario(inputs)
    call = _mesh_call(mesh_snippet(stage, s.run))
    shape = ast.literal_eval(call.args[1])
    names = ast.literal_eval(call.keywords[0].value)
    assert call.keywords[0].arg == "mesh_dim_names"
    assert names == MESH_DIMS
    assert shape == mesh_shape(stage, s.run)
    assert math.prod(shape) == s.run.gpus
    cut = s.run.cut
    assert (shape[0], shape[3], shape[4]) == (cut.pp, cut.cp, cut.tp)
    assert shape[1] * shape[2] == s.run.dp


@pytest.mark.parametrize(
    ("inputs", "stage", "shape"),
    [
        (L8, Stage.ZERO3, (2, 1, 4, 1, 2)),  # by hand: 16 = pp 2 × dp 4 × tp 2
        (L8, Stage.DP, (2, 4, 1, 1, 2)),
        (L8_CP, Stage.ZERO2, (2, 1, 4, 2, 2)),  # 32 = 2 × 4 × 2 × 2
        (HYBRID, Stage.ZERO3, (1, 2, 4, 1, 2)),  # 16 = 2 groups × 4 × tp 2
        (BARE, Stage.ZERO3, (1, 1, 8, 1, 1)),
        # ZeRO shards over dp × cp = 16: groups of 4 are dp_shard 2 × cp 2, in 4 replicas.
        (HYBRID_CP, Stage.ZERO3, (1, 4, 2, 2, 1)),
    ],
)
def test_mesh_shapes_by_hand(inputs: Inputs, stage: Stage, shape: tuple[int, ...]) -> None:
    assert mesh_shape(stage, scenario(inputs).run) == shape


@pytest.mark.parametrize(
    ("inputs", "stage", "lines"),
    [
        (L8, Stage.ZERO3, ['dp_mesh = mesh["dp_shard"]', "fully_shard(part, mesh=dp_mesh, reshard_after_forward=True)",
                           "schedule = Schedule1F1B(stage, n_microbatches=8, loss_fn=loss_fn)",
                           '"attention_norm": SequenceParallel(),']),
        (L8, Stage.ZERO2, ["fully_shard(block, mesh=dp_mesh, reshard_after_forward=False)"]),
        (L8, Stage.DP, ['dp_mesh = mesh["dp_replicate"]', "replicate(part, device_mesh=dp_mesh)"]),
        (L8_CP, Stage.DP, ['dp_mesh = mesh["dp_replicate", "cp"]._flatten("dp_replicate_cp")']),
        (L8_CP, Stage.ZERO3, ['mesh["dp_shard", "cp"]._flatten("dp_shard_cp")', 'dp_mesh = mesh["dp_shard_cp"]',
                              "schedule = ScheduleInterleaved1F1B(stages, n_microbatches=4, loss_fn=loss_fn)"]),
        (HYBRID, Stage.ZERO3, ['dp_mesh = mesh["dp_replicate", "dp_shard"]']),
    ],
)  # fmt: skip
def test_the_mesh_snippet_shards_and_splits_by_the_layout(inputs: Inputs, stage: Stage, lines: list[str]) -> None:
    code = [line.strip() for line in mesh_snippet(stage, scenario(inputs).run).splitlines()]
    for line in lines:
        assert line in code


def test_no_sequence_parallelism_no_pipeline_leaves_their_code_out() -> None:
    code = mesh_snippet(Stage.ZERO3, scenario(HYBRID).run)
    assert "SequenceParallel" not in code
    assert "PipelineStage" not in code
    assert "parallelize_module" in code


def test_global_batch_is_micro_batch_times_micro_batches_times_dp() -> None:
    assert global_batch(scenario(L8_CP).run) == 2 * 4 * 4


# --- DeepSpeed's JSON cannot say a cut ------------------------------------------------------------


@pytest.mark.parametrize(("inputs", "parameter"), [(L8, "tp"), (L8_CP, "tp"), (HYBRID, "tp")])
def test_deepspeeds_config_of_a_cut_model_is_refused_naming_the_cut(inputs: Inputs, parameter: str) -> None:
    run = scenario(inputs).run
    assert "The model is cut across cards" in deepspeed_refused(Stage.ZERO3, run)
    with pytest.raises(NoConfig) as refused:
        deepspeed_config(Stage.ZERO3, run)
    assert refused.value.parameter == parameter


def test_a_pipeline_alone_is_refused_naming_pp() -> None:
    run = resolve(Inputs(model=ModelName.LLAMA_3_8B, gpus=8, batch=1, pp=2)).run
    with pytest.raises(NoConfig) as refused:
        deepspeed_config(Stage.ZERO1, run)
    assert refused.value.parameter == "pp"


# --- a mixture of experts -------------------------------------------------------------------------

# Mixtral 8x7B on 16 cards in 2 nodes: ep 8 (one expert a card), and tp 2 × ep 4 with whole experts.
MIX = Inputs(model=ModelName.MIXTRAL_8X7B, gpus=16, nodes=2, batch=1, seq=4096, ep=8, etp=1)
MIX_TP = Inputs(model=ModelName.MIXTRAL_8X7B, gpus=16, nodes=2, batch=1, seq=4096, tp=2, ep=4, etp=1)
# tp 2 and ep 2, the experts split as tp (etp 0): Megatron-LM says it, torchtitan has no expert tensor parallelism.
MIX_ETP = Inputs(model=ModelName.MIXTRAL_8X7B, gpus=16, nodes=2, batch=1, seq=4096, tp=2, ep=2)
# DeepSeek-V3's 61 blocks on 1,024 cards: 16 stages of 64, ep 64 (4 of its 256 routed experts a card).
DSV3 = Inputs(model=ModelName.DEEPSEEK_V3, gpus=1024, nodes=128, batch=1, seq=4096, pp=16, ep=64, etp=1)
OSS = Inputs(model=ModelName.GPT_OSS_20B, gpus=8, batch=1, seq=4096, ep=8)
QWEN = Inputs(model=ModelName.QWEN_2_5_7B, gpus=8, batch=1, seq=4096, tp=2)
MOE_RUNS = [MIX, MIX_TP, MIX_ETP, DSV3, OSS, QWEN]

# Megatron-LM's own scripts for these models (NVIDIA/Megatron-LM d98e8a6, 2026-08): the network-size options,
# copied as published. examples/mixtral/train_mixtral_8x7b_distributed.sh;
# examples/post_training/modelopt/conf/deepseek-ai/DeepSeek-R1.sh (DeepSeek-V3's shape);
# examples/post_training/modelopt/conf/openai/gpt-oss-20b.sh.
PUBLISHED = {
    ModelName.MIXTRAL_8X7B: """--disable-bias-linear --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336
        --num-attention-heads 32 --normalization RMSNorm --position-embedding-type rope --swiglu
        --untie-embeddings-and-output-weights --group-query-attention --num-query-groups 8 --num-experts 8
        --moe-router-topk 2""",
    ModelName.DEEPSEEK_V3: """--disable-bias-linear --untie-embeddings-and-output-weights --position-embedding-type rope
        --normalization RMSNorm --swiglu --num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432
        --num-attention-heads 128 --kv-channels 128 --multi-latent-attention --kv-lora-rank 512 --v-head-dim 128
        --q-lora-rank 1536 --qk-head-dim 128 --qk-layernorm --qk-pos-emb-head-dim 64 --num-experts 256
        --moe-layer-freq [0]*3+[1]*58 --moe-ffn-hidden-size 2048 --moe-router-topk 8
        --moe-shared-expert-intermediate-size 2048""",
    ModelName.GPT_OSS_20B: """--untie-embeddings-and-output-weights --normalization RMSNorm --num-layers 24
        --hidden-size 2880 --ffn-hidden-size 2880 --num-attention-heads 64 --group-query-attention
        --num-query-groups 8 --kv-channels 64 --num-experts 32 --moe-ffn-hidden-size 2880 --moe-router-topk 4
        --softmax-type learnable""",
}
# What both say: the shape's options (the published ones set more, for training, and name no parallelism).
SHAPE = (
    "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads", "group_query_attention",
    "num_query_groups", "add_bias_linear", "untie_embeddings_and_output_weights", "normalization",
    "multi_latent_attention", "q_lora_rank", "kv_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim",
    "num_experts", "moe_router_topk", "moe_shared_expert_intermediate_size", "moe_layer_freq", "softmax_type",
)  # fmt: skip


def _eval_pattern(pattern: str) -> list[int]:
    """Megatron-LM's `_eval_pattern` (megatron/training/arguments.py), as it reads --moe-layer-freq's list form."""
    assert not re.search(r"[^,\d\[\]\(\)\+\*]", pattern)
    # Megatron-LM's own reading: eval of digits, commas, brackets, + and * alone.
    return list(eval(pattern))


def _moe_freq(value: str) -> int | list[int]:
    """Megatron-LM's `moe_freq_type`: an integer, or a list expression."""
    return _eval_pattern(value) if "[" in value else int(value)


def megatron_moe_parser() -> argparse.ArgumentParser:
    """The options of a mixture of experts and its attention, as megatron/training/arguments.py declares them.

    `moe` and `mla` groups by hand there; the rest from `TransformerConfig` and `ModelParallelConfig` through its
    ArgumentGroupFactory (a field's name with dashes; a False bool a store_true flag; add_bias_linear's
    --disable-bias-linear).
    """
    p = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for name, default in (
        ("--num-layers", None),
        ("--hidden-size", None),
        ("--ffn-hidden-size", None),
        ("--num-attention-heads", None),
        ("--num-query-groups", 1),
        ("--kv-channels", None),
        ("--num-experts", None),
        ("--moe-router-topk", 2),
        ("--moe-ffn-hidden-size", None),
        ("--moe-shared-expert-intermediate-size", None),
        ("--q-lora-rank", None),
        ("--kv-lora-rank", 32),
        ("--qk-head-dim", 128),
        ("--qk-pos-emb-head-dim", 64),
        ("--v-head-dim", 128),
        ("--expert-model-parallel-size", 1),
        ("--expert-tensor-parallel-size", None),
        ("--tensor-model-parallel-size", 1),
        ("--pipeline-model-parallel-size", 1),
    ):
        p.add_argument(name, type=int, default=default)
    for flag in (
        "--group-query-attention",
        "--untie-embeddings-and-output-weights",
        "--multi-latent-attention",
        "--add-qkv-bias",
        "--moe-shared-expert-gate",
        "--swiglu",
        "--qk-layernorm",
    ):
        p.add_argument(flag, action="store_true")
    p.add_argument("--disable-bias-linear", action="store_false", dest="add_bias_linear")
    p.add_argument("--moe-layer-freq", type=_moe_freq, default=1)
    p.add_argument("--softmax-type", choices=["vanilla", "off-by-one", "learnable"], default="vanilla")
    p.add_argument("--normalization", default="LayerNorm")
    return p  # fmt: skip


def _parsed(text: str) -> argparse.Namespace:
    ns, _ = megatron_moe_parser().parse_known_args(shlex.split(text.replace("\\\n", " "), comments=True))
    return ns


@pytest.mark.parametrize("inputs", [MIX, DSV3, OSS])
def test_a_mixture_of_experts_shape_is_megatrons_own_script(inputs: Inputs) -> None:
    s = scenario(inputs)
    assert inputs.model is not None
    ours, theirs = _parsed(megatron_text(Stage.ZERO1, s.run, s.architecture)), _parsed(PUBLISHED[inputs.model])
    # A head's width too, where it is not hidden ÷ heads (gpt-oss: 64, not 2,880 ÷ 64); latent attention has none.
    names = (*SHAPE, "kv_channels") if s.architecture and s.architecture.mla is None else SHAPE
    assert {name: getattr(ours, name) for name in names} == {name: getattr(theirs, name) for name in names}


@pytest.mark.parametrize("inputs", MOE_RUNS)
@pytest.mark.parametrize("stage", list(Stage))
def test_megatrons_experts_read_back_as_the_run(inputs: Inputs, stage: Stage) -> None:
    s = scenario(inputs)
    arch, cut = s.architecture, s.run.cut
    assert arch is not None
    text = megatron_text(stage, s.run, arch)
    ns = _parsed(text)
    read = read_megatron(text)
    assert (read.cut.ep, read.cut.expert_tp) == (cut.ep, cut.expert_tp)
    assert megatron_gpus(read, cut.microbatches) == s.run.gpus
    if arch.moe is None:  # Qwen2.5 7B: dense, its biases on q, k and v alone
        assert (ns.num_experts, ns.expert_model_parallel_size, ns.add_qkv_bias) == (None, 1, True)
        assert "--expert-model-parallel-size" not in text
        return
    moe = arch.moe
    assert (ns.num_experts, ns.moe_router_topk, ns.moe_ffn_hidden_size) == (moe.experts, moe.top_k, moe.expert_ffn)
    assert (ns.moe_shared_expert_intermediate_size or 0) == moe.shared_ffn
    freq = ns.moe_layer_freq
    pattern = freq if isinstance(freq, list) else [int(i % freq == 0) for i in range(arch.layers)]
    assert pattern == [int(arch.has_experts(n)) for n in range(1, arch.layers + 1)]
    assert (ns.expert_model_parallel_size, ns.expert_tensor_parallel_size) == (cut.ep, cut.expert_tp)
    # Megatron-LM's world: tp × cp × dp = etp × ep × edp on each stage.
    assert cut.tp * cut.cp * s.run.dp == cut.expert_tp * cut.ep * cut.edp(s.run.gpus)


@pytest.mark.parametrize(
    ("inputs", "line"),
    [
        # By hand: 16 GPUs ÷ (ep 8 × etp 1) = edp 2; 8 experts ÷ 8 = 1 a card.
        (MIX, "# The experts: a stage's 16 GPUs = ep 8 × etp 1 × edp 2; each GPU keeps 1 of the 8 routed experts a "
              "block."),
        (MIX_ETP, "# The experts: a stage's 16 GPUs = ep 2 × etp 2 × edp 4; each GPU keeps 4 of the 8 routed experts a "
                  "block, each split 2 ways."),
        # 1,024 ÷ 16 stages = 64 a stage, all of them ep; 256 ÷ 64 = 4.
        (DSV3, "# The experts: a stage's 64 GPUs = ep 64 × etp 1 × edp 1; each GPU keeps 4 of the 256 routed experts a "
               "block."),
    ],
)  # fmt: skip
def test_megatrons_notes_say_where_the_experts_go(inputs: Inputs, line: str) -> None:
    s = scenario(inputs)
    assert line in megatron_text(Stage.ZERO1, s.run, s.architecture).splitlines()


def test_the_model_is_named_with_its_experts_and_weights() -> None:
    # Mistral's figures for Mixtral 8x7B: 46.7B weights, 12.9B used by a token (to the weight, by its config).
    assert model_note("Mixtral 8x7B", scenario(MIX).architecture) == (
        "# The model: Mixtral 8x7B, a mixture of experts: 8 routed experts a block in 32 of its 32 blocks, 2 a token "
        "(46,702,792,704 weights, 12,879,925,248 of them a token's)."
    )
    assert "256 routed experts a block in 58 of its 61 blocks" in model_note("DeepSeek-V3", scenario(DSV3).architecture)
    assert model_note("Llama 3 8B", scenario(L8).architecture) == "# The model: Llama 3 8B."


@pytest.mark.parametrize(("inputs", "ep"), [(MIX, 8), (MIX_TP, 4), (DSV3, 64), (OSS, 8)])
@pytest.mark.parametrize("stage", [Stage.ZERO2, Stage.ZERO3])
def test_torchtitans_expert_parallel_degree_reads_back(inputs: Inputs, ep: int, stage: Stage) -> None:
    s = scenario(inputs)
    text = torchtitan_toml(stage, s.run, s.architecture)
    assert tomllib.loads(text)["parallelism"]["expert_parallel_degree"] == ep
    read = read_torchtitan(text, s.architecture.layers if s.architecture else None)
    assert (read.cut.ep, read.cut.expert_tp, read.gpus) == (ep, 1, s.run.gpus)


def test_a_dense_models_torchtitan_names_no_experts() -> None:
    s = scenario(L8)
    assert "expert_parallel_degree" not in torchtitan_toml(Stage.ZERO3, s.run, s.architecture)


@pytest.mark.parametrize(
    ("inputs", "stage", "parameter", "words"),
    [
        (MIX_ETP, Stage.ZERO3, "etp", "etp=2 splits each expert across GPUs"),
        (MIX, Stage.DP, "ep", "ep=8 under data parallelism"),
    ],
)
@pytest.mark.parametrize("write", [torchtitan_toml, mesh_snippet])
def test_torchtitan_and_its_mesh_refuse_what_its_experts_cannot_do(
    inputs: Inputs, stage: Stage, parameter: str, words: str, write: object
) -> None:
    s = scenario(inputs)
    with pytest.raises(NoConfig) as refused:
        write(stage, s.run, s.architecture)  # type: ignore[operator]
    assert refused.value.parameter == parameter
    assert words in str(refused.value)


@pytest.mark.parametrize(
    ("inputs", "stage", "shape"),
    [
        (MIX, Stage.ZERO3, (1, 1, 2, 8)),  # by hand: dp_shard 16 × cp 1 × tp 1 = 16 = efsdp 2 × ep 8
        (MIX_TP, Stage.ZERO3, (1, 1, 4, 4)),  # dp_shard 8 × tp 2 = 16 = efsdp 4 × ep 4
        (DSV3, Stage.ZERO2, (16, 1, 1, 64)),  # a stage's 64 = efsdp 1 × ep 64
    ],
)
def test_the_experts_mesh_shapes_by_hand(inputs: Inputs, stage: Stage, shape: tuple[int, ...]) -> None:
    s = scenario(inputs)
    assert expert_mesh_shape(stage, s.run) == shape
    code = mesh_snippet(stage, s.run, s.architecture)
    names = '("pp", "dp_replicate", "efsdp", "ep")'
    assert f'expert_mesh = mesh._flatten("world")._unflatten(0, {shape!r}, {names})' in code.splitlines()
    assert 'fully_shard(block.moe.experts, mesh=expert_mesh["efsdp"], ' in code


_MESH_RUN = """
import json, sys, warnings
warnings.simplefilter("ignore")
import torch.distributed as dist
from torch.testing._internal.distributed.fake_pg import FakeStore
dist.init_process_group("fake", rank=0, world_size={gpus}, store=FakeStore())
from torch.distributed.device_mesh import init_device_mesh
{mesh}
{expert_mesh}
print(json.dumps([expert_mesh.mesh.tolist(), expert_mesh["ep"].size(), expert_mesh["efsdp"].size()]))
"""


@pytest.mark.parametrize(("inputs", "stage"), [(MIX, Stage.ZERO3), (MIX_TP, Stage.ZERO2)])
def test_the_experts_mesh_is_built_by_pytorch_with_neighbouring_ep_groups(inputs: Inputs, stage: Stage) -> None:
    """The snippet's two meshes run by PyTorch itself on a fake process group, on the CPU."""
    s = scenario(inputs)
    lines = mesh_snippet(stage, s.run, s.architecture).splitlines()
    mesh = next(line for line in lines if line.startswith("mesh = ")).replace('"cuda"', '"cpu"')
    expert = next(line for line in lines if line.startswith("expert_mesh = "))
    code = _MESH_RUN.format(gpus=s.run.gpus, mesh=mesh, expert_mesh=expert)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    ranks, ep, efsdp = json.loads(done.stdout.splitlines()[-1])
    cut = s.run.cut
    assert (ep, efsdp) == (cut.ep, expert_mesh_shape(stage, s.run)[2])
    # Each ep group is ep neighbouring ranks, as Megatron-LM's expert order (etp 1, then ep) puts them.
    groups = [group for pp in ranks for rep in pp for group in rep]
    assert groups == [list(range(start, start + cut.ep)) for start in range(0, s.run.gpus, cut.ep)]


@pytest.mark.parametrize(("inputs", "parameter"), [(MIX, "ep"), (OSS, "ep"), (MIX_TP, "tp")])
def test_deepspeeds_config_of_experts_across_cards_is_refused_naming_ep(inputs: Inputs, parameter: str) -> None:
    run = scenario(inputs).run
    with pytest.raises(NoConfig) as refused:
        deepspeed_config(Stage.ZERO3, run)
    assert refused.value.parameter == parameter
    assert f"ep={run.cut.ep})" in str(refused.value)


def test_a_dense_models_etp_changes_nothing_torchtitan_writes() -> None:
    # etp=1 on Llama 3 8B names no experts: tp 2 is written as ever.
    s = scenario(Inputs(model=ModelName.LLAMA_3_8B, gpus=8, batch=1, tp=2, etp=1))
    assert (
        tomllib.loads(torchtitan_toml(Stage.ZERO3, s.run, s.architecture))["parallelism"]["tensor_parallel_degree"] == 2
    )
    # Mixtral's experts whole without ep, while tp splits the rest: torchtitan splits them over tp, so refuses.
    s = scenario(Inputs(model=ModelName.MIXTRAL_8X7B, gpus=8, batch=1, tp=2, etp=1))
    with pytest.raises(NoConfig) as refused:
        torchtitan_toml(Stage.ZERO3, s.run, s.architecture)
    assert refused.value.parameter == "etp"


@pytest.mark.parametrize(
    ("model", "vocab", "times"),
    [
        (ModelName.MIXTRAL_8X7B, 32_000, 250),
        (ModelName.QWEN_2_5_7B, 152_064, 1_188),
        (ModelName.DEEPSEEK_V3, 129_280, 1_010),
        (ModelName.GPT_OSS_20B, 201_088, 1_571),
    ],
)
def test_each_presets_vocabulary_is_megatrons_padding_already(model: ModelName, vocab: int, times: int) -> None:
    """Each preset's vocabulary is a multiple of Megatron-LM's padding, so the arguments need not say it.

    Megatron-LM pads the tokenizer's vocabulary to a multiple of --make-vocab-size-divisible-by, 128 by default
    (by hand: vocab = 128 × times).
    """
    arch = scenario(Inputs(model=model, gpus=8)).architecture
    assert arch is not None
    assert arch.vocab == vocab == 128 * times
