"""The run as the domain computes it: frozen weights at another size, DeepSpeed's layer, the assembled layer."""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.accounting import Accounting, Setup
from app.domain.activations import Recompute, for_one_sequence
from app.domain.architecture import LLAMA_3_8B, Architecture
from app.domain.communication import Whose
from app.domain.layers import bare_layers, column_moments, model_layers
from app.domain.run import MAX_BATCH, MEMO_ENTRIES, Run
from tests.conftest import examples
from tests.domain.test_layers import architectures


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


@settings(max_examples=examples(200), deadline=None)
@given(
    arch=architectures(),
    share=st.fractions(0, 1, max_denominator=97),
    seq=st.integers(1, 16),
    recompute=st.sampled_from(list(Recompute)),
    batches=st.lists(st.one_of(st.integers(0, 3), st.integers(0, MAX_BATCH)), min_size=1, max_size=6),
    deepspeed=st.booleans(),
)
def test_the_moments_of_any_micro_batch_are_one_sequences_multiplied(
    arch: Architecture, share: Fraction, seq: int, recompute: Recompute, batches: list[int], deepspeed: bool
) -> None:
    """The runs a bisection makes share one sequence's moments: each batch's are what `column_moments` builds."""
    frozen = arch.params - int(share * arch.params)
    activations = for_one_sequence(arch, seq, recompute)
    layers = model_layers(arch, frozen, 0, activations)
    setup = Setup(Accounting.DEEPSPEED if deepspeed else Accounting.PAPER)
    run = Run(params=arch.params, frozen=frozen, layers=layers, activations=activations, setup=setup)
    for batch in batches:
        tried = replace(run, batch=batch)
        assert tried.memo is run.memo
        assert tried.column_moments == column_moments(layers, batch, deepspeed)


@pytest.mark.parametrize(("largest", "frozen"), [(None, 0), (125, 0), (125, 300), (None, 999)])
def test_a_bare_counts_moments_at_any_size_are_its_layers(largest: int | None, frozen: int) -> None:
    run = Run(params=1000, largest_layer=largest, frozen=frozen)
    for params in (1000, 1001, 4000, 1000):
        tried = replace(run, params=params, frozen=run.frozen_at(params))
        assert tried.model_layers == bare_layers(params, largest, run.frozen_at(params))
        assert tried.column_moments == column_moments(tried.model_layers, tried.batch)
    assert len(run.memo) == 2 * 3  # three sizes: their layers and their moments, the repeated size's kept


def test_a_runs_memo_is_bounded() -> None:
    """However many runs are made from one (a default kept for the life of the worker), its memo stays bounded."""
    run = Run(params=1000, largest_layer=100)
    for params in range(1000, 1000 + MEMO_ENTRIES):
        assert replace(run, params=params).column_moments == column_moments(bare_layers(params, 100, 0), 1)
    assert len(run.memo) == MEMO_ENTRIES
