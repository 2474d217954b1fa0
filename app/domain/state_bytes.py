"""The model state's bytes per weight and per card at rest, under each arrangement.

Bytes per weight are exact fractions: a sharded band costs bytes/N per weight. Bytes per card are
whole numbers: a sharded band is split into N equal slices of ceil(P/N) weights, the last one padded,
as DeepSpeed and FSDP pad their flat buffers to a multiple of N.
"""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from app.domain.accounting import PAPER, Setup, terms
from app.domain.recipes import MIXED_ADAM, Band, Recipe
from app.domain.stages import Stage
from app.domain.terms import NO_EXPERTS, Experts, Place, card_bytes, term_bytes

DEFAULT_GPUS = 8
DEFAULT_PARAMS = 30 * 10**9


# A page asks for every stage's figure several times over; there are few stages, clusters and recipes.
@lru_cache(maxsize=1024)
def bytes_per_weight(stage: Stage, gpus: int = DEFAULT_GPUS, recipe: Recipe = MIXED_ADAM) -> Fraction:
    """Bytes one card keeps per weight of the model: whole bands plus 1/N of sharded ones."""
    if gpus < 1:
        raise ValueError("gpus must be at least 1")
    return sum(
        (Fraction(spec.nbytes, gpus) if spec.band in stage.sharded else Fraction(spec.nbytes) for spec in recipe.specs),
        start=Fraction(0),
    )


def band_bytes(
    stage: Stage,
    band: Band,
    params: int,
    gpus: int,
    recipe: Recipe = MIXED_ADAM,
    frozen: int = 0,
    setup: Setup = PAPER,
) -> int:
    """Bytes of one band on one card, wherever it lives: the whole band, or one padded slice of it."""
    (term,) = (t for t in terms(recipe, stage, setup) if t.band is band)
    return term_bytes(term, stage, params, gpus, frozen=frozen)


def per_gpu_bytes(
    stage: Stage,
    params: int = DEFAULT_PARAMS,
    gpus: int = DEFAULT_GPUS,
    recipe: Recipe = MIXED_ADAM,
    frozen: int = 0,
    setup: Setup = PAPER,
    place: Place = Place.GPU,
    experts: Experts = NO_EXPERTS,
) -> int:
    """Bytes of model state one card keeps in `place`, at rest: whole bands plus one padded slice of each split one.

    `experts`: its routed experts' slice, where ZeRO shards them over a group of their own.
    """
    if params < 0:
        raise ValueError("params cannot be negative")
    if gpus < 1:
        raise ValueError("gpus must be at least 1")
    return card_bytes(stage, params, gpus, terms(recipe, stage, setup), place=place, frozen=frozen, experts=experts)
