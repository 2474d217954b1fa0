"""The layers as import contracts (pyproject.toml's `tool.importlinter`), checked in the quick loop."""

from __future__ import annotations

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
