"""Reading weight counts and byte sizes the way people write them, and printing them back.

'7.5B', '7.5e9', '7.5e+09', '7,500,000,000' and '7500000000' are the same count; '80GB' is
80×10⁹ bytes and '80GiB' is 80×2³⁰. The grammar is one regular expression per kind, shared with
the API's OpenAPI schema, and every string it matches is a valid, positive, whole amount: a count
below 10¹⁶, a size below 10,000 TiB. What the schema promises, the parser keeps. Zero has a grammar
of its own (`ZERO_COUNT_PATTERN`, `ZERO_BYTES_PATTERN`), read only where a field takes it (`zero=True`):
an overhead's setting of 0 leaves it out, and DeepSpeed takes a bucket of 0 elements.

The patterns use only syntax Python's `re` and the Rust `regex` crate (pydantic-core) read alike:
no lookaround, no backreferences, plain spaces, and bounded repetition, so no match is slow.
"""

from __future__ import annotations

import re
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction

# Counts stay below 10¹⁶ (COUNT_DIGITS digits); sizes written as plain bytes do too.
COUNT_DIGITS = 16
LARGEST_COUNT = 10**COUNT_DIGITS - 1
"""The largest weight count the form and the API read."""
# The largest size the grammar admits is 9,999.999 TiB.
MAX_BYTES = 10**4 * 2**40

# A separator between groups of exactly three digits: '1,000,000' or '1_000_000', never mixed.
_SEPARATORS = (",", "_")

# A mantissa that is never zero: 1-9999 (or 1,000-9,999) with up to 3 decimals, or 0.xyz
# ending in a non-zero digit. With a K suffix three decimals still make a whole count.
_MANTISSA = r"(?:(?:[1-9][0-9]{0,3}|[1-9][,_][0-9]{3})(?:\.[0-9]{1,3})?|0\.[0-9]{0,2}[1-9])"


def _digits(most: int, least: int | None = None) -> str:
    """From `least` (default: exactly `most`) to `most` decimal digits, written as briefly as possible."""
    least = most if least is None else least
    if most == 0:
        return ""
    if least == most:
        return "[0-9]" if most == 1 else f"[0-9]{{{most}}}"
    return f"[0-9]{{{least},{most}}}"


def _whole(digits: int, least: int = 1) -> str:
    """A positive integer of `least` to `digits` digits, plain or grouped by threes with one separator."""
    forms = [rf"[1-9][0-9]{{{least - 1},{digits - 1}}}"]
    for sep in _SEPARATORS:
        # The leading group has 1-3 digits; the total must stay within `digits`.
        for lead in range(1, 4):
            most = (digits - lead) // 3
            fewest = max(1, -(-(least - lead) // 3))
            if most >= fewest:
                forms.append(rf"[1-9]{_digits(lead - 1)}(?:{sep}[0-9]{{3}}){{{fewest},{most}}}")
    return "(?:" + "|".join(forms) + ")"


def _scientific(digits: int, least: int = 1) -> str:
    """Mantissa×10^exponent forms that are always whole, below 10^digits and of at least `least` digits.

    A branch per run of exponents: never more significant decimals than the exponent (so the
    value is whole), and never more integer digits than the exponent leaves room for (so it is
    in range). Up to six decimals in all, trailing zeros included, so what Python's '{:e}'
    prints ('1.230000e+02') reads too. The exponent may carry a '+' and a leading zero ('e+09').
    """
    branches: dict[tuple[int, int, int], list[str]] = {}
    for exponent in range(digits):
        integer_digits = min(4, digits - exponent)
        if exponent + integer_digits < least:
            continue  # too small to write with this exponent
        decimals = min(exponent, 6)
        written = f"0?{exponent}" if exponent < 10 else str(exponent)
        fewest = max(1, least - exponent)
        branches.setdefault((fewest, integer_digits, decimals), []).append(written)
    forms = []
    for (fewest, integer_digits, decimals), exponents in branches.items():
        if decimals == 0:
            fraction = r"\.0{1,6}"
        elif decimals == 6:
            fraction = r"\.[0-9]{1,6}"
        else:
            # Significant decimals, then only zeros up to six in all.
            fraction = rf"\.{_digits(decimals, 1)}0{{0,{6 - decimals}}}"
        power = exponents[0] if len(exponents) == 1 else "(?:" + "|".join(exponents) + ")"
        # '+' or a space after the e: a '+' typed into an address arrives as a space ('7.5e+09').
        forms.append(rf"[1-9]{_digits(integer_digits - 1, fewest - 1)}(?:{fraction})?[eE][+ ]?{power}")
    return "(?:" + "|".join(forms) + ")"


# A few plain spaces only: regex engines disagree on what else \s matches (Python counts \x1f),
# and a bound keeps every match short.
_SP = " {0,3}"
_NUMBER = f"(?:{_whole(COUNT_DIGITS)}|{_scientific(COUNT_DIGITS)})"
# Bytes with no unit: at least a million (seven digits). A card has billions, and a bare '80' was
# meant as GB or GiB; the grammar refuses it and `ambiguity` says why.
SIZE_LEAST_DIGITS = 7
_BYTE_NUMBER = f"(?:{_whole(COUNT_DIGITS, SIZE_LEAST_DIGITS)}|{_scientific(COUNT_DIGITS, SIZE_LEAST_DIGITS)})"
COUNT_PATTERN = rf"^{_SP}(?:{_NUMBER}|{_MANTISSA}{_SP}[KMBTkmbt]){_SP}$"
BYTES_PATTERN = rf"^{_SP}(?:{_BYTE_NUMBER}|{_MANTISSA}{_SP}(?:[GgTt][Bb]|[GgTt][Ii][Bb])){_SP}$"

# Zero, in any unit: 0 of anything is 0, so a bare 0 is no ambiguity, unlike a bare 80. Only "0": no
# sign, no decimals, no exponent, which would only be other ways to write the same nothing.
ZERO_COUNT_PATTERN = rf"^{_SP}0{_SP}[KMBTkmbt]?{_SP}$"
ZERO_BYTES_PATTERN = rf"^{_SP}0{_SP}(?:[GgTt][Bb]|[GgTt][Ii][Bb])?{_SP}$"

_COUNT = re.compile(COUNT_PATTERN)
_BYTES = re.compile(BYTES_PATTERN)
_ZERO_COUNT = re.compile(ZERO_COUNT_PATTERN)
_ZERO_BYTES = re.compile(ZERO_BYTES_PATTERN)
_PARTS = re.compile(r"^ *([0-9.,_]+(?:[eE][+ ]?[0-9]+)?) *([A-Za-z]*) *$")
# A size whose unit is a bare G or T: GB or GiB? The grammar refuses it; this says why.
_AMBIGUOUS = re.compile(rf"^{_SP}({_MANTISSA}){_SP}([GgTt]){_SP}$")
# A size with no unit at all, too small to be a card's bytes: GB or GiB were meant.
_UNITLESS = re.compile(rf"^{_SP}({_MANTISSA}){_SP}$")

_COUNT_SUFFIXES = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}
_BYTE_UNITS = {"": 1, "gb": 10**9, "tb": 10**12, "gib": 2**30, "tib": 2**40}
_DECIMAL_POWER = {"G": "10⁹", "T": "10¹²"}
_BINARY_POWER = {"G": "2³⁰", "T": "2⁴⁰"}


def _decimals_for(value: Fraction, figures: int, at_least: int) -> int:
    """Decimals that show `figures` significant figures of a positive value, and no fewer than `at_least`."""
    return _decimals_of(value.numerator, value.denominator, figures, at_least)


def _decimals_of(numerator: int, denominator: int, figures: int, at_least: int) -> int:
    # On the numerator and denominator: whole-number arithmetic, several times faster than Fraction's,
    # and a page formats a few dozen figures.
    top, bottom = abs(numerator), denominator * 10 ** (figures - 1)
    decimals = at_least
    while top * 10**decimals < bottom:
        decimals += 1
    return decimals


def _fixed(value: Fraction, decimals: int) -> str:
    """A value with exactly `decimals` decimals, rounded half up on the exact value (no float)."""
    return _fixed_of(value.numerator, value.denominator, decimals)


def _fixed_of(numerator: int, denominator: int, decimals: int) -> str:
    # floor(|n|/d * 10^decimals + 1/2), in whole numbers; the denominator is positive.
    scaled = abs(numerator) * 10**decimals
    digits = str((2 * scaled + denominator) // (2 * denominator))
    sign = "-" if numerator < 0 and digits.strip("0") else ""
    if decimals == 0:
        return f"{sign}{int(digits):,}"
    digits = digits.rjust(decimals + 1, "0")
    return f"{sign}{int(digits[:-decimals]):,}.{digits[-decimals:]}"


def percent(part: Fraction) -> str:
    """A share as a percentage to three significant figures, rounded half up: '12.5%', '34.4%', '0.0977%'."""
    value = part * 100
    if value == 0:
        return "0%"
    shown = _fixed(value, _decimals_for(value, 3, 0))
    if "." in shown:
        shown = shown.rstrip("0").rstrip(".")
    return f"{shown}%"


class ByteUnit(StrEnum):
    """How bytes are printed: GiB (2³⁰, as the seed text) or GB (10⁹, as the ZeRO paper)."""

    GIB = "GiB"
    GB = "GB"

    @property
    def size(self) -> int:
        """Bytes in one unit."""
        return 2**30 if self is ByteUnit.GIB else 10**9

    def show(self, nbytes: Fraction | int, decimals: int = 1) -> str:
        """E.g. '153.7 GiB'; below one unit two significant figures ('0.0073 GiB'), and '0 GiB' for nothing."""
        # nbytes / size as a whole-number numerator and denominator: no Fraction built (see _fixed_of).
        numerator, denominator = nbytes.numerator, nbytes.denominator * self.size
        if numerator == 0:
            return f"0 {self.value}"
        # Below one unit a fixed number of decimals would print 0.0 for a layer or a sliver.
        if abs(numerator) < denominator:
            decimals = _decimals_of(numerator, denominator, 2, decimals)
        return f"{_fixed_of(numerator, denominator, decimals)} {self.value}"


def _amount(text: str, grammar: re.Pattern[str], units: dict[str, int], what: str, examples: str) -> Fraction:
    # fullmatch: Python's $ also matches before a final newline, Rust's (pydantic's) does not.
    parts = _PARTS.fullmatch(text) if grammar.fullmatch(text) else None
    if parts is None:
        raise ValueError(f"{what} should look like {examples}")
    number, unit = parts.groups()
    return Fraction(Decimal(number.replace(",", "").replace("_", "").replace(" ", ""))) * units[unit.lower()]


def parse_count(text: str, *, zero: bool = False) -> int:
    """A weight count: '7.5B', '7.5e9', '7.5e+09', '7,500,000,000', '7500000000', '350M'; with `zero`, '0' too."""
    if zero and _ZERO_COUNT.fullmatch(text):
        return 0
    count = _amount(text, _COUNT, _COUNT_SUFFIXES, "a number of weights", "7.5B, 7.5e9 or 7500000000")
    # The grammar admits only whole counts; this keeps a future change to it honest.
    if count.denominator != 1:
        raise ValueError(f"a number of weights should be whole, not {float(count)}")
    return int(count)


FACTOR_PATTERN = r"^\s*(?:0*[1-9][0-9]{0,2}(?:\.[0-9]{1,4})?|0*\.[0-9]{0,3}[1-9][0-9]{0,3})\s*$"
"""A factor above 0 with at most three digits before the point: 1, 1.25, 0.5, .5 (ASCII digits, as the other
grammars; no look-ahead: pydantic's regular expressions have none)."""


def parse_factor(text: str, *, zero: bool = False) -> Fraction:
    """A factor above 0, exactly: '1.25' is 5/4 (`zero` is for the readers' common signature: 0 is no factor)."""
    if not re.fullmatch(FACTOR_PATTERN, text):
        raise ValueError("a factor should look like 1, 1.25 or 2")
    return Fraction(Decimal(text.strip()))


def factor_text(factor: Fraction) -> str:
    """A factor as typed, exactly: 5/4 is '1.25' (one `parse_factor` read: a decimal that ends)."""
    return format((Decimal(factor.numerator) / Decimal(factor.denominator)).normalize(), "f")


def ambiguity(text: str, *, show_input: bool) -> str | None:
    """Why a size with a bare G or T, or with no unit and too small for bytes, cannot be read.

    With `show_input` the reading repeats the number, e.g. '“80G” could be 80 GB (80×10⁹ bytes)
    or 80 GiB (80×2³⁰ bytes); write 80GB or 80GiB'; without it only the unit is named, for
    answers that must not echo what was sent. None when the text is neither.
    """
    if bare := _UNITLESS.fullmatch(text):
        number = bare.group(1)
        if not show_input:
            return "a size with no unit counts bytes, and a card has billions; write GB (10⁹ bytes) or GiB (2³⁰ bytes)"
        return (
            f"“{text.strip()}” has no unit, so it would be {number} bytes; write {number}GB "
            f"({number}×10⁹ bytes) or {number}GiB ({number}×2³⁰ bytes)"
        )
    match = _AMBIGUOUS.fullmatch(text)
    if match is None:
        return None
    number, letter = match.group(1), match.group(2).upper()
    decimal, binary = _DECIMAL_POWER[letter], _BINARY_POWER[letter]
    if not show_input:
        return (
            f"a bare {letter} could mean {letter}B ({decimal} bytes) or {letter}iB ({binary} bytes); "
            "write the unit in full"
        )
    return (
        f"“{text.strip()}” could be {number} {letter}B ({number}×{decimal} bytes) or {number} {letter}iB "
        f"({number}×{binary} bytes); write {number}{letter}B or {number}{letter}iB"
    )


def parse_bytes(text: str, *, zero: bool = False) -> int:
    """A memory size: '80GB', '80GiB', '1.5TB', '32e9', or plain bytes; '80G' is refused as ambiguous.

    With `zero`, '0' too, with a unit or without ('0GB').
    """
    if zero and _ZERO_BYTES.fullmatch(text):
        return 0
    reading = ambiguity(text, show_input=True)
    if reading is not None:
        raise ValueError(f"a memory size is ambiguous: {reading}")
    # Whole bytes: 1.001 GiB is not a whole number of bytes, and no card has a fraction of one.
    return int(_amount(text, _BYTES, _BYTE_UNITS, "a memory size", "80GB, 80GiB or 85899345920"))


def count_label(n: int) -> str:
    """A weight count the way people say it, to three significant figures: 30B, 7.5B, 8.03B, 350M, 2,750T.

    It rounds first and picks the suffix after, so 999,500,000 is '1B', never '1e+03M'; past
    999T the T stays and the thousands are separated.
    """
    if n < 1000:
        return str(n)
    scale = 10 ** (len(str(n)) - 3)
    rounded = (n + scale // 2) // scale * scale
    size, suffix = next((s, x) for s, x in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")) if rounded >= s)
    whole, rest = divmod(rounded, size)
    fraction = f"{rest:0{len(str(size)) - 1}d}".rstrip("0")
    return f"{whole:,}" + (f".{fraction}" if fraction else "") + suffix


def per_weight(nbytes: Fraction | int) -> str:
    """Bytes per weight: two decimals from 1 up ('5.50'), three significant figures below ('0.0156').

    Enough figures that the value times the weight count is within half a percent of the bytes
    shown beside it, and never '0.00' for a card that holds something.
    """
    value = Fraction(nbytes)
    if value <= 0:
        return _fixed(value, 2)
    shown = _fixed(value, _decimals_for(value, 3, 2))
    whole, _, decimals = shown.partition(".")
    # 0.250 reads as 0.25: trailing zeros past the second decimal add nothing.
    return f"{whole}.{decimals[:2]}{decimals[2:].rstrip('0')}"


def gpus_label(gpus: int) -> str:
    """'1 GPU', '8 GPUs', '1,024 GPUs'."""
    return f"{gpus:,} GPU{'' if gpus == 1 else 's'}"


def p_units(value: Fraction) -> str:
    """Traffic in units of P, without trailing zeros: '0.125P', '2P'."""
    return f"{float(value):.3f}".rstrip("0").rstrip(".") + "P"


def seconds_label(value: Fraction) -> str:
    """A time in seconds, to three significant figures: '0.303 s', '1.86 s', '42.1 ms', '12 s'."""
    if value == 0:
        return "0 s"
    if value < Fraction(1, 10):
        return f"{float(value * 1000):.3g} ms"
    return f"{float(value):.3g} s"
