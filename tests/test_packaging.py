"""A non-editable install carries the templates and static files and serves them."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

SERVE_FROM_INSTALL = """
import app, app.paths
from fastapi.testclient import TestClient
from app.main import app as application
assert app.__file__.startswith({site!r}), app.__file__
assert str(app.paths.TEMPLATES_DIR).startswith({site!r})
client = TestClient(application)
page = client.get("/?stage=zero1")
assert page.status_code == 200 and 'id="grid"' in page.text, page.status_code
assert client.get("/static/htmx-2.0.11.min.js").status_code == 200
print("served from", app.paths.TEMPLATES_DIR)
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--quiet", "--wheel-dir", str(out), str(ROOT)],
        check=True,
    )
    (built,) = out.glob("zero_bands-*.whl")
    return built


def test_wheel_carries_templates_static_and_the_command(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"app/templates/index.html", "app/templates/_widget.html"} <= names
    assert {"app/static/htmx-2.0.11.min.js", "app/static/htmx-2.0.11.LICENSE", "app/static/app.css"} <= names
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "zero-bands = app.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_installed_wheel_serves_the_page(wheel: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site), str(wheel)],
        check=True,
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    result = subprocess.run(
        [sys.executable, "-c", SERVE_FROM_INSTALL.format(site=str(site))],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert str(site / "app" / "templates") in result.stdout
