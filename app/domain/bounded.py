"""Numbers read from text within bounds, checked on the text before any number is built.

Python builds whatever a string asks for. `Fraction("1e-9999999")` is a ten-million-digit integer:
seconds of CPU, on the event loop, while every other request waits. `int()` of more than 4,300 digits
raises ValueError (`sys.int_max_str_digits`), a 500 if nothing expects it. So a number typed by a person
is first held to a short grammar, by its length and its exponent's, and only then turned into a number.

The query parameters have grammars of their own (`units.COUNT_PATTERN` and the rest, checked by the
web's query model), and a pasted config is parsed by pydantic's JSON reader, which refuses integers of
thousands of digits; this module reads the rest: a vote's number or choice, a form's card.
"""

from __future__ import annotations

import re
from fractions import Fraction

MAX_CHARS = 32
"""The longest number read, in characters: the questions ask for GiB or GB per card, which a person writes
in under a dozen ("1,234.5", "1.5e3"); 32 leaves room for every digit of a float (17) and more, and
is a length no arithmetic on it can make costly."""
MAX_EXPONENT = 30
"""The largest exponent read, either sign: the answers run from thousandths to 10^15, so ±30 covers any
way of writing them, and Fraction then builds integers of some 60 digits at most, in microseconds."""

# ASCII digits only ([0-9], not \d, which is any script's), one point, an exponent of a few digits.
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE](?P<exponent>[+-]?[0-9]+))?")


def read_whole(text: str, most: int) -> int | None:
    """`text` as a whole number from 0 to `most`: at most MAX_CHARS ASCII digits; None for anything else."""
    if len(text) > MAX_CHARS or not (text.isascii() and text.isdigit()):
        return None
    value = int(text)
    return value if value <= most else None


_THOUSANDS = re.compile(r"[+-]?[1-9][0-9]{0,2}(?:[,.][0-9]{3})+")
"""Digits grouped in threes after a first group of one to three: 1,234 or 1.234.567 (never 0,125)."""


def _point(mantissa: str) -> str:
    """`mantissa` with one decimal point and no grouping: as a person in any country writes it.

    With both marks, the last is the decimal one (1,234.5 and 1.234,5 are 1234.5). With commas alone,
    they group thousands where they fall every three digits after a first group (1,234 and 1,234,567),
    else one comma is the decimal mark, as a phone's keypad in most of Europe writes it (12,5 and 0,125).
    """
    if "," in mantissa and "." in mantissa:
        mark = max(mantissa.rfind(","), mantissa.rfind("."))
        whole, fraction = mantissa[:mark], mantissa[mark + 1 :]
        grouped = _THOUSANDS.fullmatch(whole) or (whole.lstrip("+-").isdigit() and len(whole.lstrip("+-")) <= 3)
        return whole.replace(",", "").replace(".", "") + "." + fraction if grouped else "?"
    if "," in mantissa:
        if _THOUSANDS.fullmatch(mantissa):
            return mantissa.replace(",", "")
        return mantissa.replace(",", ".") if mantissa.count(",") == 1 else "?"
    return mantissa


def read_decimal(text: str) -> Fraction | None:
    """`text` as an exact number, plain (12.5, 1,234.5, 12,5) or scientific (1.5e3); None for anything else.

    Within MAX_CHARS characters, spaces around it and marks included (as typed), and an exponent of at
    most MAX_EXPONENT either way. A comma is read as a person meant it (`_point`): 12,5 is 12.5, not 125.
    """
    text = text.strip()
    if len(text) > MAX_CHARS:
        return None
    mantissa, e, exponent = text.replace("E", "e").partition("e")
    written = _point(mantissa) + e + exponent
    match = _DECIMAL.fullmatch(written)
    if match is None or abs(int(match["exponent"] or 0)) > MAX_EXPONENT:
        return None
    return Fraction(written)
