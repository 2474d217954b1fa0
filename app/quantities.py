"""Reading weight counts and byte sizes the way people write them, and printing bytes in a unit.

'7.5B', '7.5e9' and '7,500,000,000' are the same count; '80GB' is 80×10⁹ bytes and '80GiB' is
80×2³⁰. Decimal arithmetic keeps '7.5B' exact.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from fractions import Fraction

_NUMBER = re.compile(r"^\s*(?P<number>[0-9][0-9_,]*(?:\.[0-9]+)?(?:e[+-]?[0-9]{1,2})?)\s*(?P<unit>[a-z]*)\s*$", re.I)

_COUNT_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "g": 10**9, "t": 10**12}
_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}


class ByteUnit(StrEnum):
    """How bytes are printed: GiB (2³⁰, as the seed text) or GB (10⁹, as the ZeRO paper)."""

    GIB = "GiB"
    GB = "GB"

    @property
    def size(self) -> int:
        """Bytes in one unit."""
        return 2**30 if self is ByteUnit.GIB else 10**9

    def show(self, nbytes: Fraction | int, decimals: int = 1) -> str:
        """E.g. '153.7 GiB'."""
        return f"{float(Fraction(nbytes) / self.size):,.{decimals}f} {self.value}"


_MAX_LENGTH = 40


def _parse(text: str, units: dict[str, int], what: str, examples: str) -> int:
    # Bounded length and exponent: a 10,000-digit number is no one's model size, only a slow request.
    match = _NUMBER.match(text) if len(text) <= _MAX_LENGTH else None
    unit = match.group("unit").lower() if match else ""
    if not match or unit not in units:
        raise ValueError(f"{what} should look like {examples}")
    try:
        value = Decimal(match.group("number").replace(",", "").replace("_", "")) * units[unit]
    except (InvalidOperation, ArithmeticError):
        raise ValueError(f"{what} should look like {examples}") from None
    if value != value.to_integral_value():
        raise ValueError(f"{what} must come to a whole number")
    return int(value)


def parse_count(text: str) -> int:
    """A weight count: '7.5B', '7.5e9', '7500000000', '350M'."""
    return _parse(text, _COUNT_SUFFIXES, "a number of weights", "7.5B, 7.5e9 or 7500000000")


def parse_bytes(text: str) -> int:
    """A memory size: '80GB', '80GiB', '24 GiB', or plain bytes."""
    return _parse(text, _BYTE_UNITS, "a memory size", "80GB, 80GiB or 85899345920")
