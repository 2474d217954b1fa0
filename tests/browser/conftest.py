"""Real-browser fixtures: Debian's Chromium, the real `zero-bands` command, and a watch on the page."""

from __future__ import annotations

import http.server
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Frame, Page, Request, Response, expect

CHROMIUM = os.environ.get("ZERO_BANDS_CHROMIUM", "/usr/bin/chromium")
# Without these, Chromium reaches for Google's services at start-up, which this network refuses.
LAUNCH_FLAGS = [
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-gpu",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-results" / "screenshots"

# Chromium reports CSP violations as console errors too; this catches any it might not.
RECORD_CSP = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI);
});
"""


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """Launch Debian's Chromium; Playwright downloads no browser here."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (apt-get install chromium)")
    return {**browser_type_launch_args, "executable_path": CHROMIUM, "args": LAUNCH_FLAGS}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_for(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"zero-bands exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("zero-bands did not start listening within 20 s")


def zero_bands_command() -> str:
    """The installed `zero-bands` command, next to this Python first."""
    command = shutil.which("zero-bands", path=str(Path(sys.executable).parent)) or shutil.which("zero-bands")
    assert command, "the zero-bands command is not installed"
    return command


@contextmanager
def serving(command: Callable[[int], list[str]], env: dict[str, str] | None = None, port: int = 0) -> Iterator[str]:
    """Run the server command for `port` (0: a free one) until the block ends; yields its address."""
    port = port or _free_port()
    process = subprocess.Popen(command(port), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _wait_for(port, process)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="session")
def server() -> Iterator[str]:
    """The app served by its own command, as a person would start it."""
    with serving(lambda port: [zero_bands_command(), "--port", str(port)]) as url:
        yield url


@pytest.fixture(scope="session")
def base_url(server: str) -> str:
    """Relative URLs in page.goto resolve against the app.

    This also replaces the fallback that pytest-playwright 0.10 defines as an instance method,
    which pytest 9.2 deprecates (and warnings are errors here).
    """
    return server


@dataclass
class Watch:
    """Everything a page did that a test may want to refuse."""

    origin: str
    requests: list[Request] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)

    def on_request(self, request: Request) -> None:
        self.requests.append(request)

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type in {"error", "warning"}:
            self.console_errors.append(message.text)

    def on_response(self, response: Response) -> None:
        if response.status >= 400:
            self.failed.append(f"{response.status} {response.url}")

    def foreign_requests(self) -> list[str]:
        return [r.url for r in self.requests if not r.url.startswith(self.origin + "/")]

    def assert_clean(self, page: Page, allow_status: set[int] | None = None) -> None:
        assert self.foreign_requests() == []
        assert self.page_errors == []
        allowed = allow_status or set()
        assert [f for f in self.failed if int(f.split()[0]) not in allowed] == []
        unexpected = [m for m in self.console_errors if not any(f"status of {s}" in m for s in allowed)]
        if any(m.startswith("htmx:sendAbort") for m in unexpected):
            # A request replaced by a newer one (hx-sync "replace": a typist pressing Enter while the
            # last keystroke's request is in flight) is aborted, and htmx logs the abort and its
            # afterRequest as errors. That is the sync working, not a fault.
            unexpected = [m for m in unexpected if not m.startswith(("htmx:sendAbort", "htmx:afterRequest"))]
        assert unexpected == []
        assert page.evaluate("window.__cspViolations || []") == []


@pytest.fixture
def watch(page: Page, server: str) -> Watch:
    """Record requests, console errors, page errors, failed responses and CSP violations."""
    return watching(page, server)


def watching(page: Page, origin: str) -> Watch:
    """A Watch on `page`, for pages served from `origin`."""
    record = Watch(origin=origin)
    page.add_init_script(RECORD_CSP)
    page.on("request", record.on_request)
    page.on("console", record.on_console)
    page.on("pageerror", lambda error: record.page_errors.append(str(error)))
    page.on("response", record.on_response)
    return record


BUSY = ".htmx-request, .htmx-swapping, .htmx-settling"
"""What htmx marks while a request, a swap or a settle is under way."""


def settled(page: Page | Frame) -> None:
    """Wait until htmx has finished a swap and wired up the new content, as a person would."""
    # A locator assertion polls from Playwright's own script: wait_for_function would evaluate a
    # string in the page, which the strict CSP (no eval) refuses whenever it has to poll.
    expect(page.locator(BUSY)).to_have_count(0)


def screenshot(page: Page, name: str) -> Path:
    """Save a full-page screenshot where CI keeps artefacts, and return its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    # caret="initial": hiding the caret makes Playwright inject an inline style, which the CSP
    # rightly blocks and reports as a console error.
    page.screenshot(path=str(path), full_page=True, caret="initial")
    return path


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Host:
    """Pages served by another origin: `http://127.0.0.1:<port>`, and the same files at `http://localhost:<port>`."""

    directory: Path
    port: int

    @property
    def origin(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def other_origin(self) -> str:
        return f"http://localhost:{self.port}"

    def page(self, name: str, body: str) -> str:
        # An icon of its own, so the browser asks this server for nothing it lacks.
        head = '<!doctype html><meta charset=utf-8><title>Lesson</title><link rel=icon href="data:,">'
        (self.directory / name).write_text(head + body)
        return f"{self.origin}/{name}"


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    """A course page's server, on another port of this machine: another origin than the app's."""
    port = _free_port()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), partial(_Quiet, directory=str(tmp_path)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield Host(tmp_path, port)
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def contexts(browser: Browser) -> Iterator[Callable[..., BrowserContext]]:
    """New browser contexts (each its own cookies: the teacher's, each student's), closed after the test."""
    made: list[BrowserContext] = []

    def new(**options: Any) -> BrowserContext:
        made.append(browser.new_context(**options))
        return made[-1]

    yield new
    for context in made:
        context.close()
