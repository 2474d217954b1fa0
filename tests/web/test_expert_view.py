"""app/web/expert_view.py: a mixture of experts' columns on the parsed page, in the step, compare and the API."""

from __future__ import annotations

import pytest
from bs4 import Tag
from fastapi.testclient import TestClient

from tests.conftest import dom, one, text
from tests.web.helpers import HX, run_page

MIXTRAL_EP8 = "model=mixtral-8x7b&gpus=8&ep=8&stage=zero3"
# On 16 cards ep 8 leaves an expert-data-parallel group of 2: ZeRO-3 halves each expert, and gathers it in the step.
MIXTRAL_EDP2 = "model=mixtral-8x7b&gpus=16&ep=8&stage=zero3"

STATES = {"solid", "partial", "dashed", "absent"}


def _experts(card: Tag) -> list[list[str]]:
    """Each experts' column's cells' states, top to bottom."""
    return [
        [next(c for c in cell["class"] if c in STATES) for cell in column.select(".cell")]
        for column in card.select(".plot .column.expert")
    ]


@pytest.mark.parametrize("headers", [{}, HX], ids=["page", "fragment"])
def test_each_card_keeps_its_own_expert_apart_from_the_dense_columns(
    client: TestClient, headers: dict[str, str]
) -> None:
    grid = one(run_page(client, MIXTRAL_EP8, headers), "#grid")
    assert {"cut", "experts"} <= set(grid["class"])
    cards = grid.select(".card")
    assert len(cards) == 8
    for k, card in enumerate(cards):
        columns = card.select(".plot .column")
        assert len(columns) == 16  # 8 dense eighths, then 8 experts
        assert [c.get("data-weight") for c in columns[8:]] == [str(8 + e) for e in range(8)]
        assert "first" in columns[8]["class"]
        # ep 8 on 8 cards: GPU k keeps expert k whole (its expert-data-parallel group is itself alone), and the
        # others are another card's: hatched the experts' way, not dashed.
        assert _experts(card) == [["solid"] * 4 if e == k else ["absent"] * 4 for e in range(8)]
        assert all("expert" in cell["class"] for cell in card.select(".column.expert .cell"))
        axis = card.select(".axis span")
        assert [a.get_text() for a in axis[8:]] == [str(e) for e in range(8)]
        assert all("expert" in a["class"] for a in axis[8:])


def test_a_cell_says_whose_experts_it_lacks(client: TestClient) -> None:
    card = one(run_page(client, MIXTRAL_EP8), '.card[data-card-index="5"]')
    cells = card.select('.column[data-weight="12"] .cell')  # E4
    assert cells[0]["aria-label"] == (
        "Column E4, expert 4 of 8 in each mixture-of-experts block of this card's stage, Weights (bf16, 2 B): not on "
        "this card. Expert parallelism: GPU 4 (expert-parallel rank 5 of 8) keeps expert 4, and the tokens routed "
        "to them are sent there (all-to-all)."
    )
    assert text(card, "#card-5-said").endswith(
        "Its experts: expert 5 of 8 (expert-parallel rank 6 of 8), in column E5; the other experts are on other cards."
    )


def test_the_grid_states_active_and_total_weights(client: TestClient) -> None:
    # Mixtral 8x7B: 46,702,792,704 weights, 12,879,925,248 active (Mistral's 12.9B of 46.7B); its 32 blocks' routed
    # experts 32 × 8 × 3 × 4,096 × 14,336 = 45,097,156,608 (45.1B), the rest 1,605,636,096 (1.61B).
    said = text(run_page(client, MIXTRAL_EP8), "#grid .experts-note")
    assert said == (
        "12.9B active of 46.7B weights: a token uses 2 of 8 experts in each of its 32 mixture-of-experts blocks, so "
        "compute uses the 12.9B and memory keeps all 46.7B. On each card, columns 0 to 7 are the dense weights "
        "(1.61B: attention, routers, norms, embeddings), then after the rule E0 to E7, numbered 0 to 7, the routed "
        "experts (45.1B), one expert a column: equal widths, not to scale. With ep=8 each card keeps 1 of the 8 "
        "experts (GPU 0: expert 0); another rank's experts are hatched, not here. The expert-data-parallel group is "
        "one card (ep × etp fills a stage): ZeRO has none of the experts to shard, and each card keeps its own whole."
    )


@pytest.mark.parametrize(
    ("query", "words"),
    [
        # DeepSeek-V3: 256 routed experts, 32 a column; ep 64 leaves each card 4 (GPU 0: 0-3), a part of E0.
        ("model=deepseek-v3&gpus=64&ep=64&stage=zero1", "32 experts a column"),
        # gpt-oss-20b: 32 experts, top 4; without ep every card keeps them all.
        ("model=gpt-oss-20b&gpus=8&stage=zero1", "a token uses 4 of 32 experts"),
    ],
)
def test_more_than_eight_experts_share_a_column(client: TestClient, query: str, words: str) -> None:
    tree = run_page(client, query)
    assert words in text(tree, "#grid .experts-note")
    card = one(tree, '.card[data-card-index="0"]')
    assert len(card.select(".column.expert")) == 8


def test_deepseek_card_keeps_a_part_of_its_column(client: TestClient) -> None:
    card = one(run_page(client, "model=deepseek-v3&gpus=64&ep=64&stage=zero1"), '.card[data-card-index="0"]')
    first = card.select(".column.expert")[0].select(".cell")[0]
    assert {"partial", "from-0", "to-6"} <= set(first["class"])  # experts 0-3 of the column's 32: 1/8, 6 of 48ths
    assert _experts(card)[1:] == [["absent"] * 4] * 7


def test_under_zero_the_experts_shard_over_their_expert_data_parallel_group(client: TestClient) -> None:
    grid = one(run_page(client, MIXTRAL_EDP2), "#grid")
    # GPU 3 and GPU 11 keep expert 3 (ep rank 3, edp ranks 0 and 1): ZeRO-3 gives each half of every band.
    for card, strip in ((3, ("from-0", "to-24")), (11, ("from-24", "to-48"))):
        cells = one(grid, f'.card[data-card-index="{card}"]').select('.column[data-weight="11"] .cell')
        assert all({"partial", *strip} <= set(c["class"]) for c in cells)


def test_in_the_step_the_experts_are_gathered_used_and_discarded(client: TestClient) -> None:
    # Phase 1, 2 and 3: column 0's gather, compute and discard in the forward pass.
    gathered = []
    for phase in (1, 2, 3):
        card = one(run_page(client, f"{MIXTRAL_EDP2}&phase={phase}"), '.card[data-card-index="0"]')
        weights = card.select(".column.expert")[0].select(".cell")[0]
        gathered.append("gathered" in weights["class"])
        if phase == 2:
            assert "active" in weights["class"]
            assert str(weights["aria-label"]).endswith(
                "In use: 2 of the 8 experts compute each token, so only the tokens routed to this card's expert 0 are "
                "computed here."
            )
        # Another rank's experts stay not here.
        assert all("absent" in c["class"] for c in card.select(".column.expert")[1].select(".cell"))
    assert gathered == [True, True, False]
    said = text(run_page(client, f"{MIXTRAL_EDP2}&phase=2"), "#grid .experts-note")
    assert said.endswith(
        "In the step, while a column's blocks are in hand each card uses its experts: only the tokens the router "
        "sends them (2 of 8 experts a token) are computed on them; under ZeRO-3 it gathers its experts from its "
        "expert-data-parallel group of 2 cards, uses them and discards them, as the dense layers."
    )


def test_a_dense_model_draws_no_experts(client: TestClient) -> None:
    tree = run_page(client, "model=llama-3-8b&gpus=16&tp=2&stage=zero3")
    assert not tree.select(".column.expert, .experts-note")
    assert "experts" not in one(tree, "#grid")["class"]


def test_the_key_says_another_card_s_experts(client: TestClient) -> None:
    tree = run_page(client, MIXTRAL_EP8)
    names = [" ".join(li.get_text(" ").split()) for li in tree.select(".legend li")]
    assert "Hatched the other way : another card's experts" in names


def test_compare_draws_the_experts(client: TestClient) -> None:
    response = client.get(f"/compare?{MIXTRAL_EP8}")
    assert response.status_code == 200
    tree = dom(response.text)
    assert len(tree.select(".column.expert")) == 2 * 8 * 8  # two sides, 8 cards, 8 experts' columns
    assert any("the routed experts' columns (E0 to E7)" in p.get_text() for p in tree.select(".compare-cut"))


def test_the_layout_api_lists_each_card_s_experts(client: TestClient) -> None:
    body = client.get(f"/api/layout?{MIXTRAL_EDP2}").json()
    assert [c["experts"] for c in body["cut_cards"]] == [[card % 8] for card in range(16)]
    assert [c["expert_data_parallel_rank"] for c in body["cut_cards"]] == [card // 8 for card in range(16)]
    deepseek = client.get("/api/layout?model=deepseek-v3&gpus=64&ep=64&stage=zero1").json()["cut_cards"]
    # A stage's first four and last four cards: 4 experts each (256 / 64).
    assert [(c["card"], c["experts"]) for c in deepseek] == [
        (card, list(range(4 * card, 4 * card + 4))) for card in (0, 1, 2, 3, 60, 61, 62, 63)
    ]
    dense = client.get("/api/layout?model=llama-3-8b&gpus=16&tp=2&stage=zero3").json()["cut_cards"]
    assert all("experts" not in c for c in dense)


# The key names both kinds of column: the dense eighths, then the experts' (one expert each up to 8 experts, else
# experts / 8: DeepSeek-V3's 256 / 8 = 32); in the step the experts compute only the tokens routed to them.
@pytest.mark.parametrize(
    ("path", "said"),
    [
        (
            f"/?{MIXTRAL_EP8}",
            "Columns 0–7: an eighth of the dense weights; E0–E7: one expert each, in all the stage's expert blocks; "
            "height: bytes (2 : 2 : 4 : 8).",
        ),
        (
            f"/?{MIXTRAL_EDP2}&phase=10",
            "Columns 0–7: an eighth of the dense weights; E0–E7: one expert each, in all the stage's expert blocks, "
            "computing only the tokens routed there; height: bytes (2 : 2 : 4 : 8).",
        ),
        (
            "/?model=deepseek-v3&gpus=64&ep=64&stage=zero1",
            "Columns 0–7: an eighth of the dense weights; E0–E7: 32 experts each, in all the stage's expert blocks; "
            "height: bytes (2 : 2 : 4 : 8).",
        ),
        (
            f"/embed?{MIXTRAL_EP8}",
            "Columns 0–7: an eighth of the dense weights; E0–E7: one expert each, in all the stage's expert blocks; "
            "in each column, its bands as tall as their bytes: area is memory.",
        ),
    ],
)
def test_the_key_names_the_dense_and_the_experts_columns(client: TestClient, path: str, said: str) -> None:
    assert text(dom(client.get(path).text), ".legend .area") == said


def test_a_dense_model_s_key_names_no_experts(client: TestClient) -> None:
    said = text(run_page(client, "model=llama-3-8b&gpus=16&tp=2&stage=zero3"), ".legend .area")
    assert said == "Column: an eighth of the model; height: bytes (2 : 2 : 4 : 8)."


# The step's column key: the dense eighths, then each experts' column with its experts and the expert-parallel
# ranks keeping them, rank r keeping experts r·E/ep to (r+1)·E/ep − 1 (shown from 1, as the cards' sentences).
@pytest.mark.parametrize(
    ("query", "experts"),
    [
        # Mixtral, ep 8: expert c on rank c + 1.
        (
            f"{MIXTRAL_EDP2}&phase=10",
            [
                f"E{c}: expert {c} of 8, in every expert block of a card's stage; expert-parallel rank {c + 1} of 8 "
                "keeps it"
                for c in range(8)
            ],
        ),
        # Mixtral, ep 2: experts 0-3 on rank 1, 4-7 on rank 2.
        (
            "model=mixtral-8x7b&gpus=8&ep=2&stage=zero3&phase=10",
            [
                f"E{c}: expert {c} of 8, in every expert block of a card's stage; expert-parallel rank {c // 4 + 1} "
                "of 2 keeps it"
                for c in range(8)
            ],
        ),
        # DeepSeek-V3, ep 64: column c holds experts 32c to 32c + 31, on ranks 8c + 1 to 8c + 8 (4 each).
        (
            "model=deepseek-v3&gpus=64&ep=64&stage=zero1&phase=10",
            [
                f"E{c}: experts {32 * c}–{32 * c + 31} of 256, in every expert block of a card's stage; "
                f"expert-parallel ranks {8 * c + 1}–{8 * c + 8} of 64 keep them"
                for c in range(8)
            ],
        ),
        # gpt-oss-20b without ep: 32 / 8 = 4 a column, every card keeps them all.
        (
            "model=gpt-oss-20b&gpus=8&stage=zero1&phase=3",
            [
                f"E{c}: experts {4 * c}–{4 * c + 3} of 32, in every expert block of a card's stage; every card keeps "
                "them"
                for c in range(8)
            ],
        ),
    ],
)
def test_the_step_s_column_key_names_each_experts_column(client: TestClient, query: str, experts: list[str]) -> None:
    tree = run_page(client, query)
    items = [li.get_text() for li in tree.select("#grid-note .column-key li")]
    assert len(items) == 16
    assert [item.split(":")[0] for item in items[:8]] == [str(c) for c in range(8)]
    assert items[8:] == experts
    assert "After the rule, the experts' columns" in text(tree, "#grid-note p")


def test_a_dense_model_s_step_key_has_eight_columns(client: TestClient) -> None:
    tree = run_page(client, "model=llama-3-8b&gpus=16&stage=zero3&phase=10")
    assert len(tree.select("#grid-note .column-key li")) == 8
