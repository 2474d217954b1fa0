"""Train a toy model on 8 CPU ranks under each arrangement and record the bytes each rank holds.

Needs torch (the `[measure]` extra). Eight processes join a gloo group on this machine; each trains
two real steps of 8 equal bias-free Linear layers (the grid's 8 weights) under seven arrangements in
turn: DDP, DDP with ZeroRedundancyOptimizer, FSDP1 SHARD_GRAD_OP and FULL_SHARD (one flat parameter),
FSDP2 `fully_shard` with and without resharding after forward, and FSDP2 on a 2 × 4 mesh (hybrid
sharding, HSDP); then one more, FSDP2 with its CPU offload (`measure_offload`); then the model cut across
the ranks, FSDP2 + TP and a 2-stage pipeline (`cut_runner.measure_cut`). The first step creates
Adam's state; during the second, module hooks record each rank's live bytes at every layer's forward
and backward; after it, every parameter, gradient and optimizer tensor is recorded, layer by layer.

Bytes are counted by storage, not by tensor: views into one flat buffer (FSDP1's flat parameter,
DDP's gradient bucket) count once, and a storage FSDP has freed (resized to 0) counts 0. Under FSDP1
the layers' gradients live in autograd, in no .grad, until the whole backward pass has produced them:
a hook on each layer's backward node keeps them in view, so the live bytes count them as they appear.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

# torch warns on import when NumPy is absent; the measurement does not use NumPy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402
from torch import nn  # noqa: E402
from torch.distributed.tensor import DTensor  # noqa: E402

from app.measure.activations import measure_activations  # noqa: E402
from app.measure.cut_runner import SCHEDULES, TP_TITLE, measure_cut, snapshot_cut  # noqa: E402

WORLD_SIZE = 8
LAYERS = 8
DIM = 64
"""Each layer is DIM × DIM weights: 4,096, so every split by 8 is whole (FSDP2 cuts 8 rows each)."""
BATCH = 4
STEPS = 2
PRECISION = "fp32"
RECIPE = "fp32-adam"

# (stage, implementation, title): the order the snapshot lists them and the command reports them.
ARRANGEMENTS: tuple[tuple[str, str, str], ...] = (
    ("dp", "ddp", "DDP (gradient_as_bucket_view=True) with Adam"),
    ("zero1", "zero-redundancy", "DDP (gradient_as_bucket_view=True) with ZeroRedundancyOptimizer (Adam)"),
    ("zero2", "fsdp1", "FSDP1 SHARD_GRAD_OP, one flat parameter"),
    ("zero2", "fsdp2", "FSDP2 fully_shard(reshard_after_forward=False)"),
    ("zero3", "fsdp1", "FSDP1 FULL_SHARD, one flat parameter"),
    ("zero3", "fsdp2", "FSDP2 fully_shard"),
    ("zero3", "hsdp", "FSDP2 fully_shard on a 2 × 4 mesh (HSDP: replicate 2, shard 4)"),
)

HSDP_MESH = (2, 4)
"""Hybrid sharding's mesh: 2 replicas (the mesh's first dimension) of a shard group of 4 ranks (its second).

Each rank keeps 1/4 of every state, and the rank in the same place of the other group keeps the same 1/4:
FSDP2 reduce-scatters the gradients inside each group of 4, then all-reduces them across the 2 groups.
"""
HSDP_DIMS = ("replicate", "shard")


def _model() -> nn.Sequential:
    torch.manual_seed(0)  # the same initial weights on every rank, as a real job starts
    return nn.Sequential(*(nn.Linear(DIM, DIM, bias=False) for _ in range(LAYERS)))


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A DTensor's local shard; any other tensor itself."""
    local = getattr(tensor, "_local_tensor", None)
    return local if isinstance(local, torch.Tensor) else tensor


def _storage_bytes(tensors: Iterable[torch.Tensor | None]) -> int:
    """Bytes of the distinct storages behind `tensors`: shared storage counts once, freed storage 0."""
    seen: dict[int, int] = {}
    for tensor in tensors:
        if tensor is None:
            continue
        storage = _local(tensor).untyped_storage()
        if storage.nbytes():
            seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())


def _view_bytes(tensor: torch.Tensor | None) -> int:
    if tensor is None:
        return 0
    local = _local(tensor)
    return local.numel() * local.element_size()


def _optimizer_state(optimizer: torch.optim.Optimizer) -> dict[Any, dict[str, Any]]:
    inner = getattr(optimizer, "optim", optimizer)  # ZeroRedundancyOptimizer keeps a local Adam
    return inner.state


def _fsdp_extras(model: nn.Module) -> Iterator[torch.Tensor | None]:
    """The buffers FSDP keeps beside the module's parameters: flat shards, gathered copies, gradients."""
    from torch.distributed.fsdp import FullyShardedDataParallel

    for unit in FullyShardedDataParallel.fsdp_modules(model):
        handle = unit._handle
        if handle is None:
            continue
        flat = handle.flat_param
        yield flat
        yield flat.grad
        for name in ("_local_shard", "_full_param_padded", "_saved_grad_shard", "_padded_unsharded_grad"):
            yield getattr(flat, name, None)
    for module in model.modules():
        get_state = getattr(module, "_get_fsdp_state", None)
        if get_state is None:
            continue
        group = get_state()._fsdp_param_group
        if group is None:
            continue
        for fsdp_param in group.fsdp_params:
            sharded = fsdp_param.sharded_param
            yield sharded
            yield sharded.grad
            yield getattr(fsdp_param, "_sharded_param_data", None)
            yield from getattr(fsdp_param, "all_gather_outputs", ())
            unsharded = getattr(fsdp_param, "_unsharded_param", None)
            yield unsharded
            yield None if unsharded is None else unsharded.grad


def live_bytes(model: nn.Module, optimizer: torch.optim.Optimizer, in_flight: Iterable[torch.Tensor] = ()) -> int:
    """Bytes of model state a rank holds now: parameters (sharded and gathered), gradients, optimizer state.

    `in_flight` are gradients autograd has computed but not yet put in any parameter's .grad (FSDP1's
    per-layer gradients during backward). Activations are left out, as the app's model leaves them out.
    """

    def tensors() -> Iterator[torch.Tensor | None]:
        for param in model.parameters():
            yield param
            yield param.grad
        yield from _fsdp_extras(model)
        yield from in_flight
        for state in _optimizer_state(optimizer).values():
            yield from (value for value in state.values() if isinstance(value, torch.Tensor))

    return _storage_bytes(tensors())


def _wrap(stage: str, impl: str, model: nn.Sequential) -> tuple[nn.Module, torch.optim.Optimizer]:
    """The model under one arrangement, and its optimizer."""
    from torch.distributed.fsdp import FullyShardedDataParallel, ShardingStrategy, fully_shard
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel

    if impl == "ddp":
        wrapped: nn.Module = DistributedDataParallel(model, gradient_as_bucket_view=True)
        return wrapped, torch.optim.Adam(wrapped.parameters(), lr=1e-3)
    if impl == "zero-redundancy":
        wrapped = DistributedDataParallel(model, gradient_as_bucket_view=True)
        return wrapped, ZeroRedundancyOptimizer(wrapped.parameters(), optimizer_class=torch.optim.Adam, lr=1e-3)
    if impl == "fsdp1":
        strategy = ShardingStrategy.FULL_SHARD if stage == "zero3" else ShardingStrategy.SHARD_GRAD_OP
        # The whole model as one unit: one flat parameter, cut into 8 contiguous slices.
        wrapped = FullyShardedDataParallel(
            model, sharding_strategy=strategy, device_id=torch.device("cpu"), use_orig_params=True
        )
        return wrapped, torch.optim.Adam(wrapped.parameters(), lr=1e-3)
    from torch.distributed.device_mesh import init_device_mesh

    if impl == "hsdp":  # FSDP2 on a 2-D mesh: shard along "shard", replicate along "replicate"
        mesh = init_device_mesh("cpu", HSDP_MESH, mesh_dim_names=HSDP_DIMS)
    else:
        mesh = init_device_mesh("cpu", (WORLD_SIZE,))
    reshard = stage == "zero3"
    for layer in model:
        fully_shard(layer, mesh=mesh, reshard_after_forward=reshard)
    fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def _layers(wrapped: nn.Module) -> nn.Sequential:
    inner = getattr(wrapped, "module", wrapped)  # DDP and FSDP1 wrap; FSDP2 changes the module's class
    assert isinstance(inner, nn.Sequential)
    return inner


def _weight(layer: nn.Module) -> torch.Tensor:
    weight = layer.weight
    assert isinstance(weight, torch.Tensor)
    return weight


def _shard_dim(weight: torch.Tensor) -> tuple[DTensor, int] | None:
    """A DTensor and the mesh dimension its rows are cut along (FSDP2's Shard(0)); None for a plain tensor."""
    if not isinstance(weight, DTensor):
        return None
    for dim, placement in enumerate(weight.placements):
        if placement.is_shard(0):
            return weight, dim
    return None


def _start(wrapped: nn.Module, layer: int) -> int:
    """Where this rank's part of a layer's weights starts, in elements of the layer (0 when all or none)."""
    weight = _weight(_layers(wrapped)[layer])
    flat = getattr(getattr(wrapped, "_handle", None), "flat_param", None)
    if flat is not None:
        info = flat._shard_param_infos[layer]
        return int(info.intra_param_start_idx) if info.in_shard else 0
    local, sharded = _local(weight), _shard_dim(weight)
    if sharded is not None and local.numel():
        # FSDP2: rows cut along dim 0; a rank holds the chunk of its place along the mesh's shard dimension
        # (its rank on a 1-D mesh; its place in its group of 4 under HSDP, where both groups cut alike).
        dtensor, dim = sharded
        return dtensor.device_mesh.get_local_rank(dim) * local.shape[0] * local.shape[1]
    return 0


def shard_size(wrapped: nn.Module) -> int | None:
    """The ranks each weight is split across, as torch built it, when fewer than all: HSDP's shard group.

    None when the weights are split across every rank or not split (what `Run.shard_size` calls None).
    """
    sharded = _shard_dim(_weight(_layers(wrapped)[0]))
    if sharded is None:
        return None
    dtensor, dim = sharded
    size = dtensor.device_mesh.size(dim)
    return size if size < WORLD_SIZE else None


def at_rest(wrapped: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """What one rank holds after the step, layer by layer and band by band."""
    state = _optimizer_state(optimizer)
    layers = []
    every: list[torch.Tensor | None] = []
    counters = 0
    for index, layer in enumerate(_layers(wrapped)):
        weight = _weight(layer)
        held = state.get(weight, {})
        moments = [held.get(name) for name in ("exp_avg", "exp_avg_sq")]
        step = held.get("step")
        counters += _view_bytes(step)
        every += [weight, weight.grad, *moments, step]
        layers.append(
            {
                "weights": _view_bytes(weight),
                "gradients": _view_bytes(weight.grad),
                "master": 0,  # fp32 training: the weights are what Adam updates, there is no copy
                "moments": sum(_view_bytes(m) for m in moments),
                "start": _start(wrapped, index),
            }
        )
    return {"layers": layers, "counters": counters, "storage": _storage_bytes(every)}


def _weight_slot(node: Any, weight: torch.Tensor) -> int:
    """Which of a layer's backward node's gradients is its weight's: the input that leads to the weight.

    F.linear multiplies by the weight transposed, so the weight's node may be one step further on.
    """
    target = weight.grad_fn
    for slot, (after, _) in enumerate(node.next_functions):
        if after is None:
            continue
        if after is target or any(further is target for further, _ in after.next_functions):
            return slot
    raise RuntimeError(f"no gradient for the weight among {node.next_functions}")


def _catch_gradients(layer: nn.Module, index: int, in_flight: dict[int, torch.Tensor]) -> Callable[..., None]:
    """A forward hook for FSDP1: keep the layer's weight gradient from the moment autograd computes it.

    FSDP1 hands each layer a view of its one flat parameter; the views' gradients are summed into the
    flat parameter's gradient only once the whole backward pass has produced them all, so until then no
    .grad holds them. A hook on the layer's own backward node (which computes the input's gradient and
    the weight's together, before the layer's backward hook fires) sees the weight's as it is made.
    """

    def on_output(_layer: nn.Module, _inputs: object, output: torch.Tensor) -> None:
        node = output.grad_fn
        assert node is not None
        slot = _weight_slot(node, _weight(layer))

        def keep(grad_inputs: tuple[torch.Tensor | None, ...], _grad_outputs: object) -> None:
            grad = grad_inputs[slot]
            if grad is not None:
                in_flight[index] = grad  # by layer: each counted once

        node.register_hook(keep)

    return on_output


def _step(wrapped: nn.Module, optimizer: torch.optim.Optimizer, batch: torch.Tensor) -> None:
    wrapped(batch).pow(2).mean().backward()
    optimizer.step()


def measure_arrangement(stage: str, impl: str, rank: int) -> dict[str, Any]:
    """Two steps under one arrangement on this rank: the second's live bytes, then the state at rest."""
    wrapped, optimizer = _wrap(stage, impl, _model())
    generator = torch.Generator().manual_seed(1000 + rank)  # each rank its own data
    # The input asks for its gradient so the first layer's backward hook fires where the others' do.
    batches = [torch.randn(BATCH, DIM, generator=generator, requires_grad=True) for _ in range(STEPS)]
    _step(wrapped, optimizer, batches[0])
    optimizer.zero_grad(set_to_none=False)  # the gradient buffers stay, as they do between real steps
    phases: list[dict[str, Any]] = [{"part": "start", "layer": None, "bytes": live_bytes(wrapped, optimizer)}]
    # FSDP1's gradients computed in backward but not yet in the flat parameter's .grad, by layer.
    in_flight: dict[int, torch.Tensor] = {}

    def hook(part: str, index: int) -> Callable[..., None]:
        def record(*_: object) -> None:
            nbytes = live_bytes(wrapped, optimizer, in_flight.values())
            phases.append({"part": part, "layer": index, "bytes": nbytes})

        return record

    handles = []
    for index, layer in enumerate(_layers(wrapped)):
        # Before the layer computes (after FSDP's own pre-forward hook has gathered it), and after its
        # backward (once its gradients exist, before FSDP reshards them).
        handles.append(layer.register_forward_pre_hook(hook("forward", index)))
        handles.append(layer.register_full_backward_hook(hook("backward", index)))
        if impl == "fsdp1":
            handles.append(layer.register_forward_hook(_catch_gradients(layer, index, in_flight)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # full backward hooks on wrapped modules warn about in-place views
        wrapped(batches[1]).pow(2).mean().backward()
    for handle in handles:
        handle.remove()
    # The backward pass has summed them into the flat parameter's gradient (and FSDP has reduced it):
    # the references kept here are all that is left of them.
    in_flight.clear()
    phases.append({"part": "after-backward", "layer": None, "bytes": live_bytes(wrapped, optimizer)})
    optimizer.step()
    phases.append({"part": "after-update", "layer": None, "bytes": live_bytes(wrapped, optimizer)})
    return {"phases": phases, "shard_size": shard_size(wrapped), **at_rest(wrapped, optimizer)}


OFFLOAD_TITLE = (
    "FSDP2 fully_shard with CPUOffloadPolicy(pin_memory=False) and MixedPrecisionPolicy(param_dtype=bfloat16)"
)
"""The offload arrangement: ZeRO-3 with the sharded state on the CPU, computing in bf16 as `mixed-adam` does.

`pin_memory=True` (the default) calls `Tensor.pin_memory()`, which needs an accelerator: on a CPU-only
machine it raises, so the state is kept in pageable memory, the closest that runs. `reduce_dtype` is
left to default to `param_dtype`: the recipe's bf16 gradients.
"""
OFFLOAD_RECIPE = "mixed-adam"


def _groups(model: nn.Module) -> Iterator[Any]:
    """FSDP2's parameter groups, one per `fully_shard` call that owns parameters."""
    for module in model.modules():
        get_state = getattr(module, "_get_fsdp_state", None)
        group = None if get_state is None else get_state()._fsdp_param_group
        if group is not None:
            yield group


def _placed(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, list[torch.Tensor | None]]:
    """What CPUOffloadPolicy places on the CPU, by category.

    The sharded parameters' padded storage, their gradients, and the optimizer's state (its step
    counters apart).
    """
    state = _optimizer_state(optimizer)
    found: dict[str, list[torch.Tensor | None]] = {"params": [], "grads": [], "optimizer": [], "counters": []}
    for group in _groups(model):
        for fsdp_param in group.fsdp_params:
            sharded = fsdp_param.sharded_param
            found["params"].append(fsdp_param._sharded_param_data)
            found["grads"].append(sharded.grad)
            held = state.get(sharded, {})
            found["optimizer"] += [held.get("exp_avg"), held.get("exp_avg_sq")]
            found["counters"].append(held.get("step"))
    return found


def _computing(model: nn.Module) -> dict[str, list[torch.Tensor | None]]:
    """What the compute path allocates beyond the sharded state, by category.

    Each parameter's unsharded copy; the all-gathers' flat outputs (a prefetched group's, and the one
    kept until the next copy-in); the unsharded gradients; and the reduce-scatter input kept until the
    next layer reduces.
    """
    found: dict[str, list[torch.Tensor | None]] = {"unsharded": [], "all-gather": [], "grads": [], "reduce-scatter": []}
    contexts = {}
    for group in _groups(model):
        result = group._all_gather_result
        found["all-gather"].append(None if result is None else result.all_gather_output)
        contexts[id(group.comm_ctx)] = group.comm_ctx
        for fsdp_param in group.fsdp_params:
            found["unsharded"] += list(fsdp_param.all_gather_outputs)
            unsharded = getattr(fsdp_param, "_unsharded_param", None)
            found["unsharded"].append(unsharded)
            found["grads"] += [None if unsharded is None else unsharded.grad, fsdp_param.unsharded_accumulated_grad]
    for context in contexts.values():  # shared by every group of the model: counted once
        kept = getattr(context, "all_gather_state", None)
        found["all-gather"].append(None if kept is None else kept.all_gather_result.all_gather_output)
        found["reduce-scatter"] += [s.reduce_scatter_input for s in getattr(context, "reduce_scatter_states", ())]
    return found


def _offload_moment(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    placed = _placed(model, optimizer)
    # A storage counted as placed (the sharded state) is not counted again on the compute side.
    sharded = {_local(t).untyped_storage().data_ptr() for ts in placed.values() for t in ts if t is not None}
    compute = {
        name: [t for t in tensors if t is not None and _local(t).untyped_storage().data_ptr() not in sharded]
        for name, tensors in _computing(model).items()
    }
    return {
        "placed": sum(_storage_bytes(ts) for ts in placed.values()),
        "compute": _storage_bytes(t for ts in compute.values() for t in ts),
        "by": {name: _storage_bytes(tensors) for name, tensors in compute.items()},
    }


def _wrap_offload(model: nn.Sequential) -> tuple[nn.Module, torch.optim.Optimizer]:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh("cpu", (WORLD_SIZE,))
    policies: dict[str, Any] = {
        "offload_policy": CPUOffloadPolicy(pin_memory=False),
        "mp_policy": MixedPrecisionPolicy(param_dtype=torch.bfloat16),
    }
    for layer in model:
        fully_shard(layer, mesh=mesh, **policies)
    fully_shard(model, mesh=mesh, **policies)
    return model, torch.optim.Adam(model.parameters(), lr=1e-3)


def measure_offload(rank: int) -> dict[str, Any]:
    """Two steps of ZeRO-3 with FSDP2's CPU offload on this rank.

    After the step, the CPU-placed state by category; during it, at every layer's forward and backward,
    the placed bytes and the compute path's, kept apart as a GPU would keep them apart.
    """
    model, optimizer = _wrap_offload(_model())
    generator = torch.Generator().manual_seed(1000 + rank)
    batches = [torch.randn(BATCH, DIM, generator=generator, requires_grad=True) for _ in range(STEPS)]
    _step(model, optimizer, batches[0])
    optimizer.zero_grad(set_to_none=False)
    phases: list[dict[str, Any]] = [{"part": "start", "layer": None, **_offload_moment(model, optimizer)}]

    def hook(part: str, index: int) -> Callable[..., None]:
        def record(*_: object) -> None:
            phases.append({"part": part, "layer": index, **_offload_moment(model, optimizer)})

        return record

    handles = []
    for index, layer in enumerate(_layers(model)):
        handles.append(layer.register_forward_pre_hook(hook("forward", index)))
        handles.append(layer.register_full_backward_hook(hook("backward", index)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model(batches[1]).float().pow(2).mean().backward()
    for handle in handles:
        handle.remove()
    phases.append({"part": "after-backward", "layer": None, **_offload_moment(model, optimizer)})
    optimizer.step()
    phases.append({"part": "after-update", "layer": None, **_offload_moment(model, optimizer)})
    placed = _placed(model, optimizer)
    first = _local(next(iter(_groups(model))).fsdp_params[0].sharded_param)
    return {
        "rank": rank,
        "placed": {name: _storage_bytes(tensors) for name, tensors in placed.items()},
        # What the tensors cover: the storage beyond it is FSDP2's dim-0 padding.
        "viewed": {name: sum(_view_bytes(t) for t in tensors) for name, tensors in placed.items()},
        "devices": sorted({_local(t).device.type for ts in placed.values() for t in ts if t is not None}),
        "pinned": False,  # pin_memory=False: nothing is page-locked (pinning needs an accelerator)
        "dtypes": {
            "params": str(first.dtype).removeprefix("torch."),
            "compute": str(torch.bfloat16).removeprefix("torch."),
        },
        "phases": phases,
    }


def _worker(rank: int, port: int, folder: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)  # 8 processes share 2 cores
    dist.init_process_group("gloo", rank=rank, world_size=WORLD_SIZE)
    try:
        results = []
        for stage, impl, title in ARRANGEMENTS:
            dist.barrier()
            began = time.perf_counter()
            results.append(measure_arrangement(stage, impl, rank))
            dist.barrier()
            seconds = time.perf_counter() - began
            results[-1]["seconds"] = round(seconds, 2)
            if rank == 0:
                print(f"  {title}: {seconds:.1f} s", flush=True)
        dist.barrier()
        began = time.perf_counter()
        offload = measure_offload(rank)
        dist.barrier()
        offload["seconds"] = round(time.perf_counter() - began, 2)
        if rank == 0:
            print(f"  {OFFLOAD_TITLE}: {offload['seconds']:.1f} s", flush=True)
        results.append(offload)
        cut = measure_cut(rank)  # the model cut across the ranks: FSDP2 + TP, and a 2-stage pipeline
        if rank == 0:
            print(f"  {TP_TITLE}: {cut['tp_seconds']:.1f} s", flush=True)
            for name in SCHEDULES:
                print(f"  A 2-stage pipeline, {name}: {cut[f'pp-{name}_seconds']:.1f} s", flush=True)
        results.append(cut)
        # Each rank writes its own file: gathering objects through gloo would need NumPy.
        (Path(folder) / f"rank-{rank}.json").write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _per_rank(result: dict[str, Any]) -> dict[str, Any]:
    """A rank's result without what belongs to the whole arrangement: its timing and its shard group."""
    return {key: value for key, value in result.items() if key not in ("seconds", "shard_size")}


def _one_shard_size(results: list[dict[str, Any]]) -> int | None:
    """The arrangement's shard group: every rank must have found the same one."""
    sizes: set[int | None] = {result["shard_size"] for result in results}
    if len(sizes) != 1:
        raise RuntimeError(f"the ranks disagree on their shard group: {sorted(sizes, key=str)}")
    return sizes.pop()


def measure() -> dict[str, Any]:
    """Run every arrangement on 8 CPU ranks and return the snapshot (what `--out` writes)."""
    began = time.perf_counter()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    # The spawned ranks import torch before this module: tell them too that NumPy is not needed.
    os.environ.setdefault("PYTHONWARNINGS", "ignore:Failed to initialize NumPy")
    with tempfile.TemporaryDirectory() as folder:
        spawn: Callable[..., object] = mp.spawn  # type: ignore[attr-defined]
        spawn(_worker, args=(_free_port(), folder), nprocs=WORLD_SIZE, join=True)
        ranks = [json.loads((Path(folder) / f"rank-{rank}.json").read_text()) for rank in range(WORLD_SIZE)]
    arrangements = [
        {
            "stage": stage,
            "impl": impl,
            "title": title,
            "seconds": ranks[0][index]["seconds"],
            "shard_size": _one_shard_size([ranks[rank][index] for rank in range(WORLD_SIZE)]),
            "ranks": [{"rank": rank, **_per_rank(ranks[rank][index])} for rank in range(WORLD_SIZE)],
        }
        for index, (stage, impl, title) in enumerate(ARRANGEMENTS)
    ]
    offload_seconds = ranks[0][-2]["seconds"]
    offload = [_per_rank(ranks[rank][-2]) for rank in range(WORLD_SIZE)]
    return {
        "format": 1,
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "backend": "gloo",
        "device": "cpu",
        "world_size": WORLD_SIZE,
        "precision": PRECISION,
        "recipe": RECIPE,
        "model": {"layers": LAYERS, "rows": DIM, "columns": DIM, "bias": False, "batch": BATCH, "steps": STEPS},
        "seconds": round(time.perf_counter() - began, 1),
        "arrangements": arrangements,
        "offload": {
            "stage": "zero3",
            "impl": "fsdp2",
            "title": OFFLOAD_TITLE,
            "recipe": OFFLOAD_RECIPE,
            "seconds": offload_seconds,
            "ranks": offload,
        },
        "activations": measure_activations(),
        "cut": snapshot_cut([ranks[rank][-1] for rank in range(WORLD_SIZE)]),
    }
