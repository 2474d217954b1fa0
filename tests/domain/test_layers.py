"""The model layer by layer: what each layer gathers, what of it trains and what it keeps, worked by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.activations import (
    Activations,
    Recompute,
    Shape,
    block_saved,
    for_one_sequence,
    head_bytes,
    per_layer_bytes,
)
from app.domain.architecture import GPT_3_175B, LLAMA_3_8B, LLAMA_3_70B, Architecture
from app.domain.layers import bare_layers, column_moments, column_weights, first_trained, model_layers
from app.domain.run import Run
from app.domain.sizing import peak_bytes
from app.domain.stages import Stage
from app.domain.terms import Pass
from app.domain.trainable import LoraTargets
from tests.conftest import examples

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


# The property: for random models, shares, LoRA ranks and targets, the peak is the most a card holds at
# any moment of a step walked layer by layer here, by brute force, with gradients only for what trains.


@st.composite
def architectures(draw: st.DrawFn) -> Architecture:
    heads = draw(st.integers(1, 4))
    kv_heads = draw(st.sampled_from([d for d in range(1, heads + 1) if heads % d == 0]))
    return Architecture(
        layers=draw(st.integers(1, 6)),
        hidden=heads * draw(st.integers(1, 8)),
        ffn=draw(st.integers(1, 64)),
        vocab=draw(st.integers(1, 300)),
        heads=heads,
        kv_heads=kv_heads,
        tied_embeddings=draw(st.booleans()),
        gated_mlp=draw(st.booleans()),
        biases=draw(st.booleans()),
        layer_norm=draw(st.booleans()),
        positions=draw(st.sampled_from([0, 4, 16])),
        dropout=draw(st.booleans()),
        flash_attention=draw(st.booleans()),
    )


def _adapters_by_hand(arch: Architecture, rank: int, targets: LoraTargets) -> int:
    """One block's adapters: r·(d_in + d_out) for each targeted matrix."""
    h, kv, f = arch.hidden, arch.kv_heads * arch.hidden // arch.heads, arch.ffn
    q = o = rank * (h + h)
    k = v = rank * (h + kv)
    mlp = (3 if arch.gated_mlp else 2) * rank * (h + f)
    return {LoraTargets.QV: q + v, LoraTargets.QKVO: q + k + v + o, LoraTargets.ALL_LINEAR: q + k + v + o + mlp}[
        targets
    ]


def _brute_force_peak(arch: Architecture, stage: Stage, gpus: int, frozen: int, per_block: int, shape: Shape) -> int:
    """Walk the step piece by piece and add up exactly what is alive at each moment (mixed-precision Adam)."""
    s, b, h = shape.seq, shape.batch, arch.hidden
    block_kept = sum(t.nbytes for t in block_saved(arch, shape) if shape.recompute not in t.recomputed_by)
    whole_block = sum(t.nbytes for t in block_saved(arch, shape))
    if shape.recompute is Recompute.FULL:  # a block keeps its input, 2sbh, and recomputes the rest
        block_kept = 2 * s * b * h
    # (name, weights gathered, weights that train, activations kept, working set in its backward)
    pieces: list[tuple[str, int, int, int, int]] = []
    position = 0
    base = arch.params

    def trains(n: int) -> int:
        return max(0, min(position + n, base) - max(position, frozen))

    embedding = arch.vocab * h
    pieces.append(("embedding", embedding, trains(embedding), 0, 0))
    position += embedding
    if arch.positions:
        pieces.append(("positions", arch.positions * h, trains(arch.positions * h), 0, 0))
        position += arch.positions * h
    if arch.dropout:  # the embedding's dropout mask, sbh of 1 B, kept by the last embedding piece
        name, n, t, _, _ = pieces[-1]
        pieces[-1] = (name, n, t, s * b * h, 0)
    for _ in range(arch.layers):
        n = arch.block_params
        working = whole_block - block_kept if shape.recompute is Recompute.FULL else 0
        pieces.append(("block", n + per_block, trains(n) + per_block, block_kept, working))
        position += n
    norm = arch.norm_params
    pieces.append(("final norm", norm, trains(norm), 2 * s * b * h, 0))
    position += norm
    head = 2 * s * b * h + 4 * s * b * arch.vocab  # its input and the fp32 log-probabilities
    if arch.tied_embeddings:
        pieces.append(("head", embedding, pieces[0][2], head, 0))
    else:
        pieces.append(("head", embedding, trains(embedding), head, 0))
    params = base + per_block * arch.layers
    trained = params - frozen
    slice_of = -(-params // gpus)
    slice_trained = -(-trained // gpus)
    sharded = {Stage.DP: 0, Stage.ZERO1: 1, Stage.ZERO2: 2, Stage.ZERO3: 3}[stage]
    state = (
        2 * (slice_of if sharded >= 3 else params)
        + 2 * (slice_trained if sharded >= 2 else trained)
        + 12 * (slice_trained if sharded >= 1 else trained)
    )
    first = next((i for i, piece in enumerate(pieces) if piece[2]), None)
    # Activations alive once piece i has run forward: those of every piece up to i the backward will reach.
    alive = [
        sum(p[3] for j, p in enumerate(pieces[: i + 1]) if first is not None and j >= first) for i in range(len(pieces))
    ]
    moments = [0]  # at rest
    for i, (_, n, _, _, _) in enumerate(pieces):  # the forward pass: ZeRO-3 gathers the piece
        moments.append((2 * n if sharded == 3 else 0) + alive[i])
    backward = [] if first is None else range(len(pieces) - 1, first - 1, -1)  # to the first piece that trains
    for i in backward:
        _, n, t, _, working = pieces[i]
        gradients = 2 * t if sharded >= 2 else 0  # computed whole, for the weights that train
        moments.append((2 * n if sharded == 3 else 0) + gradients + alive[i] + working)
    return state + max(moments)


@settings(max_examples=examples(300), deadline=None)
@given(
    arch=architectures(),
    stage=st.sampled_from(list(Stage)),
    gpus=st.integers(2, 16),
    share=st.fractions(0, 1, max_denominator=97),
    lora=st.one_of(st.none(), st.tuples(st.integers(1, 8), st.sampled_from(list(LoraTargets)))),
    batch=st.integers(0, 3),
    seq=st.integers(1, 16),
    recompute=st.sampled_from(list(Recompute)),
)
def test_the_peak_is_a_brute_force_walk_over_what_is_alive(
    arch: Architecture,
    stage: Stage,
    gpus: int,
    share: Fraction,
    lora: tuple[int, LoraTargets] | None,
    batch: int,
    seq: int,
    recompute: Recompute,
) -> None:
    per_block = _adapters_by_hand(arch, *lora) if lora else 0
    frozen = arch.params if lora else arch.params - int(share * arch.params)
    activations = for_one_sequence(arch, seq, recompute)
    run = Run(
        params=arch.params + per_block * arch.layers,
        gpus=gpus,
        largest_layer=arch.largest_layer,
        layers=model_layers(arch, frozen, per_block, activations),
        activations=activations,
        batch=batch,
        frozen=frozen,
    )
    expected = _brute_force_peak(arch, stage, gpus, frozen, per_block, Shape(batch, seq, recompute))
    assert peak_bytes(stage, run) == expected


def test_a_bare_counts_eighths_are_whole_weights() -> None:
    # 1,001 weights: eighths start at 1,001·c // 8 = 0, 125, 250, 375, 500, 625, 750, 875.
    layers = bare_layers(1001, None, 0)
    assert [layer.start for layer in layers] == [0, 125, 250, 375, 500, 625, 750, 875]
    assert [layer.trained for layer in layers] == [125, 125, 125, 125, 125, 125, 125, 126]


def test_a_largest_layer_entered_makes_every_layer_that_large() -> None:
    # Llama 3 8B with a largest layer of 100,000,000: each layer gathers that many; the embedding, which
    # trains all its 525,336,576, trains at most the 100,000,000 in hand.
    layers = model_layers(LLAMA_3_8B, 0, largest=100_000_000)
    assert {(layer.params, layer.trained, layer.module) for layer in layers[:2]} == {
        (100_000_000, 100_000_000, 100_000_000)
    }
    assert layers[-2].trained == LLAMA_3_8B.norm_params  # the final norm's 4,096 train, less than the layer
