"""The pipeline's schedule in the step, on the parsed page: its rows, its boxes, the bubble and what is held."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient

from app.web.schedule_view import GUTTER, WIDTH
from tests.conftest import dom

LLAMA = "/?model=llama-3-8b&gpus=16&tp=2&phase=5"
# Llama 3 8B at one sequence of 8,192 tokens with tp = 2 keeps 822,607,872 B a block on a card (the API's
# activation_bytes_per_layer); a stage of pp = 4 keeps 32 / 4 = 8 blocks: 6,580,862,976 B = 6.13 GiB. The last
# stage adds the final norm's and the output layer's inputs (67,108,864 B each) and the logits in fp32 ÷ 2
# (8,192 × 128,256 × 4 / 2 = 2,101,346,304 B): 8,816,427,008 B = 8.21 GiB (tests/domain/test_schedule.py).
STAGE = 8 * 822_607_872
LAST = STAGE + 2 * 67_108_864 + 8_192 * 128_256 * 2
GIB = 2**30
PLOT = WIDTH - GUTTER - 4


def _page(client: TestClient, url: str) -> BeautifulSoup:
    response = client.get(url)
    assert response.status_code == 200, response.text[:300]
    return dom(response.text)


def _said(page: Tag, selector: str) -> str:
    found = page.select_one(selector)
    assert found is not None, selector
    return " ".join(found.get_text(" ").split())


def test_1f1b_with_4_stages_and_8_microbatches(client: TestClient) -> None:
    page = _page(client, f"{LLAMA}&pp=4&microbatches=8")
    assert _said(page, "#schedule-heading") == "Pipeline: 1F1B, 4 stages, 8 micro-batches"
    assert _said(page, "#schedule-bubble") == "Bubble: (pp − 1)/m = 3/8 = 37.5% of the ideal step."
    rows = page.select("#schedule .stage-row")
    assert [_said(r, ".stage-name") for r in rows] == ["S0", "S1", "S2", "S3"]
    first = rows[0].select("rect.slot")
    assert len(first) == 16
    assert all(len(r.select("rect.slot")) == 16 for r in rows)
    assert [str(r["class"][1]) for r in first[:6]] == ["forward"] * 4 + ["backward", "forward"]
    # 33 forwards' time across the plot: F0 from 0 to 1, B0 on stage 0 from 10 to 12.
    scale = PLOT / 33
    assert float(str(first[0]["x"])) == pytest.approx(GUTTER, abs=0.01)
    assert float(str(first[0]["width"])) == pytest.approx(scale, abs=0.02)
    assert float(str(first[4]["x"])) == pytest.approx(GUTTER + 10 * scale, abs=0.02)
    assert float(str(first[4]["width"])) == pytest.approx(2 * scale, abs=0.02)
    assert first[4].title is not None
    assert first[4].title.get_text() == "Stage 0: B0, the backward of micro-batch 0, from 10 to 12"
    assert [t.get_text() for t in rows[3].select("text.slot-label")] == [str(i) for i in range(8) for _ in (0, 1)]
    table = [[" ".join(c.get_text(" ").split()) for c in tr.select("th, td")] for tr in page.select("#schedule tr")]
    order = "F0, F1, F2, F3, B0, F4, B1, F5, B2, F6, B3, F7, B4, B5, B6, B7"
    assert table[1] == ["S0", order, "4 micro-batches, 24.5 GiB"]
    assert table[4][2] == "1 micro-batch, 8.2 GiB"
    assert round(4 * STAGE / GIB, 1) == 24.5
    assert round(STAGE / GIB, 1) == 6.1
    assert round(LAST / GIB, 1) == 8.2
    assert _said(page, ".schedule-holds") == (
        "Held at most: S0 4 micro-batches (min(pp, m) = 4) = 24.5 GiB; S3 1 micro-batch = 8.2 GiB. A micro-batch of "
        "a stage's 8 blocks on one card of the cut: S0 6.1 GiB, S3 8.2 GiB with the output layer's."
    )


def test_the_first_stages_most_held_is_the_apis_activations(client: TestClient) -> None:
    # The schedule's "held" is the most loaded card's: 4 micro-batches of stage 0's 8 blocks, the report's figure.
    page = _page(client, f"{LLAMA}&pp=4&microbatches=8&units=GB")
    answer = client.get("/api/memory?model=llama-3-8b&gpus=16&tp=2&pp=4&microbatches=8").json()
    assert {stage["activation_bytes"] for stage in answer["stages"]} == {4 * STAGE}
    table = [[" ".join(c.get_text(" ").split()) for c in tr.select("th, td")] for tr in page.select("#schedule tr")]
    # 26,323,451,904 B: 26.3 GB (to the byte in tests/domain/test_schedule.py).
    assert table[1][2] == "4 micro-batches, 26.3 GB"


def test_uneven_stages_hold_their_own_blocks(client: TestClient) -> None:
    # 32 blocks in 3 stages: 11, 11, 10. A block's micro-batch on a card of tp = 2 keeps 822,607,872 B (STAGE / 16);
    # the last stage adds the final norm's and output layer's inputs and the logits, 2,235,564,032 B
    # (15,397,289,984 − 16 × 822,607,872, tests/domain/test_schedule.py). S0 holds 3 micro-batches of 11 blocks,
    # 27,146,059,776 B = 25.3 GiB; S1 2 of 11, 16.9 GiB; S2 one of its 10 and the output layer's, 10,461,642,752 B.
    page = _page(client, "/?model=llama-3-8b&gpus=48&tp=2&phase=5&pp=3&microbatches=4")
    table = [[" ".join(c.get_text(" ").split()) for c in tr.select("th, td")] for tr in page.select("#schedule tr")]
    assert [row[2] for row in table[1:]] == [
        "3 micro-batches, 25.3 GiB",
        "2 micro-batches, 16.9 GiB",
        "1 micro-batch, 9.7 GiB",
    ]
    assert "A micro-batch of S0's 11 and S2's 10 blocks on one card of the cut: S0 8.4 GiB, S2 9.7 GiB" in _said(
        page, ".schedule-holds"
    )


def test_the_held_strip_of_the_first_stage_reaches_its_top_and_the_last_a_quarter_of_it(client: TestClient) -> None:
    page = _page(client, f"{LLAMA}&pp=4&microbatches=8")
    tops = []
    for row in page.select("#schedule .stage-row"):
        path = row.select_one("path.held")
        assert path is not None
        ys = [float(p.split(",")[1]) for p in str(path["d"]).replace("M", "L").replace(" Z", "").split("L")[1:]]
        tops.append(max(ys) - min(ys))
    # 20 units a strip for the most held (stage 0's 4 micro-batches), each stage's peak in bytes on that one
    # scale: the last stage's one micro-batch, with its output layer's, 20 × 8,816,427,008 / (4 × 6,580,862,976).
    assert tops == pytest.approx([20.0, 15.0, 10.0, 20 * LAST / (4 * STAGE)], abs=0.01)


def test_interleaved_with_2_chunks_a_card(client: TestClient) -> None:
    page = _page(client, f"{LLAMA}&pp=4&vpp=2&microbatches=8")
    assert _said(page, "#schedule-heading") == "Pipeline: interleaved 1F1B, 2 chunks a card, 4 stages, 8 micro-batches"
    assert _said(page, "#schedule-bubble") == "Bubble: (pp − 1)/(m · vpp) = 3/(8 · 2) = 3/16 = 18.8% of the ideal step."
    assert len(page.select("#schedule .stage-row")[0].select("rect.slot")) == 32
    assert len(page.select("#schedule rect.slot.odd")) == 4 * 16
    # 4 × (1 + 3/8) = 5.5 micro-batches' worth of a stage's 6.13 GiB: 33.7 GiB.
    assert round(5.5 * STAGE / GIB, 1) == 33.7
    assert _said(page, ".schedule-holds").startswith(
        "Held at most: S0 5.5 micro-batches’ worth (pp (1 + (pp − 1)/(pp · vpp)), Megatron's factor) = 33.7 GiB;"
    )
    assert "lighter: a card's odd-numbered chunks" in _said(page, ".schedule-key")


@pytest.mark.parametrize(
    ("query", "words"),
    [
        (
            "&pp=4&microbatches=256",
            "4 stages × 256 micro-batches are too many passes to draw beside the cards: the figures below are the "
            "schedule's.",
        ),
        (
            "&pp=4&vpp=2&microbatches=6",
            "Interleaved 1F1B takes the micro-batches in groups of pp = 4: 6 micro-batches is not a multiple of it, so "
            "its schedule is not drawn.",
        ),
    ],
)
def test_a_schedule_not_drawn_says_why_and_keeps_its_figures(client: TestClient, query: str, words: str) -> None:
    page = _page(client, LLAMA + query)
    assert page.select("#schedule svg") == []
    assert _said(page, ".schedule-note") == words
    assert _said(page, ".schedule-holds").startswith("Held at most: S0 ")


def test_a_bare_count_counts_no_activations(client: TestClient) -> None:
    page = _page(client, "/?params=8e9&gpus=8&pp=2&microbatches=4&phase=5")
    assert _said(page, ".schedule-holds") == (
        "Held at most: S0 2 micro-batches (min(pp, m) = 2); S1 1 micro-batch. No activations are counted (a bare "
        "weight count, or no micro-batch)."
    )


@pytest.mark.parametrize("url", ["/?model=llama-3-8b&gpus=16&phase=5", "/?model=llama-3-8b&gpus=16&microbatches=8"])
def test_no_pipeline_no_schedule(client: TestClient, url: str) -> None:
    assert _page(client, url).select("#schedule") == []


def test_at_rest_no_schedule(client: TestClient) -> None:
    assert _page(client, "/?model=llama-3-8b&gpus=16&tp=2&pp=4&microbatches=8").select("#schedule") == []


def test_an_embed_draws_a_long_pipelines_first_and_last_three_stages(client: TestClient) -> None:
    """16 stages: every one on the page's drawing, the first and the last three on the embed's (static/embed.css).

    Each row is 34 + 24 + 10 = 68 units: the page's drawing 4 + 16 × 68 + 30 = 1,122 units high, the embed's
    4 + 6 × 68 + 40 (the line saying the 10 left out) + 30 = 482.
    """
    page = _page(client, "/embed?model=deepseek-v3&gpus=2048&nodes=256&pp=16&ep=64&phase=10")
    roomy, ends = page.select("#schedule svg.roomy"), page.select("#schedule svg.ends")
    assert len(roomy) == len(ends) == 1
    assert [_said(r, ".stage-name") for r in roomy[0].select(".stage-row")] == [f"S{s}" for s in range(16)]
    assert [_said(r, ".stage-name") for r in ends[0].select(".stage-row")] == ["S0", "S1", "S2", "S13", "S14", "S15"]
    assert [r["data-stage"] for r in ends[0].select(".stage-row")] == ["0", "1", "2", "13", "14", "15"]
    assert _said(ends[0], ".left-out") == "⋮ S3 to S12: 10 more stages, left out here"
    assert roomy[0]["viewbox"] == "0 0 600 1122"
    assert ends[0]["viewbox"] == "0 0 600 482"
    assert "stages S3 to S12 left out" in str(ends[0]["aria-label"])
    # One hatch each, so the ids stay unique; the table of every stage's passes once.
    assert [p["id"] for p in page.select("#schedule pattern")] == ["schedule-idle", "schedule-idle-ends"]
    assert len(page.select("#schedule table tbody tr")) == 16


def test_a_short_pipeline_is_drawn_whole_in_an_embed_too(client: TestClient) -> None:
    page = _page(client, f"/embed{LLAMA[1:]}&pp=4&microbatches=8")
    assert [svg["class"] for svg in page.select("#schedule svg")] == [["schedule-svg"]]
