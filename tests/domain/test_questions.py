"""app/domain/questions.py: each question's right answer against a hand calculation, and the spread of answers.

The run is the seed's: 30B weights on 8 cards, bf16 weights and gradients, fp32 master and Adam (16 bytes).
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from app.domain.questions import (
    AnswerKind,
    BadAnswer,
    Question,
    bytes_choice,
    cells_question,
    memory_question,
    most_missed,
    next_phase_question,
    normal_answer,
    spread,
)
from app.domain.recipes import Band
from app.domain.scenario import Inputs, resolve
from app.domain.stages import Stage
from app.domain.units import ByteUnit

SEED = resolve(Inputs(params=30_000_000_000, gpus=8))
GIB = 2**30


@pytest.mark.parametrize(
    ("stage", "right"),
    [
        (Stage.DP, "16.00 B"),  # 2 + 2 + 4 + 8 on every card
        (Stage.ZERO1, "5.50 B"),  # 2 + 2 + 12 / 8
        (Stage.ZERO2, "3.75 B"),  # 2 + (2 + 12) / 8
        (Stage.ZERO3, "2.00 B"),  # 16 / 8
    ],
)
def test_the_bytes_choice_is_right_and_its_distractors_are_the_other_stages_figures(stage: Stage, right: str) -> None:
    question = bytes_choice(SEED.report, stage)
    assert question.choices == ("16.00 B", "5.50 B", "3.75 B", "2.00 B")
    assert question.choices[int(question.answer)] == right


@pytest.mark.parametrize(
    ("stage", "bytes_per_weight"), [(Stage.DP, 16), (Stage.ZERO1, Fraction(11, 2)), (Stage.ZERO3, 2)]
)
def test_the_memory_question_is_each_cards_state_at_rest(stage: Stage, bytes_per_weight: Fraction) -> None:
    question = memory_question(SEED.report, stage, ByteUnit.GIB)
    expected = 30_000_000_000 * Fraction(bytes_per_weight) / GIB  # ZeRO-1: 165e9 B = 153.668 GiB
    assert Fraction(question.answer) == pytest.approx(expected, abs=0.001)
    assert (question.kind, question.unit, question.reveal_phase) == (AnswerKind.NUMBER, "GiB", None)
    assert question.hides_picture


@pytest.mark.parametrize(
    ("stage", "card", "held"),
    [
        # ZeRO-2: every weight's bf16 copy, and its own weight's gradients, master and moments.
        (Stage.ZERO2, 1, [f"{w}.weights" for w in range(8)] + ["1.gradients", "1.master", "1.moments"]),
        # ZeRO-1: every weight's bf16 copy and gradients; its own weight's master and moments.
        (Stage.ZERO1, 3, [f"{w}.{b}" for w in range(8) for b in ("weights", "gradients")] + ["3.master", "3.moments"]),
        # ZeRO-3: its own weight's four bands only.
        (Stage.ZERO3, 0, ["0.weights", "0.gradients", "0.master", "0.moments"]),
    ],
)
def test_the_cells_question_is_the_cards_own_solid_cells(stage: Stage, card: int, held: list[str]) -> None:
    question = cells_question(SEED.report, stage, card)
    assert set(question.answer.split(",")) == set(held)
    assert len(question.cells) == 8 * 4


@pytest.mark.parametrize(
    ("stage", "card", "words"),
    [
        (Stage.DP, 2, "GPU 2 keeps all four bands of all 8 weights (32 of 32 cells)"),
        (Stage.ZERO1, 3, "GPU 3 keeps the weights and gradients of all 8 weights, and the fp32 master copy and "
                         "optimizer's moments of weight 3 only (18 of 32 cells)"),  # 16 + 2
        (Stage.ZERO2, 1, "GPU 1 keeps the weights of all 8 weights, and the gradients, fp32 master copy and "
                         "optimizer's moments of weight 1 only (11 of 32 cells)"),  # 8 + 3
        (Stage.ZERO3, 0, "GPU 0 keeps all four bands of weight 0 only (4 of 32 cells)"),
    ],
)  # fmt: skip
def test_a_cells_answer_says_which_bands_of_which_weights_the_card_keeps(stage: Stage, card: int, words: str) -> None:
    assert cells_question(SEED.report, stage, card).answer_words == words


def test_a_cells_answer_of_no_cell_or_of_some_weights_says_so() -> None:
    none = Question(AnswerKind.CELLS, "?", "", "zero3", card=5, weights=(0, 1))
    assert none.answer_words == "GPU 5 keeps none of these cells (0 of 8 cells)"
    some = Question(AnswerKind.CELLS, "?", "0.weights,2.weights,3.weights", "zero3", card=2, weights=(0, 1, 2, 3))
    assert some.answer_words == "GPU 2 keeps the weights of weights 0, 2 and 3 (3 of 16 cells)"


def test_the_most_missed_cells_are_those_the_most_answers_got_wrong() -> None:
    # CELLS keeps 0.weights and 1.moments. Four answers: right; 0.weights alone; 0.weights and 1.weights;
    # 1.weights alone. Wrong about 0.weights: the one that left it out (1); about 1.moments: the three that
    # left it out (3); about 1.weights: the two that tapped it (2); every other cell: none.
    counted = spread(CELLS, ["0.weights,1.moments", "0.weights", "0.weights,1.weights", "1.weights"])
    missed = most_missed(CELLS, counted)
    assert [(m.weight, m.band, m.kept, m.wrong) for m in missed] == [(1, Band.MOMENTS, True, 3)]
    assert missed[0].words == "weight 1's optimizer's moments (kept)"
    # A tie names each (in the card's order, three at most); every answer right names none.
    tied = most_missed(CELLS, spread(CELLS, ["0.weights,1.moments,0.gradients,1.weights,0.master,1.master"]))
    assert [m.words for m in tied] == [
        "weight 0's gradients (not kept)", "weight 0's fp32 master copy (not kept)", "weight 1's weights (not kept)"
    ]  # fmt: skip
    assert most_missed(CELLS, spread(CELLS, ["0.weights,1.moments"] * 3)) == ()


def test_a_cells_question_about_a_card_not_drawn_is_refused() -> None:
    with pytest.raises(ValueError, match="GPU 8 is not drawn"):
        cells_question(SEED.report, Stage.ZERO1, 8)


def test_predict_then_step_asks_for_the_next_phases_live_memory_and_reveals_it() -> None:
    lesson = resolve(Inputs())  # the seed's 30B weights in 8 equal layers of 3.75B, on 8 cards
    question = next_phase_question(lesson.report, Stage.ZERO3, 6, ByteUnit.GIB)
    assert question.reveal_phase == 7
    assert not question.hides_picture
    # Phase 7, column 2's gather: its 2 B/weight slice at rest (60e9 B) and one layer gathered in bf16 (3.75e9 x 2 B).
    assert float(question.answer) == pytest.approx((60e9 + 7.5e9) / GIB, abs=0.001)  # 62.864 GiB
    with pytest.raises(ValueError, match="last phase"):
        next_phase_question(lesson.report, Stage.ZERO3, len(lesson.report.step(Stage.ZERO3)) - 1, ByteUnit.GIB)


NUMBER = Question(AnswerKind.NUMBER, "How many GiB?", "100", "zero1", unit="GiB")
CHOICE = Question(AnswerKind.CHOICE, "Which?", "1", "zero1", choices=("a", "b", "c"))
CELLS = Question(AnswerKind.CELLS, "Which cells?", "0.weights,1.moments", "zero1", card=0, weights=(0, 1))


@pytest.mark.parametrize(
    ("question", "given", "normal"),
    [
        (NUMBER, ["95"], "95"),
        (NUMBER, [" 1,234.5 "], "1234.5"),
        (NUMBER, ["0.1234"], "0.123"),
        (CHOICE, ["2"], "2"),
        (CELLS, ["1.moments", "0.weights", "0.weights"], "0.weights,1.moments"),  # card order, each once
        (CELLS, [], ""),  # "it keeps none" is an answer
    ],
)
def test_an_answer_is_kept_in_one_normal_form(question: Question, given: list[str], normal: str) -> None:
    assert normal_answer(question, given) == normal


@pytest.mark.parametrize(
    ("question", "given"),
    [
        (NUMBER, ["many"]),
        (NUMBER, ["-1"]),
        (NUMBER, ["inf"]),
        (NUMBER, ["1e300"]),
        (NUMBER, ["1", "2"]),
        (CHOICE, ["3"]),
        (CHOICE, ["-1"]),
        (CHOICE, []),
        (CELLS, ["2.weights"]),
        (CELLS, ["0.weights<script>"]),
    ],
)
def test_what_cannot_be_an_answer_is_refused_with_a_sentence(question: Question, given: list[str]) -> None:
    with pytest.raises(BadAnswer):
        normal_answer(question, given)


@pytest.mark.parametrize(("answer", "right"), [("95", True), ("105", True), ("94.9", False), ("105.1", False)])
def test_a_number_within_five_percent_is_right(answer: str, right: bool) -> None:
    assert NUMBER.is_right(answer) is right


def test_the_spread_counts_choices_and_rights() -> None:
    counted = spread(CHOICE, ["1", "1", "0", "2", "1"])
    assert [(b.label, b.count, b.right) for b in counted.bars] == [("a", 1, False), ("b", 3, True), ("c", 1, False)]
    assert (counted.answered, counted.right, counted.share_right) == (5, 3, Fraction(3, 5))


def test_the_spread_of_cells_is_taps_per_cell_and_right_only_for_the_whole_set() -> None:
    counted = spread(CELLS, ["0.weights,1.moments", "0.weights", ""])
    assert {b.label: b.count for b in counted.bars} == {
        "0.weights": 2, "0.gradients": 0, "0.master": 0, "0.moments": 0,
        "1.weights": 0, "1.gradients": 0, "1.master": 0, "1.moments": 1,
    }  # fmt: skip
    assert counted.right == 1


def test_the_histogram_has_eight_equal_bins_from_the_lowest_answer_to_the_highest() -> None:
    counted = spread(NUMBER, ["20", "100", "100", "98", "180"])
    assert len(counted.bars) == 8
    assert [b.count for b in counted.bars] == [
        1,
        0,
        0,
        1,
        2,
        0,
        0,
        1,
    ]  # bins of 20 from 20: 98 in 80-100, 100 in 100-120
    assert [b.label for b in counted.bars[3:5]] == ["80–100", "100–120"]
    # The answer's own bin, 100 in 100-120: only it, though the 5% band (95-105) reaches into 80-100.
    assert [b.right for b in counted.bars] == [False, False, False, False, True, False, False, False]
    assert counted.right == 3
    # Round edges whatever the answers: 55.9 to 447 over eight bins is a width of 48.9, so bins of 50 from 50.
    wide = spread(NUMBER, ["55.9", "60", "447"])
    assert [b.label for b in wide.bars] == ["50–100", "100–150", "150–200", "200–250", "250–300", "300–350",
                                            "350–400", "400–450"]  # fmt: skip
    assert [b.count for b in wide.bars] == [2, 0, 0, 0, 0, 0, 0, 1]
    assert [b.right for b in wide.bars] == [False, True, False, False, False, False, False, False]
    # An answer beyond every guess marks no bin; a single value is marked if it is within 5%.
    assert not any(b.right for b in spread(NUMBER, ["1", "2"]).bars)
    assert [b.right for b in spread(NUMBER, ["104", "104"]).bars] == [True]
    # Small numbers too: 0.1 to 0.9 is a width of 0.1; 0.12 to 0.13 one of 0.002 (0.00125 rounded up).
    assert [b.label for b in spread(NUMBER, ["0.1", "0.9"]).bars][::7] == ["0.1–0.2", "0.8–0.9"]
    assert [b.label for b in spread(NUMBER, ["0.12", "0.13"]).bars] == ["0.12–0.122", "0.122–0.124", "0.124–0.126",
                                                                        "0.126–0.128", "0.128–0.13"]  # fmt: skip
    same = spread(NUMBER, ["100", "100"])
    assert [(b.label, b.count) for b in same.bars] == [("100", 2)]
    assert spread(NUMBER, []).bars == ()


def test_an_answer_of_nothing_is_a_number() -> None:
    # "It keeps 0 GiB" (a card keeping nothing) is an answer, and right where the figure is 0.
    assert normal_answer(NUMBER, ["0"]) == "0"
    nothing = Question(AnswerKind.NUMBER, "How many GiB?", "0", "zero1", unit="GiB")
    assert nothing.is_right("0")
    assert not nothing.is_right("0.001")


# Bins worked by hand: (high − low) / 8 rounded up to 1, 2, 2.5 or 5 times a power of ten; the first edge the
# lowest answer rounded down to the width; the answer's bin marked, at the lowest edge or the highest.
@pytest.mark.parametrize(
    ("answer", "given", "labels", "counts", "marked"),
    [
        # 0 to 20: 2.5 a bin (20 / 8), eight bins exactly; the answer 10 in 10–12.5.
        ("10", ["0", "20"], ["0–2.5", "2.5–5", "5–7.5", "7.5–10", "10–12.5", "12.5–15", "15–17.5", "17.5–20"],
         [1, 0, 0, 0, 0, 0, 0, 1], 4),
        # 20 to 100: 10 a bin from 20; the answer 100, the highest edge, in the last bin.
        ("100", ["20", "100"], ["20–30", "30–40", "40–50", "50–60", "60–70", "70–80", "80–90", "90–100"],
         [1, 0, 0, 0, 0, 0, 0, 1], 7),
        # The same answers; the answer 20, the lowest edge, in the first bin.
        ("20", ["20", "100"], ["20–30", "30–40", "40–50", "50–60", "60–70", "70–80", "80–90", "90–100"],
         [1, 0, 0, 0, 0, 0, 0, 1], 0),
        # 3 to 21: 18 / 8 = 2.25, so 2.5 a bin from 2.5 (3 rounded down): 2.5 to 22.5 in 8 bins; 10 in 10–12.5.
        ("10", ["3", "10", "21"], ["2.5–5", "5–7.5", "7.5–10", "10–12.5", "12.5–15", "15–17.5", "17.5–20", "20–22.5"],
         [1, 0, 0, 1, 0, 0, 0, 1], 3),
        # 0 to 45: 5.625, so 10 a bin (5 would need 9 bins): 0 to 50 in 5 bins; the answer 0 in the first.
        ("0", ["0", "45"], ["0–10", "10–20", "20–30", "30–40", "40–50"], [1, 0, 0, 0, 1], 0),
    ],
)  # fmt: skip
def test_the_histograms_edges_and_widths_by_hand(
    answer: str, given: list[str], labels: list[str], counts: list[int], marked: int
) -> None:
    question = Question(AnswerKind.NUMBER, "How many GiB?", answer, "zero1", unit="GiB")
    bars = spread(question, given).bars
    assert [b.label for b in bars] == labels
    assert [b.count for b in bars] == counts
    assert [i for i, b in enumerate(bars) if b.right] == [marked]
