"""ZeRO Bands: see which GPU holds which band of which weight under DP and ZeRO stages 1-3."""

from __future__ import annotations

__version__ = "0.1.0"
