"""The rendering helpers: a column's cells are rendered once per column and always as the macro would."""

from __future__ import annotations

import gc

from hypothesis import given
from hypothesis import strategies as st
from markupsafe import Markup

from app.domain.bands import RECIPES, Recipe
from app.domain.stages import Stage
from app.templating import _CELLS, cells_markup, templates
from app.view_models import CellView, ColumnView
from app.views import card_columns
from tests.conftest import dom, one


def _macro(column: ColumnView) -> Markup:
    return Markup(templates.env.get_template("_widget.html").module.cells(column))  # type: ignore[attr-defined]


@given(
    stage=st.sampled_from(list(Stage)),
    gpus=st.integers(1, 4096),
    recipe=st.sampled_from(list(RECIPES.values())),
    previous=st.sampled_from([None, *Stage]),
    position=st.integers(0, 7),
)
def test_the_cached_cells_are_what_the_macro_renders(
    stage: Stage, gpus: int, recipe: Recipe, previous: Stage | None, position: int
) -> None:
    from app.domain.change import change
    from app.domain.sharding import shown_indices

    shown = shown_indices(gpus)
    card = shown[position % len(shown)]
    moved = None if previous is None or previous is stage else change(previous, stage, recipe, gpus)
    for column in card_columns(stage, gpus, recipe, card, position == 0, moved):
        first = cells_markup(column)
        assert first == _macro(column)
        assert cells_markup(column) is first  # the second time from the cache
        # Every cell drawn, each with its name: as many spans as the column has cells.
        assert len(dom(str(first)).select("span.cell[aria-label]")) == len(column.cells)


def test_a_column_that_goes_takes_its_markup_with_it_and_an_equal_one_is_rendered_anew() -> None:
    from app.domain.bands import Band
    from app.domain.sharding import CellState

    def column(label: str) -> ColumnView:
        cell = CellView(0, 0, Band.WEIGHTS, CellState.SOLID, 0, 2, label, True)
        return ColumnView(0, True, (cell,))

    one = column("first")
    key = id(one)
    assert 'aria-label="first"' in cells_markup(one)
    del one
    gc.collect()
    assert key not in _CELLS
    # A new column, whatever id it gets, is rendered from its own cells.
    assert 'aria-label="second"' in cells_markup(column("second"))


def test_pages_are_sent_without_the_templates_indentation() -> None:
    from fastapi.testclient import TestClient

    from app.main import create_app

    with TestClient(create_app()) as client:
        for path in ["/?stage=zero3", "/?stage=zero2&phase=3", "/compare", "/measured", "/embed"]:
            html = client.get(path).text
            indented = [line for line in html.splitlines() if line[:1] in {" ", "\t"}]
            assert indented == [], (path, indented[:3])
    # The one place whitespace shows, the snippet to copy, keeps its own lines.
    snippet = one(dom(client.get("/?stage=zero1").text), "#embed-snippet").get_text()
    assert "\n<script" in snippet
