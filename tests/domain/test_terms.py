"""What sits on a card: the terms, their size laws, and the one fit figure, checked by hand."""

from __future__ import annotations

import pytest

from app.domain.accounting import Accounting, Setup
from app.domain.accounting import terms as card_terms_of
from app.domain.placement import Device, Offload, Placement
from app.domain.recipes import MIXED_ADAM, RECIPES, Band, GradAccum, RecipeName, custom_recipe, grad_accum
from app.domain.stages import Stage
from app.domain.state_bytes import per_gpu_bytes
from app.domain.terms import (
    ALL_PASSES,
    AT_REST,
    Law,
    Moment,
    Pass,
    Place,
    Term,
    TermKind,
    card_bytes,
    peak_bytes,
    term_bytes,
)

SEED, LAYER = 30 * 10**9, 3_750_000_000
PAPER = card_terms_of(MIXED_ADAM, Stage.DP)
"""The paper's terms: the same list under every stage, which `under` and `split_by` tell apart."""


def test_a_card_is_four_bands_of_state_two_terms_for_the_layer_in_hand_and_activations() -> None:
    terms = PAPER
    assert [(t.kind, t.law, t.nbytes) for t in terms] == [
        (TermKind.WEIGHTS, Law.PER_WEIGHT, 2),
        (TermKind.GRADIENTS, Law.PER_WEIGHT, 2),
        (TermKind.MASTER, Law.PER_WEIGHT, 4),
        (TermKind.MOMENTS, Law.PER_WEIGHT, 8),
        (TermKind.GATHERED, Law.PER_LAYER, 2),
        (TermKind.COMPUTED, Law.PER_LAYER, 2),
        (TermKind.ACTIVATIONS, Law.PER_TOKEN, 1),
    ]
    assert all(t.place is Place.GPU for t in terms)
    # The seed's list of what each stage splits: ZeRO-1 the optimizer state, ZeRO-2 the gradients too,
    # ZeRO-3 the weights too.
    split = {t.band: t.split_by for t in terms if t.band is not None}
    assert split[Band.MOMENTS] == split[Band.MASTER] == {Stage.ZERO1, Stage.ZERO2, Stage.ZERO3}
    assert split[Band.GRADIENTS] == {Stage.ZERO2, Stage.ZERO3}
    assert split[Band.WEIGHTS] == {Stage.ZERO3}


# The seed's table, 30B weights on 8 cards: 16, 5.5, 3.75 and 2 bytes per weight at rest. The peak adds,
# for one of its 8 layers of 3.75e9 weights, ZeRO-2's bf16 gradients (7.5e9 B) and ZeRO-3's bf16 weights
# gathered as well (another 7.5e9 B).
@pytest.mark.parametrize(
    ("stage", "rest", "forward", "peak"),
    [
        (Stage.DP, 480e9, 480e9, 480e9),
        (Stage.ZERO1, 165e9, 165e9, 165e9),
        (Stage.ZERO2, 112.5e9, 112.5e9, 120e9),
        (Stage.ZERO3, 60e9, 67.5e9, 75e9),
    ],
)
def test_the_seeds_card_at_rest_in_the_forward_pass_and_at_its_peak(
    stage: Stage, rest: float, forward: float, peak: float
) -> None:
    assert card_bytes(stage, SEED, 8, PAPER) == rest
    assert card_bytes(stage, SEED, 8, PAPER, Moment(Pass.FORWARD, LAYER)) == forward
    eighths = _moments((LAYER,) * 8, (0,) * 8)
    assert peak_bytes(stage, SEED, 8, PAPER, eighths) == peak
    # The peak is the highest of the moments, and an unknown layer leaves model states only.
    assert peak == max(card_bytes(stage, SEED, 8, PAPER, m) for m in eighths)
    assert peak_bytes(stage, SEED, 8, PAPER, _moments((None,) * 8, (0,) * 8)) == rest


def test_a_split_term_is_a_padded_slice_and_one_card_has_nobody_to_gather_from() -> None:
    # 7 weights on 16 cards: each card keeps a slice of ceil(7/16) = 1 weight, so 8 B of fp32 moments.
    (moments_term,) = (t for t in card_terms_of(RECIPES[RecipeName.FP32_ADAM], Stage.DP) if t.band is Band.MOMENTS)
    assert term_bytes(moments_term, Stage.ZERO3, 7, 16) == 8
    gathered = PAPER[4]
    assert term_bytes(gathered, Stage.ZERO3, SEED, 8, Moment(Pass.FORWARD, LAYER)) == 7_500_000_000
    assert term_bytes(gathered, Stage.ZERO3, SEED, 1, Moment(Pass.FORWARD, LAYER)) == 0
    assert term_bytes(gathered, Stage.ZERO2, SEED, 8, Moment(Pass.FORWARD, LAYER)) == 0
    assert term_bytes(gathered, Stage.ZERO3, SEED, 8, AT_REST) == 0


def test_a_fixed_term_counts_once_and_activations_are_the_moments() -> None:
    assert term_bytes(Term(TermKind.OVERHEADS, Law.FIXED, 500_000_000), Stage.DP, SEED, 8) == 500_000_000
    activations = PAPER[-1]
    assert term_bytes(activations, Stage.ZERO3, SEED, 8, Moment(Pass.BACKWARD, LAYER, 123)) == 123
    assert term_bytes(activations, Stage.ZERO3, SEED, 8, AT_REST) == 0


def test_the_peak_is_one_moment_not_the_sum_of_each_terms_highest() -> None:
    # ZeRO-3, 8 cards: eighth 0 has a big layer and few activations, eighth 7 the reverse. The peak
    # takes the larger of 4 B × 100 + 10 and 4 B × 10 + 300 (weights and gradients of the layer, bf16),
    # not 4 B × 100 + 300.
    rest = card_bytes(Stage.ZERO3, 800, 8, PAPER)
    eighths = _moments((100, 10, 10, 10, 10, 10, 10, 10), (10, 0, 0, 0, 0, 0, 0, 300))
    assert peak_bytes(Stage.ZERO3, 800, 8, PAPER, eighths) == rest + max(4 * 100 + 10, 4 * 10 + 300)


def _moments(layers: tuple[int | None, ...], activations: tuple[int, ...]) -> tuple[Moment, ...]:
    """At rest, and both passes over layers of these sizes keeping these activations."""
    passes = (Pass.FORWARD, Pass.BACKWARD)
    return (AT_REST, *(Moment(p, n, a) for n, a in zip(layers, activations, strict=True) for p in passes))


def test_a_layers_gradients_are_for_its_weights_that_train() -> None:
    # ZeRO-3 backward over a layer of 100 weights of which 30 train: 2 B × 100 gathered, 2 B × 30 computed.
    gathered, computed = PAPER[4], PAPER[5]
    moment = Moment(Pass.BACKWARD, 100, 0, trained=30)
    assert term_bytes(gathered, Stage.ZERO3, SEED, 8, moment) == 200
    assert term_bytes(computed, Stage.ZERO3, SEED, 8, moment) == 60
    assert term_bytes(computed, Stage.ZERO3, SEED, 8, Moment(Pass.BACKWARD, 100, 0, trained=0)) == 0


# grad_accum=fp32, worked out by hand for 8B weights on 8 cards with mixed-precision Adam (2/2/4/8): the
# gradients kept in fp32 are 4 B a trainable weight, so data parallelism keeps 2 + 4 + 4 + 8 = 18 B a weight
# (Megatron-LM's count, megatron/training/theoretical_memory_usage.py) and each stage splits what it split.
FP32_KEPT = grad_accum(MIXED_ADAM, GradAccum.FP32)
EIGHT_B, EIGHTH = 8 * 10**9, 10**9


@pytest.mark.parametrize(
    ("stage", "by_hand"),
    [
        (Stage.DP, 18 * EIGHT_B),  # every band whole: 144 GB
        (Stage.ZERO1, (2 + 4) * EIGHT_B + (4 + 8) * EIGHTH),  # weights and fp32 gradients whole: 60 GB
        (Stage.ZERO2, 2 * EIGHT_B + (4 + 4 + 8) * EIGHTH),  # the fp32 gradients split too: 32 GB
        (Stage.ZERO3, (2 + 4 + 4 + 8) * EIGHTH),  # everything split: 18 GB
    ],
)
def test_gradients_kept_in_fp32_are_4_bytes_a_weight_split_as_the_gradients(stage: Stage, by_hand: int) -> None:
    assert per_gpu_bytes(stage, EIGHT_B, 8, recipe=FP32_KEPT) == by_hand
    # The recipe's own bf16 gradients, 2 B less a weight where they are whole, 2/8 less where split.
    narrower = 2 * EIGHT_B if stage in (Stage.DP, Stage.ZERO1) else 2 * EIGHTH
    assert per_gpu_bytes(stage, EIGHT_B, 8, MIXED_ADAM) == by_hand - narrower


def test_gradients_kept_in_fp32_are_megatrons_18_bytes_for_llama_3_8b() -> None:
    # Megatron-LM's weight_and_optimizer_memory without its distributed optimizer, 18 B a weight of its
    # parameter count of Llama 3 8B (tests/domain/test_accounting.py works the count out by hand).
    assert per_gpu_bytes(Stage.DP, 8_030_261_248, 8, recipe=FP32_KEPT) == 144_544_702_464


def test_gradients_kept_in_fp32_are_the_gradients_band_itself_in_fp32() -> None:
    # The run's recipe is mixed-precision Adam with its gradients band fp32: no term of another kind, so
    # every view that names or draws the band (grid, key, API, CLI, step) says fp32, 4 B.
    kept = card_terms_of(FP32_KEPT, Stage.ZERO2)
    sizes = {t.kind: t.nbytes for t in kept if t.law is Law.PER_WEIGHT}
    assert sizes == {TermKind.WEIGHTS: 2, TermKind.GRADIENTS: 4, TermKind.MASTER: 4, TermKind.MOMENTS: 8}
    (gradients,) = (t for t in kept if t.kind is TermKind.GRADIENTS and t.law is Law.PER_WEIGHT)
    assert gradients.trains
    assert gradients.split_by == frozenset({Stage.ZERO2, Stage.ZERO3})
    assert (FP32_KEPT.spec(Band.GRADIENTS).precision, FP32_KEPT.spec(Band.GRADIENTS).shown) == ("fp32", "4")
    assert FP32_KEPT.total == 18
    # bf16, the default, is the recipe itself; a band already 4 B (fp32-adam) is kept as it is.
    assert grad_accum(MIXED_ADAM, GradAccum.BF16) is MIXED_ADAM
    fp32 = RECIPES[RecipeName.FP32_ADAM]
    assert grad_accum(fp32, GradAccum.FP32) is fp32


@pytest.mark.parametrize("stage", [Stage.ZERO2, Stage.ZERO3])
def test_gradients_kept_in_fp32_are_computed_in_fp32_for_the_layer_in_hand(stage: Stage) -> None:
    # ZeRO-2 and 3 compute a layer's gradients before their reduce-scatter: 4 B a trained weight of the layer,
    # by hand, where the recipe's bf16 band computes 2 B.
    moment = Moment(Pass.BACKWARD, 100, 0, trained=30)
    (computed,) = (t for t in card_terms_of(FP32_KEPT, stage) if t.kind is TermKind.COMPUTED)
    assert term_bytes(computed, stage, SEED, 8, moment) == 4 * 30
    (narrow,) = (t for t in card_terms_of(MIXED_ADAM, stage) if t.kind is TermKind.COMPUTED)
    assert term_bytes(narrow, stage, SEED, 8, moment) == 2 * 30


def test_gradients_kept_in_fp32_leave_megatrons_count_as_it_is() -> None:
    # Megatron-LM's count keeps fp32 main gradients already (4 B, whole): 18 B a weight without its
    # distributed optimizer, 6 + 12/8 with it (60,226,959,360 B for Llama 3 8B on 8 cards).
    megatron = Setup(Accounting.MEGATRON)
    assert per_gpu_bytes(Stage.DP, 8_030_261_248, 8, recipe=FP32_KEPT, setup=megatron) == 144_544_702_464
    assert per_gpu_bytes(Stage.ZERO1, 8_030_261_248, 8, recipe=FP32_KEPT, setup=megatron) == 60_226_959_360


# Every term the domain makes: every recipe, stage, accounting and placement, with and without hpZ's
# secondary copy, as `accounting.terms` builds a card's list. Overheads are no term (a share of the rest,
# `sizing.overheads`) and are drawn as their kind; the runs that draw them are the web's test
# (tests/web/test_bars.py, `test_every_kind_a_run_draws_is_drawn_and_keyed_from_its_declaration`).
PLACEMENTS = tuple(Placement(offload, device, pin) for offload in Offload for device in Device for pin in (True, False))
SETUPS = tuple(
    Setup(accounting, placement, hpz)
    for accounting in Accounting
    for placement in PLACEMENTS
    for hpz in (1, 8)
    if not (hpz > 1 and accounting in (Accounting.FSDP2, Accounting.MEGATRON))  # ZeRO++ is DeepSpeed's
)
EVERY_TERM: frozenset[Term] = frozenset(
    term
    for recipe in (*RECIPES.values(), custom_recipe(2, 4, 4, 8), custom_recipe(4, 4, 0, 8), FP32_KEPT)
    for stage in Stage
    for setup in SETUPS
    for term in card_terms_of(recipe, stage, setup)
)


def test_every_kind_but_the_overheads_is_a_term_the_domain_makes() -> None:
    # Exhaustive: a kind declared that no term has is a kind this enumeration does not reach (extend it
    # with the input that makes it); a term of no declared kind cannot be built (`Term.kind`).
    assert {term.kind for term in EVERY_TERM} == set(TermKind) - {TermKind.OVERHEADS}


def _order(term: Term) -> str:
    """A term's fields in an order of their own: its sets' order, and so `repr`'s, changes with the hash seed."""
    sets = (term.split_by, term.under, term.during)
    fields = (term.place, term.trains, term.one_card, term.group or 0)
    return repr((term.kind.name, term.law.name, term.nbytes, *(sorted(s) for s in sets), *fields))


IN_ORDER = sorted(EVERY_TERM, key=_order)


@pytest.mark.parametrize("term", IN_ORDER, ids=lambda t: f"{t.kind.name}-{t.law.name}-{t.place}")
def test_every_term_is_drawn_and_placed_as_its_kind_says(term: Term) -> None:
    kind = term.kind
    # The bar in hand draws what `sizing.layer_extra` counts as held for the layer: a per-layer term, or one
    # there only in the passes; the bar at rest the rest.
    assert kind.in_hand is (term.law is Law.PER_LAYER or term.during != ALL_PASSES)
    # A term off the card went with a band's home; one whose kind stays on the card never leaves it.
    if term.place is not Place.GPU:
        assert kind.moves_with is not None
    if kind.moves_with is None:
        assert term.place is Place.GPU
    assert term.band is kind.band


@pytest.mark.parametrize("kind", list(TermKind), ids=lambda k: k.name)
def test_each_kind_is_declared_whole(kind: TermKind) -> None:
    look = kind.look
    assert all(words.strip() for words in (kind.noun, look.label, look.css, look.colour, look.short, look.long))
    assert look.compact is None or look.compact.strip()
    assert look.long.endswith(".")
    if kind.band is not None:
        assert TermKind.of_band(kind.band) is kind
        assert kind.moves_with is kind.band
        assert look.css == f"band-{kind.band}"  # the grid's cells and the key's swatches share the class


def test_the_kinds_are_told_apart_by_their_css_colour_and_noun() -> None:
    for field in ("css", "colour", "short"):
        said = [getattr(kind.look, field) for kind in TermKind]
        assert len(set(said)) == len(said), field
    assert len({kind.noun for kind in TermKind}) == len(TermKind)
    assert [TermKind.of_band(band) for band in Band] == [
        TermKind.WEIGHTS,
        TermKind.GRADIENTS,
        TermKind.MASTER,
        TermKind.MOMENTS,
    ]
