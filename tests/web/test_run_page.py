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


# Widths in percent of the bar, worked by hand; the bar runs to the stage's peak on one card.
_LLAMA_8B, _LLAMA_8B_EMBEDDING = 8_030_261_248, 128_256 * 4096
_BARS = [
    # ZeRO-1 adds nothing for a layer: the bar is its state at rest, 2 + 2 + 12/8 = 5.5 B/weight,
    # the master copy 0.5 of it. The 80 GiB card (86e9 B) is past the bar's end (44.2e9 B).
    (
        "model=llama-3-8b&gpus=8&capacity=80GiB&stage=zero1",
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
        "model=llama-3-8b&gpus=64&stage=zero3&capacity=4GiB",
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
        "model=llama-3-8b&capacity=64GiB&stage=dp",
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
    tree = _page(client, query)
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


def test_zero3_bar_shows_the_gathered_layer_and_the_boundary(client: TestClient) -> None:
    tree = _page(client, "model=gpt-3-175b&gpus=1024&capacity=4GiB&stage=zero3")
    assert one(tree, "#grid .card .bar rect.gathered") is not None
    boundary = one(tree, ".boundary")
    assert "exceeds" in boundary["class"]
    assert "tensor parallelism" in text(boundary, ".boundary-verdict")
    assert "1,812,099,072 weights" in text(boundary, "p")


def test_largest_layer_unknown_for_a_bare_count_then_entered(client: TestClient) -> None:
    assert "unknown" in text(_page(client, "stage=zero3&model=zero-7.5b"), ".boundary-verdict")
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
    assert form["hx-trigger"] == "input changed delay:400ms, submit"
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
        ("seed-30b", 8, "80GiB"),  # one of its layers, 3.75e9 weights, is 60 GB under data parallelism
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


@pytest.mark.parametrize(("gpus", "said"), [("1", "its memory, 447.0 GiB,"), ("2", "its memory, 447.0 GiB,")])
def test_the_note_under_the_cards_says_what_the_bar_is(client: TestClient, gpus: str, said: str) -> None:
    # 16 B × 30e9 weights = 480e9 B = 447.0 GiB on every card under data parallelism; the picture's own
    # scale (its 8 weights of 16 B) is not a quantity a student meets.
    note = text(dom(client.get(f"/?stage=dp&gpus={gpus}").text), "#grid .grid-note")
    assert said in note
    assert " B." not in note


RUN = "params=7&largest_layer=5&gpus=16&recipe=fp32-adam&units=GB"


@pytest.mark.parametrize("headers", [{}, {"HX-Request": "true"}], ids=["page", "swap"])
def test_the_json_links_carry_the_run_drawn_and_answer_for_it(client: TestClient, headers: dict[str, str]) -> None:
    tree = _page(client, f"{RUN}&stage=zero3&phase=3&theme=projector", headers)
    links = one(tree, "#json-links")
    # A swap replaces the footer's links out of band: the footer itself is not swapped.
    assert links.get("hx-swap-oob") == ("innerHTML" if headers else None)
    memory, layout = one(links, "a:nth-of-type(1)")["href"], one(links, "a:nth-of-type(3)")["href"]
    assert isinstance(memory, str)
    assert isinstance(layout, str)
    run = parse_qs(RUN)
    # The run's parameters, and the stage for the layout; not the phase or the theme, which the JSON has not.
    assert urlsplit(memory).path == "/api/memory"
    assert parse_qs(urlsplit(memory).query) == run
    assert urlsplit(layout).path == "/api/layout"
    assert parse_qs(urlsplit(layout).query) == {**run, "stage": ["zero3"]}
    inputs = client.get(memory).json()["inputs"]
    assert (inputs["params"], inputs["gpus"], inputs["largest_layer"], inputs["recipe"]) == (7, 16, 5, "fp32-adam")
    grid = client.get(layout).json()
    assert (grid["stage"], grid["gpus"], [b["bytes"] for b in grid["bands"]]) == ("zero3", 16, [4, 4, 0, 8])


def test_the_default_runs_json_links_are_the_bare_addresses(client: TestClient) -> None:
    tree = _page(client, "")
    assert one(tree, "#json-links a:nth-of-type(1)")["href"] == "/api/memory"
    assert one(tree, "#json-links a:nth-of-type(3)")["href"] == "/api/layout?stage=dp"
    assert _page(client, "stage=zero2", {"HX-Request": "true"}).select("#json-links") != []


def test_the_headline_and_the_table_count_the_padding_each_card_really_keeps(client: TestClient) -> None:
    # 7 weights on 16 cards, fp32 Adam (4/4/0/8 B): a slice is ⌈7/16⌉ = 1 weight, so a card keeps
    # 1 × 16 B = 16 B under ZeRO-3, not 16/16 B per weight: 16 B / 7 = 2.29 B per weight, and
    # 16 B of data parallelism's 7 × 16 = 112 B is 14.3% (not 1.00 B and 6.25%, which ignore padding).
    tree = _page(client, f"{RUN}&stage=zero3")
    headline = text(tree, ".headline")
    assert "Each card keeps 2.29 bytes per weight" in headline
    assert "14.3% of what data parallelism keeps" in headline
    # The table, by hand: DP 112 B / 7 = 16.00; ZeRO-1 7 × (4 + 4) + 1 × 8 = 64 B, 9.14; ZeRO-2
    # 7 × 4 + 1 × (4 + 8) = 40 B, 5.71; ZeRO-3 16 B, 2.29. Each times 7 is the bytes beside it.
    assert _table(tree, "td.bpw") == ["16.00", "9.14", "5.71", "2.29"]
    rows = client.get(f"/api/memory?{RUN}").json()["stages"]
    assert [r["per_gpu_bytes"] for r in rows] == [112, 64, 40, 16]
    assert [r["bytes_per_weight"] for r in rows] == [16, 64 / 7, 40 / 7, 16 / 7]
    # With no padding (the seed run) the figures are the seed's: 16, 5.5, 3.75 and 2 B per weight.
    seed = _page(client, "stage=zero3")
    assert "Each card keeps 2.00 bytes per weight" in text(seed, ".headline")
    assert "12.5% of what data parallelism keeps" in text(seed, ".headline")
    assert _table(seed, "td.bpw") == ["16.00", "5.50", "3.75", "2.00"]


def test_the_largest_model_that_fits_never_exceeds_what_the_form_accepts(client: TestClient) -> None:
    # ZeRO-3 on 4,096 cards of 10¹⁵ B, 16 B per weight in all: 4,096 × 10¹⁵ / 16 = 2.56 × 10¹⁷
    # weights would fit, but the form reads counts below 10¹⁶. Capped at its largest, cut to three
    # figures: at least 9,990T weights, which the form accepts and which fits.
    tree = _page(client, "params=1e15&gpus=4096&capacity=1e15&stage=zero3")
    assert _table(tree, "td.max-model")[-1] == "at least 9,990T weights"
    # Data parallelism's own largest is within reach, so it is the figure itself: 10¹⁵ B / 16 B = 62.5T.
    assert _table(tree, "td.max-model")[0] == "62.5T weights"
    entered = client.get("/?params=9,990T&gpus=4096&capacity=1e15&stage=zero3")
    assert entered.status_code == 200
    assert _table(dom(entered.text), "td.verdict-cell")[-1].startswith("✓ fits")
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
    tree = _page(client, query)
    headings = [th.get_text(strip=True) for th in tree.select("table.figures thead th")]
    assert heading in headings
    assert {td["data-label"] for td in tree.select("table.figures td.per-gpu")} == {heading}
