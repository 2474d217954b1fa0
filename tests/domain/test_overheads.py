from __future__ import annotations

import dataclasses
import re
from typing import Any

import pytest

from app.domain.overheads import DEFAULTS, OVERHEAD_PARAMETERS, OverheadItem, Overheads, overhead_items, total
from app.domain.recipes import Band, custom_recipe
from app.domain.stages import Stage

# A 7B-weight model in bf16 on 8 cards; the theory's bytes are a round figure, given rather than
# worked out, so the margin's arithmetic is easy to follow.
PARAMS = 7_000_000_000
LAYER = 200_000_000
THEORY = 10_000_000_000


def items(stage: Stage, gpus: int = 8, layer: int | None = LAYER, settings: Overheads = DEFAULTS) -> dict[str, int]:
    found = overhead_items(stage, PARAMS, gpus, 2, 2, THEORY, layer, settings)
    return {item.name: item.nbytes for item in found}


@pytest.mark.parametrize(
    ("stage", "expected"),
    [
        # DP: 400 MiB context; 688 MiB × 1 communicator; DDP's buckets, 7e9 gradients × 2 B;
        # margin 10 % × (1e10 theory + 1.4e10 buckets) = 2.4e9.
        (
            Stage.DP,
            {
                "CUDA context": 419_430_400,
                "NCCL buffers": 721_420_288,
                "DDP gradient buckets": 14_000_000_000,
                "Allocator fragmentation": 2_400_000_000,
            },
        ),
        # ZeRO-1 and 2: reduce bucket 5e8 elements × 2 B = 1e9; margin 10 % × (1e10 + 1e9) = 1.1e9.
        (
            Stage.ZERO1,
            {
                "CUDA context": 419_430_400,
                "NCCL buffers": 721_420_288,
                "Reduce bucket": 1_000_000_000,
                "Allocator fragmentation": 1_100_000_000,
            },
        ),
        (
            Stage.ZERO2,
            {
                "CUDA context": 419_430_400,
                "NCCL buffers": 721_420_288,
                "Reduce bucket": 1_000_000_000,
                "Allocator fragmentation": 1_100_000_000,
            },
        ),
        # ZeRO-3: also min(5e7 prefetch, 1e9 live − 2e8 in hand) = 5e7 elements × 2 B = 1e8;
        # margin 10 % × (1e10 + 1e9 + 1e8) = 1.11e9.
        (
            Stage.ZERO3,
            {
                "CUDA context": 419_430_400,
                "NCCL buffers": 721_420_288,
                "Reduce bucket": 1_000_000_000,
                "Prefetched weights": 100_000_000,
                "Allocator fragmentation": 1_110_000_000,
            },
        ),
    ],
)
def test_each_stage_has_its_items_in_order(stage: Stage, expected: dict[str, int]) -> None:
    found = items(stage)
    assert list(found) == list(expected)
    assert found == expected


@pytest.mark.parametrize("stage", list(Stage))
def test_one_card_has_no_communicator_and_no_buckets(stage: Stage) -> None:
    # Margin: 10 % × 1e10 theory = 1e9; nothing else is there to add to it.
    assert items(stage, gpus=1) == {"CUDA context": 419_430_400, "Allocator fragmentation": 1_000_000_000}


@pytest.mark.parametrize(
    ("layer", "prefetched"),
    [
        (None, 100_000_000),  # unknown layer: min(5e7, 1e9) × 2 B
        (200_000_000, 100_000_000),  # min(5e7, 8e8) × 2 B
        (980_000_000, 40_000_000),  # min(5e7, 2e7) × 2 B: max_live leaves room for 2e7 more
        (1_000_000_000, 0),  # the layer alone reaches max_live
        (1_500_000_000, 0),  # beyond it: nothing more is prefetched, never less than nothing
    ],
)
def test_prefetch_counts_only_weights_beyond_the_layer_in_hand(layer: int | None, prefetched: int) -> None:
    assert items(Stage.ZERO3, layer=layer)["Prefetched weights"] == prefetched


def test_settings_change_their_items() -> None:
    settings = Overheads(process_groups=2, reduce_bucket_size=200_000_000, fragmentation=0)
    # NCCL: 688 MiB × 2 = 1,442,840,576; reduce bucket 2e8 × 2 B = 4e8; no margin.
    assert items(Stage.ZERO2, settings=settings) == {
        "CUDA context": 419_430_400,
        "NCCL buffers": 1_442_840_576,
        "Reduce bucket": 400_000_000,
        "Allocator fragmentation": 0,
    }


def test_gradients_as_bucket_views_cost_ddp_nothing_more() -> None:
    found = items(Stage.DP, settings=Overheads(gradient_as_bucket_view=True))
    assert found["DDP gradient buckets"] == 0
    assert found["Allocator fragmentation"] == 1_000_000_000  # 10 % × 1e10 theory alone


def test_bucket_bytes_follow_the_element_size() -> None:
    # fp32 gradients and weights, 4 B each: bucket 5e8 × 4 = 2e9, prefetch 5e7 × 4 = 2e8.
    found = {i.name: i.nbytes for i in overhead_items(Stage.ZERO3, PARAMS, 8, 4, 4, THEORY, LAYER)}
    assert (found["Reduce bucket"], found["Prefetched weights"]) == (2_000_000_000, 200_000_000)


@pytest.mark.parametrize(
    ("theory", "percent", "margin"),
    [
        (1_000, 10, 100),
        (1_001, 10, 101),  # 100.1 rounded up
        (1_000, 0, 0),
        (3, 33, 1),  # 0.99 rounded up
        (10_000_000_000, 25, 2_500_000_000),
    ],
)
def test_the_margin_is_a_percent_of_the_theory_rounded_up(theory: int, percent: int, margin: int) -> None:
    found = overhead_items(Stage.DP, PARAMS, 1, 2, 2, theory, None, Overheads(fragmentation=percent))
    assert found[-1] == OverheadItem("Allocator fragmentation", margin, found[-1].source, "fragmentation")


def test_the_margin_leaves_out_what_the_allocator_does_not_hold() -> None:
    # A 1 TiB context and 1 TiB of NCCL buffers change the margin not at all: 10 % × (1e10 + 1e9).
    huge = Overheads(cuda_context=2**40, nccl_per_group=2**40)
    assert items(Stage.ZERO1, settings=huge)["Allocator fragmentation"] == 1_100_000_000


def test_total_adds_every_item() -> None:
    # ZeRO-3: 419,430,400 + 721,420,288 + 1e9 + 1e8 + 1.11e9 = 3,350,850,688.
    assert total(overhead_items(Stage.ZERO3, PARAMS, 8, 2, 2, THEORY, LAYER)) == 3_350_850_688
    assert total(()) == 0


def test_defaults_are_the_documented_ones() -> None:
    assert dataclasses.asdict(DEFAULTS) == {
        "cuda_context": 400 * 2**20,  # "around 400MB" with lazy loading: pytorch/pytorch#109888
        "nccl_per_group": 688 * 2**20,  # 688 MB per communicator of 3-4 A100s: NVIDIA/nccl#964
        "process_groups": 1,
        "gradient_as_bucket_view": False,  # DDP's default
        "reduce_bucket_size": 500_000_000,  # DeepSpeed's 5e8
        "prefetch_bucket_size": 50_000_000,  # DeepSpeed's code: 5e7 (its config page says 5e8)
        "max_live_parameters": 1_000_000_000,  # DeepSpeed's 1e9
        "fragmentation": 10,
    }


def test_every_item_names_its_parameter_and_a_web_source() -> None:
    assert OVERHEAD_PARAMETERS == (
        "cuda_context",
        "nccl_per_group",
        "process_groups",
        "gradient_as_bucket_view",
        "reduce_bucket_size",
        "prefetch_bucket_size",
        "max_live_parameters",
        "fragmentation",
    )
    for stage in Stage:
        for item in overhead_items(stage, PARAMS, 8, 2, 2, THEORY, LAYER):
            assert item.parameter in OVERHEAD_PARAMETERS
            assert item.source.startswith("https://")
            assert " " not in item.source


@pytest.mark.parametrize(
    "name",
    [
        "cuda_context",
        "nccl_per_group",
        "process_groups",
        "reduce_bucket_size",
        "prefetch_bucket_size",
        "max_live_parameters",
        "fragmentation",
    ],
)
def test_a_negative_setting_is_refused_by_name(name: str) -> None:
    message = f"{name} cannot be negative, and -1 was given: use 0 or more"
    negative: dict[str, Any] = {name: -1}
    with pytest.raises(ValueError, match=rf"^{re.escape(message)}$"):
        Overheads(**negative)


def test_zero_is_a_setting_like_any_other() -> None:
    nothing = Overheads(0, 0, 0, True, 0, 0, 0, 0)
    for stage in Stage:
        assert total(overhead_items(stage, PARAMS, 8, 2, 2, THEORY, LAYER, nothing)) == 0


@pytest.mark.parametrize("gpus", [0, -1])
def test_there_is_at_least_one_card(gpus: int) -> None:
    with pytest.raises(ValueError, match=r"^gpus must be at least 1$"):
        overhead_items(Stage.DP, PARAMS, gpus, 2, 2, THEORY, None)


def test_two_cards_already_have_a_communicator_and_buckets() -> None:
    # The smallest group: 688 MiB of NCCL buffers; DDP's buckets 7e9 × 2 B; margin 10 % × (1e10 + 1.4e10).
    assert items(Stage.DP, gpus=2) == {
        "CUDA context": 419_430_400,
        "NCCL buffers": 721_420_288,
        "DDP gradient buckets": 14_000_000_000,
        "Allocator fragmentation": 2_400_000_000,
    }


# bf16 weights with fp32 gradients (reduce in fp32): the buckets hold gradients, the prefetch weights.
WIDE_GRADIENTS = custom_recipe(2, 4, 4, 8)


@pytest.mark.parametrize(
    ("stage", "bucket", "expected"),
    [
        # DDP copies every gradient into its buckets: 7e9 × 4 B = 2.8e10; margin 10 % × (1e10 + 2.8e10).
        (
            Stage.DP,
            "DDP gradient buckets",
            {"DDP gradient buckets": 28_000_000_000, "Allocator fragmentation": 3_800_000_000},
        ),
        # The reduce bucket: 5e8 gradients × 4 B = 2e9; margin 10 % × (1e10 + 2e9) = 1.2e9.
        (Stage.ZERO2, "Reduce bucket", {"Reduce bucket": 2_000_000_000, "Allocator fragmentation": 1_200_000_000}),
        # ZeRO-3: the same bucket, and 5e7 prefetched weights × 2 B = 1e8; margin 10 % × (1e10 + 2e9 + 1e8).
        (
            Stage.ZERO3,
            "Reduce bucket",
            {
                "Reduce bucket": 2_000_000_000,
                "Prefetched weights": 100_000_000,
                "Allocator fragmentation": 1_210_000_000,
            },
        ),
    ],
)
def test_buckets_are_counted_in_the_gradients_bytes_and_the_prefetch_in_the_weights(
    stage: Stage, bucket: str, expected: dict[str, int]
) -> None:
    weights, gradients = WIDE_GRADIENTS.nbytes(Band.WEIGHTS), WIDE_GRADIENTS.nbytes(Band.GRADIENTS)
    found = {i.name: i.nbytes for i in overhead_items(stage, PARAMS, 8, weights, gradients, THEORY, LAYER)}
    assert {name: found[name] for name in expected} == expected


@pytest.mark.parametrize(
    ("groups", "nccl"),
    [
        (0, 0),  # no communicator of the app's counting: no buffers, not one group's worth
        (1, 721_420_288),  # 688 MiB
        (3, 2_164_260_864),  # 3 × 688 MiB
    ],
)
def test_nccl_buffers_are_one_set_per_communicator(groups: int, nccl: int) -> None:
    assert items(Stage.ZERO1, settings=Overheads(process_groups=groups))["NCCL buffers"] == nccl


def test_an_unknown_layer_leaves_all_of_max_live_to_prefetch() -> None:
    # max_live_parameters of 5e7 and no layer known: all 5e7 may be prefetched, × 2 B = 1e8.
    settings = Overheads(max_live_parameters=50_000_000)
    assert items(Stage.ZERO3, layer=None, settings=settings)["Prefetched weights"] == 100_000_000
