from __future__ import annotations

import pytest

from app.domain.architecture import ModelName
from app.domain.eighths import COLUMNS, model_columns, pieces
from app.domain.presets import PRESETS


def test_llama_70b_in_eighths() -> None:
    preset = PRESETS[ModelName("llama-3-70b")]
    columns = model_columns(preset.params, preset.architecture, preset.largest_layer)
    assert len(columns) == COLUMNS
    assert columns[0].label == "the embedding and layers 1–10 of 80"
    assert columns[4].label == "layers 41–51 of 80"
    assert columns[7].label == "layers 71–80 of 80 and the output head"
    # The embedding table (128,256 × 8,192) sits in the first and the untied head in the last column;
    # the middle columns' largest layer is one block.
    assert columns[0].largest_layer == columns[7].largest_layer == 128_256 * 8_192
    assert {c.largest_layer for c in columns[1:7]} == {preset.architecture.block_params if preset.architecture else 0}


@pytest.mark.parametrize("name", [m for m in ModelName if m is not ModelName.CUSTOM])
def test_the_columns_largest_layer_is_the_models(name: ModelName) -> None:
    preset = PRESETS[name]
    columns = model_columns(preset.params, preset.architecture, preset.largest_layer)
    assert max((c.largest_layer or 0) for c in columns) == (preset.largest_layer or 0)


def test_pieces_add_up_to_the_model() -> None:
    for preset in PRESETS.values():
        if preset.architecture is not None:
            assert sum(piece.params for piece in pieces(preset.architecture)) == preset.params


def test_a_bare_count_has_eighths_and_a_layer_entered_by_hand_applies_to_each() -> None:
    columns = model_columns(30 * 10**9, None, 2 * 10**9)
    assert [c.label for c in columns][:2] == ["the model's first eighth", "the model's second eighth"]
    assert columns[-1].label == "the model's last eighth"
    assert {c.largest_layer for c in columns} == {2 * 10**9}
    assert {c.largest_layer for c in model_columns(30 * 10**9, None, None)} == {None}
