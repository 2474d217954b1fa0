"""The model cut across cards: its degrees, the data-parallel rest, the bubble and its refusals, by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from app.domain.parallel import NO_CUT, Cut, cut_refused, stage_blocks


@pytest.mark.parametrize(
    ("cut", "gpus", "dp"),
    [
        (NO_CUT, 8, 8),
        (Cut(tp=2), 8, 4),
        (Cut(tp=8, pp=2), 16, 1),
        (Cut(tp=2, pp=2, cp=2), 64, 8),  # 64 / (2 × 2 × 2)
        (Cut(tp=4, pp=4), 1024, 64),
    ],
)
def test_the_data_parallel_degree_is_what_the_cut_leaves(cut: Cut, gpus: int, dp: int) -> None:
    assert cut.dp(gpus) == dp
    assert cut.cuts is (cut != NO_CUT)


@pytest.mark.parametrize(
    ("cut", "bubble"),
    [
        (NO_CUT, Fraction(0)),
        (Cut(pp=4, microbatches=8), Fraction(3, 8)),  # Narayanan et al. 2021 §2.2: (p − 1) / m
        (Cut(pp=4, vpp=2, microbatches=8), Fraction(3, 16)),  # ÷ v when interleaved
        (Cut(pp=2, microbatches=1), Fraction(1, 1)),  # one micro-batch: each stage idles as long as it works
    ],
)
def test_the_bubble_is_p_minus_1_over_m_v(cut: Cut, bubble: Fraction) -> None:
    assert cut.bubble == bubble


@pytest.mark.parametrize(
    ("cut", "gpus", "per_node", "blocks", "said"),
    [
        (Cut(tp=16), 16, 8, None, "tp=16 does not fit in a node of 8 GPUs"),
        (Cut(tp=16), 16, 8, None, "Choose one of 1, 2, 4 or 8."),
        (Cut(tp=3), 24, 8, None, "Choose one of 1, 2, 4 or 8."),
        (Cut(sp=True), 8, 8, None, "sp=1 splits the activations across the tensor-parallel group"),
        (Cut(tp=2, cp=3), 8, 8, None, "tp × pp × cp = 2 × 1 × 3 = 6 does not divide gpus=8"),
        (Cut(tp=2, pp=3), 16, 8, None, "With tp=2 and cp=1, pp is one of 1, 2, 4 or 8."),
        (Cut(vpp=2), 8, 8, None, "vpp (virtual stages per card) interleaves a pipeline"),
        (Cut(pp=3, vpp=2), 24, 8, 32, "pp × vpp = 3 × 2 does not divide the model's 32 blocks"),
        (Cut(pp=16), 16, 8, 8, "pp=16 stages for the model's 8 blocks: each stage keeps at least one block"),
        (Cut(pp=2, vpp=3), 16, 8, 32, "No pp does with vpp=3: vpp is one of 1, 2, 4, 8, 16 or 32."),
        (Cut(pp=3, vpp=2), 24, 8, 32, "With vpp=2, pp is one of 1, 2, 4, 8 or 16."),
        # Llama 3.1 405B's 126 blocks: 16 stages uneven as Meta trained it; interleaved, the divisors of 63.
        (Cut(tp=8, pp=16), 1024, 8, 126, ""),
        (Cut(pp=3), 24, 8, 32, ""),  # 11, 11, 10
        (Cut(tp=8, pp=16, vpp=2), 1024, 8, 126, "With vpp=2, pp is one of 1, 3, 7, 9, 21 or 63."),
        (Cut(pp=4, vpp=2), 8, 8, 32, ""),  # 32 blocks in 8 chunks of 4
        (Cut(tp=8, pp=2, cp=2, sp=True), 64, 8, 80, ""),  # Llama 3 70B's 80 blocks
    ],
)
def test_a_cut_that_cannot_be_drawn_names_its_numbers(
    cut: Cut, gpus: int, per_node: int, blocks: int | None, said: str
) -> None:
    refused = cut_refused(cut, gpus, per_node, blocks)
    assert (said in refused) if said else refused == ""


@pytest.mark.parametrize(
    ("blocks", "pp", "split"),
    [
        (32, 1, (32,)),
        (32, 4, (8, 8, 8, 8)),
        # Llama 3 405B, Llama 3 paper §3.3.2: one block fewer on the first and the last stage.
        (126, 16, (7, *[8] * 14, 7)),
        (32, 3, (11, 11, 10)),  # 32 = 3 × 10 + 2: the middle stage, then the first
        (10, 4, (2, 3, 3, 2)),  # 10 = 4 × 2 + 2: both middle stages
        (9, 4, (2, 3, 2, 2)),  # one extra: the first middle stage
        (11, 4, (3, 3, 3, 2)),  # three extra: both middle stages, then the first
        (5, 2, (3, 2)),  # no middle stage: the first
        (8, 8, (1,) * 8),
    ],
)
def test_stages_keep_the_floor_or_the_ceiling_of_the_blocks_middle_first(
    blocks: int, pp: int, split: tuple[int, ...]
) -> None:
    assert stage_blocks(blocks, pp) == split
    assert sum(split) == blocks


@pytest.mark.parametrize(
    ("cut", "gpus", "heads", "said"),
    [
        # Llama 3 8B: 32 attention heads, 8 key-value heads. tp = 16 in a node of 16 splits a key-value head.
        (Cut(tp=16), 16, (32, 8), "tp=16 does not divide the model's 32 attention heads and 8 key-value heads"),
        (Cut(tp=16), 16, (32, 8), "Choose one of 1, 2, 4 or 8."),
        (Cut(tp=8), 16, (32, 8), ""),
        # GPT-3 175B: 96 heads, no grouping; tp = 16 divides both.
        (Cut(tp=16), 16, (96, 96), ""),
    ],
)
def test_tensor_parallelism_splits_whole_heads(cut: Cut, gpus: int, heads: tuple[int, int], said: str) -> None:
    refused = cut_refused(cut, gpus, 16, None, heads)
    assert (said in refused) if said else refused == ""


def test_a_context_group_that_does_not_divide_names_the_cp_that_would() -> None:
    # 24 cards, tp 2: 12 left; cp 5 does not divide them. Every divisor of 12 (six: a short list, whole).
    said = cut_refused(Cut(tp=2, cp=5), 24, 8)
    assert said.endswith("With tp=2, cp is one of 1, 2, 3, 4, 6 or 12.")
