"""The memory a card holds beyond the ZeRO paper's theory: the overheads nobody itemises.

The theory counts the bands of model state and the layer in hand. A real run also holds a CUDA
context, NCCL's buffers, the framework's communication buckets, and whatever the caching allocator
keeps but cannot use. Each is an `OverheadItem` with its size, a source for its default and the URL
parameter that sets it. They are a band of their own, drawn apart from the theory: `overheads=1`
counts them, and the default `overheads=0` keeps the paper's figures (docs/overheads.md).

Which stage allocates what follows the code of PyTorch's DDP and DeepSpeed's ZeRO:

- every process: the CUDA context;
- more than one card: one set of NCCL buffers per communicator (process group);
- data parallelism (PyTorch DDP): its gradient buckets, a second copy of every gradient, unless
  `gradient_as_bucket_view` makes the gradients views into them;
- ZeRO-1, 2 and 3: DeepSpeed's reduce bucket (`reduce_bucket_size` gradients). ZeRO-1 and 2
  all-gather the updated weights straight into the flat buffer of weights they keep, so
  `allgather_bucket_size` allocates nothing and is not an item;
- ZeRO-3: the weights prefetched beyond the layer in hand (`prefetch_bucket_size`, capped by
  `max_live_parameters`);
- then the fragmentation margin, on all of the above that the caching allocator holds.

One card trains without a process group, as the app draws it (`stages.stage_explanation`): no
communicator, no buckets, nothing prefetched; the context and the margin remain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from fractions import Fraction

from app.domain.stages import Stage

MIB = 2**20


@dataclass(frozen=True)
class Overheads:
    """The settings of the overheads: each default is the documented or measured one (docs/overheads.md)."""

    cuda_context: int = 400 * MIB
    """Bytes of the CUDA context per process: about 400 MB since CUDA 11.7 loads kernels lazily."""
    nccl_per_group: int = 688 * MIB
    """Bytes of NCCL buffers per communicator, as measured on 4 A100s over NVLink (groups of 3-4)."""
    process_groups: int = 1
    """Communicators a process uses: the data-parallel group. DeepSpeed's clone of the world is a second."""
    gradient_as_bucket_view: bool = False
    """DDP's option to make the gradients views into its buckets, so the buckets cost nothing more."""
    reduce_bucket_size: int = 500_000_000
    """Gradients DeepSpeed reduces at a time, in one buffer of that many elements."""
    prefetch_bucket_size: int = 50_000_000
    """Weights ZeRO-3 gathers ahead of use (stage3_prefetch_bucket_size), in elements."""
    max_live_parameters: int = 1_000_000_000
    """The most weights ZeRO-3 keeps gathered at once (stage3_max_live_parameters), in elements."""
    fragmentation: int = 10
    """Percent added to what the caching allocator holds, for what it reserves but cannot hand out."""

    def __post_init__(self) -> None:
        for field in fields(self):
            value = getattr(self, field.name)
            # gradient_as_bucket_view is a switch, not an amount: it has no wrong sign.
            if not isinstance(value, bool) and value < 0:
                raise ValueError(f"{field.name} cannot be negative, and {value} was given: use 0 or more")


DEFAULTS = Overheads()

OVERHEAD_PARAMETERS: tuple[str, ...] = tuple(field.name for field in fields(Overheads))
"""The URL parameters that set the overheads, in the order of the form; each is a field of `Overheads`."""


@dataclass(frozen=True)
class OverheadItem:
    """One overhead on one card."""

    name: str
    """Short words for a student, e.g. "CUDA context"."""
    nbytes: int
    source: str
    """A page that gives the default: an issue, a documentation page or the code itself."""
    parameter: str
    """The URL parameter that sets it."""


# Sources, one line each; docs/overheads.md says what each one shows.
CUDA_CONTEXT_SOURCE = "https://github.com/pytorch/pytorch/issues/109888"
NCCL_SOURCE = "https://github.com/NVIDIA/nccl/issues/964"
DDP_BUCKETS_SOURCE = "https://pytorch.org/docs/stable/generated/torch.nn.parallel.DistributedDataParallel.html"
REDUCE_BUCKET_SOURCE = "https://www.deepspeed.ai/docs/config-json/#zero-optimizations-for-fp16-training"
# The config page gives 5e8 for the prefetch bucket; the code, which decides, gives 5e7.
PREFETCH_SOURCE = "https://github.com/deepspeedai/DeepSpeed/blob/master/deepspeed/runtime/zero/config.py"
FRAGMENTATION_SOURCE = "https://pytorch.org/docs/stable/notes/cuda.html#cuda-memory-envvars"


def overhead_items(
    stage: Stage,
    params: int,
    gpus: int,
    weight_bytes: Fraction | int,
    gradient_bytes: Fraction | int,
    theory_bytes: int,
    layer_in_hand: int | None,
    settings: Overheads = DEFAULTS,
) -> tuple[OverheadItem, ...]:
    """The overheads on one card, at its highest moment, in the order they are stacked.

    `weight_bytes` and `gradient_bytes` are the bytes per element of those bands (2 for bf16), which
    turn buckets counted in elements into bytes; `theory_bytes` is what the theory puts on the card
    at that moment, and `layer_in_hand` the weights of the layer it works on (None: unknown).

    Which stage gets which item, and why:

    - DDP allocates flat buckets that together hold every gradient, and copies each gradient into
      them for the all-reduce: `params` more gradients, whatever `bucket_cap_mb` says (it only sets
      how the copy is cut up), unless `gradient_as_bucket_view`.
    - DeepSpeed's ZeRO-1 and 2 allocate the reduce bucket for each backward pass, ZeRO-3 once at the
      start. It is a separate buffer: autograd writes each gradient in fresh memory (the theory's
      layer in hand) before DeepSpeed copies it into the bucket, so both are counted.
    - ZeRO-3 prefetches up to `prefetch_bucket_size` weights of the next layers, and no more than
      `max_live_parameters` gathered in all, the layer in hand included. The theory already counts
      that layer, so the item is min(prefetch, max_live - layer): the weights beyond it.
    - The margin covers what the caching allocator holds; the CUDA context and NCCL's buffers are
      allocated outside it and get none.
    """
    if gpus < 1:
        raise ValueError("gpus must be at least 1")
    outside = [OverheadItem("CUDA context", settings.cuda_context, CUDA_CONTEXT_SOURCE, "cuda_context")]
    inside: list[OverheadItem] = []
    if gpus > 1:
        nccl = settings.nccl_per_group * settings.process_groups
        outside.append(OverheadItem("NCCL buffers", nccl, NCCL_SOURCE, "nccl_per_group"))
        if stage is Stage.DP:
            buckets = 0 if settings.gradient_as_bucket_view else math.ceil(params * gradient_bytes)
            inside.append(OverheadItem("DDP gradient buckets", buckets, DDP_BUCKETS_SOURCE, "gradient_as_bucket_view"))
        else:
            bucket = math.ceil(settings.reduce_bucket_size * gradient_bytes)
            inside.append(OverheadItem("Reduce bucket", bucket, REDUCE_BUCKET_SOURCE, "reduce_bucket_size"))
        if stage is Stage.ZERO3:
            beyond = max(0, settings.max_live_parameters - (layer_in_hand or 0))
            prefetched = math.ceil(min(settings.prefetch_bucket_size, beyond) * weight_bytes)
            inside.append(OverheadItem("Prefetched weights", prefetched, PREFETCH_SOURCE, "prefetch_bucket_size"))
    # Rounded up, as a shard is: a margin is never smaller than its percent.
    margin = -(-(theory_bytes + total(tuple(inside))) * settings.fragmentation // 100)
    fragmentation = OverheadItem("Allocator fragmentation", margin, FRAGMENTATION_SOURCE, "fragmentation")
    return (*outside, *inside, fragmentation)


def total(items: tuple[OverheadItem, ...]) -> int:
    """Bytes of all the overheads together."""
    return sum(item.nbytes for item in items)
