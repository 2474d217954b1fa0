"""Shared fixtures: an in-process client and a parsed-DOM helper."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient
from hypothesis import settings

from app.main import create_app

# Timing is for the benchmark, not for tests: a loaded machine must not turn a slow example into a
# failure (hypothesis's default deadline is 200 ms per example).
settings.register_profile("zero-bands", deadline=None)
settings.load_profile("zero-bands")


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
