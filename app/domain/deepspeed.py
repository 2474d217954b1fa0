"""DeepSpeed's own rule for a node's CPU memory, from its estimators, multiplier by multiplier.

`estimate_zero2_model_states_mem_needs` and `estimate_zero3_model_states_mem_needs` (DeepSpeed
0.19.8, `deepspeed/runtime/zero/stage_1_and_2.py` and `stage3.py`) give a GPU figure and a CPU
figure. The GPU figure is the sum of `accounting`'s DeepSpeed terms, like every figure of the page.
The CPU figure is not a sum of what is offloaded: it also covers building the model, before ZeRO
splits it, and a buffer factor (1.5) for DeepSpeed's own copies. This module is that rule, in
DeepSpeed's arithmetic (a float product, truncated), so its figures are DeepSpeed's to the byte;
tests/domain/test_deepspeed.py checks it against the estimators' printed outputs.
"""

from __future__ import annotations

import math
from fractions import Fraction

from app.domain.placement import Home, Offload, Placement
from app.domain.stages import Stage

BUFFER_FACTOR = 1.5
"""The estimators' `additional_buffer_factor` default."""
PARAM_SWAP_BUFFERS = 5
PARAM_SWAP_BUFFER_SIZE = 10**8
"""`offload_param`'s `buffer_count` and `buffer_size` defaults: pinned buffers NVMe weights pass through."""
OPTIMIZER_SWAP_BUFFERS = 4
SUB_GROUP_SIZE = 10**9
"""`offload_optimizer`'s `buffer_count` default and ZeRO-3's `sub_group_size`: each buffer holds a sub-group in fp32."""


def cpu_rule(
    stage: Stage,
    params: int,
    largest_layer: int,
    nodes: int,
    gpus_per_node: int,
    placement: Placement,
    zero_init: bool = True,
    buffer_factor: float = BUFFER_FACTOR,
) -> tuple[int, bool]:
    """One node's CPU memory as DeepSpeed's estimators count it, and which side of the rule counts.

    The side is True where it is the processes building the model, False where the offloaded state.

    Raises ValueError for an NVMe placement, which the estimators do not cover (`nvme_swap_buffers`).
    """
    gpus = nodes * gpus_per_node
    offload = placement.offload
    if placement.offloads and placement.home(stage) is Home.NVME:
        raise ValueError("DeepSpeed's estimators have no NVMe case")
    if stage is not Stage.ZERO3:
        # ZeRO-1 and data parallelism have no estimator: ZeRO-2's rule, without offload for DP.
        if offload is not Offload.NONE and stage is not Stage.DP:
            # Each of the node's processes builds the model in fp32 (4 B a weight); the offloaded
            # fp32 state is 16 B a weight for the whole model, whichever is more.
            return int(params * max(4 * gpus, 16) * buffer_factor), 4 * gpus > 16
        return int(params * 4 * gpus_per_node * buffer_factor), True
    share = 1 / nodes  # the node's share of the model's sharded state
    if offload is Offload.NONE:
        # With zero.Init each process builds one layer at a time in fp32; without, the whole model.
        built = largest_layer if zero_init else params
        return int(built * 4 * gpus_per_node * buffer_factor), True
    # 18 B a weight: the weights' fp16 and fp32 copies, fp32 gradients and moments; 16 without the weights.
    kept = 18 if offload is Offload.OPTIMIZER_PARAMS else 16
    if zero_init:
        return int(params * kept * share * buffer_factor), False
    return int(params * max(4 * gpus_per_node, kept * share) * buffer_factor), 4 * gpus_per_node > kept * share


def cpu_bytes_per_node(
    stage: Stage,
    params: int,
    largest_layer: int,
    nodes: int,
    gpus_per_node: int,
    placement: Placement,
    zero_init: bool = True,
    buffer_factor: float = BUFFER_FACTOR,
) -> int:
    """One node's CPU memory as DeepSpeed's estimators count it (`cpu_rule`)."""
    return cpu_rule(stage, params, largest_layer, nodes, gpus_per_node, placement, zero_init, buffer_factor)[0]


def nvme_swap_buffers(slice_weights: int, weights_on_nvme: bool, weight_bytes: Fraction | int) -> int:
    """One process's pinned buffers for ZeRO-Infinity: the weights' (when on NVMe) and the optimizer's."""
    weights = math.ceil(PARAM_SWAP_BUFFERS * PARAM_SWAP_BUFFER_SIZE * weight_bytes) if weights_on_nvme else 0
    return weights + OPTIMIZER_SWAP_BUFFERS * min(SUB_GROUP_SIZE, slice_weights) * 4


def cpu_is_building(stage: Stage, nodes: int, gpus_per_node: int, placement: Placement, zero_init: bool = True) -> bool:
    """Whether `cpu_bytes_per_node` is building the model (True) or keeping the offloaded state (False)."""
    return cpu_rule(stage, 1, 1, nodes, gpus_per_node, placement, zero_init)[1]
