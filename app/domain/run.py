"""What the user describes, as the domain computes it: the model, the cluster, the recipe and the card.

A value shared by `sizing` (the report) and `host` (a node's host): in a module of its own, so neither
imports the other.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property

from app.domain.accounting import PAPER, Accounting, Setup, terms
from app.domain.activations import Activations
from app.domain.architecture import Architecture
from app.domain.communication import Transfer, Whose, transfers
from app.domain.eighths import COLUMNS
from app.domain.hardware import H100_FABRIC, Fabric
from app.domain.layers import ColumnMoments, Layer, bare_layers, column_moments, column_weights, first_trained
from app.domain.loaded import activation_bytes, megatron_activations, stage_layers, stage_load
from app.domain.megatron_memory import MegatronShard, megatron_shard
from app.domain.overheads import DEFAULTS, Overheads
from app.domain.parallel import NO_CUT, Cut, cut_refused
from app.domain.recipes import MIXED_ADAM, Band, Recipe
from app.domain.stages import Stage
from app.domain.state_bytes import DEFAULT_GPUS, DEFAULT_PARAMS
from app.domain.terms import AT_REST, NO_EXPERTS, Experts, Moment, Place, Term

MAX_GPUS = 4096
MAX_BATCH = 65536
"""The largest micro-batch per GPU the form takes, and the most "largest micro-batch" reports."""
MEMO_ENTRIES = 512
"""The most entries one run's memo keeps (`Memo`): more than one report's bisections ask (342 for a bare count
whose overheads count: each size tried has layers and moments of its own), so a report never recomputes."""


class Memo:
    """What a run and the runs made from it by `dataclasses.replace` ask again: worked out once for them all.

    A report's four stages bisect for the largest model and micro-batch that fit, and each step of a
    bisection is a run of another size or micro-batch (`sizing`): some fifty runs a report, whose layers and
    moments are mostly the same. The memo is a field of the run that `replace` copies, so those runs share it
    with the one resolved for the request, and it is dropped with them: nothing is kept across requests. Its
    entries are pure functions of immutable inputs, so sharing them cannot change a figure; and there are at
    most MEMO_ENTRIES of them, so no run grows without bound, however long it is kept (a worker's default).
    """

    __slots__ = ("layers", "moments")

    def __init__(self) -> None:
        self.layers: dict[tuple[int, int | None, int], tuple[Layer, ...]] = {}
        """A bare count's layers, by its weights, largest layer and frozen weights: one tuple for equal ones."""
        self.moments: dict[tuple[int, int, bool], tuple[tuple[Layer, ...], _Moments]] = {}
        """A micro-batch's moments, by the layers' identity, the batch and DeepSpeed's count. Keyed by `id`:
        hashing Llama 3 8B's 35 layers takes 10 µs, some fifty times a report, where an id is free. The entry
        holds the layers it was worked out for, so that their id is not reused while it is kept, and they are
        checked on the way out."""

    def __len__(self) -> int:
        return len(self.layers) + len(self.moments)

    def bare_layers(self, params: int, largest: int | None, frozen: int) -> tuple[Layer, ...]:
        """`layers.bare_layers`, once for each count."""
        key = (params, largest, frozen)
        if (found := self.layers.get(key)) is None:
            found = bare_layers(params, largest, frozen)
            if len(self) < MEMO_ENTRIES:
                self.layers[key] = found
        return found

    def column_moments(self, layers: tuple[Layer, ...], batch: int, modules: bool) -> _Moments:
        """`layers.column_moments` for a micro-batch, and the candidates among them: once for each batch.

        `column_moments` itself runs for one sequence and for none. A micro-batch of `batch` > 1 sequences
        keeps `batch` times one sequence's activations at every moment, and multiplying every moment's
        activations by the same positive number keeps which moments are equal and which one outdoes another
        (`layers._highest`): its moments are one sequence's, multiplied, in the same order, the same tuple
        `column_moments` builds. With no sequence the activations are all 0 and more moments coincide.
        """
        key = (id(layers), batch, modules)
        kept = self.moments.get(key)
        if kept is None or kept[0] is not layers:
            if batch <= 1:
                columns = column_moments(layers, batch, modules)
            else:
                one = self.column_moments(layers, 1, modules).columns
                columns = tuple(ColumnMoments(_times(c.forward, batch), _times(c.backward, batch)) for c in one)
            every = (m for column in columns for m in (*column.forward, *column.backward))
            kept = layers, _Moments(columns, (AT_REST, *dict.fromkeys(every)))
            if len(self) < MEMO_ENTRIES:
                self.moments[key] = kept
        return kept[1]


@dataclass(frozen=True)
class _Moments:
    columns: tuple[ColumnMoments, ...]
    candidates: tuple[Moment, ...]


def _times(moments: tuple[Moment, ...], batch: int) -> tuple[Moment, ...]:
    return tuple(Moment(m.part, m.layer, m.activation * batch, m.trained) for m in moments)


def _plus(moments: tuple[Moment, ...], others: int) -> tuple[Moment, ...]:
    """The moments with `others` bytes more activations: the pipeline's other micro-batches in flight."""
    return tuple(Moment(m.part, m.layer, m.activation + others, m.trained) for m in moments)


def _scaled(moments: tuple[Moment, ...], held: int, top: int) -> tuple[Moment, ...]:
    """The moments with their activations × held / top, rounded down (all `held` where `top` is 0)."""
    return tuple(Moment(m.part, m.layer, m.activation * held // top if top else held, m.trained) for m in moments)


@dataclass(frozen=True)
class StageCard:
    """The figures one card of a pipeline stage is counted from: for an uncut model, the run's own."""

    params: int
    """Weights whose state the card keeps before ZeRO shards it: its stage's, ÷ tp (`loaded.stage_load`)."""
    frozen: int
    """Of those, the weights that do not train."""
    candidates: tuple[Moment, ...]
    """The moments that can be its highest: at rest, and each of its layers' in each pass."""
    layers: tuple[Layer, ...]
    """Its stage's layers as it keeps them, ÷ tp."""
    stage: int = 0
    """Its pipeline stage, 0-based."""
    columns: tuple[ColumnMoments, ...] = ()
    """Each of the model's eighths' moments as this card meets them (`layers.column_moments`), forward and
    backward, with the figures its candidates are: the step walks these. Empty in a column of another stage."""
    experts: int = 0
    """Of `params`, the routed experts' weights: its stage's ÷ ep × etp (`loaded.expert_weights`)."""
    experts_frozen: int = 0
    """Of those, the weights that do not train."""


@dataclass(frozen=True)
class Run:
    """What the user describes: the model, the cluster, the recipe and the card."""

    params: int = DEFAULT_PARAMS
    gpus: int = DEFAULT_GPUS
    recipe: Recipe = MIXED_ADAM
    largest_layer: int | None = None
    capacity: int | None = None
    layers: tuple[Layer, ...] = ()
    """The model's layers in forward order (`layers.model_layers`); empty: a bare count's (`layers.bare_layers`)."""
    activations: Activations | None = None
    """What one sequence keeps, from the model's shape; None for a bare weight count."""
    batch: int = 0
    """Sequences per micro-batch per GPU: 0 counts no activations."""
    overheads: Overheads = DEFAULTS
    """The overheads' settings: their figures are always worked out, to say what they would add."""
    count_overheads: bool = False
    """Whether the peak counts them (`overheads=1`); by default the theory alone, as the paper counts."""
    frozen: int = 0
    """Weights that do not train: they keep their weights band only. Which ones, the layers say."""
    trainable_share: Fraction | None = None
    """The share of the weights that train, where it was entered as one: a model of another size keeps it."""
    setup: Setup = PAPER
    """Whose accounting, and what is offloaded where."""
    nodes: int = 1
    """The machines the cards are in, an equal number each: host memory and NVMe are per node."""
    zero_init: bool = True
    """DeepSpeed's `zero.Init`: each process builds only its slice of the model, not a whole fp32 copy."""
    host_memory: int | None = None
    """One node's CPU RAM, for the host's verdict; None: no verdict."""
    nvme_space: int | None = None
    """One node's NVMe space, for ZeRO-Infinity's verdict; None: no verdict."""
    shard_size: int | None = None
    """Hybrid sharding: the cards each state is split across, a shard group, replicated across the
    gpus / shard_size groups (FSDP2's HSDP); None: every card, one group."""
    qwz: bool = False
    """ZeRO++'s qwZ: ZeRO-3 all-gathers its weights in int8 (`zero_quantized_weights`)."""
    qgz: bool = False
    """ZeRO++'s qgZ: ZeRO-3 reduce-scatters its gradients in int4 (`zero_quantized_gradients`)."""
    seq: int = 4096
    """Tokens per sequence: with `batch`, the tokens a card computes on in a step."""
    links: Fabric = H100_FABRIC
    """The links' bandwidths and the card's compute, for the time on the wire (`wire`)."""
    architecture: Architecture | None = None
    """The model's shape where it is known (a preset): what the cut's traffic moves, b · s · h (`cut_wire`)."""
    cut: Cut = NO_CUT
    """How the model is cut across the cards (`parallel`): tensor, sequence, pipeline and context parallelism."""
    memo: Memo = field(default_factory=Memo, compare=False, hash=False, repr=False)
    """What this run and those `replace` makes of it ask again (`Memo`): shared by them, equal or not."""

    def __post_init__(self) -> None:
        if self.params < 1:
            raise ValueError("a model has at least one weight")
        if not 1 <= self.gpus <= MAX_GPUS:
            raise ValueError(f"gpus is between 1 and {MAX_GPUS}")
        if self.largest_layer is not None and not 1 <= self.largest_layer <= self.params:
            raise ValueError("the largest layer has between 1 weight and the whole model")
        if self.capacity is not None and self.capacity < 1:
            raise ValueError("a card has at least one byte")
        if not 0 <= self.batch <= MAX_BATCH:
            raise ValueError(f"a micro-batch has between 0 and {MAX_BATCH:,} sequences")
        if not 0 <= self.frozen <= self.params:
            raise ValueError("the frozen weights are between none and all of the model's")
        if self.nodes < 1 or self.gpus % self.nodes:
            raise ValueError(f"{self.gpus} GPUs do not split evenly across {self.nodes} nodes")
        self._check_groups()
        arch = self.architecture  # its experts: expert parallelism splits them, and a dense model has none
        experts = None if arch is None else arch.moe.experts if arch.moe else 0
        if refused := cut_refused(self.cut, self.gpus, self.gpus_per_node, experts=experts):
            raise ValueError(refused)

    @property
    def dp(self) -> int:
        """The data-parallel degree: the cards left once the model is cut (`gpus / (tp × pp × cp)`)."""
        return self.cut.dp(self.gpus)

    def _check_groups(self) -> None:
        """Hybrid sharding's and hpZ's groups: whole, and lined up with the nodes."""
        zeropp = self.setup.hpz > 1 or self.qwz or self.qgz
        refused = groups_refused(
            self.gpus, self.gpus_per_node, self.shard_size, self.setup.hpz, zeropp, self.setup.accounting, self.cut
        )
        if refused:
            raise ValueError(refused)

    @property
    def zero_group(self) -> int:
        """The cards ZeRO's stage shards a card's state over: dp × cp (every card for an uncut model).

        Its data-parallel group with its context-parallel one, as Megatron-LM's distributed optimizer shards.
        """
        return self.gpus // (self.cut.tp * self.cut.pp)

    @property
    def expert_shards(self) -> int:
        """The cards ZeRO shards the routed experts' state over: the expert-data-parallel group.

        A stage's tp × cp × dp cards ÷ (ep × etp): Megatron-LM's `expert_data_parallel_size`, DeepSpeed-MoE's
        expert-data-parallel group.

        With ep × etp = tp it is the data-parallel group, dp × cp, and the experts shard with the rest.
        """
        return self.cut.edp(self.gpus)

    @cached_property
    def dense_stages(self) -> frozenset[int]:
        """The pipeline stages that keep no mixture-of-experts block, so whose cards keep no experts.

        DeepSeek-V3's first stage in 16 keeps only its 3 dense blocks. Empty for a dense model: nothing to say.
        """
        if self.architecture is None or self.architecture.moe is None:
            return frozenset()
        return frozenset(
            stage
            for stage in range(self.cut.pp)
            if not any(layer.routed for layer in stage_layers(self.model_layers, self.cut, stage))
        )

    def experts_of(self, card: StageCard) -> Experts:
        """How ZeRO shards `card`'s routed experts: apart from the rest, where their group differs from it."""
        if not card.experts or self.cut.ep * self.cut.expert_tp == self.cut.tp:
            return NO_EXPERTS
        return Experts(card.experts, card.experts_frozen, self.expert_shards)

    @property
    def active_params(self) -> int:
        """The weights one token's step computes with: all but the routed experts its router did not choose.

        A mixture of experts computes with its `Architecture.active_params` (6 × active weights × tokens) and
        keeps all of its weights; a dense model, or a bare count, computes with all of them.
        """
        arch = self.architecture
        if arch is None:
            return self.params
        unused = arch.params - arch.active_params  # the experts a token's router leaves out: a count of their own
        # A model drawn at another size (a bisection's) smaller than those: the same share of it active.
        return self.params - unused if self.params > unused else self.params * arch.active_params // arch.params

    @property
    def shards(self) -> int:
        """The cards a sharded state is split across: the shard group, the whole ZeRO group unless hybrid."""
        return self.zero_group if self.shard_size is None else self.shard_size

    @property
    def replicas(self) -> int:
        """The shard groups of the ZeRO group, each keeping a whole copy of the state: 1 unless hybrid."""
        return self.zero_group // self.shards

    @cached_property
    def loaded(self) -> dict[Stage, StageCard]:
        """The most loaded card under each stage (`sizing.loaded_card`), once found.

        This run's alone: `replace` makes a new run without it (a cached property is kept in the instance).
        """
        return {}

    @cached_property
    def cards(self) -> tuple[StageCard, ...]:
        """Each pipeline stage's card: `sizing` counts the most loaded of them.

        One for an uncut model, with the run's own figures.
        """
        found = self._stage_cards()
        if (shard := self.megatron_shard) is not None:
            found = (self._megatron_card(found[0], shard),)
        if (held := self._megatron_activations) is None or not self.cut.cuts:
            return found
        # Megatron-LM's count is its first stage's (its most loaded shard), with its own activations: at the
        # app's highest moment, which its terms (no layer in hand) count by the activations alone.
        first = found[0]
        top = max(first.candidates, key=lambda m: m.activation)
        # The step walks the app's moments scaled to Megatron's figure, so that its highest is Megatron's too:
        # the app's highest moment holds exactly `held`, the others their share of it, rounded down.
        columns = tuple(
            ColumnMoments(_scaled(c.forward, held, top.activation), _scaled(c.backward, held, top.activation))
            for c in first.columns
        )
        candidates = (AT_REST, Moment(top.part, top.layer, held, top.trained))
        return (replace(first, candidates=candidates, columns=columns),)

    @cached_property
    def megatron_shard(self) -> MegatronShard | None:
        """Megatron-LM's most loaded shard of a mixture of experts, under its accounting; else None.

        Its formula's own (`megatron_memory`): the blocks spread evenly over the stages, the routed experts
        ÷ (pp × etp × ep). The weights are the same whatever the stage: the distributed optimizer is the terms'.
        """
        arch = self.architecture
        if self.setup.accounting is not Accounting.MEGATRON or arch is None or arch.moe is None:
            return None
        return megatron_shard(arch, self.cut, self.gpus, distributed=True)

    def _megatron_card(self, first: StageCard, shard: MegatronShard) -> StageCard:
        """The first stage's card with Megatron's weights in place of the app's, rounded up to whole weights.

        A model drawn at another size (a bisection's) keeps the same share of its weights; the frozen ones
        their share of the card.
        """
        arch = self.architecture
        size = Fraction(self.params, arch.params) if arch else Fraction(1)
        params, experts = math.ceil(shard.params * size), math.ceil(shard.expert_sharded * size)
        frozen = -(-first.frozen * params // first.params)
        experts_frozen = -(-first.experts_frozen * experts // first.experts) if first.experts else 0
        frozen, experts_frozen = min(frozen, params), min(experts_frozen, experts)
        return replace(first, params=params, experts=experts, frozen=frozen, experts_frozen=experts_frozen)

    @cached_property
    def _megatron_activations(self) -> int | None:
        """Megatron-LM's own activations of its most loaded card, in whole bytes, under its accounting; else None."""
        shape = self.activations
        if self.setup.accounting is not Accounting.MEGATRON or shape is None or shape.architecture is None:
            return None
        return math.ceil(megatron_activations(shape.architecture, shape.seq, self.batch, self.cut, shape.recompute))

    @property
    def heaviest(self) -> StageCard:
        """The card that keeps state for the most weights (the first of equals): what a node's host keeps for."""
        return max(self.cards, key=lambda card: card.params)

    @property
    def activation_per_layer(self) -> int | None:
        """What one block leaves on the most loaded card for its backward, for its micro-batch.

        Korthikanti's Table 2 with t, sp and ÷ cp, for one micro-batch (the pipeline's others in flight
        aside); None for a bare weight count.
        """
        if self.activations is None:
            return None
        shape = self.activations
        return math.ceil(activation_bytes(self.cut, shape.per_layer, shape.per_layer_split) * self.batch)

    def _stage_cards(self) -> tuple[StageCard, ...]:
        if not self.cut.cuts:
            routed = sum(layer.routed for layer in self.model_layers)
            routed_trained = sum(layer.routed for layer in self.model_layers if layer.trained == layer.params)
            return (
                StageCard(
                    self.params,
                    self.frozen,
                    self.candidates,
                    self.model_layers,
                    columns=self.column_moments,
                    experts=routed,
                    experts_frozen=routed - routed_trained,
                ),
            )
        modules = self.setup.accounting is Accounting.DEEPSPEED
        # A model of another size drawn with this one's layers (`sizing`'s bisections): each card keeps its share.
        drawn = sum(layer.base + layer.adapters for layer in self.layers)
        found = []
        for index in range(self.cut.pp):
            load = stage_load(self.model_layers, self.params, self.frozen, self.largest_layer, self.cut, index)
            if self.layers and drawn != self.params:
                params = -(-load.params * self.params // drawn)
                experts = -(-load.experts * self.params // drawn)
                load = replace(
                    load,
                    params=params,
                    frozen=params - (-(-(params * (self.params - self.frozen)) // self.params)),
                    experts=experts,
                    experts_frozen=experts - (-(-(experts * (self.params - self.frozen)) // self.params)),
                )
            columns = column_moments(load.layers, self.batch, modules)
            # The other micro-batches in flight keep the whole stage's activations throughout.
            others = math.ceil((load.in_flight - 1) * self.batch * sum(layer.kept for layer in load.layers))
            columns = tuple(ColumnMoments(_plus(c.forward, others), _plus(c.backward, others)) for c in columns)
            every = (m for column in columns for m in (*column.forward, *column.backward))
            candidates = (AT_REST, *dict.fromkeys(every))
            found.append(
                StageCard(
                    load.params, load.frozen, candidates, load.layers, index, columns, load.experts, load.experts_frozen
                )
            )
        return tuple(found)

    @property
    def tokens(self) -> int:
        """Tokens one card computes on in a step: its micro-batch's sequences times their length."""
        return self.batch * self.seq

    @property
    def gpus_per_node(self) -> int:
        """The cards in each node."""
        return self.gpus // self.nodes

    def transfers(self, stage: Stage) -> tuple[Transfer, ...]:
        """The collectives of one step under `stage`: over the shard group, and across its replicas."""
        return transfers(stage, self.zero_group, self.shards, self.setup.hpz, self.cut.microbatches)

    def terms(self, stage: Stage) -> tuple[Term, ...]:
        """Every term of a card under `stage`, counted and placed as the run's setup says."""
        return terms(self.recipe, stage, self.setup)

    def band_places(self, stage: Stage) -> dict[Band, Place]:
        """Where each band of model state lives under `stage`: on the card, or offloaded to its host."""
        return {t.band: t.place for t in self.terms(stage) if t.band is not None}

    def on_host(self, stage: Stage) -> frozenset[Band]:
        """The bands a card's host keeps for it under `stage`: none without offload."""
        return frozenset(band for band, place in self.band_places(stage).items() if place is not Place.GPU)

    def frozen_column(self, column: int, columns: int = COLUMNS) -> bool:
        """Whether most of one of `columns` equal columns of the weights is frozen (its middle is)."""
        # Counted in the base model's weights: LoRA freezes all of them, and its adapters are drawn nowhere.
        return (2 * column + 1) * self.base_params < 2 * columns * min(self.frozen, self.base_params)

    @cached_property
    def model_layers(self) -> tuple[Layer, ...]:
        """The layers a step meets, first to last: the model's own, or a bare count's eighths."""
        return self.layers or self.memo.bare_layers(self.params, self.largest_layer, self.frozen)

    @cached_property
    def base_params(self) -> int:
        """The weights of the model the eighths cut: all of them but LoRA's adapters."""
        return self.params - sum(layer.adapters for layer in self.model_layers)

    @property
    def column_moments(self) -> tuple[ColumnMoments, ...]:
        """Each eighth's moments, forward and backward: DeepSpeed's count holds one module at a time."""
        return self._moments.columns

    @property
    def candidates(self) -> tuple[Moment, ...]:
        """The moments that can be a card's highest: at rest, and each layer's in each pass, of those that differ."""
        return self._moments.candidates

    @cached_property
    def _moments(self) -> _Moments:
        modules = self.setup.accounting is Accounting.DEEPSPEED
        found = self.memo.column_moments(self.model_layers, self.batch, modules)
        held, highest = self._megatron_activations, max(m.activation for m in found.candidates)
        if held is None or not highest:
            return found

        # Under Megatron-LM's count its activations are its own formula's: the step keeps the app's shape of them,
        # scaled so that the highest moment holds exactly Megatron's figure (a·M/A, rounded up, is M at a = A).
        def scaled(moments: tuple[Moment, ...]) -> tuple[Moment, ...]:
            return tuple(replace(m, activation=-(-m.activation * held // highest)) for m in moments)

        columns = tuple(ColumnMoments(scaled(c.forward), scaled(c.backward)) for c in found.columns)
        return _Moments(columns, scaled(found.candidates))

    def frozen_at(self, params: int) -> int:
        """The frozen weights of a model of `params` weights drawn like this one: the share as entered.

        A share ('0.9') trains int(share × params), as the form reads it; a count, the same proportion.
        """
        if self.trainable_share is not None:
            return params - int(self.trainable_share * params)
        return self.frozen * params // self.params

    @cached_property
    def moved(self) -> dict[Whose, tuple[int, ...]]:
        """Each eighth's weights that a collective of each kind moves (`communication.Whose`)."""
        layers, model = self.model_layers, self.base_params
        first = first_trained(layers)
        # From the first weight that trains, or the start of the layer it is in: that layer is gathered whole.
        reached = model if first is None else min(self.frozen, layers[first].start)
        lows = {Whose.EVERY: 0, Whose.TRAINED: min(self.frozen, model), Whose.REACHED: reached}
        return {whose: column_weights(layers, model, low) for whose, low in lows.items()}

    def moved_params(self, whose: Whose) -> int:
        """The weights a collective of this kind moves in a whole step."""
        return sum(self.moved[whose])

    @property
    def largest_layer_on_card(self) -> int | None:
        """The most weights ZeRO-3 assembles at once on the most loaded card: its largest layer, as cut.

        The embedding or a block from the model's real shapes; with the model cut, a card's part of it (a
        mixture-of-experts block's non-routed weights ÷ tp, the router and norms whole, its own experts ÷
        (ep × etp)). None where the largest layer is unknown.
        """
        if self.largest_layer is None:
            return None
        return max(layer.params for card in self.cards for layer in card.layers if layer.params is not None)

    @property
    def assembled_layer_bytes(self) -> int | None:
        """The largest layer assembled with its gradients: what ZeRO-3 gathers and computes on one card.

        Each layer's gradients are for its weights that train: a frozen layer has its weights alone. With
        tensor parallelism a card assembles its 1/tp of the layer only.
        """
        if self.largest_layer is None:
            return None
        weights, gradients = self.recipe.nbytes(Band.WEIGHTS), self.recipe.nbytes(Band.GRADIENTS)
        # Whole bytes, rounded up: a part byte of a blockwise format is a whole one on the card.
        return max(
            math.ceil(layer.params * weights + layer.trained * gradients)
            for card in self.cards
            for layer in card.layers
            if layer.params is not None
        )

    @property
    def deepspeed_layer(self) -> int | None:
        """DeepSpeed's largest layer: the largest module by its own weights, where the layers are known."""
        modules = [layer.module for layer in self.model_layers if layer.module is not None]
        return max(modules) if modules else self.largest_layer


def _divisors(n: int) -> str:
    """The divisors of `n`, for a sentence: '1, 2, 4 or 8'; the first and last few of a long list."""
    found = [d for d in range(1, n + 1) if n % d == 0]
    if len(found) > 8:
        found = [*found[:4], *found[-3:]]
    words = [f"{d:,}" for d in found]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def groups_refused(
    gpus: int,
    per_node: int,
    shard: int | None,
    hpz: int = 1,
    zeropp: bool = False,
    accounting: Accounting = Accounting.PAPER,
    cut: Cut = NO_CUT,
) -> str:
    """Why a hybrid shard group or ZeRO++ cannot be drawn on this cluster, for a person; empty where it can.

    With the model `cut`, ZeRO shards over the data-parallel group (dp × cp cards), and the groups split that.
    """
    if cut.ep * cut.expert_tp != cut.tp and (shard is not None or zeropp):
        return (
            f"ep × etp = {cut.ep:,} × {cut.expert_tp:,} shards the routed experts over a group of their own (the "
            "expert-data-parallel group), which hybrid sharding and ZeRO++ (shard, hpz, qwz, qgz) do not split: "
            "leave them out with ep, or set ep × etp = tp."
        )
    if cut.cuts:
        group = gpus // (cut.tp * cut.pp)
        if shard is not None and (not 1 <= shard <= group or group % shard):
            return (
                f"shard={shard:,} does not divide the {group:,} cards ZeRO shards over, the data-parallel group with "
                f"the context-parallel one: gpus ÷ (tp × pp) = {gpus:,} ÷ ({cut.tp:,} × {cut.pp:,}). "
                f"Choose one of {_divisors(group)}."
            )
        gpus = group
    shards = gpus if shard is None else shard
    if not 1 <= shards <= gpus or gpus % shards:
        return (
            f"shard={shards:,} does not divide gpus={gpus:,}: the GPUs must split into equal shard groups. "
            f"Choose one of {_divisors(gpus)}."
        )
    if per_node % shards and shards % per_node:
        return (
            f"shard={shards:,} does not line up with nodes of {per_node:,} GPUs: a shard group fits in a node or "
            f"is whole nodes. Choose a divisor or a multiple of {per_node:,}."
        )
    if not zeropp:
        return ""
    if shards < gpus:
        return (
            f"hybrid sharding (shard={shards:,}) and ZeRO++ (hpz, qwz, qgz) are two answers to the slow link "
            "between nodes: choose one."
        )
    if accounting not in (Accounting.PAPER, Accounting.DEEPSPEED):
        return (
            f"hpz, qwz and qgz are DeepSpeed's ZeRO++: count it as the paper or DeepSpeed does, "
            f"not accounting={accounting.value}."
        )
    if gpus % hpz:
        return (
            f"hpz={hpz:,} does not divide gpus={gpus:,}: hpZ splits its copy in equal groups. "
            f"Choose one of {_divisors(gpus)}."
        )
    if per_node % hpz and hpz % per_node:
        return (
            f"hpz={hpz:,} does not line up with nodes of {per_node:,} GPUs: hpZ's group fits in a node or is whole "
            f"nodes. Choose a divisor or a multiple of {per_node:,}."
        )
    return ""
