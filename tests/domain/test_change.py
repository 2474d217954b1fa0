"""The sentence and the cells that change when the arrangement changes, checked by hand.

The figures come from the two stages' reports, as the headline's do (`RunReport.change`).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from app.domain.accounting import PAPER, Accounting, Setup
from app.domain.change import Change
from app.domain.placement import Offload, Placement
from app.domain.recipes import MIXED_ADAM, RECIPES, Band, Recipe, RecipeName, custom_recipe
from app.domain.report import Run, run_report
from app.domain.stages import Stage


def change(before: Stage, after: Stage, recipe: Recipe, gpus: int, setup: Setup = PAPER) -> Change:
    """The switch on the default 30B run, which divides evenly across every `gpus` here: no padding."""
    return run_report(Run(gpus=gpus, recipe=recipe, setup=setup)).change(before, after)


def test_zero1_to_zero2_on_8_gpus_drops_the_gradients() -> None:
    # Gradients 2 B, split 8 ways: each card keeps 2/8 = 0.25 and drops 2 × 7/8 = 1.75 of 5.50.
    c = change(Stage.ZERO1, Stage.ZERO2, MIXED_ADAM, 8)
    assert c.split == {Band.GRADIENTS}
    assert c.whole == frozenset()
    assert (c.before_bytes, c.after_bytes) == (Fraction(11, 2), Fraction(15, 4))
    assert c.sentence == (
        "ZeRO-2 splits the bf16 gradients too: each card drops 1.75 of its 5.50 bytes per weight (now 3.75)."
    )


def test_going_back_makes_the_gradients_whole_again() -> None:
    c = change(Stage.ZERO2, Stage.ZERO1, MIXED_ADAM, 8)
    assert c.whole == {Band.GRADIENTS}
    assert c.sentence == (
        "ZeRO-1 keeps the bf16 gradients whole again on every card: each card adds 1.75 to its 3.75 bytes "
        "per weight (now 5.50)."
    )


def test_dp_to_zero1_splits_the_optimizer_state_without_too() -> None:
    # Master 4 + moments 8 = 12, of which 12 × 7/8 = 10.5 go: 16 → 5.5.
    c = change(Stage.DP, Stage.ZERO1, MIXED_ADAM, 8)
    assert c.sentence == (
        "ZeRO-1 splits the fp32 master copy and Adam's two fp32 moments: each card drops 10.50 of its "
        "16.00 bytes per weight (now 5.50)."
    )


def test_zero3_back_to_dp_on_4_gpus() -> None:
    # ZeRO-3 keeps 16/4 = 4; going back adds 12.
    c = change(Stage.ZERO3, Stage.DP, MIXED_ADAM, 4)
    assert c.whole == set(Band)
    assert c.sentence == (
        "Data parallelism keeps the bf16 weights, the bf16 gradients, the fp32 master copy and Adam's two "
        "fp32 moments whole again on every card: each card adds 12.00 to its 4.00 bytes per weight (now 16.00)."
    )


def test_a_recipe_without_master_copy_does_not_name_it() -> None:
    # fp32 Adam: 4/4/0/8. DP → ZeRO-1 on 2 cards splits the moments: 8/2 = 4 dropped of 16.
    c = change(Stage.DP, Stage.ZERO1, RECIPES[RecipeName.FP32_ADAM], 2)
    assert c.split == {Band.MOMENTS}
    assert c.sentence == (
        "ZeRO-1 splits Adam's two fp32 moments: each card drops 4.00 of its 16.00 bytes per weight (now 12.00)."
    )


def test_one_card_changes_nothing() -> None:
    c = change(Stage.DP, Stage.ZERO3, MIXED_ADAM, 1)
    assert c.bands == frozenset()
    assert c.sentence == "ZeRO-3: with one card nothing is split; the card keeps all 16.00 bytes per weight."
    assert not c.cell_changes(0, 0, Band.WEIGHTS, 1)


def test_the_same_stage_changes_nothing() -> None:
    assert change(Stage.ZERO2, Stage.ZERO2, MIXED_ADAM, 8).sentence == (
        "ZeRO-2 again: nothing changes; each card keeps 3.75 bytes per weight."
    )


def test_changed_cells_are_the_non_holders_of_the_changed_bands() -> None:
    c = change(Stage.ZERO1, Stage.ZERO2, MIXED_ADAM, 8)
    # Weight 3 is held by card 3: its cells stay filled; card 5's gradient cell for weight 3 goes dashed.
    assert c.cell_changes(5, 3, Band.GRADIENTS, 8)
    assert not c.cell_changes(3, 3, Band.GRADIENTS, 8)
    assert not c.cell_changes(5, 3, Band.MASTER, 8)
    changed = sum(c.cell_changes(card, w, b, 8) for card in range(8) for w in range(8) for b in Band)
    assert changed == 8 * 7  # one band, every card, every weight it does not hold


@pytest.mark.parametrize("before", list(Stage))
@pytest.mark.parametrize("after", list(Stage))
@pytest.mark.parametrize("gpus", [2, 8, 64])
def test_every_pair_either_way_adds_up(before: Stage, after: Stage, gpus: int) -> None:
    forth, back = change(before, after, MIXED_ADAM, gpus), change(after, before, MIXED_ADAM, gpus)
    assert forth.split == back.whole
    assert forth.whole == back.split
    # A band split over N cards saves nbytes × (N-1)/N per weight on each card.
    saved = sum(Fraction(MIXED_ADAM.nbytes(b) * (gpus - 1), gpus) for b in forth.split)
    regained = sum(Fraction(MIXED_ADAM.nbytes(b) * (gpus - 1), gpus) for b in forth.whole)
    assert forth.before_bytes - forth.after_bytes == saved - regained
    assert forth.sentence.startswith(after.info.title)


@pytest.mark.parametrize(
    ("accounting", "before", "after", "sentence"),
    [
        # DeepSpeed adds fp32 gradients (4 B) split by ZeRO-1 and 2: ZeRO-1 keeps 2 + 2 + (4 + 4 + 8) / 8 = 6.00,
        # ZeRO-2 2 + (2 + 4 + 4 + 8) / 8 = 4.25, the headline's figure (the paper's recipe alone said 3.75).
        (
            Accounting.DEEPSPEED,
            Stage.ZERO1,
            Stage.ZERO2,
            "ZeRO-2 splits the gradients too: each card drops 1.75 of its 6.00 bytes per weight (now 4.25).",
        ),
        # FSDP2 has no ZeRO-1 of its own: the paper's 2 + 2 + 12 / 8 = 5.50. Its ZeRO-2 shards fp32 weights,
        # gradients of that dtype and the optimizer state: (4 + 4 + 8) / 8 = 2.00, the headline's figure.
        (
            Accounting.FSDP2,
            Stage.ZERO1,
            Stage.ZERO2,
            "ZeRO-2 splits the weights, the gradients and the master copy too: each card drops 3.50 of its 5.50 "
            "bytes per weight (now 2.00).",
        ),
        # Megatron-LM's count has no ZeRO-2: its distributed optimizer, 6 + 12 / 8 = 7.50, as ZeRO-1's.
        (
            Accounting.MEGATRON,
            Stage.ZERO1,
            Stage.ZERO2,
            "ZeRO-2 changes nothing that a card keeps, as this count has it: each card keeps 7.50 bytes per weight.",
        ),
        # DeepSpeed's fp32 gradients (4 B, split by ZeRO-1 and up) are named with the bands: 16 + 4 = 20 on a
        # card under data parallelism, 2 + 2 + 16 / 8 = 6.00 under ZeRO-1.
        (
            Accounting.DEEPSPEED,
            Stage.DP,
            Stage.ZERO1,
            "ZeRO-1 splits the master copy, the optimizer's moments and the fp32 gradients: each card drops 14.00 "
            "of its 20.00 bytes per weight (now 6.00).",
        ),
    ],
)
def test_the_sentence_counts_the_accounting_s_terms(
    accounting: Accounting, before: Stage, after: Stage, sentence: str
) -> None:
    report = run_report(Run(setup=Setup(accounting=accounting)))
    moved = report.change(before, after)
    assert (moved.before_bytes, moved.after_bytes) == (report[before].bytes_per_weight, report[after].bytes_per_weight)
    assert moved.sentence == sentence


FSDP2 = Setup(Accounting.FSDP2)
OFFLOAD = Setup(placement=Placement(Offload.OPTIMIZER))

# (before, after, recipe, cards, setup, the sentence), on the default 30B run, by hand in bytes per weight.
SENTENCES = [
    # One card: nothing split either way, all 16 B kept.
    (
        Stage.ZERO3,
        Stage.DP,
        MIXED_ADAM,
        1,
        PAPER,
        "Data parallelism: with one card nothing is split; the card keeps all 16.00 bytes per weight.",
    ),
    # Data parallelism offloads nothing and says so, ZeRO-1 does not: one of the two differs from the paper,
    # so the bands get their plain names. 2 + 2 B stay on the card; 12 of 16 leave it.
    (
        Stage.DP,
        Stage.ZERO1,
        MIXED_ADAM,
        8,
        OFFLOAD,
        "ZeRO-1 splits the master copy and the optimizer's moments: each card drops 12.00 of its 16.00 bytes "
        "per weight (now 4.00).",
    ),
    # FSDP2's ZeRO-2 keeps (4 + 4 + 0 + 8) / 8 = 2 B of slices; its DP is the paper's 16 B.
    (
        Stage.DP,
        Stage.ZERO2,
        MIXED_ADAM,
        8,
        FSDP2,
        "ZeRO-2 splits the weights, the gradients, the master copy and the optimizer's moments: each card drops "
        "14.00 of its 16.00 bytes per weight (now 2.00).",
    ),
    (
        Stage.ZERO2,
        Stage.DP,
        MIXED_ADAM,
        8,
        FSDP2,
        "Data parallelism keeps the weights, the gradients, the master copy and the optimizer's moments whole "
        "again on every card: each card adds 14.00 to its 2.00 bytes per weight (now 16.00).",
    ),
    # A 1-byte band is stored: the moments (1 B) are split with the master copy (4 B). 2 + 2 + 5/8 = 4.625.
    (
        Stage.DP,
        Stage.ZERO1,
        custom_recipe(2, 2, 4, 1),
        8,
        PAPER,
        "ZeRO-1 splits the master copy (4 B) and the adam moments (1 B): each card drops 4.38 of its 9.00 bytes "
        "per weight (now 4.63).",
    ),
    # FSDP2 keeps its slices in the wider dtype, the 16-byte master's: on 2 cards ZeRO-1 keeps 1 + 1 + 16/2 = 10,
    # FSDP2's ZeRO-2 16/2 + 16/2 = 16. The master copy goes; the weights and gradients grow.
    (
        Stage.ZERO1,
        Stage.ZERO2,
        custom_recipe(1, 1, 16, 0),
        2,
        FSDP2,
        "ZeRO-2 splits the master copy and keeps the weights and the gradients whole again: each card goes from "
        "10.00 to 16.00 bytes per weight.",
    ),
]


@pytest.mark.parametrize(("before", "after", "recipe", "gpus", "setup", "sentence"), SENTENCES)
def test_each_kind_of_switch_is_said(
    before: Stage, after: Stage, recipe: Recipe, gpus: int, setup: Setup, sentence: str
) -> None:
    c = change(before, after, recipe, gpus, setup)
    assert (c.before, c.after, c.sentence) == (before, after, sentence)


def test_one_card_changes_no_cell() -> None:
    c = change(Stage.ZERO3, Stage.DP, MIXED_ADAM, 1)
    assert (c.split, c.whole) == (frozenset(), frozenset())


def test_on_two_cards_the_other_cards_cells_change() -> None:
    # Weights alternate between the two cards: weight 1 is card 1's, so card 0's master cell for it empties.
    c = change(Stage.DP, Stage.ZERO1, MIXED_ADAM, 2)
    assert c.split == {Band.MASTER, Band.MOMENTS}
    assert c.cell_changes(0, 1, Band.MASTER, 2)
    assert not c.cell_changes(1, 1, Band.MASTER, 2)


def test_a_one_byte_band_is_a_stored_band() -> None:
    # Moments of 1 B are still state: ZeRO-1 splits them with the 4 B master copy.
    assert change(Stage.DP, Stage.ZERO1, custom_recipe(2, 2, 4, 1), 8).split == {Band.MASTER, Band.MOMENTS}
