"""The rendering helpers: a column's cells are rendered once per column and always as the macro would."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st
from markupsafe import Markup

from app.domain.bands import RECIPES, Recipe
from app.domain.stages import Stage
from app.web.templating import rendered, rendered_in_view, templates
from app.web.view_models import CellView, ColumnView
from app.web.views import card_columns
from tests.conftest import dom, one, opened_panel


def _macro(name: str, obj: object) -> Markup:
    return Markup(getattr(templates.env.get_template("_widget.html").module, name)(obj))


@given(
    stage=st.sampled_from(list(Stage)),
    gpus=st.integers(1, 4096),
    recipe=st.sampled_from(list(RECIPES.values())),
    previous=st.sampled_from([None, *Stage]),
    position=st.integers(0, 7),
)
def test_a_cached_plot_is_what_the_macro_renders(
    stage: Stage, gpus: int, recipe: Recipe, previous: Stage | None, position: int
) -> None:
    from app.domain.change import change
    from app.domain.sharding import shown_indices

    shown = shown_indices(gpus)
    card = shown[position % len(shown)]
    moved = None if previous is None or previous is stage else change(previous, stage, recipe, gpus)
    columns = card_columns(stage, gpus, recipe, card, position == 0, moved)
    first = rendered("plot", columns)
    assert first == _macro("plot", columns)
    assert rendered("plot", columns) is first  # the second time from the cache
    # Every cell drawn, each with its name, in its column: as many spans as the column has cells.
    page = dom(str(first))
    for column in columns:
        if column.weight is None:
            continue
        drawn = one(page, f'.column[data-weight="{column.weight}"]').select("span.cell[aria-label]")
        assert [span["aria-label"] for span in drawn] == [cell.label for cell in column.cells]


@pytest.mark.parametrize("render", [rendered, rendered_in_view])
def test_a_new_object_is_never_given_another_ones_markup(render: Callable[[str, object], Markup]) -> None:
    from app.domain.bands import Band
    from app.domain.sharding import CellState

    def columns(label: str) -> tuple[ColumnView, ...]:
        cell = CellView(0, 0, Band.WEIGHTS, CellState.SOLID, 0, 2, label, True)
        return (ColumnView(0, True, (cell,)),)

    # Far more objects than the cache holds, each dropped at once: ids are reused, entries evicted.
    for i in range(3000):
        label = f"cell {i}"
        assert one(dom(str(render("plot", columns(label)))), "span.cell")["aria-label"] == label


def test_pages_are_sent_without_the_templates_indentation() -> None:
    from fastapi.testclient import TestClient

    from app.main import create_app

    with TestClient(create_app()) as client:
        for path in ["/?stage=zero3", "/?stage=zero2&phase=3", "/compare", "/measured", "/embed", "/share"]:
            html = client.get(path).text
            indented = [line for line in html.splitlines() if line[:1] in {" ", "\t"}]
            assert indented == [], (path, indented[:3])
        # The one place whitespace shows, the snippet to copy, keeps its own lines.
        snippet = one(opened_panel(client, dom(client.get("/?stage=zero1").text)), "#embed-snippet").get_text()
    assert "\n<script" in snippet
