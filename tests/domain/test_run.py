"""The run as the domain computes it: frozen weights at another size, DeepSpeed's layer, the assembled layer."""

from __future__ import annotations

from fractions import Fraction

import pytest

from app.domain.architecture import LLAMA_3_8B
from app.domain.communication import Whose
from app.domain.layers import model_layers
from app.domain.run import Run


@pytest.mark.parametrize(
    ("run", "params", "frozen"),
    [
        # A share as entered: 0.9 of 5,479,452,055 trains, int(4,931,506,849.5) = 4,931,506,849.
        (Run(params=1_000_001, frozen=100_001, trainable_share=Fraction(9, 10)), 5_479_452_055, 547_945_206),
        # A count: the same proportion, 100,001/1,000,001 of 2,000,002 = 200,002.
        (Run(params=1_000_001, frozen=100_001), 2_000_002, 200_002),
    ],
)
def test_frozen_weights_of_a_model_of_another_size(run: Run, params: int, frozen: int) -> None:
    assert run.frozen_at(params) == frozen


def test_deepspeeds_layer_is_the_largest_module_where_the_layers_are_known() -> None:
    assert Run(params=1000, largest_layer=100).deepspeed_layer == 100
    shaped = Run(params=LLAMA_3_8B.params, largest_layer=LLAMA_3_8B.largest_layer, layers=model_layers(LLAMA_3_8B, 0))
    assert shaped.deepspeed_layer == 128_256 * 4096


@pytest.mark.parametrize(
    ("frozen", "assembled"),
    [
        # 8 layers of 125: all train, 4 B × 125; the last 100 train, 2 B × 125 + 2 B × 100.
        (0, 500),
        (900, 450),
        # Nothing trains: the weights alone.
        (1000, 250),
    ],
)
def test_the_assembled_layer_carries_gradients_for_what_trains_in_it(frozen: int, assembled: int) -> None:
    assert Run(params=1000, largest_layer=125, frozen=frozen).assembled_layer_bytes == assembled


def test_what_each_kind_of_collective_moves() -> None:
    # 1,000 weights in eighths of 125, the first 300 frozen, a largest layer of 125: the layer of the
    # eighth [250, 375) trains from 300, so the backward reaches from 250.
    run = Run(params=1000, largest_layer=125, frozen=300)
    assert [run.moved_params(whose) for whose in Whose] == [1000, 700, 750]
    assert Run(params=1000, frozen=1000).moved_params(Whose.REACHED) == 0


@pytest.mark.parametrize(
    ("frozen", "columns"),
    [
        # 1,000 weights, the first 300 frozen: the middles of columns 0 and 1 (62.5, 187.5) are frozen.
        (300, [True, True, False, False, False, False, False, False]),
        (0, [False] * 8),
        (1000, [True] * 8),
    ],
)
def test_a_column_is_drawn_frozen_by_its_middle(frozen: int, columns: list[bool]) -> None:
    run = Run(params=1000, frozen=frozen)
    assert [run.frozen_column(c) for c in range(8)] == columns


def test_lora_draws_no_column_as_trained() -> None:
    # Adapters of 1,000 weights a block, 32 blocks: every base weight frozen, so every column is.
    layers = model_layers(LLAMA_3_8B, LLAMA_3_8B.params, 1000)
    run = Run(params=LLAMA_3_8B.params + 32_000, frozen=LLAMA_3_8B.params, layers=layers)
    assert all(run.frozen_column(c) for c in range(8))
