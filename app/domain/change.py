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
from app.domain.terms import TermKind
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

    def cell_changes(self, card: int, weight: int, band: Band, gpus: int, shards: int | None = None) -> bool:
        """Whether this card's cell for `band` of `weight` changes state (filled ↔ dashed).

        Only where the card is not the weight's holder: the holder keeps its slice either way.
        """
        group = gpus if shards is None else shards
        return group > 1 and band in self.bands and owner(weight, group) != card % group


def _stored(recipe: Recipe, bands: frozenset[Band]) -> frozenset[Band]:
    return frozenset(b for b in bands if recipe.nbytes(b) > 0)


def change(was: StageReport, now: StageReport, recipe: Recipe, gpus: int) -> Change:
    """What going from one stage's report to another's does to each card, for this recipe on `gpus` cards.

    The cells that change (`split`, `whole`) are those of the grid, which draws the stages' own bands;
    the sentence names what the card's own terms do under the run's count, which may split other
    bands (Megatron-LM's or FSDP2's), so that the sentence and the figures say the same.
    """
    before, after = was.stage, now.stage
    old, new = was.bytes_per_weight, now.bytes_per_weight
    split = _stored(recipe, after.sharded - before.sharded) if gpus > 1 else frozenset()
    whole = _stored(recipe, before.sharded - after.sharded) if gpus > 1 else frozenset()
    said = _sentence(before, after, gpus, *_moved(was, now, recipe), old, new)
    return Change(before, after, split, whole, old, new, said)


def _kept(report: StageReport) -> dict[TermKind, int]:
    """Each kind of a card's terms and its bytes on that card at rest, wherever it lives."""
    kept: dict[TermKind, int] = {}
    for term in report.terms:
        kept[term.kind] = kept.get(term.kind, 0) + term.nbytes
    return kept


def _moved(was: StageReport, now: StageReport, recipe: Recipe) -> tuple[str, str]:
    """The card's terms that the new stage splits (fewer bytes) and those it keeps whole again (more), named.

    A band is named as the recipe names it where the count is the paper's; under another count
    (`differences` says how), by its plain name, as its bytes may be another dtype's.
    """
    before, after = _kept(was), _kept(now)
    plain = bool(was.differences or now.differences)

    def named(kinds: list[TermKind]) -> str:
        bands = frozenset(k.band for k in kinds if k.band is not None)
        if plain:  # each band by its kind's plain noun
            words = [f"the {k.noun}" for k in kinds if k.band is not None]
        else:
            words = [recipe.phrase(bands)] if bands else []
        words += [f"the {k.noun}" for k in kinds if k.band is None]
        return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)

    fewer = [n for n in before if after.get(n, 0) < before[n]]
    more = [n for n in after if after[n] > before.get(n, 0)]
    return named(fewer), named(more)


def _number(value: Fraction) -> str:
    return per_weight(value)


def _sentence(before: Stage, after: Stage, gpus: int, split: str, whole: str, old: Fraction, new: Fraction) -> str:
    title = after.info.title
    if before is after:
        return f"{title} again: nothing changes; each card keeps {_number(new)} bytes per weight."
    if gpus == 1:
        return f"{title}: with one card nothing is split; the card keeps all {_number(new)} bytes per weight."
    if old == new or not (split or whole):
        return (
            f"{title} changes nothing that a card keeps, as this count has it: "
            f"each card keeps {_number(new)} bytes per weight."
        )
    if split and whole:
        return (
            f"{title} splits {split} and keeps {whole} whole again: each card goes from {_number(old)} "
            f"to {_number(new)} bytes per weight."
        )
    if split:
        too = " too" if before.sharded else ""
        return (
            f"{title} splits {split}{too}: each card drops {_number(old - new)} "
            f"of its {_number(old)} bytes per weight (now {_number(new)})."
        )
    return (
        f"{title} keeps {whole} whole again on every card: each card adds {_number(new - old)} "
        f"to its {_number(old)} bytes per weight (now {_number(new)})."
    )
