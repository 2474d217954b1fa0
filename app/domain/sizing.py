"""A training run sized against a card: memory per stage, the peak, fit, and the largest model and micro-batch.

The model states, as the ZeRO paper's Table 2 counts them, plus the layer in hand and, when the
model's shape is known and the micro-batch is not empty, the activations. One peak, the highest
moment of the step, is behind the verdict, the headroom and every "largest ... that fits".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from fractions import Fraction
from math import ceil

from app.domain import terms
from app.domain.accounting import Accounting, differences
from app.domain.communication import Transfer
from app.domain.cut_wire import cut_wire
from app.domain.figures import ANY_SIZE, AnySize, LayerExtra, StageReport, TermBytes
from app.domain.host import host_report
from app.domain.overheads import OverheadItem, overhead_items, total
from app.domain.recipes import Band
from app.domain.run import MAX_BATCH, MAX_GPUS, Run, StageCard
from app.domain.stages import Stage
from app.domain.state_bytes import per_gpu_bytes
from app.domain.terms import Law, Moment, Place, TermKind, term_bytes
from app.domain.units import LARGEST_COUNT
from app.domain.wire import card_transfers, link_bytes, moved_params, step_time, wire_bytes

__all__ = [
    "ANY_SIZE",
    "MAX_BATCH",
    "MAX_GPUS",
    "UNKNOWN_LAYER_RULE",
    "LayerExtra",
    "Run",
    "StageReport",
    "layer_exceeds_card",
    "report",
    "stage_report",
]

UNKNOWN_LAYER_RULE = (
    "The largest layer is unknown, so peaks count model states only, as the ZeRO paper's Table 2 does: "
    "enter the largest layer to add what a card assembles or computes for one layer."
)
"""Said in the same words wherever a peak is shown without the largest layer."""


def communication_bytes(stage: Stage, run: Run) -> int:
    """Bytes through each card per step: the weights each collective moves × the bytes of its band.

    Only trainable weights have gradients, and ZeRO-1 and ZeRO-2 gather only those the update changed;
    ZeRO-3 gathers every weight for the forward and those the backward reaches (`communication.Whose`).
    With the model cut, the most loaded card's own weights (its stage's ÷ tp) over its ZeRO group.
    """
    card = loaded_card(stage, run)
    return _communication_bytes(stage, card_transfers(stage, run, card), run, card)


def _communication_bytes(stage: Stage, moves: tuple[Transfer, ...], run: Run, card: StageCard) -> int:
    # Rounded up, as the bytes on the wire are whole: qgZ's int4 is half a byte a weight.
    moved = (t.volume_p * moved_params(run, t.whose, card, t.scope) * wire_bytes(t, stage, run) for t in moves)
    return ceil(sum(moved, start=Fraction(0)))


def communication_p(moves: tuple[Transfer, ...], run: Run, card: StageCard) -> Fraction:
    """Traffic of one step in units of P: 2 and 3 where every weight trains, less where some are frozen.

    P is the card's weights before ZeRO shards them: the model's, or with the model cut its stage's ÷ tp.
    """
    whole = card.params if run.cut.cuts else run.params
    return sum((t.volume_p * moved_params(run, t.whose, card, t.scope) for t in moves), start=Fraction(0)) / whole


def loaded_card(stage: Stage, run: Run) -> StageCard:
    """The most loaded card under `stage`: the pipeline stage's card that holds the most at its highest moment.

    The first of equals; an uncut model's one card, with the run's own figures.
    """
    if len(run.cards) == 1:
        return run.cards[0]
    # Asked again for each moment the step and its chart weigh (hundreds a request): once a stage for this run.
    found = run.loaded.get(stage)
    if found is None:
        all_terms = run.terms(stage)
        found = max(
            run.cards,
            key=lambda c: terms.peak_bytes(
                stage, c.params, run.shards, all_terms, c.candidates, c.frozen, run.experts_of(c)
            ),
        )
        run.loaded[stage] = found
    return found


def layer_extra(stage: Stage, run: Run, moment: Moment) -> LayerExtra:
    """What a card holds beyond its state while it works on one layer of `layer` weights.

    ZeRO-3 assembles the layer's whole weights, in forward and again in backward; in backward
    ZeRO-2 and ZeRO-3 also compute the layer's whole gradients before reduce-scattering them to
    their owners. Data parallelism and ZeRO-1 write into buffers they already keep, and one card
    has nobody to share with. An unknown layer adds nothing: model states only. The activations
    are the moment's.
    """
    held: dict[TermKind, int] = {}
    card = loaded_card(stage, run)
    experts = run.experts_of(card)
    for term in run.terms(stage):
        if term.place is Place.GPU and (term.during != terms.ALL_PASSES or term.law is Law.PER_LAYER):
            nbytes = term_bytes(term, stage, card.params, run.shards, moment, card.frozen, experts)
            held[term.kind] = held.get(term.kind, 0) + nbytes
    return LayerExtra.held(held)


def peak_moment(stage: Stage, run: Run) -> Moment:
    """The highest moment of a card's step: the one every peak, bar and verdict is drawn at."""
    card = loaded_card(stage, run)
    return terms.peak_moment(
        stage, card.params, run.shards, run.terms(stage), card.candidates, card.frozen, run.experts_of(card)
    )


def theory_peak_bytes(stage: Stage, run: Run) -> int:
    """The theory's peak: model states, the layer in hand and activations at the step's highest moment."""
    card = loaded_card(stage, run)
    return terms.peak_bytes(
        stage, card.params, run.shards, run.terms(stage), card.candidates, card.frozen, run.experts_of(card)
    )


def overheads(stage: Stage, run: Run) -> tuple[OverheadItem, ...]:
    """The overheads a card holds at its highest moment, counted or not.

    The allocator keeps what it reserved at the peak, so they are drawn the same at every moment.
    """
    return _overheads_at(stage, run, peak_moment(stage, run), theory_peak_bytes(stage, run))


def _overheads_at(stage: Stage, run: Run, moment: Moment, theory: int) -> tuple[OverheadItem, ...]:
    """The overheads at `moment`, whose theory's peak is `theory`: worked out once for a stage's report."""
    recipe, card = run.recipe, loaded_card(stage, run)
    return overhead_items(
        stage,
        card.params - card.frozen,  # DDP buckets the gradients of the weights that train, and only those
        run.zero_group,  # the data-parallel group DDP and ZeRO reduce over: none to reduce with alone
        recipe.nbytes(Band.WEIGHTS),
        recipe.nbytes(Band.GRADIENTS),
        theory,
        moment.layer,
        run.overheads,
    )


def counted_overhead_bytes(stage: Stage, run: Run) -> int:
    """The overheads the peak counts: all of them with `overheads=1`, none by default."""
    return total(overheads(stage, run)) if run.count_overheads else 0


def peak_bytes(stage: Stage, run: Run, theory: int | None = None) -> int:
    """The most a card holds during the step: the theory's peak (`theory`, if known), plus the overheads if counted."""
    theory = theory_peak_bytes(stage, run) if theory is None else theory
    if not run.count_overheads:
        return theory
    # The overheads' margin is a share of that same peak: not worked out a second time.
    return theory + total(_overheads_at(stage, run, peak_moment(stage, run), theory))


def state_peak_bytes(stage: Stage, run: Run) -> int:
    """The peak of model states and the layer in hand alone: the ZeRO paper's and the seed's figure."""
    return theory_peak_bytes(stage, replace(run, batch=0))


def _peak_for(stage: Stage, run: Run, params: int, moments: tuple[Moment, ...]) -> int:
    """The peak of a model of another size, frozen as entered (`Run.frozen_at`), at the `moments` drawn."""
    frozen = run.frozen_at(params)
    if run.count_overheads:  # they depend on the size (DDP's buckets, the margin): worked out afresh
        return peak_bytes(stage, replace(run, params=params, frozen=frozen))
    card = loaded_card(stage, run)
    experts = run.experts_of(card)
    if experts.weights:  # the experts of a model of another size: the card's share of them, in proportion
        experts = replace(
            experts,
            weights=_share_of(experts.weights, card.params, _share_of(params, run.params, card.params)),
            frozen=_share_of(experts.frozen, card.params, _share_of(params, run.params, card.params)),
        )
    if len(run.cards) > 1:  # a cut model of another size: the loaded card's share of it, in proportion
        frozen = _share_of(frozen, run.params, card.params)
        params = _share_of(params, run.params, card.params)
    # The layers and activations of the shape drawn, kept as they are: the bisection asks some
    # hundred peaks a page, and the moments do not change with the size.
    return terms.peak_bytes(stage, params, run.shards, run.terms(stage), moments, frozen, experts)


def _share_of(count: int, whole: int, part: int) -> int:
    """`count` weights scaled as `whole` is to `part`, rounded up: a card's share of a model of another size."""
    return -(-count * part // whole)


SIZE_FREE = frozenset({Law.PER_LAYER, Law.PER_TOKEN, Law.FIXED})
"""The laws whose bytes at a moment do not depend on the model's size: the moment's layer and activations, a
process's fixed bytes."""


def _moments_at_any_size(stage: Stage, run: Run, moment: Moment | None) -> tuple[Moment, ...]:
    """The moments a model of another size can peak at, where `moment` is this run's highest (if known).

    A card's peak is what it keeps throughout plus the most of what comes and goes (`terms.peak_bytes`). When
    nothing that comes and goes grows with the size (the layer in hand, the activations), that most is the
    same at every size and at the same moment: the bisection for the largest model, some forty sizes a
    stage, weighs that moment alone instead of every candidate again. Anything else weighs them all.
    """
    changing = (t for t in run.terms(stage) if t.during != terms.ALL_PASSES or t.law is Law.PER_LAYER)
    if moment is None or not all(t.law in SIZE_FREE for t in changing):
        return loaded_card(stage, run).candidates
    return (moment,)


def max_params_that_fit(stage: Stage, run: Run, moment: Moment | None = None) -> int | AnySize | None:
    """The largest weight count whose peak fits the card, the largest layer kept as it is: exact, however large.

    The same test as the verdict: a model of this many weights fits, one more does not. None
    when even a model made of just its largest layer does not fit. ANY_SIZE where the card's peak
    does not grow with the model (every per-weight band offloaded, no layer known): there is no largest.
    `moment`: the run's own highest (`peak_moment`), where the caller has it.
    """
    if run.capacity is None:
        return None
    moments = _moments_at_any_size(stage, run, moment)
    smallest = run.largest_layer or 1
    if _peak_for(stage, run, smallest, moments) > run.capacity:
        return None
    capacity = run.capacity
    low, high = smallest, smallest + 1
    while (peak := _peak_for(stage, run, high, moments)) <= capacity:  # the peak grows: double past the card
        # Past the form's largest count, a peak the same at half the size grows with nothing: a band on the
        # card, of at least 1/8 B a weight over at most MAX_GPUS cards, would add gigabytes across that half.
        if high > LARGEST_COUNT and peak == _peak_for(stage, run, low, moments):
            return ANY_SIZE
        low, high = high, high * 2
    return _last_fitting(lambda params: _peak_for(stage, run, params, moments) <= capacity, low, high)


def _last_fitting(fits: Callable[[int], bool], low: int, high: int) -> int:
    """The largest n from `low` (which fits) below `high` (which does not) that fits, by bisection."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low


def max_batch_that_fits(stage: Stage, run: Run, known: Mapping[int, int] | None = None) -> int | None:
    """The largest micro-batch whose peak fits the card, the model kept as it is.

    The same test as the verdict: this many sequences fit, one more does not. None without a
    capacity or activations, or when the model does not fit even with no micro-batch; at most
    MAX_BATCH. `known` gives the peaks of micro-batches already worked out (the run's own, an empty one).
    """
    if run.capacity is None or run.activations is None:
        return None
    capacity, known = run.capacity, known or {}

    def fits(batch: int) -> bool:
        peak = known[batch] if batch in known else peak_bytes(stage, replace(run, batch=batch))
        return peak <= capacity

    if not fits(0):
        return None
    if fits(MAX_BATCH):
        return MAX_BATCH
    return _last_fitting(fits, 0, MAX_BATCH)


def stage_report(stage: Stage, run: Run) -> StageReport:
    """Memory, traffic and fit of one stage: each figure worked out once, from the moment of the peak."""
    stage_terms = run.terms(stage)
    moment = peak_moment(stage, run)
    theory = theory_peak_bytes(stage, run)
    items = _overheads_at(stage, run, moment, theory)
    counted = total(items) if run.count_overheads else 0
    peak = theory + counted
    capacity = run.capacity
    card = loaded_card(stage, run)
    experts = run.experts_of(card)
    state = per_gpu_bytes(stage, card.params, run.shards, run.recipe, card.frozen, run.setup, experts=experts)
    extra = layer_extra(stage, run, moment)
    moves = card_transfers(stage, run, card)
    links = link_bytes(stage, run, moves, card)
    # Without activations the state's peak is the theory's: not worked out twice.
    empty = theory if run.batch == 0 or run.activations is None else state_peak_bytes(stage, run)
    known = {run.batch: peak}
    if capacity is not None and run.activations is not None and run.batch:  # the bisection starts at 0
        known[0] = peak_bytes(stage, replace(run, batch=0), empty)
    return StageReport(
        stage=stage,
        # Not bytes_per_weight(stage, gpus, recipe), the 1/N of a model that divides evenly: a slice
        # is padded to whole weights, and 7 weights on 16 cards keep 1 weight's bytes each, not 7/16.
        bytes_per_weight=Fraction(state, card.params),
        per_gpu_bytes=state,
        communication_p=communication_p(moves, run, card),
        communication_bytes=_communication_bytes(stage, moves, run, card),
        peak_bytes=peak,
        state_peak_bytes=empty,
        activation_bytes=extra.activations,
        overheads=items,
        overhead_bytes=counted,
        fits=None if capacity is None else peak <= capacity,
        headroom_bytes=None if capacity is None else capacity - peak,
        max_params_that_fit=max_params_that_fit(stage, run, moment),
        max_batch_that_fits=max_batch_that_fits(stage, run, known),
        host=host_report(stage, run),
        differences=(
            *differences(
                stage,
                run.recipe,
                run.setup,
                padded=card.params % run.shards != 0,
                module=run.deepspeed_layer if run.layers else None,
                frozen=run.frozen > 0,
            ),
            *_whose_activations(run),
            *((MEGATRON_EXPERTS,) if run.megatron_shard is not None else ()),
        ),
        peak_moment=moment,
        extra=extra,
        terms=tuple(
            TermBytes(
                t.kind, t.place, term_bytes(t, stage, card.params, run.shards, frozen=card.frozen, experts=experts)
            )
            for t in stage_terms
            if t.law is Law.PER_WEIGHT and t.during == terms.ALL_PASSES
        ),
        transfers=moves,
        links=links,
        time=step_time(run, links),
        pipeline_stage=card.stage,
        cut=cut_wire(run),
        card_params=card.params,
        expert_params=card.experts,
    )


MEGATRON_ACTIVATIONS = (
    "The activations are Megatron-LM's own formula (compute_activation_memory in its "
    "theoretical_memory_usage.py, Korthikanti et al.'s Table 2 for its first pipeline stage): sbh(10 + 24/t) a "
    "block, or sbh(18 + 4f/h) ÷ t with sequence parallelism and selective recomputation, whatever the model's "
    "attention and MLP, plus its 5% margin; not the app's count of each tensor."
)
"""Said under accounting=megatron wherever activations are counted: whose they are."""


MEGATRON_EXPERTS = (
    "Megatron-LM's formula counts a mixture of experts' card as its most loaded shard: every block spread evenly "
    "over the pipeline stages (1/pp of the dense and of the expert blocks, not the first stage's own), the routed "
    "experts ÷ (ep × etp) with their optimizer state split over the expert-data-parallel group, the rest ÷ tp, the "
    "router and norms whole, and no biases on the projections or the experts; its activations have no term for "
    "the router or the dispatched tokens."
)
"""Said under accounting=megatron for a mixture of experts: whose card it is (`megatron_memory`)."""


def _whose_activations(run: Run) -> tuple[str, ...]:
    megatron = run.setup.accounting is Accounting.MEGATRON
    shaped = run.activations is not None and run.activations.architecture is not None and run.batch > 0
    return (MEGATRON_ACTIVATIONS,) if megatron and shaped else ()


def report(run: Run) -> tuple[StageReport, ...]:
    """Every stage of a run, DP first."""
    return tuple(stage_report(stage, run) for stage in Stage)


def layer_exceeds_card(run: Run) -> bool | None:
    """Whether one assembled layer alone is bigger than the card; None when either is unknown.

    If it is, sharding state cannot help: the layer itself must be split across cards, which is
    tensor parallelism.
    """
    if run.capacity is None or run.assembled_layer_bytes is None:
        return None
    return run.assembled_layer_bytes > run.capacity
