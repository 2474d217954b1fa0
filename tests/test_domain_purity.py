"""The domain stays pure: importing it loads no web framework, template engine or schema library."""

from __future__ import annotations

import subprocess
import sys

DOMAIN = [
    "app.bands",
    "app.stages",
    "app.communication",
    "app.memory",
    "app.sharding",
    "app.architecture",
    "app.hardware",
    "app.quantities",
    "app.fit",
    "app.scenario",
    "app.step",
]
FORBIDDEN = ["fastapi", "starlette", "jinja2", "pydantic", "uvicorn"]

CHECK = f"""
import sys
for name in {DOMAIN!r}:
    __import__(name)
loaded = sorted(m for m in {FORBIDDEN!r} if m in sys.modules)
print(",".join(loaded))
"""


def test_domain_imports_no_web_code() -> None:
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == ""
