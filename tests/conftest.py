"""Shared fixtures: an in-process client and a parsed-DOM helper."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.main import create_app


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    """A client for the app with default settings."""
    with TestClient(create_app()) as test_client:
        yield test_client


def dom(html: str) -> BeautifulSoup:
    """Parse HTML the way the tests read it: as a tree, never as a string."""
    return BeautifulSoup(html, "html.parser")
