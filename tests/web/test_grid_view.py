"""app/web/grid_view.py: the cards at rest, their columns and cells, as the page draws them."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.domain.recipes import Band
from app.domain.stages import Stage
from tests.conftest import cell_facts, cell_selector, one, text
from tests.web.helpers import HX, run_page, stage_page


@pytest.mark.parametrize(
    ("stage", "solid"),
    [
        (Stage.DP, [64, 64, 64, 64]),
        (Stage.ZERO1, [64, 64, 8, 8]),
        (Stage.ZERO2, [64, 8, 8, 8]),
        (Stage.ZERO3, [8, 8, 8, 8]),
    ],
)
@pytest.mark.parametrize("headers", [{}, HX], ids=["page", "fragment"])
def test_grid_cells(client: TestClient, stage: Stage, solid: list[int], headers: dict[str, str]) -> None:
    tree = stage_page(client, stage, headers)
    grid = tree.select_one("#grid")
    assert grid is not None
    assert grid["data-stage"] == stage.value
    cells = [cell_facts(c) for c in grid.select(".cell")]
    assert len(cells) == 8 * 8 * 4
    assert {(c["card"], c["weight"], c["band"]) for c in cells} == {
        (str(card), str(weight), band.value) for card in range(8) for weight in range(8) for band in Band
    }
    counts = [sum(1 for c in cells if c["band"] == band and c["state"] == "solid") for band in Band]
    assert counts == solid
    assert {c["state"] for c in cells} <= {"solid", "dashed"}


def test_every_cell_names_its_weight_band_and_holder_its_card_by_its_heading(client: TestClient) -> None:
    cells = stage_page(client, Stage.ZERO1).select("#grid .cell")
    for cell in cells:
        label = str(cell["aria-label"])
        facts = cell_facts(cell)
        assert cell["role"] == "img"
        assert label.startswith(f"Weight {facts['weight']}, ")
        # The card is named once, by its heading, above its cells.
        card = cell.find_parent("section", class_="card")
        assert card is not None
        assert text(card, "h3") == f"GPU {facts['card']}"
        if facts["state"] == "dashed":
            assert f"GPU {facts['weight']} holds it on this weight's behalf" in label
    dashed_master = stage_page(client, Stage.ZERO1).select_one(cell_selector(2, 5, "master"))
    assert dashed_master is not None
    assert dashed_master["aria-label"] == (
        "Weight 5, Master copy (fp32, 4 B): not stored here. GPU 5 holds it on this weight's behalf."
    )


@pytest.mark.parametrize("query", ["stage=zero2", "stage=zero3&phase=9", "stage=zero1&offload=optimizer"])
def test_grid_has_exactly_one_tab_stop_the_first_card(client: TestClient, query: str) -> None:
    # The cells are hidden from assistive tech (the card's sentence is read instead), so none is a tab stop:
    # the first card is, and the arrow keys go on from it into its cells (static/grid.js).
    tree = run_page(client, query)
    assert [str(c["data-card-index"]) for c in tree.select('#grid [tabindex="0"]')] == ["0"]
    assert {c["tabindex"] for c in tree.select("#grid .cell")} == {"-1"}
    assert {c["tabindex"] for c in tree.select("#grid .card")[1:]} == {"-1"}


@pytest.mark.parametrize(
    ("stage", "held", "per_weight", "per_gpu"),
    [
        (Stage.DP, "128 B", "16.00", "447.0 GiB"),
        (Stage.ZERO1, "44 B", "5.50", "153.7 GiB"),
        (Stage.ZERO2, "30 B", "3.75", "104.8 GiB"),
        (Stage.ZERO3, "16 B", "2.00", "55.9 GiB"),
    ],
)
def test_each_card_shows_its_total(client: TestClient, stage: Stage, held: str, per_weight: str, per_gpu: str) -> None:
    cards = stage_page(client, stage).select("#grid .card")
    assert [text(card, "h3") for card in cards] == [f"GPU {i}" for i in range(8)]
    for card in cards:
        # Real quantities only: the picture's own scale (its 8 weights, "16 B of 128 B") is not one.
        assert card.select(".card-total") == []
        assert "128 B" not in card.get_text()
        assert text(card, ".card-sub") == f"{per_weight} B/weight · {per_gpu}"


def test_bands_are_drawn_in_proportion_to_their_bytes(client: TestClient) -> None:
    column = one(stage_page(client, Stage.DP), "#grid .column")
    classes = [next(c for c in cell["class"] if c.startswith("nb-")) for cell in column.select(".cell")]
    assert classes == ["nb-2", "nb-2", "nb-4", "nb-8"]


def test_responsible_weight_is_marked_only_when_something_is_sharded(client: TestClient) -> None:
    assert stage_page(client, Stage.DP).select("#grid .axis .responsible") == []
    marked = stage_page(client, Stage.ZERO1).select("#grid .card .axis .responsible")
    assert [m.get_text() for m in marked] == [str(i) for i in range(8)]


@pytest.mark.parametrize(
    ("stage", "sharded"),
    [
        (Stage.DP, set()),
        (Stage.ZERO1, {"master", "moments"}),
        (Stage.ZERO2, {"gradients", "master", "moments"}),
        (Stage.ZERO3, {"weights", "gradients", "master", "moments"}),
    ],
)
def test_a_cell_claims_responsibility_only_for_a_band_the_stage_splits(
    client: TestClient, stage: Stage, sharded: set[str]
) -> None:
    # On the card responsible for a weight (card i, weight i), a band the stage keeps whole is still
    # every card's own copy: under data parallelism no card is responsible for anything.
    tree = stage_page(client, stage)
    for card in range(8):
        for cell in tree.select(cell_selector(card, card)):
            band, label = cell_facts(cell)["band"], str(cell["aria-label"])
            assert label.endswith(
                f"which is responsible for weight {card}." if band in sharded else "every card keeps its own copy."
            ), label


@pytest.mark.parametrize(
    ("gpus", "cards", "weights"), [(1, 1, 1), (12, 12, 12), (16, 16, 16), (17, 8, 8), (4096, 8, 8), (36, 8, 8)]
)
def test_grid_draws_every_card_up_to_sixteen_then_a_sample(
    client: TestClient, gpus: int, cards: int, weights: int
) -> None:
    tree = run_page(client, f"gpus={gpus}&stage=zero1")
    grid = one(tree, "#grid")
    assert grid["data-gpus"] == str(gpus)
    drawn = {cell_facts(cell)["card"] for cell in grid.select(".cell")}
    assert len(drawn) == cards
    assert len(grid.select(".cell")) == cards * weights * 4
    # Its heading counts the cards as the table does, thousands separated.
    assert text(grid, "#grid-heading") == f"What each of the {gpus:,} cards holds under ZeRO-1"
    gaps = [g.get_text(" ", strip=True) for g in grid.select(".card-gap, .network-link")]
    if gpus % 8 and gpus > 16:  # one node: one gap between the first four cards and the last four
        assert gaps == [f"… GPU 4 to GPU {gpus - 5:,}: the same pattern"]
    elif gpus > 16:  # nodes of 8: the rest of the first node, the nodes between, the start of the last
        nodes = gpus // 8
        assert gaps == [
            "… GPU 4 to GPU 7: the same pattern",
            f"Network between nodes: 400 Gb/s a card. Nodes 1 to {nodes - 2:,}: the same pattern",
            f"… GPU {gpus - 8:,} to GPU {gpus - 5:,}: the same pattern",
        ]
    else:
        assert gaps == ([] if gpus <= 8 else ["Network between nodes: 400 Gb/s a card"] * (gpus % 8 == 0))
    if gpus > 16:
        assert drawn == {str(i) for i in (0, 1, 2, 3, gpus - 4, gpus - 3, gpus - 2, gpus - 1)}


def test_totals_stay_exact_on_a_sampled_grid(client: TestClient) -> None:
    tree = run_page(client, "gpus=64&stage=zero3&model=custom&params=7.5B&units=GB")
    subs = {text(card, ".card-sub") for card in tree.select("#grid .card")}
    assert subs == {"0.25 B/weight · 1.9 GB"}


def test_sixteen_columns_label_every_other_weight_and_the_responsible_one(client: TestClient) -> None:
    card = run_page(client, "gpus=16&stage=zero1").select("#grid .card")[3]
    labels = [span.get_text() for span in card.select(".axis span")]
    assert labels == ["0", "", "2", "3", "4", "", "6", "", "8", "", "10", "", "12", "", "14", ""]


@pytest.mark.parametrize(
    ("query", "frozen_columns"),
    [
        # A quarter trains: the middles of the first six of 8 columns (1/16 to 11/16) fall in the frozen 75 %.
        ("model=llama-3-8b&trainable=0.25&stage=zero1&batch=0", 6),
        ("model=llama-3-8b&lora_rank=16&stage=zero3&batch=0", 8),  # LoRA freezes every base weight
        # Rank 256 on all-linear adds 671,088,640 adapters, 7.7% of the weights: still none drawn (they were
        # once counted as the last weights, and the last column's middle, at 15/16, fell among them).
        ("model=llama-3-8b&lora_rank=256&lora_targets=all-linear&stage=zero2&batch=0", 8),
        ("model=llama-3-8b&stage=zero3&batch=0", 0),
    ],
)
def test_frozen_columns_keep_their_weights_band_only(client: TestClient, query: str, frozen_columns: int) -> None:
    tree = run_page(client, query)
    stacks = [len(column.select(".cell")) for column in one(tree, "#grid .card").select(".plot .column[data-weight]")]
    assert stacks.count(1) == frozen_columns
    assert stacks.count(4) == 8 - frozen_columns
    note = text(tree, ".grid-note")
    assert ("a frozen weight has no gradient and needs no optimizer state" in note) == bool(frozen_columns)


# (query, the bands each card keeps, the bands in its host's strip, the strip's height in 48ths).
HOSTED = [
    ("stage=zero1", ["weights", "gradients", "master", "moments"], [], None),
    ("stage=dp&offload=optimizer", ["weights", "gradients", "master", "moments"], [], None),
    ("stage=zero1&offload=optimizer", ["weights", "gradients"], ["master", "moments"], "hs-36"),
    ("stage=zero2&offload=optimizer", ["weights"], ["gradients", "master", "moments"], "hs-42"),
    ("stage=zero3&offload=optimizer%2Bparams", [], ["weights", "gradients", "master", "moments"], "hs-48"),
]


@pytest.mark.parametrize(("query", "on_card", "on_host", "share"), HOSTED)
def test_offloaded_bands_leave_the_card_for_its_hosts_strip(
    client: TestClient, query: str, on_card: list[str], on_host: list[str], share: str | None
) -> None:
    tree = run_page(client, query)
    for card in tree.select("#grid section.card"):
        plot = one(card, ".plot")
        assert sorted({cell_facts(c)["band"] for c in plot.select(".cell")}) == sorted(on_card)
        hosts = card.select(".host")
        if not on_host:
            assert hosts == []
            continue
        (host,) = hosts
        cells = host.select(".cell")
        assert sorted({cell_facts(c)["band"] for c in cells}) == sorted(on_host)
        assert all("on-host" in c["class"] for c in cells)
        assert all("Offloaded: it lives in the server's CPU memory" in str(c["aria-label"]) for c in cells)
        assert text(host, ".host-title") == "Host: the server's CPU memory, pinned"
        # The card's plot and the strip share its height: the strip's share is the moved bytes of 16.
        assert share in one(card, ".stack")["class"]
    # Still exactly one tab stop in the grid: the first card.
    assert [str(c["data-card-index"]) for c in tree.select('#grid [tabindex="0"]')] == ["0"]


def test_a_frozen_weight_has_nothing_to_offload(client: TestClient) -> None:
    tree = run_page(client, "model=llama-3-8b&stage=zero1&offload=optimizer&trainable=50%25")
    card = one(tree, '#grid section.card[data-card-index="0"]')
    host_columns = one(card, ".host").select(".column")
    # Weights 0-3 are frozen: no master copy or moments in the strip, their places left blank.
    assert [len(c.select(".cell")) for c in host_columns] == [0, 0, 0, 0, 2, 2, 2, 2]
    assert [len(c.select(".away")) for c in host_columns[:4]] == [2, 2, 2, 2]
