"""Activations against Korthikanti et al. 2022 and against sums worked by hand."""

from __future__ import annotations

import pytest

from app.domain.activations import (
    Recompute,
    Shape,
    head_bytes,
    logits_bytes,
    per_layer_bytes,
    working_bytes,
)
from app.domain.architecture import GPT_3_175B, LLAMA_3_8B, Architecture

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
