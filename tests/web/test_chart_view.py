"""The step's chart on the parsed page: its lines, their points, the phase marked, the labels and the table."""

from __future__ import annotations

import itertools

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient

from tests.conftest import dom, one, text

GIB = 2**30
# The drawing's frame (app/web/chart_view.py): 600 units wide, the plot from x = 73 (10 units right of a
# three-digit tick's label at the largest text, 3 × 0.7 × 30 = 63 units) to 600 - 134 = 466, and from y = 62
# down to 240 - 40 = 200 in the first drawing (190 - 40 = 150 in the second).
LEFT, RIGHT, TOP = 73.0, 466.0, 62.0
PHASE_WIDTH = (RIGHT - LEFT) / 53
STAGES = ["dp", "zero1", "zero2", "zero3"]


def _page(client: TestClient, url: str) -> BeautifulSoup:
    response = client.get(url)
    assert response.status_code == 200, response.text[:300]
    return dom(response.text)


def _said(tag: Tag) -> str:
    return " ".join(tag.get_text(" ").split())


def _ys(line: Tag) -> list[float]:
    return [float(pair.split(",")[1]) for pair in str(line["points"]).split()]


def _xs(line: Tag) -> list[float]:
    return [float(pair.split(",")[0]) for pair in str(line["points"]).split()]


def _rises_and_falls(line: Tag) -> tuple[int, int]:
    """Up the drawing is down in y."""
    pairs = list(itertools.pairwise(_ys(line)))
    return sum(1 for a, b in pairs if b < a), sum(1 for a, b in pairs if b > a)


def test_zero3s_chart_lays_the_four_stages_on_one_scale(client: TestClient) -> None:
    chart = one(_page(client, "/?stage=zero3&phase=4"), "#step #chart")
    first = one(chart, "svg.chart-all")
    assert first["viewbox"] == "0 0 600 240"
    lines = first.select("polyline.line")
    assert [line["data-stage"] for line in lines] == STAGES
    # 53 phases a step (1 + 16 × 3 + 4), each drawn across its width: two points each.
    assert [len(str(line["points"]).split()) for line in lines] == [106] * 4
    assert [line["data-stage"] for line in first.select("polyline.current")] == ["zero3"]
    assert [_said(label) for label in first.select("text.line-label")] == ["DP", "ZeRO-1", "ZeRO-2", "ZeRO-3"]
    # The scale: 447.0 GiB rounds up to 600 in steps of 200 (ticks a line of the largest text apart).
    assert [_said(label) for label in first.select("text.tick-label")] == ["0", "200", "400", "600"]
    assert text(first, "text.unit") == "GiB"

    def y_of(nbytes: int) -> float:
        return 200 - nbytes / GIB / 600 * (200 - TOP)

    by_stage = {line["data-stage"]: line for line in lines}
    assert _ys(by_stage["dp"]) == [pytest.approx(y_of(30 * 10**9 * 16), abs=0.01)] * 106
    rest, layer = 30 * 10**9 * 16 // 8, 30 * 10**9 // 8 * 2
    zero3 = _ys(by_stage["zero3"])
    assert sorted(set(zero3), reverse=True) == [
        pytest.approx(y_of(rest), abs=0.01),
        pytest.approx(y_of(rest + layer), abs=0.01),
        pytest.approx(y_of(rest + 2 * layer), abs=0.01),
    ]
    # Data parallelism's flat line stands above ZeRO-3's sawtooth, all of it.
    assert max(_ys(by_stage["dp"])) < min(zero3)
    # ZeRO-3 rises at each of 16 gathers and each of 8 backward computes (the gradients), falls at 16 discards.
    assert _rises_and_falls(by_stage["zero3"]) == (24, 16)
    assert _rises_and_falls(by_stage["dp"]) == (0, 0)
    assert _rises_and_falls(by_stage["zero2"]) == (8, 8)  # the gradients in hand, backward only
    # The x axis: the step from its first phase's left edge to its last's right.
    assert (_xs(by_stage["zero3"])[0], _xs(by_stage["zero3"])[-1]) == (LEFT, RIGHT)


def test_the_phase_shown_is_marked_with_a_band_and_its_figure(client: TestClient) -> None:
    chart = one(_page(client, "/?stage=zero3&phase=4"), "#chart")
    for svg in chart.select("svg"):
        band = one(svg, "rect.now")
        assert float(str(band["x"])) == pytest.approx(LEFT + 4 * PHASE_WIDTH, abs=0.01)
        assert float(str(band["width"])) == pytest.approx(PHASE_WIDTH, abs=0.01)
        # 60e9 + 7.5e9 bytes: the state at rest and the layer gathered (column 1's gather).
        assert text(svg, "text.now-label") == "Phase 4: 62.9 GiB"
        dot = one(svg, "circle.now-dot")
        assert float(str(dot["cx"])) == pytest.approx(LEFT + 4.5 * PHASE_WIDTH, abs=0.01)


@pytest.mark.parametrize(
    ("url", "ticks", "label"),
    [
        # 69.8 GiB at most: up to 100 in steps of 50 (two steps, each at least a line of text of the 88 high).
        ("/?stage=zero3&phase=5", ["0", "50", "100"],
         "ZeRO-3 alone, on its own scale: from 55.9 GiB to 69.8 GiB."),
        ("/?stage=zero1&phase=5", ["0", "100", "200"], "ZeRO-1 alone, on its own scale: 153.7 GiB flat."),
        ("/?stage=dp&phase=0", ["0", "250", "500"],
         "Data parallelism alone, on its own scale: 447.0 GiB flat."),
    ],
)  # fmt: skip
def test_the_stage_shown_is_drawn_again_on_its_own_scale(
    client: TestClient, url: str, ticks: list[str], label: str
) -> None:
    svgs = one(_page(client, url), "#chart").select("svg")
    assert [svg["class"] for svg in svgs] == [["chart-svg", "chart-all"], ["chart-svg", "chart-own"]]
    second = svgs[1]
    assert second["viewbox"] == "0 0 600 190"
    assert len(second.select("polyline")) == len(second.select("polyline.current")) == 1
    assert [_said(t) for t in second.select("text.tick-label")] == ticks
    assert str(second["aria-label"]).startswith(label)
    if "zero3" in url:
        assert _rises_and_falls(one(second, "polyline")) == (24, 16)


def test_the_chart_says_its_lines_in_words(client: TestClient) -> None:
    chart = one(_page(client, "/?stage=zero3&phase=35"), "#chart")
    first = one(chart, "svg.chart-all")
    assert first["role"] == "img"
    label = str(first["aria-label"])
    assert text(first, "title") == label
    assert (
        "Data parallelism 447.0 GiB flat; ZeRO-1 153.7 GiB flat; ZeRO-2 from 104.8 GiB to 111.8 GiB; "
        "ZeRO-3 from 55.9 GiB to 69.8 GiB. At phase 35, ZeRO-3 holds 69.8 GiB."
    ) in label
    rows = [[_said(cell) for cell in row.select("th, td")] for row in chart.select("table tbody tr")]
    # Phase 35, a backward compute (column 4): ZeRO-2 and 3 hold a layer's gradients (7.5e9 B), ZeRO-3 its weights.
    assert rows == [
        ["Data parallelism", "447.0 GiB", "447.0 GiB", "447.0 GiB"],
        ["ZeRO-1", "153.7 GiB", "153.7 GiB", "153.7 GiB"],
        ["ZeRO-2", "104.8 GiB", "111.8 GiB", "111.8 GiB"],
        ["ZeRO-3", "55.9 GiB", "69.8 GiB", "69.8 GiB"],
    ]
    assert [text(row, "th") for row in chart.select("tr.current")] == ["ZeRO-3"]


def test_activations_rise_through_the_forward_and_fall_through_the_backward(client: TestClient) -> None:
    chart = one(_page(client, "/?stage=dp&phase=3&model=llama-3-8b&seq=4096"), "#chart")
    ys = _ys(one(chart, "polyline.dp"))
    # Points 2 to 97 are the 48 pass phases, 2 each: forward first, then backward.
    forward, backward = ys[2:50], ys[50:98]
    assert forward == sorted(forward, reverse=True)  # higher up, lower y
    assert backward == sorted(backward)
    assert forward[-1] < forward[0]
    assert ys[0] == ys[-1] == backward[-1]


def test_the_units_are_the_pages(client: TestClient) -> None:
    chart = one(_page(client, "/?stage=zero3&phase=1&units=GB"), "#chart")
    first = one(chart, "svg.chart-all")
    assert text(first, "text.unit") == "GB"
    # 480 GB for data parallelism: up to 600 in steps of 200; the phase's 60 + 7.5 = 67.5 GB (column 0's gather).
    assert [_said(t) for t in first.select("text.tick-label")] == ["0", "200", "400", "600"]
    assert text(first, "text.now-label") == "Phase 1: 67.5 GB"


@pytest.mark.parametrize(
    "url",
    [
        "/?stage=zero3&phase=5&theme=projector",
        "/embed?stage=zero3&phase=5&controls=step",
        "/embed?stage=zero1&phase=49&controls=step&calculator=1",
    ],
)
def test_the_chart_is_in_the_projector_and_the_embeds_step(client: TestClient, url: str) -> None:
    chart = one(_page(client, url), "#step #chart")
    assert len(one(chart, "svg.chart-all").select("polyline")) == 4


def test_the_chart_is_drawn_in_the_step_only(client: TestClient) -> None:
    page = _page(client, "/?stage=zero3")
    assert page.select("#chart") == []
    assert len(_page(client, "/?stage=zero3&phase=0").select("#chart")) == 1


def test_the_chart_has_no_style_attributes(client: TestClient) -> None:
    chart = one(_page(client, "/?stage=zero2&phase=26"), "#chart")
    assert [tag.name for tag in chart.find_all(style=True)] == []
