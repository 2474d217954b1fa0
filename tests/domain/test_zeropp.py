"""ZeRO++'s sentence: what hpZ's group spans, and the bytes between nodes it saves, worked from the bytes."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.domain.accounting import Setup
from app.domain.run import Run
from app.domain.stages import Stage
from app.domain.zeropp import zeropp_said


def _zeropp(gpus: int, nodes: int, hpz: int) -> Run:
    return replace(Run(gpus=gpus, nodes=nodes), setup=Setup(hpz=hpz), qwz=True, qgz=True)


# The ratios are test_wire's, by hand: 7/12 = 0.583 where hpZ spans 2 or 3 nodes, 17/36 = 0.472 where it spans
# 2 nodes of 4 among 4, a quarter where it is a node's cards.
@pytest.mark.parametrize(
    ("gpus", "nodes", "hpz", "said", "unsaid"),
    [
        (
            16, 2, 16,
            "hpZ keeps a second copy of the weights split across 16 cards in 2 nodes, wider than a node, so the "
            "backward's gathers cross nodes too; qwZ gathers the weights in int8; qgZ reduce-scatters the gradients "
            "in int4. Between nodes each card sends 0.583 of ZeRO-3's bytes, not the ZeRO++ paper's 0.25, which "
            "needs hpZ within a node: hpz=8, a node's cards, keeps the backward's gathers on NVLink.",
            "stay inside the node",
        ),
        (16, 4, 8, "split across 8 cards in 2 nodes, wider than a node", "stay inside the node"),
        (16, 4, 8, "sends 0.472 of ZeRO-3's bytes, not the ZeRO++ paper's 0.25, which needs hpZ within a node: "
                   "hpz=4", ""),
        (24, 3, 24, "split across 24 cards in 3 nodes, wider than a node", "stay inside the node"),
        (24, 3, 24, "sends 0.583 of ZeRO-3's bytes, not the ZeRO++ paper's 0.25", ""),
        (
            16, 2, 8,
            "hpZ keeps a second copy of the weights split across 8 cards, so the backward's gathers stay inside the "
            "node; qwZ gathers the weights in int8; qgZ reduce-scatters the gradients in int4. Between nodes each "
            "card sends 0.25 of ZeRO-3's bytes.",
            "cross nodes",
        ),
        (8, 1, 8, "the backward's gathers stay inside the node; qwZ", "Between nodes"),  # one node: nothing between
    ],
)  # fmt: skip
def test_zeropp_says_where_hpz_gathers_and_what_it_saves_between_nodes(
    gpus: int, nodes: int, hpz: int, said: str, unsaid: str
) -> None:
    words = zeropp_said(Stage.ZERO3, _zeropp(gpus, nodes, hpz))
    assert said in words
    assert not unsaid or unsaid not in words


def test_zeropp_is_zero3s_alone() -> None:
    run = _zeropp(16, 2, 8)
    assert [zeropp_said(stage, run) for stage in (Stage.DP, Stage.ZERO1, Stage.ZERO2)] == ["", "", ""]
    assert zeropp_said(Stage.ZERO3, Run(gpus=16, nodes=2)) == ""
