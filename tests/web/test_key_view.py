"""The key beside the cards names what the view draws, and nothing else (app/web/key_view.py)."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.conftest import dom, one

OFFLOAD = "model=llama-3-70b&offload=optimizer&capacity=80GB&host_memory=2TB"

# Each row, by hand from what the view draws: at rest a cell is filled or a gap; a step adds striped
# (gathered), barred (sent) and the phase's ring; the projector and an embed with the switcher say what
# a switch's ring is; an offloaded stage rings what sits in the host. The page's bar lines name each
# thing a bar draws (a tick where it runs past the state at rest, a break where that part is shortened);
# an embed's compact key says the tick, break and capacity line in one phrase ("Bar").
CASES = [
    ("/?stage=dp", False, ["Filled", "Dashed outline"], []),
    (
        "/?stage=zero3&theme=projector",
        False,
        ["Filled", "Dashed outline", "Ringed"],
        ["Bar, grey", "Bar, dark amber", "Tick", "Break"],
    ),
    (
        "/?stage=zero3&phase=9",
        False,
        ["Filled", "Striped", "Barred", "Dashed outline", "Ringed"],
        ["Bar, grey", "Bar, dark amber", "Bar, pale", "Tick", "Break"],
    ),
    (
        f"/?stage=zero3&{OFFLOAD}",
        False,
        ["Filled", "Dashed outline", "Dotted ring"],
        ["Bar, grey", "Bar, dark amber", "Bar, violet", "Tick"],
    ),
    ("/embed?stage=zero1", True, ["Filled", "Dashed", "Ringed"], ["Bar"]),
    (
        "/embed?stage=zero3&controls=step&phase=9",
        True,
        ["Filled", "Striped", "Barred", "Dashed", "Ringed"],
        ["Bar", "Bar, grey", "Bar, dark amber", "Bar, pale"],
    ),
    (
        f"/embed?stage=zero3&{OFFLOAD}",
        True,
        ["Filled", "Dashed", "Dotted ring", "Ringed"],
        ["Bar", "Bar, grey", "Bar, dark amber", "Bar, violet"],
    ),
]


@pytest.mark.parametrize(("path", "compact", "states", "bars"), CASES)
def test_the_key_names_what_the_view_draws(
    client: TestClient, path: str, compact: bool, states: list[str], bars: list[str]
) -> None:
    key = one(dom(client.get(path).text), ".legend")
    assert ("compact-key" in key["class"]) is compact
    assert [strong.get_text() for strong in key.select("ul.states li strong")] == states
    assert [strong.get_text() for strong in key.select("ul.bar-key li strong")] == bars
    # One swatch a line, but the compact key's line on the bar's scale, which has none.
    lines = key.select("ul li")
    assert len(key.select("ul li .swatch")) == len(lines) - (1 if compact else 0)


@pytest.mark.parametrize(
    ("path", "scale"),
    [
        ("/embed?stage=zero1", "Bar: the card's memory"),
        (f"/embed?stage=zero3&{OFFLOAD}", "Bar: to the peak, the tick at rest; the line, the card's size"),
    ],
)
def test_the_compact_key_says_what_the_bar_is_drawn_to(client: TestClient, path: str, scale: str) -> None:
    assert one(dom(client.get(path).text), ".legend li.bar-scale").get_text() == scale
