"""app/web/table_view.py: the comparison table, its verdicts and largest models, and ZeRO-3's boundary."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.domain.stages import Stage
from tests.conftest import dom, full_run_only, one, text
from tests.web.helpers import run_page, stage_page, table_cells

SEED_TABLE = [
    ["Data parallelism", "16.00", "447.0 GiB", "2P"],
    ["ZeRO-1", "5.50", "153.7 GiB", "2P"],
    ["ZeRO-2", "3.75", "104.8 GiB", "2P"],
    ["ZeRO-3", "2.00", "55.9 GiB", "3P"],
]


@pytest.mark.parametrize("stage", list(Stage))
def test_table_shows_the_seed_figures_with_the_current_row_marked(client: TestClient, stage: Stage) -> None:
    rows = stage_page(client, stage).select("table.figures tbody tr")
    shown = [
        [
            text(row, "th a"),
            text(row, "td.bpw"),
            text(row, "td.per-gpu"),
            text(row, ".comm"),
        ]
        for row in rows
    ]
    assert shown == SEED_TABLE
    assert [row.get("aria-current") for row in rows] == ["true" if s is stage else None for s in Stage]


def test_table_explains_what_the_traffic_is_made_of(client: TestClient) -> None:
    rows = {row["data-stage"]: text(row, ".breakdown")
            for row in stage_page(client, Stage.DP).select("table.figures tbody tr")}  # fmt: skip
    assert rows["dp"] == (
        "reduce-scatter of the gradients after the backward pass + all-gather of the gradients to finish the all-reduce"
    )
    assert rows["zero3"].count("all-gather of the weights") == 2


def test_zero_paper_figure_1_on_the_page(client: TestClient) -> None:
    tree = run_page(client, "model=custom&params=7.5B&gpus=64&units=GB")
    assert table_cells(tree, "td.per-gpu") == ["120.0 GB", "31.4 GB", "16.6 GB", "1.9 GB"]


@pytest.mark.parametrize(
    ("capacity", "fits"),
    [("80GiB", ["✗ does not fit", "✗ does not fit", "✗ does not fit", "✓ fits"]), ("", None)],
)
def test_verdicts_follow_the_capacity(client: TestClient, capacity: str, fits: list[str] | None) -> None:
    tree = run_page(client, f"model=llama-3-70b&gpus=64&capacity={capacity}&batch=0")
    if fits is None:
        assert tree.select("td.verdict-cell") == []
        assert tree.select(".bar .verdict") == []
        return
    assert table_cells(tree, "td.verdict-cell .verdict") == fits
    assert table_cells(tree, "td.verdict-cell .headroom")[-1] == "59.7 GiB left"
    # The same test as the verdict, the embedding (1,050,673,152 weights) kept as the largest layer, and
    # cut to three digits, never rounded up. By hand, data parallelism: 80 GiB / 16 B = 5,368,709,120.
    # ZeRO-1: 80 GiB / (4 + 12/64) B ≈ 20.51B. ZeRO-2: (80 GiB - 2 B × the layer's gradients) / (2 + 14/64) B
    # ≈ 37.77B. ZeRO-3: (80 GiB - 4 B × the layer) / 16 B = a slice of 5,106,040,832 weights, × 64 = 326.8B.
    assert table_cells(tree, "td.max-model") == ["5.36B weights", "20.5B weights", "37.7B weights", "326B weights"]


def test_zero3_bar_shows_the_gathered_layer_and_the_boundary(client: TestClient) -> None:
    tree = run_page(client, "model=gpt-3-175b&gpus=1024&capacity=4GiB&stage=zero3&batch=0")
    # By hand: the largest layer, 1,812,099,072 weights, gathered in bf16 is 3,624,198,144 B = 3.375 GiB, and
    # its bf16 gradients as much; with no activations (batch=0), on the bar's one scale, data parallelism's
    # 16 B × 174,604,259,328 weights, each is 0.130% of it, stacked after the state at rest.
    hand = one(tree, "#grid .card .card-bar").select("rect.in-hand")
    assert [(r["class"], r.get_text(strip=True)) for r in hand] == [
        (["gathered", "in-hand"], "one layer's weights, assembled from their owners: 3.4 GiB"),
        (["sent", "in-hand"], "one layer's gradients, computed here before they are reduce-scattered: 3.4 GiB"),
    ]
    share = 3_624_198_144 / (16 * 174_604_259_328) * 100
    assert [float(str(r["width"])) for r in hand] == pytest.approx([share, share], abs=1e-4)
    boundary = one(tree, ".boundary")
    assert "exceeds" in boundary["class"]
    assert "tensor parallelism" in text(boundary, ".boundary-verdict")
    assert "1,812,099,072 weights" in text(boundary, "p")


def test_tensor_parallelism_halves_zero3s_layer(client: TestClient) -> None:
    # GPT-3 175B's largest layer, a block of 1,812,099,072 weights, at 2 + 2 B is 6.75 GiB: over a 4 GiB card. With
    # tp = 8 a card assembles 1/8 of its matrices and its two LayerNorms' 49,152 weights whole:
    # (1,812,099,072 − 49,152)/8 + 49,152 = 226,555,392 weights × 4 B = 906,221,568 B = 0.84 GiB, which fits.
    tree = run_page(client, "model=gpt-3-175b&gpus=1024&capacity=4GiB&stage=zero3&batch=0&tp=8")
    boundary = one(tree, ".boundary")
    assert "exceeds" not in boundary["class"]
    assert "1,812,099,072 weights, of which a card of tp=8 assembles 1/8" in text(boundary, "p")
    assert "0.84 GiB" in text(boundary, "p")


def test_largest_layer_unknown_for_a_bare_count_then_entered(client: TestClient) -> None:
    assert "unknown" in text(run_page(client, "stage=zero3&model=zero-7.5b"), ".boundary-verdict")
    # 2B weights × (2 + 2) bytes = 8 GB = 7.45 GiB: over a 7 GiB card, under an 8 GiB one.
    assert "can gather it" in text(run_page(client, "stage=zero3&largest_layer=2B&capacity=8GiB"), ".boundary-verdict")
    tree = run_page(client, "stage=zero3&largest_layer=2B&capacity=7GiB")
    assert "2,000,000,000 weights (as entered)" in text(tree, ".boundary p")
    assert "tensor parallelism" in text(tree, ".boundary-verdict")


def test_thousands_of_gpus_keep_their_figures(client: TestClient) -> None:
    tree = run_page(client, "gpus=4096&stage=zero3&model=custom&params=406B&units=GB&capacity=80GB")
    # ZeRO-3: 16/4096 = 0.00390625 B/weight; × 406×10⁹ = 1,585,937,500 B.
    assert {text(card, ".card-sub") for card in tree.select("#grid .card")} == {"0.00391 B/weight · 1.6 GB"}
    # 80×10⁹ B over 16, 2 + 2 + 12/4096 (= 16396/4096), 2 + 14/4096 (= 8206/4096) and 16/4096 B/weight:
    # 5×10⁹, 19.985×10⁹, 39.93×10⁹ and 20.48×10¹² weights, cut (never rounded up) to three digits so
    # that the figure shown, entered as a model, still fits.
    assert table_cells(tree, "td.bpw") == ["16.00", "4.00", "2.00", "0.00391"]
    assert table_cells(tree, "td.max-model") == ["5B weights", "19.9B weights", "39.9B weights", "20.4T weights"]


def test_a_model_past_a_thousand_trillion_weights_keeps_its_t(client: TestClient) -> None:
    # 10¹³ B × 4096/16 = 2.56×10¹⁵ weights.
    tree = run_page(client, "gpus=4096&model=custom&params=406B&capacity=10TB")
    assert table_cells(tree, "td.max-model")[-1] == "2,560T weights"


@pytest.mark.parametrize(
    ("model", "gpus", "capacity"),
    [
        ("llama-3.1-405b", 1024, "80GB"),
        *full_run_only(("llama-3-8b", 8, "16GiB"), ("gpt-3-175b", 64, "40GiB")),
        ("seed-30b", 8, "80GiB"),  # one of its layers, 3.75e9 weights, is 60 GB under data parallelism
    ],
)
@pytest.mark.parametrize("stage", ["dp", "zero1", "zero2", "zero3"])
def test_the_largest_model_that_fits_entered_fits_and_one_percent_more_does_not(
    client: TestClient, model: str, gpus: int, capacity: str, stage: str
) -> None:
    # Model states only: a count re-entered has no shape, so no activations (tests/web/test_activations.py).
    tree = run_page(client, f"model={model}&gpus={gpus}&capacity={capacity}&batch=0")
    shown = text(tree, f"table.figures tr[data-stage={stage}] td.max-model").removesuffix(" weights")
    body = client.get("/api/memory", params={"model": model}).json()
    layer = body["inputs"].get("largest_layer")
    run = f"model=custom&gpus={gpus}&capacity={capacity}" + (f"&largest_layer={layer}" if layer else "")
    entered = run_page(client, f"{run}&params={shown}")
    assert text(entered, f"table.figures tr[data-stage={stage}] td.verdict-cell .verdict") == "✓ fits"
    more = (
        client.get("/api/memory", params={"model": "custom", "params": shown}).json()["inputs"]["params"] * 101 // 100
    )
    bigger = run_page(client, f"{run}&params={more}")
    assert text(bigger, f"table.figures tr[data-stage={stage}] td.verdict-cell .verdict") == "✗ does not fit"


def test_the_largest_model_that_fits_never_exceeds_what_the_form_accepts(client: TestClient) -> None:
    # ZeRO-3 on 4,096 cards of 10¹⁵ B, 16 B per weight in all: 4,096 × 10¹⁵ / 16 = 2.56 × 10¹⁷
    # weights would fit, but the form reads counts below 10¹⁶. Capped at its largest, cut to three
    # figures: at least 9,990T weights, which the form accepts and which fits.
    tree = run_page(client, "params=1e15&gpus=4096&capacity=1e15&stage=zero3")
    assert table_cells(tree, "td.max-model")[-1] == "at least 9,990T weights"
    # Data parallelism's own largest is within reach, so it is the figure itself: 10¹⁵ B / 16 B = 62.5T.
    assert table_cells(tree, "td.max-model")[0] == "62.5T weights"
    entered = client.get("/?params=9,990T&gpus=4096&capacity=1e15&stage=zero3")
    assert entered.status_code == 200
    assert table_cells(dom(entered.text), "td.verdict-cell")[-1].startswith("✓ fits")
    assert client.get("/?params=256000T&gpus=4096&capacity=1e15&stage=zero3").status_code == 422


@pytest.mark.parametrize(
    ("query", "heading"),
    [
        ("params=7", "7-weight model per GPU"),
        ("params=1", "1-weight model per GPU"),
        ("params=999", "999-weight model per GPU"),
        ("params=7.5B", "7.5B model per GPU"),
        ("", "30B model per GPU"),
    ],
)
def test_the_tables_model_column_reads_as_a_phrase_for_any_size(client: TestClient, query: str, heading: str) -> None:
    tree = run_page(client, query)
    headings = [th.get_text(strip=True) for th in tree.select("table.figures thead th")]
    assert heading in headings
    assert {td["data-label"] for td in tree.select("table.figures td.per-gpu")} == {heading}


def test_activations_and_the_largest_micro_batch_have_their_columns(client: TestClient) -> None:
    tree = run_page(client, "model=llama-3-8b&capacity=80GiB&stage=zero3")
    # Every stage keeps the same activations: 32 blocks × 1,376,780,288 B, the output layer's inputs
    # (134,217,728 B) and the logits (4,202,692,608 B): 48,393,660,416 B = 45.1 GiB.
    # Said under each peak, of which they are part.
    assert table_cells(tree, "td.peak-cell span.activations") == ["45.1 GiB activations"] * 4
    # DP's states alone are 119.7 GiB; ZeRO-1's 41.1 GiB + 45.1 GiB of activations is over 80 GiB.
    assert table_cells(tree, "td.max-batch") == [
        "none: the model states alone are too big",
        "0: not one sequence",
        "1 sequence",
        "1 sequence",
    ]


def test_a_bare_count_has_no_activation_columns_and_says_why(client: TestClient) -> None:
    tree = run_page(client, "model=zero-7.5b&capacity=80GB")
    assert tree.select("span.activations") == []
    assert tree.select("td.max-batch") == []
    assert "has no layer shapes: its activations are not counted" in text(tree, ".table-note")
    # The lesson's picture says nothing of the activations it has no shape for.
    assert "activations" not in text(tree, ".grid-note")


def test_the_overheads_are_one_click_from_the_verdict_and_back(client: TestClient) -> None:
    tree = run_page(client, "model=llama-3-8b&capacity=80GiB&stage=zero3")
    hints = tree.select("td.verdict-cell a.overhead-hint")
    assert len(hints) == 4
    said = hints[3].get_text(" ", strip=True)
    # Said as what the verdict leaves out, not as a figure to add to the one over it (issue 45).
    assert said.startswith("not counting ")
    assert said.endswith("of overheads: count them")
    counted = run_page(client, str(hints[3]["href"]).split("?", 1)[1].split("#")[0])
    assert counted.select("td.verdict-cell a.overhead-hint") == []
    assert len(counted.select("td.peak-cell span.overheads")) == 4
    # Kept all through the step, as the state is: drawn right after the bands, before the tick at rest.
    parts = [r["class"][0] for r in counted.select("#grid .card")[0].select(".bar rect")]
    assert parts[4] == "overheads"
    assert "Hatched: " in text(counted, ".grid-note")
    # The list under the table names each item with its source, and the way back to the theory alone.
    items = [text(row, "th") for row in counted.select("table.overhead-items tbody tr")]
    assert items == ["CUDA context", "NCCL buffers", "Reduce bucket", "Prefetched weights", "Allocator fragmentation"]
    back = one(counted, "details.overheads p a")
    assert "overheads=" not in str(back["href"])


@pytest.mark.parametrize(
    ("query", "host", "pcie"),
    [
        ("", None, None),
        # ZeRO-1 to 3 offload 12, 14 and 16 B per weight of a card's slice: × 30e9 / 8 × 8 cards a node.
        (
            "offload=optimizer%2Bparams",
            ["0 GiB", "335.3 GiB", "391.2 GiB", "447.0 GiB"],
            [None, "14.0", "14.0", "21.0"],
        ),
    ],
)
def test_the_host_column_with_offload(
    client: TestClient, query: str, host: list[str] | None, pcie: list[str | None] | None
) -> None:
    tree = run_page(client, query)
    if host is None:
        assert tree.select("table.figures .host-cell") == []
        return
    assert table_cells(tree, ".host-cell") == host
    rows = tree.select("table.figures tbody tr")
    said = [row.select_one(".pcie") for row in rows]
    assert [None if s is None else s.get_text().split()[1] for s in said] == pcie


def test_zero3s_limit_and_its_row_say_one_verdict(client: TestClient) -> None:
    # Llama 3 70B, 64 cards of 80 GB, 4,096 tokens: its output head assembled, 3.9 GiB, fits on 74.5 GiB, but the
    # activations alone (103.3 GiB at the peak) do not, so the ZeRO-3 row's largest model is none (issue 45).
    tree = run_page(client, "model=llama-3-70b&gpus=64&capacity=80GB&seq=4096&recompute=selective&stage=zero3")
    row = one(tree, "table.figures tr[data-stage=zero3]")
    assert text(row, "td.max-model") == "none: one layer and this micro-batch's activations are too big"
    verdict = text(tree, ".boundary-verdict")
    assert verdict.startswith("One assembled layer fits on the card alone, but not beside this micro-batch's ")
    assert "(103.3 GiB at the peak)" in verdict
    assert "can gather it" not in verdict
    # Where a model does fit under ZeRO-3, the box says the layer can be gathered.
    fits = run_page(client, "model=llama-3-70b&gpus=64&capacity=80GB&seq=4096&recompute=full&stage=zero3")
    assert "can gather it" in text(fits, ".boundary-verdict")


@pytest.mark.parametrize(("gpus", "said"), [(1, True), (8, False)])
def test_one_gpu_says_once_that_every_row_is_the_same(client: TestClient, gpus: int, said: bool) -> None:
    notes = [p.get_text(" ") for p in run_page(client, f"model=llama-3-8b&gpus={gpus}").select(".table-note")]
    assert any("With one GPU every arrangement is the same" in note for note in notes) is said
