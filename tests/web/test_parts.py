"""app/web/parts.py: a part shown or not as a tuple the template loops over, and a verdict with its class."""

from __future__ import annotations

import pytest

from app.web.parts import Verdict, shown, verdicts


@pytest.mark.parametrize(
    ("part", "looped"),
    [(None, ()), ("", ()), ((), ()), ("Peak 69.8 GiB", ("Peak 69.8 GiB",)), (("a",), (("a",),)), (0, ())],
)
def test_an_absent_part_is_an_empty_tuple(part: object, looped: tuple[object, ...]) -> None:
    assert shown(part) == looped


@pytest.mark.parametrize(
    ("words", "fits", "drawn"),
    [
        ("fits, 10.2 GiB left.", True, (Verdict("fits, 10.2 GiB left.", "verdict fits"),)),
        ("over by 3.1 GiB.", False, (Verdict("over by 3.1 GiB.", "verdict over"),)),
        ("", None, ()),
    ],
)
def test_a_verdict_carries_its_class(words: str, fits: bool | None, drawn: tuple[Verdict, ...]) -> None:
    assert verdicts(words, fits) == drawn
