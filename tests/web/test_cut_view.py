"""app/web/cut_view.py: a cut model's cards, framed by stage and tensor group, on the parsed page."""

from __future__ import annotations

import pytest
from bs4 import Tag
from fastapi.testclient import TestClient

from app.domain.parallel import Cut
from app.web.cut_view import sampled_said
from tests.conftest import one, text
from tests.web.helpers import HX, run_page

TP2_PP2 = "gpus=16&tp=2&pp=2&stage=zero3"


STATES = {"solid", "partial", "dashed", "absent"}


def _states(card: Tag) -> list[list[str]]:
    """Each column's cells' states, top to bottom, as their classes say."""
    return [
        [next(c for c in cell["class"] if c in STATES) for cell in column.select(".cell")]
        for column in card.select(".plot .column")
    ]


@pytest.mark.parametrize("headers", [{}, HX], ids=["page", "fragment"])
def test_stages_frame_their_tensor_groups(client: TestClient, headers: dict[str, str]) -> None:
    grid = one(run_page(client, TP2_PP2, headers), "#grid")
    assert "cut" in grid["class"]
    stages = grid.select(".node-box")
    assert [text(s, ".node-title span") for s in stages] == [
        "Stage 1 of 2: GPUs 0–7, node 0",
        "Stage 2 of 2: GPUs 8–15, node 1",
    ]
    groups = [[g["aria-label"], [c["data-card-index"] for c in g.select(".card")]] for g in grid.select(".tp-group")]
    assert groups == [[f"TP group: GPUs {n}–{n + 1}", [str(n), str(n + 1)]] for n in range(0, 16, 2)]
    assert text(grid, ".network-link") == "Pipeline: stage 1 sends its activations to stage 2 (network between nodes)"


def test_each_card_keeps_its_stage_s_columns_and_its_tensor_slice(client: TestClient) -> None:
    grid = one(run_page(client, TP2_PP2), "#grid")
    # ZeRO-3 shards every band: card 3 (stage 1, dp 1, tensor 1) keeps the second half of column 1; columns 0,
    # 2 and 3 are its ZeRO group's (dashed), 4 to 7 stage 2's (absent).
    card = one(grid, '.card[data-card-index="3"]')
    assert _states(card) == [["dashed"] * 4, ["partial"] * 4, ["dashed"] * 4, ["dashed"] * 4] + [["absent"] * 4] * 4
    strips = {c["class"][-2] + " " + c["class"][-1] for c in card.select('.column[data-weight="1"] .cell')}
    assert strips == {"from-24 to-48"}
    assert one(card, ".axis .responsible").get_text() == "1"
    said = text(card, "#card-3-said")
    assert said.startswith(
        "GPU 3 (stage 1 of 2, columns 0 to 3, tensor slice 2 of 2) keeps all four bands of half of column 1"
    )
    absent = one(card, '.column[data-weight="5"] .cell')
    assert str(absent["aria-label"]).endswith(
        "not on this card. Pipeline stage 2 keeps these layers (GPU 11 and others)."
    )


def test_zero1_keeps_the_weights_tensor_slice_of_every_stage_column(client: TestClient) -> None:
    grid = one(run_page(client, "model=llama-3-70b&gpus=16&tp=8&pp=2&stage=zero1"), "#grid")
    # dp = 1: ZeRO's group is the card alone, so every band is its tensor eighth: [6/8, 7/8) = 36 to 42 48ths.
    card = one(grid, '.card[data-card-index="14"]')
    assert _states(card) == [["absent"] * 4] * 4 + [["partial"] * 4] * 4
    assert {" ".join(c["class"][-2:]) for c in card.select('.column[data-weight="6"] .cell')} == {"from-36 to-42"}


def test_the_key_names_the_new_marks_and_the_columns(client: TestClient) -> None:
    tree = run_page(client, TP2_PP2)
    states = [li.get_text(" ", strip=True) for li in tree.select(".legend .states li")]
    assert "Part filled : its tensor slice stored here" in states
    assert "Hatched, no outline : another stage's layers" in states
    assert "Column: an eighth of the model" in text(tree, ".legend")
    swatch = one(tree, ".legend .states .swatch.absent")
    assert "neutral" in swatch["class"]
    assert text(tree, "#grid-note").startswith(
        "Each card's figures and bar are the most loaded card's, by which the run is sized (a stage that keeps less "
        "has room to spare). Numbers under each card are eighths of the model, first layer to last"
    )


def test_an_uncut_run_draws_no_frame_of_the_cut(client: TestClient) -> None:
    tree = run_page(client, "gpus=16&stage=zero3")
    assert tree.select(".tp-group, .cell.absent, .cut-link") == []
    assert "cut" not in one(tree, "#grid")["class"]
    assert "Hatched" not in text(tree, ".legend")


def test_many_cards_keep_a_tensor_group_a_stage_and_say_which_are_left_out(client: TestClient) -> None:
    grid = one(run_page(client, "gpus=64&tp=4&pp=4&stage=zero2"), "#grid")
    drawn = [int(str(c["data-card-index"])) for c in grid.select(".card")]
    assert drawn == [0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51]
    gaps = [g.get_text(" ", strip=True) for g in grid.select(".card-gap")]
    assert gaps[0] == (
        "… GPU 4 to GPU 15: stage 1's other tensor groups, each as its stage's drawn group but for ZeRO's share"
    )
    assert len(gaps) == 4
    assert all("span-4" in g["class"] for g in grid.select(".card-gap"))


def test_uneven_stages_say_their_blocks_and_share_the_columns_by_them(client: TestClient) -> None:
    # Llama 3.1 405B in 16 stages of 7, 8 × 14, 7 blocks: the first and the last stage are drawn.
    grid = one(run_page(client, "model=llama-3.1-405b&gpus=1024&nodes=128&tp=8&pp=16"), "#grid")
    links = [span.get_text(" ", strip=True) for span in grid.select(".node-link")]
    assert links == ["keeps 7 of the 126 blocks, each layer cut 8 ways"] * 2
    # Stage 1 keeps the first 7 of column 0's 126/8 = 15.75 blocks, inside column 0 alone.
    first = one(grid, '.card[data-card-index="0"]')
    assert "GPU 0 (stage 1 of 16, column 0, tensor slice 1 of 8)" in first.get_text(" ", strip=True)


def test_zero3_past_its_limit_links_to_the_same_run_cut_in_two(client: TestClient) -> None:
    tree = run_page(client, "model=llama-3-70b&gpus=16&stage=zero3&capacity=3GiB&batch=0")
    link = one(tree, ".boundary .cut-link a")
    assert link.get_text() == "Cut each layer across 2 cards: TP 2 × ZeRO-3"
    assert link["href"] == "/?stage=zero3&model=llama-3-70b&gpus=16&capacity=3GiB&batch=0&tp=2"
    cut = run_page(client, str(link["href"]).removeprefix("/?"))
    assert len(cut.select("#grid .tp-group")) == 8
    # One assembled layer fits: no link.
    assert run_page(client, "model=llama-3-70b&gpus=16&stage=zero3&capacity=80GiB").select(".cut-link") == []


def test_a_stage_over_two_nodes_names_each_tensor_group_s_node(client: TestClient) -> None:
    # 64 cards in nodes of 8, 2 stages: a stage is 32 cards, four nodes; GPUs 30–31 are on node 3.
    grid = one(run_page(client, "gpus=64&tp=2&pp=2&stage=zero3"), "#grid")
    assert [g["aria-label"] for g in grid.select(".tp-group")] == [
        "TP group: GPUs 0–1, node 0",
        "TP group: GPUs 30–31, node 3",
        "TP group: GPUs 32–33, node 4",
        "TP group: GPUs 62–63, node 7",
    ]
    assert [text(s, ".node-title span") for s in grid.select(".node-box")] == [
        "Stage 1 of 2: GPUs 0–31, nodes 0–3",
        "Stage 2 of 2: GPUs 32–63, nodes 4–7",
    ]


def test_arriving_from_zero2_rings_the_weights_zero3_now_shards(client: TestClient) -> None:
    grid = one(run_page(client, f"{TP2_PP2}&from=zero2"), "#grid")
    ringed = {(str(c["aria-label"])[:9], c["class"][1]) for c in grid.select(".cell.changed")}
    # Card 0 keeps its own column's weights (its tensor half, as under ZeRO-2); the three other columns of its
    # stage become dashed: 3 cells a card, 16 cards, weights only. Another stage's layers stay absent.
    assert {band for _, band in ringed} == {"band-weights"}
    assert {column for column, _ in ringed} == {f"Column {n} " for n in range(8)}
    assert len(grid.select(".cell.changed")) == 16 * 3
    assert grid.select(".cell.absent.changed") == []


def test_without_a_pipeline_the_gap_names_no_stage(client: TestClient) -> None:
    # tp = 2 on 64 cards, no pipeline: one stage, so the left-out cards are "the other tensor groups".
    grid = one(run_page(client, "gpus=64&tp=2&stage=zero3"), "#grid")
    gaps = [g.get_text(" ", strip=True) for g in grid.select(".card-gap")]
    assert gaps
    assert all("stage" not in gap for gap in gaps), gaps
    assert any("the other tensor groups, each as the drawn group but for ZeRO's share" in gap for gap in gaps)


def test_stages_sit_side_by_side_past_two(client: TestClient) -> None:
    grid = one(run_page(client, "gpus=15&pp=3&stage=zero3", {}), "#grid")
    stages = grid.select(".node-box")
    assert [s["class"] for s in stages] == [["node-box", "span-4"]] * 3
    assert [[c["data-card-index"] for c in s.select(".card")] for s in stages] == [
        [str(n) for n in range(first, first + 4)] for first in (0, 5, 10)
    ]
    gaps = [g.get_text(" ", strip=True) for g in grid.select(".card-gap.brief")]
    assert gaps == [
        f"… GPU {n}: stage {s}'s other tensor groups, each as its stage's drawn group but for ZeRO's share"
        for n, s in ((4, 1), (9, 2), (14, 3))
    ]
    assert text(grid, ".network-link") == (
        "Pipeline, each stage sending its activations to the next: 1 → 2 (inside the node), 2 → 3 (inside the node)"
    )


STEP = "gpus=8&tp=2&pp=2&stage=zero3&phase=10"


def test_the_step_at_a_phase_draws_the_cut(client: TestClient) -> None:
    # Phase 10: the forward's gather of column 3, stage 1's (GPUs 0-3, columns 0-3; dp = 2, z = 2). GPUs 0 and 1
    # (ZeRO member 0) keep columns 0 and 1: they gather their tensor slice of column 3; GPUs 2 and 3 keep it
    # (columns 2 and 3, the second half of each): held, worked on; stage 2's cards have column 3 absent.
    tree = run_page(client, STEP, {})
    grid = one(tree, "#grid")
    cards = {int(str(c["data-card-index"])): c for c in grid.select(".card")}
    # The key says what the absent mark is, in the step as at rest.
    assert "Hatched, no outline: another stage's layers" in one(tree, ".legend").get_text("", strip=True).replace(
        " :", ":"
    )
    assert sorted(cards) == list(range(8))

    def weights(card: int, column: int) -> list[str]:
        cell = cards[card].select(f'.column[data-weight="{column}"] .cell.band-weights')[0]
        return [c for c in cell["class"] if c in STATES | {"gathered", "held", "active"}]

    assert weights(0, 3) == ["solid", "gathered", "active"]
    assert weights(2, 3) == ["partial", "partial", "active"]  # the state, then the step's holding
    assert weights(4, 3) == ["absent"]
    assert [weights(5, c) for c in range(4)] == [["absent"]] * 4
    # Stage 2's cards keep their own columns, untouched in this phase.
    assert weights(4, 4) == ["partial", "partial"]


# Which cards a sampled cut grid draws, by hand from `cut_grid.cut_shown`: past 16 cards, with tp the first
# tensor-parallel group of a stage (and its last ZeRO member's where two a stage fit in 16 cards); with tp = 1 a
# group is one card; with ep and tp = 1, where at most two stages are drawn, a stage's first four and last four.
# Every stage where tp × pp ≤ 16, else the first and the last.
@pytest.mark.parametrize(
    ("cut", "gpus", "said"),
    [
        # DeepSeek-V3's layout: 16 stages × 1 card = 16; 2 × 16 > 16, so one card a stage.
        (Cut(pp=16, ep=64), 2048, "one card a stage (of each of the 16 stages)"),
        # One stage of 64, ep 8: cards 0-3 and 60-63.
        (Cut(ep=8), 64, "the first four cards and the last four, which keep different experts"),
        (
            Cut(pp=2, ep=8),
            64,
            "the first four cards of a stage and the last four, which keep different experts (of each of the 2 stages)",
        ),
        # tp 8 × pp 2 = 16: one group a stage; 2 × 8 × 2 > 16, so no second.
        (Cut(tp=8, pp=2), 64, "one whole tensor-parallel group a stage (of each of the 2 stages)"),
        # tp 8 × pp 4 = 32 > 16: the first and last stages only.
        (Cut(tp=8, pp=4), 64, "one whole tensor-parallel group a stage (of the first and last stages only)"),
        # tp 2, one stage: 2 × 2 ≤ 16, the first and the last ZeRO member's groups.
        (Cut(tp=2), 64, "two whole tensor-parallel groups, the first and the last"),
        (
            Cut(tp=2, pp=2),
            64,
            "two whole tensor-parallel groups a stage, the first and the last (of each of the 2 stages)",
        ),
        (Cut(pp=4), 64, "two cards a stage, the first and the last (of each of the 4 stages)"),
    ],
)
def test_a_sampled_grid_says_which_cards_of_a_stage_it_draws(cut: Cut, gpus: int, said: str) -> None:
    assert sampled_said(cut, gpus) == (
        f"With {gpus:,} cards the grid draws {said}; the gaps say which cards are left out."
    )


def test_the_page_says_a_sampled_expert_grid_draws_a_stage_s_first_four_and_last_four(client: TestClient) -> None:
    tree = run_page(client, "model=mixtral-8x7b&gpus=64&ep=8&stage=zero1")
    drawn = [int(str(c["data-card-index"])) for c in tree.select("#grid .card")]
    assert drawn == [0, 1, 2, 3, 60, 61, 62, 63]
    note = text(tree, "#grid-note")
    assert "the grid draws the first four cards and the last four, which keep different experts;" in note
    assert "tensor-parallel" not in note
