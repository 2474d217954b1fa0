"""Helpers several web test modules share: a page fetched and parsed, an address's query, a column of the table."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient

from app.domain.stages import Stage
from tests.conftest import dom, one, text

HX = {"HX-Request": "true"}

# A tiny run: 7 weights on 16 cards, fp32 Adam, so every card keeps a padded slice.
RUN = "params=7&largest_layer=5&gpus=16&recipe=fp32-adam&units=GB"

# The page a person was looking at, as htmx (HX-Current-URL) or a browser (Referer) names it.
SHOWN_16 = "http://testserver/?stage=zero2&gpus=16"


def stage_page(client: TestClient, stage: Stage, headers: dict[str, str] | None = None) -> BeautifulSoup:
    """The page (or with HX-Request, the widget) for `stage` of the default run."""
    response = client.get("/", params={"stage": stage.value}, headers=headers or {})
    assert response.status_code == 200
    return dom(response.text)


def run_page(client: TestClient, query: str, headers: dict[str, str] | None = None) -> BeautifulSoup:
    """The page for the run a query string describes, which must be answered with a 200."""
    response = client.get(f"/?{query}", headers=headers or {})
    assert response.status_code == 200, response.text[:500]
    return dom(response.text)


def get_tree(client: TestClient, query: str, path: str = "/", status: int = 200) -> BeautifulSoup:
    """The page at `path` with `query`, answered with `status`."""
    response = client.get(f"{path}?{query}")
    assert response.status_code == status
    return dom(response.text)


def table_cells(tree: BeautifulSoup, column: str) -> list[str]:
    """One column of the comparison table, a stage a row."""
    return [text(row, column) for row in tree.select("table.figures tbody tr")]


def query_of(url: str) -> dict[str, list[str]]:
    """An address's query, parsed."""
    return parse_qs(urlsplit(url).query)


def theme_in(url: str) -> list[str]:
    """The theme an address names: [] for the default."""
    return query_of(url).get("theme", [])


def after_the_switcher(tree: BeautifulSoup) -> list[Tag]:
    """The widget's elements after the stage switcher, in order (the switcher may share a part with them)."""
    nav = one(tree, "#widget nav.switcher")
    after = [t for t in nav.find_next_siblings() if isinstance(t, Tag)]
    part = nav.parent
    if isinstance(part, Tag) and part.get("id") != "widget":
        after += [t for t in part.find_next_siblings() if isinstance(t, Tag)]
    return after
