from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.recipes import MIXED_ADAM
from app.domain.stages import Stage
from app.domain.state_bytes import bytes_per_weight, per_gpu_bytes
from app.domain.units import ByteUnit, per_weight

GIB = ByteUnit.GIB.size
gib = ByteUnit.GIB.show

# The seed's table: bytes per weight on 8 GPUs, and a 30B-weight model per GPU.
SEED = [
    (Stage.DP, "16.00", "447.0 GiB"),
    (Stage.ZERO1, "5.50", "153.7 GiB"),
    (Stage.ZERO2, "3.75", "104.8 GiB"),
    (Stage.ZERO3, "2.00", "55.9 GiB"),
]


@pytest.mark.parametrize(("stage", "per_weight_text", "per_gpu_text"), SEED)
def test_the_seed_table_exactly(stage: Stage, per_weight_text: str, per_gpu_text: str) -> None:
    assert per_weight(bytes_per_weight(stage, 8)) == per_weight_text
    assert gib(per_gpu_bytes(stage, 30 * 10**9, 8)) == per_gpu_text


def test_exact_values_behind_the_rounded_ones() -> None:
    assert [bytes_per_weight(stage, 8) for stage in Stage] == [16, Fraction(11, 2), Fraction(15, 4), 2]
    assert per_gpu_bytes(Stage.ZERO1, 30 * 10**9, 8) == 165 * 10**9
    assert per_gpu_bytes(Stage.DP, 30 * 10**9, 8) / GIB == Fraction(480 * 10**9, 2**30)


@pytest.mark.parametrize("gpus", [0, -1])
def test_there_is_at_least_one_card(gpus: int) -> None:
    with pytest.raises(ValueError, match="at least 1"):
        bytes_per_weight(Stage.DP, gpus)


@given(gpus=st.integers(1, 4096), params=st.integers(0, 10**13))
def test_zero3_splits_the_whole_state_into_padded_slices(gpus: int, params: int) -> None:
    together = per_gpu_bytes(Stage.ZERO3, params, gpus) * gpus
    # N slices of ceil(P/N) weights: the whole state, plus less than one weight of padding per card.
    assert params * MIXED_ADAM.total <= together < (params + gpus) * MIXED_ADAM.total


@pytest.mark.parametrize(
    ("params", "gpus", "slice_weights"), [(30 * 10**9, 8, 3_750_000_000), (10, 4, 3), (7, 8, 1), (1, 1, 1)]
)
def test_a_sharded_slice_is_rounded_up_to_whole_weights(params: int, gpus: int, slice_weights: int) -> None:
    # ZeRO-3 keeps 16 B of every weight in its slice; nothing whole.
    assert per_gpu_bytes(Stage.ZERO3, params, gpus) == 16 * slice_weights
    # ZeRO-1 keeps weights and gradients whole (4 B each weight) and 12 B of its slice.
    assert per_gpu_bytes(Stage.ZERO1, params, gpus) == 4 * params + 12 * slice_weights


@given(gpus=st.integers(1, 4096))
def test_each_stage_keeps_no_more_than_the_one_before(gpus: int) -> None:
    sizes = [bytes_per_weight(stage, gpus) for stage in Stage]
    assert sizes == sorted(sizes, reverse=True)
    assert sizes[0] == MIXED_ADAM.total


@pytest.mark.parametrize(
    ("params", "gpus", "message"),
    [(-1, 8, "params cannot be negative"), (10, 0, "gpus must be at least 1")],
)
def test_a_card_of_impossible_inputs_is_refused_in_words(params: int, gpus: int, message: str) -> None:
    with pytest.raises(ValueError, match=rf"^{message}$"):
        per_gpu_bytes(Stage.DP, params, gpus)
