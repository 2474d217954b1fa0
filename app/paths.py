"""Where things are: the templates and static files, and a request's path below the app's prefix."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

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


def route_path(scope: Mapping[str, Any]) -> str:
    """The request's path below the prefix the app is mounted under (`root_path`), '/' at least.

    ASGI servers put the prefix in `path` too; where one does not, the path is already relative.
    """
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    relative = path[len(root) :] if root and path.startswith(root) else path
    return relative or "/"


def is_api_path(path: str) -> bool:
    """Whether a path below the prefix asks for JSON: the API and its schema."""
    return path == "/api" or path.startswith(("/api/", "/openapi"))


EVENT_STREAM = re.compile(r"/live/[^/]+/events$")
"""A live session's event stream: open for the whole lecture, and sent uncompressed as it goes."""


def is_event_stream(path: str) -> bool:
    """Whether a path below the prefix is a live session's event stream."""
    return EVENT_STREAM.match(path) is not None


def is_live_path(path: str) -> bool:
    """Whether a path below the prefix is a live session's (`/live` and below), which may wait on Redis."""
    return path == "/live" or path.startswith("/live/")
