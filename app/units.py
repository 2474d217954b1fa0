"""Printing byte counts the way the seed text does."""

from __future__ import annotations

from fractions import Fraction

GIB = 2**30


def gib(nbytes: Fraction | int) -> str:
    """Bytes as GiB with one decimal and the unit, e.g. '153.7 GiB'."""
    return f"{float(Fraction(nbytes) / GIB):,.1f} GiB"


def per_weight(nbytes: Fraction | int) -> str:
    """Bytes per weight with two decimals, e.g. '5.50'."""
    return f"{float(nbytes):.2f}"
