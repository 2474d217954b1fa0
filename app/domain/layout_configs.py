"""The layout (the model cut across cards, and ZeRO over what is left) as Megatron-LM, torchtitan and DTensor write it.

Three exports of one run under one stage, each read back where its format allows:

- Megatron-LM's command-line arguments (`megatron/training/arguments.py`, and the config dataclasses its
  `ArgumentGroupFactory` turns into options: `ModelParallelConfig`, `TransformerConfig`, `TrainingConfig`),
  read back by an argparse parser declaring the same options (`read_megatron`);
- torchtitan's `[parallelism]` and `[training]` sections, the fields of its `ParallelismConfig` and
  `TrainingConfig` (`torchtitan/config/configs.py`), as TOML, read back with `tomllib` (`read_torchtitan`);
- PyTorch code: a 5-D device mesh `(pp, dp_replicate, dp_shard, cp, tp)`, `parallelize_module` over its
  tensor-parallel dimension and `fully_shard` over its data-parallel ones (`mesh_snippet`).

The mesh's dimensions are Megatron's order, tensor parallelism the fastest-varying rank (`parallel`'s module
note): a card's rank is `tp_rank + tp × (cp_rank + cp × (dp_rank + dp × pp_rank))`, so `init_device_mesh`'s
row-major ranks put a tensor-parallel group on neighbouring cards, inside a node.

ZeRO's stage over the data-parallel group, in each framework (docs/export.md, "The layout"):

| stage | Megatron-LM | torchtitan | FSDP2 + DTensor |
| --- | --- | --- | --- |
| dp | DDP (no flag) | `data_parallel_replicate_degree` = dp | `replicate` |
| ZeRO-1 | `--use-distributed-optimizer` | none: refused | none: refused |
| ZeRO-2 | Megatron-FSDP, `optim_grads` | FSDP, `fsdp_reshard_after_forward = "never"` | `reshard_after_forward=False` |
| ZeRO-3 | Megatron-FSDP, `optim_grads_params` | FSDP, `"always"` | `reshard_after_forward=True` |
"""

from __future__ import annotations

import argparse
import shlex
import tomllib
from dataclasses import dataclass
from typing import Any

from app.domain.activations import Recompute
from app.domain.architecture import Architecture
from app.domain.configs import NoConfig, _bf16, _kept, _pure_bf16
from app.domain.parallel import Cut, stage_blocks
from app.domain.recipes import GradAccum
from app.domain.run import Run
from app.domain.stages import Stage

MESH_DIMS = ("pp", "dp_replicate", "dp_shard", "cp", "tp")
"""The device mesh's dimensions, slowest-varying first: Megatron's order (tp fastest), as torchtitan names them."""

_SHARDING = {Stage.ZERO2: "optim_grads", Stage.ZERO3: "optim_grads_params"}
"""Megatron-FSDP's `--data-parallel-sharding-strategy` for ZeRO-2 and ZeRO-3 (`optim` is ZeRO-1's, which the
distributed optimizer writes without Megatron-FSDP)."""
_RESHARD = {Stage.ZERO2: "never", Stage.ZERO3: "always"}
"""torchtitan's `fsdp_reshard_after_forward`: ZeRO-2 keeps the gathered weights after the forward, ZeRO-3 frees them."""


@dataclass(frozen=True)
class DataGroups:
    """The data-parallel group split as HSDP splits it: replicas of a shard group (one group: replicate = 1)."""

    replicate: int
    shard: int


def data_groups(stage: Stage, run: Run) -> DataGroups:
    """How the data-parallel degree `run.dp` splits under `stage`: DDP replicates over it all, FSDP shards.

    ZeRO shards over the data-parallel and context-parallel cards together (`Run.zero_group`, dp × cp, as
    Megatron-LM's distributed optimizer does): hybrid sharding keeps `run.replicas` whole copies, each split
    across a shard group of `run.shards` = dp_shard × cp cards, so its replicas must divide dp.
    """
    if stage is Stage.DP:
        return DataGroups(run.dp, 1)
    if run.dp % run.replicas:
        raise NoConfig(
            "shard",
            f"shard={run.shards:,} splits the {run.zero_group:,} cards ZeRO shards over (dp × cp) into "
            f"{run.replicas:,} groups, which do not divide the {run.dp:,} data-parallel cards: a device mesh "
            "cannot lay them out. Choose a shard group that is a multiple of cp.",
        )
    return DataGroups(run.replicas, run.dp // run.replicas)


def zero1_refused(framework: str) -> NoConfig:
    """FSDP has no ZeRO-1: its shards hold the gradients too, or nothing."""
    return NoConfig(
        "stage",
        f"{framework} has no ZeRO-1: its data parallelism keeps everything on every card (DDP) or shards the "
        "gradients and the optimizer state together (FSDP, ZeRO-2 or 3). Choose stage=zero2 for the nearest, "
        "or Megatron-LM's arguments, whose --use-distributed-optimizer is ZeRO-1.",
    )


def global_batch(run: Run) -> int:
    """Sequences a step trains on: the micro-batch × micro-batches × the data-parallel degree.

    Context and tensor parallelism split a sequence or a layer, not the batch: their cards share one micro-batch.
    """
    return max(run.batch, 1) * run.cut.microbatches * run.dp


# --- Megatron-LM -----------------------------------------------------------------------------------


def megatron_args(stage: Stage, run: Run, arch: Architecture | None = None) -> tuple[str, ...]:
    """The run as Megatron-LM's command-line arguments, each option followed by its value if it takes one.

    The names are those of Megatron-LM's `megatron/training/arguments.py` (main, 2026-08): a boolean dataclass
    field is a flag (`--sequence-parallel`, `--bf16`); virtual stages are `--num-virtual-stages-per-pipeline-rank`
    (the newer of its two spellings, which also takes uneven stages). A micro-batch of 0 (no activations counted)
    writes 1, the least Megatron-LM takes.
    """
    cut = run.cut
    args = [
        *("--tensor-model-parallel-size", str(cut.tp)),
        *("--pipeline-model-parallel-size", str(cut.pp)),
    ]
    if cut.vpp > 1:
        args += ["--num-virtual-stages-per-pipeline-rank", str(cut.vpp)]
    if split := uneven_split(run, arch):
        args += _megatron_stages(split)
    args += ["--context-parallel-size", str(cut.cp)]
    if arch is not None and arch.moe is not None:
        # Written for every mixture of experts, 1 too: Megatron-LM's etp defaults to tp, which these say outright.
        args += [
            *("--expert-model-parallel-size", str(cut.ep)),
            *("--expert-tensor-parallel-size", str(cut.expert_tp)),
        ]
    if cut.sp:
        args.append("--sequence-parallel")
    if stage is not Stage.DP:
        # Megatron-FSDP v1 runs over the distributed optimizer (arguments.py turns it on, with a warning):
        # written, so the arguments say what runs.
        args.append("--use-distributed-optimizer")
    if stage in _SHARDING:
        args += ["--use-megatron-fsdp", "--data-parallel-sharding-strategy", _SHARDING[stage]]
    groups = data_groups(stage, run)
    if groups.replicate > 1 and stage is not Stage.DP:
        # Hybrid sharding: that many copies of the distributed optimizer, each over its shard group.
        args += ["--num-distributed-optimizer-instances", str(groups.replicate)]
    args += [
        *("--micro-batch-size", str(max(run.batch, 1))),
        *("--global-batch-size", str(global_batch(run))),
        *("--seq-length", str(run.seq)),
    ]
    if _bf16(run.recipe):
        args.append("--bf16")
    if _kept(run) is GradAccum.FP32 and _bf16(run.recipe):
        args.append("--accumulate-allreduce-grads-in-fp32")
    if run.activations is not None and run.activations.recompute is not Recompute.NONE:
        args += ["--recompute-granularity", run.activations.recompute.value]
        if run.activations.recompute is Recompute.FULL:
            args += ["--recompute-method", "uniform", "--recompute-num-layers", "1"]
    if arch is not None:
        args += _megatron_shape(arch, run.seq)
    return tuple(args)


def uneven_split(run: Run, arch: Architecture | None) -> tuple[int, ...]:
    """Each stage's blocks where they do not divide evenly (`parallel.stage_blocks`); empty where they do."""
    if arch is None or run.cut.vpp > 1 or arch.layers % run.cut.pp == 0:
        return ()
    return stage_blocks(arch.layers, run.cut.pp)


def split_words(split: tuple[int, ...]) -> str:
    """Stages' blocks in words, runs of equals counted: "7, 8 × 14, 7"."""
    runs: list[list[int]] = []
    for n in split:
        if runs and runs[-1][0] == n:
            runs[-1][1] += 1
        else:
            runs.append([n, 1])
    return ", ".join(f"{n} × {count}" if count > 1 else str(n) for n, count in runs)


def _megatron_stages(split: tuple[int, ...]) -> list[str]:
    """Megatron-LM's arguments for uneven stages: the first's and the last's blocks, or its layout string.

    With `--decoder-first/last-pipeline-num-layers` the rest split evenly between the middle stages
    (`TransformerConfig`'s check); where the middle ones differ, `--pipeline-model-parallel-layout` (E the
    embedding, t a block, L the loss; | between stages).
    """
    if len(set(split[1:-1])) <= 1:
        return [
            *("--decoder-first-pipeline-num-layers", str(split[0])),
            *("--decoder-last-pipeline-num-layers", str(split[-1])),
        ]
    last = len(split) - 1
    layout = "|".join(f"{'E' * (i == 0)}t*{n}{'L' * (i == last)}" for i, n in enumerate(split))
    return ["--pipeline-model-parallel-layout", layout]


def _torchtitan_stages(split: tuple[int, ...]) -> tuple[int, int, int] | None:
    """The `pipeline_parallel_layers_per_stage` and first and last stages' fewer layers for a split.

    torchtitan's `generate_llm_fqn_per_model_part` counts the embedding and the output layer as that many blocks more
    and gives each stage `layers_per_stage` of the total: the middle stages must keep the most, the first and
    last at most one fewer. None where the split is otherwise (its extras would go to the first stages).
    """
    top = max(split)
    if any(n != top for n in split[1:-1]):
        return None
    return top, top - split[0], top - split[-1]


def _megatron_shape(arch: Architecture, seq: int) -> list[str]:
    """The model's shape as Megatron-LM's network-size arguments (a Llama's: RMSNorm, SwiGLU, rotary, no biases)."""
    args = [
        *("--num-layers", str(arch.layers)),
        *("--hidden-size", str(arch.hidden)),
        *("--ffn-hidden-size", str(arch.ffn)),
        *("--num-attention-heads", str(arch.heads)),
    ]
    if arch.kv_heads != arch.heads:
        args += ["--group-query-attention", "--num-query-groups", str(arch.kv_heads)]
    args += ["--max-position-embeddings", str(max(arch.positions, seq))]
    args += ["--position-embedding-type", "learned_absolute" if arch.positions else "rope"]
    if arch.gated_mlp:
        args.append("--swiglu")
    if not arch.layer_norm:
        args += ["--normalization", "RMSNorm"]
    if not arch.biases and not arch.o_bias:
        # gpt-oss's biases on every projection and expert are Megatron-LM's default, add_bias_linear.
        args.append("--disable-bias-linear")
        if arch.qkv_bias:  # Qwen2's: on the query, key and value projections alone
            args.append("--add-qkv-bias")
    if arch.sinks:
        args += ["--softmax-type", "learnable"]  # a learned logit per head: gpt-oss's attention sinks
    if not arch.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    return args + _megatron_attention(arch) + _megatron_experts(arch)


def _megatron_attention(arch: Architecture) -> list[str]:
    """A head's width where it is not hidden ÷ heads (`--kv-channels`), or DeepSeek's latent attention's ranks."""
    if arch.mla is None:
        wide = arch.head_dim * arch.heads != arch.hidden
        return ["--kv-channels", str(arch.head_dim)] if wide else []
    mla = arch.mla
    args = ["--multi-latent-attention"]
    if mla.q_rank:  # 0: the queries are not compressed, Megatron-LM's None
        args += ["--q-lora-rank", str(mla.q_rank)]
    return [
        *args,
        *("--kv-lora-rank", str(mla.kv_rank)),
        *("--qk-head-dim", str(mla.nope)),
        *("--qk-pos-emb-head-dim", str(mla.rope)),
        *("--v-head-dim", str(mla.v_dim)),
    ]


def _megatron_experts(arch: Architecture) -> list[str]:
    """A mixture of experts as Megatron-LM's `moe` arguments (none for a dense model)."""
    moe = arch.moe
    if moe is None:
        return []
    args = [
        *("--num-experts", str(moe.experts)),
        *("--moe-router-topk", str(moe.top_k)),
        *("--moe-ffn-hidden-size", str(moe.expert_ffn)),
    ]
    if moe.shared_ffn:
        args += ["--moe-shared-expert-intermediate-size", str(moe.shared_ffn)]
    if moe.shared_gate:
        args.append("--moe-shared-expert-gate")
    if pattern := moe_layer_freq(arch):
        args += ["--moe-layer-freq", pattern]
    return args


def moe_layer_freq(arch: Architecture) -> str:
    """Which blocks have experts, as Megatron-LM's `--moe-layer-freq`; empty where all do (its default, 1).

    Every `every`-th block from the first is its integer form (block i has experts where i % N == 0, as the
    app's `Moe.every`); with dense first blocks (DeepSeek-V3's `first_k_dense_replace`), its list form, runs
    of 0 (dense) and 1 (experts) as Megatron-LM's `moe_freq_type` evaluates them: "[0]*3+[1]*58".
    """
    moe = arch.moe
    if moe is None or (moe.dense_first == 0 and moe.every == 1):
        return ""
    if moe.dense_first == 0:
        return str(moe.every)
    runs: list[list[int]] = []
    for block in range(1, arch.layers + 1):
        bit = int(arch.has_experts(block))
        if runs and runs[-1][0] == bit:
            runs[-1][1] += 1
        else:
            runs.append([bit, 1])
    return "+".join(f"[{bit}]*{count}" for bit, count in runs)


def megatron_text(stage: Stage, run: Run, arch: Architecture | None = None) -> str:
    """The arguments as lines to paste after `pretrain_gpt.py`, each option on its own, with what they mean."""
    args = megatron_args(stage, run, arch)
    lines: list[str] = []
    for arg in args:
        if arg.startswith("--"):
            lines.append(arg)
        else:
            lines[-1] += " " + shlex.quote(arg)
    cut = run.cut
    notes = [
        f"# Megatron-LM's arguments for this run under {stage.info.title}: {run.gpus:,} GPUs = tp {cut.tp} × "
        f"pp {cut.pp} × cp {cut.cp} × dp {run.dp:,}.",
        f"# --global-batch-size = micro-batch {max(run.batch, 1)} × {cut.microbatches} micro-batches × dp {run.dp:,}.",
        *_megatron_notes(stage, run, arch),
    ]
    return "\n".join([*notes, " \\\n".join(lines)]) + "\n"


def _megatron_notes(stage: Stage, run: Run, arch: Architecture | None) -> list[str]:
    notes = []
    if stage is Stage.ZERO1:
        notes.append("# ZeRO-1: the distributed optimizer splits the optimizer state (and fp32 master) across dp.")
    elif stage in _SHARDING:
        notes.append(
            f"# {stage.info.title}: Megatron-FSDP, sharding strategy {_SHARDING[stage]} "
            "(optim is ZeRO-1, optim_grads ZeRO-2, optim_grads_params ZeRO-3)."
        )
    if _pure_bf16(run.recipe):
        notes.append("# Pure bf16 (no fp32 master copy): Megatron-LM keeps one unless told otherwise; not written.")
    if arch is None:
        notes.append("# The model's shape (--num-layers, --hidden-size, ...) is not known for a weight count.")
    elif arch.moe is not None:
        notes.append(experts_note(run, arch))
        if arch.moe.router_bias:
            notes.append(
                "# The router's bias per expert is not written: DeepSeek-V3's (balancing without a loss) is "
                "--moe-router-enable-expert-bias with --moe-router-score-function sigmoid."
            )
    if split := uneven_split(run, arch):
        notes.append(
            f"# Uneven stages of {split_words(split)} blocks: the extra blocks on the middle stages, as the first "
            "and last keep the embedding and the output layer."
        )
    return notes


def model_note(title: str, arch: Architecture | None) -> str:
    """An export's first line: the model it is for, and a mixture of experts' experts and weights."""
    if arch is None or arch.moe is None:
        return f"# The model: {title}."
    moe = arch.moe
    return (
        f"# The model: {title}, a mixture of experts: {moe.experts:,} routed experts a block in {arch.expert_blocks:,} "
        f"of its {arch.layers:,} blocks, {moe.top_k:,} a token ({arch.params:,} weights, {arch.active_params:,} "
        "of them a token's)."
    )


def experts_note(run: Run, arch: Architecture) -> str:
    """Where a mixture of experts' routed experts go: a stage's cards as ep × etp × edp, and each card's experts."""
    cut, experts = run.cut, arch.moe.experts if arch.moe else 0
    stage = run.gpus // cut.pp
    split = f", each split {cut.expert_tp} ways" if cut.expert_tp > 1 else ""
    return (
        f"# The experts: a stage's {stage:,} GPUs = ep {cut.ep} × etp {cut.expert_tp} × edp {cut.edp(run.gpus):,}; "
        f"each GPU keeps {experts // cut.ep:,} of the {experts:,} routed experts a block{split}."
    )


def megatron_parser() -> argparse.ArgumentParser:
    """An argparse parser for the options `megatron_args` writes, declared as Megatron-LM declares them."""
    p = argparse.ArgumentParser(prog="pretrain_gpt.py", add_help=False, allow_abbrev=False)
    for name, default in (
        ("--tensor-model-parallel-size", 1),
        ("--pipeline-model-parallel-size", 1),
        ("--num-virtual-stages-per-pipeline-rank", None),
        ("--decoder-first-pipeline-num-layers", None),
        ("--decoder-last-pipeline-num-layers", None),
        ("--context-parallel-size", 1),
        ("--num-distributed-optimizer-instances", 1),
        ("--micro-batch-size", None),
        ("--global-batch-size", None),
        ("--seq-length", None),
        ("--recompute-num-layers", None),
        ("--num-layers", None),
        ("--hidden-size", None),
        ("--ffn-hidden-size", None),
        ("--num-attention-heads", None),
        ("--num-query-groups", 1),
        ("--max-position-embeddings", None),
        ("--expert-model-parallel-size", 1),
        ("--expert-tensor-parallel-size", None),
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
    ):
        p.add_argument(name, type=int, default=default)
    for flag in (
        "--sequence-parallel",
        "--use-distributed-optimizer",
        "--use-megatron-fsdp",
        "--bf16",
        "--accumulate-allreduce-grads-in-fp32",
        "--group-query-attention",
        "--swiglu",
        "--untie-embeddings-and-output-weights",
        "--add-qkv-bias",
        "--multi-latent-attention",
        "--moe-shared-expert-gate",
    ):
        p.add_argument(flag, action="store_true")
    # Megatron-LM's `moe_freq_type` reads an integer or a list expression: kept as written, for the reader.
    p.add_argument("--moe-layer-freq", default="1")
    p.add_argument("--softmax-type", choices=["vanilla", "off-by-one", "learnable"], default="vanilla")
    p.add_argument("--disable-bias-linear", action="store_false", dest="add_bias_linear")
    p.add_argument("--data-parallel-sharding-strategy", default="optim_grads_params",
                   choices=["no_shard", "optim", "optim_grads", "optim_grads_params"])  # fmt: skip
    p.add_argument("--recompute-granularity", choices=["full", "selective"], default=None)
    p.add_argument("--recompute-method", choices=["uniform", "block"], default=None)
    p.add_argument("--normalization", choices=["LayerNorm", "RMSNorm"], default="LayerNorm")
    p.add_argument("--position-embedding-type", default="learned_absolute")
    p.add_argument("--pipeline-model-parallel-layout", default=None)
    return p


@dataclass(frozen=True)
class MegatronRead:
    """What Megatron-LM's arguments say of the layout: the cut, the stage and the micro-batch."""

    cut: Cut
    stage: Stage
    batch: int
    gpus: int
    namespace: argparse.Namespace


def read_megatron(text: str) -> MegatronRead:
    """Megatron-LM's arguments (as `megatron_text` writes them, comments and line breaks allowed) read back.

    The cards are tp × pp × cp × dp, dp from the global batch: micro-batch × micro-batches × dp, where the
    micro-batches are those of one step (Megatron-LM's `get_num_microbatches`), which the arguments do not
    say apart from dp; read with one micro-batch a step unless `microbatches` is given.
    """
    # A backslash before a line break continues the line, as a shell reads it.
    words = shlex.split(text.replace("\\\n", " "), comments=True)
    ns = megatron_parser().parse_args(words)
    if not ns.use_distributed_optimizer:
        stage = Stage.DP
    elif not ns.use_megatron_fsdp or ns.data_parallel_sharding_strategy == "optim":
        stage = Stage.ZERO1
    else:
        stage = {"optim_grads": Stage.ZERO2, "optim_grads_params": Stage.ZERO3}.get(
            ns.data_parallel_sharding_strategy, Stage.DP
        )
    cut = Cut(
        tp=ns.tensor_model_parallel_size,
        sp=ns.sequence_parallel,
        pp=ns.pipeline_model_parallel_size,
        vpp=ns.num_virtual_stages_per_pipeline_rank or 1,
        cp=ns.context_parallel_size,
        ep=ns.expert_model_parallel_size,
        etp=ns.expert_tensor_parallel_size or 0,  # None: as tp, the app's 0
    )
    return MegatronRead(cut, stage, ns.micro_batch_size, cut.model_parallel, ns)


def megatron_gpus(read: MegatronRead, microbatches: int) -> int:
    """The cards the arguments describe, given the micro-batches a step: tp × pp × cp × global ÷ (mbs × m)."""
    dp, rest = divmod(int(read.namespace.global_batch_size), read.batch * microbatches)
    if rest:
        raise ValueError("the global batch is not a whole number of micro-batches on every data-parallel rank")
    return read.cut.model_parallel * dp


# --- torchtitan ------------------------------------------------------------------------------------


def torchtitan_sections(stage: Stage, run: Run, arch: Architecture | None = None) -> dict[str, dict[str, Any]]:
    """The `[parallelism]` and `[training]` for the run: the fields of its config dataclasses.

    Raises NoConfig at ZeRO-1, which torchtitan has not (`zero1_refused`).
    """
    if stage is Stage.ZERO1:
        raise zero1_refused("torchtitan")
    experts_refused(stage, run, "torchtitan")
    cut, groups = run.cut, data_groups(stage, run)
    parallelism: dict[str, Any] = {
        "data_parallel_replicate_degree": groups.replicate,
        "data_parallel_shard_degree": groups.shard,
    }
    if stage in _RESHARD:
        parallelism["fsdp_reshard_after_forward"] = _RESHARD[stage]
    parallelism |= {
        "tensor_parallel_degree": cut.tp,
        "enable_sequence_parallel": cut.sp,
        "pipeline_parallel_degree": cut.pp,
        "pipeline_parallel_schedule": "Interleaved1F1B" if cut.vpp > 1 else "1F1B",
        "num_pp_microbatches": cut.microbatches,
        "context_parallel_degree": cut.cp,
    }
    if cut.ep > 1 or (arch is not None and arch.moe is not None):
        parallelism["expert_parallel_degree"] = cut.ep
    split = uneven_split(run, arch)
    titan = _torchtitan_stages(split) if split else None
    if arch is not None and cut.pp > 1 and (titan or not split):
        # torchtitan's defaults keep one block fewer on the first and last stages (for the embedding and
        # the output layer); the app draws each stage with an equal run of blocks where they divide evenly.
        per_stage, first_less, last_less = titan or (arch.layers // (cut.pp * cut.vpp), 0, 0)
        parallelism["pipeline_parallel_layers_per_stage"] = per_stage
        parallelism["pipeline_parallel_first_stage_less_layers"] = first_less
        parallelism["pipeline_parallel_last_stage_less_layers"] = last_less
    micro = max(run.batch, 1) * run.seq
    training: dict[str, Any] = {
        "num_tokens_per_microbatch_per_dp_rank": micro,
        "num_tokens_per_train_step": global_batch(run) * run.seq,
        "max_context_length": run.seq,
        "mixed_precision_param": "bfloat16" if _bf16(run.recipe) else "float32",
    }
    if _pure_bf16(run.recipe):
        training["dtype"] = "bfloat16"
    return {"parallelism": parallelism, "training": training}


def torchtitan_toml(stage: Stage, run: Run, arch: Architecture | None = None) -> str:
    """The sections as TOML, with a comment on where each goes."""
    sections = torchtitan_sections(stage, run, arch)
    cut = run.cut
    lines = [
        f"# torchtitan's parallelism for this run under {stage.info.title}: {run.gpus:,} GPUs = "
        f"pp {cut.pp} × dp_replicate {sections['parallelism']['data_parallel_replicate_degree']:,} × "
        f"dp_shard {sections['parallelism']['data_parallel_shard_degree']:,} × cp {cut.cp} × tp {cut.tp}.",
        "# The fields of torchtitan's ParallelismConfig and TrainingConfig (torchtitan/config/configs.py): a TOML",
        "# job file in older releases; in newer ones, the same fields of Trainer.Config, or --parallelism.<name>.",
        _stage_note(stage),
    ]
    if cut.ep > 1:
        _, _, efsdp, ep = expert_mesh_shape(stage, run)
        lines.append(
            f"# Expert parallelism borrows from dp_shard × cp × tp: the experts' mesh is efsdp {efsdp:,} × ep {ep} "
            "(each expert whole on its GPU)."
        )
    split = uneven_split(run, arch)
    if split and _torchtitan_stages(split) is None:
        lines.append(
            f"# Stages of {split_words(split)} blocks: torchtitan's layers_per_stage and first and last stages' "
            "fewer layers cannot say it (the middle stages differ); its split is left to torchtitan."
        )
    for name, section in sections.items():
        lines += ["", f"[{name}]", *(f"{key} = {_toml(value)}" for key, value in section.items())]
    return "\n".join(lines) + "\n"


def experts_refused(stage: Stage, run: Run, framework: str) -> None:
    """Raises NoConfig where torchtitan's expert parallelism (and its mesh) cannot say the run's.

    torchtitan (2026-08) keeps each expert whole under expert parallelism: it removed expert tensor parallelism
    (pytorch/torchtitan#3167), so with ep > 1 the experts' tp is 1, and with ep = 1 the experts split as the
    rest over tp. Its ep borrows from dp_shard × cp × tp (`ParallelDims._validate`), the replicas outside it.
    """
    cut = run.cut
    if cut.ep > 1 and cut.expert_tp != 1:
        raise NoConfig(
            "etp",
            f"etp={cut.expert_tp} splits each expert across GPUs, and {framework} keeps each expert whole under "
            "expert parallelism (it removed expert tensor parallelism): choose etp=1, or Megatron-LM's arguments, "
            "whose --expert-tensor-parallel-size says it.",
        )
    experts = run.architecture is not None and run.architecture.moe is not None
    if experts and cut.ep == 1 and cut.expert_tp != cut.tp:  # a dense model's etp splits nothing
        raise NoConfig(
            "etp",
            f"etp={cut.expert_tp} with tp={cut.tp}: without expert parallelism {framework} splits the experts as "
            "tensor parallelism splits the rest. Leave etp blank, or copy Megatron-LM's arguments.",
        )
    if cut.ep > 1 and stage is Stage.DP:
        raise NoConfig(
            "ep",
            f"ep={cut.ep} under data parallelism: {framework} shards the experts with FSDP over their own group "
            "(efsdp), which DDP has not. Choose ZeRO-2 or 3, or Megatron-LM's arguments.",
        )
    # torchtitan's own check. The run refuses hybrid sharding with ep, so dp_shard is dp and ep × etp divides
    # tp × cp × dp already; kept for the day the run takes both.
    groups = data_groups(stage, run)
    region = groups.shard * cut.cp * cut.tp
    if region % cut.ep:
        raise NoConfig(
            "ep",
            f"ep={cut.ep} does not divide dp_shard × cp × tp = {groups.shard:,} × {cut.cp} × {cut.tp} = {region:,}: "
            f"{framework} carves expert parallelism from those GPUs, the replicas apart.",
        )


def _stage_note(stage: Stage) -> str:
    return {
        Stage.DP: "# Data parallelism: data_parallel_replicate_degree is DDP; nothing is sharded.",
        Stage.ZERO2: '# ZeRO-2: FSDP with fsdp_reshard_after_forward = "never" (the weights kept after the forward).',
        Stage.ZERO3: "# ZeRO-3: FSDP (data_parallel_shard_degree), the weights freed after the forward.",
    }.get(stage, "")


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    return '"' + str(value) + '"'


@dataclass(frozen=True)
class TorchtitanRead:
    """What torchtitan's sections say of the layout."""

    cut: Cut
    stage: Stage
    gpus: int
    batch: int
    seq: int


def read_torchtitan(text: str, layers: int | None = None) -> TorchtitanRead:
    """The TOML of `torchtitan_toml` read back with `tomllib`: the cut, the stage, the cards and the micro-batch.

    Interleaved 1F1B's virtual stages are the model's blocks ÷ (stages × blocks a virtual stage):
    `layers` gives the blocks; without it an interleaved schedule is refused.
    """
    config = tomllib.loads(text)
    par, train = config["parallelism"], config["training"]
    replicate, shard = par["data_parallel_replicate_degree"], par["data_parallel_shard_degree"]
    reshard = par.get("fsdp_reshard_after_forward")
    stage = Stage.DP if shard == 1 else Stage.ZERO2 if reshard == "never" else Stage.ZERO3
    pp, vpp = par["pipeline_parallel_degree"], 1
    if par["pipeline_parallel_schedule"] == "Interleaved1F1B":
        per_stage = par.get("pipeline_parallel_layers_per_stage")
        if layers is None or per_stage is None:
            raise ValueError("an interleaved schedule's virtual stages need the model's blocks")
        vpp = layers // (pp * per_stage)
    tp, seq = par["tensor_parallel_degree"], train["max_context_length"]
    ep = par.get("expert_parallel_degree", 1)
    cut = Cut(
        tp=tp,
        sp=par["enable_sequence_parallel"] and tp > 1,
        pp=pp,
        vpp=vpp,
        microbatches=par["num_pp_microbatches"],
        cp=par["context_parallel_degree"],
        ep=ep,
        etp=1 if ep > 1 else 0,  # whole experts under expert parallelism; as tp without it
    )
    gpus = cut.model_parallel * replicate * shard
    return TorchtitanRead(cut, stage, gpus, train["num_tokens_per_microbatch_per_dp_rank"] // seq, seq)


# --- FSDP2 + DTensor -------------------------------------------------------------------------------


def mesh_shape(stage: Stage, run: Run) -> tuple[int, ...]:
    """The device mesh's shape, `MESH_DIMS` in order: its product is the cards."""
    groups, cut = data_groups(stage, run), run.cut
    return (cut.pp, groups.replicate, groups.shard, cut.cp, cut.tp)


_TP_PLAN = (
    ("attention.wq", "ColwiseParallel()"),
    ("attention.wk", "ColwiseParallel()"),
    ("attention.wv", "ColwiseParallel()"),
    ("attention.wo", "RowwiseParallel({out})"),
    ("feed_forward.w1", "ColwiseParallel()"),
    ("feed_forward.w3", "ColwiseParallel()"),
    ("feed_forward.w2", "RowwiseParallel({out})"),
)
"""Megatron's split of a Llama block (torchtitan's module names): q, k, v and the MLP's first matrices by
columns, attention's output and the MLP's last by rows, so each half needs one all-reduce (or, with sequence
parallelism, a reduce-scatter out and an all-gather in)."""


def mesh_snippet(stage: Stage, run: Run, arch: Architecture | None = None) -> str:
    """PyTorch code for the layout: a 5-D device mesh, tensor parallelism, the pipeline, then FSDP2 or DDP.

    Raises NoConfig at ZeRO-1, which FSDP2 has not (`zero1_refused`). `arch` is taken as the other exports
    take it; the code names no size of the model (its modules are the model's own).
    """
    del arch  # the same signature as the other exports'; the mesh needs only the degrees
    if stage is Stage.ZERO1:
        raise zero1_refused("FSDP2")
    experts_refused(stage, run, "this mesh, as torchtitan builds it,")
    cut, groups = run.cut, data_groups(stage, run)
    shape = mesh_shape(stage, run)
    lines = [
        f"# The layout for this run under {stage.info.title}, in PyTorch (FSDP2 + DTensor): {run.gpus:,} GPUs = "
        + " × ".join(f"{name} {size:,}" for name, size in zip(MESH_DIMS, shape, strict=True))
        + ".",
        "# The module names are torchtitan's Llama's (model.layers, attention.wq...): rename for yours.",
        "import torch",
        "from torch.distributed.device_mesh import init_device_mesh",
    ]
    if cut.tp > 1:
        styles = ["ColwiseParallel", "RowwiseParallel", *(["PrepareModuleInput", "SequenceParallel"] if cut.sp else [])]
        lines.append(f"from torch.distributed.tensor.parallel import {', '.join(styles)}, parallelize_module")
        if cut.sp:
            lines.append("from torch.distributed.tensor import Replicate, Shard")
    if stage is Stage.DP:
        lines.append("from torch.distributed._composable.replicate import replicate")
    else:
        lines.append("from torch.distributed.fsdp import fully_shard")
    if cut.pp > 1:
        schedule = "ScheduleInterleaved1F1B" if cut.vpp > 1 else "Schedule1F1B"
        lines.append(f"from torch.distributed.pipelining import PipelineStage, {schedule}")
    names = ", ".join(f'"{name}"' for name in MESH_DIMS)
    lines += [
        "",
        "# Ranks vary fastest along the last dimension: a tensor-parallel group is neighbouring cards, in a node.",
        f'mesh = init_device_mesh("cuda", {shape!r}, mesh_dim_names=({names}))',
        *_expert_mesh_lines(stage, run),
        *_parts_lines(cut),
        *_dp_mesh_lines(stage, run, groups),
        "for part in parts:",
        *_block_lines(run, stage),
        _part_line(stage),
        *_pp_lines(cut),
    ]
    return "\n".join(lines) + "\n"


EXPERT_MESH_DIMS = ("pp", "dp_replicate", "efsdp", "ep")
"""The experts' view of the same cards, as torchtitan's `ParallelDims.build_mesh` unflattens its sparse mesh: ep the
fastest-varying, borrowed from dp_shard × cp × tp; efsdp what is left of those, over which FSDP shards the experts."""


def expert_mesh_shape(stage: Stage, run: Run) -> tuple[int, ...]:
    """The experts' mesh, `EXPERT_MESH_DIMS` in order: efsdp = dp_shard × cp × tp ÷ ep, as torchtitan's."""
    groups, cut = data_groups(stage, run), run.cut
    return (cut.pp, groups.replicate, groups.shard * cut.cp * cut.tp // cut.ep, cut.ep)


def _expert_mesh_lines(stage: Stage, run: Run) -> list[str]:
    if run.cut.ep == 1:
        return []
    shape = expert_mesh_shape(stage, run)
    names = ", ".join(f'"{name}"' for name in EXPERT_MESH_DIMS)
    return [
        "# The experts' view of the same GPUs, as torchtitan builds it: ep neighbouring GPUs each keep their share of",
        '# the routed experts whole (your MoE layer\'s token dispatcher sends tokens over expert_mesh["ep"]); FSDP',
        "# shards the experts over efsdp, the rest of dp_shard × cp × tp.",
        f'expert_mesh = mesh._flatten("world")._unflatten(0, {shape!r}, ({names}))',
    ]


def _parts_lines(cut: Cut) -> list[str]:
    """What this card keeps: the whole model, or with a pipeline its stage's runs of blocks."""
    if cut.pp == 1:
        return ["parts = [model]"]
    runs = f"{cut.vpp} runs of blocks, stages pp_rank, pp_rank + {cut.pp}, ..." if cut.vpp > 1 else "one run of blocks"
    return [
        "",
        f"# The pipeline first: {cut.pp} stages, and this card keeps {runs}; model_chunks are",
        "# those runs, split from the model by you (torchtitan's pipeline_module_split does it by module names).",
        'pp_rank = mesh["pp"].get_local_rank()',
        "parts = model_chunks",
    ]


def _tp_lines(cut: Cut) -> list[str]:
    if cut.tp == 1:
        return []
    out = "output_layouts=Shard(1)" if cut.sp else ""
    plan = [f'            "{name}": {style.format(out=out)},' for name, style in _TP_PLAN]
    if cut.sp:
        plan += [
            '            "attention_norm": SequenceParallel(),',
            '            "ffn_norm": SequenceParallel(),',
            '            "attention": PrepareModuleInput(',
            "                input_layouts=(Shard(1), None), desired_input_layouts=(Replicate(), None)",
            "            ),",
            '            "feed_forward": PrepareModuleInput(',
            "                input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)",
            "            ),",
        ]
    note = "        # Tensor parallelism: the block's matrices split across the tp cards" + (
        "; sequence parallelism splits the norms' activations along the sequence." if cut.sp else "."
    )
    return [note, '        parallelize_module(block, mesh["tp"], {', *plan, "        })"]


def _dp_mesh_lines(stage: Stage, run: Run, groups: DataGroups) -> list[str]:
    if stage is Stage.DP:
        lines = ["# Data parallelism: every data-parallel card keeps all of its share of the model (DDP)."]
        if run.cut.cp > 1:
            # The cp cards hold the same weights: their gradients are averaged with the data-parallel ones.
            return [
                *lines,
                "# The cp cards hold the same weights: DDP averages the gradients over them too.",
                'dp_mesh = mesh["dp_replicate", "cp"]._flatten("dp_replicate_cp")',
            ]
        return [*lines, 'dp_mesh = mesh["dp_replicate"]']
    hybrid = groups.replicate > 1
    lines = [
        f"# {stage.info.title}: fully_shard over the data-parallel cards"
        + (" (HSDP: replicated on dp_replicate, sharded on dp_shard)." if hybrid else ".")
    ]
    shard = '"dp_shard"'
    if run.cut.cp > 1:
        # Context parallelism's cards hold the same weights: FSDP shards over them too (torchtitan's dp_shard_cp).
        lines += [
            "# The cp cards hold the same weights: FSDP shards over them too.",
            'mesh["dp_shard", "cp"]._flatten("dp_shard_cp")',
        ]
        shard = '"dp_shard_cp"'
    return [*lines, f'dp_mesh = mesh["dp_replicate", {shard}]' if hybrid else f"dp_mesh = mesh[{shard}]"]


def _block_lines(run: Run, stage: Stage) -> list[str]:
    """Each block's own: its tensor-parallel split, then its FSDP unit (gathered and freed on its own)."""
    cut = run.cut
    inner = _tp_lines(cut)
    if stage is not Stage.DP and run.cut.ep > 1:
        # The experts first, over their own group: the block's fully_shard then leaves their weights alone.
        inner += [
            '        if hasattr(block, "moe"):  # a mixture-of-experts block (torchtitan\'s module names)',
            f"            fully_shard(block.moe.experts, mesh=expert_mesh[{_expert_dp(stage, run)}], "
            f"reshard_after_forward={_reshard(stage)})",
        ]
    if stage is not Stage.DP:
        inner.append(f"        fully_shard(block, mesh=dp_mesh, reshard_after_forward={_reshard(stage)})")
    return ["    for block in part.layers:", *inner] if inner else []


def _expert_dp(stage: Stage, run: Run) -> str:
    """The experts' FSDP mesh's dimensions: efsdp, and with hybrid sharding its replicas."""
    return '"dp_replicate", "efsdp"' if data_groups(stage, run).replicate > 1 else '"efsdp"'


def _reshard(stage: Stage) -> str:
    return "True" if stage is Stage.ZERO3 else "False"


def _part_line(stage: Stage) -> str:
    if stage is Stage.DP:
        return "    replicate(part, device_mesh=dp_mesh)"
    return f"    fully_shard(part, mesh=dp_mesh, reshard_after_forward={_reshard(stage)})"


def _pp_lines(cut: Cut) -> list[str]:
    if cut.pp == 1:
        return []
    stages = cut.pp * cut.vpp
    group = 'group=mesh["pp"].get_group()'
    device = 'device = torch.device("cuda", torch.cuda.current_device())'
    if cut.vpp > 1:
        return [
            device,
            "stages = [",
            f"    PipelineStage(part, pp_rank + {cut.pp} * v, {stages}, device, {group})",
            "    for v, part in enumerate(parts)",
            "]",
            f"schedule = ScheduleInterleaved1F1B(stages, n_microbatches={cut.microbatches}, loss_fn=loss_fn)",
        ]
    return [
        device,
        f"stage = PipelineStage(parts[0], pp_rank, {stages}, device, {group})",
        f"schedule = Schedule1F1B(stage, n_microbatches={cut.microbatches}, loss_fn=loss_fn)",
    ]
