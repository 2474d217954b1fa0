"""Train a toy model on 8 CPU ranks under each arrangement and record the bytes each rank holds.

Needs torch (the `[measure]` extra). Eight processes join a gloo group on this machine; each trains
two real steps of 8 equal bias-free Linear layers (the grid's 8 weights) under six arrangements in
turn: DDP, DDP with ZeroRedundancyOptimizer, FSDP1 SHARD_GRAD_OP and FULL_SHARD (one flat parameter),
and FSDP2 `fully_shard` with and without resharding after forward. The first step creates Adam's
state; during the second, module hooks record each rank's live bytes at every layer's forward and
backward; after it, every parameter, gradient and optimizer tensor is recorded, layer by layer.

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

from app.measure.activations import measure_activations  # noqa: E402

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
)


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


def _start(wrapped: nn.Module, layer: int, rank: int) -> int:
    """Where this rank's part of a layer's weights starts, in elements of the layer (0 when all or none)."""
    weight = _weight(_layers(wrapped)[layer])
    flat = getattr(getattr(wrapped, "_handle", None), "flat_param", None)
    if flat is not None:
        info = flat._shard_param_infos[layer]
        return int(info.intra_param_start_idx) if info.in_shard else 0
    local = _local(weight)
    if local is not weight and local.numel():  # FSDP2: rows cut along dim 0, rank r holds chunk r
        return rank * local.shape[0] * local.shape[1]
    return 0


def at_rest(wrapped: nn.Module, optimizer: torch.optim.Optimizer, rank: int) -> dict[str, Any]:
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
                "start": _start(wrapped, index, rank),
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
    return {"phases": phases, **at_rest(wrapped, optimizer, rank)}


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
        # Each rank writes its own file: gathering objects through gloo would need NumPy.
        (Path(folder) / f"rank-{rank}.json").write_text(json.dumps(results))
    finally:
        dist.destroy_process_group()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _drop_seconds(result: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in result.items() if key != "seconds"}


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
            "seconds": ranks[0][index].pop("seconds"),
            "ranks": [{"rank": rank, **_drop_seconds(ranks[rank][index])} for rank in range(WORLD_SIZE)],
        }
        for index, (stage, impl, title) in enumerate(ARRANGEMENTS)
    ]
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
        "activations": measure_activations(),
    }
