"""Bytes per weight and per card under each arrangement.

Exact fractions throughout: a sharded band costs bytes/N per weight, and rounding would break
the identity that N cards together hold the whole state under ZeRO-3.
"""

from __future__ import annotations

from fractions import Fraction

from app.domain.bands import MIXED_ADAM, Recipe
from app.domain.stages import Stage

DEFAULT_GPUS = 8
DEFAULT_PARAMS = 30 * 10**9


def bytes_per_weight(stage: Stage, gpus: int = DEFAULT_GPUS, recipe: Recipe = MIXED_ADAM) -> Fraction:
    """Bytes one card keeps per weight of the model: whole bands plus 1/N of sharded ones."""
    if gpus < 1:
        raise ValueError("gpus must be at least 1")
    return sum(
        (Fraction(spec.nbytes, gpus) if spec.band in stage.sharded else Fraction(spec.nbytes) for spec in recipe.specs),
        start=Fraction(0),
    )


def per_gpu_bytes(
    stage: Stage, params: int = DEFAULT_PARAMS, gpus: int = DEFAULT_GPUS, recipe: Recipe = MIXED_ADAM
) -> Fraction:
    """Bytes of model state on one card for a model of `params` weights."""
    if params < 0:
        raise ValueError("params cannot be negative")
    return params * bytes_per_weight(stage, gpus, recipe)
