from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.quantities import BYTES_PATTERN, COUNT_PATTERN, ByteUnit, parse_bytes, parse_count


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
    ],
)
def test_sizes_as_people_write_them(text: str, nbytes: int) -> None:
    assert parse_bytes(text) == nbytes


@pytest.mark.parametrize(
    "text", ["", "abc", "-3", "0", "0B", "0.0B", "7.5", "7.5 Q", "1e999", "7.5e3", "9" * 60, "7.5B weights", "0x10"]
)
def test_counts_that_are_not_counts(text: str) -> None:
    with pytest.raises(ValueError, match="number of weights"):
        parse_count(text)


@pytest.mark.parametrize("text", ["80 GHz", "eighty", "80 G B", "1e99999GB", "0GB", "80MB"])
def test_sizes_that_are_not_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="memory size"):
        parse_bytes(text)


@given(st.from_regex(COUNT_PATTERN))
def test_every_count_the_grammar_allows_is_a_positive_whole_number(text: str) -> None:
    assert 1 <= parse_count(text) < 10**16


@given(st.from_regex(BYTES_PATTERN))
def test_every_size_the_grammar_allows_is_at_least_a_byte(text: str) -> None:
    assert 1 <= parse_bytes(text) < 10**17


def test_units_print_with_their_name() -> None:
    assert ByteUnit.GIB.show(165 * 10**9) == "153.7 GiB"
    assert ByteUnit.GB.show(165 * 10**9) == "165.0 GB"
    assert ByteUnit.GB.show(Fraction(1_875_000_000)) == "1.9 GB"
