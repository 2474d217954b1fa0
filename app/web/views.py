"""Temporary: re-exports while measured_view moves (to be deleted)."""

from app import APP_NAME

__all__ = ["APP_NAME"]
