"""app/web/compare_view.py: /compare, two stages of one run side by side."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from tests.conftest import dom, one, text
from tests.web.helpers import get_tree, query_of


def test_compare_shows_both_stages_and_the_difference(client: TestClient) -> None:
    tree = get_tree(client, "left=zero1&right=zero3", "/compare")
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
    tree = get_tree(client, "left=zero1&right=zero3&gpus=4&units=GB", "/compare")
    assert query_of(str(one(tree, "#left-dp")["href"])) == {
        "left": ["dp"], "right": ["zero3"], "gpus": ["4"], "units": ["GB"]
    }  # fmt: skip
    assert query_of(str(one(tree, "#right-zero2")["href"])) == {
        "left": ["zero1"], "right": ["zero2"], "gpus": ["4"], "units": ["GB"]
    }  # fmt: skip
    assert one(tree, "#left-zero1")["aria-current"] == "page"
    assert one(tree, "#right-zero3")["aria-current"] == "page"
    assert len(one(tree, "#left").select(".card")) == 4
    assert query_of(str(one(tree, "#compare-back")["href"])) == {"stage": ["zero1"], "gpus": ["4"], "units": ["GB"]}


def test_compare_on_4_gpus_dp_beside_zero3(client: TestClient) -> None:
    tree = get_tree(client, "left=dp&right=zero3&gpus=4", "/compare")
    # DP 16 × 30e9 = 480e9 B = 447.0 GiB; ZeRO-3 16/4 × 30e9 = 120e9 B = 111.8 GiB; 360e9 B = 335.3 GiB.
    assert text(tree, "#compare-difference strong") == (
        "ZeRO-3 keeps 335.3 GiB less on each card than Data parallelism: 111.8 GiB instead of 447.0 GiB."
    )


def test_compare_the_same_stage_twice(client: TestClient) -> None:
    tree = get_tree(client, "left=zero2&right=zero2", "/compare")
    assert text(tree, "#compare-difference strong") == "Both keep 104.8 GiB on each card."
    assert tree.select(".cell.changed") == []


@pytest.mark.parametrize("query", ["left=zero9&right=zero3", "left=zero1&right=", "right=ZERO3"])
def test_compare_refuses_bad_stages(client: TestClient, query: str) -> None:
    get_tree(client, query, "/compare", status=422)


def test_compare_ids_are_unique_and_no_script_is_needed(client: TestClient) -> None:
    tree = get_tree(client, "left=zero1&right=zero3", "/compare")
    ids = [t["id"] for t in tree.select("[id]")]
    assert len(ids) == len(set(ids))
    assert tree.select("script") == []
    assert tree.select("[hx-get]") == []


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


def test_compare_draws_the_cut(client: TestClient) -> None:
    # docs/parallelism.md by hand: gpus=16, tp=2, pp=2, ZeRO-3 (dp = 4): GPU 3 (stage 1, dp 1, tensor 1) keeps the
    # second half of column 1 of every band; columns 0, 2, 3 are dashed (GPUs 1, 5, 7); 4 to 7 absent (stage 2).
    tree = get_tree(client, "left=zero1&right=zero3&gpus=16&tp=2&pp=2", "/compare")
    right = one(tree, "#right")
    card = right.select(".card")[3]
    states = {(int(str(c["data-weight"])), str(c["data-state"])) for c in card.select(".cell")}
    assert states == {(0, "dashed"), (1, "partial"), (2, "dashed"), (3, "dashed")} | {
        (w, "absent") for w in range(4, 8)
    }
    assert [text(side, ".compare-cut") for side in (one(tree, "#left"), right)] == [
        "The model is cut: each card shows its pipeline stage's eighths of the model (another stage's hatched) and, "
        "part filled, its tensor slice. The frames of its stages and tensor groups are on the main page."
    ] * 2


def test_compare_of_many_cut_cards_says_which_are_left_out(client: TestClient) -> None:
    right = one(get_tree(client, "left=zero1&right=zero3&gpus=64&tp=4&pp=4", "/compare"), "#right")
    assert len(right.select(".card")) == 16
    assert [g.get_text(" ", strip=True).split(":")[0] for g in right.select(".card-gap")] == [
        "… GPU 4 to GPU 15", "… GPU 20 to GPU 31", "… GPU 36 to GPU 47", "… GPU 52 to GPU 63"
    ]  # fmt: skip


def test_compare_without_a_cut_says_nothing_of_it(client: TestClient) -> None:
    assert not get_tree(client, "left=zero1&right=zero3", "/compare").select(".compare-cut")
