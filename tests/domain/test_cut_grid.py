"""app/domain/cut_grid.py: which part of which eighth of the model each card of a cut model keeps, by hand."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from app.domain.cut_grid import (
    Rank,
    card_at,
    column_stages,
    cut_cell,
    cut_drawn,
    cut_shown,
    rank,
    stage_columns,
    stage_room,
    zero_group,
)
from app.domain.parallel import Cut
from app.domain.sharding import CellState, Share

SOLID, PARTIAL, DASHED, ABSENT = CellState.SOLID, CellState.PARTIAL, CellState.DASHED, CellState.ABSENT


@pytest.mark.parametrize(
    ("card", "cut", "gpus", "place"),
    [
        # Megatron's order, tp fastest, then cp, dp, pp: rank = tp + TP × (cp + CP × (dp + DP × pp)).
        (0, Cut(tp=2, pp=2), 16, Rank(0, 0, 0, 0)),
        (5, Cut(tp=2, pp=2), 16, Rank(1, 0, 2, 0)),  # 5 = 1 + 2 × (0 + 1 × (2 + 4 × 0))
        (9, Cut(tp=2, pp=2), 16, Rank(1, 0, 0, 1)),  # 9 = 1 + 2 × (0 + 4 × 1)
        (15, Cut(tp=8, pp=2), 16, Rank(7, 0, 0, 1)),
        (13, Cut(tp=2, cp=2, pp=2), 16, Rank(1, 0, 1, 1)),  # 13 = 1 + 2 × (0 + 2 × (1 + 2 × 1))
        (6, Cut(tp=2, cp=2, pp=2), 16, Rank(0, 1, 1, 0)),  # 6 = 0 + 2 × (1 + 2 × (1 + 0))
    ],
)
def test_a_card_s_place_in_megatron_s_order(card: int, cut: Cut, gpus: int, place: Rank) -> None:
    assert rank(card, cut, gpus) == place
    assert card_at(place, cut, gpus) == card


@pytest.mark.parametrize(
    ("pp", "columns"),
    [
        (1, [(0, 1, 2, 3, 4, 5, 6, 7)]),
        (2, [(0, 1, 2, 3), (4, 5, 6, 7)]),
        (4, [(0, 1), (2, 3), (4, 5), (6, 7)]),
        (8, [(c,) for c in range(8)]),
        # pp = 3: stage 1 keeps [0, 1/3) of the model, 8/3 = 2 2/3 columns: column 2 is shared with stage 2.
        (3, [(0, 1, 2), (2, 3, 4, 5), (5, 6, 7)]),
        # pp = 16: each stage keeps half a column.
        (16, [(s // 2,) for s in range(16)]),
    ],
)
def test_a_stage_keeps_its_share_of_the_columns(pp: int, columns: list[tuple[int, ...]]) -> None:
    assert [stage_columns(s, pp) for s in range(pp)] == columns


def test_uneven_stages_keep_their_blocks_share_of_the_columns() -> None:
    # Llama 3 405B, 126 blocks in 16 stages of 7, 8 × 14, 7: stages end at 7, 15, 23, ..., 119, 126 blocks,
    # columns at every 126/8 = 15.75 blocks.
    spans = [(0,), (0,), (0, 1), (1,), (1, 2), (2,), (2, 3), (3,), (4,), (4, 5), (5,), (5, 6), (6,), (6, 7), (7,), (7,)]
    assert [stage_columns(s, 16, 126) for s in range(16)] == spans
    assert column_stages(0, 16, 126) == (0, 1, 2)
    # The first stage keeps 7 of column 0's 15.75 blocks, [0, 4/9); tensor rank 0 of 8 its first 1/8: 1/18.
    cell = cut_cell(0, 0, False, Cut(tp=8, pp=16), 128, 126)
    assert (cell.state, cell.part) == (PARTIAL, Share(F(0), F(1, 18)))
    # Blocks that divide evenly share the columns as without them.
    assert [stage_columns(s, 4, 32) for s in range(4)] == [stage_columns(s, 4) for s in range(4)]


def test_a_column_where_one_stage_ends_is_kept_by_two() -> None:
    assert column_stages(2, 3) == (0, 1)
    assert column_stages(3, 3) == (1,)
    assert column_stages(4, 2) == (1,)


# TP 2 × ZeRO-3 on 16 cards in 2 stages: dp = 16 / (2 × 2) = 4, and ZeRO's group a stage's 4 cards of one tensor
# rank. Stage 1 keeps columns 0 to 3, one a ZeRO member; each card keeps its tensor half of its member's column.
@pytest.mark.parametrize(
    ("card", "column", "sharded", "state", "part", "holder"),
    [
        (0, 0, True, PARTIAL, Share(F(0), F(1, 2)), 0),  # tensor rank 0: the first half of its column
        (1, 0, True, PARTIAL, Share(F(1, 2), F(1)), 1),  # tensor rank 1: the second half
        (2, 0, True, DASHED, None, 0),  # dp rank 1's column is 1: column 0 is card 0's (same tensor rank)
        (3, 0, True, DASHED, None, 1),
        (3, 1, True, PARTIAL, Share(F(1, 2), F(1)), 3),
        (7, 3, True, PARTIAL, Share(F(1, 2), F(1)), 7),
        (0, 4, True, ABSENT, None, 8),  # stage 2's layers: card 8, the same place in stage 2
        (6, 5, True, ABSENT, None, 14),
        (9, 0, True, ABSENT, None, 1),
        (9, 4, True, PARTIAL, Share(F(1, 2), F(1)), 9),
        (0, 2, False, PARTIAL, Share(F(0), F(1, 2)), 0),  # a band ZeRO keeps whole: the tensor half of each
        (8, 2, False, ABSENT, None, 0),
    ],
)
def test_tp2_zero3_on_two_stages(
    card: int, column: int, sharded: bool, state: CellState, part: Share | None, holder: int
) -> None:
    cell = cut_cell(card, column, sharded, Cut(tp=2, pp=2), 16)
    assert (cell.state, cell.part, cell.holder) == (state, part, holder)


@pytest.mark.parametrize(
    ("card", "column", "sharded", "cut", "gpus", "state", "part"),
    [
        # Pipeline alone (tp = 1), data parallelism's bands kept whole: a stage's columns solid.
        (0, 0, False, Cut(pp=2), 8, SOLID, None),
        (0, 4, False, Cut(pp=2), 8, ABSENT, None),
        # TP 8 on 8 cards: an eighth of every column, tensor rank 5's the sixth: [5/8, 6/8).
        (5, 3, False, Cut(tp=8), 8, PARTIAL, Share(F(5, 8), F(6, 8))),
        # ZeRO over 8 cards with 2 stages of 4: dp = 4; dp rank 1 (card 1) keeps [1/4, 2/4) of stage 1's
        # [0, 1/2), the model's [1/8, 2/8): column 1, whole.
        (1, 1, True, Cut(pp=2), 8, SOLID, None),
        (1, 0, True, Cut(pp=2), 8, DASHED, None),
        # 16 cards, TP 2 on one stage: dp = 8, one column a ZeRO member; card 3 (dp 1, tensor 1): column 1's
        # second half.
        (3, 1, True, Cut(tp=2), 16, PARTIAL, Share(F(1, 2), F(1))),
        # 32 cards, TP 2, 2 stages: dp = 8 over a stage's 4 columns, half a column a member. Card 2 (dp 1,
        # tensor 0) keeps [1/2, 1) of column 0's... inside its tensor half [0, 1/2): [1/4, 1/2).
        (2, 0, True, Cut(tp=2, pp=2), 32, PARTIAL, Share(F(1, 4), F(1, 2))),
        # pp = 3 on 3 cards, bands whole: card 0 keeps [0, 2/3) of column 2, card 1 [2/3, 1).
        (0, 2, False, Cut(pp=3), 3, PARTIAL, Share(F(0), F(2, 3))),
        (1, 2, False, Cut(pp=3), 3, PARTIAL, Share(F(2, 3), F(1))),
        # and with TP 2 on 6 cards: card 3 (stage 2, tensor 1) keeps the second half of [2/3, 1): [5/6, 1).
        (3, 2, False, Cut(tp=2, pp=3), 6, PARTIAL, Share(F(5, 6), F(1))),
        # Context parallelism: ZeRO's group is dp × cp = 4 × 2 = 8, one column each; card 1 (cp 1, dp 0) is
        # member 1, card 2 (cp 0, dp 1) member 2.
        (1, 1, True, Cut(cp=2), 8, SOLID, None),
        (2, 2, True, Cut(cp=2), 8, SOLID, None),
        (2, 1, True, Cut(cp=2), 8, DASHED, None),
    ],
)
def test_cells_by_hand(
    card: int, column: int, sharded: bool, cut: Cut, gpus: int, state: CellState, part: Share | None
) -> None:
    cell = cut_cell(card, column, sharded, cut, gpus)
    assert (cell.state, cell.part) == (state, part)


def test_zero_group_spans_data_and_context_parallel_ranks() -> None:
    assert zero_group(Cut(tp=2, pp=2), 16) == 4
    assert zero_group(Cut(tp=2, cp=2), 16) == 8


@pytest.mark.parametrize(
    ("cut", "gpus", "shown"),
    [
        (Cut(tp=2, pp=2), 16, tuple(range(16))),
        # 64 cards, TP 4 × 4 stages: a stage's first tensor group each, 16 cards.
        (Cut(tp=4, pp=4), 64, (0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51)),
        # 64 cards, TP 2 × 2 stages: room for each stage's first and last ZeRO member's group.
        (Cut(tp=2, pp=2), 64, (0, 1, 30, 31, 32, 33, 62, 63)),
        # TP 8 × 4 stages on 256: 32 would not fit, the first and last stages' groups.
        (Cut(tp=8, pp=4), 256, (*range(8), *range(192, 200))),
    ],
)
def test_the_cards_drawn(cut: Cut, gpus: int, shown: tuple[int, ...]) -> None:
    assert cut_shown(cut, gpus) == shown


@pytest.mark.parametrize(
    ("cut", "gpus", "room", "drawn"),
    [
        # One or two stages drawn: a row each, every card `cut_shown` draws.
        (Cut(tp=2, pp=2), 16, 8, tuple(range(16))),
        (Cut(tp=8, pp=4), 256, 8, (*range(8), *range(192, 200))),
        # Three or four: two a row, 8 // 2 = 4 columns each; 5 cards a stage keep their first 4 (0-3, 5-8, 10-13).
        (Cut(pp=3), 12, 4, tuple(range(12))),
        (Cut(pp=3), 15, 4, (0, 1, 2, 3, 5, 6, 7, 8, 10, 11, 12, 13)),
        (Cut(tp=4, pp=4), 64, 4, (0, 1, 2, 3, 16, 17, 18, 19, 32, 33, 34, 35, 48, 49, 50, 51)),
        # Eight stages: four a row, 8 // 4 = 2 columns; sixteen: eight a row, one column each.
        (Cut(pp=8), 16, 2, tuple(range(16))),
        (Cut(pp=16), 16, 1, tuple(range(16))),
    ],
)  # fmt: skip
def test_stages_side_by_side_past_two(cut: Cut, gpus: int, room: int, drawn: tuple[int, ...]) -> None:
    assert stage_room(cut, gpus) == room
    assert cut_drawn(cut, gpus) == drawn


@pytest.mark.parametrize(
    ("cut", "gpus", "shown"),
    [
        # Expert parallelism without tp: neighbouring cards keep different experts, so a stage's first and last four.
        (Cut(ep=64), 64, (0, 1, 2, 3, 60, 61, 62, 63)),
        (Cut(pp=2, ep=8), 64, (0, 1, 2, 3, 28, 29, 30, 31, 32, 33, 34, 35, 60, 61, 62, 63)),
        # With tp the tensor groups as before: the first and last ZeRO member's of each stage.
        (Cut(tp=8, ep=8), 64, tuple(range(8)) + tuple(range(56, 64))),
    ],
)
def test_expert_parallel_cards_drawn(cut: Cut, gpus: int, shown: tuple[int, ...]) -> None:
    assert cut_shown(cut, gpus) == shown
