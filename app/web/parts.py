"""What the templates loop over instead of deciding: a part that may be absent, and a verdict's words and class.

A template formats and loops; the view decides. A part shown or not is a tuple of none or one, which
the template loops over (`shown`); a verdict carries its class ready made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


def shown(part: T | None) -> tuple[T, ...]:
    """The part as a tuple the template loops over: empty when it is absent (None, or blank, or empty)."""
    return (part,) if part else ()


@dataclass(frozen=True)
class Verdict:
    """Fits or over by, on the card given, with its class ("verdict fits", "verdict over")."""

    words: str
    css: str


def verdicts(words: str, fits: bool | None) -> tuple[Verdict, ...]:
    """The verdict to show, if there are words for one."""
    return shown(Verdict(words, f"verdict {'fits' if fits else 'over'}") if words else None)
