"""ZeRO++ across nodes: what its three options save on the link between nodes, and what hpZ's group spans.

The ZeRO++ paper's 3M to 0.75M between nodes (a quarter) holds where hpZ's group is a node's cards: its
backward gathers then stay on NVLink. A group wider than a node gathers between nodes too, and saves less;
the ratio here is worked from the bytes (`wire.link_bytes`), not taken from the paper.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

from app.domain.run import Run
from app.domain.stages import Stage
from app.domain.wire import link_bytes


def _between(run: Run) -> int:
    return sum(link.between for link in link_bytes(Stage.ZERO3, run, run.transfers(Stage.ZERO3)))


def zeropp_between_ratio(run: Run) -> Fraction | None:
    """One card's ZeRO-3 bytes between nodes with the run's ZeRO++ over those without; None on one node."""
    plain = replace(run, setup=replace(run.setup, hpz=1), qwz=False, qgz=False)
    before = _between(plain)
    return Fraction(_between(run), before) if before else None


def zeropp_said(stage: Stage, run: Run) -> str:
    """What ZeRO++ changes on the wire, in words, with the bytes between nodes it saves; blank where none applies.

    Where hpZ's group is wider than a node its gathers cross nodes, and the sentence says so and what would keep
    them inside: hpz = the cards of a node.
    """
    hpz, per_node = run.setup.hpz, run.gpus_per_node
    if stage is not Stage.ZERO3 or run.gpus == 1 or not (hpz > 1 or run.qwz or run.qgz):
        return ""
    parts = []
    wide = hpz > per_node
    if wide:
        parts.append(
            f"hpZ keeps a second copy of the weights split across {hpz:,} cards in {hpz // per_node:,} nodes, wider "
            "than a node, so the backward's gathers cross nodes too"
        )
    elif hpz > 1:
        parts.append(
            f"hpZ keeps a second copy of the weights split across {hpz:,} cards, so the backward's gathers stay "
            "inside the node"
        )
    if run.qwz:
        parts.append("qwZ gathers the weights in int8")
    if run.qgz:
        parts.append("qgZ reduce-scatters the gradients in int4")
    said = "ZeRO++: " + "; ".join(parts) + "."
    ratio = zeropp_between_ratio(run)
    if ratio is None:
        return said
    # Three figures: 7/12 is 0.583, a quarter 0.25.
    said += f" Between nodes each card sends {float(ratio):.3g} of ZeRO-3's bytes"
    if wide:
        said += (
            f", not the ZeRO++ paper's 0.25, which needs hpZ within a node: hpz={per_node:,}, a node's cards, keeps "
            "the backward's gathers on NVLink"
        )
    return said + "."
