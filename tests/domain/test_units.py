from __future__ import annotations

import re
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.stages import Stage
from app.domain.state_bytes import bytes_per_weight
from app.domain.units import (
    BYTES_PATTERN,
    COUNT_PATTERN,
    ZERO_BYTES_PATTERN,
    ZERO_COUNT_PATTERN,
    ByteUnit,
    _scientific,
    _whole,
    ambiguity,
    count_label,
    factor_text,
    gpus_label,
    parse_bytes,
    parse_count,
    parse_factor,
    per_weight,
    percent,
)


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("7.5e9", 7_500_000_000),
        ("7500000000", 7_500_000_000),
        ("7.5B", 7_500_000_000),
        ("7.5b", 7_500_000_000),
        ("0.5B", 500_000_000),
        (" 350M ", 350_000_000),
        ("1.2T", 1_200_000_000_000),
        ("405853388800", 405_853_388_800),
        # What Python's repr and spreadsheets print.
        ("7.5e+09", 7_500_000_000),
        ("7.5E9", 7_500_000_000),
        ("7.50E+09", 7_500_000_000),
        ("128e9", 128_000_000_000),
        ("1e+12", 1_000_000_000_000),
        # What Python's '{:e}' prints: six decimals, trailing zeros and all.
        ("7.500000e+09", 7_500_000_000),
        ("1.230000e+02", 123),
        # Small exponents, so long as the count stays whole.
        ("7.5e3", 7_500),
        ("5.5e+01", 55),
        ("3e0", 3),
        # The largest scientific and plain counts below 10¹⁶.
        ("9.999999e15", 9_999_999_000_000_000),
        ("9999999999999999", 9_999_999_999_999_999),
        # Thousands separators, comma or underscore.
        ("1,000,000", 1_000_000),
        ("1_000_000", 1_000_000),
        ("7,500,000,000", 7_500_000_000),
        ("12,345", 12_345),
        ("405_853_388_800", 405_853_388_800),
        ("9,999,999,999,999,999", 9_999_999_999_999_999),
        # What count_label prints past 999T reads back.
        ("2,750T", 2_750_000_000_000_000),
        ("1_500M", 1_500_000_000),
    ],
)
def test_counts_as_people_write_them(text: str, count: int) -> None:
    assert parse_count(text) == count


@pytest.mark.parametrize(
    ("text", "nbytes"),
    [
        ("80GB", 80 * 10**9),
        ("80GiB", 80 * 2**30),
        ("80 gib", 80 * 2**30),
        ("1.001GiB", 1_074_815_565),
        ("141GB", 141 * 10**9),
        ("85899345920", 85_899_345_920),
        ("1.5TB", 1_500_000_000_000),
        ("32e9", 32_000_000_000),
        ("8e+10", 80_000_000_000),
        ("1.5E12", 1_500_000_000_000),
        ("85,899,345,920", 85_899_345_920),
        ("1,024GiB", 2**40),
        ("1.5e8", 150_000_000),
        # (10⁷ - 1) × 2⁴⁰ / 1000 = 10,995,115,178,248,372.224, cut to whole bytes.
        ("9,999.999TiB", 10_995_115_178_248_372),
    ],
)
def test_sizes_as_people_write_them(text: str, nbytes: int) -> None:
    assert parse_bytes(text) == nbytes


@pytest.mark.parametrize(
    "text",
    [
        *["", "abc", "-3", "0", "0B", "0.0B", "7.5", "7.5 Q", "1e999", "9" * 60, "7.5B weights", "0x10"],
        # Not whole: 123.45, 1.5, 0.0075.
        *["1.2345e2", "1.5e0", "7.5e-3", "7.5e+-3"],
        # 10¹⁶ and more, or more decimals than the parser keeps.
        *["1e16", "10e15", "10000000000000000", "10,000,000,000,000,000", "10,000T", "7.5000000e9", "1e016"],
        # Groups of three, one separator, no stray commas, no decimals after groups.
        *["1,00,0", "1,0000", "10,00", "1,000_000", ",000", "1,000,", "1,,000", "1,000.5", "0,001", "1 000"],
        *["e9", "7.5e", "7.5ee9", "7.5e9e", "7.5B\n", "7.5e9\n"],
    ],
)
def test_counts_that_are_not_counts(text: str) -> None:
    with pytest.raises(ValueError, match="number of weights"):
        parse_count(text)


@pytest.mark.parametrize(
    "text",
    ["80 GHz", "eighty", "80 G B", "1e99999GB", "0GB", "80MB", "1e16", "32e9GB", "1.5e-8", "80,0GB", "10,000TiB"],
)
def test_sizes_that_are_not_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="memory size should look like"):
        parse_bytes(text)


@pytest.mark.parametrize(
    ("text", "reading"),
    [
        ("80G", "“80G” could be 80 GB (80×10⁹ bytes) or 80 GiB (80×2³⁰ bytes); write 80GB or 80GiB"),
        (" 80 g ", "“80 g” could be 80 GB (80×10⁹ bytes) or 80 GiB (80×2³⁰ bytes); write 80GB or 80GiB"),
        ("1.5T", "“1.5T” could be 1.5 TB (1.5×10¹² bytes) or 1.5 TiB (1.5×2⁴⁰ bytes); write 1.5TB or 1.5TiB"),
    ],
)
def test_a_bare_g_or_t_is_ambiguous_and_says_both_readings(text: str, reading: str) -> None:
    assert ambiguity(text, show_input=True) == reading
    with pytest.raises(ValueError, match="ambiguous") as refused:
        parse_bytes(text)
    assert str(refused.value) == f"a memory size is ambiguous: {reading}"


def test_the_ambiguity_can_be_told_without_repeating_the_input() -> None:
    assert ambiguity("80G", show_input=False) == (
        "a bare G could mean GB (10⁹ bytes) or GiB (2³⁰ bytes); write the unit in full"
    )
    assert ambiguity("1.5 t", show_input=False) == (
        "a bare T could mean TB (10¹² bytes) or TiB (2⁴⁰ bytes); write the unit in full"
    )


@pytest.mark.parametrize("text", ["80GB", "80GiB", "1000000", "80 GHz", "G", "0G", "80M", "80GG"])
def test_only_a_number_and_a_bare_g_or_t_is_ambiguous(text: str) -> None:
    assert ambiguity(text, show_input=True) is None


@pytest.mark.parametrize(("text", "number"), [("80", "80"), (" 141 ", "141"), ("1.5", "1.5"), ("9999", "9999")])
def test_a_size_with_no_unit_and_too_small_for_bytes_asks_for_one(text: str, number: str) -> None:
    assert ambiguity(text, show_input=True) == (
        f"“{number}” has no unit, so it would be {number} bytes; write {number}GB ({number}×10⁹ bytes) "
        f"or {number}GiB ({number}×2³⁰ bytes)"
    )
    with pytest.raises(ValueError, match="has no unit"):
        parse_bytes(text)


@pytest.mark.parametrize(("text", "nbytes"), [("1000000", 10**6), ("1,000,000", 10**6), ("8e6", 8 * 10**6)])
def test_a_million_bytes_or_more_needs_no_unit(text: str, nbytes: int) -> None:
    assert parse_bytes(text) == nbytes
    assert ambiguity(text, show_input=True) is None


# Zero, where a field takes it (an overhead left out, DeepSpeed's bucket of 0 elements): a 0, with a
# unit or without, for it is 0 in any unit. Nothing else is zero: no sign, no decimals, no bare G.
@pytest.mark.parametrize("text", ["0", " 0 ", "0K", "0 B", "0T"])
def test_a_count_of_zero_is_read_only_where_it_is_taken(text: str) -> None:
    assert parse_count(text, zero=True) == 0
    assert re.fullmatch(ZERO_COUNT_PATTERN, text)
    with pytest.raises(ValueError, match="number of weights"):
        parse_count(text)


@pytest.mark.parametrize("text", ["0", " 0 ", "0GB", "0 GiB", "0TB", "0tib"])
def test_a_size_of_zero_is_read_only_where_it_is_taken(text: str) -> None:
    assert parse_bytes(text, zero=True) == 0
    assert re.fullmatch(ZERO_BYTES_PATTERN, text)
    with pytest.raises(ValueError, match="memory size"):
        parse_bytes(text)


@pytest.mark.parametrize("text", ["00", "-0", "0.0", "0e0", "0G", "0MB", "0 0", "0,000"])
def test_nothing_but_a_zero_is_zero(text: str) -> None:
    assert re.fullmatch(ZERO_COUNT_PATTERN, text) is None
    assert re.fullmatch(ZERO_BYTES_PATTERN, text) is None
    with pytest.raises(ValueError, match="number of weights"):
        parse_count(text, zero=True)
    with pytest.raises(ValueError, match="memory size"):
        parse_bytes(text, zero=True)


@pytest.mark.parametrize(("text", "count"), [("7.5B", 7_500_000_000), ("1", 1)])
def test_a_field_taking_zero_still_reads_every_count(text: str, count: int) -> None:
    assert parse_count(text, zero=True) == count


@given(st.from_regex(r"^ {0,3}[1-9][0-9]{0,3}(\.[0-9]{1,3})? {0,3}[GgTt] {0,3}$", fullmatch=True))
def test_the_grammar_never_admits_an_ambiguous_size(text: str) -> None:
    assert re.fullmatch(BYTES_PATTERN, text) is None
    with pytest.raises(ValueError, match="ambiguous"):
        parse_bytes(text)


@given(st.from_regex(COUNT_PATTERN, fullmatch=True))
def test_every_count_the_grammar_allows_is_a_positive_whole_number(text: str) -> None:
    # parse_count refuses a fraction outright, so a grammar that let one through would fail here.
    assert 1 <= parse_count(text) < 10**16


@given(st.from_regex(BYTES_PATTERN, fullmatch=True))
def test_every_size_the_grammar_allows_is_at_least_a_byte(text: str) -> None:
    # The largest is 9,999.999 TiB; plain and scientific bytes stop below 10¹⁶, which is less.
    # A number with no unit is at least a million bytes; with a unit, at least 0.001 GB.
    assert 10**6 <= parse_bytes(text) < 10_000 * 2**40


@given(st.integers(1, 10**15))
def test_every_count_written_with_separators_reads_back(n: int) -> None:
    assert parse_count(f"{n:,}") == n
    assert parse_count(f"{n:_}") == n


@given(st.integers(1, 9_999_999), st.integers(0, 9))
def test_whole_numbers_as_python_prints_them_read_back(digits: int, shift: int) -> None:
    # Below 10¹⁶, and exact as a float: the odd part is at most 10⁷ × 5⁹, far below 2⁵³.
    n = digits * 10**shift
    assert parse_count(f"{n:e}") == n
    if digits < 10**6:
        # '%g' keeps six significant figures, so only a six-digit mantissa survives it.
        assert parse_count(f"{n:g}") == n


def test_units_print_with_their_name() -> None:
    assert ByteUnit.GIB.show(165 * 10**9) == "153.7 GiB"
    assert ByteUnit.GB.show(165 * 10**9) == "165.0 GB"
    assert ByteUnit.GB.show(Fraction(1_875_000_000)) == "1.9 GB"


@pytest.mark.parametrize(
    ("unit", "nbytes", "shown"),
    [
        (ByteUnit.GIB, 0, "0 GiB"),
        (ByteUnit.GB, 0, "0 GB"),
        # 7,838,000 / 1,073,741,824 = 0.0072997…; / 10⁹ = 0.007838.
        (ByteUnit.GIB, 7_838_000, "0.0073 GiB"),
        (ByteUnit.GB, 7_838_000, "0.0078 GB"),
        (ByteUnit.GIB, 2**29, "0.50 GiB"),
        (ByteUnit.GB, 994 * 10**6, "0.99 GB"),
        (ByteUnit.GB, 1, "0.0000000010 GB"),
        (ByteUnit.GB, 10**9, "1.0 GB"),
        (ByteUnit.GB, 10**13, "10,000.0 GB"),
        (ByteUnit.GIB, 1_234_567 * 2**30, "1,234,567.0 GiB"),
        (ByteUnit.GIB, -(2**29), "-0.50 GiB"),
    ],
)
def test_small_sizes_keep_two_significant_figures(unit: ByteUnit, nbytes: int, shown: str) -> None:
    assert unit.show(nbytes) == shown


@pytest.mark.parametrize(
    ("n", "label"),
    [
        (0, "0"),
        (999, "999"),
        (1_000, "1K"),
        (1_234, "1.23K"),
        (350_000_000, "350M"),
        (999_499_999, "999M"),
        # Rounds to 1.00×10⁹ first, then picks the suffix: never 1e+03M.
        (999_500_000, "1B"),
        (7_500_000_000, "7.5B"),
        (8_030_261_248, "8.03B"),
        (30_000_000_000, "30B"),
        (405_853_388_800, "406B"),
        (1_200_000_000_000, "1.2T"),
        (999_500_000_000_000, "1,000T"),
        (2_750_000_000_000_000, "2,750T"),
        (12_345_678_901_234_567, "12,300T"),
    ],
)
def test_counts_print_the_way_people_say_them(n: int, label: str) -> None:
    assert count_label(n) == label


@given(st.integers(1_000, 10**20))
def test_a_count_label_is_never_scientific(n: int) -> None:
    label = count_label(n)
    assert "e+" not in label
    assert "e-" not in label


@given(st.integers(1_000, 9_994_999_999_999_999))
def test_a_count_label_reads_back_within_half_a_percent(n: int) -> None:
    # 9,995T and up round to 10,000T, which is 10¹⁶ and past what a count may be.
    assert abs(parse_count(count_label(n)) - n) <= n * Fraction(5, 1000)


@pytest.mark.parametrize(
    ("nbytes", "shown"),
    [
        (16, "16.00"),
        (Fraction(11, 2), "5.50"),
        (Fraction(15, 4), "3.75"),
        (2, "2.00"),
        (Fraction(16, 3), "5.33"),
        (Fraction(1, 4), "0.25"),
        (Fraction(1, 2), "0.50"),
        (Fraction(1, 8), "0.125"),
        (Fraction(2, 3), "0.667"),
        (Fraction(16, 1024), "0.0156"),
        (Fraction(16, 4096), "0.00391"),
        (Fraction(1, 1000), "0.001"),
        (Fraction(9996, 10000), "1.00"),
    ],
)
def test_bytes_per_weight_keep_three_significant_figures_below_one(nbytes: Fraction, shown: str) -> None:
    assert per_weight(nbytes) == shown


def test_zero3_on_4096_gpus_is_not_zero() -> None:
    # 16 bytes over 4,096 cards: 0.00390625.
    assert per_weight(bytes_per_weight(Stage.ZERO3, 4096)) == "0.00391"


@given(st.fractions(min_value=Fraction(1, 10**9), max_value=10**6))
def test_bytes_per_weight_times_the_count_stays_within_half_a_percent(nbytes: Fraction) -> None:
    shown = per_weight(nbytes)
    assert shown.strip("0.") != ""
    assert abs(Fraction(shown.replace(",", "")) - nbytes) <= nbytes * Fraction(5, 1000)


@pytest.mark.parametrize(
    ("part", "shown"),
    [
        (Fraction(2, 16), "12.5%"),  # ZeRO-3 on 8 GPUs: 2 of 16 bytes
        (Fraction(11, 32), "34.4%"),  # ZeRO-1: 5.5 of 16, 34.375% rounded half up
        (Fraction(1), "100%"),
        (Fraction(1, 4), "25%"),
        (Fraction(1, 1024), "0.0977%"),
        (Fraction(0), "0%"),
    ],
)
def test_percentages_keep_three_figures(part: Fraction, shown: str) -> None:
    assert percent(part) == shown


@given(st.fractions(min_value=-(10**15), max_value=10**15), st.integers(min_value=0, max_value=12))
def test_sizes_round_half_up_on_the_exact_value(nbytes: Fraction, decimals: int) -> None:
    # Decimal's own half-up rounding, with precision to spare, is the reference the printing must match.
    from decimal import ROUND_HALF_UP, Decimal, localcontext

    unit = ByteUnit.GB
    value = nbytes / unit.size
    if value == 0 or abs(value) < 1:
        return  # below one unit the decimals are chosen by significance, tested above
    with localcontext() as ctx:
        ctx.prec = 200
        exact = Decimal(value.numerator) / Decimal(value.denominator)
        expected = abs(exact).quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_UP)
    sign = "-" if value < 0 and expected != 0 else ""
    assert unit.show(nbytes, decimals) == f"{sign}{expected:,} GB"


# The grammar's parts, called directly: COUNT_PATTERN and BYTES_PATTERN are built from them once, when
# the module is imported, so a test of the patterns alone never sees a change to how they are built.
# (digits at most, at least, text, whether it is a whole number of that many digits)
WHOLE = [
    (4, 1, "1", True),
    (4, 1, "9999", True),
    (4, 1, "1,234", True),  # grouped by threes, with a comma or an underscore
    (4, 1, "1_234", True),
    (4, 1, "12,34", False),  # a group of two
    (4, 1, "0", False),  # not positive
    (4, 1, "01", False),
    (4, 1, "10000", False),  # five digits
    (4, 1, "1,234,567", False),
    (16, 1, "1234,567", False),  # a leading group of four
    (16, 1, "1,234_567", False),  # one separator throughout
    (16, 1, "12", True),
    (16, 1, "12,345", True),
    (16, 1, "123,456", True),
    (16, 1, "1_234_567", True),
    (16, 1, "9,999,999,999,999,999", True),  # 16 digits
    (16, 1, "10,000,000,000,000,000", False),  # 17
    # A memory size has at least 7 digits (a card holds millions of bytes at least).
    (16, 7, "1000000", True),
    (16, 7, "1,000,000", True),
    (16, 7, "10,000,000", True),
    (16, 7, "100,000,000", True),
    (16, 7, "999999", False),
    (16, 7, "999,999", False),
    (16, 7, "1234567890123456", True),
    (16, 7, "12345678901234567", False),
]


@pytest.mark.parametrize(("digits", "least", "text", "whole"), WHOLE)
def test_a_whole_number_of_so_many_digits(digits: int, least: int, text: str, whole: bool) -> None:
    assert bool(re.fullmatch(_whole(digits, least), text)) is whole


SCIENTIFIC = [
    (16, 1, "1e15", True),  # 16 digits
    (16, 1, "1e16", False),  # 17
    (16, 1, "9999e12", True),  # 9,999 × 10¹²: 16 digits
    (16, 1, "9999e13", False),
    (16, 1, "1.5e1", True),  # 15
    (16, 1, "12.5e1", True),  # 125
    (16, 1, "1.55e1", False),  # 15.5: not whole
    (16, 1, "1.05e1", False),  # 10.5
    (16, 1, "1e0", True),
    (16, 1, "1.0e0", True),
    (16, 1, "1.5e0", False),
    (16, 1, "1.5e10", True),
    (16, 1, "1.5e09", True),  # a leading zero in the exponent
    (16, 1, "7.5e+09", True),
    (16, 1, "7.5e 09", True),  # a '+' typed into an address arrives as a space
    (16, 1, "1.230000e+02", True),  # Python's '{:e}': six decimals, trailing zeros
    (16, 1, "1.000000e+15", True),
    (16, 1, "1.2345678e8", False),  # seven decimals
    (16, 1, "1.5000000e2", False),  # seven decimals, five of them trailing zeros
    (16, 1, "1.5e2", True),  # 150: fewer significant decimals than the exponent allows
    (16, 1, "12345e3", False),  # at most four digits before the point
    (16, 1, "1e010", False),  # a leading zero only for exponents of one digit
    (16, 1, "1e011", False),
    # At least 7 digits: 1,000,000 and up.
    (16, 7, "1e6", True),
    (16, 7, "10e5", True),
    (16, 7, "1000e3", True),
    (16, 7, "1.5e6", True),
    (16, 7, "9e5", False),
    (16, 7, "1e5", False),
    (16, 7, "9.99e5", False),
    (16, 7, "99.99e4", False),  # 999,900
    (16, 7, "999.9e3", False),
    (16, 7, "9999e2", False),
]


@pytest.mark.parametrize(("digits", "least", "text", "whole"), SCIENTIFIC)
def test_a_whole_number_in_scientific_notation(digits: int, least: int, text: str, whole: bool) -> None:
    assert bool(re.fullmatch(_scientific(digits, least), text)) is whole


@pytest.mark.parametrize(("gpus", "label"), [(1, "1 GPU"), (2, "2 GPUs"), (8, "8 GPUs"), (1024, "1,024 GPUs")])
def test_gpus_label(gpus: int, label: str) -> None:
    assert gpus_label(gpus) == label


def test_small_figures_edge_cases() -> None:
    assert per_weight(0) == "0.00"  # a card that keeps nothing of a band
    assert percent(Fraction(1234, 1000)) == "123%"  # 123.4 %: three significant figures, no decimal
    assert ByteUnit.GIB.show(2**30, 0) == "1 GiB"  # one unit exactly is not below one unit


def test_a_count_that_does_not_read_says_what_would() -> None:
    with pytest.raises(ValueError, match=r"^a number of weights should look like 7\.5B, 7\.5e9 or 7500000000$"):
        parse_count("7.5 billion")


def test_the_grammars_parts_start_at_one_digit() -> None:
    # COUNT_PATTERN is built with the default least: a single-digit count reads, in both notations.
    assert re.fullmatch(_whole(16), "7")
    assert re.fullmatch(_scientific(16), "7e0")


def test_a_memory_size_that_does_not_read_says_what_would() -> None:
    with pytest.raises(ValueError, match=r"^a memory size should look like 80GB, 80GiB or 85899345920$"):
        parse_bytes("lots")
    assert ambiguity("80", show_input=False) == (
        "a size with no unit counts bytes, and a card has billions; write GB (10⁹ bytes) or GiB (2³⁰ bytes)"
    )


def test_a_figure_that_rounds_to_nothing_has_no_sign() -> None:
    assert per_weight(Fraction(-1, 1000)) == "0.00"  # not "-0.00"


@pytest.mark.parametrize(
    ("text", "factor", "shown"),
    [("1", Fraction(1), "1"), ("1.25", Fraction(5, 4), "1.25"), (".5", Fraction(1, 2), "0.5"), (" 100 ", 100, "100")],
)
def test_a_capacity_factor_is_read_exactly_and_shown_as_typed(text: str, factor: Fraction, shown: str) -> None:
    assert parse_factor(text) == factor
    assert factor_text(parse_factor(text)) == shown


@pytest.mark.parametrize("text", ["0", "0.0", "-1", "1e2", "1,5", "", "1.", "1234", "1.\u0662\u0665"])
def test_a_capacity_factor_is_above_0_and_decimal(text: str) -> None:
    with pytest.raises(ValueError, match="a factor should look like"):
        parse_factor(text)
