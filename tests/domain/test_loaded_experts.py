"""A mixture of experts on the most loaded card, each figure against a hand calculation written out here.

Expert parallelism, ZeRO over the expert-data-parallel group, active against total weights and ZeRO-3's largest
layer.

docs/moe.md ("Memory of a mixture of experts") works the same figures. The rules: in a mixture-of-experts block
the routed experts are cut ÷ (ep × etp), the attention and shared experts ÷ tp, the router and norms kept whole
(Megatron-LM's MoE layer: `TopKRouter` is not split); ZeRO shards the routed experts' state over the
expert-data-parallel group, edp = gpus ÷ (pp × ep × etp) (Megatron-Core's `expert_data_parallel_size`), the
rest over dp × cp. Megatron-LM's distributed optimizer keeps 6 + 12/d bytes a weight
(`theoretical_memory_usage.py`: bf16 weights and fp32 main gradients whole, the fp32 master and two moments
÷ d), with d = dp for the dense part and d = edp for the experts.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest

from app.domain.accounting import Accounting, Setup
from app.domain.architecture import LLAMA_3_8B, Architecture
from app.domain.layers import model_layers
from app.domain.parallel import Cut
from app.domain.presets import DEEPSEEK_V3, MIXTRAL_8X7B, QWEN_2_5_7B
from app.domain.run import Run, groups_refused
from app.domain.sizing import stage_report
from app.domain.stages import Stage
from app.domain.wire import compute_seconds

# Mixtral 8x7B: h = 4,096, L = 32, v = 32,000 (untied), f = 14,336, 8 experts (top 2), 32 heads of 128, 8 KV heads.
MIXTRAL_ATTENTION = 2 * 4096 * 4096 + 2 * 4096 * 1024  # 41,943,040
MIXTRAL_EXPERT = 3 * 4096 * 14336  # one expert's three matrices: 176,160,768
MIXTRAL_ROUTER, MIXTRAL_NORMS = 8 * 4096, 2 * 4096  # 32,768 and 8,192
MIXTRAL_BLOCK = MIXTRAL_ATTENTION + 8 * MIXTRAL_EXPERT + MIXTRAL_ROUTER + MIXTRAL_NORMS
MIXTRAL_TABLE = 32000 * 4096  # 131,072,000

# DeepSeek-V3: h = 7,168, L = 61 (the first 3 dense, f = 18,432), v = 129,280 (untied), 256 routed experts of width
# 2,048 (top 8) and one shared, the router with its correction bias; multi-head latent attention, 128 heads.
DEEPSEEK_QUERY = 7168 * 1536 + 1536 + 1536 * 128 * 192  # down and up projections, its latent norm: 48,760,320
DEEPSEEK_LATENT = 7168 * (512 + 64) + 512  # the key-value latent, its rope key and its norm: 4,129,280
DEEPSEEK_KV_UP = 512 * 128 * (128 + 128)  # the keys' and values' up projection: 16,777,216
DEEPSEEK_OUT = 128 * 128 * 7168  # the output projection: 117,440,512
DEEPSEEK_ATTENTION = DEEPSEEK_QUERY + DEEPSEEK_LATENT + DEEPSEEK_KV_UP + DEEPSEEK_OUT  # 187,107,328
DEEPSEEK_EXPERT = 3 * 7168 * 2048  # 44,040,192, the shared expert's size too
DEEPSEEK_ROUTER, DEEPSEEK_NORMS = 256 * (7168 + 1), 2 * 7168  # 1,835,264 and 14,336
DEEPSEEK_REST = DEEPSEEK_ATTENTION + DEEPSEEK_EXPERT + DEEPSEEK_ROUTER + DEEPSEEK_NORMS  # 232,997,120
DEEPSEEK_MOE_BLOCK = DEEPSEEK_REST + 256 * DEEPSEEK_EXPERT
DEEPSEEK_DENSE_BLOCK = DEEPSEEK_ATTENTION + 3 * 7168 * 18432 + DEEPSEEK_NORMS  # 583,483,392
DEEPSEEK_TABLE = 129280 * 7168  # 926,679,040


def _run(arch: Architecture, gpus: int, cut: Cut, accounting: Accounting = Accounting.PAPER, **more: object) -> Run:
    return Run(
        params=arch.params,
        gpus=gpus,
        nodes=gpus // 8,
        layers=model_layers(arch, 0),
        largest_layer=arch.largest_layer,
        architecture=arch,
        cut=cut,
        setup=Setup(accounting),
        **more,  # type: ignore[arg-type]
    )


def test_the_hand_counts_are_the_models() -> None:
    assert MIXTRAL_BLOCK == MIXTRAL_8X7B.block_params == 1_451_270_144
    assert DEEPSEEK_MOE_BLOCK == DEEPSEEK_V3.block_params == 11_507_286_272
    assert DEEPSEEK_V3.blocks[0] == DEEPSEEK_DENSE_BLOCK
    assert DEEPSEEK_REST == 232_997_120


# Mixtral 8x7B on 16 GPUs (2 nodes of 8), tp = 2, ep = 8, etp = 1, ZeRO-1 (Megatron's distributed optimizer).
# A block on a card: attention ÷ 2 = 20,971,520; router and norms whole, 40,960; one expert of 8 ÷ (8 × 1),
# 176,160,768: 197,173,248. Times 32 blocks: 6,309,543,936; the embedding and output layer ÷ 2: 131,072,000;
# the final norm 4,096. The card keeps 6,440,620,032 weights, 32 × 176,160,768 = 5,637,144,576 of them experts.
# dp = 16 ÷ 2 = 8; edp = 16 ÷ (1 × 8 × 1) = 2.
MIXTRAL_CARD = 32 * (MIXTRAL_ATTENTION // 2 + MIXTRAL_ROUTER + MIXTRAL_NORMS + MIXTRAL_EXPERT) + MIXTRAL_TABLE + 4096
MIXTRAL_CARD_EXPERTS = 32 * MIXTRAL_EXPERT
MIXTRAL_CUT = Cut(tp=2, ep=8, etp=1)


def test_mixtral_card_keeps_its_experts_over_ep_and_the_rest_over_tp() -> None:
    run = _run(MIXTRAL_8X7B, 16, MIXTRAL_CUT)
    (card,) = run.cards
    assert (card.params, card.experts) == (MIXTRAL_CARD, MIXTRAL_CARD_EXPERTS) == (6_440_620_032, 5_637_144_576)
    assert (run.shards, run.expert_shards) == (8, 2)


# Megatron-LM's formula, 6 + 12/d bytes a weight, with d = dp = 8 for the rest and d = edp = 2 for the experts:
# 803,475,456 × 7.5 = 6,026,065,920 and 5,637,144,576 × 12 = 67,645,734,912: 73,671,800,832 B (68.6 GiB).
# The same formula with every weight ÷ tp and d = dp (as it stood before it knew ep): 46,702,792,704 ÷ 2 × 7.5 =
# 175,135,472,640 B, 2.4 times as much. Under the paper's count (2 + 2 whole, 12 ÷ d): 803,475,456 × 5.5 +
# 5,637,144,576 × 10 = 4,419,115,008 + 56,371,445,760 = 60,790,560,768 B.
MIXTRAL_REST = MIXTRAL_CARD - MIXTRAL_CARD_EXPERTS


@pytest.mark.parametrize(
    ("accounting", "stage", "expected"),
    [
        (Accounting.MEGATRON, Stage.ZERO1, MIXTRAL_REST * Fraction(15, 2) + MIXTRAL_CARD_EXPERTS * 12),
        (Accounting.MEGATRON, Stage.DP, MIXTRAL_CARD * 18),
        (Accounting.PAPER, Stage.ZERO1, MIXTRAL_REST * Fraction(11, 2) + MIXTRAL_CARD_EXPERTS * 10),
        # ZeRO-3 shards all 16 bytes: 803,475,456 × 2 + 5,637,144,576 × 8.
        (Accounting.PAPER, Stage.ZERO3, MIXTRAL_REST * 2 + MIXTRAL_CARD_EXPERTS * 8),
    ],
)
def test_mixtral_per_card_bytes_by_megatrons_formula(accounting: Accounting, stage: Stage, expected: Fraction) -> None:
    row = stage_report(stage, _run(MIXTRAL_8X7B, 16, MIXTRAL_CUT, accounting))
    assert row.per_gpu_bytes == expected
    assert (row.card_params, row.expert_params) == (MIXTRAL_CARD, MIXTRAL_CARD_EXPERTS)
    assert row.peak_bytes >= row.per_gpu_bytes


def test_mixtral_megatron_zero1_figure() -> None:
    row = stage_report(Stage.ZERO1, _run(MIXTRAL_8X7B, 16, MIXTRAL_CUT, Accounting.MEGATRON))
    assert row.per_gpu_bytes == row.peak_bytes == 73_671_800_832


# DeepSeek-V3's own layout: 2,048 H800s, PP16, EP64, ZeRO-1 data parallelism (DeepSeek-V3 technical report,
# §3.2), tp = etp = 1. dp = 2,048 ÷ 16 = 128; edp = 2,048 ÷ (16 × 64 × 1) = 2. Its 61 blocks in 16 stages: 4 in
# stages 1-13, 3 in stages 0, 14 and 15 (`parallel.stage_blocks`).
# - Stage 0: the 3 dense blocks and the embedding: 3 × 583,483,392 + 926,679,040 = 2,677,129,216 weights, no
#   experts: × (6 + 12/128) = 16,062,775,296 + 250,980,864 = 16,313,756,160 B.
# - Stage 15: 3 MoE blocks, each 232,997,120 + 256 ÷ 64 = 4 experts of 44,040,192 (176,160,768), the final norm
#   and the output layer: rest 698,991,360 + 926,679,040 + 7,168 = 1,625,677,568 × 6.09375 = 9,906,472,680 B,
#   experts 528,482,304 × 12 = 6,341,787,648 B: 16,248,260,328 B.
# - Stages 1-13: 4 MoE blocks: rest 931,988,480 × 6.09375 = 5,679,304,800 B, experts 704,643,072 × 12 =
#   8,455,716,864 B: 14,135,021,664 B.
# The most loaded card is stage 0's, at 16,313,756,160 B (15.2 GiB) of weights and optimizer state.
DEEPSEEK_CUT = Cut(pp=16, ep=64)


@pytest.mark.parametrize(
    ("index", "params", "experts", "nbytes"),
    [
        (0, 3 * DEEPSEEK_DENSE_BLOCK + DEEPSEEK_TABLE, 0, 16_313_756_160),
        (1, 4 * (DEEPSEEK_REST + 4 * DEEPSEEK_EXPERT), 16 * DEEPSEEK_EXPERT, 14_135_021_664),
        (15, 3 * (DEEPSEEK_REST + 4 * DEEPSEEK_EXPERT) + DEEPSEEK_TABLE + 7168, 12 * DEEPSEEK_EXPERT, 16_248_260_328),
    ],
)
def test_deepseek_v3_stages_on_its_own_layout(index: int, params: int, experts: int, nbytes: int) -> None:
    run = _run(DEEPSEEK_V3, 2048, DEEPSEEK_CUT)
    card = run.cards[index]
    assert (card.params, card.experts) == (params, experts)
    assert (run.shards, run.expert_shards) == (128, 2)
    assert (params - experts) * Fraction(6 * 128 + 12, 128) + experts * 12 == nbytes
    if index == 0:  # the most loaded card under data parallelism: the report's (accounting=megatron counts
        # Megatron's formula's shard instead, every block spread over the stages: tests/domain/test_megatron_memory.py)
        row = stage_report(Stage.DP, run)
        assert row.pipeline_stage == 0
        assert (row.card_params, row.expert_params) == (params, 0)


def test_a_dense_model_is_untouched_by_the_experts_rules() -> None:
    """Llama 3 8B with tp = 2 on 8 GPUs: the same card as before (docs/parallelism.md), nothing kept apart."""
    run = _run(LLAMA_3_8B, 8, Cut(tp=2))
    (card,) = run.cards
    assert card.experts == 0
    assert run.experts_of(card).weights == 0
    assert card.params == (32 * 218_103_808 + 2 * 525_336_576) // 2 + 32 * 8_192 + 4096


def test_with_ep_times_etp_equal_to_tp_the_experts_shard_with_the_rest() -> None:
    """With ep = 1 and etp = tp, edp = dp × cp: one slice as before; the router is still kept whole."""
    run = _run(MIXTRAL_8X7B, 16, Cut(tp=2))
    (card,) = run.cards
    assert run.expert_shards == run.shards == 8
    assert run.experts_of(card).weights == 0
    assert card.experts == 32 * 4 * MIXTRAL_EXPERT  # 8 experts ÷ (1 × 2)


def test_hybrid_sharding_with_experts_apart_is_refused() -> None:
    assert "expert-data-parallel" in groups_refused(16, 8, 8, cut=MIXTRAL_CUT)
    assert groups_refused(16, 8, 8, cut=Cut(tp=2)) == ""


# Active against total: Mistral's announcement of Mixtral ("12.9B active parameters per token", of 46.7B) and
# DeepSeek-V3's report ("671B total parameters with 37B activated for each token").
def test_active_weights_are_the_published_ones() -> None:
    assert round(MIXTRAL_8X7B.active_params / 10**9, 1) == 12.9
    assert round(MIXTRAL_8X7B.params / 10**9, 1) == 46.7
    assert DEEPSEEK_V3.active_params // 10**9 == 37
    assert DEEPSEEK_V3.params // 10**9 == 671


def test_compute_uses_the_active_weights_memory_all() -> None:
    """6 × active weights × tokens: Mixtral's 12,879,925,248 at 4,096 tokens, ÷ tp = 2, at the card's rate."""
    run = replace(_run(MIXTRAL_8X7B, 16, MIXTRAL_CUT), batch=1, seq=4096)
    assert run.active_params == 12_879_925_248
    assert compute_seconds(run) == Fraction(6 * 12_879_925_248 * 4096, run.links.flops * 2)
    dense = replace(_run(LLAMA_3_8B, 8, Cut()), batch=1, seq=4096)
    assert dense.active_params == dense.params


# ZeRO-3's largest layer, from the real shapes: the embedding or a block, on a card its part of it.
@pytest.mark.parametrize(
    ("arch", "largest"),
    [
        (QWEN_2_5_7B, 152064 * 3584),  # the embedding, 544,997,376, above its block's 233,057,792
        (MIXTRAL_8X7B, MIXTRAL_BLOCK),  # 1,451,270,144, above its embedding's 131,072,000
        (DEEPSEEK_V3, DEEPSEEK_MOE_BLOCK),  # 11,507,286,272
    ],
)
def test_largest_layer_from_real_shapes(arch: Architecture, largest: int) -> None:
    assert arch.largest_layer == largest
    run = _run(arch, 8, Cut())
    assert run.largest_layer_on_card == largest


def test_qwen_block_is_smaller_than_its_embedding() -> None:
    # Attention: 2 × 3,584² + 2 × 3,584 × 512 + biases 3,584 + 2 × 512; MLP 3 × 3,584 × 18,944; norms 2 × 3,584.
    block = 2 * 3584 * 3584 + 2 * 3584 * 512 + 3584 + 1024 + 3 * 3584 * 18944 + 7168
    assert QWEN_2_5_7B.block_params == block == 233_057_792 < 544_997_376


@pytest.mark.parametrize(
    ("arch", "gpus", "cut", "largest"),
    [
        # DeepSeek-V3 with ep = 8 (tp = 1): a MoE block's 232,997,120 non-routed weights whole, 256 ÷ 8 = 32 of its
        # experts: 32 × 44,040,192 = 1,409,286,144; 1,642,283,264, above the embedding's 926,679,040.
        (DEEPSEEK_V3, 8, Cut(ep=8), DEEPSEEK_REST + 32 * DEEPSEEK_EXPERT),
        # Mixtral with tp = 2, ep = 8: 197,173,248 a block (above), above the embedding's 65,536,000 ÷ 2.
        (MIXTRAL_8X7B, 16, MIXTRAL_CUT, MIXTRAL_ATTENTION // 2 + MIXTRAL_ROUTER + MIXTRAL_NORMS + MIXTRAL_EXPERT),
    ],
)
def test_largest_layer_on_a_card_with_ep(arch: Architecture, gpus: int, cut: Cut, largest: int) -> None:
    run = _run(arch, gpus, cut)
    assert run.largest_layer_on_card == largest
    # ZeRO-3 assembles it with its gradients, 2 + 2 bytes a weight in mixed precision.
    assert run.assembled_layer_bytes == 4 * largest


def test_deepseek_ep8_block_by_hand() -> None:
    assert DEEPSEEK_REST + 32 * DEEPSEEK_EXPERT == 1_642_283_264


# DeepSpeed counts a module's own weights: Mixtral's largest module in a block is one expert's matrix, 4,096 ×
# 14,336 = 58,720,256 (its embedding, 131,072,000, is the model's largest).
def test_deepspeed_module_of_a_mixture_of_experts_is_one_experts_matrix() -> None:
    assert MIXTRAL_8X7B.block_module == 4096 * 14336
    assert MIXTRAL_8X7B.largest_module == MIXTRAL_TABLE
