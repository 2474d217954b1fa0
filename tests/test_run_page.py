"""The page for the user's own run: inputs in the URL, the grid, bars, verdicts and table follow."""

from __future__ import annotations

import json
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from tests.conftest import cell_facts, dom, one, text


def _page(client: TestClient, query: str, headers: dict[str, str] | None = None) -> BeautifulSoup:
    response = client.get(f"/?{query}", headers=headers or {})
    assert response.status_code == 200, response.text[:500]
    return dom(response.text)


def _table(tree: BeautifulSoup, column: str) -> list[str]:
    return [text(row, column) for row in tree.select("table.figures tbody tr")]


def test_zero_paper_figure_1_on_the_page(client: TestClient) -> None:
    tree = _page(client, "model=custom&params=7.5B&gpus=64&units=GB")
    assert _table(tree, "td.per-gpu") == ["120.0 GB", "31.4 GB", "16.6 GB", "1.9 GB"]


@pytest.mark.parametrize("params", ["7.5e9", "7500000000", "7.5B"])
def test_params_in_every_notation_without_naming_the_model(client: TestClient, params: str) -> None:
    tree = _page(client, f"params={params}&gpus=64&units=GB")
    assert _table(tree, "td.per-gpu")[0] == "120.0 GB"
    assert one(tree, '#f-model option[value="custom"]').has_attr("selected")


@pytest.mark.parametrize(
    ("gpus", "cards", "weights"), [(1, 1, 1), (12, 12, 12), (16, 16, 16), (17, 8, 8), (4096, 8, 8)]
)
def test_grid_draws_every_card_up_to_sixteen_then_a_sample(
    client: TestClient, gpus: int, cards: int, weights: int
) -> None:
    tree = _page(client, f"gpus={gpus}&stage=zero1")
    grid = one(tree, "#grid")
    assert grid["data-gpus"] == str(gpus)
    drawn = {cell_facts(cell)["card"] for cell in grid.select(".cell")}
    assert len(drawn) == cards
    assert len(grid.select(".cell")) == cards * weights * 4
    # Its heading counts the cards as the table does, thousands separated.
    assert text(grid, "#grid-heading") == f"What each of the {gpus:,} cards holds under ZeRO-1"
    gaps = grid.select(".card-gap")
    assert len(gaps) == (1 if gpus > 16 else 0)
    if gpus > 16:
        assert f"GPU 4 to GPU {gpus - 5:,}" in gaps[0].get_text()
        assert drawn == {str(i) for i in (0, 1, 2, 3, gpus - 4, gpus - 3, gpus - 2, gpus - 1)}


def test_totals_stay_exact_on_a_sampled_grid(client: TestClient) -> None:
    tree = _page(client, "gpus=64&stage=zero3&model=custom&params=7.5B&units=GB")
    subs = {text(card, ".card-sub") for card in tree.select("#grid .card")}
    assert subs == {"0.25 B/weight · 1.9 GB"}


def test_a_band_of_zero_bytes_disappears(client: TestClient) -> None:
    tree = _page(client, "recipe=fp32-adam&stage=zero2")
    assert {cell_facts(c)["band"] for c in tree.select("#grid .cell")} == {"weights", "gradients", "moments"}
    assert [text(li, "strong") for li in tree.select(".legend ul.bands li")] == ["Weights", "Gradients", "Adam moments"]
    assert "(4 : 4 : 8)" in text(tree, ".legend p")


def test_custom_recipe(client: TestClient) -> None:
    query = "recipe=custom&weights_bytes=2&gradients_bytes=2&master_bytes=0&moments_bytes=1"
    tree = _page(client, query)
    assert _table(tree, "td.bpw")[0] == "5.00"
    assert [i.has_attr("readonly") for i in tree.select(".bands-field input")] == [False] * 4


@pytest.mark.parametrize(
    ("capacity", "fits"),
    [("80GiB", ["✗ does not fit", "✗ does not fit", "✗ does not fit", "✓ fits"]), ("", None)],
)
def test_verdicts_follow_the_capacity(client: TestClient, capacity: str, fits: list[str] | None) -> None:
    tree = _page(client, f"model=llama-3-70b&gpus=64&capacity={capacity}")
    if fits is None:
        assert tree.select("td.verdict-cell") == []
        assert tree.select(".bar .verdict") == []
        return
    assert _table(tree, "td.verdict-cell .verdict") == fits
    assert _table(tree, "td.verdict-cell .headroom")[-1] == "59.7 GiB left"
    # The same test as the verdict, the embedding (1,050,673,152 weights) kept as the largest layer, and
    # cut to three digits, never rounded up. By hand, data parallelism: 80 GiB / 16 B = 5,368,709,120.
    # ZeRO-1: 80 GiB / (4 + 12/64) B ≈ 20.51B. ZeRO-2: (80 GiB - 2 B × the layer's gradients) / (2 + 14/64) B
    # ≈ 37.77B. ZeRO-3: (80 GiB - 4 B × the layer) / 16 B = a slice of 5,106,040,832 weights, × 64 = 326.8B.
    assert _table(tree, "td.max-model") == ["5.36B weights", "20.5B weights", "37.7B weights", "326B weights"]


def test_each_card_has_a_bar_drawn_to_scale_against_the_capacity(client: TestClient) -> None:
    tree = _page(client, "model=llama-3-8b&gpus=8&capacity=80GiB&stage=zero1")
    bars = tree.select("#grid .card .bar svg")
    assert len(bars) == 8
    bar = bars[0]
    widths = {str(rect["class"][0]): float(str(rect["width"])) for rect in bar.select("rect")}
    per_gpu = 8_030_261_248 * (2 + 2 + 12 / 8)
    # ZeRO-1 fits (44.2 GB of 80 GiB), so the bar's full width is the card.
    assert sum(widths.values()) == pytest.approx(per_gpu / (80 * 2**30) * 100, abs=1e-3)
    assert widths["band-master"] == pytest.approx(8_030_261_248 * 4 / 8 / (80 * 2**30) * 100, abs=1e-3)
    assert float(str(one(bar, "line.capacity")["x1"])) == pytest.approx(100)
    assert text(tree, "#grid .card .verdict").startswith("✓ Fits:")


def test_zero3_bar_shows_the_gathered_layer_and_the_boundary(client: TestClient) -> None:
    tree = _page(client, "model=gpt-3-175b&gpus=1024&capacity=4GiB&stage=zero3")
    assert one(tree, "#grid .card .bar rect.gathered") is not None
    boundary = one(tree, ".boundary")
    assert "exceeds" in boundary["class"]
    assert "tensor parallelism" in text(boundary, ".boundary-verdict")
    assert "1,812,099,072 weights" in text(boundary, "p")


def test_largest_layer_unknown_for_a_bare_count_then_entered(client: TestClient) -> None:
    assert "unknown" in text(_page(client, "stage=zero3"), ".boundary-verdict")
    # 2B weights × (2 + 2) bytes = 8 GB = 7.45 GiB: over a 7 GiB card, under an 8 GiB one.
    assert "can gather it" in text(_page(client, "stage=zero3&largest_layer=2B&capacity=8GiB"), ".boundary-verdict")
    tree = _page(client, "stage=zero3&largest_layer=2B&capacity=7GiB")
    assert "2,000,000,000 weights (as entered)" in text(tree, ".boundary p")
    assert "tensor parallelism" in text(tree, ".boundary-verdict")


def test_notes_for_what_was_set_aside(client: TestClient) -> None:
    tree = _page(client, "model=llama-3-8b&params=5B")
    assert "Llama 3 8B has 8,030,261,248 weights" in text(tree, ".notes")
    tree = _page(client, "model=custom&params=1B&largest_layer=2B")
    assert "bigger than the whole model" in text(tree, ".notes")


def test_a_value_the_form_shows_read_only_is_not_sent_back_as_if_typed(client: TestClient) -> None:
    # Choosing another model sends the form: a read-only count (the last model's) must not come back
    # as "the count entered", nor a preset recipe's bytes as bytes entered.
    form = one(_page(client, "model=llama-3-8b"), "#run-form")
    assert one(form, "#f-params").has_attr("readonly")
    assert not one(form, "#f-params").has_attr("name")
    assert [i.get("name") for i in form.select(".bands-field input")] == [None] * 4
    # What a browser sends when the model is changed: every named field as it stands, the new model.
    sent = {str(i["name"]): str(i.get("value", "")) for i in form.select("input[name]")}
    for select in form.select("select[name]"):
        chosen = select.select_one("option[selected]") or select.select_one("option")
        sent[str(select["name"])] = str(chosen["value"]) if chosen else ""
    sent["model"] = "llama-3.1-405b"
    tree = _page(client, urlencode(sent))
    assert one(tree, "#grid")
    assert not tree.select(".notes")
    # Typed, they are sent: a custom model's count, a custom recipe's bytes.
    form = one(_page(client, "model=custom&params=5B&recipe=custom"), "#run-form")
    assert one(form, "#f-params")["name"] == "params"
    assert [i.get("name") for i in form.select(".bands-field input")] == [
        "weights_bytes", "gradients_bytes", "master_bytes", "moments_bytes"
    ]  # fmt: skip


def test_stage_links_keep_the_run(client: TestClient) -> None:
    tree = _page(client, "model=llama-3-8b&gpus=64&capacity=80GiB&units=GB&stage=zero1")
    href = str(one(tree, "#switch-zero3")["href"])
    assert parse_qs(urlsplit(href).query) == {
        "stage": ["zero3"], "model": ["llama-3-8b"], "gpus": ["64"], "capacity": ["80GiB"], "units": ["GB"],
        "from": ["zero1"],
    }  # fmt: skip


def test_fragment_pushes_the_short_canonical_url(client: TestClient) -> None:
    full_form = "stage=zero2&model=llama-3-8b&params=8030261248&gpus=64&recipe=mixed-adam&capacity=&units=GiB"
    response = client.get(f"/?{full_form}", headers={"HX-Request": "true"})
    assert response.headers["HX-Push-Url"] == "/?stage=zero2&model=llama-3-8b&gpus=64"
    assert "HX-Replace-Url" not in response.headers


def test_the_run_form_replaces_the_url_instead_of_pushing(client: TestClient) -> None:
    form = one(_page(client, "stage=zero1"), "form#run-form")
    assert form["hx-replace-url"] == "true"
    assert form.get("hx-push-url") is None
    headers = {"HX-Request": "true", **json.loads(str(form["hx-headers"]))}
    response = client.get("/?stage=zero2&model=llama-3-8b&gpus=64", headers=headers)
    assert response.headers["HX-Replace-Url"] == "/?stage=zero2&model=llama-3-8b&gpus=64"
    assert "HX-Push-Url" not in response.headers
    assert "ZB-History" in response.headers["Vary"]


def test_form_shows_the_run(client: TestClient) -> None:
    tree = _page(client, "model=llama-3-70b&gpus=64&capacity=80GiB&units=GB&stage=zero2")
    form = one(tree, "form#run-form")
    assert form["hx-get"] == "/"
    assert form["hx-trigger"] == "change delay:250ms, submit"
    assert one(form, 'input[name="stage"]')["value"] == "zero2"
    assert one(form, "#f-model option[selected]")["value"] == "llama-3-70b"
    assert one(form, "#f-params")["value"] == "70553706496"
    assert one(form, "#f-params").has_attr("readonly")
    assert one(form, "#f-gpus")["value"] == "64"
    assert one(form, "#f-capacity")["value"] == "80GiB"
    assert one(form, "#f-units option[selected]")["value"] == "GB"
    assert [o["value"] for o in form.select("#f-cards option")] == [
        "24GiB", "32GiB", "40GiB", "80GiB", "80GiB", "141GiB", "192GiB"
    ]  # fmt: skip
    assert one(form, 'button[type="submit"]') is not None


def test_sixteen_columns_label_every_other_weight_and_the_responsible_one(client: TestClient) -> None:
    card = _page(client, "gpus=16&stage=zero1").select("#grid .card")[3]
    labels = [span.get_text() for span in card.select(".axis span")]
    assert labels == ["0", "", "2", "3", "4", "", "6", "", "8", "", "10", "", "12", "", "14", ""]


def test_thousands_of_gpus_keep_their_figures(client: TestClient) -> None:
    tree = _page(client, "gpus=4096&stage=zero3&model=custom&params=406B&units=GB&capacity=80GB")
    # ZeRO-3: 16/4096 = 0.00390625 B/weight; × 406×10⁹ = 1,585,937,500 B.
    assert {text(card, ".card-sub") for card in tree.select("#grid .card")} == {"0.00391 B/weight · 1.6 GB"}
    # 80×10⁹ B over 16, 2 + 2 + 12/4096 (= 16396/4096), 2 + 14/4096 (= 8206/4096) and 16/4096 B/weight:
    # 5×10⁹, 19.985×10⁹, 39.93×10⁹ and 20.48×10¹² weights, cut (never rounded up) to three digits so
    # that the figure shown, entered as a model, still fits.
    assert _table(tree, "td.bpw") == ["16.00", "4.00", "2.00", "0.00391"]
    assert _table(tree, "td.max-model") == ["5B weights", "19.9B weights", "39.9B weights", "20.4T weights"]


def test_a_model_past_a_thousand_trillion_weights_keeps_its_t(client: TestClient) -> None:
    # 10¹³ B × 4096/16 = 2.56×10¹⁵ weights.
    tree = _page(client, "gpus=4096&model=custom&params=406B&capacity=10TB")
    assert _table(tree, "td.max-model")[-1] == "2,560T weights"


@pytest.mark.parametrize(
    ("model", "gpus", "capacity"),
    [
        ("llama-3.1-405b", 1024, "80GB"),
        ("llama-3-8b", 8, "16GiB"),
        ("gpt-3-175b", 64, "40GiB"),
        ("seed-30b", 8, "24GiB"),
    ],
)
@pytest.mark.parametrize("stage", ["dp", "zero1", "zero2", "zero3"])
def test_the_largest_model_that_fits_entered_fits_and_one_percent_more_does_not(
    client: TestClient, model: str, gpus: int, capacity: str, stage: str
) -> None:
    tree = _page(client, f"model={model}&gpus={gpus}&capacity={capacity}")
    shown = text(tree, f"table.figures tr[data-stage={stage}] td.max-model").removesuffix(" weights")
    body = client.get("/api/memory", params={"model": model}).json()
    layer = body["inputs"].get("largest_layer")
    run = f"model=custom&gpus={gpus}&capacity={capacity}" + (f"&largest_layer={layer}" if layer else "")
    entered = _page(client, f"{run}&params={shown}")
    assert text(entered, f"table.figures tr[data-stage={stage}] td.verdict-cell .verdict") == "✓ fits"
    more = (
        client.get("/api/memory", params={"model": "custom", "params": shown}).json()["inputs"]["params"] * 101 // 100
    )
    bigger = _page(client, f"{run}&params={more}")
    assert text(bigger, f"table.figures tr[data-stage={stage}] td.verdict-cell .verdict") == "✗ does not fit"


@pytest.mark.parametrize("params", ["7.5e+09", "7.5e+9", "7.50E+09"])
def test_an_exponent_typed_into_the_address_reads_although_its_plus_arrives_as_a_space(
    client: TestClient, params: str
) -> None:
    # A raw '+' in a query string means a space: the server receives '7.5e 09'.
    response = client.get(f"/?params={params}&gpus=64&units=GB")
    assert response.status_code == 200
    assert _table(dom(response.text), "td.per-gpu") == ["120.0 GB", "31.4 GB", "16.6 GB", "1.9 GB"]
    api = client.get(f"/api/memory?params={params}&capacity=1e+11")
    assert api.status_code == 200
    assert (api.json()["inputs"]["params"], api.json()["inputs"]["capacity"]) == (7_500_000_000, 10**11)


@pytest.mark.parametrize(("gpus", "said"), [("1", "out of 1 weight × 16 B"), ("2", "out of 2 weights × 16 B")])
def test_the_note_under_the_cards_counts_its_weights_in_words(client: TestClient, gpus: str, said: str) -> None:
    note = text(dom(client.get(f"/?stage=dp&gpus={gpus}").text), "#grid .grid-note")
    assert said in note
