"""app/web/card_words.py: each card in one sentence, read by a screen reader instead of its cells."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from tests.conftest import dom, one, text
from tests.web.helpers import run_page

# The lesson's 30B on 8 GPUs, GPU 3, by hand from the paper's bands (2 : 2 : 4 : 8 B a weight): what each
# stage splits is kept for weight 3 only, the rest for every weight. At rest 16, 5.5, 3.75 and 2 B × 30e9
# = 447.0, 153.7, 104.8 and 55.9 GiB; in hand at the peak, ZeRO-2 a layer's gradients (3.75e9 × 2 B = 7.5e9
# B: 120e9 B = 111.8 GiB), ZeRO-3 its weights too (75e9 B = 69.8 GiB).
AT_REST = [
    ("dp", "GPU 3 keeps all four bands of every weight: 447.0 GiB."),
    (
        "zero1",
        "GPU 3 keeps the bf16 weights and the bf16 gradients of every weight, and the fp32 master copy and "
        "Adam's two fp32 moments of weight 3: 153.7 GiB.",
    ),
    (
        "zero2",
        "GPU 3 keeps the bf16 weights of every weight, and the bf16 gradients, the fp32 master copy and Adam's "
        "two fp32 moments of weight 3: 104.8 GiB at rest, 111.8 GiB at its peak.",
    ),
    (
        "zero3",
        "GPU 3 keeps all four bands of weight 3, and nothing of the other 7 weights: 55.9 GiB at rest, "
        "69.8 GiB at its peak.",
    ),
]


@pytest.mark.parametrize(("stage", "said"), AT_REST)
def test_each_card_at_rest_says_what_it_keeps_in_one_sentence(client: TestClient, stage: str, said: str) -> None:
    assert text(run_page(client, f"stage={stage}"), "#card-3-said") == said


# In the step the columns are eighths of the model, which need not line up with the cards' slices. On 16
# GPUs GPU 3's slice is the second half of column 1 (weights 3/16 to 4/16 of the model: column 1 runs from
# 2/16 to 4/16); ZeRO-1 splits the master copy and moments, so it keeps those of half of column 1, and
# 4 + 12/16 = 4.75 B × 30e9 = 142.5e9 B = 132.7 GiB. On 4 GPUs GPU 1's slice is columns 2 and 3 whole;
# ZeRO-3 keeps 16/4 = 4 B × 30e9 = 120e9 B = 111.8 GiB. On 6, GPU 1's slice (8/6 to 16/6 of a column)
# is the last 2/3 of column 1 and the first 2/3 of column 2: 16/6 B × 30e9 = 80e9 B = 74.5 GiB.
IN_THE_STEP = [
    (
        "stage=zero1&gpus=16&phase=0",
        3,
        "GPU 3 keeps the bf16 weights and the bf16 gradients of every column, and the fp32 master copy and "
        "Adam's two fp32 moments of half of column 1: 132.7 GiB now.",
    ),
    (
        "stage=zero3&gpus=4&phase=0",
        1,
        "GPU 1 keeps all four bands of columns 2 and 3, and nothing of the other 6 columns: 111.8 GiB now.",
    ),
    (
        "stage=zero3&gpus=6&phase=0",
        1,
        "GPU 1 keeps all four bands of 2/3 of column 1 and 2/3 of column 2, and nothing of the other 6 "
        "columns: 74.5 GiB now.",
    ),
    # The backward pass at column 7 (phase 26, its compute) on 8 GPUs: GPU 3 has column 7's weights assembled and its
    # gradients computed, 7.5e9 B each on its 60e9 B: 75e9 B = 69.8 GiB.
    (
        "stage=zero3&phase=26",
        3,
        "GPU 3 keeps all four bands of column 3, and nothing of the other 7 columns; for this phase it also "
        "holds the bf16 weights of column 7, assembled from their owners, and the bf16 gradients of column 7, "
        "computed here, to be sent on: 69.8 GiB now.",
    ),
    # GPU 7 is column 7's owner: it gathers nothing, and computes the gradients it keeps.
    (
        "stage=zero3&phase=26",
        7,
        "GPU 7 keeps all four bands of column 7, and nothing of the other 7 columns: 69.8 GiB now.",
    ),
]


@pytest.mark.parametrize(("query", "card", "said"), IN_THE_STEP)
def test_each_card_in_the_step_says_what_it_keeps_of_which_columns(
    client: TestClient, query: str, card: int, said: str
) -> None:
    assert text(run_page(client, query), f"#card-{card}-said") == said


@pytest.mark.parametrize(
    ("query", "said"),
    [
        # The optimizer offloaded: 2 + 2 B × 30e9 = 120e9 B = 111.8 GiB on the card, its host the rest.
        (
            "stage=zero1&offload=optimizer",
            "GPU 1 keeps the bf16 weights and the bf16 gradients of every weight; its host keeps the fp32 master "
            "copy and Adam's two fp32 moments of weight 1: 111.8 GiB.",
        ),
        # Hybrid sharding in groups of 8 on 16 GPUs: GPU 1 keeps weight 1's slice in its group, and weight 9's
        # as the replica of GPU 9's; 16 / 8 = 2 B a weight.
        (
            "stage=zero3&gpus=16&nodes=2&gpus_per_node=8&shard=8",
            "GPU 1 keeps all four bands of weights 1 and 9, and nothing of the other 14 weights: 55.9 GiB at "
            "rest, 69.8 GiB at its peak.",
        ),
    ],
)
def test_offload_and_hybrid_sharding_are_said_as_they_are_drawn(client: TestClient, query: str, said: str) -> None:
    assert text(run_page(client, query), "#card-1-said") == said


@pytest.mark.parametrize("query", ["stage=zero2", "stage=zero3&phase=26", "stage=zero1&offload=optimizer&gpus=64"])
def test_a_card_is_read_by_its_sentence_and_its_cells_are_hidden(client: TestClient, query: str) -> None:
    tree = run_page(client, query)
    cards = tree.select("#grid section.card")
    assert cards
    for card in cards:
        said = one(card, f"#{card['aria-describedby']}")
        assert "visually-hidden" in said["class"]
        assert text(card, "h3") in said.get_text()
        # Every plot (the card's, its host's) is hidden: a screen reader meets no cell, each still named for its
        # tooltip (app.css) and reachable by the arrow keys, never a tab stop.
        plots = card.select(".plot")
        assert plots
        assert {p.get("aria-hidden") for p in plots} == {"true"}
        assert all(cell["aria-label"] and cell["tabindex"] == "-1" for cell in card.select(".cell"))
        assert not [c for c in card.select(".cell") if not c.find_parent(class_="plot")]


def test_the_side_by_side_page_reads_each_card_by_its_sentence_too(client: TestClient) -> None:
    tree = dom(client.get("/compare?left=zero1&right=zero3").text)
    assert text(tree, "#left-card-3-said") == dict(AT_REST)["zero1"]
    assert text(tree, "#right-card-3-said") == dict(AT_REST)["zero3"]
    assert {p.get("aria-hidden") for p in tree.select(".compare-side .plot")} == {"true"}
