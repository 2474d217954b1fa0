"""The model layer by layer, as a step meets it: what each layer gathers, what of it trains, what it keeps.

ZeRO-3 assembles one layer at a time, forward and again backward; in the backward ZeRO-2 and ZeRO-3
compute that layer's gradients whole before reduce-scattering them. Only the weights that train have
gradients, so the layer in hand carries gradients for exactly what trains in it:

- a fine-tune that freezes a prefix (`trainable` as a count or a share) trains the last weights a
  forward pass meets: a layer that straddles the boundary trains in part;
- LoRA freezes the whole model and trains its adapters, which sit in every block beside the matrices
  they target: each block trains its adapters, and the embedding and the output head train nothing.

The backward pass runs from the loss back to the first layer that trains, and no further: autograd
does not go through layers before it, so they keep no activations and ZeRO-3 does not gather them
again. A layer's activations are there from its forward to its backward (a stack: the last layer's
are freed first), so at any moment a card holds what the layers up to the one in hand keep.

A bare weight count has no layers: each eighth of the model stands for a layer of the largest
layer's size, ending where the eighth ends, so the trainable weights (the last ones) fall in it as
they would in such a layer.
"""

from __future__ import annotations

from dataclasses import dataclass

from app.domain.activations import (
    Activations,
    Recompute,
    embedding_saved,
    final_norm_saved,
    kept,
    output_saved,
    per_layer_bytes,
    per_layer_split_bytes,
    split_bytes,
    working_bytes,
    working_split_bytes,
)
from app.domain.architecture import Architecture
from app.domain.eighths import COLUMNS, pieces
from app.domain.terms import Moment, Pass


@dataclass(frozen=True)
class Layer:
    """One layer as a step meets it."""

    name: str
    params: int | None
    """The weights ZeRO-3 gathers to work on it, its adapters included; None when unknown."""
    trained: int
    """Of those, the weights that train: its backward computes their gradients."""
    start: int = 0
    """Where its own weights begin in the model, counted in the base model's weights (adapters aside)."""
    base: int = 0
    """Its own weights in the base model: 0 for an output head tied to the embedding, which reuses those."""
    adapters: int = 0
    """LoRA's adapter weights in it, all of which train."""
    kept: int = 0
    """Activation bytes one sequence leaves from its forward to its backward (a block's Korthikanti figure)."""
    working: int = 0
    """Bytes one sequence holds beyond what the layers keep during its backward: a recomputed block's set."""
    module: int | None = None
    """Its largest module by its own weights (`Architecture.largest_module`): DeepSpeed's layer."""
    columns: tuple[int, ...] = (COLUMNS - 1,)
    """The eighths of the model it has weights in, as `eighths.model_columns` cuts them (a tied head: the last)."""
    block: int | None = None
    """The transformer block's number, 1-based; None for the embedding, norm and head: what pipeline stages cut."""
    replicated: int = 0
    """Of its own weights, the norms' (and a mixture of experts' router): every card of a tensor-parallel group
    keeps them whole."""
    kept_split: int = 0
    """Of `kept`, the bytes inside the tensor-parallel region (`activations.Saved.split`): split ÷ t."""
    working_split: int = 0
    """Of `working`, the bytes inside the tensor-parallel region."""
    routed: int = 0
    """Of its own weights, the routed experts' (`Architecture.routed_params`): expert parallelism divides them."""
    expert_module: int = 0
    """Of its modules, one routed expert's largest matrix (`Architecture.expert_module`): a cut card's is ÷ etp."""
    outside_module: int = 0
    """Where it has routed experts, its largest module outside them (`Architecture.outside_module`): ÷ tp."""


def _columns(start: int, end: int, model: int) -> tuple[int, ...]:
    """The eighths [P·c/8, P·(c+1)/8) that weights [start, end) of a model of P weights fall in."""
    return tuple(c for c in range(COLUMNS) if COLUMNS * start < model * (c + 1) and COLUMNS * end > model * c)


def _overlap(start: int, end: int, low: int, high: int) -> int:
    return max(0, min(end, high) - max(start, low))


def model_layers(
    arch: Architecture,
    frozen: int,
    adapters: int = 0,
    activations: Activations | None = None,
    largest: int | None = None,
) -> tuple[Layer, ...]:
    """Every layer of a transformer in forward order: what it gathers, what of it trains, what it keeps.

    `frozen` is how many of the base model's first weights are frozen, `adapters` LoRA's weights in each
    block. `activations` gives the sequence's length and recomputation (None: none kept). A `largest`
    layer entered by hand makes every layer that large, as the run states it.
    """
    model = arch.params
    shape = activations.shape if activations else None
    # A dense block's figures and a mixture-of-experts block's (the same for a dense model): each block its own.
    block = {e: per_layer_bytes(arch, shape, e) if shape else 0 for e in (False, True)}
    working = {e: working_bytes(arch, shape, e) if shape else 0 for e in (False, True)}
    block_split = {e: per_layer_split_bytes(arch, shape, e) if shape else 0 for e in (False, True)}
    working_split = {e: working_split_bytes(arch, shape, e) if shape else 0 for e in (False, True)}
    layers: list[Layer] = []
    start = 0
    parts = pieces(arch)
    for index, piece in enumerate(parts):
        own = _overlap(start, start + piece.params, frozen, model)
        kept_here, split_here, module = 0, 0, piece.params
        experts = piece.block is not None and arch.has_experts(piece.block)
        if piece.block is not None:
            kept_here, split_here, module = block[experts], block_split[experts], arch.block_module
        elif shape and index + 1 < len(parts) and parts[index + 1].block is not None:  # the last embedding
            kept_here = kept(embedding_saved(arch, shape), Recompute.NONE)
        elif shape and piece.name == "final norm":
            kept_here = kept(final_norm_saved(arch, shape), Recompute.NONE)
        elif shape and piece.name == "output head":
            kept_here = kept(output_saved(arch, shape), Recompute.NONE)
            split_here = split_bytes(output_saved(arch, shape), Recompute.NONE)
        norms = 2 * arch.norm_params if piece.block is not None else arch.norm_params * (piece.name == "final norm")
        if experts:  # the router is kept whole on every card too (Megatron-LM's `TopKRouter`)
            norms += arch.router_params
        extra = adapters if piece.block is not None else 0
        layers.append(
            Layer(
                piece.name,
                piece.params + extra,
                own + extra,
                start,
                piece.params,
                extra,
                kept_here,
                working[experts] if piece.block is not None else 0,
                module,
                _columns(start, start + piece.params, model),
                piece.block,
                norms,
                split_here,
                working_split[experts] if piece.block is not None else 0,
                arch.routed_params if experts else 0,
                arch.expert_module if experts else 0,
                arch.outside_module if experts else 0,
            )
        )
        start += piece.params
    if arch.tied_embeddings:  # the head multiplies by the embedding's own weights, gathered again
        embedding = layers[0]
        kept_head = kept(output_saved(arch, shape), Recompute.NONE) if shape else 0
        split_head = split_bytes(output_saved(arch, shape), Recompute.NONE) if shape else 0
        layers.append(
            Layer(
                "output head",
                embedding.params,
                embedding.trained,
                model,
                0,
                0,
                kept_head,
                0,
                embedding.params,
                kept_split=split_head,
            )
        )
    if largest is not None:
        return tuple(_as_large(layer, largest) for layer in layers)
    return tuple(layers)


def _as_large(layer: Layer, largest: int) -> Layer:
    return Layer(
        layer.name,
        largest,
        min(layer.trained, largest),
        layer.start,
        layer.base,
        layer.adapters,
        layer.kept,
        layer.working,
        largest,
        layer.columns,
        layer.block,
        layer.replicated,
        layer.kept_split,
        layer.working_split,
        layer.routed,
    )


def bare_layers(params: int, largest: int | None, frozen: int) -> tuple[Layer, ...]:
    """A weight count's layers: one per eighth, of the largest layer's size, ending where the eighth ends.

    Each starts where its weights start in the eighth (`start`), so the backward pass, which stops at the
    first layer that trains, reaches from there; with no largest layer known, from the first weight that trains.
    """
    layers = []
    for column in range(COLUMNS):
        start, end = params * column // COLUMNS, params * (column + 1) // COLUMNS
        if largest is None:  # no layers known: the eighth's weights from the first that trains
            start = max(start, min(frozen, end))
            trained = end - start
        else:
            trained = _overlap(end - largest, end, frozen, params)
            start = max(start, end - largest)
        layers.append(
            Layer(f"the model's eighth {column + 1}", largest, trained, start, end - start, 0, 0, 0, largest, (column,))
        )
    return tuple(layers)


def first_trained(layers: tuple[Layer, ...]) -> int | None:
    """The index of the first layer that trains, where the backward pass stops; None if nothing trains."""
    return next((index for index, layer in enumerate(layers) if layer.trained), None)


@dataclass(frozen=True)
class ColumnMoments:
    """The moments of a step's pass over one eighth of the model: one per layer in it, of those that differ."""

    forward: tuple[Moment, ...]
    backward: tuple[Moment, ...]
    """Empty where the backward pass does not reach the eighth: its layers, and all before, are frozen."""


def column_moments(layers: tuple[Layer, ...], batch: int, modules: bool = False) -> tuple[ColumnMoments, ...]:
    """Each eighth's moments, forward and backward: the layer in hand, what of it trains, the activations then.

    `batch` is the sequences per micro-batch. With `modules`, the layer in hand is its largest module
    (DeepSpeed's count).
    """
    first = first_trained(layers)
    forward: list[list[Moment]] = [[] for _ in range(COLUMNS)]
    backward: list[list[Moment]] = [[] for _ in range(COLUMNS)]
    alive = 0
    for index, layer in enumerate(layers):
        reached = first is not None and index >= first
        alive += layer.kept if reached else 0
        size = layer.module if modules else layer.params
        trained = layer.trained if size is None or layer.params is None else min(layer.trained, size)
        for column in layer.columns:
            forward[column].append(Moment(Pass.FORWARD, size, batch * alive, trained))
            if reached:
                backward[column].append(Moment(Pass.BACKWARD, size, batch * (alive + layer.working), trained))
    return tuple(ColumnMoments(_highest(f), _highest(b)) for f, b in zip(forward, backward, strict=True))


def _highest(moments: list[Moment]) -> tuple[Moment, ...]:
    """The moments no other one outdoes in every figure: only these can be a card's highest."""
    distinct = list(dict.fromkeys(moments))
    return tuple(m for m in distinct if not any(o != m and _covers(o, m) for o in distinct))


def _covers(big: Moment, small: Moment) -> bool:
    return (
        (big.layer or 0) >= (small.layer or 0)
        and (big.trained or 0) >= (small.trained or 0)
        and big.activation >= small.activation
        and (big.layer is None) == (small.layer is None)
    )


def column_weights(layers: tuple[Layer, ...], model: int, low: int) -> tuple[int, ...]:
    """Each eighth's weights from base position `low` on, its adapters included: what a collective moves.

    `low` = 0 counts every weight; the first trainable weight's position counts those that train;
    the first trained layer's start counts those the backward pass reaches. A block's adapters, which all
    train, count in the eighth where the block ends.
    """
    counts = []
    for column in range(COLUMNS):
        begin, end = model * column // COLUMNS, model * (column + 1) // COLUMNS
        counts.append(_overlap(begin, end, low, model))
    for layer in layers:  # adapters train, so every kind of collective moves them
        counts[layer.columns[-1]] += layer.adapters
    return tuple(counts)
