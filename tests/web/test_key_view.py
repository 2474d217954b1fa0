"""The key beside the cards names what the view draws, and nothing else (app/web/key_view.py)."""

from __future__ import annotations

import pytest
from bs4 import Tag
from fastapi.testclient import TestClient

from tests.conftest import dom, one

OFFLOAD = "model=llama-3-70b&offload=optimizer&capacity=80GB&host_memory=2TB"

# Each row, by hand from what the view draws: at rest a cell is filled or a gap, and the key says what a
# switch's ring is (shown on the projector and in an embed with the switcher); a step adds striped
# (gathered), barred (sent) and the phase's ring; an offloaded stage rings what sits in the host. The
# page's bar lines: the bar on one scale, the card's line where one is given, then each thing the bar
# draws beyond the bands (what is in hand, stacked after the state); an embed's compact key says the
# scale and the line in one phrase ("Bar").
CASES = [
    ("/?stage=dp", False, ["Filled", "Dashed", "Ringed"], ["Bar"]),
    (
        "/?stage=zero3&theme=projector",
        False,
        ["Filled", "Dashed", "Ringed"],
        ["Bar", "Grey", "Dark amber"],
    ),
    (
        "/?stage=zero3&phase=9",
        False,
        ["Filled", "Striped", "Barred", "Dashed", "Ringed"],
        ["Bar", "Grey", "Dark amber", "Pale"],
    ),
    (
        f"/?stage=zero3&{OFFLOAD}",
        False,
        ["Filled", "Dashed", "Dotted", "Ringed"],
        ["Bar", "Line", "Grey", "Dark amber", "Violet"],
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
    lines = key.select("ul.key li")
    assert len(key.select("ul.key li .swatch")) == len(lines) - (1 if compact else 0)


@pytest.mark.parametrize(
    ("path", "scale"),
    [
        ("/embed?stage=zero1", "Bar: at rest, one scale for all four"),
        (
            f"/embed?stage=zero3&{OFFLOAD}",
            "Bar: at rest, then in hand, one scale for all four; the line, the card's size",
        ),
    ],
)
def test_the_compact_key_says_what_the_bar_is_drawn_to(client: TestClient, path: str, scale: str) -> None:
    assert one(dom(client.get(path).text), ".legend li.bar-scale").get_text() == scale


def _words(tag: Tag) -> int:
    """Words as a reader counts them: runs with a letter (not "·", ":" or the "2 : 2" of a ratio)."""
    return sum(any(ch.isalpha() for ch in word) for word in tag.get_text(" ").split())


@pytest.mark.parametrize("stage", ["dp", "zero1", "zero2", "zero3"])
@pytest.mark.parametrize("extra", ["", "&theme=projector", f"&{OFFLOAD}"])
def test_the_key_at_rest_reads_in_sixty_words_with_more_one_click_away(
    client: TestClient, stage: str, extra: str
) -> None:
    key = one(dom(client.get(f"/?stage={stage}{extra}").text), ".legend")
    more = one(key, "details.key-more")
    # The ring's entry is the projector's (app.css hides it elsewhere: the note under the cards says it).
    hidden = [] if "projector" in extra else key.select(".ring-entry")
    shown = _words(key) - _words(more) + _words(one(more, "summary")) - sum(_words(h) for h in hidden)
    assert shown <= 60
    # The longer words are one click away: each band's description, and that the bar has one scale.
    said = more.get_text(" ")
    assert "used by the forward and backward passes" in said
    assert "one scale for the four arrangements" in said
    assert "The longest bar holds the most." in said


# The new recipes' key, as their declarations say it: a band's bytes a weight to three figures where they
# are a fraction (8-bit Adam's 2 + 2 * 4/256 = 2.03125; NF4's 2113/4096 = 0.515869...), whole ones as
# they are, and no line for a band not kept (QLoRA's master copy).
@pytest.mark.parametrize(
    ("recipe", "bands"),
    [
        (
            "adam-8bit",
            [
                "Weights · bf16, 2 B",
                "Gradients · bf16, 2 B",
                "Master copy · fp32, 4 B",
                "Adam moments · int8 ×2, 2.03 B",
            ],
        ),
        ("qlora-nf4", ["Weights · nf4, 0.516 B", "Gradients · bf16, 2 B", "Adam moments · fp32 ×2, 8 B"]),
        (
            "fp8-adam",
            ["Weights · bf16, 2 B", "Gradients · bf16, 2 B", "Master copy · fp32, 4 B", "Adam moments · fp32 ×2, 8 B"],
        ),
    ],
)
def test_the_key_says_a_recipes_fraction_of_a_byte(client: TestClient, recipe: str, bands: list[str]) -> None:
    key = one(dom(client.get(f"/?recipe={recipe}").text), ".legend")
    assert [li.get_text(" ", strip=True) for li in key.select("ul.key.bands li")] == bands


@pytest.mark.parametrize(
    ("recipe", "said"),
    [
        ("fp8-adam", "so the state is mixed-precision Adam's 16 B a weight"),
        ("qlora-nf4", "as if NF4 weights could train"),
        ("qlora-nf4&model=llama-3-8b&lora_rank=16", "1.48 B an adapter weight left out"),
        ("adam-8bit", None),
    ],
)
def test_the_page_says_what_a_recipe_saves_from_its_declaration(
    client: TestClient, recipe: str, said: str | None
) -> None:
    notes = [li.get_text() for li in dom(client.get(f"/?recipe={recipe}").text).select("ul.notes li")]
    assert [note for note in notes if said and said in note] == ([notes[0]] if said else [])
    assert len(notes) == (1 if said else 0)


def test_a_mixture_of_experts_part_filled_is_its_share_not_a_tensor_slice(client: TestClient) -> None:
    # DeepSeek-V3 on 16 stages with tp = 1: a part filled cell is a stage's blocks of a shared column (61 blocks
    # over 8 columns and 16 stages) or a rank's 4 of an experts' column's 32, never a tensor slice.
    path = "/?model=deepseek-v3&gpus=2048&nodes=256&pp=16&ep=64&stage=zero1"
    key = one(dom(client.get(path).text), ".legend")
    names = [" ".join(li.get_text(" ").split()) for li in key.select("ul.states li")]
    assert "Part filled : its share stored here" in names
    assert not any("tensor slice" in name for name in names)
