"""app/domain/bounded.py: numbers read from text within bounds, and the vote's normaliser that reads with them."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.bounded import MAX_CHARS, MAX_EXPONENT, read_decimal, read_whole
from app.domain.questions import AnswerKind, BadAnswer, Question, normal_answer, spread

QUICK_SECONDS = 0.5
"""Far above a bounded read's microseconds, far below the ten seconds `Fraction("1e-9999999")` took."""
DIGITS_5001 = "9" * 5001
"""Past Python's 4,300-digit limit on int() and str() of an integer."""

NUMBER = Question(AnswerKind.NUMBER, "How many GiB?", "100", "zero1", unit="GiB")
CHOICE = Question(AnswerKind.CHOICE, "Which?", "1", "zero1", choices=("a", "b", "c"))
CELLS = Question(AnswerKind.CELLS, "Which cells?", "0.weights,1.moments", "zero1", card=0, weights=(0, 1))


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("12.5", Fraction(25, 2)),
        (" 1,234.5 ", Fraction(2469, 2)),  # spaces around and thousands' commas, as typed
        # A comma as people in most of Europe write a decimal point: 12,5 is 12.5, not 125 (a phone's keypad).
        ("12,5", Fraction(25, 2)),
        ("0,5", Fraction(1, 2)),
        ("0,125", Fraction(1, 8)),  # not 125: a first group of 0 groups no thousands
        ("1,5e3", Fraction(1500)),
        ("1.000,5", Fraction(2001, 2)),  # with both marks, the last is the decimal one
        ("1.234.567,5", Fraction(2469135, 2)),
        ("1,234", Fraction(1234)),  # groups of three: thousands
        ("1,234,567", Fraction(1234567)),
        ("12,34,5", None),  # neither grouped in threes nor one decimal comma
        ("1,2,3", None),
        ("1,23.4", None),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("1.5e3", Fraction(1500)),
        ("1E-3", Fraction(1, 1000)),
        ("-3", Fraction(-3)),  # a sign is read: the caller's range says whether it is taken
        (f"1e{MAX_EXPONENT}", Fraction(10**MAX_EXPONENT)),
        (f"1e-{MAX_EXPONENT}", Fraction(1, 10**MAX_EXPONENT)),
        ("1" * MAX_CHARS, Fraction(int("1" * MAX_CHARS))),
        ("1e-9999999", None),  # Fraction would build a ten-million-digit integer
        (f"1e{MAX_EXPONENT + 1}", None),
        ("1" * (MAX_CHARS + 1), None),
        pytest.param(DIGITS_5001, None, id="5001 digits"),
        pytest.param("0." + "0" * 5000 + "1", None, id="5000 decimals"),
        ("1_000", None),  # float() takes it, Fraction() of Python 3.11 does not
        ("١٢", None),  # Arabic-Indic digits: float() takes them; the grammar is ASCII's
        ("nan", None),
        ("inf", None),
        ("0x10", None),
        ("1e", None),
        (".", None),
        ("", None),
        ("\ud800", None),
    ],
)
def test_a_decimal_is_read_within_its_bounds(text: str, value: Fraction | None) -> None:
    assert read_decimal(text) == value


@pytest.mark.parametrize(
    ("text", "most", "value"),
    [
        ("0", 3, 0),
        ("3", 3, 3),
        ("03", 3, 3),
        ("4", 3, None),
        ("1" * MAX_CHARS, 10**MAX_CHARS, int("1" * MAX_CHARS)),
        ("1" * (MAX_CHARS + 1), 10**40, None),
        pytest.param(DIGITS_5001, 10**40, None, id="5001 digits"),
        ("٣", 9, None),  # a decimal digit to str.isdecimal(), not ASCII
        ("²", 9, None),  # a digit to str.isdigit(), and int() refuses it
        ("-1", 3, None),
        (" 1", 3, None),
        ("", 3, None),
    ],
)
def test_a_whole_number_is_read_within_its_bounds(text: str, most: int, value: int | None) -> None:
    assert read_whole(text, most) == value


@pytest.mark.parametrize(
    ("question", "given", "words"),
    [
        (NUMBER, ["1e-9999999"], f"an exponent from -{MAX_EXPONENT} to {MAX_EXPONENT}"),
        pytest.param(NUMBER, [DIGITS_5001], f"at most {MAX_CHARS} characters", id="number-5001 digits"),
        pytest.param(NUMBER, ["0." + "0" * 5000 + "1"], f"at most {MAX_CHARS} characters", id="number-5000 decimals"),
        (NUMBER, ["1_000"], "such as 12.5, 12,5, 1,234.5 or 1.5e3"),
        (NUMBER, ["-3"], "Give a number of GiB from 0 to 1,000,000,000,000,000"),
        (NUMBER, ["1e16"], "from 0 to 1,000,000,000,000,000"),
        pytest.param(CHOICE, [DIGITS_5001], "Choose one of the answers offered.", id="choice-5001 digits"),
        (CHOICE, ["٢"], "Choose one of the answers offered."),
        (CELLS, ["0.weights"] * 9, "That answer names more cells than the card has (8)."),
    ],
)
def test_a_vote_past_the_bounds_is_refused_quickly_saying_what_is_taken(
    question: Question, given: list[str], words: str
) -> None:
    start = time.perf_counter()
    with pytest.raises(BadAnswer) as refused:
        normal_answer(question, given)
    assert time.perf_counter() - start < QUICK_SECONDS
    assert words in str(refused.value)


def _digits(count: int) -> str:
    return "9" * count


# Anything a form could carry, and what it could not: any character, surrogates (category Cs) too.
# The map keeps hypothesis from merging the two into one alphabet, where surrogates are 2,048 of 1.1 million.
_ANY_CHARACTER = st.characters() | st.characters(categories=["Cs"]).map(str)
_NUMBERISH = st.sampled_from("0123456789.,eE+- _")
_TEXTS = st.one_of(
    st.text(_ANY_CHARACTER, max_size=40),
    st.text(_NUMBERISH | _ANY_CHARACTER, max_size=40),
    st.text(_NUMBERISH, min_size=1, max_size=40),
    st.integers(4000, 6000).map(_digits),  # past the int-string limit
    st.builds(
        lambda mantissa, exponent: f"{mantissa}e{exponent}",
        st.decimals(0, 10**6, places=3).map(str),
        st.integers(-(10**8), 10**8),
    ),
)


@given(st.sampled_from([NUMBER, CHOICE, CELLS]), st.lists(_TEXTS, max_size=3))
def test_any_text_is_an_answer_or_the_domains_refusal_and_quickly(question: Question, answers: list[str]) -> None:
    start = time.perf_counter()
    try:
        kept = normal_answer(question, answers)
    except BadAnswer as refused:
        str(refused).encode()  # a sentence that can be sent
    else:
        kept.encode()  # what is kept can be stored and sent
        assert spread(question, [kept]).answered == 1  # and counted
    assert time.perf_counter() - start < QUICK_SECONDS
