"""Watching one step on the page and in the API: every phase is a URL the server computes."""

from __future__ import annotations

import itertools
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import cell_facts, cell_selector, dom, examples, full_run_only, one, text
from tests.web.helpers import run_page


def _page(client: TestClient, query: str, headers: dict[str, str] | None = None) -> BeautifulSoup:
    response = client.get(f"/?{query}", headers=headers or {})
    assert response.status_code == 200, response.text[:300]
    return dom(response.text)


def _query(href: object) -> dict[str, list[str]]:
    return parse_qs(urlsplit(str(href)).query)


def test_at_rest_offers_the_step(client: TestClient) -> None:
    tree = _page(client, "stage=zero2&gpus=16")
    assert _query(one(tree, "#watch-step")["href"]) == {"stage": ["zero2"], "gpus": ["16"], "phase": ["0"]}
    assert tree.select("#step") == []


@pytest.mark.parametrize("headers", [{}, {"HX-Request": "true"}], ids=["page", "fragment"])
def test_zero3_forward_column_2_shows_the_gathered_weights(client: TestClient, headers: dict[str, str]) -> None:
    tree = _page(client, "stage=zero3&phase=7", headers)
    panel = one(tree, "#step")
    assert panel["data-phase"] == "7"
    assert text(panel, "h3") == "Phase 7 of 52 Forward pass, column 2: gather"
    assert text(panel, "#tally strong") == "0.375P"
    assert one(panel, ".transfer figcaption").get_text() == "all-gather of column 2's weights: 0.125P"
    weights = tree.select(cell_selector(weight=2, band="weights"))
    assert [cell_facts(c)["holding"] for c in weights] == ["gathered", "gathered", "held"] + ["gathered"] * 5
    # Exactly the cells the text names are ringed: column 2's weights, on every card.
    assert tree.select("#grid .cell.active") == weights
    assert {cell_facts(c)["holding"] for c in tree.select(cell_selector(weight=3, band="weights"))} == {
        "held",
        "dashed",
    }


def test_gradients_made_for_another_card_are_drawn_as_sent(client: TestClient) -> None:
    tree = _page(client, "stage=zero2&phase=26")
    gradients = tree.select(cell_selector(weight=7, band="gradients"))
    assert [cell_facts(c)["holding"] for c in gradients] == ["sent"] * 7 + ["held"]
    assert "computed here, then reduce-scattered to GPU 7" in str(gradients[0]["aria-label"])
    keys = [text(li, "strong") for li in tree.select(".legend ul.states li")]
    # With 8 GPUs every card holds whole columns: no part-filled cell, so no key for one.
    assert keys == ["Filled", "Striped", "Barred", "Dashed", "Ringed"]
    sixteen = _page(client, "stage=zero2&phase=26&gpus=16")
    assert sixteen.select("#grid .cell.partial")
    keys = [text(li, "strong") for li in sixteen.select(".legend ul.states li")]
    assert keys == ["Filled", "Part filled", "Striped", "Barred", "Dashed", "Ringed"]


def test_controls_are_real_links_that_keep_the_run(client: TestClient) -> None:
    tree = _page(client, "stage=zero1&phase=5&model=llama-3-8b")
    assert _query(one(tree, "#step-prev")["href"]) == {"stage": ["zero1"], "model": ["llama-3-8b"], "phase": ["4"]}
    assert _query(one(tree, "#step-next")["href"])["phase"] == ["6"]
    assert _query(one(tree, "#step-first")["href"])["phase"] == ["0"]
    assert _query(one(tree, "#step-last")["href"])["phase"] == ["52"]
    assert "phase" not in _query(one(tree, ".leave")["href"])
    # Switching the arrangement keeps the moment of the step.
    assert _query(one(tree, "#switch-zero3")["href"])["phase"] == ["5"]
    slider = one(tree, "#phase-slider")
    assert (slider["min"], slider["max"], slider["value"]) == ("0", "52", "5")
    hidden = {i["name"]: i["value"] for i in tree.select('.phase-form input[type="hidden"]')}
    assert hidden == {"stage": "zero1", "model": "llama-3-8b"}


@pytest.mark.parametrize(("path", "bar"), [("/", True), ("/embed", False)], ids=["page", "embed"])
def test_the_phase_buttons_are_kept_together_for_the_bar_on_the_page(client: TestClient, path: str, bar: bool) -> None:
    # On the page the group becomes a bar at the foot of a narrow window (app.css .step-bar); an
    # embed's frame is as tall as its content, so there it stays in the panel.
    response = client.get(f"{path}?stage=zero3&phase=2&controls=step")
    assert response.status_code == 200
    group = one(dom(response.text), ".step-controls > .step-nav")
    assert ("step-bar" in group["class"]) is bar
    buttons = group.select(":scope > .step-button")
    assert [b["id"] for b in buttons] == ["step-first", "step-prev", "step-play", "step-next", "step-last"]
    # Each keeps a name that says where it goes, whatever of its word a narrow bar hides.
    names = {b["id"]: b.get("aria-label") for b in buttons}
    assert names == {"step-first": "First phase", "step-prev": "Previous phase", "step-play": None,
                     "step-next": "Next phase", "step-last": "Last phase"}  # fmt: skip
    words = {b["id"]: text(b, ".step-word") for b in buttons if b.select_one(".step-word")}
    assert words == {"step-first": "First", "step-prev": "Previous", "step-next": "Next", "step-last": "Last"}
    shown = [" ".join(b.get_text(" ").split()) for b in buttons]
    assert shown == ["« First", "◀ Previous", "▶ Play", "Next ▶", "Last »"]


def test_ends_have_no_link_past_them(client: TestClient) -> None:
    # The control stays, disabled but focusable, so focus has somewhere to stay; it links nowhere.
    for phase, controls in [(0, ["#step-first", "#step-prev"]), (52, ["#step-next", "#step-last"])]:
        tree = _page(client, f"stage=dp&phase={phase}")
        for selector in controls:
            control = one(tree, selector)
            assert control.get("aria-disabled") == "true"
            assert control.get("tabindex") == "0"
            assert control.get("href") is None
            assert control.get("hx-get") is None


@pytest.mark.parametrize(("stage", "tally"), [("dp", "2P"), ("zero1", "2P"), ("zero2", "2P"), ("zero3", "3P")])
def test_the_tally_ends_at_the_seed_figures(client: TestClient, stage: str, tally: str) -> None:
    assert text(_page(client, f"stage={stage}&phase=52"), "#tally strong") == tally


def test_a_run_on_64_gpus_is_stepped_on_its_own_cards(client: TestClient) -> None:
    tree = _page(client, "stage=zero3&phase=3&gpus=64&model=zero-7.5b")
    cards = [card["data-card-index"] for card in tree.select("#grid .card")]
    assert cards == ["0", "1", "2", "3", "60", "61", "62", "63"]
    # In their nodes of 8: the rest of node 0, nodes 1 to 6 between, the start of node 7.
    assert [" ".join(gap.get_text(" ").split()) for gap in tree.select("#grid .card-gap")] == [
        "… GPU 4 to GPU 7: the same pattern",
        "… GPU 56 to GPU 59: the same pattern",
    ]
    # 16 B for each of the 117,187,500 weights in a 1/64 slice of 7.5B: 1.7 GiB, as the table says.
    assert {text(card, ".card-sub") for card in tree.select("#grid .card")} == {"now 1.7 GiB · peak 1.7 GiB"}
    assert text(tree, "table.figures tr[data-stage=zero3] td.per-gpu") == "1.7 GiB"
    # GPU 1 holds the second eighth of column 0, drawn as a strip; GPUs 0-7 hold column 0.
    strip = one(tree, cell_selector(1, 0, "master"))
    assert cell_facts(strip)["holding"] == "partial"
    assert {"from-6", "to-12"} <= set(strip["class"])
    assert "holds its slice, 1/8 of the column; GPUs 0–7 hold the rest" in str(strip["aria-label"])


@pytest.mark.parametrize(
    "query",
    [
        "model=llama-3-8b",
        *full_run_only("model=llama-3-70b&gpus=16&capacity=80GiB"),
        "model=llama-3.1-405b&gpus=1024&capacity=80GB",
        *full_run_only("gpus=1"),
        "model=custom&params=7.5B&gpus=3&largest_layer=1B&recipe=custom&weights_bytes=2&gradients_bytes=4",
        *full_run_only("gpus=64&capacity=40GiB"),
    ],
)
@pytest.mark.parametrize("stage", ["dp", "zero1", "zero2", "zero3"])
def test_the_steps_peak_is_the_tables_peak(client: TestClient, query: str, stage: str) -> None:
    end = _page(client, f"stage={stage}&phase=52&{query}")
    peaks = {text(card, ".card-sub").split(" · ")[1] for card in end.select("#grid .card")}
    assert peaks == {f"peak {text(end, f'table.figures tr[data-stage={stage}] span.peak')}"}
    start = _page(client, f"stage={stage}&phase=0&{query}")
    nows = {text(card, ".card-sub").split(" · ")[0] for card in start.select("#grid .card")}
    assert nows == {f"now {text(start, f'table.figures tr[data-stage={stage}] td.per-gpu')}"}


def _band_widths(tree: BeautifulSoup) -> list[tuple[str, str]]:
    bar = tree.select("#grid .card .bar svg")[0]
    rects = [(str(r["class"][0]), str(r["width"])) for r in bar.select("rect")]
    return [(css, width) for css, width in rects if css.startswith("band-")]


def test_at_rest_and_phase_0_draw_the_same_bar_and_columns(client: TestClient) -> None:
    rest = _page(client, "stage=zero3&model=llama-3-8b&capacity=80GiB")
    start = _page(client, "stage=zero3&model=llama-3-8b&capacity=80GiB&phase=0")
    assert _band_widths(rest) == _band_widths(start)
    assert len(_band_widths(rest)) == 4
    axis = [[s.get_text() for s in tree.select("#grid .card")[0].select(".axis span")] for tree in (rest, start)]
    assert axis[0] == axis[1] == [str(i) for i in range(8)]


def test_the_step_says_what_each_column_stands_for(client: TestClient) -> None:
    tree = _page(client, "stage=zero3&phase=14&model=llama-3-70b")
    assert [li.get_text() for li in tree.select(".column-key li")][4] == "4: layers 41–51 of 80"
    assert "layers 41–51 of 80" in text(tree, ".step-explanation")
    assert tree.select(".step-note") == []
    unknown = _page(client, "stage=zero3&phase=14&model=zero-7.5b")
    assert text(unknown, ".step-note").startswith("Largest layer unknown")
    assert "unknown" in text(unknown, ".boundary-verdict")


@pytest.mark.parametrize("phase", ["-1", "53", "x", "1.5"])
def test_phase_out_of_range_is_a_readable_422(client: TestClient, phase: str) -> None:
    response = client.get(f"/?stage=zero3&phase={phase}")
    assert response.status_code == 422
    assert "“phase”" in text(dom(response.text), ".notice-message")


def test_api_step(client: TestClient) -> None:
    body = client.get("/api/step", params={"stage": "zero3", "phase": "26", "model": "llama-3-8b", "batch": "0"}).json()
    assert (body["part"], body["column"], body["beat"]) == ("backward", 7, "compute")
    assert body["title"] == "Backward pass, column 7: compute"
    assert body["columns"][7]["label"] == "layers 30–32 of 32 and the output head"
    # The column's gather (phase 25) all-gathered its weights; its discard (27) reduce-scatters the gradients.
    assert body["transfers"] == []
    assert body["tally_p"] == 1.125
    # By hand: 16 B × 1,003,782,656 weights in a slice, plus the output head's 525,336,576 weights as
    # weights (2 B) and as gradients (2 B). Exact integers, as the table's peak.
    assert body["state_bytes"] == 16_060_522_496
    assert (body["gathered_bytes"], body["computed_bytes"]) == (1_050_673_152, 1_050_673_152)
    assert body["live_bytes"] == 18_161_868_800
    memory = client.get("/api/memory", params={"model": "llama-3-8b", "batch": "0"}).json()
    assert memory["stages"][3]["peak_bytes"] == body["live_bytes"]
    assert len(body["cells"]) == 8 * 8 * 4
    assert {c["holding"] for c in body["cells"] if c["column"] == 7 and c["band"] == "gradients"} == {"sent", "held"}
    gather = client.get("/api/step", params={"stage": "zero3", "phase": "25", "model": "llama-3-8b", "batch": "0"})
    discard = client.get("/api/step", params={"stage": "zero3", "phase": "27", "model": "llama-3-8b", "batch": "0"})
    assert [t["collective"] for t in gather.json()["transfers"]] == ["all-gather"]
    assert [t["collective"] for t in discard.json()["transfers"]] == ["reduce-scatter"]
    assert discard.json()["tally_p"] == 1.25
    assert client.get("/api/step", params={"stage": "zero2", "phase": "52"}).json()["tally_p"] == 2.0
    assert client.get("/api/step", params={"phase": "53"}).status_code == 422
    # An old link's phase: the 21-phase step's 9, the backward over column 7, is its compute now.
    old = client.get("/api/step", params={"stage": "zero3", "phase21": "9", "model": "llama-3-8b", "batch": "0"})
    assert old.json() == body


runs = st.fixed_dictionaries(
    {
        "stage": st.sampled_from(["dp", "zero1", "zero2", "zero3"]),
        "gpus": st.integers(1, 4096).map(str),
        "params": st.integers(10**6, 10**13).map(str),
        "recipe": st.just("custom"),
        "weights_bytes": st.integers(1, 16).map(str),
        "gradients_bytes": st.integers(0, 16).map(str),
        "master_bytes": st.integers(0, 16).map(str),
        "moments_bytes": st.integers(0, 16).map(str),
    },
    optional={"largest_layer": st.integers(1, 10**6).map(str), "model": st.sampled_from(["llama-3-8b", "gpt-3-175b"])},
)


@settings(max_examples=examples(25), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=runs)
def test_one_screen_one_story_for_any_run(client: TestClient, query: dict[str, str]) -> None:
    """At the step's last phase each card's peak so far is the step's highest figure; the table beside it agrees."""
    response = client.get("/", params={**query, "phase": "52"})
    assert response.status_code == 200
    tree = dom(response.text)
    stage = query["stage"]
    peaks = {text(card, ".card-sub").split(" · ")[1] for card in tree.select("#grid .card")}
    assert peaks == {f"peak {text(tree, f'table.figures tr[data-stage={stage}] span.peak')}"}
    api = client.get("/api/step", params={**query, "phase": "52"}).json()
    memory = client.get("/api/memory", params=query).json()
    assert api["peak_bytes_so_far"] == next(row["peak_bytes"] for row in memory["stages"] if row["stage"] == stage)


def _drawn_now(tree: BeautifulSoup) -> float:
    """How much of the first card's bar is what it holds in hand now (the pale peak-so-far left out)."""
    bar = tree.select("#grid .card .card-bar svg")[0]
    return sum(float(str(r["width"])) for r in bar.select("rect.in-hand") if "peak" not in r["class"])


@pytest.mark.parametrize(
    "model", ["seed-30b", *full_run_only("llama-3-8b", "llama-3-70b", "llama-3.1-405b", "gpt-3-175b", "custom")]
)
@pytest.mark.parametrize("gpus", [8, 64])
def test_zero3_gathering_a_layer_moves_the_bar_and_discarding_it_brings_it_back(
    client: TestClient, model: str, gpus: int
) -> None:
    run = f"stage=zero3&model={model}&gpus={gpus}" + ("&params=7.5B&largest_layer=500M" if model == "custom" else "")
    at_rest = _page(client, f"{run}&phase=0")
    forward = [_page(client, f"{run}&phase={phase}") for phase in range(1, 25, 3)]  # each column's gather
    rest = _drawn_now(at_rest)
    # Nothing in hand at rest; each layer's gather puts something on the bar, after the state at rest and on
    # its scale (tests/web/test_bars.py works its widths out by hand).
    assert rest == 0
    assert all(_drawn_now(tree) > 0 for tree in forward)
    # Each layer gathered is also said in figures: "now" rises above the state at rest, and falls back
    # once the backward pass is done and the layers are discarded.
    now = text(at_rest, "#grid .card .card-sub").split(" · ")[0]
    assert all(text(tree, "#grid .card .card-sub").split(" · ")[0] != now for tree in forward)
    after = _page(client, f"{run}&phase=49")
    assert text(after, "#grid .card .card-sub").split(" · ")[0] == now
    assert _drawn_now(after) == pytest.approx(rest)


def test_a_frozen_column_in_the_step_keeps_its_weights_and_its_place(client: TestClient) -> None:
    # A quarter trains: columns 0-5 are frozen. In the JSON, as on the page, they keep their weights only.
    query = {"model": "llama-3-8b", "stage": "zero3", "trainable": "0.25", "batch": "0", "phase": "32"}
    body = client.get("/api/step", params=query).json()
    frozen = {c["band"] for c in body["cells"] if c["column"] == 5}
    assert frozen == {"weights"}
    assert {c["band"] for c in body["cells"] if c["column"] == 7} == {"weights", "gradients", "master", "moments"}
    # Yet column 5 ends in layer 26, which straddles the boundary: of its 218,112,000 weights, from
    # 525,336,576 + 25 × 218,112,000 = 5,978,136,576 on, those from 6,022,695,936 (a quarter of
    # 8,030,261,248 trains) train: 173,552,640, whose bf16 gradients the backward computes.
    assert body["computed_bytes"] == 2 * 173_552_640
    assert "is frozen" in body["explanation"]
    # Its gather, the phase before, all-gathers the whole column, frozen weights and all.
    gather = client.get("/api/step", params={**query, "phase": "31"}).json()
    assert [t["collective"] for t in gather["transfers"]] == ["all-gather"]
    tree = dom(client.get("/", params=query).text)
    column = one(tree, "#grid .card .plot .column[data-weight='5']")
    # The blank below its weights is the 14 B per weight a frozen weight does not keep: area stays memory.
    assert "nb-14" in one(column, ".missing")["class"]


def test_offloaded_weights_come_up_to_every_card_for_the_layer_in_hand(client: TestClient) -> None:
    # ZeRO-3 with the weights on the host, backward over column 4: each card, its owner GPU 4 too,
    # gathers the column's weights and computes its gradients on the card; the slices stay on the host.
    tree = run_page(client, "stage=zero3&offload=optimizer%2Bparams&phase=35")
    for card in tree.select("#grid section.card"):
        on_card = [cell_facts(c) for c in one(card, ".stack > .plot").select(".cell")]
        assert [(c["weight"], c["band"], c["holding"]) for c in on_card] == [
            ("4", "weights", "gathered"),
            ("4", "gradients", "sent"),
        ]
        host = one(card, ".host")
        index = card["data-card-index"]
        held = [cell_facts(c) for c in host.select(".cell.solid")]
        assert {(c["weight"], c["band"]) for c in held} == {
            (index, band) for band in ("weights", "gradients", "master", "moments")
        }
        assert "in-step" in one(card, ".stack")["class"]


@pytest.mark.parametrize(
    ("query", "said"),
    [
        # Column 5 ends in layer 26, which trains from 6,022,695,936 on: 173,552,640 of its weights.
        (
            "stage=zero3&model=llama-3-8b&trainable=0.25&batch=0&phase=32",
            "gradients for that layer's 173,552,640 weights that train. The backward pass stops here",
        ),
        # LoRA: column 6 holds 4 blocks' adapters, 4 × 20,971,520 = 83,886,080 (ZeRO-1 sends none yet).
        (
            "stage=zero1&model=llama-3-8b&lora_rank=256&lora_targets=all-linear&batch=0&phase=29",
            "is partly frozen: 83,886,080 of its 1,087,668,736 weights train. The cards pass the backward through "
            "it to the layers before, computing gradients only for those.",
        ),
        ("stage=zero1&model=zero-7.5b&trainable=10%25&batch=0&phase=52", "the frozen weights did not change"),
    ],
)
def test_the_step_says_what_trains_in_the_column_in_hand(client: TestClient, query: str, said: str) -> None:
    assert said in client.get(f"/api/step?{query}").json()["explanation"]


def test_with_the_defaults_each_cards_now_figure_rises_and_falls_16_times_across_zero3s_clicks(
    client: TestClient,
) -> None:
    # The fragment each click swaps in: every card's "now" figure, phase by phase. A gather adds a layer
    # (7.5e9 B: 55.9 → 62.9 GiB), a backward compute its gradients too (69.8 GiB), each discard drops back.
    nows = []
    for phase in range(53):
        tree = _page(client, f"stage=zero3&phase={phase}", {"HX-Request": "true"})
        figures = {text(card, ".card-sub").split(" · ")[0] for card in tree.select("#grid .card")}
        assert len(figures) == 1  # every card holds the same
        nows.append(float(figures.pop().removeprefix("now ").removesuffix(" GiB")))
    pairs = list(itertools.pairwise(nows))
    assert sum(b > a for a, b in pairs) >= 16
    assert sum(b < a for a, b in pairs) >= 16
    assert [nows[i] for i in range(3, 49, 3)] == [55.9] * 16  # every discard
    assert max(nows) == 69.8


# What one card keeps of a column with the model cut, worked by hand. DeepSeek-V3: 61 blocks in 16 stages are
# 16 × 3 + 13, so 13 stages of 4 and 3 of 3; its 256 routed experts ÷ ep 64 = 4 a card; dp = 2,048 / (pp 16 ×
# tp 1) = 128 cards share the rest's ZeRO slices, edp = 2,048 / 16 / (ep 64 × etp 1) = 2 the experts'. Llama 3
# 70B: 80 blocks ÷ pp 2 = 40 a stage, each ÷ tp 8; on 16 GPUs dp = 16 / (8 × 2) = 1, on 32 GPUs 2.
DSV3 = "model=deepseek-v3&gpus=2048&nodes=256&pp=16&ep=64"
LLAMA_70B = "model=llama-3-70b&tp=8&pp=2"
CUT_WORDS = {
    f"{DSV3}&stage=zero1": "With the model cut, a card keeps of a column only its pipeline stage's blocks (3 to 4 of "
    "the 61), not the other stages'; of the 256 routed experts only its 4 (÷ ep 64). Of that, ZeRO-1 makes it "
    "responsible for 1/128 of the fp32 master copy and Adam's two fp32 moments (over its data-parallel group), "
    "and for 1/2 of its experts' (over the expert-data-parallel group).",
    f"{DSV3}&stage=zero3": "With the model cut, a card keeps of a column only its pipeline stage's blocks (3 to 4 of "
    "the 61), not the other stages'; of the 256 routed experts only its 4 (÷ ep 64). Of that, ZeRO-3 makes it "
    "responsible for 1/128 of the bf16 weights, the bf16 gradients, the fp32 master copy and Adam's two fp32 "
    "moments (over its data-parallel group), and for 1/2 of its experts' (over the expert-data-parallel group).",
    f"{LLAMA_70B}&gpus=16&nodes=2&stage=zero1": "With the model cut, a card keeps of a column only its pipeline "
    "stage's blocks (40 of the 80), not the other stages'; each block's weights ÷ tp 8. Its data-parallel group "
    "is itself alone, so ZeRO-1 has nothing to split.",
    f"{LLAMA_70B}&gpus=32&nodes=4&stage=zero2": "With the model cut, a card keeps of a column only its pipeline "
    "stage's blocks (40 of the 80), not the other stages'; each block's weights ÷ tp 8. Of that, ZeRO-2 makes it "
    "responsible for 1/2 of the bf16 gradients, the fp32 master copy and Adam's two fp32 moments (over its "
    "data-parallel group).",
    f"{LLAMA_70B}&gpus=16&nodes=2&stage=dp": "With the model cut, a card keeps of a column only its pipeline "
    "stage's blocks (40 of the 80), not the other stages'; each block's weights ÷ tp 8.",
}


@pytest.mark.parametrize(("query", "said"), CUT_WORDS.items(), ids=list(CUT_WORDS))
def test_with_the_model_cut_the_step_says_what_a_card_keeps_of_a_column(
    client: TestClient, query: str, said: str
) -> None:
    tree = _page(client, f"{query}&phase=10")
    words = [p.get_text(" ", strip=True) for p in tree.select("p") if "With the model cut" in p.get_text()]
    assert len(words) == 1
    assert said in " ".join(words[0].split())
    assert "of a column (underlined)" not in tree.get_text()  # the uncut model's 1/N of a column is not said
