"""Every route in one table, then the page's DOM for each stage."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient

from app.domain.bands import Band
from app.domain.stages import Stage
from tests.conftest import cell_facts, cell_selector, dom, one, opened_panel, text, unversioned

HX = {"HX-Request": "true"}
RESTORE = {"HX-Request": "true", "HX-History-Restore-Request": "true"}
HTML, JSON = "text/html", "application/json"

# path, request headers, status, content type, what the body is
ROUTES = [
    ("/", {}, 200, HTML, "page"),
    ("/?stage=zero2", {}, 200, HTML, "page"),
    ("/?stage=zero2", HX, 200, HTML, "fragment"),
    ("/?stage=zero2", RESTORE, 200, HTML, "page"),
    ("/?stage=zero3&utm_source=course", {}, 200, HTML, "page"),
    ("/?stage=zero9", {}, 422, HTML, "page"),
    ("/?stage=zero9", HX, 422, HTML, "fragment"),
    ("/?stage=", {}, 422, HTML, "page"),
    ("/nowhere", {}, 404, HTML, "page"),
    ("/nowhere", HX, 404, HTML, "fragment"),
    ("/api/stages", {}, 200, JSON, "json"),
    ("/api/layout", {}, 200, JSON, "json"),
    ("/api/layout?stage=zero3", {}, 200, JSON, "json"),
    ("/api/layout?stage=zero9", {}, 422, JSON, "json"),
    ("/api/nowhere", {}, 404, JSON, "json"),
    ("/openapi.json", {}, 200, JSON, "json"),
    ("/static/app.css", {}, 200, "text/css", "asset"),
    ("/static/grid.js", {}, 200, "text/javascript", "asset"),
    ("/static/htmx-2.0.11.min.js", {}, 200, "text/javascript", "asset"),
    ("/static/favicon.svg", {}, 200, "image/svg+xml", "asset"),
    ("/favicon.ico", {}, 200, "image/svg+xml", "asset"),
]


@pytest.mark.parametrize(("path", "headers", "status", "content_type", "kind"), ROUTES)
def test_route(
    client: TestClient, path: str, headers: dict[str, str], status: int, content_type: str, kind: str
) -> None:
    response = client.get(path, headers=headers)
    assert response.status_code == status
    assert response.headers["content-type"].startswith(content_type)
    assert "content-security-policy" in response.headers
    if kind in {"page", "fragment"}:
        vary = {v.strip().lower() for v in response.headers["vary"].split(",")}
        assert {"hx-request", "hx-history-restore-request"} <= vary
        tree = dom(response.text)
        assert (tree.find("html") is not None) == (kind == "page")
        widget = tree.select_one("section#widget")
        assert widget is not None
        assert widget.select_one("nav.switcher") is not None
        if kind == "fragment":
            roots = [child for child in tree.children if isinstance(child, Tag)]
            # The widget, and the footer's JSON links for the run it draws, swapped out of band.
            assert [root.name for root in roots] == ["title", "section", "span"]
            assert roots[1].get("id") == "widget"
            assert (roots[2].get("id"), roots[2].get("hx-swap-oob")) == ("json-links", "innerHTML")
    if kind == "json":
        body = response.json()
        # Each JSON answer carries what its route is for: rows, cells, a message, or the schema.
        if status >= 400:
            assert set(body) >= {"message", "detail"}
        elif path.startswith("/api/stages"):
            assert [row["stage"] for row in body] == [stage.value for stage in Stage]
        elif path.startswith("/api/layout"):
            assert len(body["cells"]) == 8 * 8 * 4
        else:
            assert set(body["paths"]) >= {"/api/stages", "/api/layout", "/api/memory", "/api/step"}


def _page(client: TestClient, stage: Stage, headers: dict[str, str] | None = None) -> BeautifulSoup:
    response = client.get("/", params={"stage": stage.value}, headers=headers or {})
    assert response.status_code == 200
    return dom(response.text)


def test_default_stage_is_data_parallelism(client: TestClient) -> None:
    grid = dom(client.get("/").text).select_one("#grid")
    assert grid is not None
    assert grid["data-stage"] == "dp"


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
    tree = _page(client, stage, headers)
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


def test_every_cell_names_its_card_weight_band_and_holder(client: TestClient) -> None:
    cells = _page(client, Stage.ZERO1).select("#grid .cell")
    for cell in cells:
        label = str(cell["aria-label"])
        facts = cell_facts(cell)
        assert cell["role"] == "img"
        assert f"GPU {facts['card']}, weight {facts['weight']}," in label
        if facts["state"] == "dashed":
            assert f"GPU {facts['weight']} holds it on this weight's behalf" in label
    dashed_master = _page(client, Stage.ZERO1).select_one(cell_selector(2, 5, "master"))
    assert dashed_master is not None
    assert dashed_master["aria-label"] == (
        "GPU 2, weight 5, Master copy (fp32, 4 B): not stored here. GPU 5 holds it on this weight's behalf."
    )


def test_grid_has_exactly_one_tab_stop(client: TestClient) -> None:
    cells = _page(client, Stage.ZERO2).select("#grid .cell")
    assert [c["tabindex"] for c in cells].count("0") == 1


@pytest.mark.parametrize("stage", list(Stage))
def test_switcher_marks_the_current_stage_and_links_work_without_js(client: TestClient, stage: Stage) -> None:
    links = _page(client, stage).select("nav.switcher a")
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


SEED_TABLE = [
    ["Data parallelism", "16.00", "447.0 GiB", "2P"],
    ["ZeRO-1", "5.50", "153.7 GiB", "2P"],
    ["ZeRO-2", "3.75", "104.8 GiB", "2P"],
    ["ZeRO-3", "2.00", "55.9 GiB", "3P"],
]


@pytest.mark.parametrize("stage", list(Stage))
def test_table_shows_the_seed_figures_with_the_current_row_marked(client: TestClient, stage: Stage) -> None:
    rows = _page(client, stage).select("table.figures tbody tr")
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
            for row in _page(client, Stage.DP).select("table.figures tbody tr")}  # fmt: skip
    assert rows["dp"] == (
        "reduce-scatter of the gradients after the backward pass + all-gather of the gradients to finish the all-reduce"
    )
    assert rows["zero3"].count("all-gather of the weights") == 2


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
    cards = _page(client, stage).select("#grid .card")
    assert [text(card, "h4") for card in cards] == [f"GPU {i}" for i in range(8)]
    for card in cards:
        # Real quantities only: the picture's own scale (its 8 weights, "16 B of 128 B") is not one.
        assert card.select(".card-total") == []
        assert "128 B" not in card.get_text()
        assert text(card, ".card-sub") == f"{per_weight} B/weight · {per_gpu}"


def test_headline_and_explanation(client: TestClient) -> None:
    tree = _page(client, Stage.ZERO3)
    assert text(tree, "#stage-heading") == "ZeRO-3: Split the weights themselves."
    assert text(tree, ".headline") == (
        "Each card keeps 2.00 bytes per weight: 55.9 GiB for a model of 30B weights, "
        "12.5% of what data parallelism keeps."
    )
    assert "largest single layer" in text(tree, ".explanation")


def test_legend_explains_bands_and_states_without_colour(client: TestClient) -> None:
    legend = one(_page(client, Stage.DP), ".legend")
    bands = [li.get_text(" ", strip=True) for li in legend.select("ul.bands li")]
    assert [b.split(" ·")[0] for b in bands] == ["Weights", "Gradients", "Master copy", "Adam moments"]
    assert "(2 : 2 : 4 : 8)" in text(legend, "p")
    states = [li.get_text(" ", strip=True) for li in legend.select("ul.states li")]
    assert states[0].startswith("Filled")
    assert states[1].startswith("Dashed outline")


def test_bands_are_drawn_in_proportion_to_their_bytes(client: TestClient) -> None:
    column = one(_page(client, Stage.DP), "#grid .column")
    classes = [next(c for c in cell["class"] if c.startswith("nb-")) for cell in column.select(".cell")]
    assert classes == ["nb-2", "nb-2", "nb-4", "nb-8"]


def test_responsible_weight_is_marked_only_when_something_is_sharded(client: TestClient) -> None:
    assert _page(client, Stage.DP).select("#grid .axis .responsible") == []
    marked = _page(client, Stage.ZERO1).select("#grid .card .axis .responsible")
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
    tree = _page(client, stage)
    for card in range(8):
        for cell in tree.select(cell_selector(card, card)):
            band, label = cell_facts(cell)["band"], str(cell["aria-label"])
            assert label.endswith(
                f"which is responsible for weight {card}." if band in sharded else "every card keeps its own copy."
            ), label


def test_page_head_loads_only_local_assets_and_configures_htmx(client: TestClient) -> None:
    tree = dom(client.get("/").text)
    scripts = [unversioned(str(s["src"])) for s in tree.select("script")]
    assert scripts == [
        "/static/htmx-2.0.11.min.js",
        "/static/idiomorph-ext-0.8.0.min.js",
        "/static/app.js",
    ]
    assert all(not s.string for s in tree.select("script"))
    assert [unversioned(str(link["href"])) for link in tree.select("link[rel~=stylesheet]")] == ["/static/app.css"]
    assert tree.select("[style]") == []
    assert not any(attr.startswith(("on", "hx-on")) for tag in tree.find_all(True) for attr in tag.attrs)
    config = tree.select_one('meta[name="htmx-config"]')
    assert config is not None
    settings = json.loads(str(config["content"]))
    assert settings["allowEval"] is False
    assert settings["includeIndicatorStyles"] is False
    assert settings["historyCacheSize"] == 0


def test_head_request_is_answered(client: TestClient) -> None:
    response = client.head("/?stage=zero1")
    assert response.status_code == 200
    assert response.text == ""


def test_app_mounted_under_a_prefix_links_under_it() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from app.main import create_app

    outer = Starlette(routes=[Mount("/course/zero", app=create_app())])
    with TestClient(outer) as prefixed:
        tree = dom(prefixed.get("/course/zero/?stage=zero1").text)
        # The "Embed this" panel's links are absolute, for pasting elsewhere; its choices of what to embed
        # (which open the panel again, chosen) and every other link are root-relative.
        panel = opened_panel(prefixed, tree).select("[href]")
    choices = [tag for tag in panel if "/share?" in str(tag["href"])]
    shared = [tag for tag in panel if tag not in choices]
    assert shared
    assert choices
    assert all(str(tag["href"]).startswith("http://testserver/course/zero/") for tag in shared)
    assert all(str(tag["href"]).startswith("/course/zero/share?") for tag in choices)
    urls = [
        str(tag.get("href") or tag.get("src") or tag.get("hx-get")) for tag in tree.select("[href], [src], [hx-get]")
    ]
    assert urls
    # An in-page link (the skip link, "#grid") stays on whatever address the page has.
    assert all(url.startswith(("/course/zero/", "#")) for url in urls), urls
    assert any(not url.startswith("#") for url in urls)


@pytest.mark.parametrize(
    "query",
    ["/?stage=zero2", "/?stage=zero2&from=zero1", "/?stage=zero3&from=dp", "/?stage=dp&from=zero3",
     "/?stage=zero1&from=zero1", "/?stage=zero2&from=zero1&gpus=1", "/?stage=zero2&phase=3"],
)  # fmt: skip
def test_the_rings_round_what_a_switch_changed_are_explained_whenever_they_are_drawn(
    client: TestClient, query: str
) -> None:
    tree = dom(client.get(query, headers={"HX-Request": "true"}).text)
    said = [li.get_text(" ", strip=True) for li in tree.select(".legend ul.states li")]
    ringed = [s for s in said if s.startswith("Ringed")]
    if tree.select("#step"):
        # In the step the legend's ring is the phase's: what it works on.
        assert ringed == ["Ringed : what this phase works on."]
        assert tree.select("#grid .cell.changed") == []
        return
    # At rest a ring is a cell the last switch of arrangement changed, said on every page (so it never
    # moves what is below it): in the note under the cards, and in the projector's key too, whose note
    # is off the screen.
    note = text(tree, "#grid .grid-note")
    assert "switch of arrangement" in note
    assert "ringed" in note
    assert ringed == []
    projector = dom(client.get(query + "&theme=projector", headers={"HX-Request": "true"}).text)
    [entry] = [li.get_text(" ", strip=True) for li in projector.select(".legend li.ring-entry")]
    assert entry.startswith("Ringed")
    assert "switch of arrangement" in entry
