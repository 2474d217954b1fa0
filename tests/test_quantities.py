from __future__ import annotations

from fractions import Fraction

import pytest

from app.quantities import ByteUnit, parse_bytes, parse_count


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("7.5e9", 7_500_000_000),
        ("7500000000", 7_500_000_000),
        ("7.5B", 7_500_000_000),
        ("7.5b", 7_500_000_000),
        ("7,500,000,000", 7_500_000_000),
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
        ("141GB", 141 * 10**9),
        ("85899345920", 85_899_345_920),
        ("1.5TB", 1_500_000_000_000),
    ],
)
def test_sizes_as_people_write_them(text: str, nbytes: int) -> None:
    assert parse_bytes(text) == nbytes


@pytest.mark.parametrize("text", ["", "abc", "-3", "7.5", "7.5 Q", "1e999", "9" * 60, "7.5B weights", "0x10"])
def test_counts_that_are_not_counts(text: str) -> None:
    with pytest.raises(ValueError, match="number of weights"):
        parse_count(text)


@pytest.mark.parametrize("text", ["80 GHz", "eighty", "80 G B", "1e99999GB"])
def test_sizes_that_are_not_sizes(text: str) -> None:
    with pytest.raises(ValueError, match="memory size"):
        parse_bytes(text)


def test_units_print_with_their_name() -> None:
    assert ByteUnit.GIB.show(165 * 10**9) == "153.7 GiB"
    assert ByteUnit.GB.show(165 * 10**9) == "165.0 GB"
    assert ByteUnit.GB.show(Fraction(1_875_000_000)) == "1.9 GB"
