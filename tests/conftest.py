"""Shared fixtures: an in-process client, a parsed-DOM helper and the static export."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient
from hypothesis import settings
from starlette.types import ASGIApp, Message

from app.main import create_app
from app.paths import STATIC_DIR
from app.serving.assets import BUNDLES, bundled, minified

# Timing is for the benchmark, not for tests: a loaded machine must not turn a slow example into a
# failure (hypothesis's default deadline is 200 ms per example). Two profiles: "full", the example counts each
# test names (hypothesis's 100 where it names none), for every run but the quick loop; "quick", a fifth of them
# (at least QUICK_EXAMPLES_LEAST), which the quick loop loads. `--hypothesis-profile full` gives the quick loop
# the full counts. The property is the same in both; the full run looks further for a counterexample.
settings.register_profile("full", deadline=None)
settings.register_profile("quick", deadline=None, max_examples=20)
settings.load_profile("full")
QUICK_EXAMPLES_SHARE = 5
QUICK_EXAMPLES_LEAST = 10

# The slow ones, marked by where they are rather than one by one, so a new test there is marked too:
# `pytest -m "not slow"` is the loop of under a minute for someone editing one module. Ruff and mypy are in
# it (tests/test_quality.py): a warm mypy cache makes them a second or two.
SLOW_MODULES = frozenset(
    {
        "test_packaging",
        "test_schemathesis",
        "test_bench",
        "test_export",
        "test_deploying",
        "test_live_workers",
        # Real processes by nature: uvicorn's workers started, signalled and starved (test_server), a real
        # Redis killed and restarted under the hub (test_redis_hub). The logic they drive is tested in
        # process in the quick loop: the server's options (tests/cli, tests/serving), both hubs (tests/live).
        "test_server",
        "test_redis_hub",
    }
)
QUICK_LOOP = "not slow"
"""The quick loop's mark expression, as docs/testing.md and the README write it."""
FIRST_MODULES = ("test_quality",)
"""Run first: a cold mypy takes half a minute, which the other worker spends on the rest."""
HEAVY_FOLDERS = ("web",)
"""Then these, whose modules render pages and take seconds each: the last modules given out are the small ones,
so the two workers end together."""


def _is_slow_path(path: Path) -> bool:
    """Whether every test in the file or folder at `path` is slow by where it is."""
    return "browser" in path.parts or path.stem in SLOW_MODULES


def _is_quick_loop(config: pytest.Config) -> bool:
    """Whether this run is the quick loop: its mark expression is exactly `not slow`."""
    return " ".join(str(config.getoption("markexpr", "")).split()) == QUICK_LOOP


def pytest_configure(config: pytest.Config) -> None:
    """The quick loop: hypothesis's "quick" profile, unless `--hypothesis-profile` names one; a module per worker.

    A module's tests share its pages and the app's memos (the reports, the response cache), which are each
    worker's own: sent to one worker (`--dist loadfile`), a module's pages are rendered and its runs worked out
    once, not once per worker; about a tenth of the loop's CPU. The full run keeps `loadgroup` (addopts), whose
    groups keep the browser tests on one worker and write the export once. The modules are given out in the
    order `pytest_collection_modifyitems` sorts them, not xdist's (most tests first), which put the tools last:
    a cold mypy then held one worker for half a minute at the end, alone.
    """
    if config.getoption("hypothesis_profile", None) is None:
        settings.load_profile("quick" if _is_quick_loop(config) else "full")
    if _is_quick_loop(config) and config.getoption("dist", "no") == "loadgroup":
        config.option.dist = "loadfile"
        config.option.loadscopereorder = False


def quick_examples(count: int) -> int:
    """A test's example count in the quick loop: a fifth of the full run's, and never below the least."""
    return max(QUICK_EXAMPLES_LEAST, -(-count // QUICK_EXAMPLES_SHARE))


def examples(count: int) -> int:
    """The example count a property test names, `@settings(max_examples=examples(400))`.

    As named in the full run; its quick-loop count (`quick_examples`) where the quick profile is loaded. Read
    when the test module is imported, which is after `pytest_configure` has loaded the profile.
    """
    return quick_examples(count) if settings.default is settings.get_profile("quick") else count


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """In the quick loop, leave the slow modules uncollected, rather than collected and then deselected.

    Collecting them costs each worker about 5 s of CPU: schemathesis builds its cases from the schema when the
    module is collected, and the browser tests import Playwright. Any other mark expression collects them.
    """
    return True if _is_quick_loop(config) and _is_slow_path(collection_path) else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the browser, wheel, schemathesis, export and benchmark tests slow; put the tools first.

    The tests that use the static export share one xdist group, so one worker writes it once; the browser
    tests share another, so they run one after another on one worker while the other takes the rest.
    """
    for item in items:
        path = Path(str(item.path))
        uses_export = "exported_site" in getattr(item, "fixturenames", ())
        if _is_slow_path(path) or uses_export:
            item.add_marker(pytest.mark.slow)
        if uses_export:
            item.add_marker(pytest.mark.xdist_group("export"))
        elif "browser" in path.parts:  # one Chromium at a time: two on two cores time each other out
            item.add_marker(pytest.mark.xdist_group("browser"))
    items.sort(key=_order)


def _order(item: pytest.Item) -> tuple[bool, bool]:
    """The tools first, then the heavy folders, then the rest; each module's tests in their own order."""
    path = Path(str(item.path))
    return path.stem not in FIRST_MODULES, not set(HEAVY_FOLDERS) & set(path.parts)


def full_run_only(*cases: object) -> list[Any]:
    """Parametrized cases marked slow: the full run checks them, the quick loop keeps the others.

    For tables whose every case renders many pages: the rule stays in the quick loop on the cases left
    unmarked, and the whole table runs in CI. A tuple is one case of several arguments.
    """
    return [pytest.param(*case if isinstance(case, tuple) else (case,), marks=pytest.mark.slow) for case in cases]


@pytest.fixture(scope="session")
def exported_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default static copy, written once for the session by the real `zero-bands export` command.

    In a process of its own, as a person would run it: the views it renders stay out of this one.
    """
    command = shutil.which("zero-bands", path=str(Path(sys.executable).parent)) or shutil.which("zero-bands")
    assert command, "the zero-bands command is not installed"
    out = tmp_path_factory.mktemp("export")
    result = subprocess.run([command, "export", str(out)], capture_output=True, text=True, check=False, timeout=300)
    assert (result.returncode, result.stderr) == (0, ""), result.stderr
    assert result.stdout.startswith("Wrote "), result.stdout
    return out


@pytest.fixture(scope="session")
def client() -> Iterator[TestClient]:
    """A client for the app with default settings."""
    with TestClient(create_app()) as test_client:
        yield test_client


def dom(html: str) -> BeautifulSoup:
    """Parse HTML the way the tests read it: as a tree, never as a string.

    With lxml, as a browser reads it (an HTML parser in C): html.parser took about half the quick loop.
    """
    return BeautifulSoup(html, "lxml")


def sent(html: str) -> BeautifulSoup:
    """Parse HTML as the elements sent, no more (for what a fragment leaves out).

    lxml, as a browser does, wraps a fragment in html and body; html.parser keeps what was sent.
    """
    return BeautifulSoup(html, "html.parser")


def one(tree: Tag, selector: str) -> Tag:
    """The one element a selector must find."""
    found = tree.select_one(selector)
    assert found is not None, f"nothing matches {selector!r}"
    return found


def text(tree: Tag, selector: str) -> str:
    """The whitespace-normalised text of the one element a selector must find."""
    return " ".join(one(tree, selector).get_text(" ").split())


def served(name: str) -> bytes:
    """A static asset as the app serves it: minified, or a bundle of several."""
    if name in BUNDLES:
        return bundled(STATIC_DIR, BUNDLES[name])
    return minified(name, (STATIC_DIR / name).read_bytes())


def unversioned(url: str) -> str:
    """An asset's address without its fingerprint, after checking the fingerprint is its content's hash."""
    path, _, query = url.partition("?")
    name = path.rpartition("/static/")[2]
    expected = hashlib.sha256(served(name)).hexdigest()[:12]
    assert query == f"v={expected}", url
    return path


_STATES = {"solid", "partial", "dashed"}
_HOLDINGS = {"held", "partial", "gathered", "sent", "dashed"}


def cell_facts(cell: Tag) -> dict[str, str]:
    """What a grid cell says of itself, read as a browser would.

    Card and weight come from its section and column; band, state and (in a step) holding from its classes.
    """
    classes = [str(c) for c in cell.get("class") or []]
    card = cell.find_parent("section", class_="card")
    column = cell.find_parent(class_="column")
    assert card is not None, cell
    assert column is not None, cell
    holding = classes[4] if len(classes) > 4 and classes[4] in _HOLDINGS else ""
    return {
        "card": str(card["data-card-index"]),
        "weight": str(column["data-weight"]),
        "band": next(c.removeprefix("band-") for c in classes if c.startswith("band-")),
        "state": next(c for c in classes if c in _STATES),
        "holding": holding,
    }


def cell_selector(card: int | None = None, weight: int | None = None, band: str | None = None) -> str:
    """A CSS selector for the grid's cells on that card, weight and band (any, where None)."""
    return (
        "#grid section.card" + (f'[data-card-index="{card}"]' if card is not None else "")
        + " .column" + (f'[data-weight="{weight}"]' if weight is not None else "")
        + " > .cell" + (f".band-{band}" if band is not None else "")
    )  # fmt: skip


def opened_panel(client: TestClient, page: Tag, headers: dict[str, str] | None = None) -> BeautifulSoup:
    """The "Embed this" panel as the page loads it when opened: the fragment its hx-get names.

    The panel's link for a browser without JavaScript must name the same address.
    """
    panel = one(page, "details#embed-this")
    href = str(panel["hx-get"])
    assert one(panel, "#embed-open")["href"] == href
    response = client.get(href, headers={"HX-Request": "true", **(headers or {})})
    assert response.status_code == 200
    return dom(response.text)


async def asgi_get(app: ASGIApp, query: str, headers: list[tuple[bytes, bytes]] | None = None) -> list[Message]:
    """GET / with `query` straight through an ASGI app, as a server calls it; the messages it sent.

    For tests of what happens when requests arrive together, which a test client sends one by one.
    """
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
        "path": "/", "raw_path": b"/", "query_string": query.encode(), "root_path": "",
        "headers": [(b"host", b"testserver"), *(headers or [])], "client": ("127.0.0.1", 9),
        "server": ("127.0.0.1", 80),
    }  # fmt: skip
    await app(scope, receive, send)
    return sent
