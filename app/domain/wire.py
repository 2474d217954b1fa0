"""Traffic by link: each collective's bytes inside a node and between nodes, and the time they take.

A node's cards talk over NVLink; nodes talk over the network, one port per card. Each collective runs
over a group of n cards in k nodes, g = n/k in each, and is counted as the hierarchical ring NCCL and
DeepSpeed use across nodes: a ring between the nodes' matching cards, and a ring inside each node.
Per card, of a buffer of B bytes (docs/wire.md works the sums):

- an all-gather or a reduce-scatter sends (g-1)/g · B inside its node and (k-1)/n · B between nodes,
  (n-1)/n · B in all, as a flat ring does;
- an all-reduce is a reduce-scatter and an all-gather: twice both.

ZeRO++ changes what is on the wire, not what is stored: qwZ sends ZeRO-3's weights in int8 (1 B a
weight), qgZ its gradients in int4 (half a byte), and hpZ gathers the backward's weights from a
secondary partition: inside the node where its group is a node's cards, between nodes too where wider
(`zeropp` says which). Under Megatron's accounting the gradients travel in its fp32 main_grad. The ZeRO
paper's 2P and 3P (`communication`) count each collective as P; here the (n-1)/n is kept.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from fractions import Fraction
from math import ceil

from app.domain.accounting import Accounting, megatron_gradients
from app.domain.communication import Collective, Scope, Transfer, Whose
from app.domain.layers import Layer, first_trained
from app.domain.recipes import Band
from app.domain.run import Run, StageCard
from app.domain.stages import Stage

INT8 = Fraction(1)
"""qwZ's bytes a weight on the wire (its block scales, one fp32 per 2,048 or so, are left out)."""
INT4 = Fraction(1, 2)
"""qgZ's bytes a gradient on the wire."""
FLOPS_PER_WEIGHT_PER_TOKEN = 6
"""2 in the forward pass, 4 in the backward: the count MFU is measured against (Kaplan et al., 2020)."""


@dataclass(frozen=True)
class Span:
    """The cards a collective runs over: how many, in how many nodes."""

    cards: int
    nodes: int

    @property
    def per_node(self) -> int:
        """Its cards in each node, g."""
        return self.cards // self.nodes


@dataclass(frozen=True)
class LinkBytes:
    """One collective of a step, and the bytes one card sends for it over each link."""

    transfer: Transfer
    span: Span
    buffer: int
    """The bytes the collective assembles or reduces: the whole tensor, as it is on the wire."""
    inside: int
    """Bytes one card sends over the link inside its node."""
    between: int
    """Bytes one card sends over the link between nodes."""
    quantized: str = ""
    """'int8' or 'int4' where ZeRO++ quantizes it; empty in the recipe's own bytes."""

    @property
    def algorithm(self) -> str:
        """The algorithm, named with what it sends: 'ring all-gather, (n-1)/n of the buffer a card'."""
        span, name = self.span, str(self.transfer.collective)
        twice = "2" if self.transfer.collective is Collective.ALL_REDUCE else ""
        if span.cards == 1:
            return f"{name} over one card: nothing sent"
        if span.nodes == 1 or span.per_node == 1:
            return f"ring {name} over {span.cards} cards: {twice}(n−1)/n of the buffer a card, n = {span.cards}"
        return (
            f"hierarchical ring {name} over {span.nodes} nodes of {span.per_node}: {twice}(g−1)/g of the buffer "
            f"a card inside the node, {twice}(k−1)/n between nodes"
        )


def span(scope: Scope, stage: Stage, run: Run) -> Span:
    """The cards a collective over `scope` runs over, and the nodes they are in (`Run` lines them up).

    Megatron's rank order (tp fastest, then cp, dp, pp) puts a ZeRO group's cards tp ranks apart, and a
    hybrid run's replicas a shard group's tp × shards apart: for an uncut model, neighbours and shards apart.
    The routed experts' group (`Scope.EXPERTS`), edp cards, is ep × etp ranks apart: inside a node only where
    ep × etp × edp cards fit in one.
    """
    tp = run.cut.tp
    if scope is Scope.EXPERTS:
        # Megatron's expert order (etp, ep, edp, pp from the fastest rank): an edp group's ranks are ep × etp apart.
        cards, apart = run.expert_shards, run.cut.ep * run.cut.expert_tp
    elif stage is Stage.DP or (scope is Scope.GROUP and run.shards == run.zero_group):
        cards, apart = run.zero_group, tp
    elif scope is Scope.REPLICAS:
        cards, apart = run.replicas, tp * run.shards
    else:
        cards, apart = (run.setup.hpz if scope is Scope.SECONDARY else run.shards), tp
    return Span(cards, _nodes(cards, apart, run.gpus_per_node))


def _nodes(cards: int, apart: int, per_node: int) -> int:
    """The nodes `cards` cards `apart` ranks apart sit in, from a node's first rank (nodes fill in rank order)."""
    return cards if apart >= per_node else (cards - 1) * apart // per_node + 1


def experts_apart(run: Run, card: StageCard) -> bool:
    """Whether `card`'s routed experts go over a group of their own: the expert-data-parallel group (`Run.experts_of`).

    With ep × etp = tp (ep = 1 with the experts cut as the rest, or a dense model) they go with the rest.
    """
    return run.experts_of(card).weights > 0


def moved_params(run: Run, whose: Whose, card: StageCard | None = None, scope: Scope = Scope.GROUP) -> int:
    """The weights a collective of this kind moves in a whole step: with the model cut, `card`'s own (stage ÷ tp).

    Where the card's routed experts go over their own group, a collective over `Scope.EXPERTS` moves those
    (`card.experts`, ÷ ep × etp) and the others the card's remaining weights: the two sum to the card's.
    """
    if card is None or not run.cut.cuts:
        return run.moved_params(whose)
    whole = _card_moved(run, whose, card)
    if not experts_apart(run, card):
        return whole
    experts = _experts_moved(run, whose, card)
    return experts if scope is Scope.EXPERTS else whole - experts


def _experts_moved(run: Run, whose: Whose, card: StageCard) -> int:
    """Of `card`'s weights a collective of this kind moves, its routed experts' (at most the card's experts)."""
    return min(card.experts, _reached(run, whose, card, card.experts, card.experts_frozen, _routed))


def _card_moved(run: Run, whose: Whose, card: StageCard) -> int:
    """The weights a collective of this kind moves of `card`'s own (stage ÷ tp, its experts ÷ ep × etp)."""
    return _reached(run, whose, card, card.params, card.frozen, _gathered)


def _reached(run: Run, whose: Whose, card: StageCard, total: int, frozen: int, of_layer: Callable[[Layer], int]) -> int:
    """Of `total` weights of `card` (`frozen` of them frozen), those a collective of this kind moves.

    Every one, those that train, or those the backward reaches: all of them if an earlier stage trains, else
    `of_layer`'s count of each layer from the card's first that trains.
    """
    if whose is Whose.EVERY:
        return total
    if whose is Whose.TRAINED:
        return total - frozen
    if any(earlier.params > earlier.frozen for earlier in run.cards[: card.stage]):
        return total
    first = first_trained(card.layers)
    return 0 if first is None else sum(of_layer(layer) for layer in card.layers[first:])


def _routed(layer: Layer) -> int:
    """The routed experts' weights of one of a card's layers."""
    return layer.routed


def _gathered(layer: Layer) -> int:
    """The weights a collective moves for one of a card's layers: its gathered ones, else its own and adapters."""
    return layer.base + layer.adapters if layer.params is None else layer.params


def wire_bytes(transfer: Transfer, stage: Stage, run: Run) -> Fraction:
    """Bytes a weight of the collective's band takes on the wire: the recipe's, or ZeRO++'s int8 and int4."""
    return _quantized(transfer, stage, run)[0]


def _quantized(transfer: Transfer, stage: Stage, run: Run) -> tuple[Fraction, str]:
    own = Fraction(run.recipe.nbytes(transfer.band))
    if transfer.band is Band.GRADIENTS and run.setup.accounting is Accounting.MEGATRON:
        # Megatron reduces the gradients in its main_grad buffer: fp32 where a master copy trains bf16 weights.
        return megatron_gradients(run.recipe), ""
    if stage is not Stage.ZERO3:  # ZeRO++ is ZeRO-3's
        return own, ""
    # hpZ's backward gathers the secondary copy, kept in the weights' own bytes inside the node.
    gathered = transfer.collective is Collective.ALL_GATHER and transfer.scope is not Scope.SECONDARY
    if gathered and transfer.band is Band.WEIGHTS and run.qwz:
        return min(own, INT8), "int8"
    if transfer.collective is Collective.REDUCE_SCATTER and transfer.band is Band.GRADIENTS and run.qgz:
        return min(own, INT4), "int4"
    return own, ""


def split(move: Transfer, weights: int, stage: Stage, run: Run) -> tuple[Fraction, Fraction, Fraction]:
    """A collective of `weights` weights: its buffer's bytes, and one card's bytes inside its node and between."""
    return _split(move, weights, span(move.scope, stage, run), _quantized(move, stage, run)[0], run)


def _split(
    move: Transfer, weights: int, where: Span, per_weight: Fraction, run: Run
) -> tuple[Fraction, Fraction, Fraction]:
    if move.scope is Scope.REPLICAS:  # each card's slice of the group's weights
        weights = -(-weights // run.shards)
    buffer = weights * per_weight
    times = (2 if move.collective is Collective.ALL_REDUCE else 1) * move.per_step
    g, k, n = where.per_node, where.nodes, where.cards
    return buffer, times * buffer * Fraction(g - 1, g), times * buffer * Fraction(k - 1, n)


def card_transfers(stage: Stage, run: Run, card: StageCard) -> tuple[Transfer, ...]:
    """The step's collectives for `card`: the run's, each beside its routed experts' own where they go apart.

    Megatron-LM and DeepSpeed-MoE reduce the routed experts' gradients and gather their weights over the
    expert-data-parallel group, the rest over dp × cp (`experts_apart`). An experts' collective that moves
    nothing (their gradients where they are frozen) is left out; a dense model's, or ep × etp = tp's, are the run's.
    """
    moves = run.transfers(stage)
    if not experts_apart(run, card):
        return moves
    found: list[Transfer] = []
    for move in moves:
        found.append(replace(move, others=True))
        if moved_params(run, move.whose, card, Scope.EXPERTS):
            found.append(replace(move, scope=Scope.EXPERTS))
    return tuple(found)


def link_bytes(
    stage: Stage, run: Run, moves: tuple[Transfer, ...], card: StageCard | None = None
) -> tuple[LinkBytes, ...]:
    """Each of the step's collectives (`moves`) with one card's bytes inside its node and between nodes.

    With the model cut, of `card`'s own weights (`moved_params`), over its ZeRO group; its routed experts'
    over their expert-data-parallel group (`card_transfers`).
    """
    found = []
    for move in moves:
        # Its span and its bytes on the wire worked out once, for the sums and for the report.
        where, (per_weight, label) = span(move.scope, stage, run), _quantized(move, stage, run)
        weights = moved_params(run, move.whose, card, move.scope)
        buffer, inside, between = _split(move, weights, where, per_weight, run)
        found.append(LinkBytes(move, where, ceil(buffer), ceil(inside), ceil(between), label))
    return tuple(found)


@dataclass(frozen=True)
class StepTime:
    """Estimated seconds of one step: its collectives on each link, and its matrix multiplies."""

    inside: Fraction
    """Seconds one card's bytes inside its node take at the NVLink bandwidth."""
    between: Fraction
    """Seconds one card's bytes between nodes take at the network's."""
    compute: Fraction | None
    """One card's share of 6 × weights × tokens at the peak times the MFU (`compute_seconds`); None with no tokens."""

    @property
    def wire(self) -> Fraction:
        """Both links one after the other: a hierarchical ring's two rings do not overlap each other."""
        return self.inside + self.between

    @property
    def hides(self) -> bool | None:
        """Whether the communication can hide behind the compute, if overlapped; None without compute."""
        return None if self.compute is None else self.wire <= self.compute


NO_TIME = StepTime(Fraction(0), Fraction(0), None)
"""Nothing on the wire and no compute: a report built without its links."""


def step_time(run: Run, links: tuple[LinkBytes, ...]) -> StepTime:
    """The time on the wire of one card's collectives, and the step's compute time, from `run.links`."""
    hardware = run.links
    inside = Fraction(sum(link.inside for link in links), hardware.nvlink_bytes_per_s)
    between = Fraction(sum(link.between for link in links), hardware.network_bytes_per_s)
    return StepTime(inside, between, compute_seconds(run))


def compute_seconds(run: Run) -> Fraction | None:
    """One card's compute in a step: 6 × weights × tokens × micro-batches ÷ (tp × pp × cp); None with no tokens.

    The card's share of the model's FLOPs, ZeRO's time and the cut's (`cut_wire`) alike: for an uncut model
    of one micro-batch, 6 × weights × tokens. A mixture of experts computes with its active weights
    (`Run.active_params`: a token meets top_k of its routed experts), though it keeps all of them.
    """
    cut = run.cut
    flops = FLOPS_PER_WEIGHT_PER_TOKEN * run.active_params * run.tokens * cut.microbatches
    return Fraction(flops, run.links.flops * cut.model_parallel) if flops else None
