"""Where the templates and static files are, installed or in a source checkout."""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def resource_dir(name: str) -> Path:
    """A top-level resource folder such as 'templates' or 'static'.

    The wheel copies them into the package (see pyproject.toml); a source checkout or an
    editable install keeps them beside it, at the top of the repository.
    """
    for candidate in (_PACKAGE / name, _PACKAGE.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"no {name}/ folder beside or inside {_PACKAGE}")


TEMPLATES_DIR = resource_dir("templates")
STATIC_DIR = resource_dir("static")
