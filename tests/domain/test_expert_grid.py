"""app/domain/expert_grid.py: which experts each card keeps, and what it draws of each experts' column."""

from __future__ import annotations

from fractions import Fraction

import pytest

from app.domain.architecture import LLAMA_3_8B, Architecture
from app.domain.expert_grid import (
    ExpertRank,
    card_experts,
    column_blocks,
    column_experts,
    expert_card,
    expert_cell,
    expert_columns,
    expert_counts,
    expert_rank,
)
from app.domain.parallel import Cut
from app.domain.presets import DEEPSEEK_V3, GPT_OSS_20B, MIXTRAL_8X7B
from app.domain.sharding import CellState, Share


@pytest.mark.parametrize(
    ("card", "cut", "gpus", "place"),
    [
        # Megatron's expert groups, etp, ep, edp, pp from the fastest: card = etp + etp·(ep + ep·(edp + edp·pp)).
        (5, Cut(ep=8), 8, ExpertRank(0, 5, 0, 0)),
        (13, Cut(ep=8), 16, ExpertRank(0, 5, 1, 0)),  # 13 = 5 + 8·1
        (7, Cut(tp=2, ep=2), 8, ExpertRank(1, 1, 1, 0)),  # etp = tp = 2; edp = 8 / (2·2) = 2: 7 = 1 + 2·(1 + 2·1)
        (11, Cut(pp=2, ep=4), 16, ExpertRank(0, 3, 0, 1)),  # a stage of 8: edp 2; 11 = 3 + 4·(0 + 2·1)
        (6, Cut(tp=2, ep=4, etp=1), 8, ExpertRank(0, 2, 1, 0)),  # etp 1 apart from tp 2: edp = 8/4 = 2; 6 = 2 + 4
    ],
)
def test_a_card_s_place_in_the_experts_groups_is_megatron_s(card: int, cut: Cut, gpus: int, place: ExpertRank) -> None:
    assert expert_rank(card, cut, gpus) == place
    assert expert_card(place, cut, gpus) == card


@pytest.mark.parametrize(
    ("architecture", "cut", "gpus", "card", "kept"),
    [
        (MIXTRAL_8X7B, Cut(ep=8), 8, 3, range(3, 4)),  # 8 experts on 8 ranks: one each
        (MIXTRAL_8X7B, Cut(ep=8), 16, 11, range(3, 4)),  # 11 = ep rank 3, edp rank 1
        (MIXTRAL_8X7B, Cut(ep=2), 8, 1, range(4, 8)),  # rank 1 of 2: the second half, experts 4 to 7
        (DEEPSEEK_V3, Cut(ep=64), 64, 0, range(0, 4)),  # 256 / 64 = 4 each
        (DEEPSEEK_V3, Cut(ep=64), 64, 63, range(252, 256)),
        (GPT_OSS_20B, Cut(ep=4), 8, 6, range(16, 24)),  # 32 / 4 = 8 each; card 6 = ep rank 2 (edp rank 1)
    ],
)
def test_each_card_keeps_its_rank_s_experts(
    architecture: Architecture, cut: Cut, gpus: int, card: int, kept: range
) -> None:
    assert architecture.moe is not None
    assert card_experts(card, cut, gpus, architecture.moe.experts) == kept


@pytest.mark.parametrize(
    ("experts", "columns", "each"),
    [
        (8, 8, [range(n, n + 1) for n in range(8)]),  # Mixtral: one column an expert
        (4, 4, [range(n, n + 1) for n in range(4)]),
        (32, 8, [range(4 * n, 4 * n + 4) for n in range(8)]),  # gpt-oss-20b: 4 a column
        (256, 8, [range(32 * n, 32 * n + 32) for n in range(8)]),  # DeepSeek-V3: 32 a column
        (60, 8, [range(0, 8), range(7, 15)]),  # 7.5 a column: each names those it touches
    ],
)
def test_the_experts_columns(experts: int, columns: int, each: list[range]) -> None:
    assert expert_columns(experts) == columns
    assert [column_experts(c, experts) for c in range(len(each))] == each


MIXTRAL = 8


@pytest.mark.parametrize(
    ("card", "column", "sharded", "cut", "gpus", "state", "part", "holder"),
    [
        # ep = 8 on 8 cards: each keeps its expert whole (edp 1: ZeRO has nothing to shard it over).
        (3, 3, True, Cut(ep=8), 8, CellState.SOLID, None, 3),
        (3, 4, True, Cut(ep=8), 8, CellState.ABSENT, None, 4),
        # On 16, edp 2: ZeRO halves the expert between card 3 (edp 0) and card 11 (edp 1).
        (3, 3, True, Cut(ep=8), 16, CellState.PARTIAL, Share(Fraction(0), Fraction(1, 2)), 3),
        (11, 3, True, Cut(ep=8), 16, CellState.PARTIAL, Share(Fraction(1, 2), Fraction(1)), 11),
        (11, 3, False, Cut(ep=8), 16, CellState.SOLID, None, 11),  # a band ZeRO keeps whole
        (11, 0, True, Cut(ep=8), 16, CellState.ABSENT, None, 8),  # expert 0: ep rank 0 in card 11's edp place
        # ep = 2 on 8: rank 0 keeps experts 0-3, ZeRO splits them over edp 4, one expert a member.
        (2, 1, True, Cut(ep=2), 8, CellState.SOLID, None, 2),  # card 2 = ep 0, edp 1: expert 1
        (2, 0, True, Cut(ep=2), 8, CellState.DASHED, None, 0),  # expert 0 is edp member 0's, card 0
        (2, 3, True, Cut(ep=2), 8, CellState.DASHED, None, 6),  # expert 3: edp member 3, card 0 + 2·3
        (2, 5, True, Cut(ep=2), 8, CellState.ABSENT, None, 3),  # expert 5: ep rank 1 in card 2's place, 1 + 2·1
        # Expert tensor parallelism: tp 2 (etp as tp), ep 4: card 5 = etp 1 of ep rank 2, which keeps experts 4
        # and 5 (8 / 4 each): its slice is the second half of each of their matrices.
        (5, 4, False, Cut(tp=2, ep=4), 8, CellState.PARTIAL, Share(Fraction(1, 2), Fraction(1)), 5),
        (5, 3, False, Cut(tp=2, ep=4), 8, CellState.ABSENT, None, 3),  # expert 3: ep rank 1, etp 1: 1 + 2·1
    ],
)
def test_what_a_card_keeps_of_an_experts_column(
    card: int,
    column: int,
    sharded: bool,
    cut: Cut,
    gpus: int,
    state: CellState,
    part: Share | None,
    holder: int,
) -> None:
    cell = expert_cell(card, column, sharded, cut, gpus, MIXTRAL)
    assert (cell.state, cell.part, cell.holder) == (state, part, holder)


def test_a_rank_s_few_experts_are_its_part_of_a_column() -> None:
    # DeepSeek-V3, ep 64: card 1 keeps experts 4-7, the second eighth of column 0 (experts 0-31).
    cell = expert_cell(1, 0, False, Cut(ep=64), 64, 256)
    assert (cell.state, cell.part) == (CellState.PARTIAL, Share(Fraction(1, 8), Fraction(2, 8)))
    assert expert_cell(1, 1, False, Cut(ep=64), 64, 256).state is CellState.ABSENT


@pytest.mark.parametrize(
    ("architecture", "params", "active", "routed", "experts", "top_k", "blocks"),
    [
        # Mixtral 8x7B: 32 blocks × 8 experts × 3 × 4,096 × 14,336 = 45,097,156,608 routed of 46,702,792,704;
        # active: all but 6 unchosen experts a block, 46,702,792,704 − 32 × 6 × 176,160,768 = 12,879,925,248
        # (Mistral's "12.9B active").
        (MIXTRAL_8X7B, 46_702_792_704, 12_879_925_248, 45_097_156_608, 8, 2, 32),
        # DeepSeek-V3: 58 blocks (61 less 3 dense) × 256 × 3 × 7,168 × 2,048 = 653,908,770,816 routed; 37.6B active.
        (DEEPSEEK_V3, 671_026_419_200, 37_552_297_472, 653_908_770_816, 256, 8, 58),
    ],
)
def test_active_and_total_weights(
    architecture: Architecture, params: int, active: int, routed: int, experts: int, top_k: int, blocks: int
) -> None:
    counts = expert_counts(architecture)
    assert counts is not None
    assert (counts.params, counts.active, counts.routed) == (params, active, routed)
    assert (counts.experts, counts.top_k, counts.blocks) == (experts, top_k, blocks)
    assert counts.dense == params - routed


def test_a_dense_model_has_no_experts_to_count() -> None:
    assert expert_counts(LLAMA_3_8B) is None


def test_each_eighth_names_its_blocks_with_experts() -> None:
    # Mixtral's 32 equal blocks between two embeddings of 131M: 4 blocks an eighth, give or take a shared one.
    found = column_blocks(MIXTRAL_8X7B, MIXTRAL_8X7B.params)
    assert found[0][0] == 1
    assert found[-1][-1] == 32
    assert sorted({b for blocks in found for b in blocks}) == list(range(1, 33))
    # DeepSeek-V3's first 3 blocks are dense: no eighth lists them.
    deepseek = column_blocks(DEEPSEEK_V3, DEEPSEEK_V3.params)
    assert min(b for blocks in deepseek for b in blocks) == 4
