"""Reading weight counts and byte sizes the way people write them, and printing bytes in a unit.

'7.5B', '7.5e9' and '7500000000' are the same count; '80GB' is 80×10⁹ bytes and '80GiB' is
80×2³⁰. The grammar is one regular expression per kind, shared with the API's OpenAPI schema,
and every string it matches is a valid, positive, whole amount below 10¹⁶: what the schema
promises, the parser keeps.
"""

from __future__ import annotations

import re
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction

# A mantissa that is never zero: 1-9999 with up to 3 decimals, or 0.xyz ending in a non-zero digit.
_MANTISSA = r"(?:[1-9][0-9]{0,3}(?:\.[0-9]{1,3})?|0\.[0-9]{0,2}[1-9])"
_WHOLE = r"[1-9][0-9]{0,15}"
# 7.5e9: at most six decimals and an exponent of at least 6, so the count is always whole.
_SCIENTIFIC = r"[1-9](?:\.[0-9]{1,6})?[eE](?:[6-9]|1[0-5])"

# A few plain spaces only: regex engines disagree on what else \s matches (Python counts \x1f),
# and a bound keeps every match short.
_SP = " {0,3}"
COUNT_PATTERN = rf"^{_SP}(?:{_WHOLE}|{_SCIENTIFIC}|{_MANTISSA}{_SP}[KMBTkmbt]){_SP}$"
BYTES_PATTERN = rf"^{_SP}(?:{_WHOLE}|{_MANTISSA}{_SP}(?:[GgTt][Bb]|[GgTt][Ii][Bb])){_SP}$"

_COUNT = re.compile(COUNT_PATTERN)
_BYTES = re.compile(BYTES_PATTERN)
_PARTS = re.compile(r"^ *([0-9.]+(?:[eE][0-9]+)?) *([A-Za-z]*) *$")

_COUNT_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
_BYTE_UNITS = {"": 1, "gb": 10**9, "tb": 10**12, "gib": 2**30, "tib": 2**40}


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


def _amount(text: str, grammar: re.Pattern[str], units: dict[str, int], what: str, examples: str) -> int:
    parts = _PARTS.match(text) if grammar.match(text) else None
    if parts is None:
        raise ValueError(f"{what} should look like {examples}")
    number, unit = parts.groups()
    # Whole bytes: 1.001 GiB is not a whole number of bytes, and no card has a fraction of one.
    return int(Decimal(number) * units[unit.lower()])


def parse_count(text: str) -> int:
    """A weight count: '7.5B', '7.5e9', '7500000000', '350M'."""
    return _amount(text, _COUNT, _COUNT_SUFFIXES, "a number of weights", "7.5B, 7.5e9 or 7500000000")


def parse_bytes(text: str) -> int:
    """A memory size: '80GB', '80GiB', '1.5TB', or plain bytes."""
    return _amount(text, _BYTES, _BYTE_UNITS, "a memory size", "80GB, 80GiB or 85899345920")


def per_weight(nbytes: Fraction | int) -> str:
    """Bytes per weight with two decimals, e.g. '5.50'."""
    return f"{float(nbytes):.2f}"
