"""The layers as import contracts (pyproject.toml's `tool.importlinter`), checked in the quick loop."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports(*options: str) -> subprocess.CompletedProcess[str]:
    command = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) or shutil.which("lint-imports")
    assert command, "import-linter is not installed (the test extra)"
    return subprocess.run(
        [command, "--no-cache", *options], cwd=ROOT, capture_output=True, text=True, check=False, timeout=120
    )


def test_every_contract_is_kept() -> None:
    result = _lint_imports()
    assert result.returncode == 0, result.stdout + result.stderr
    assert "5 kept, 0 broken" in result.stdout


BROKEN = """
[tool.importlinter]
root_package = "app"

[[tool.importlinter.contracts]]
name = "A contract the code breaks: the stage's view reads the report"
type = "forbidden"
source_modules = ["app.web.stage_view"]
forbidden_modules = ["app.domain.report"]
allow_indirect_imports = true
"""


def test_a_broken_contract_fails(tmp_path: Path) -> None:
    config = tmp_path / "broken.toml"
    config.write_text(BROKEN)
    result = _lint_imports("--config", str(config))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 broken" in result.stdout


def _public_types(path: Path) -> set[str]:
    """A module's public classes and type aliases (a top-level capitalised name bound to a type)."""
    names: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign) and isinstance(node.value, (ast.Subscript, ast.Name, ast.BinOp)):
            names.update(
                t.id for t in node.targets if isinstance(t, ast.Name) and t.id[:1].isupper() and not t.id.isupper()
            )
    return {name for name in names if not name.startswith("_")}


def test_one_name_per_type_across_the_app() -> None:
    """Two `ConfigError`s and two `Change`s once meant different things: a type's name says one thing."""
    where: dict[str, list[str]] = {}
    for path in sorted((ROOT / "app").rglob("*.py")):
        for name in _public_types(path):
            where.setdefault(name, []).append(str(path.relative_to(ROOT)))
    doubled = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert not doubled
    assert {"ConfigError", "SettingsError", "Change", "SessionEdit"} <= where.keys()
