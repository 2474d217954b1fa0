"""Shared fixtures: an in-process client and a parsed-DOM helper."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient

from app.main import create_app


@pytest.fixture(scope="session")
def exported_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default static export (`zero-bands export`), written once for the session."""
    from app.export import export

    out = tmp_path_factory.mktemp("export")
    summary = export(out)
    assert summary.missing == set()
    return out


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    """A client for the app with default settings."""
    with TestClient(create_app()) as test_client:
        yield test_client


def dom(html: str) -> BeautifulSoup:
    """Parse HTML the way the tests read it: as a tree, never as a string."""
    return BeautifulSoup(html, "html.parser")


def one(tree: Tag, selector: str) -> Tag:
    """The one element a selector must find."""
    found = tree.select_one(selector)
    assert found is not None, f"nothing matches {selector!r}"
    return found


def text(tree: Tag, selector: str) -> str:
    """The whitespace-normalised text of the one element a selector must find."""
    return " ".join(one(tree, selector).get_text(" ").split())
