"""ZeRO Bands: see which GPU holds which band of which weight under DP and ZeRO stages 1-3."""

from __future__ import annotations

__version__ = "0.1.0"

APP_NAME = "ZeRO Bands"
"""How the app names itself in titles and snippets."""
