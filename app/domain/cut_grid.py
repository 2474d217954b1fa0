"""The grid of a cut model: which part of which eighth of the model each card keeps, band by band.

Geometry only, as `sharding` is for ZeRO alone. With the model cut (`parallel.Cut`) the grid's columns are
the model's eighths by weight (`eighths.COLUMNS`), as in the step, and a card's place in Megatron's rank order
(tp fastest, then cp, dp, pp) says what it keeps of each:

- its pipeline stage's columns only: stage `s` keeps the model's weights from the blocks before it to the
  blocks through it, over all the blocks (`parallel.stage_blocks`: `s/pp` to `(s+1)/pp` where they divide
  evenly; Llama 3 405B's 7, 8 × 14, 7 of 126 otherwise). The blocks are nearly all the weights: the embedding
  and the output head, on the first and last stages, are drawn inside those stages' shares. With `pp` dividing 8 a
  stage keeps whole columns; otherwise a column where one stage ends and the next begins is shared, each
  stage's cards keeping their part of it. Another stage's columns are absent, not held elsewhere on this
  card's behalf;
- of each column it keeps, a `1/tp` slice of every weight matrix: tensor rank `r` draws its slice as the
  `r`-th `1/tp` of the stage's part of the column;
- of a band ZeRO shards, only its part of the stage's weights (of its tensor slice): the ZeRO group is the
  stage's `dp × cp` cards with the same tensor rank (Megatron's distributed optimizer shards over dp and cp),
  and member `j` of `z` keeps the `j`-th `1/z` of the stage's weights, drawn inside its tensor slice.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import floor

from app.domain.eighths import COLUMNS
from app.domain.parallel import Cut, stage_blocks
from app.domain.sharding import CellState, Share

MAX_CUT_CARDS = 16
"""Up to this many cards a cut grid draws them all; beyond, one tensor-parallel group a stage where it can."""

ROW = 8
"""The cut grid's columns: eight cards a row."""


@dataclass(frozen=True)
class Rank:
    """A card's place in the cut, in Megatron's order: `card = tp + TP × (cp + CP × (dp + DP × stage))`."""

    tp: int
    cp: int
    dp: int
    stage: int


def rank(card: int, cut: Cut, gpus: int) -> Rank:
    """Where a card sits in the cut: its tensor rank, context rank, data-parallel rank and pipeline stage."""
    dp = cut.dp(gpus)
    return Rank(
        tp=card % cut.tp,
        cp=card // cut.tp % cut.cp,
        dp=card // (cut.tp * cut.cp) % dp,
        stage=card // (cut.tp * cut.cp * dp),
    )


def card_at(place: Rank, cut: Cut, gpus: int) -> int:
    """The card at a place in the cut (the inverse of `rank`)."""
    return place.tp + cut.tp * (place.cp + cut.cp * (place.dp + cut.dp(gpus) * place.stage))


def zero_group(cut: Cut, gpus: int) -> int:
    """The cards a band ZeRO shards is split across: a stage's data-parallel and context-parallel ranks."""
    return cut.dp(gpus) * cut.cp


def _in_column(column: int, start: Fraction, end: Fraction) -> Share | None:
    """The part of the model's `[start, end)` that falls in `column`, as fractions of the column."""
    low, high = max(start, Fraction(column, COLUMNS)), min(end, Fraction(column + 1, COLUMNS))
    if high <= low:
        return None
    return Share((low - Fraction(column, COLUMNS)) * COLUMNS, (high - Fraction(column, COLUMNS)) * COLUMNS)


def stage_span(stage: int, pp: int, blocks: int | None = None) -> tuple[Fraction, Fraction]:
    """The part of the model (by weight, from 0 to 1) that pipeline stage `stage` keeps: its blocks' share.

    `blocks`: the model's, where its shape is known (stages may keep one block more or fewer); without, even.
    """
    if blocks is None:
        return Fraction(stage, pp), Fraction(stage + 1, pp)
    split = stage_blocks(blocks, pp)
    before = sum(split[:stage])
    return Fraction(before, blocks), Fraction(before + split[stage], blocks)


def stage_columns(stage: int, pp: int, blocks: int | None = None) -> tuple[int, ...]:
    """The columns a stage keeps all or part of."""
    start, end = stage_span(stage, pp, blocks)
    return tuple(c for c in range(COLUMNS) if _in_column(c, start, end) is not None)


def column_stages(column: int, pp: int, blocks: int | None = None) -> tuple[int, ...]:
    """The stages that keep part of a column: one, or two where a stage ends inside it."""
    return tuple(s for s in range(pp) if _in_column(column, *stage_span(s, pp, blocks)) is not None)


@dataclass(frozen=True)
class CutCell:
    """One band of one column as one card of a cut model sees it."""

    state: CellState
    """Solid (the whole column's band), partial (its slice), dashed (ZeRO: its stage keeps it on another
    card) or absent (another stage's layers)."""
    part: Share | None
    """The part of the column drawn filled: its slice; None when solid, dashed or absent."""
    holder: int
    """Where it lives when it is not here: the card of its stage (absent) or of its ZeRO group (dashed) that
    keeps it, with this card's tensor rank; this card itself when it keeps it."""


def cut_cell(card: int, column: int, sharded: bool, cut: Cut, gpus: int, blocks: int | None = None) -> CutCell:
    """What `card` keeps of one band of `column`; `sharded`: whether ZeRO's stage shards that band.

    `blocks`: the model's, which share the columns between the stages (`stage_span`).
    """
    here = rank(card, cut, gpus)
    start, end = stage_span(here.stage, cut.pp, blocks)
    kept = _in_column(column, start, end)
    if kept is None:  # another stage's layers: the card in this card's place of the first stage keeping them
        other = column_stages(column, cut.pp, blocks)[0]
        return CutCell(CellState.ABSENT, None, card_at(Rank(here.tp, here.cp, here.dp, other), cut, gpus))
    part = kept
    if sharded:
        z, member = zero_group(cut, gpus), here.cp + cut.cp * here.dp
        width = (end - start) / z
        mine = _in_column(column, start + member * width, start + (member + 1) * width)
        if mine is None:  # ZeRO: the group's member whose share starts this column's part keeps it
            first = floor((Fraction(column, COLUMNS) + kept.start / COLUMNS - start) / width)
            keeper = Rank(here.tp, first % cut.cp, first // cut.cp, here.stage)
            return CutCell(CellState.DASHED, None, card_at(keeper, cut, gpus))
        part = mine
    # The tensor slice: the r-th 1/tp of the stage's part of the column, and inside it the card's share.
    slot = (kept.end - kept.start) / cut.tp
    origin = kept.start + here.tp * slot
    drawn = Share(origin + (part.start - kept.start) / cut.tp, origin + (part.end - kept.start) / cut.tp)
    if drawn.start == 0 and drawn.end == 1:
        return CutCell(CellState.SOLID, None, card)
    return CutCell(CellState.PARTIAL, drawn, card)


def cut_shown(cut: Cut, gpus: int) -> tuple[int, ...]:
    """The cards a cut grid draws: every one up to 16; beyond, whole tensor-parallel groups.

    One tensor-parallel group a stage (the first data-parallel rank's), every stage where they fit in 16
    cards, else the first and the last stage; then, while there is room, each stage's last ZeRO group member's
    group too, so the dashed cells show whose share is whose. With expert parallelism (and tp = 1) a stage's first
    four cards and last four, which keep different experts, where two stages at most are drawn.
    """
    if gpus <= MAX_CUT_CARDS:
        return tuple(range(gpus))
    stages = list(range(cut.pp)) if cut.tp * cut.pp <= MAX_CUT_CARDS else [0, cut.pp - 1]
    z = zero_group(cut, gpus)
    members = [0, z - 1] if z > 1 and 2 * cut.tp * len(stages) <= MAX_CUT_CARDS else [0]
    if cut.ep > 1 and cut.tp == 1 and 8 * len(stages) <= MAX_CUT_CARDS:
        # Expert parallelism: neighbouring cards keep different experts, so a stage's first four and last four.
        members = sorted({*range(min(4, z)), *range(max(0, z - 4), z)})
    found = {
        card_at(Rank(tp, member % cut.cp, member // cut.cp, stage), cut, gpus)
        for stage in stages
        for member in members
        for tp in range(min(cut.tp, MAX_CUT_CARDS))
    }
    return tuple(sorted(found))


def cut_drawn(cut: Cut, gpus: int) -> tuple[int, ...]:
    """The cards a cut grid draws on its first screen: `cut_shown`'s, at most `stage_room` a stage.

    Past two stages drawn, the stages sit side by side (`stage_room`), and each keeps its first cards (its first
    tensor groups, in Megatron's order): the rest are said in words.
    """
    shown = cut_shown(cut, gpus)
    room = stage_room(cut, gpus)
    if room == ROW:
        return shown
    kept: dict[int, list[int]] = {}
    for card in shown:
        kept.setdefault(rank(card, cut, gpus).stage, []).append(card)
    return tuple(card for cards in kept.values() for card in cards[:room])


def stage_room(cut: Cut, gpus: int) -> int:
    """The grid's columns (of `ROW`) each drawn stage takes: a whole row with one or two stages drawn.

    With more, one stage a row would not fit a screen of 800 px: the stages sit side by side in two rows,
    `ceil(stages / 2)` a row, each `ROW // that` columns wide (pp = 3 or 4: 4; pp = 8: 2; pp = 16: 1).
    """
    stages = len({rank(card, cut, gpus).stage for card in cut_shown(cut, gpus)})
    return ROW if stages <= 2 else max(1, ROW // -(-stages // 2))
