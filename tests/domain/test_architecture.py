from __future__ import annotations

import pytest

from app.domain.architecture import GPT_3_175B, LLAMA_3_8B, Architecture, ModelName
from app.domain.presets import PRESETS


@pytest.mark.parametrize(
    ("name", "published"),
    [
        ("llama-3-8b", 8_030_261_248),
        ("llama-3-70b", 70_553_706_496),
        ("llama-3.1-405b", 405_853_388_800),
    ],
)
def test_derived_counts_equal_the_published_totals(name: str, published: int) -> None:
    preset = PRESETS[ModelName(name)]
    assert preset.architecture is not None
    assert preset.architecture.params == published
    assert preset.params == published


def test_gpt3_is_the_commonly_cited_174_6_billion() -> None:
    assert GPT_3_175B.params == 174_604_259_328


def test_llama_3_8b_block_and_embedding_by_hand() -> None:
    # q and o: 4096², k and v: 4096 × 1024 (8 KV heads of 128); SwiGLU: 3 × 4096 × 14336; two RMSNorms.
    assert LLAMA_3_8B.block_params == 2 * 4096**2 + 2 * 4096 * 1024 + 3 * 4096 * 14336 + 2 * 4096
    assert LLAMA_3_8B.embedding_params == 128256 * 4096
    assert LLAMA_3_8B.largest_layer == LLAMA_3_8B.embedding_params


def test_largest_layer_is_a_block_when_blocks_outweigh_the_embedding() -> None:
    assert GPT_3_175B.largest_layer == GPT_3_175B.block_params > GPT_3_175B.embedding_params


def test_a_bare_count_has_no_known_largest_layer() -> None:
    assert PRESETS[ModelName("zero-7.5b")].params == 7_500_000_000
    assert PRESETS[ModelName("zero-7.5b")].largest_layer is None
    assert PRESETS[ModelName("zero-7.5b")].largest_layer_source == "unknown"


def test_the_lessons_model_is_eight_equal_layers() -> None:
    # The lesson draws 30B weights as eight weights, each a layer: 30e9 / 8 = 3.75e9 weights a layer.
    seed = PRESETS[ModelName("seed-30b")]
    assert seed.params == 30 * 10**9
    assert seed.largest_layer == 3_750_000_000
    assert seed.largest_layer_source == "one of its 8 equal layers"


@pytest.mark.parametrize(
    "shape",
    [
        {"layers": 0},
        {"heads": 3},  # does not divide hidden
        {"kv_heads": 5},  # does not divide heads
    ],
)
def test_impossible_shapes_are_refused(shape: dict[str, int]) -> None:
    base = {"layers": 2, "hidden": 64, "ffn": 256, "vocab": 100, "heads": 4, "kv_heads": 2}
    with pytest.raises(ValueError, match=r"at least 1|must divide"):
        Architecture(**{**base, **shape}, tied_embeddings=True)  # type: ignore[arg-type]
