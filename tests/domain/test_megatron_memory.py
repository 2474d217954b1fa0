"""Megatron-LM's count of a mixture of experts (`megatron_memory`), by hand from its formula and by its own code.

The formula is `compute_weight_and_optimizer_memory` in megatron/training/theoretical_memory_usage.py
(NVIDIA/Megatron-LM d98e8a6), copied as published in tests/domain/data/megatron_theoretical_memory_usage.py.txt
and executed here on an argparse Namespace of each model's published Megatron-LM options: it imports no torch
(its one import, `.utils`, is given a stand-in), so the test is not slow. docs/moe.md works the same figures.
"""

from __future__ import annotations

import sys
import types
from argparse import Namespace
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from app.domain.accounting import Accounting, Setup
from app.domain.activations import Recompute
from app.domain.architecture import LLAMA_3_8B, Architecture
from app.domain.layers import model_layers
from app.domain.loaded import megatron_activations
from app.domain.megatron_memory import megatron_shard, moe_layer_pattern, padded_vocab
from app.domain.parallel import Cut
from app.domain.presets import DEEPSEEK_V3, GPT_OSS_20B, MIXTRAL_8X7B
from app.domain.run import Run
from app.domain.sizing import stage_report
from app.domain.stages import Stage

SOURCE = Path(__file__).parent / "data" / "megatron_theoretical_memory_usage.py.txt"

# --- Mixtral 8x7B, tp 2, ep 8, 16 GPUs, the distributed optimizer, by hand from the formula as written ---------
# h = 4,096, 32 layers, 32 heads, 8 query groups, kv_channels 128, ffn = moe_ffn = 14,336, 8 experts, top 2,
# swiglu (×3/2), RMSNorm (norm_size 1), untied, vocab 32,000 (a multiple of 128 × 2: not padded), no biases.
# self_attn_term = 2 × 4,096 × 4,096 × ((1 + 8/32) × 1) = 41,943,040
# routed_expert_params = 2 × 4,096 × 14,336 × 8 × 3/2 = 1,409,286,144; router 4,096 × 8 = 32,768;
# layernorm 2 × 4,096 = 8,192; every layer MoE (moe_layer_freq 1).
# tp_sharded_params_in_transformer_block = 41,943,040 × 32 = 1,342,177,280
# replicated = (8,192 + 32,768) × 32 + 4,096 = 1,314,816; expert_sharded = 1,409,286,144 × 32 = 45,097,156,608
# most loaded shard, pp = 1: tp_sharded = (1,342,177,280 + 131,072,000) / 2 = 736,624,640, + the untied output
# layer 131,072,000 / 2: 802,160,640; replicated 1,314,816; experts 45,097,156,608 / (etp × 8).
MIXTRAL_TP_SHARDED, MIXTRAL_REPLICATED = 802_160_640, 1_314_816
assert MIXTRAL_TP_SHARDED == (41_943_040 * 32 + 32000 * 4096) // 2 + 32000 * 4096 // 2
assert MIXTRAL_REPLICATED == (8192 + 32768) * 32 + 4096
# etp 1: experts 5,637,144,576 on a card; dp = 16 / 2 = 8, edp = 16 // (1 × 8 × 1) = 2:
# (802,160,640 + 1,314,816) × (6 + 12/8) + 5,637,144,576 × (6 + 12/2) = 6,026,065,920 + 67,645,734,912.
MIXTRAL_ETP1 = Fraction(803_475_456 * 15, 2) + 5_637_144_576 * 12
# etp = tp = 2 (Megatron's default): experts 2,818,572,288 on a card, edp = 16 // (2 × 8) = 1, 18 B a weight:
# 6,026,065,920 + 50,734,301,184.
MIXTRAL_ETP2 = Fraction(803_475_456 * 15, 2) + 2_818_572_288 * 18

# --- DeepSeek-V3, pp 16 × ep 64 on 2,048 GPUs (tp = etp = 1), the distributed optimizer ------------------------
# h = 7,168, 61 layers (moe_layer_freq [0]*3+[1]*58), 128 heads, multi-latent attention (q_lora 1,536, kv_lora 512,
# qk_head 128, qk_pos_emb 64, v 128), ffn 18,432, moe_ffn 2,048, shared 2,048, 256 experts, vocab 129,280 (= 128 ×
# 1,010), untied, no add_bias_linear.
# q_term = 1,536 × (7,168 + 128 × (128 + 64) + 1) = 48,760,320
# kv = 512 × (7,168 + 128 × (128 + 128) + 1) + 7,168 × 64 = 20,447,744 + 458,752; o = 128 × 128 × 7,168 = 117,440,512
# self_attn_term = 187,107,328; dense MLP 2 × 7,168 × 18,432 × 3/2 = 396,361,728; shared 2 × 7,168 × 2,048 × 3/2 =
# 44,040,192; routed 2 × 7,168 × 2,048 × 256 × 3/2 = 11,274,289,152; router 7,168 × 256 = 1,835,008 (its
# correction bias is a buffer, not counted); layernorm 14,336.
DSV3_ATTENTION = 48_760_320 + 20_447_744 + 458_752 + 117_440_512
assert DSV3_ATTENTION == 187_107_328
# tp_sharded block = (187,107,328 + 396,361,728) × 3 + (187,107,328 + 44,040,192) × 58 = 15,156,963,328
# replicated block = 14,336 × 3 + (14,336 + 1,835,008) × 58 + 7,168 = 107,312,128
# expert block = 11,274,289,152 × 58 = 653,908,770,816
# most loaded shard: tp_sharded 15,156,963,328 / 16 + 926,679,040 = 947,310,208 + 926,679,040 = 1,873,989,248;
# replicated 107,312,128 / 16 = 6,707,008; experts 653,908,770,816 / 16 / 64 = 638,582,784.
DSV3_TP_SHARDED = (583_469_056 * 3 + 231_147_520 * 58) // 16 + 129280 * 7168
DSV3_REPLICATED = (14336 * 3 + (14336 + 1_835_008) * 58 + 7168) // 16
DSV3_EXPERTS = 11_274_289_152 * 58 // (16 * 64)
assert (DSV3_TP_SHARDED, DSV3_REPLICATED, DSV3_EXPERTS) == (1_873_989_248, 6_707_008, 638_582_784)
# dp = 2,048 / 16 = 128, edp = 2,048 // (1 × 64 × 16) = 2:
# 1,880,696,256 × (6 + 12/128) + 638,582,784 × 12 = 11,460,492,810 + 7,662,993,408 = 19,123,486,218 B.
DSV3_BYTES = 19_123_486_218
assert Fraction(1_880_696_256 * 780, 128) + 638_582_784 * 12 == DSV3_BYTES


@pytest.mark.parametrize(
    ("arch", "cut", "gpus", "tp_sharded", "replicated", "experts", "nbytes"),
    [
        (MIXTRAL_8X7B, Cut(tp=2, ep=8, etp=1), 16, MIXTRAL_TP_SHARDED, MIXTRAL_REPLICATED, 5_637_144_576, MIXTRAL_ETP1),
        (MIXTRAL_8X7B, Cut(tp=2, ep=8), 16, MIXTRAL_TP_SHARDED, MIXTRAL_REPLICATED, 2_818_572_288, MIXTRAL_ETP2),
        (DEEPSEEK_V3, Cut(pp=16, ep=64), 2048, DSV3_TP_SHARDED, DSV3_REPLICATED, DSV3_EXPERTS, DSV3_BYTES),
    ],
)
def test_the_formula_by_hand(
    arch: Architecture, cut: Cut, gpus: int, tp_sharded: int, replicated: int, experts: int, nbytes: Fraction
) -> None:
    shard = megatron_shard(arch, cut, gpus, distributed=True)
    assert [shard.tp_sharded, shard.replicated, shard.expert_sharded] == [tp_sharded, replicated, experts]
    assert shard.nbytes == nbytes


def test_the_figures() -> None:
    assert MIXTRAL_ETP1 == 73_671_800_832
    assert MIXTRAL_ETP2 == 56_760_367_104
    # Without the distributed optimizer, 18 B a weight: DeepSeek-V3's shard of 2,519,279,040 weights.
    shard = megatron_shard(DEEPSEEK_V3, Cut(pp=16, ep=64), 2048, distributed=False)
    assert shard.params == 2_519_279_040
    assert shard.nbytes == 18 * 2_519_279_040


def test_the_pattern_and_the_vocabulary() -> None:
    assert moe_layer_pattern(DEEPSEEK_V3) == (0,) * 3 + (1,) * 58  # Megatron's "[0]*3+[1]*58"
    assert padded_vocab(32000, 2) == 32000  # 125 × 256
    assert padded_vocab(32001, 1) == 32128


# --- Megatron-LM's own function ------------------------------------------------------------------------------
def _megatrons(monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """Megatron-LM's `compute_weight_and_optimizer_memory`, from its source, its `.utils` import stood in for."""
    package = types.ModuleType("megatron_copy")
    package.__path__ = []
    utils = types.ModuleType("megatron_copy.utils")
    utils.is_hybrid_model = lambda args: False  # type: ignore[attr-defined]
    utils.print_rank_0 = print  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "megatron_copy", package)
    monkeypatch.setitem(sys.modules, "megatron_copy.utils", utils)
    module = types.ModuleType("megatron_copy.theoretical_memory_usage")
    module.__package__ = "megatron_copy"
    exec(compile(SOURCE.read_text(), str(SOURCE), "exec"), module.__dict__)
    return module.__dict__["compute_weight_and_optimizer_memory"]  # type: ignore[no-any-return]


# The options of Megatron-LM's own scripts for these models (tests/domain/test_layout_configs.py's PUBLISHED),
# with argparse's defaults for the rest, and the layout's sizes as arguments.py derives them.
COMMON = {
    "mtp_num_layers": None,
    "moe_latent_size": None,
    "moe_shared_expert_gate": False,
    "moe_shared_expert_intermediate_size": None,
    "moe_layer_freq": 1,
    "normalization": "RMSNorm",
    "swiglu": True,
    "untie_embeddings_and_output_weights": True,
    "multi_latent_attention": False,
    "use_distributed_optimizer": True,
}
MIXTRAL_ARGS = {
    "num_layers": 32, "hidden_size": 4096, "ffn_hidden_size": 14336, "num_attention_heads": 32,
    "kv_channels": 128, "group_query_attention": True, "num_query_groups": 8, "num_experts": 8,
    "moe_ffn_hidden_size": 14336, "moe_router_topk": 2, "add_bias_linear": False, "padded_vocab_size": 32000,
}  # fmt: skip
DSV3_ARGS = {
    "num_layers": 61, "hidden_size": 7168, "ffn_hidden_size": 18432, "num_attention_heads": 128,
    "kv_channels": 128, "group_query_attention": False, "num_query_groups": None, "multi_latent_attention": True,
    "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_head_dim": 128, "qk_pos_emb_head_dim": 64, "v_head_dim": 128,
    "num_experts": 256, "moe_layer_freq": [0] * 3 + [1] * 58, "moe_ffn_hidden_size": 2048, "moe_router_topk": 8,
    "moe_shared_expert_intermediate_size": 2048, "add_bias_linear": False, "padded_vocab_size": 129280,
}  # fmt: skip
OSS_ARGS = {
    "num_layers": 24, "hidden_size": 2880, "ffn_hidden_size": 2880, "num_attention_heads": 64, "kv_channels": 64,
    "group_query_attention": True, "num_query_groups": 8, "num_experts": 32, "moe_ffn_hidden_size": 2880,
    "moe_router_topk": 4, "add_bias_linear": True, "padded_vocab_size": 201088,
}  # fmt: skip


def _layout(tp: int, pp: int, ep: int, etp: int, world: int) -> dict[str, int]:
    return {
        "tensor_model_parallel_size": tp,
        "pipeline_model_parallel_size": pp,
        "expert_model_parallel_size": ep,
        "expert_tensor_parallel_size": etp,
        "world_size": world,
        "data_parallel_size": world // (tp * pp),
    }


@pytest.mark.parametrize(
    ("arch", "options", "cut", "gpus"),
    [
        (MIXTRAL_8X7B, MIXTRAL_ARGS, Cut(tp=2, ep=8, etp=1), 16),
        (MIXTRAL_8X7B, MIXTRAL_ARGS, Cut(tp=2, ep=8), 16),
        (DEEPSEEK_V3, DSV3_ARGS, Cut(pp=16, ep=64), 2048),
        # tp 4: Megatron pads the vocabulary to a multiple of 128 × 4, 129,280 to 129,536 (253 × 512).
        (DEEPSEEK_V3, {**DSV3_ARGS, "padded_vocab_size": 129536}, Cut(tp=4, pp=8, ep=32, etp=1), 1024),
        (GPT_OSS_20B, OSS_ARGS, Cut(ep=8), 8),
    ],
)
@pytest.mark.parametrize("distributed", [True, False])
def test_megatrons_own_function_agrees(
    monkeypatch: pytest.MonkeyPatch,
    arch: Architecture,
    options: dict[str, object],
    cut: Cut,
    gpus: int,
    distributed: bool,
) -> None:
    compute = _megatrons(monkeypatch)
    layout = _layout(cut.tp, cut.pp, cut.ep, cut.expert_tp, gpus)
    args = Namespace(**{**COMMON, **options, **layout, "use_distributed_optimizer": distributed})
    theirs = compute(args)
    ours = megatron_shard(arch, cut, gpus, distributed)
    assert ours.nbytes == pytest.approx(theirs, rel=1e-12)


# --- the accounting: a mixture of experts' card is Megatron's shard ------------------------------------------
def _run(arch: Architecture, gpus: int, cut: Cut, accounting: Accounting = Accounting.MEGATRON) -> Run:
    return Run(
        params=arch.params,
        gpus=gpus,
        nodes=max(1, gpus // 8),
        layers=model_layers(arch, 0),
        largest_layer=arch.largest_layer,
        architecture=arch,
        cut=cut,
        setup=Setup(accounting),
    )


@pytest.mark.parametrize(
    ("arch", "cut", "gpus", "params", "experts", "zero1", "dp"),
    [
        # Mixtral: every figure whole, so the app's slices are Megatron's exactly.
        (MIXTRAL_8X7B, Cut(tp=2, ep=8, etp=1), 16, 6_440_620_032, 5_637_144_576, MIXTRAL_ETP1, 18 * 6_440_620_032),
        # DeepSeek-V3: 1,880,696,256 / 128 = 14,692,939.5 weights: the app rounds the slice up to 14,692,940, 6 B
        # more than Megatron's 19,123,486,218 (docs/accounting.md: the app pads a slice to whole weights).
        (DEEPSEEK_V3, Cut(pp=16, ep=64), 2048, 2_519_279_040, DSV3_EXPERTS, DSV3_BYTES + 6, 18 * 2_519_279_040),
    ],
)
def test_the_megatron_accounting_counts_megatrons_shard(
    arch: Architecture, cut: Cut, gpus: int, params: int, experts: int, zero1: int, dp: int
) -> None:
    run = _run(arch, gpus, cut)
    rows = {stage: stage_report(stage, run) for stage in (Stage.DP, Stage.ZERO1)}
    assert rows[Stage.ZERO1].per_gpu_bytes == zero1
    assert rows[Stage.DP].per_gpu_bytes == dp
    for row in rows.values():
        assert (row.card_params, row.expert_params) == (params, experts)


def test_deepseek_v3_first_stage_differs_from_the_apps_own() -> None:
    """The app's first stage holds 3 dense blocks and no experts; Megatron's formula, 1/16 of every block."""
    paper = stage_report(Stage.DP, _run(DEEPSEEK_V3, 2048, Cut(pp=16, ep=64), Accounting.PAPER))
    megatron = stage_report(Stage.DP, _run(DEEPSEEK_V3, 2048, Cut(pp=16, ep=64)))
    assert (paper.card_params, paper.expert_params) == (3 * 583_483_392 + 926_679_040, 0)
    assert (megatron.card_params, megatron.expert_params) == (2_519_279_040, 638_582_784)


def test_a_dense_model_keeps_the_apps_count() -> None:
    """Llama 3 8B: no shard of Megatron's; its figures are as before (docs/accounting.md, 60,226,959,360 B)."""
    run = _run(LLAMA_3_8B, 8, Cut())
    assert run.megatron_shard is None
    assert stage_report(Stage.ZERO1, run).per_gpu_bytes == 60_226_959_360


def test_gpt_oss_biases_are_not_in_megatrons_formula() -> None:
    """gpt-oss-20b uncut on 8 GPUs: Megatron's formula leaves out the projections' and experts' biases and sinks.

    Per block: q, k, v biases 64 × 64 + 2 × 8 × 64 = 5,120, o 2,880, sinks 64; 32 experts' biases 32 × (2 × 2,880
    + 2,880) = 276,480: 284,544 × 24 = 6,829,056 weights. Its router's bias it counts (add_bias_linear).
    """
    shard = megatron_shard(GPT_OSS_20B, Cut(), 8, distributed=True)
    assert GPT_OSS_20B.params - shard.params == 24 * (5120 + 2880 + 64 + 32 * 3 * 2880) == 6_829_056


def test_the_page_says_whose_card_it_is() -> None:
    said = stage_report(Stage.ZERO1, _run(MIXTRAL_8X7B, 16, Cut(tp=2, ep=8, etp=1))).differences
    assert any(s.startswith("Megatron-LM's formula counts a mixture of experts' card") for s in said)
    dense = stage_report(Stage.ZERO1, _run(LLAMA_3_8B, 8, Cut())).differences
    assert not any("mixture of experts" in s for s in dense)


# Its activations have no mixture-of-experts term: `compute_activation_memory` with sequence parallelism and
# selective recomputation counts sbh(18 + 4 × ffn_hidden_size / h) a block, ffn_hidden_size the dense width
# (Mixtral's published 14,336, DeepSeek-V3's 18,432), whatever the experts and top-k. Mixtral, s = 4,096, b = 1,
# tp 2, pp 1: 4,096 × 4,096 × (18 + 4 × 14,336 / 4,096) × 32 = 16,777,216 × 32 × 32 = 17,179,869,184; the
# embedding's 8 × 4,096 + 4,096 × 4,096 = 16,809,984; the output layer's 4,096 × 4,096 × 4 × (1 + 32,000 / 4,096)
# = 591,396,864; all ÷ 2: 8,894,038,016.
def test_megatrons_activations_have_no_expert_terms() -> None:
    cut = Cut(tp=2, sp=True, ep=8, etp=1)
    held = megatron_activations(MIXTRAL_8X7B, 4096, 1, cut, Recompute.SELECTIVE)
    assert held == Fraction(17_179_869_184 + 16_809_984 + 591_396_864, 2) == 8_894_038_016
