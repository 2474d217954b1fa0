"""app/web/bars.py: the memory bars under the cards, the note that says what they are, and the key."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.domain.stages import Stage
from tests.conftest import cell_facts, dom, one, text
from tests.web.helpers import run_page, stage_page


def test_legend_explains_bands_and_states_without_colour(client: TestClient) -> None:
    legend = one(stage_page(client, Stage.DP), ".legend")
    bands = [li.get_text(" ", strip=True) for li in legend.select("ul.bands li")]
    assert [b.split(" ·")[0] for b in bands] == ["Weights", "Gradients", "Master copy", "Adam moments"]
    assert "(2 : 2 : 4 : 8)" in text(legend, "p")
    states = [li.get_text(" ", strip=True) for li in legend.select("ul.states li")]
    assert states[0].startswith("Filled")
    assert states[1].startswith("Dashed outline")


def test_a_band_of_zero_bytes_disappears(client: TestClient) -> None:
    tree = run_page(client, "recipe=fp32-adam&stage=zero2")
    assert {cell_facts(c)["band"] for c in tree.select("#grid .cell")} == {"weights", "gradients", "moments"}
    assert [text(li, "strong") for li in tree.select(".legend ul.bands li")] == ["Weights", "Gradients", "Adam moments"]
    assert "(4 : 4 : 8)" in text(tree, ".legend p")


# Widths in percent of the bar, worked by hand; the bar runs to the stage's peak on one card.
_LLAMA_8B, _LLAMA_8B_EMBEDDING = 8_030_261_248, 128_256 * 4096


_BARS = [
    # ZeRO-1 adds nothing for a layer: the bar is its state at rest, 2 + 2 + 12/8 = 5.5 B/weight,
    # the master copy 0.5 of it. The 80 GiB card (86e9 B) is past the bar's end (44.2e9 B).
    (
        "model=llama-3-8b&gpus=8&capacity=80GiB&stage=zero1&batch=0",
        {"band-weights": 200 / 5.5, "band-gradients": 200 / 5.5, "band-master": 50 / 5.5, "band-moments": 100 / 5.5},
        None,
        False,
        None,
    ),
    # The lesson's 30B in 8 layers under ZeRO-3: 60e9 B at rest and one layer of 3.75e9 weights, 7.5e9 B
    # gathered and 7.5e9 B of gradients, a peak of 75e9 B. The layer (15e9) is under a quarter of the
    # peak, so the part at rest is shortened to 75: weights 75 × 7.5/60, moments 75 × 30/60; the layer
    # has the last 25, half of it each.
    (
        "stage=zero3",
        {
            "band-weights": 9.375,
            "band-gradients": 9.375,
            "band-master": 18.75,
            "band-moments": 37.5,
            "gathered": 12.5,
            "sent": 12.5,
        },
        75.0,
        True,
        None,
    ),
    # Llama 3 8B on 64 cards under ZeRO-3: 16/64 B × 8.03e9 = 2.0075e9 B at rest; its largest layer, the
    # embedding, 525.3e6 weights × 2 B gathered and × 2 B computed: 2.1013e9 B, to scale, over half the bar.
    # A 4 GiB card (4.295e9 B) is past the peak (4.1088e9 B).
    (
        "model=llama-3-8b&gpus=64&stage=zero3&capacity=4GiB&batch=0",
        {
            "band-weights": _LLAMA_8B * 2 / 64 / (_LLAMA_8B / 4 + _LLAMA_8B_EMBEDDING * 4) * 100,
            "gathered": _LLAMA_8B_EMBEDDING * 2 / (_LLAMA_8B / 4 + _LLAMA_8B_EMBEDDING * 4) * 100,
        },
        _LLAMA_8B / 4 / (_LLAMA_8B / 4 + _LLAMA_8B_EMBEDDING * 4) * 100,
        False,
        None,
    ),
    # Under data parallelism the same run does not fit: 16 B × 8.03e9 = 128.5e9 B against a 64 GiB card
    # (68.72e9 B), whose line is at 68.72 / 128.48 of the bar.
    (
        "model=llama-3-8b&capacity=64GiB&stage=dp&batch=0",
        {"band-master": 25.0},
        None,
        False,
        64 * 2**30 / (_LLAMA_8B * 16) * 100,
    ),
]


@pytest.mark.parametrize(("query", "widths", "rest_x", "broken", "capacity_x"), _BARS)
def test_each_card_has_a_bar_drawn_to_its_stages_peak(
    client: TestClient,
    query: str,
    widths: dict[str, float],
    rest_x: float | None,
    broken: bool,
    capacity_x: float | None,
) -> None:
    tree = run_page(client, query)
    bars = tree.select("#grid .card .bar svg")
    assert len(bars) == 8
    bar = bars[0]
    drawn = {str(rect["class"][0]): float(str(rect["width"])) for rect in bar.select("rect")}
    assert sum(drawn.values()) == pytest.approx(100, abs=1e-3)
    for css, width in widths.items():
        assert drawn[css] == pytest.approx(width, abs=1e-3), css
    rest = bar.select("line.rest-mark")
    assert (float(str(rest[0]["x1"])) if rest else None) == pytest.approx(rest_x, abs=1e-3)
    assert bool(bar.select("path.break")) is broken
    line = bar.select("line.capacity")
    assert (float(str(line[0]["x1"])) if line else None) == pytest.approx(capacity_x, abs=1e-3)
    note = text(tree, "#grid .grid-note")
    assert ("shortened behind the break" in note) is broken
    if "capacity" in query:
        assert ("is the line" in note) is (capacity_x is not None)


@pytest.mark.parametrize(("gpus", "said"), [("1", "its memory, 447.0 GiB,"), ("2", "its memory, 447.0 GiB,")])
def test_the_note_under_the_cards_says_what_the_bar_is(client: TestClient, gpus: str, said: str) -> None:
    # 16 B × 30e9 weights = 480e9 B = 447.0 GiB on every card under data parallelism; the picture's own
    # scale (its 8 weights of 16 B) is not a quantity a student meets.
    note = text(dom(client.get(f"/?stage=dp&gpus={gpus}").text), "#grid .grid-note")
    assert said in note
    assert " B." not in note


@pytest.mark.parametrize(
    "query",
    ["/?stage=zero2", "/?stage=zero2&from=zero1", "/?stage=zero3&from=dp", "/?stage=dp&from=zero3",
     "/?stage=zero1&from=zero1", "/?stage=zero2&from=zero1&gpus=1", "/?stage=zero2&phase=3"],
)  # fmt: skip
def test_the_rings_round_what_a_switch_changed_are_explained_whenever_they_are_drawn(
    client: TestClient, query: str
) -> None:
    tree = dom(client.get(query, headers={"HX-Request": "true"}).text)
    said = [li.get_text(" ", strip=True) for li in tree.select(".legend ul.states li")]
    ringed = [s for s in said if s.startswith("Ringed")]
    if tree.select("#step"):
        # In the step the legend's ring is the phase's: what it works on.
        assert ringed == ["Ringed : what this phase works on."]
        assert tree.select("#grid .cell.changed") == []
        return
    # At rest a ring is a cell the last switch of arrangement changed, said on every page (so it never
    # moves what is below it): in the note under the cards, and in the projector's key too, whose note
    # is off the screen.
    note = text(tree, "#grid .grid-note")
    assert "switch of arrangement" in note
    assert "ringed" in note
    assert ringed == []
    projector = dom(client.get(query + "&theme=projector", headers={"HX-Request": "true"}).text)
    [entry] = [li.get_text(" ", strip=True) for li in projector.select(".legend li.ring-entry")]
    assert entry.startswith("Ringed")
    assert "switch of arrangement" in entry
