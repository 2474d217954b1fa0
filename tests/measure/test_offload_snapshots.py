"""FSDP2's CPU offload as measured against the model's fsdp2 + offload count: every byte named, by hand.

The toy: 8 layers of 64 × 64 = 4,096 weights, 32,768 in all, on 8 ranks, under `mixed-adam` (2/2/4/8):
FSDP2 keeps the slices in fp32 (4 B), their gradients in fp32 (4 B), no master copy, Adam's moments
(8 B), so each rank's CPU holds 16 B × 4,096 weights. The compute path works on one layer in bf16.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from app.domain.stages import Stage
from app.measure import SNAPSHOT
from app.measure.offload_snapshots import OffloadReason, parse_offload
from app.measure.snapshots import SnapshotError, offload_comparison, parse

DATA = json.loads(SNAPSHOT.read_text())
SNAP = parse(DATA)
OFFLOAD = offload_comparison(SNAP)
L = 4096
BF16, FP32 = 2, 4


def test_the_snapshot_records_the_offload_on_8_ranks() -> None:
    offload = SNAP.offload
    assert (offload.stage, offload.recipe.name, len(offload.ranks)) == (Stage.ZERO3, "mixed-adam", 8)
    assert (offload.param_dtype, offload.compute_dtype) == ("float32", "bfloat16")
    assert "CPUOffloadPolicy(pin_memory=False)" in offload.title
    assert all(r.devices == ("cpu",) and not r.pinned for r in offload.ranks)


# Each rank's CPU by category: the model's bytes and the measured storage, by hand.
CATEGORIES = {"params": FP32 * L, "grads": FP32 * L, "optimizer": 2 * FP32 * L}


def test_every_rank_cpu_is_the_model_plus_the_counters_exactly() -> None:
    for rank in OFFLOAD.ranks:
        assert (rank.model_pinned_bytes, rank.model_pageable_bytes) == (8 * L, 8 * L)
        assert {c.name: (c.model_bytes, c.measured_bytes) for c in rank.categories} == {
            name: (nbytes, nbytes) for name, nbytes in CATEGORIES.items()
        }
        assert {d.reason: d.bytes for d in rank.differences} == {
            OffloadReason.STEP_COUNTERS: 8 * 4,
            OffloadReason.PADDING: 0,
            OffloadReason.PAGEABLE: 0,
        }
        assert rank.measured_bytes == 16 * L + 32
        assert rank.unexplained_bytes == 0


# The compute path on rank 0, by hand: (label, weights in hand, backward's gradients and reduce-scatter
# input, named differences). The model: 2 layers in bf16 during both passes; in the backward the layer's
# bf16 gradients and a bf16 reduce-scatter input (reduce_dtype defaults to param_dtype).
REST: tuple[int, int, dict[OffloadReason, int]] = (0, 0, {})
FORWARD: tuple[int, int, dict[OffloadReason, int]] = (2 * BF16 * L, 0, {})
BACKWARD: tuple[int, int, dict[OffloadReason, int]] = (2 * BF16 * L, 2 * BF16 * L, {})
COMPUTE = [
    ("Start", *REST),
    *((f"Forward {i}", *FORWARD) for i in range(8)),
    ("Backward 7", 2 * BF16 * L, BF16 * L, {OffloadReason.FIRST_REDUCE: -BF16 * L}),
    *((f"Backward {i}", *BACKWARD) for i in range(6, 0, -1)),
    ("Backward 0", BF16 * L, 2 * BF16 * L, {OffloadReason.NOTHING_TO_PREFETCH: -BF16 * L}),
    ("After backward", *REST),
    ("After update", *REST),
]


def test_the_compute_path_is_the_models_gpu_terms_with_every_difference_named() -> None:
    measured = [
        (p.label, p.measured_gathered, p.measured_backward, {d.reason: d.bytes for d in p.differences})
        for p in OFFLOAD.compute
    ]
    assert measured == COMPUTE
    for point in OFFLOAD.compute:
        assert point.ranks_alike
        assert point.unexplained_bytes == 0
        assert point.measured_bytes == point.model_bytes + sum(d.bytes for d in point.differences)
    # The model's own: forward 2 × 2 B × L, backward that and (2 + 2) B × L.
    assert [p.model_bytes for p in OFFLOAD.compute] == [0] + [4 * L] * 8 + [8 * L] * 8 + [0, 0]
    assert OFFLOAD.unexplained == 0


def test_the_placed_state_stays_put_through_the_step() -> None:
    for rank in SNAP.offload.ranks:
        assert {p.placed for p in rank.phases} == {rank.placed_bytes}


def _broken(change: str) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(DATA)
    rank = data["offload"]["ranks"][0]
    if change == "missing":
        del data["offload"]
    elif change == "category":
        del rank["placed"]["grads"]
    elif change == "sum":
        rank["phases"][1]["compute"] += 1
    elif change == "recipe":
        data["offload"]["recipe"] = "no-such-recipe"
    return data


@pytest.mark.parametrize("change", ["missing", "category", "sum", "recipe"])
def test_a_malformed_offload_is_a_snapshot_error(change: str) -> None:
    with pytest.raises(SnapshotError, match="not a measurement snapshot"):
        parse(_broken(change))


def test_the_parser_reads_categories_and_moments() -> None:
    offload = parse_offload(DATA["offload"], 8)
    first = offload.ranks[0]
    assert [(p.name, p.storage, p.viewed) for p in first.placed] == [
        ("params", FP32 * L, FP32 * L),
        ("grads", FP32 * L, FP32 * L),
        ("optimizer", 2 * FP32 * L, 2 * FP32 * L),
    ]
    assert first.counters_bytes == 32
    # The model's step: start, each of 8 layers' compute forward and backward, after backward, after update.
    assert [p.phase for p in first.phases] == [0, *range(2, 48, 3), 50, 51]
