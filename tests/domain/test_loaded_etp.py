"""The experts' own tensor-parallel degree (etp) on a cut card: DeepSpeed's largest module, and the activations.

Each figure against a hand calculation written here. Mixtral 8x7B: h = 4,096, an expert's matrices 4,096 × 14,336,
32 query heads of 128 (the query projection 4,096 × 4,096), 8 experts, top 2.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.domain.architecture import ModelName
from app.domain.presets import MIXTRAL_8X7B
from app.domain.scenario import Inputs, resolve

EXPERT_MATRIX = 4096 * 14336  # 58,720,256
QUERY = 4096 * 4096  # 16,777,216


def _block(**query: Any) -> Any:
    """The first pipeline stage's card's first block, as that card keeps it."""
    run = resolve(Inputs(model=ModelName.MIXTRAL_8X7B, gpus=16, nodes=2, batch=1, seq=4096, **query)).run
    return next(layer for layer in run.cards[0].layers if layer.block is not None)


def test_the_modules_apart() -> None:
    assert (MIXTRAL_8X7B.expert_module, MIXTRAL_8X7B.outside_module) == (EXPERT_MATRIX, QUERY)
    assert MIXTRAL_8X7B.block_module == EXPERT_MATRIX


@pytest.mark.parametrize(
    ("query", "module"),
    [
        # etp as tp: the expert's matrix ÷ 2 = 29,360,128 (the query ÷ 2 is 8,388,608).
        ({"tp": 2, "ep": 4}, EXPERT_MATRIX // 2),
        # tp = 2, etp = 1: each expert whole on its card, 58,720,256 (÷ tp would say 29,360,128).
        ({"tp": 2, "ep": 8, "etp": 1}, EXPERT_MATRIX),
        # tp = 1, etp = 2: the expert ÷ 2 = 29,360,128, above the whole query projection's 16,777,216.
        ({"ep": 4, "etp": 2}, EXPERT_MATRIX // 2),
        # ep = 1: everything ÷ tp, as before.
        ({"tp": 4}, EXPERT_MATRIX // 4),
    ],
)
def test_deepspeeds_largest_module_on_a_card_is_an_experts_matrix_over_etp(query: dict[str, int], module: int) -> None:
    assert _block(**query).module == module


def test_the_experts_inner_activations_on_a_card_do_not_depend_on_etp() -> None:
    # Megatron-LM asks for sequence parallelism with MoE and tp > 1 ("When using MoE and tensor parallelism,
    # sequence parallelism must be used"), so a card's tokens are sb/tp. The alltoall dispatcher sends them to
    # their experts over ep and all-gathers them over the experts' tp group: a card's experts take
    # k · sb/tp · etp rows (even routing), each at width fe/etp. Their SwiGLU keeps 4 × 2 B × k · sb · etp/tp ×
    # fe/etp = 8k · sb · fe / tp: ÷ tp whatever etp. At s = 4,096, k = 2, fe = 14,336, tp = 2: 469,762,048 B,
    # the same with etp = 1 and etp = 2, so the block's figure on the card is the same.
    assert 8 * 2 * 4096 * 14336 // 2 == 469_762_048
    assert _block(tp=2, sp=True, ep=4, etp=1).kept == _block(tp=2, sp=True, ep=4).kept
