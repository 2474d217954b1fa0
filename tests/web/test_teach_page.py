"""Teaching the change: the marks and sentence after a stage change, the narration, and /compare."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from tests.conftest import cell_facts, dom, one, text


def _get(client: TestClient, query: str, path: str = "/", status: int = 200) -> BeautifulSoup:
    response = client.get(f"{path}?{query}")
    assert response.status_code == status
    return dom(response.text)


def _query(href: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(href).query)


def test_coming_from_zero1_marks_the_gradients_other_cards_no_longer_keep(client: TestClient) -> None:
    tree = _get(client, "stage=zero2&from=zero1")
    # 2 B of gradients split 8 ways: each card drops 2 × 7/8 = 1.75 of its 5.50 bytes per weight.
    assert text(tree, "#change-note") == (
        "ZeRO-2 splits the bf16 gradients too: each card drops 1.75 of its 5.50 bytes per weight (now 3.75)."
    )
    changed = tree.select("#grid .cell.changed")
    # One band, 8 cards, the 7 weights each card does not hold.
    assert len(changed) == 56
    facts = [cell_facts(c) for c in changed]
    assert {f["band"] for f in facts} == {"gradients"}
    assert all(f["state"] == "dashed" and f["card"] != f["weight"] for f in facts)


def test_going_back_marks_the_cells_filled_again(client: TestClient) -> None:
    tree = _get(client, "stage=dp&from=zero3&gpus=4")
    changed = tree.select("#grid .cell.changed")
    assert len(changed) == 4 * 4 * 3  # every band, 4 cards, 3 weights held elsewhere
    assert {cell_facts(c)["state"] for c in changed} == {"solid"}
    # ZeRO-3 on 4 cards keeps 16/4 = 4; data parallelism all 16.
    assert "each card adds 12.00 to its 4.00 bytes per weight (now 16.00)" in text(tree, "#change-note")


@pytest.mark.parametrize("query", ["stage=zero2", "stage=zero2&from=zero2"])
def test_no_marks_without_a_different_previous_stage(client: TestClient, query: str) -> None:
    tree = _get(client, query)
    assert tree.select(".cell.changed") == []
    # The note's place is kept, empty, so the cards under it do not move when the next one comes.
    assert text(tree, "#change-note") == ""


def test_switcher_and_table_links_name_the_stage_shown(client: TestClient) -> None:
    tree = _get(client, "stage=zero1&gpus=4")
    assert _query(str(one(tree, "#switch-zero2")["href"])) == {"stage": ["zero2"], "gpus": ["4"], "from": ["zero1"]}
    assert _query(str(one(tree, "#row-zero3")["href"]))["from"] == ["zero1"]
    # The stage shown links to itself without a hint.
    assert "from" not in _query(str(one(tree, "#switch-zero1")["href"]))


def test_the_fragment_pushes_the_address_without_the_hint(client: TestClient) -> None:
    response = client.get("/?stage=zero2&from=zero1", headers={"HX-Request": "true"})
    assert response.headers["HX-Push-Url"] == "/?stage=zero2"
    assert len(dom(response.text).select(".cell.changed")) == 56


def test_a_bad_previous_stage_is_refused(client: TestClient) -> None:
    _get(client, "stage=zero2&from=zero9", status=422)


def test_one_polite_live_region_outside_the_widget(client: TestClient) -> None:
    tree = _get(client, "stage=zero1&phase=4")
    regions = tree.select("[aria-live]")
    assert [r.get("id") for r in regions] == ["narration"]
    assert regions[0]["aria-live"] == "polite"
    assert regions[0].find_parent(id="widget") is None
    assert one(tree, ".step-explanation").get("aria-live") is None


def test_the_widget_carries_one_sentence_for_each_kind_of_change(client: TestClient) -> None:
    widget = one(_get(client, "stage=zero1&phase=4&capacity=80GiB&from=dp"), "#widget")
    assert widget["data-stage"] == "zero1"
    assert widget["data-phase"] == "4"
    # Master 4 + moments 8 split 8 ways: 12 × 7/8 = 10.5 of 16 dropped.
    assert widget["data-say-stage"] == (
        "ZeRO-1 splits the fp32 master copy and Adam's two fp32 moments: each card drops 10.50 of its 16.00 "
        "bytes per weight (now 5.50)."
    )
    assert widget["data-say-phase"] == "Phase 4 of 20: Forward pass, column 3. Traffic so far: 0P of 2P."
    # 5.5 B × 30e9 = 165e9 B = 153.7 GiB against 80 GiB = 85.9e9 B: 79.1e9 B = 73.7 GiB over.
    assert widget["data-say-fit"] == "ZeRO-1 does not fit on 80.0 GiB: 73.7 GiB over."


def test_fit_sentence_when_it_fits_and_none_without_a_card(client: TestClient) -> None:
    # ZeRO-3: 2 B × 30e9 = 60e9 B at rest, and one of its 8 layers of 3.75e9 weights gathered (2 B)
    # with its gradients (2 B): a peak of 75e9 B. 80 GiB = 85.90e9 B leaves 10.90e9 B = 10.2 GiB.
    assert one(_get(client, "stage=zero3&capacity=80GiB"), "#widget")["data-say-fit"] == (
        "ZeRO-3 fits on 80.0 GiB: 10.2 GiB left for activations."
    )
    widget = one(_get(client, "stage=zero3"), "#widget")
    assert widget["data-say-fit"] == ""
    assert widget["data-say-phase"] == ""


def test_keys_script_hint_and_help_dialog(client: TestClient) -> None:
    tree = _get(client, "stage=dp")
    assert one(tree, 'script[src^="/static/app.js?v="]').has_attr("defer")
    assert text(tree, ".keys-hint") == "Press ? for keys"
    # The list itself is fetched when ? is first pressed: from the address the page names, with htmx.
    assert tree.select("dialog") == []
    slot = one(tree, "#keys-help-slot")
    assert (slot["hx-trigger"], slot["hx-swap"]) == ("keys-help from:body", "outerHTML")
    response = client.get(str(slot["hx-get"]))
    assert response.headers["content-type"].startswith("text/html")
    dialog = one(dom(response.text), "dialog#keys-help")
    keys = [" ".join(dt.get_text(" ").split()) for dt in dialog.select("dt")]
    assert keys == ["0 1 2 3", "← → PageUp PageDown", "Home End", "Space", "b .", "f", "?", "Esc"]
    assert one(dialog, "form[method=dialog] button").get_text() == "Close"


# Side by side.


def test_compare_shows_both_stages_and_the_difference(client: TestClient) -> None:
    tree = _get(client, "left=zero1&right=zero3", "/compare")
    left, right = one(tree, "#left"), one(tree, "#right")
    assert (left["data-stage"], right["data-stage"]) == ("zero1", "zero3")
    # 5.5 × 30e9 = 165e9 B = 153.7 GiB; 2 × 30e9 = 60e9 B = 55.9 GiB; 105e9 B = 97.8 GiB.
    assert (text(left, ".bpw"), text(left, ".per-gpu")) == ("5.50", "153.7 GiB")
    assert (text(right, ".bpw"), text(right, ".per-gpu")) == ("2.00", "55.9 GiB")
    assert (text(left, ".comm"), text(right, ".comm")) == ("2P", "3P")
    assert text(tree, "#compare-difference strong") == (
        "ZeRO-3 keeps 97.8 GiB less on each card than ZeRO-1: 55.9 GiB instead of 153.7 GiB."
    )
    assert len(left.select(".card")) == len(right.select(".card")) == 8
    # ZeRO-3 also splits weights and gradients: 2 bands × 8 cards × 7 weights differ on each side.
    assert len(right.select(".cell.changed")) == len(left.select(".cell.changed")) == 112
    assert {c["data-state"] for c in right.select(".cell.changed")} == {"dashed"}
    assert {c["data-state"] for c in left.select(".cell.changed")} == {"solid"}


def test_compare_links_switch_one_side_and_keep_the_other_and_the_run(client: TestClient) -> None:
    tree = _get(client, "left=zero1&right=zero3&gpus=4&units=GB", "/compare")
    assert _query(str(one(tree, "#left-dp")["href"])) == {
        "left": ["dp"], "right": ["zero3"], "gpus": ["4"], "units": ["GB"]
    }  # fmt: skip
    assert _query(str(one(tree, "#right-zero2")["href"])) == {
        "left": ["zero1"], "right": ["zero2"], "gpus": ["4"], "units": ["GB"]
    }  # fmt: skip
    assert one(tree, "#left-zero1")["aria-current"] == "page"
    assert one(tree, "#right-zero3")["aria-current"] == "page"
    assert len(one(tree, "#left").select(".card")) == 4
    assert _query(str(one(tree, "#compare-back")["href"])) == {"stage": ["zero1"], "gpus": ["4"], "units": ["GB"]}


def test_compare_on_4_gpus_dp_beside_zero3(client: TestClient) -> None:
    tree = _get(client, "left=dp&right=zero3&gpus=4", "/compare")
    # DP 16 × 30e9 = 480e9 B = 447.0 GiB; ZeRO-3 16/4 × 30e9 = 120e9 B = 111.8 GiB; 360e9 B = 335.3 GiB.
    assert text(tree, "#compare-difference strong") == (
        "ZeRO-3 keeps 335.3 GiB less on each card than Data parallelism: 111.8 GiB instead of 447.0 GiB."
    )


def test_compare_the_same_stage_twice(client: TestClient) -> None:
    tree = _get(client, "left=zero2&right=zero2", "/compare")
    assert text(tree, "#compare-difference strong") == "Both keep 104.8 GiB on each card."
    assert tree.select(".cell.changed") == []


@pytest.mark.parametrize("query", ["left=zero9&right=zero3", "left=zero1&right=", "right=ZERO3"])
def test_compare_refuses_bad_stages(client: TestClient, query: str) -> None:
    _get(client, query, "/compare", status=422)


def test_compare_ids_are_unique_and_no_script_is_needed(client: TestClient) -> None:
    tree = _get(client, "left=zero1&right=zero3", "/compare")
    ids = [t["id"] for t in tree.select("[id]")]
    assert len(ids) == len(set(ids))
    assert tree.select("script") == []
    assert tree.select("[hx-get]") == []


@pytest.mark.parametrize(
    ("stage", "left", "right"), [("dp", "dp", "zero1"), ("zero2", "zero2", "zero3"), ("zero3", "dp", "zero3")]
)
def test_the_page_links_to_compare(client: TestClient, stage: str, left: str, right: str) -> None:
    href = str(one(_get(client, f"stage={stage}&gpus=16"), "#compare-link")["href"])
    assert urlsplit(href).path == "/compare"
    assert _query(href) == {"left": [left], "right": [right], "gpus": ["16"]}


@pytest.mark.parametrize(
    ("run", "noted"),
    [
        ("largest_layer=1T", True),
        ("model=llama-3-70b&params=5B", True),
        ("model=custom", True),
        ("gpus=16&largest_layer=2B&capacity=80GiB", False),
    ],
)
def test_compare_says_what_the_page_says_of_the_run(client: TestClient, run: str, noted: bool) -> None:
    # One run, one story: what the page notes of the run drawn (a count set aside, a layer bigger than
    # the model), the side-by-side page notes too.
    def notes(tree: BeautifulSoup, selector: str) -> list[str]:
        return [" ".join(li.get_text(" ").split()) for li in tree.select(selector)]

    page = notes(dom(client.get(f"/?stage=zero1&{run}").text), ".notes li")
    assert bool(page) is noted
    assert notes(dom(client.get(f"/compare?left=zero1&right=zero3&{run}").text), "#compare .notes li") == page
