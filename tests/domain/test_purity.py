"""The domain stays pure: importing it loads no web framework, template engine or schema library."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import app.domain

# Every module in the package, found rather than listed, so a new one cannot slip past.
DOMAIN = sorted(f"app.domain.{module.name}" for module in pkgutil.iter_modules(app.domain.__path__))
FORBIDDEN = ["fastapi", "starlette", "jinja2", "pydantic", "uvicorn", "httpx"]

CHECK = f"""
import sys
for name in {DOMAIN!r}:
    __import__(name)
loaded = sorted(m for m in {FORBIDDEN!r} if m in sys.modules)
print(",".join(loaded))
"""


def test_the_domain_is_all_there() -> None:
    # Found again another way, from the files in the folder: pkgutil's list misses none of them.
    files = sorted(f"app.domain.{path.stem}" for path in Path(app.domain.__file__).parent.glob("*.py"))
    assert [name for name in files if not name.endswith(".__init__")] == DOMAIN
    assert len(DOMAIN) > 20


def test_domain_imports_no_web_code() -> None:
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
