"""app/web/stage_view.py: the switcher, the stage's words, the change a switch makes and the narration."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from app.domain.stages import Stage
from app.domain.units import ByteUnit
from tests.conftest import cell_facts, dom, one, text
from tests.web.helpers import RUN, get_tree, query_of, run_page, stage_page, table_cells


@pytest.mark.parametrize("stage", list(Stage))
def test_switcher_marks_the_current_stage_and_links_work_without_js(client: TestClient, stage: Stage) -> None:
    links = stage_page(client, stage).select("nav.switcher a")
    # Every other stage's link names the one shown, so the page can mark what changed.
    assert [a["href"] for a in links] == [
        f"/?stage={s.value}" + ("" if s is stage else f"&from={stage.value}") for s in Stage
    ]
    assert [a.get("aria-current") for a in links] == ["page" if s is stage else None for s in Stage]
    for a in links:
        assert a["hx-get"] == a["href"]
        assert a["hx-push-url"] == "true"
        assert a["hx-target"] == "#widget"
        assert a.get("id")  # htmx puts focus back on the element with the same id after the swap


def test_stage_links_keep_the_run(client: TestClient) -> None:
    tree = run_page(client, "model=llama-3-8b&gpus=64&capacity=80GiB&units=GB&stage=zero1")
    href = str(one(tree, "#switch-zero3")["href"])
    assert parse_qs(urlsplit(href).query) == {
        "stage": ["zero3"], "model": ["llama-3-8b"], "gpus": ["64"], "capacity": ["80GiB"], "units": ["GB"],
        "from": ["zero1"],
    }  # fmt: skip


def test_switcher_and_table_links_name_the_stage_shown(client: TestClient) -> None:
    tree = get_tree(client, "stage=zero1&gpus=4")
    assert query_of(str(one(tree, "#switch-zero2")["href"])) == {"stage": ["zero2"], "gpus": ["4"], "from": ["zero1"]}
    assert query_of(str(one(tree, "#row-zero3")["href"]))["from"] == ["zero1"]
    # The stage shown links to itself without a hint.
    assert "from" not in query_of(str(one(tree, "#switch-zero1")["href"]))


def test_headline_and_explanation(client: TestClient) -> None:
    tree = stage_page(client, Stage.ZERO3)
    assert text(tree, "#stage-heading") == "ZeRO-3: Split the weights themselves."
    assert text(tree, ".headline") == (
        "Each card keeps 2.00 bytes per weight: 55.9 GiB for a model of 30B weights, "
        "12.5% of what data parallelism keeps."
    )
    assert "largest single layer" in text(tree, ".explanation")


@pytest.mark.parametrize(
    ("query", "said"),
    [
        # Llama 3.1 405B in 16 stages of 7, 8 × 14, 7 blocks, tp 8: a middle stage's card is the most loaded,
        # 8 × (3,187,671,040 / 8 + 32,768) = 3,187,933,184 weights (tests/domain/test_loaded.py); × 16 B =
        # 51,006,930,944 B = 47.5 GiB.
        (
            "model=llama-3.1-405b&gpus=1024&nodes=128&tp=8&pp=16",
            "Each card keeps 16.00 bytes per weight: 47.5 GiB for its 3.19B weights (stage 2's layers ÷ tp 8), "
            "100% of what data parallelism keeps.",
        ),
        # Llama 3 70B, tp 8 × pp 2: the last stage, 40 × (855,638,016 / 8 + 16,384) + 1,050,673,152 / 8 + 8,192
        # = 4,410,187,776 weights; × 16 B = 65.7 GiB.
        (
            "model=llama-3-70b&gpus=32&nodes=4&tp=8&pp=2",
            "Each card keeps 16.00 bytes per weight: 65.7 GiB for its 4.41B weights (stage 2's layers ÷ tp 8), "
            "100% of what data parallelism keeps.",
        ),
        # Context parallelism alone splits the sequence, not the weights: the whole model's.
        ("model=llama-3-8b&gpus=16&nodes=2&cp=2", "for a model of 8.03B weights,"),
    ],
)
def test_under_a_cut_the_headline_counts_the_cards_own_weights(client: TestClient, query: str, said: str) -> None:
    assert said in text(run_page(client, query), ".headline")


def test_the_headline_and_the_table_count_the_padding_each_card_really_keeps(client: TestClient) -> None:
    # 7 weights on 16 cards, fp32 Adam (4/4/0/8 B): a slice is ⌈7/16⌉ = 1 weight, so a card keeps
    # 1 × 16 B = 16 B under ZeRO-3, not 16/16 B per weight: 16 B / 7 = 2.29 B per weight, and
    # 16 B of data parallelism's 7 × 16 = 112 B is 14.3% (not 1.00 B and 6.25%, which ignore padding).
    tree = run_page(client, f"{RUN}&stage=zero3")
    headline = text(tree, ".headline")
    assert "Each card keeps 2.29 bytes per weight" in headline
    assert "14.3% of what data parallelism keeps" in headline
    # The table, by hand: DP 112 B / 7 = 16.00; ZeRO-1 7 × (4 + 4) + 1 × 8 = 64 B, 9.14; ZeRO-2
    # 7 × 4 + 1 × (4 + 8) = 40 B, 5.71; ZeRO-3 16 B, 2.29. Each times 7 is the bytes beside it.
    assert table_cells(tree, "td.bpw") == ["16.00", "9.14", "5.71", "2.29"]
    rows = client.get(f"/api/memory?{RUN}").json()["stages"]
    assert [r["per_gpu_bytes"] for r in rows] == [112, 64, 40, 16]
    assert [r["bytes_per_weight"] for r in rows] == [16, 64 / 7, 40 / 7, 16 / 7]
    # With no padding (the seed run) the figures are the seed's: 16, 5.5, 3.75 and 2 B per weight.
    seed = run_page(client, "stage=zero3")
    assert "Each card keeps 2.00 bytes per weight" in text(seed, ".headline")
    assert "12.5% of what data parallelism keeps" in text(seed, ".headline")
    assert table_cells(seed, "td.bpw") == ["16.00", "5.50", "3.75", "2.00"]


def test_notes_for_what_was_set_aside(client: TestClient) -> None:
    tree = run_page(client, "model=llama-3-8b&params=5B")
    assert "Llama 3 8B has 8,030,261,248 weights" in text(tree, ".notes")
    tree = run_page(client, "model=custom&params=1B&largest_layer=2B")
    assert "bigger than the whole model" in text(tree, ".notes")


def test_coming_from_zero1_marks_the_gradients_other_cards_no_longer_keep(client: TestClient) -> None:
    tree = get_tree(client, "stage=zero2&from=zero1")
    # 2 B of gradients split 8 ways: each card drops 2 × 7/8 = 1.75 of its 5.50 bytes per weight; of 30e9
    # weights, 3.75 × 30e9 = 112.5e9 B = 104.8 GiB, was 5.5 × 30e9 = 165e9 B = 153.7 GiB.
    assert text(tree, "#change-note") == (
        "ZeRO-2 splits the bf16 gradients too: each card drops 1.75 of its 5.50 bytes per weight (now 3.75). "
        "Each GPU keeps 104.8 GiB, was 153.7 GiB."
    )
    changed = tree.select("#grid .cell.changed")
    # One band, 8 cards, the 7 weights each card does not hold.
    assert len(changed) == 56
    facts = [cell_facts(c) for c in changed]
    assert {f["band"] for f in facts} == {"gradients"}
    assert all(f["state"] == "dashed" and f["card"] != f["weight"] for f in facts)


def test_going_back_marks_the_cells_filled_again(client: TestClient) -> None:
    tree = get_tree(client, "stage=dp&from=zero3&gpus=4")
    changed = tree.select("#grid .cell.changed")
    assert len(changed) == 4 * 4 * 3  # every band, 4 cards, 3 weights held elsewhere
    assert {cell_facts(c)["state"] for c in changed} == {"solid"}
    # ZeRO-3 on 4 cards keeps 16/4 = 4; data parallelism all 16.
    assert "each card adds 12.00 to its 4.00 bytes per weight (now 16.00)" in text(tree, "#change-note")


@pytest.mark.parametrize("query", ["stage=zero2", "stage=zero2&from=zero2"])
def test_no_marks_without_a_different_previous_stage(client: TestClient, query: str) -> None:
    tree = get_tree(client, query)
    assert tree.select(".cell.changed") == []
    # The note's place is kept, empty, so the cards under it do not move when the next one comes.
    assert text(tree, "#change-note") == ""


def test_one_polite_live_region_outside_the_widget(client: TestClient) -> None:
    tree = get_tree(client, "stage=zero1&phase=4")
    regions = tree.select("[aria-live]")
    assert [r.get("id") for r in regions] == ["narration"]
    assert regions[0]["aria-live"] == "polite"
    assert regions[0].find_parent(id="widget") is None
    assert one(tree, ".step-explanation").get("aria-live") is None


# Master 4 + moments 8 split 8 ways: 12 × 7/8 = 10.5 of 16 dropped; 16 × 30e9 = 480e9 B = 447.0 GiB a card
# before, 5.5 × 30e9 = 165e9 B = 153.7 GiB after.
ZERO1_SWITCH = (
    "ZeRO-1 splits the fp32 master copy and Adam's two fp32 moments: each card drops 10.50 of its 16.00 bytes per "
    "weight (now 5.50). Each GPU keeps 153.7 GiB, was 447.0 GiB."
)
# At rest without a switch, what the stage keeps against data parallelism: no "was".
ZERO1_AT_REST = (
    "ZeRO-1 splits the fp32 master copy and Adam's two fp32 moments: each card drops 10.50 of its 16.00 bytes per "
    "weight (now 5.50)."
)
# ZeRO-1 holds nothing in hand: each card holds its 153.7 GiB through the forward pass, and gathers nothing.
PHASE_4 = (
    "Phase 4 of 52: Forward pass, column 1: weights here. Traffic so far: 0P of 2P. "
    "Each GPU holds 153.7 GiB, as in the phase before."
)
# ZeRO-3 on 8 cards: each column's all-gather moves 1/8 P, its gradients' reduce-scatter (at the backward's
# discard) 1/8 P more; the forward's 8 gathers make 1P, the backward's first gather 1.125P, its discard 1.25P.
PHASE_ZERO3 = {
    0: "Phase 0 of 52: The step begins: state at rest. Traffic so far: 0P of 3P. Each GPU holds 55.9 GiB.",
    1: "Phase 1 of 52: Forward pass, column 0: gather. Traffic so far: 0.125P of 3P. "
    "Each GPU holds 62.9 GiB, up from 55.9 GiB in the phase before.",
    3: "Phase 3 of 52: Forward pass, column 0: discard. Traffic so far: 0.125P of 3P. "
    "Each GPU holds 55.9 GiB, down from 62.9 GiB in the phase before.",
    26: "Phase 26 of 52: Backward pass, column 7: compute. Traffic so far: 1.125P of 3P. "
    "Each GPU holds 69.8 GiB, up from 62.9 GiB in the phase before.",
    27: "Phase 27 of 52: Backward pass, column 7: discard. Traffic so far: 1.25P of 3P. "
    "Each GPU holds 55.9 GiB, down from 69.8 GiB in the phase before.",
    49: "Phase 49 of 52: Gradient synchronisation. Traffic so far: 3P of 3P. "
    "Each GPU holds 55.9 GiB, as in the phase before.",
}
# 2 B of weights split 8 ways: 2 × 7/8 = 1.75 of 3.75 dropped; 3.75 and 2 B × 30e9 = 104.8 and 55.9 GiB.
ZERO3_SWITCH = (
    "ZeRO-3 splits the bf16 weights too: each card drops 1.75 of its 3.75 bytes per weight (now 2.00). "
    "Each GPU keeps 55.9 GiB, was 104.8 GiB."
)
# 5.5 B × 30e9 = 165e9 B = 153.7 GiB against 80 GiB = 85.9e9 B: 79.1e9 B = 73.7 GiB over.
ZERO1_OVER = "ZeRO-1 does not fit on 80.0 GiB: 73.7 GiB over."
# ZeRO-3: 2 B × 30e9 = 60e9 B at rest, and one of its 8 layers of 3.75e9 weights gathered (2 B) with its
# gradients (2 B): a peak of 75e9 B. 80 GiB = 85.90e9 B leaves 10.90e9 B = 10.2 GiB.
ZERO3_FITS = "ZeRO-3 fits on 80.0 GiB: 10.2 GiB left for activations."


@pytest.mark.parametrize(
    ("query", "refined", "said"),
    [
        # By the switcher (`from`), even during the step: what the switch changed on each card.
        ("stage=zero1&phase=4&capacity=80GiB&from=dp", False, ZERO1_SWITCH),
        ("stage=zero1&phase=4&capacity=80GiB&from=dp", True, ZERO1_SWITCH),
        # A move of the step: the phase.
        ("stage=zero1&phase=4&capacity=80GiB", False, PHASE_4),
        # A change of the run keeps the phase: the fit, where a card is given; else the phase.
        ("stage=zero1&phase=4&capacity=80GiB", True, ZERO1_OVER),
        ("stage=zero1&phase=4", True, PHASE_4),
        # At rest: the fit; without a card, what the stage keeps against data parallelism.
        ("stage=zero3&capacity=80GiB", True, ZERO3_FITS),
        ("stage=zero3&capacity=80GiB", False, ZERO3_FITS),
        ("stage=zero1", True, ZERO1_AT_REST),
        # Each phase says what each card holds against the phase before, from the phase's own figure: ZeRO-3's
        # 60e9 B at rest, + 7.5e9 B of a layer's weights gathered (67.5e9 B = 62.9 GiB), + its gradients
        # (75e9 B = 69.8 GiB), back to 60e9 B = 55.9 GiB once the last layer's are discarded.
        *((f"stage=zero3&phase={phase}", False, said) for phase, said in PHASE_ZERO3.items()),
        # A switch during the step: ZeRO-3 splits the weights as well, 104.8 GiB a card before, 55.9 after.
        ("stage=zero3&phase=4&from=zero2", False, ZERO3_SWITCH),
    ],
)
def test_a_swap_brings_the_one_sentence_the_live_region_says(
    client: TestClient, query: str, refined: bool, said: str
) -> None:
    headers = {"HX-Request": "true", **({"ZB-History": "replace"} if refined else {})}
    fragment = dom(client.get("/?" + query, headers=headers).text)
    narration = one(fragment, "#narration")
    assert narration["hx-swap-oob"] == "innerHTML"
    assert narration.text == said
    # The whole page starts silent: the region speaks after a swap.
    assert text(get_tree(client, query), "#narration") == ""


@pytest.mark.parametrize(
    ("batch", "ending"),
    [
        # The peak holds a micro-batch's activations: what is left is left over, not for them.
        ("1", " left."),
        # No activations counted: what is left is where they would go.
        ("0", " left for activations."),
    ],
)
def test_the_fit_says_activations_are_left_room_only_when_they_are_not_counted(
    client: TestClient, batch: str, ending: str
) -> None:
    query = f"stage=zero3&model=llama-3-8b&capacity=80GiB&batch={batch}"
    zero3 = client.get(f"/api/memory?{query}").json()["stages"][3]
    assert (zero3["activation_bytes"] > 0) is (batch == "1")
    left = ByteUnit.GIB.show(zero3["headroom_bytes"])
    headers = {"HX-Request": "true", "ZB-History": "replace"}
    said = one(dom(client.get(f"/?{query}", headers=headers).text), "#narration").text
    assert said == f"ZeRO-3 fits on 80.0 GiB: {left}{ending}"


def test_the_widget_names_the_stage_and_phase_it_shows(client: TestClient) -> None:
    widget = one(get_tree(client, "stage=zero1&phase=4&capacity=80GiB&from=dp"), "#widget")
    assert (widget["data-stage"], widget["data-phase"]) == ("zero1", "4")
    assert not [name for name in widget.attrs if name.startswith("data-say")]
