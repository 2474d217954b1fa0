"""The model cut across the 8 CPU ranks: FSDP2 with tensor parallelism, and a 2-stage pipeline, measured.

Needs torch (the `[measure]` extra); `runner` calls these on the same 8 gloo ranks after the other
arrangements. Two more arrangements:

- **FSDP2 + TP** on `init_device_mesh("cpu", (2, 4), mesh_dim_names=("dp", "tp"))`: a toy of 2
  transformer-like blocks (attention's q, k, v column-parallel and o row-parallel; the MLP's up
  column-parallel and down row-parallel, all bias-free) cut by `parallelize_module` across the 4 ranks
  of a "tp" row, then `fully_shard` over the 2 ranks of a "dp" column (ZeRO-3 over data parallelism).
  After two Adam steps each rank's parameters, gradients and moments are read from the DTensors' local
  shards.
- **A 2-stage pipeline** (`torch.distributed.pipelining`, a manual `PipelineStage` per rank) on a
  `("pp", "dp")` mesh of 2 × 4: the grid's toy of 8 Linear layers, layers 0-3 on ranks 0-3 and 4-7 on
  ranks 4-7, each stage's gradients all-reduced across its 4 data-parallel ranks by hand (plain data
  parallelism: no ZeRO), under `Schedule1F1B` and then `ScheduleGPipe`. Saved-tensor hooks inside each
  stage's forward count the activations autograd keeps, and how many micro-batches they belong to, at
  their peak.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from typing import Any

warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

TP_MESH = (2, 4)
TP_DIMS = ("dp", "tp")
HIDDEN = 64
HEADS = 4
"""4 heads of 16: each of the 4 tensor-parallel ranks computes one head's attention."""
BLOCKS = 2
TP_BATCH, TP_SEQ = 2, 8
TP_TITLE = (
    "FSDP2 fully_shard over dp on a 2 × 4 (dp, tp) mesh, after parallelize_module (ColwiseParallel, RowwiseParallel)"
)

PP_MESH = (2, 4)
PP_DIMS = ("pp", "dp")
PP_LAYERS = 8
PP_DIM = 64
MICROBATCHES = 4
MICROBATCH = 4
"""Rows of one micro-batch: the step's batch is MICROBATCHES × MICROBATCH = 16 rows of 64."""
SCHEDULES = ("1F1B", "GPipe")
PP_TITLE = "torch.distributed.pipelining, 2 stages of 4 Linear layers on a 2 × 4 (pp, dp) mesh"
STEPS = 2


class Block(nn.Module):
    """A transformer-like block without norms: causal attention (q, k, v, o) and an MLP (up, down), bias-free.

    Norms are left out: their weights would be replicated across the tensor-parallel ranks, a few bytes
    the toy does not need to show the cut.
    """

    def __init__(self) -> None:
        super().__init__()
        self.q, self.k, self.v, self.o = (nn.Linear(HIDDEN, HIDDEN, bias=False) for _ in range(4))
        self.up = nn.Linear(HIDDEN, 4 * HIDDEN, bias=False)
        self.down = nn.Linear(4 * HIDDEN, HIDDEN, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Attention with a residual, then the MLP with a residual."""
        b, s, _ = x.shape

        def heads(t: torch.Tensor) -> torch.Tensor:  # the heads this rank holds: -1, as tp splits them
            return t.view(b, s, -1, HIDDEN // HEADS).transpose(1, 2)

        attended = F.scaled_dot_product_attention(heads(self.q(x)), heads(self.k(x)), heads(self.v(x)), is_causal=True)
        x = x + self.o(attended.transpose(1, 2).reshape(b, s, -1))
        out: torch.Tensor = x + self.down(F.gelu(self.up(x)))
        return out


def _local(tensor: torch.Tensor | None) -> torch.Tensor | None:
    if tensor is None:
        return None
    to_local = getattr(tensor, "to_local", None)
    return to_local() if callable(to_local) else tensor


def _nbytes(tensor: torch.Tensor | None) -> int:
    local = _local(tensor)
    return 0 if local is None else local.numel() * local.element_size()


def _held(model: nn.Module, optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """Each parameter on this rank: its local shard's shape and placements, and its bytes per band."""
    found = []
    for name, param in model.named_parameters():
        state = optimizer.state.get(param, {})
        local = _local(param)
        assert local is not None
        found.append(
            {
                "name": name,
                "shape": list(param.shape),
                "local_shape": list(local.shape),
                "placements": str(getattr(param, "placements", "")),
                "weights": _nbytes(param),
                "gradients": _nbytes(param.grad),
                "moments": _nbytes(state.get("exp_avg")) + _nbytes(state.get("exp_avg_sq")),
                "counters": _nbytes(state.get("step")),
            }
        )
    return found


def measure_tp(rank: int) -> dict[str, Any]:
    """Two Adam steps of FSDP2 + TP on this rank, then what it holds, parameter by parameter."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel, parallelize_module

    mesh = init_device_mesh("cpu", TP_MESH, mesh_dim_names=TP_DIMS)
    torch.manual_seed(0)
    model = nn.Sequential(*(Block() for _ in range(BLOCKS)))
    plan: dict[str, ParallelStyle] = {name: ColwiseParallel() for name in ("q", "k", "v", "up")}
    plan |= {name: RowwiseParallel() for name in ("o", "down")}
    for block in model:
        # Every rank built the same weights (seed 0): each keeps its own slice, nothing is scattered.
        parallelize_module(block, mesh["tp"], plan, src_data_rank=None)
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    # The ranks of one tensor-parallel group see the same data; the data-parallel ranks their own.
    generator = torch.Generator().manual_seed(1000 + mesh["dp"].get_local_rank())
    for _ in range(STEPS):
        model(torch.randn(TP_BATCH, TP_SEQ, HIDDEN, generator=generator)).pow(2).mean().backward()
        optimizer.step()
    return {
        "rank": rank,
        "dp_rank": mesh["dp"].get_local_rank(),
        "tp_rank": mesh["tp"].get_local_rank(),
        "params": _held(model, optimizer),
    }


class _Kept:
    """One tensor autograd keeps for the backward: its bytes counted while it lives, its micro-batch noted."""

    def __init__(self, tensor: torch.Tensor, microbatch: int, tally: _Tally) -> None:
        self.tensor, self.microbatch, self.tally = tensor, microbatch, tally
        self.nbytes = tensor.numel() * tensor.element_size()
        tally.keep(self)

    def __del__(self) -> None:
        self.tally.free(self)


class _Tally:
    """The activations a stage keeps, live: bytes and micro-batches, and their peak over the step."""

    def __init__(self) -> None:
        self.live: dict[int, tuple[int, int]] = {}
        """id of each kept tensor's holder: its micro-batch and bytes (no reference, so the holder can die)."""
        self.bytes = self.peak_bytes = self.peak_microbatches = 0

    def keep(self, kept: _Kept) -> None:
        self.live[id(kept)] = (kept.microbatch, kept.nbytes)
        self.bytes += kept.nbytes
        self.peak_bytes = max(self.peak_bytes, self.bytes)
        self.peak_microbatches = max(self.peak_microbatches, len({m for m, _ in self.live.values()}))

    def free(self, kept: _Kept) -> None:
        if self.live.pop(id(kept), None) is not None:
            self.bytes -= kept.nbytes


class _Stage(nn.Module):
    """One pipeline stage's layers, counting what autograd saves in their forward (parameters apart).

    Counted by the tensor's own bytes, not its storage: the first stage's micro-batches are views into
    the step's batch, whose storage holds every micro-batch.
    """

    def __init__(self, layers: list[nn.Module], tally: _Tally) -> None:
        super().__init__()
        self.layers = nn.Sequential(*layers)
        self.tally = tally
        self.forwards = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        weights = {p.untyped_storage().data_ptr() for p in self.parameters()}
        microbatch, self.forwards = self.forwards, self.forwards + 1

        def pack(tensor: torch.Tensor) -> object:
            return tensor if tensor.untyped_storage().data_ptr() in weights else _Kept(tensor, microbatch, self.tally)

        def unpack(packed: object) -> torch.Tensor:
            return packed.tensor if isinstance(packed, _Kept) else packed  # type: ignore[return-value]

        with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
            out: torch.Tensor = self.layers(x)
            return out


def measure_pp(rank: int, schedule_name: str) -> dict[str, Any]:
    """Two steps of the 2-stage pipeline on this rank: its stage's bytes, and the activations at their peak."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    mesh = init_device_mesh("cpu", PP_MESH, mesh_dim_names=PP_DIMS)
    stage_index, stages = mesh["pp"].get_local_rank(), PP_MESH[0]
    torch.manual_seed(0)
    every: list[nn.Module] = [nn.Linear(PP_DIM, PP_DIM, bias=False) for _ in range(PP_LAYERS)]
    per_stage = PP_LAYERS // stages
    tally = _Tally()
    module = _Stage(every[stage_index * per_stage : (stage_index + 1) * per_stage], tally)
    # The shapes given, not inferred: inferring them sends Python objects, which gloo does through NumPy.
    stage = PipelineStage(
        module,
        stage_index,
        stages,
        torch.device("cpu"),
        input_args=(torch.empty(MICROBATCH, PP_DIM, requires_grad=stage_index > 0),),
        output_args=(torch.empty(MICROBATCH, PP_DIM, requires_grad=True),),
        group=mesh["pp"].get_group(),
    )
    kind: Callable[..., Any] = {"1F1B": Schedule1F1B, "GPipe": ScheduleGPipe}[schedule_name]
    schedule = kind(stage, n_microbatches=MICROBATCHES, loss_fn=lambda out, _target: out.pow(2).mean())
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    generator = torch.Generator().manual_seed(1000 + mesh["dp"].get_local_rank())
    dp_group = mesh["dp"].get_group()
    for _ in range(STEPS):
        tally.peak_bytes = tally.peak_microbatches = 0  # the last step's peak: Adam's state exists by then
        batch = torch.randn(MICROBATCH * MICROBATCHES, PP_DIM, generator=generator)
        if stage_index == 0:
            schedule.step(batch)
        else:
            schedule.step(target=torch.zeros_like(batch))
        for param in module.parameters():  # data parallelism by hand: the stage's gradients averaged
            assert param.grad is not None
            dist.all_reduce(param.grad, group=dp_group)
            param.grad /= mesh["dp"].size()
        optimizer.step()
    return {
        "rank": rank,
        "stage": stage_index,
        "dp_rank": mesh["dp"].get_local_rank(),
        "layers": [stage_index * per_stage + i for i in range(per_stage)],
        "params": _held(module.layers, optimizer),
        "activations": {"peak_bytes": tally.peak_bytes, "peak_microbatches": tally.peak_microbatches},
        "left_bytes": tally.bytes,
    }


def measure_cut(rank: int) -> dict[str, Any]:
    """Both cut arrangements on this rank, timed (the caller holds every rank at a barrier around each)."""
    results: dict[str, Any] = {}
    dist.barrier()
    began = time.perf_counter()
    results["tp"] = measure_tp(rank)
    dist.barrier()
    results["tp_seconds"] = round(time.perf_counter() - began, 2)
    for name in SCHEDULES:
        began = time.perf_counter()
        results[f"pp-{name}"] = measure_pp(rank, name)
        dist.barrier()
        results[f"pp-{name}_seconds"] = round(time.perf_counter() - began, 2)
    return results


def snapshot_cut(ranks: list[dict[str, Any]]) -> dict[str, Any]:
    """The snapshot's `cut` from every rank's results."""
    first = ranks[0]
    return {
        "tp": {
            "title": TP_TITLE,
            "mesh": {"shape": list(TP_MESH), "names": list(TP_DIMS)},
            "model": {"blocks": BLOCKS, "hidden": HIDDEN, "heads": HEADS, "batch": TP_BATCH, "seq": TP_SEQ},
            "seconds": first["tp_seconds"],
            "ranks": [r["tp"] for r in ranks],
        },
        "pp": {
            "title": PP_TITLE,
            "mesh": {"shape": list(PP_MESH), "names": list(PP_DIMS)},
            "model": {"layers": PP_LAYERS, "rows": PP_DIM, "columns": PP_DIM},
            "microbatches": MICROBATCHES,
            "microbatch_rows": MICROBATCH,
            "schedules": [
                {"name": name, "seconds": first[f"pp-{name}_seconds"], "ranks": [r[f"pp-{name}"] for r in ranks]}
                for name in SCHEDULES
            ],
        },
    }
