"""The experts on the grid: a mixture of experts' routed experts as a column group of their own on each card.

Geometry only, as `cut_grid` is for the dense weights. A mixture-of-experts block's routed experts are most of
its weights (Mixtral 8x7B: 45.1B of 46.7B) and are cut otherwise than the rest: expert parallelism (`Cut.ep`)
gives each card `experts / ep` whole experts, expert tensor parallelism (`Cut.expert_tp`) splits each expert's
matrices, and ZeRO shards their state over the expert-data-parallel group (`Cut.edp`), not over dp × cp. So the
grid draws them apart: after the dense columns (the model's eighths, less their routed experts), one column an
expert where a block has at most 8, else 8 columns each of `experts / 8` of them (DeepSeek-V3's 256: 32 a
column). A column stands for that expert (or group) in every mixture-of-experts block of the card's pipeline
stage.

A card's place in the experts' groups is Megatron-LM's order for them, etp, ep, edp, pp from the fastest-varying
rank (megatron/core/parallel_state.py, `expert_tensor_parallel_size`, `expert_model_parallel_size`, the expert
data-parallel rest): `card = etp_rank + etp × (ep_rank + ep × (edp_rank + edp × stage))`. Expert-parallel rank
`r` keeps experts `r × experts / ep` to `(r + 1) × experts / ep − 1` (Megatron's `local_expert_indices`).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import floor

from app.domain.architecture import Architecture
from app.domain.cut_grid import CutCell
from app.domain.eighths import COLUMNS, pieces
from app.domain.parallel import Cut
from app.domain.sharding import CellState, Share


@dataclass(frozen=True)
class ExpertRank:
    """A card's place in the experts' groups, in Megatron-LM's order: etp, ep, edp, pp from the fastest."""

    etp: int
    ep: int
    edp: int
    stage: int


def expert_rank(card: int, cut: Cut, gpus: int) -> ExpertRank:
    """Where a card sits among the experts' groups: its expert tensor, expert-parallel and expert-data ranks."""
    etp, ep, edp = cut.expert_tp, cut.ep, cut.edp(gpus)
    return ExpertRank(card % etp, card // etp % ep, card // (etp * ep) % edp, card // (etp * ep * edp))


def expert_card(place: ExpertRank, cut: Cut, gpus: int) -> int:
    """The card at a place among the experts' groups (the inverse of `expert_rank`)."""
    return place.etp + cut.expert_tp * (place.ep + cut.ep * (place.edp + cut.edp(gpus) * place.stage))


def card_experts(card: int, cut: Cut, gpus: int, experts: int) -> range:
    """The routed experts a card keeps in each of its mixture-of-experts blocks: its expert-parallel rank's."""
    each = experts // cut.ep
    first = expert_rank(card, cut, gpus).ep * each
    return range(first, first + each)


def expert_columns(experts: int) -> int:
    """The experts' columns: one an expert up to 8, else 8 (each `experts / 8` of them)."""
    return min(experts, COLUMNS)


def column_experts(column: int, experts: int) -> range:
    """The experts one of the experts' columns stands for (where 8 do not divide them, those it touches)."""
    n = expert_columns(experts)
    return range(column * experts // n, -(-(column + 1) * experts // n))


def _in_column(column: int, n: int, start: Fraction, end: Fraction) -> Share | None:
    """The part of the experts' `[start, end)` (0 to 1 over all of them) in `column` of `n`, as its fractions."""
    low, high = max(start, Fraction(column, n)), min(end, Fraction(column + 1, n))
    if high <= low:
        return None
    return Share((low - Fraction(column, n)) * n, (high - Fraction(column, n)) * n)


def expert_cell(card: int, column: int, sharded: bool, cut: Cut, gpus: int, experts: int) -> CutCell:
    """What `card` keeps of one band of one experts' column; `sharded`: whether ZeRO's stage shards that band.

    Absent: another expert-parallel rank's experts (the card of that rank in this card's place keeps them).
    Dashed: ZeRO keeps this card's experts' share on another card of its expert-data-parallel group. Partial:
    its part of the column (some of the column's experts, its expert tensor slice, or its ZeRO share of them).
    """
    here = expert_rank(card, cut, gpus)
    n = expert_columns(experts)
    start, end = Fraction(here.ep, cut.ep), Fraction(here.ep + 1, cut.ep)
    kept = _in_column(column, n, start, end)
    if kept is None:  # another expert-parallel rank's experts: the first keeping part of this column
        other = floor(Fraction(column, n) * cut.ep)
        return CutCell(
            CellState.ABSENT, None, expert_card(ExpertRank(here.etp, other, here.edp, here.stage), cut, gpus)
        )
    part = kept
    z = cut.edp(gpus)
    if sharded and z > 1:
        width = (end - start) / z
        mine = _in_column(column, n, start + here.edp * width, start + (here.edp + 1) * width)
        if mine is None:  # ZeRO: the group's member whose share starts this column's part keeps it
            first = floor((Fraction(column, n) + kept.start / n - start) / width)
            keeper = ExpertRank(here.etp, here.ep, first, here.stage)
            return CutCell(CellState.DASHED, None, expert_card(keeper, cut, gpus))
        part = mine
    # The expert tensor slice: the r-th 1/etp of the card's part of the column, and inside it its ZeRO share.
    slot = (kept.end - kept.start) / cut.expert_tp
    origin = kept.start + here.etp * slot
    drawn = Share(origin + (part.start - kept.start) / cut.expert_tp, origin + (part.end - kept.start) / cut.expert_tp)
    if drawn.start == 0 and drawn.end == 1:
        return CutCell(CellState.SOLID, None, card)
    return CutCell(CellState.PARTIAL, drawn, card)


def column_blocks(architecture: Architecture, params: int) -> tuple[tuple[int, ...], ...]:
    """The blocks with experts in each of the model's eighths by weight (`eighths.model_columns`'s columns).

    What the step's forward and backward pass use of the experts while a column is in hand.
    """
    found: list[list[int]] = [[] for _ in range(COLUMNS)]
    position = 0
    for piece in pieces(architecture):
        if piece.block is not None and architecture.has_experts(piece.block):
            first = position * COLUMNS // params
            last = min(COLUMNS - 1, (position + piece.params - 1) * COLUMNS // params)
            for column in range(first, last + 1):
                found[column].append(piece.block)
        position += piece.params
    return tuple(tuple(blocks) for blocks in found)


@dataclass(frozen=True)
class ExpertCounts:
    """A mixture of experts' weights, dense and routed, and what one token uses: the grid's figures."""

    params: int
    """Every weight of the model: what memory keeps."""
    active: int
    """The weights one token uses (`Architecture.active_params`): what compute uses."""
    routed: int
    """The routed experts' weights, in every mixture-of-experts block: the experts' columns."""
    experts: int
    top_k: int
    blocks: int
    """The blocks with experts."""

    @property
    def dense(self) -> int:
        """Every weight but the routed experts: the dense columns.

        Attention, routers, shared experts, norms, embeddings, and the dense blocks' MLPs.
        """
        return self.params - self.routed


def expert_counts(architecture: Architecture) -> ExpertCounts | None:
    """A model's dense and routed weights and its active ones; None for a dense model."""
    moe = architecture.moe
    if moe is None:
        return None
    routed = architecture.expert_blocks * architecture.routed_params
    return ExpertCounts(
        architecture.params,
        architecture.active_params,
        routed,
        moe.experts,
        moe.top_k,
        architecture.expert_blocks,
    )
