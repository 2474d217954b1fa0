"""A non-editable install carries the templates and static files and serves them; it leans on public APIs only."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement

from app.domain.presets import STORED

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
    # The presets stored as their config.json files (app/domain/presets.py reads them from the package).
    assert {f"app/domain/models/{s.file}" for s in STORED} <= names
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


def _imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _private(module: str) -> bool:
    parts = module.split(".")
    return any(part.startswith("_") for part in parts) or module.startswith(("uvicorn.protocols", "uvicorn.server"))


def test_no_module_imports_a_private_module_of_a_dependency() -> None:
    # A private module may change in any release: it is what pinned uvicorn below 0.55.
    found = {
        f"{path.relative_to(ROOT)}: {name}"
        for path in (ROOT / "app").rglob("*.py")
        for name in _imported_modules(path)
        if name.split(".")[0] not in {"app", "__future__"} and _private(name)
    }
    assert found == set()


def test_the_server_may_move_on_to_its_next_releases() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    uvicorn = next(r for r in map(Requirement, dependencies) if r.name == "uvicorn")
    assert uvicorn.specifier.contains("0.55.0")
    assert uvicorn.specifier.contains("0.60.1")
