from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.recipes import MIXED_ADAM, RECIPES, Band, RecipeName
from app.domain.stages import Stage
from app.domain.state_bytes import band_bytes, bytes_per_weight, per_gpu_bytes
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


# The three recipes with fractions or notes, by hand: 10**9 weights on 8 cards, slices of 125,000,000.
# adam-8bit: 2 + 2 + 4 + 2 * (1 + 4/256) B (bitsandbytes' int8 moments, an fp32 absmax per 256 each);
# qlora-nf4: (4 + 8/64 + 32/16384) / 8 = 2113/4096 B of NF4 weights (QLoRA, section 3), 2 + 0 + 8 after.
# fp8-adam: mixed-precision Adam's 2 + 2 + 4 + 8, fp8 being only inside the multiplies.
NEW_RECIPES = [
    (RecipeName.ADAM_8BIT, Stage.DP, 2 * 10**9 + 2 * 10**9 + 4 * 10**9 + 2_031_250_000),
    (RecipeName.ADAM_8BIT, Stage.ZERO3, 250_000_000 + 250_000_000 + 500_000_000 + 253_906_250),
    (RecipeName.QLORA_NF4, Stage.DP, 515_869_141 + 2 * 10**9 + 0 + 8 * 10**9),  # 515,869,140.625 rounded up
    (RecipeName.QLORA_NF4, Stage.ZERO3, 64_483_643 + 250_000_000 + 1_000_000_000),  # 64,483,642.578125 up
    (RecipeName.FP8_ADAM, Stage.DP, 16 * 10**9),
    (RecipeName.FP8_ADAM, Stage.ZERO3, 2 * 10**9),
]


@pytest.mark.parametrize(("name", "stage", "expected"), NEW_RECIPES)
def test_a_fraction_a_weight_is_whole_bytes_on_a_card(name: RecipeName, stage: Stage, expected: int) -> None:
    assert per_gpu_bytes(stage, 10**9, 8, RECIPES[name]) == expected


def test_a_part_byte_is_a_whole_one_on_the_card() -> None:
    # 1,000 weights on 3 cards: slices of 334; 334 * 2113/4096 = 172.30 B of NF4 weights, kept as 173.
    assert band_bytes(Stage.ZERO3, Band.WEIGHTS, 1000, 3, RECIPES[RecipeName.QLORA_NF4]) == 173
