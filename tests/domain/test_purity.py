"""The domain stays pure: importing it loads no web framework, template engine or schema library."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

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
    assert {"app.domain.step", "app.domain.sizing", "app.domain.sharding"} <= set(DOMAIN)


def test_domain_imports_no_web_code() -> None:
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
