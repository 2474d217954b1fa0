"""The most loaded card of a layout: its pipeline stage's layers, cut ÷ tp, and what it keeps of them.

With the model cut (`parallel.Cut`), cards differ: each keeps its pipeline stage's layers only, each layer's
matrices ÷ tp (the norms whole: every card of a tensor-parallel group keeps them), the embedding on the first
stage and the output layer on the last (a tied output layer is a second copy of the word embeddings there
when pp > 1, as Megatron-LM keeps it), vocabulary-parallel ÷ tp. In a mixture-of-experts block the routed
experts are cut ÷ ep × etp instead (each card keeps experts / ep of them, each ÷ etp), and the router is kept
whole with the norms (Megatron-LM's `TopKRouter` is not split). ZeRO then shards that card's state over its
data-parallel group (`Run.shards`), its experts' over the expert-data-parallel group (`Run.experts_of`). A
stage's weights are the figures `sizing` works with in place of the model's: for tp = pp = cp = ep = 1 the
run's own, untouched.

Activations follow Korthikanti et al. 2022, Table 2: what a block keeps inside the tensor-parallel region
÷ t, the rest whole unless sequence parallelism splits it too (`activations.Saved.split`); context
parallelism splits every sequence ÷ cp. The pipeline keeps several micro-batches in flight: 1F1B's stage i
(0-based) holds min(pp − i, microbatches) of them (its first, min(pp, microbatches)), and interleaving v
chunks a card multiplies that by 1 + (pp − 1)/(pp·v) (Narayanan et al. 2021; Megatron-LM's
`theoretical_memory_usage.py`). docs/parallelism.md works the cases by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from fractions import Fraction

from app.domain.activations import Recompute, Shape, per_layer_bytes, per_layer_split_bytes
from app.domain.architecture import Architecture
from app.domain.layers import Layer, bare_layers
from app.domain.parallel import Cut, stage_blocks


@dataclass(frozen=True)
class StageLoad:
    """One pipeline stage's card: the weights it keeps (÷ tp) and its layers as that card meets them."""

    index: int
    """The pipeline stage, 0-based: 0 holds the embedding, pp − 1 the output layer."""
    params: int
    """Weights on the card: its stage's, the matrices ÷ tp, rounded up, the norms whole."""
    frozen: int
    """Of those, the weights that do not train."""
    layers: tuple[Layer, ...]
    """Its stage's layers in forward order, each as one card of the tensor-parallel group keeps it."""
    in_flight: Fraction
    """Micro-batches whose activations the card keeps at once: min(pp − index, microbatches), × the interleaving
    penalty with vpp > 1."""
    experts: int = 0
    """Of `params`, its routed experts' weights: its stage's ÷ ep × etp."""
    experts_frozen: int = 0
    """Of those, the weights that do not train."""


def in_flight(cut: Cut, index: int) -> Fraction:
    """The micro-batches pipeline stage `index` keeps activations for at its busiest (1 without a pipeline)."""
    held = Fraction(min(cut.pp - index, cut.microbatches))
    if cut.vpp > 1:
        held *= 1 + Fraction(cut.pp - 1, cut.pp * cut.vpp)
    return held


def _share(count: int, whole: int, part: int) -> int:
    """Of `whole` weights cut to `part` on a card, the share of `count` of them: all, none, or in proportion."""
    if count >= whole:
        return part
    return 0 if count <= 0 else -(-count * part // whole)


def _tp_weights(weights: int, replicated: int, tp: int) -> int:
    """A card's part of `weights`, of which `replicated` (the norms) every card keeps whole: the rest ÷ tp."""
    return -(-(weights - replicated) // tp) + replicated


def expert_weights(routed: int, cut: Cut) -> int:
    """A card's part of a block's `routed` experts' weights: experts / ep of them whole, each ÷ etp, rounded up."""
    return -(-routed // (cut.ep * cut.expert_tp))


def card_weights(weights: int, replicated: int, routed: int, cut: Cut) -> int:
    """A card's part of a layer's `weights`: `routed` experts ÷ ep × etp, `replicated` whole, the rest ÷ tp.

    Megatron-LM's MoE layer: the attention and shared experts are tensor-parallel, the routed experts
    expert-parallel (and expert-tensor-parallel), the router and norms on every card.
    """
    return expert_weights(routed, cut) + _tp_weights(weights - routed, replicated, cut.tp)


def activation_bytes(cut: Cut, kept: int, split: int) -> Fraction:
    """What one card keeps of `kept` bytes, `split` of them inside the tensor-parallel region: Table 2's rule.

    The region's part ÷ t, the rest ÷ t only with sequence parallelism; all ÷ cp, context parallelism's part
    of the sequence.
    """
    outside = kept - split
    return (Fraction(split, cut.tp) + Fraction(outside, cut.tp if cut.sp else 1)) / cut.cp


def _cut_layer(layer: Layer, cut: Cut) -> Layer:
    """One layer as a card of the tensor-parallel group keeps it and computes on it."""
    params = None if layer.params is None else card_weights(layer.params, layer.replicated, layer.routed, cut)
    trained = _share(layer.trained, layer.params or 0, params or 0) if layer.params else -(-layer.trained // cut.tp)
    return replace(
        layer,
        params=params,
        trained=trained,
        base=card_weights(layer.base, layer.replicated, layer.routed, cut) if layer.base else 0,
        routed=expert_weights(layer.routed, cut),
        adapters=-(-layer.adapters // cut.tp),
        kept=math.ceil(activation_bytes(cut, layer.kept, layer.kept_split)),
        working=math.ceil(activation_bytes(cut, layer.working, layer.working_split)),
        module=_cut_module(layer, cut),
        kept_split=0,
        working_split=0,
    )


def _cut_module(layer: Layer, cut: Cut) -> int | None:
    """A layer's largest module on a card (DeepSpeed's layer): an expert's matrix ÷ etp, the others' ÷ tp.

    Megatron-LM splits each routed expert's matrices over the expert tensor-parallel group, the attention's
    and shared experts' over the tensor-parallel one.
    """
    if layer.module is None:
        return None
    if not layer.expert_module:
        return -(-layer.module // cut.tp)
    return max(-(-layer.outside_module // cut.tp), -(-layer.expert_module // cut.expert_tp))


def stage_layers(layers: tuple[Layer, ...], cut: Cut, index: int) -> tuple[Layer, ...]:
    """The layers pipeline stage `index` keeps, in forward order.

    Its chunks of blocks (with vpp, every pp-th of pp × vpp equal chunks; without, its run of
    `parallel.stage_blocks`, ⌊L/pp⌋ or ⌈L/pp⌉ of them), the embedding on the first stage, the final norm and
    output layer on the last.
    """
    blocks = [i for i, layer in enumerate(layers) if layer.block is not None]
    if cut.vpp > 1:
        per = -(-len(blocks) // (cut.pp * cut.vpp))  # whole chunks (`cut_refused` asks that they divide)
        stage_of = [(b // per) % cut.pp for b in range(len(blocks))]
    else:
        stage_of = [s for s, count in enumerate(stage_blocks(len(blocks), cut.pp)) for _ in range(count)]
    kept: list[Layer] = []
    for i, layer in enumerate(layers):
        if layer.block is not None:
            here = stage_of[layer.block - 1] == index
        else:
            here = index == (0 if i < blocks[0] else cut.pp - 1)
        if here:
            kept.append(layer)
    return tuple(kept)


def _owned(layer: Layer, pp: int) -> int:
    """A layer's own weights on its stage: a tied output layer is a second copy of the embedding when pp > 1."""
    if layer.base == 0 and layer.block is None and layer.params:
        return layer.params if pp > 1 else 0
    return layer.base + layer.adapters


def stage_load(
    layers: tuple[Layer, ...], params: int, frozen: int, largest: int | None, cut: Cut, index: int
) -> StageLoad:
    """Pipeline stage `index`'s card, from the model's `layers` (or, for a bare count, its `params` weights)."""
    flight = in_flight(cut, index)
    if not any(layer.block is not None for layer in layers):
        # A bare count has no blocks to hand out: each stage keeps an equal run of the weights, frozen first.
        low, high = params * index // cut.pp, params * (index + 1) // cut.pp
        stage_frozen = max(0, min(frozen, high) - low)
        card = -(-(high - low) // cut.tp)
        card_frozen = card - _share(high - low - stage_frozen, high - low, card)
        biggest = None if largest is None else min(card, -(-largest // cut.tp))
        return StageLoad(index, card, card_frozen, bare_layers(card, biggest, card_frozen), flight)
    kept = stage_layers(layers, cut, index)
    card = trained = experts = experts_trained = 0
    for layer in kept:
        own = _owned(layer, cut.pp)
        if own:
            mine = card_weights(own, layer.replicated, layer.routed, cut)
            theirs = expert_weights(layer.routed, cut)
            card += mine
            trained += _share(layer.trained, layer.params or own, mine)
            experts += theirs
            experts_trained += _share(layer.trained, layer.params or own, theirs)
    cut_layers = tuple(_cut_layer(layer, cut) for layer in kept)
    return StageLoad(index, card, card - trained, cut_layers, flight, experts, experts - experts_trained)


def per_layer_at(arch: Architecture, shape: Shape, cut: Cut) -> int:
    """What one block leaves on one card of the cut: Korthikanti's Table 2 with t, sp (and ÷ cp), rounded up."""
    return math.ceil(activation_bytes(cut, per_layer_bytes(arch, shape), per_layer_split_bytes(arch, shape)))


MEGATRON_MARGIN = Fraction(105, 100)
"""Megatron-LM's 5% for the optimizer's and other temporaries, in its count without sequence parallelism."""


def megatron_activations(arch: Architecture, seq: int, batch: int, cut: Cut, recompute: Recompute) -> Fraction:
    """Megatron-LM's own activations of its most loaded card, the first pipeline stage: its formula, exactly.

    `compute_activation_memory` (sequence parallelism with selective recomputation) or
    `compute_activation_memory_without_sp` (otherwise) in megatron/training/theoretical_memory_usage.py:
    sbh(18 + 4f/h) or sbh(10 + 24/t) a block whatever the model's attention, for all L blocks (a stage's L/pp
    for pp micro-batches), the embedding's 8sb + sbh for pp micro-batches, × the interleaving penalty or
    min(1, m/pp), the output layer's only with pp = 1; ÷ t with sequence parallelism, × 1.05 without. Its
    formula has no recomputation but selective, and no context parallelism: the app divides the sequence by cp.
    """
    s, b, h, pp, tp = Fraction(seq, cut.cp), batch, arch.hidden, cut.pp, cut.tp
    with_sp = cut.sp and recompute is Recompute.SELECTIVE
    per_layer = s * b * h * (18 + Fraction(4 * arch.ffn, h) if with_sp else 10 + Fraction(24, tp))
    total = per_layer * arch.layers + 8 * s * b * pp + s * b * h * pp
    if cut.vpp > 1:
        total *= 1 + Fraction(pp - 1, pp * cut.vpp)
    elif pp > 1:
        total *= min(Fraction(1), Fraction(cut.microbatches, pp))
    if with_sp:
        if pp == 1:
            total += s * b * h * 4 * (1 + Fraction(arch.vocab, h))
        return total / tp
    if pp == 1:
        total += (s * b * arch.vocab / tp + s * b * h) * 2
    return total * MEGATRON_MARGIN
