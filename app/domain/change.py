"""What changes on a card when the arrangement changes: the bands split or made whole again, and the bytes.

Pure: from two stages' reports, a recipe and a number of cards to a sentence a student can read aloud,
e.g. "ZeRO-2 splits the bf16 gradients too: each card drops 1.75 of its 5.50 bytes per weight (now 3.75)."
The figures are the reports' bytes per weight, from the card's real terms, so the sentence says
what the headline says, whatever the accounting.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

from app.domain.figures import StageReport
from app.domain.recipes import Band, Recipe
from app.domain.sharding import owner
from app.domain.stages import Stage
from app.domain.units import per_weight


@dataclass(frozen=True)
class Change:
    """Going from one stage to another on the same run."""

    before: Stage
    after: Stage
    split: frozenset[Band]
    """Bands the new stage splits that the old one kept whole."""
    whole: frozenset[Band]
    """Bands the new stage keeps whole that the old one split."""
    before_bytes: Fraction
    after_bytes: Fraction
    sentence: str

    @property
    def bands(self) -> frozenset[Band]:
        """Every band whose arrangement changes."""
        return self.split | self.whole

    def cell_changes(self, card: int, weight: int, band: Band, gpus: int) -> bool:
        """Whether this card's cell for `band` of `weight` changes state (filled ↔ dashed).

        Only where the card is not the weight's holder: the holder keeps its slice either way.
        """
        return gpus > 1 and band in self.bands and owner(weight, gpus) != card


def _stored(recipe: Recipe, bands: frozenset[Band]) -> frozenset[Band]:
    return frozenset(b for b in bands if recipe.nbytes(b) > 0)


def change(was: StageReport, now: StageReport, recipe: Recipe, gpus: int) -> Change:
    """What going from one stage's report to another's does to each card, for this recipe on `gpus` cards."""
    before, after = was.stage, now.stage
    old, new = was.bytes_per_weight, now.bytes_per_weight
    split = _stored(recipe, after.sharded - before.sharded) if gpus > 1 else frozenset()
    whole = _stored(recipe, before.sharded - after.sharded) if gpus > 1 else frozenset()
    return Change(before, after, split, whole, old, new, _sentence(before, after, recipe, gpus, split, whole, old, new))


def _number(value: Fraction) -> str:
    return per_weight(value)


def _sentence(
    before: Stage,
    after: Stage,
    recipe: Recipe,
    gpus: int,
    split: frozenset[Band],
    whole: frozenset[Band],
    old: Fraction,
    new: Fraction,
) -> str:
    title = after.info.title
    if before is after:
        return f"{title} again: nothing changes; each card keeps {_number(new)} bytes per weight."
    if gpus == 1:
        return f"{title}: with one card nothing is split; the card keeps all {_number(new)} bytes per weight."
    if not split and not whole:
        return (
            f"{title} splits only bands this recipe does not store, so nothing changes: "
            f"each card keeps {_number(new)} bytes per weight."
        )
    if split:
        too = " too" if before.sharded else ""
        return (
            f"{title} splits {recipe.phrase(split)}{too}: each card drops {_number(old - new)} "
            f"of its {_number(old)} bytes per weight (now {_number(new)})."
        )
    return (
        f"{title} keeps {recipe.phrase(whole)} whole again on every card: each card adds {_number(new - old)} "
        f"to its {_number(old)} bytes per weight (now {_number(new)})."
    )
