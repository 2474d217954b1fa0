"""Temporary: re-exports while measured_view moves (to be deleted)."""

from app.web.bars import legend
from app.web.inputs import Theme
from app.web.stage_view import StageLink

__all__ = ["StageLink", "Theme", "legend"]
