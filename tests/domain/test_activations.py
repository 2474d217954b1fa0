"""Activations against Korthikanti et al. 2022 and against sums worked by hand."""

from __future__ import annotations

from fractions import Fraction

import pytest

from app.domain.activations import (
    Recompute,
    Shape,
    dispatched_rows,
    expert_saved,
    head_bytes,
    head_saved,
    logits_bytes,
    per_layer_bytes,
    upcast_saved,
    working_bytes,
)
from app.domain.architecture import GPT_3_175B, LLAMA_3_8B, Architecture, ModelName
from app.domain.presets import PRESETS
from app.domain.scenario import Inputs, resolve

# Korthikanti et al. 2022, Table 2 with t = 1: per layer, sbh(34 + 5as/h) with no recomputation, 34sbh
# selective, 2sbh full. GPT-3 175B: s = 2048, b = 1, h = 12288, a = 96, so sbh = 25,165,824 and
# 5as/h = 80.
KORTHIKANTI_GPT3 = [
    (Recompute.NONE, 25_165_824 * 114),  # 2,868,903,936 B, 2.67 GiB
    (Recompute.SELECTIVE, 25_165_824 * 34),  # 855,638,016 B
    (Recompute.FULL, 25_165_824 * 2),  # 50,331,648 B
]


@pytest.mark.parametrize(("recompute", "expected"), KORTHIKANTI_GPT3)
def test_gpt3_per_layer_is_korthikantis(recompute: Recompute, expected: int) -> None:
    assert per_layer_bytes(GPT_3_175B, Shape(1, 2048, recompute)) == expected


# Llama 3 8B at s = 8192, b = 1 (docs/activations.md): 12sbh + 4sb·kv + 8sbf + 4asb per block, with
# h = 4096, kv = 1024, f = 14336, a = 32: 8192 × (49,152 + 4,096 + 114,688 + 128) = 8192 × 168,064.
LLAMA_8B_BLOCK = 8192 * 168_064


@pytest.mark.parametrize(
    ("recompute", "layer", "working"),
    [
        (Recompute.NONE, LLAMA_8B_BLOCK, 0),
        # Flash attention keeps no scores; recomputing the kernel drops its log-sum-exp, 4asb = 128 B a token.
        (Recompute.SELECTIVE, 8192 * (168_064 - 128), 0),
        # The block's input is what it keeps; recomputing starts from it, so the working set is the rest.
        (Recompute.FULL, 2 * 8192 * 4096, LLAMA_8B_BLOCK - 2 * 8192 * 4096),
    ],
)
def test_llama_block(recompute: Recompute, layer: int, working: int) -> None:
    shape = Shape(1, 8192, recompute)
    assert (per_layer_bytes(LLAMA_3_8B, shape), working_bytes(LLAMA_3_8B, shape)) == (layer, working)


@pytest.mark.parametrize(
    ("arch", "shape", "expected"),
    [
        # 4 bytes × vocab 128,256 × 8,192 tokens × 2 sequences
        (LLAMA_3_8B, Shape(2, 8192), 4 * 128_256 * 8192 * 2),
        (GPT_3_175B, Shape(1, 2048), 4 * 50_257 * 2048),
    ],
)
def test_logits(arch: Architecture, shape: Shape, expected: int) -> None:
    assert logits_bytes(arch, shape) == expected


def test_gpt3_output_layer_is_korthikantis() -> None:
    # Section 4.3: sbh for the input dropout's mask, and 4sbh(1 + v/h) for the output layer.
    sbh, sbv = 2048 * 12288, 2048 * 50_257
    assert head_bytes(GPT_3_175B, Shape(1, 2048)) == sbh + 4 * sbh + 4 * sbv


@pytest.mark.parametrize(("batch", "seq"), [(-1, 10), (1, 0)])
def test_bad_shapes(batch: int, seq: int) -> None:
    with pytest.raises(ValueError, match="micro-batch"):
        Shape(batch, seq)


# A mixture of experts' block (docs/moe.md, "Activations and traffic of a mixture of experts"). Mixtral 8x7B at
# s = 4096, b = 1: h = 4096, 8 KV heads of 128 (kv = 1024), a = 32, e = 8 experts, k = 2, fe = 14336.
# Attention and the norms as Llama's: 12sbh + 4sb·kv + 4asb = sb × (49,152 + 4,096 + 128) = sb × 53,376.
# In place of the MLP's 8sbf: the router's fp32 probabilities 4sb·e = 32sb, the chosen experts' weights 2ksb = 4sb,
# the dispatched tokens 2ksbh = 16,384sb, the experts' SwiGLU 4 × 2ksb·fe = 229,376sb and their outputs 2ksbh =
# 16,384sb: sb × 262,180. The block: 4096 × (53,376 + 262,180) = 4096 × 315,556 = 1,292,517,376 B.
MIXTRAL_BLOCK = 4096 * 315_556


def test_a_mixtral_block_keeps_the_hand_sum() -> None:
    arch = PRESETS[ModelName.MIXTRAL_8X7B].architecture
    assert arch is not None
    assert arch.moe is not None
    assert (arch.hidden, arch.kv_heads * arch.head_dim, arch.heads) == (4096, 1024, 32)
    assert (arch.moe.experts, arch.moe.top_k, arch.moe.expert_ffn) == (8, 2, 14_336)
    assert per_layer_bytes(arch, Shape(1, 4096)) == MIXTRAL_BLOCK == 1_292_517_376
    # The dense figure of the same shape, for the difference: the MLP's 8sbf = 114,688sb in place of 262,180sb.
    assert per_layer_bytes(arch, Shape(1, 4096), experts=False) == 4096 * (53_376 + 114_688)


def test_the_expert_terms_one_by_one() -> None:
    arch = PRESETS[ModelName.MIXTRAL_8X7B].architecture
    assert arch is not None
    assert arch.moe is not None
    sb = 4096
    assert [(s.formula, s.nbytes) for s in expert_saved(arch, arch.moe, Shape(1, sb))] == [
        ("4sb·e", 4 * sb * 8),
        ("2ksb", 2 * 2 * sb),
        ("2ksbh", 2 * 2 * sb * 4096),
        ("2ksb·fe", 2 * 2 * sb * 14_336),
        ("2ksb·fe", 2 * 2 * sb * 14_336),
        ("2ksb·fe", 2 * 2 * sb * 14_336),
        ("2ksb·fe", 2 * 2 * sb * 14_336),
        ("2ksbh", 2 * 2 * sb * 4096),
    ]


# Megatron-LM's get_capacity(num_tokens = 4096 × 2, num_experts = 8, capacity_factor = 1.25):
# ⌈8192 / 8 × 1.25⌉ = 1,280 rows an expert, 10,240 in all in place of k·sb = 8,192; 0.5: 512 an expert, 4,096.
@pytest.mark.parametrize(("factor", "rows"), [(None, 8_192), (Fraction(5, 4), 10_240), (Fraction(1, 2), 4_096)])
def test_the_capacity_factor_pads_the_experts_rows(factor: Fraction | None, rows: int) -> None:
    arch = PRESETS[ModelName.MIXTRAL_8X7B].architecture
    assert arch is not None
    assert arch.moe is not None
    assert dispatched_rows(arch.moe, 4096, factor) == rows
    # The dispatched tokens, the experts' SwiGLU and outputs grow with the rows; the router's and weights' do not.
    per_row = 2 * 4096 + 4 * 2 * 14_336 + 2 * 4096
    assert per_layer_bytes(arch, Shape(1, 4096, capacity_factor=factor)) == 4096 * (53_376 + 36) + rows * per_row


def test_deepseek_v3s_first_three_blocks_keep_a_dense_blocks_and_the_rest_the_experts() -> None:
    arch = PRESETS[ModelName.DEEPSEEK_V3].architecture
    assert arch is not None
    assert arch.moe is not None
    run = resolve(Inputs(model=ModelName.DEEPSEEK_V3, seq=4096)).run
    blocks = [layer for layer in run.layers if layer.block is not None]
    dense, moe = per_layer_bytes(arch, Shape(1, 4096), False), per_layer_bytes(arch, Shape(1, 4096), True)
    assert [layer.kept for layer in blocks] == [dense] * 3 + [moe] * 58
    # The difference, by hand: the dense MLP's 8sbf (f = 18,432) out; in: 4sb·e (e = 256), 2ksb (k = 8),
    # 2ksbh twice (h = 7,168), 8ksb·fe (fe = 2,048) and the shared expert's 8sb·fs (fs = 2,048).
    sb = 4096
    added = 4 * 256 + 2 * 8 + 2 * 2 * 8 * 7_168 + 8 * 8 * 2_048 + 8 * 2_048
    assert moe - dense == sb * (added - 8 * 18_432)
    assert run.activations is not None
    assert run.activations.per_layer == moe


@pytest.mark.parametrize("model", [m for m in ModelName if m is not ModelName.CUSTOM])
def test_a_dense_models_blocks_all_keep_the_one_figure(model: ModelName) -> None:
    arch = PRESETS[model].architecture
    if arch is None or arch.moe is not None:
        return
    run = resolve(Inputs(model=model, seq=1024)).run
    figure = per_layer_bytes(arch, Shape(1, 1024))
    assert {layer.kept for layer in run.layers if layer.block is not None} == {figure}


def test_the_fp32_upcast_is_a_term_of_its_own_beside_the_log_probabilities() -> None:
    # Llama 3 8B at s = 8,192: 4sbv = 4 × 8,192 × 128,256 = 4,202,692,608 B, not among what the output layer keeps.
    shape = Shape(1, 8192)
    upcast = upcast_saved(LLAMA_3_8B, shape)
    assert (upcast.formula, upcast.nbytes) == ("4sbv", 4_202_692_608)
    assert upcast.name not in {term.name for term in head_saved(LLAMA_3_8B, shape)}
