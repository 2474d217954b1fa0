"""The model layer by layer: what each layer gathers, what of it trains and what it keeps, worked by hand."""

from __future__ import annotations

import pytest

from app.domain.activations import Activations, Recompute, Shape, for_one_sequence, head_bytes, per_layer_bytes
from app.domain.architecture import GPT_3_175B, LLAMA_3_8B, LLAMA_3_70B, Architecture
from app.domain.layers import bare_layers, column_moments, column_weights, first_trained, model_layers
from app.domain.terms import Pass

# Llama 3 8B: embedding and head 128,256 × 4,096 = 525,336,576 each; a block 218,112,000; 32 blocks.
EMBEDDING_8B = 128_256 * 4096
BLOCK_8B = 218_112_000


def test_llama_8b_layers_in_forward_order() -> None:
    layers = model_layers(LLAMA_3_8B, frozen=0)
    assert [layer.name for layer in (layers[0], layers[1], layers[-2], layers[-1])] == [
        "embedding",
        "layer 1",
        "final norm",
        "output head",
    ]
    assert (layers[0].params, layers[1].params, layers[-1].params) == (EMBEDDING_8B, BLOCK_8B, EMBEDDING_8B)
    assert all(layer.trained == layer.params for layer in layers)
    assert sum(layer.base for layer in layers) == LLAMA_3_8B.params


def test_a_frozen_prefix_trains_the_last_weights_and_splits_the_layer_it_ends_in() -> None:
    # Freezing the embedding and 100 weights of layer 1: layer 1 trains 218,112,000 − 100.
    layers = model_layers(LLAMA_3_8B, frozen=EMBEDDING_8B + 100)
    assert (layers[0].trained, layers[1].trained, layers[2].trained) == (0, BLOCK_8B - 100, BLOCK_8B)
    assert first_trained(layers) == 1


def test_lora_trains_its_adapters_in_every_block_and_nothing_else() -> None:
    # Rank 256 on all-linear: per block 256 × (q 8,192 + k 5,120 + v 5,120 + o 8,192 + 3 × 18,432) = 20,971,520.
    adapters = 256 * (8192 + 5120 + 5120 + 8192 + 3 * 18_432)
    layers = model_layers(LLAMA_3_8B, frozen=LLAMA_3_8B.params, adapters=adapters)
    blocks = [layer for layer in layers if layer.name.startswith("layer ")]
    assert {(b.params, b.trained) for b in blocks} == {(BLOCK_8B + 20_971_520, 20_971_520)}
    assert (layers[0].trained, layers[-1].trained) == (0, 0)  # the embedding and the head stay frozen
    assert first_trained(layers) == 1


def test_a_tied_head_gathers_the_embedding_again() -> None:
    layers = model_layers(GPT_3_175B, frozen=0)
    # 50,257 × 12,288 = 617,558,016; no weights of its own.
    assert (layers[-1].name, layers[-1].params, layers[-1].base, layers[-1].columns) == (
        "output head",
        617_558_016,
        0,
        (7,),
    )


@pytest.mark.parametrize(
    ("arch", "module"),
    [
        # DeepSpeed's largest layer is its largest module: Llama 3 8B's embedding, 128,256 × 4,096.
        (LLAMA_3_8B, 525_336_576),
        # GPT-3: the embedding 50,257 × 12,288 = 617,558,016 beats an MLP matrix 12,288 × 49,152 + 49,152.
        (GPT_3_175B, 617_558_016),
    ],
)
def test_largest_module(arch: Architecture, module: int) -> None:
    assert arch.largest_module == module
    assert max(layer.module or 0 for layer in model_layers(arch, 0)) == module


def test_llama_70b_block_module_is_an_mlp_matrix() -> None:
    assert LLAMA_3_70B.block_module == 8192 * 28_672  # 234,881,024


def _acts(seq: int, recompute: Recompute) -> Activations:
    return for_one_sequence(LLAMA_3_8B, seq, recompute)


def test_full_recompute_holds_the_head_or_one_working_set_never_both() -> None:
    # Llama 3 8B, s = 8192, b = 1, full: 32 checkpoints of 2sbh = 67,108,864 each, then the final norm's
    # input (2sbh) and the head's input and logits (2sbh + 4sbv = 67,108,864 + 4,202,692,608).
    layers = model_layers(LLAMA_3_8B, 0, 0, _acts(8192, Recompute.FULL))
    columns = column_moments(layers, batch=1)
    highest = max(m.activation for m in columns[-1].backward)
    assert highest == 32 * 67_108_864 + 67_108_864 + 67_108_864 + 4_202_692_608 == 6_484_393_984
    # Block 32's backward: 31 checkpoints and its whole working set, its input among it (1,376,780,288).
    # Under LoRA (adapters of 1,000 weights a block) the frozen head does not outdo it, so it is a moment.
    lora = model_layers(LLAMA_3_8B, LLAMA_3_8B.params, 1000, _acts(8192, Recompute.FULL))
    block = [m for m in column_moments(lora, batch=1)[-1].backward if m.layer == BLOCK_8B + 1000]
    assert [m.activation for m in block] == [31 * 67_108_864 + 1_376_780_288]


def test_activations_at_the_head_are_every_layers_and_scale_with_the_batch() -> None:
    shape = Shape(1, 4096)
    layers = model_layers(LLAMA_3_8B, 0, 0, _acts(4096, Recompute.NONE))
    one, four = (max(m.activation for m in column_moments(layers, b)[-1].backward) for b in (1, 4))
    assert one == 32 * per_layer_bytes(LLAMA_3_8B, shape) + head_bytes(LLAMA_3_8B, shape)
    assert four == 4 * one
    assert all(m.activation == 0 for c in column_moments(layers, 0) for m in (*c.forward, *c.backward))


def test_layers_before_the_first_that_trains_keep_nothing_and_are_not_in_the_backward() -> None:
    # The embedding and 16 blocks frozen: the backward stops at layer 17; only 16 blocks keep activations.
    frozen = EMBEDDING_8B + 16 * BLOCK_8B
    shape = Shape(1, 4096)
    layers = model_layers(LLAMA_3_8B, frozen, 0, _acts(4096, Recompute.NONE))
    columns = column_moments(layers, 1)
    assert columns[0].backward == ()  # layers 1–2 of column 0 are frozen, nothing before trains
    highest = max(m.activation for m in columns[-1].backward)
    assert highest == 16 * per_layer_bytes(LLAMA_3_8B, shape) + head_bytes(LLAMA_3_8B, shape)
    assert all(m.part is Pass.BACKWARD for c in columns for m in c.backward)


def test_column_weights_each_kind_adds_up() -> None:
    # 80 weights in eighths of 10; frozen below 35: trained 45 = 5 + 4 × 10.
    layers = bare_layers(80, 10, 35)
    assert column_weights(layers, 80, 0) == (10,) * 8
    assert column_weights(layers, 80, 35) == (0, 0, 0, 5, 10, 10, 10, 10)


@pytest.mark.parametrize(
    ("largest", "frozen", "trained"),
    [
        # 8 equal layers of 10: each eighth is one layer; frozen below 35 → the fourth layer trains 5.
        (10, 35, (0, 0, 0, 5, 10, 10, 10, 10)),
        # A largest layer of 20 ending at each eighth's end: the fourth, [20, 40), trains 40 − 35 = 5.
        (20, 35, (0, 0, 0, 5, 15, 20, 20, 20)),
        # No largest layer: the eighth's weights from the first that trains.
        (None, 35, (0, 0, 0, 5, 10, 10, 10, 10)),
    ],
)
def test_bare_layers(largest: int | None, frozen: int, trained: tuple[int, ...]) -> None:
    assert tuple(layer.trained for layer in bare_layers(80, largest, frozen)) == trained
