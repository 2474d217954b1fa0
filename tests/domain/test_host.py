"""Each node's host and each card's PCIe, by hand on the seed's run: 30B weights, 8 cards in one node."""

from __future__ import annotations

import pytest

from app.domain.accounting import Accounting, Setup
from app.domain.host import host_report
from app.domain.placement import Offload, Placement
from app.domain.sizing import Run
from app.domain.stages import Stage

P, SLICE = 30 * 10**9, 30 * 10**9 // 8


def _run(
    offload: Offload,
    accounting: Accounting = Accounting.PAPER,
    pin_memory: bool = True,
    gpus: int = 8,
    nodes: int = 1,
    host_memory: int | None = None,
    nvme_space: int | None = None,
    frozen: int = 0,
) -> Run:
    return Run(
        params=P,
        frozen=frozen,
        gpus=gpus,
        nodes=nodes,
        largest_layer=P // 8,
        setup=Setup(accounting, Placement(offload, pin_memory=pin_memory)),
        host_memory=host_memory,
        nvme_space=nvme_space,
    )


# (offload, stage, CPU RAM per node, pinned, NVMe, gradients down, weights up, per card)
PAPER = [
    (Offload.NONE, Stage.ZERO3, 0, 0, 0, 0, 0),
    (Offload.OPTIMIZER, Stage.DP, 0, 0, 0, 0, 0),
    # ZeRO-1: the card's 12 B of optimizer state for its slice, 8 cards a node; its slice of the summed
    # gradients goes down (2 B) and its slice of the new weights comes up (2 B).
    (Offload.OPTIMIZER, Stage.ZERO1, 12 * P, 12 * P, 0, 2 * SLICE, 2 * SLICE),
    (Offload.OPTIMIZER, Stage.ZERO2, 14 * P, 14 * P, 0, 2 * SLICE, 2 * SLICE),
    # ZeRO-3 with its weights on the host: every gather, forward and backward, fetches the slice.
    (Offload.OPTIMIZER_PARAMS, Stage.ZERO3, 16 * P, 16 * P, 0, 2 * SLICE, 2 * 2 * SLICE),
    (Offload.NVME, Stage.ZERO3, 0, 0, 16 * P, 2 * SLICE, 2 * 2 * SLICE),
]


@pytest.mark.parametrize(("offload", "stage", "cpu", "pinned", "nvme", "down", "up"), PAPER)
def test_the_paper_counts_what_was_offloaded(
    offload: Offload, stage: Stage, cpu: int, pinned: int, nvme: int, down: int, up: int
) -> None:
    host = host_report(stage, _run(offload))
    assert (host.cpu_bytes, host.pinned_bytes, host.nvme_bytes) == (cpu, pinned, nvme)
    assert (host.gradients_down, host.weights_up, host.pcie_bytes_per_step) == (down, up, down + up)


def test_pageable_memory_is_not_pinned() -> None:
    host = host_report(Stage.ZERO1, _run(Offload.OPTIMIZER, pin_memory=False))
    assert (host.cpu_bytes, host.pinned_bytes) == (12 * P, 0)


def test_host_memory_is_per_node() -> None:
    # 16 cards in two nodes of 8: each node's host keeps the slices of its 8 cards, 16 B × P / 16 × 8.
    host = host_report(Stage.ZERO3, _run(Offload.OPTIMIZER_PARAMS, gpus=16, nodes=2))
    assert host.cpu_bytes == 16 * P // 2


@pytest.mark.parametrize(("memory", "fits"), [(None, None), (240 * 10**9, True), (240 * 10**9 - 1, False)])
def test_the_hosts_verdict(memory: int | None, fits: bool | None) -> None:
    # ZeRO-3 on 16 cards in 2 nodes: 16 B for each of a card's P/16 weights, 8 cards a node, 240e9 B.
    host = host_report(Stage.ZERO3, _run(Offload.OPTIMIZER_PARAMS, gpus=16, nodes=2, host_memory=memory))
    assert (host.cpu_fits, host.fits) == (fits, fits)


@pytest.mark.parametrize(("space", "fits"), [(16 * P - 1, False), (16 * P, True)])
def test_nvme_space_has_a_verdict_of_its_own(space: int, fits: bool) -> None:
    # The node's 8 cards keep 16 B for each weight of their slices on NVMe: 16 × P, and a drive of
    # exactly that size holds it.
    host = host_report(Stage.ZERO3, _run(Offload.NVME, nvme_space=space, host_memory=10**12))
    assert (host.cpu_fits, host.nvme_fits, host.fits) == (True, fits, fits)


def test_deepspeeds_nvme_counts_its_pinned_swap_buffers() -> None:
    # offload_param: 5 buffers of 1e8 bf16 weights (1e9 B); offload_optimizer: 4 buffers of a sub-group
    # in fp32, min(1e9, the slice of 3.75e9 weights) × 4 B (16e9 B); per card, 8 cards a node.
    host = host_report(Stage.ZERO3, _run(Offload.NVME, Accounting.DEEPSPEED))
    assert host.pinned_bytes == host.cpu_bytes == 8 * (10**9 + 16 * 10**9)
    assert host.nvme_bytes == 18 * P  # DeepSpeed's 18 B: the paper's 16 with fp32 gradients for bf16's 2


# (stage, offload, frozen weights, gradients down, weights up, per card per step)
FROZEN = [
    # A quarter trains (7.5e9), the first three quarters frozen: a card's trainable slice is 9.375e8
    # weights, whose 2 B gradients go down and 2 B weights come up; the frozen ones never move.
    (Stage.ZERO1, Offload.OPTIMIZER, 3 * P // 4, 2 * 937_500_000, 2 * 937_500_000),
    (Stage.ZERO2, Offload.OPTIMIZER, 3 * P // 4, 2 * 937_500_000, 2 * 937_500_000),
    # Weights on the host: every weight of the slice, frozen or not, is fetched for each gather, twice.
    (Stage.ZERO3, Offload.OPTIMIZER_PARAMS, 3 * P // 4, 2 * 937_500_000, 2 * 2 * SLICE),
]


@pytest.mark.parametrize(("stage", "offload", "frozen", "down", "up"), FROZEN)
def test_frozen_weights_send_no_gradients_down(stage: Stage, offload: Offload, frozen: int, down: int, up: int) -> None:
    host = host_report(stage, _run(offload, frozen=frozen))
    assert (host.gradients_down, host.weights_up) == (down, up)


# FSDP2's CPUOffloadPolicy keeps each slice in fp32 (4 B): its gradients' slice goes down in fp32 and
# the weights' slice comes up for each all-gather. ZeRO-2 (reshard_after_forward=False) keeps what the
# forward gathered until the backward: one copy up a step; ZeRO-3 gathers again in the backward: two.
FSDP2_PCIE = [
    (Stage.ZERO2, 4 * SLICE, 4 * SLICE),
    (Stage.ZERO3, 4 * SLICE, 2 * 4 * SLICE),
]


@pytest.mark.parametrize(("stage", "down", "up"), FSDP2_PCIE)
def test_fsdp2_fetches_the_weights_once_under_zero2_twice_under_zero3(stage: Stage, down: int, up: int) -> None:
    host = host_report(stage, _run(Offload.OPTIMIZER_PARAMS, Accounting.FSDP2))
    assert (host.gradients_down, host.weights_up, host.weights_fetched) == (down, up, True)


@pytest.mark.parametrize(
    ("accounting", "offload", "stage", "building"),
    [
        (Accounting.PAPER, Offload.OPTIMIZER, Stage.ZERO2, None),  # the paper's host has no such rule
        # DeepSpeed's ZeRO-2 rule on one node of 8: max(4 × 8, 16), the 8 processes building the model.
        (Accounting.DEEPSPEED, Offload.OPTIMIZER, Stage.ZERO2, True),
        # ZeRO-3 with zero.Init keeps the node's share of the state: 16 B × P / 1 node.
        (Accounting.DEEPSPEED, Offload.OPTIMIZER, Stage.ZERO3, False),
    ],
)
def test_the_host_says_which_side_of_deepspeeds_rule_counts(
    accounting: Accounting, offload: Offload, stage: Stage, building: bool | None
) -> None:
    assert host_report(stage, _run(offload, accounting)).cpu_building is building
