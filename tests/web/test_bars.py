"""app/web/bars.py: the memory bars under the cards, the note that says what they are, and the key."""

from __future__ import annotations

import re

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient

from app.domain.architecture import ModelName
from app.domain.placement import Offload
from app.domain.report import Accounting, TermKind
from app.domain.scenario import Inputs, resolve
from app.domain.stages import Stage
from app.paths import STATIC_DIR
from app.web.bars import bar_keys, card_bar
from app.web.fields import FIELDS
from app.web.links import Links
from app.web.page_view import page_view
from tests.conftest import cell_facts, dom, one, text
from tests.web.helpers import run_page, stage_page


def test_legend_explains_bands_and_states_without_colour(client: TestClient) -> None:
    legend = one(stage_page(client, Stage.DP), ".legend")
    bands = [li.get_text(" ", strip=True) for li in legend.select("ul.bands li")]
    assert [b.split(" ·")[0] for b in bands] == ["Weights", "Gradients", "Master copy", "Adam moments"]
    assert "(2 : 2 : 4 : 8)" in text(legend, "p.area")
    states = [li.get_text(" ", strip=True) for li in legend.select("ul.states li")]
    assert states[0].startswith("Filled")
    assert states[1].startswith("Dashed")


def test_a_band_of_zero_bytes_disappears(client: TestClient) -> None:
    tree = run_page(client, "recipe=fp32-adam&stage=zero2")
    assert {cell_facts(c)["band"] for c in tree.select("#grid .cell")} == {"weights", "gradients", "moments"}
    assert [text(li, "strong") for li in tree.select(".legend ul.bands li")] == ["Weights", "Gradients", "Adam moments"]
    assert "(4 : 4 : 8)" in text(tree, ".legend p.area")


# Widths in percent of the bar, worked by hand. Every card's bar runs to the highest peak of the four stages:
# with no activations, data parallelism's 16 B a weight (it holds nothing in hand), in the paper's count. What
# a card holds in hand is stacked after its state at rest, on the same scale.
_LLAMA_8B, _LLAMA_8B_EMBEDDING = 8_030_261_248, 128_256 * 4096


_BARS = [
    # ZeRO-1: 2 + 2 + 12/8 = 5.5 B/weight of DP's 16, the weights 2/16 of the bar, the master copy 0.5/16.
    # The 80 GiB card (85.9e9 B) is on the bar (DP's 128.5e9 B), at 85.9 / 128.5. Nothing in hand.
    (
        "model=llama-3-8b&gpus=8&capacity=80GiB&stage=zero1&batch=0",
        {"band-weights": 200 / 16, "band-gradients": 200 / 16, "band-master": 50 / 16, "band-moments": 100 / 16},
        {},
        80 * 2**30 / (_LLAMA_8B * 16) * 100,
    ),
    # The lesson's 30B in 8 layers under ZeRO-3 on 8 cards: 16/8 = 2 B a weight, an eighth of DP's bar; in
    # hand at the peak one layer of 3.75e9 weights, 7.5e9 B gathered and 7.5e9 B of gradients: each
    # 7.5e9 / 480e9 = 1/64 of the bar, after the state's 12.5%.
    (
        "stage=zero3",
        {"band-weights": 100 / 64, "band-gradients": 100 / 64, "band-master": 100 / 32, "band-moments": 100 / 16},
        {"gathered": 100 / 64, "sent": 100 / 64},
        None,
    ),
    # Llama 3 8B on 64 cards under ZeRO-3: 16/64 of DP's bar; its largest layer, the embedding, 525.3e6
    # weights × 2 B gathered and × 2 B computed, each 2 × 525.3e6 / (16 × 8.03e9) of the bar. The 4 GiB
    # card is on the bar at 4.295e9 / 128.48e9.
    (
        "model=llama-3-8b&gpus=64&stage=zero3&capacity=4GiB&batch=0",
        {"band-weights": 2 / 64 / 16 * 100, "band-moments": 8 / 64 / 16 * 100},
        {
            "gathered": 2 * _LLAMA_8B_EMBEDDING / (16 * _LLAMA_8B) * 100,
            "sent": 2 * _LLAMA_8B_EMBEDDING / (16 * _LLAMA_8B) * 100,
        },
        4 * 2**30 / (_LLAMA_8B * 16) * 100,
    ),
    # Under data parallelism the whole bar, the master copy a quarter of it; a 64 GiB card's line at
    # 68.72 / 128.48 of it.
    (
        "model=llama-3-8b&capacity=64GiB&stage=dp&batch=0",
        {"band-master": 25.0},
        {},
        64 * 2**30 / (_LLAMA_8B * 16) * 100,
    ),
]


def _drawn(bar: Tag) -> list[tuple[str, float, float, bool]]:
    """A bar's stretches as drawn: kind, start and width in percent of the bar, and whether held in hand."""
    return [
        (str(rect["class"][0]), float(str(rect["x"])), float(str(rect["width"])), "in-hand" in rect["class"])
        for rect in bar.select("rect")
    ]


@pytest.mark.parametrize(("query", "widths", "hand", "capacity_x"), _BARS)
def test_each_card_has_its_state_at_rest_then_what_it_holds_in_hand_on_one_scale(
    client: TestClient, query: str, widths: dict[str, float], hand: dict[str, float], capacity_x: float | None
) -> None:
    tree = run_page(client, query)
    bars = tree.select("#grid .card .card-bar svg")
    assert len(bars) == 8
    assert tree.select("#grid .hand-bar") == []  # one bar a card: no second scale
    drawn = _drawn(bars[0])
    at_rest = {css: width for css, _, width, in_hand in drawn if not in_hand}
    for css, width in widths.items():
        assert at_rest[css] == pytest.approx(width, abs=1e-3), css
    held = {css: width for css, _, width, in_hand in drawn if in_hand}
    assert held == pytest.approx(hand, abs=1e-3)
    # Stacked: each stretch starts where the one before ends, what is in hand after all that is kept at rest.
    ends = [0.0] + [x + width for _, x, width, _ in drawn]
    assert [x for _, x, _, _ in drawn] == pytest.approx(ends[:-1], abs=1e-3)
    assert [in_hand for *_, in_hand in drawn] == sorted(in_hand for *_, in_hand in drawn)
    line = bars[0].select("line.capacity")
    assert (float(str(line[0]["x1"])) if line else None) == pytest.approx(capacity_x, abs=1e-3)
    note = text(tree, ".grid-note")
    assert "one scale for all four arrangements" in note
    assert "own scale" not in note
    assert ("then what it holds in hand" in note) is bool(hand)


def _length(tree: BeautifulSoup, in_hand: bool | None = None) -> float:
    """The first card's bar, drawn: all of it, or its stretches at rest (False) or in hand (True)."""
    drawn = _drawn(one(tree, "#grid .card .card-bar svg"))
    return sum(width for _, _, width, held in drawn if in_hand is None or held is in_hand)


def test_a_switch_from_data_parallelism_to_zero3_shrinks_the_state_to_an_eighth(client: TestClient) -> None:
    # 16 B a weight on every card, then 2: the state at rest is 100, then 12.5, of the same scale; in hand
    # ZeRO-3's peak adds 15e9 B of 480e9, 3.125, after it.
    dp, zero3 = run_page(client, "stage=dp"), run_page(client, "stage=zero3")
    assert (_length(dp, False), _length(dp, True)) == pytest.approx((100, 0))
    assert (_length(zero3, False), _length(zero3, True)) == pytest.approx((12.5, 3.125))


# The lesson's 30B on 8 cards, each stage's bar in percent of data parallelism's 480e9 B, by hand: at rest
# 16, 5.5, 3.75 and 2 B a weight of 16; in hand at the peak nothing, nothing, one layer's gradients
# (3.75e9 × 2 B = 7.5e9 B, 1.5625%) and its weights too (3.125%). The longest bar holds the most.
_STAGE_BARS = {"dp": (100.0, 0.0), "zero1": (34.375, 0.0), "zero2": (23.4375, 1.5625), "zero3": (12.5, 3.125)}


def test_the_four_stages_bars_are_on_one_scale_and_the_longest_holds_the_most(client: TestClient) -> None:
    drawn = {}
    for stage, (rest, hand) in _STAGE_BARS.items():
        tree = run_page(client, f"stage={stage}")
        drawn[stage] = _length(tree)
        assert (_length(tree, False), _length(tree, True)) == pytest.approx((rest, hand)), stage
    peaks = {row["stage"]: row["peak_bytes"] for row in client.get("/api/memory").json()["stages"]}
    assert sorted(drawn, key=drawn.__getitem__) == sorted(peaks, key=peaks.__getitem__)
    assert max(drawn.values()) == pytest.approx(100)


@pytest.mark.parametrize(
    ("phase", "now", "pale"),
    [
        # Phase 0, at rest: 60e9 B, nothing in hand, nothing pale.
        (0, {}, 0.0),
        # The forward's first layer: its 7.5e9 B of weights gathered, 1/64 of the bar.
        (1, {"gathered": 100 / 64}, 0.0),
        # The forward's first layer in use, then discarded: the peak so far, 7.5e9 B above now, pale.
        (2, {"gathered": 100 / 64}, 0.0),
        (3, {}, 100 / 64),
        # The backward's last layer: gathered, then its gradients computed beside it, the step's peak.
        (25, {"gathered": 100 / 64}, 0.0),
        (26, {"gathered": 100 / 64, "sent": 100 / 64}, 0.0),
        # After the backward pass the layers are discarded: the peak so far, 15e9 B above now, pale.
        (49, {}, 3.125),
    ],
)
def test_in_the_step_what_a_card_holds_now_and_its_peak_so_far_are_on_the_same_scale(
    client: TestClient, phase: int, now: dict[str, float], pale: float
) -> None:
    drawn = _drawn(one(run_page(client, f"stage=zero3&phase={phase}"), "#grid .card .card-bar svg"))
    assert sum(width for css, _, width, held in drawn if not held) == pytest.approx(12.5)
    assert {css: width for css, _, width, held in drawn if held and css != "peak"} == pytest.approx(now)
    assert sum(width for css, _, width, _ in drawn if css == "peak") == pytest.approx(pale)
    assert sum(width for *_, width, _ in drawn) <= 100


def test_no_bar_runs_past_its_end_for_any_run_stage_or_phase() -> None:
    # Every run the inputs make that changes a card's kinds (below): each stage at rest and each phase of its
    # step, on the one scale, the highest peak of the four; the bar's end is the stage's peak (at rest) or
    # what is held now (in the step), in proportion to its bytes.
    for inputs in RUNS[::7]:
        scenario = resolve(inputs)
        top = max(row.peak_bytes for row in scenario.report)
        for stage in Stage:
            row = scenario.report[stage]
            bar = card_bar(scenario, stage, row.extra)
            assert sum(s.width for s in bar.segments) == pytest.approx(row.peak_bytes / top * 100)
            for phase in scenario.report.step(stage):
                bar = card_bar(scenario, stage, phase.extra, phase.peak_bytes_so_far)
                end = max(phase.peak_bytes_so_far, phase.live_bytes)
                assert sum(s.width for s in bar.segments) == pytest.approx(end / top * 100)
                assert end <= top


@pytest.mark.parametrize(
    ("query", "caption"),
    [
        # 30e9 × 16 B = 447.0 GiB; ZeRO-3's peak 75e9 B = 69.8 GiB.
        ("stage=dp", "Peak 447.0 GiB"),
        ("stage=zero3", "Peak 69.8 GiB"),
        # On an 80 GB card (74.5 GiB): ZeRO-3's 69.8 GiB fits, 4.7 GiB left; ZeRO-2's 3.75 × 30e9 + 7.5e9
        # = 120e9 B (111.8 GiB) is over by 37.3 GiB.
        ("stage=zero3&capacity=80GB", "Peak 69.8 GiB ✓ fits, 4.7 GiB left"),
        ("stage=zero2&capacity=80GB", "Peak 111.8 GiB ✗ over by 37.3 GiB"),
        # In the step it is the whole step's peak, beside the card's own figure now.
        ("stage=zero3&phase=1", "Step's peak 69.8 GiB"),
    ],
)
def test_each_card_says_its_total_and_whether_it_fits(client: TestClient, query: str, caption: str) -> None:
    tree = run_page(client, query)
    assert {text(card, ".card-foot") for card in tree.select("#grid .card")} == {caption}


@pytest.mark.parametrize(
    ("gpus", "said"), [("1", "(0 to 447.0 GiB, the highest peak)"), ("2", "(0 to 447.0 GiB, the highest peak)")]
)
def test_the_note_under_the_cards_says_what_the_bar_is(client: TestClient, gpus: str, said: str) -> None:
    # 16 B × 30e9 weights = 480e9 B = 447.0 GiB on every card under data parallelism; the picture's own
    # scale (its 8 weights of 16 B) is not a quantity a student meets.
    note = text(dom(client.get(f"/?stage=dp&gpus={gpus}").text), ".grid-note")
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
        assert ringed == ["Ringed : this phase's work"]
        assert tree.select("#grid .cell.changed") == []
        return
    # At rest a ring is a cell the last switch of arrangement changed, said on every page (so it never
    # moves what is below it): in the note under the cards, and in the key's entry that only the
    # projector shows (projector.css), whose note is off the screen.
    note = text(tree, ".grid-note")
    assert "switch of arrangement" in note
    assert "ringed" in note
    [entry] = [li.get_text(" ", strip=True) for li in tree.select(".legend li.ring-entry")]
    assert ringed == [entry]
    assert entry.startswith("Ringed")
    assert "changed by a switch" in entry


APP_CSS = (STATIC_DIR / "app.css").read_text()


@pytest.mark.parametrize("kind", list(TermKind), ids=lambda k: k.name)
def test_each_kinds_colour_is_in_the_stylesheet_under_its_css_name(kind: TermKind) -> None:
    css = kind.look.css
    assert re.search(rf"\.bar rect\.{re.escape(css)}\b", APP_CSS), f"no colour for .bar rect.{css}"
    if kind.band is None:  # a band's swatch is its cells' class, `solid`; the rest have the bar's swatch
        assert re.search(rf"\.swatch\.bar-{re.escape(css)}\b", APP_CSS), f"no swatch for .swatch.bar-{css}"


# Every run the inputs can make that changes a card's kinds: each accounting and offload, hpZ's copy and
# hybrid sharding, overheads counted or not, and a shaped model (activations)
# beside a bare count (none); ZeRO++ is DeepSpeed's or the paper's, so the others refuse hpZ.
RUNS = tuple(
    Inputs(
        model=model,
        params=None if model else 10**9,
        gpus=16,
        nodes=2,
        gpus_per_node=8,
        accounting=accounting,
        offload=offload,
        hpz=hpz,
        shard=shard,
        count_overheads=overheads,
    )
    for accounting in Accounting
    for offload in Offload
    for hpz, shard in ((1, None), (8, None), (1, 8))
    for overheads in (False, True)
    for model in (ModelName.LLAMA_3_8B, None)
    if not (hpz > 1 and accounting in (Accounting.FSDP2, Accounting.MEGATRON))
) + tuple(
    # The inputs with a rule of their own (app/web/fields.py `RunField.rule`), each value but the default,
    # under each offload: grad_accum=fp32's main gradients.
    Inputs(model=ModelName.LLAMA_3_8B, gpus=16, offload=offload, ruled=((field.rule, value),))
    for field in FIELDS
    if field.rule is not None
    for value in field.choices or (True, False)  # a choice's values, or a switch's
    if value != field.default
    for offload in Offload
)


def test_every_kind_a_run_draws_is_drawn_and_keyed_from_its_declaration() -> None:
    drawn: set[TermKind] = set()
    keyed: set[tuple[str, ...]] = set()
    for inputs in RUNS:
        scenario = resolve(inputs)
        recipe = scenario.run.recipe
        for stage in Stage:
            row = scenario.report[stage]
            at_rest = [(t.kind, t.nbytes) for t in row.on_gpu]
            if row.overhead_bytes:
                at_rest.append((TermKind.OVERHEADS, row.overhead_bytes))
            in_hand = list(row.extra.parts)
            drawn |= {kind for kind, _ in at_rest + in_hand}
            # Each stretch of the bar is its kind's: its class (in hand, after the state), its name before its bytes.
            bar = card_bar(scenario, stage, row.extra)
            classes = [kind.look.css for kind, _ in at_rest] + [f"{kind.look.css} in-hand" for kind, _ in in_hand]
            assert [s.css for s in bar.segments] == classes
            for segment, (kind, nbytes) in zip(bar.segments, at_rest + in_hand, strict=True):
                assert segment.label == f"{kind.label(recipe)}: {scenario.units.show(nbytes)}"
            # The key has a line for each kind the bars draw beyond the bands, in its words, and no other.
            if bar_keys(row) in keyed:  # the key's lines of kinds depend on these alone
                continue
            keyed.add(bar_keys(row))
            key = page_view(stage, Links("/", ()), scenario).key
            assert key is not None
            beyond = [kind for kind in TermKind if kind.band is None and kind in {k for k, _ in at_rest + in_hand}]
            lines = [(e.name, e.words, e.swatch) for e in key.bars if e.swatch.removeprefix("bar-") in bar_keys(row)]
            assert lines == [(k.look.colour, f": {k.look.short}", f"bar-{k.look.css}") for k in beyond]
            assert {f"{k.look.colour}: {k.look.long}" for k in beyond} <= set(key.more)
    # Exhaustive, not a count: every kind declared is drawn by some run (a kind no run reaches needs its input here).
    assert drawn == set(TermKind)
