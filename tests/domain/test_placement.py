"""Where each band lives under each stage and offload, and how a cluster splits into nodes."""

from __future__ import annotations

import re

import pytest

from app.domain.placement import Cluster, Device, Home, Offload, Placement, cluster_of
from app.domain.recipes import Band
from app.domain.stages import Stage

W, G, M, A = Band.WEIGHTS, Band.GRADIENTS, Band.MASTER, Band.MOMENTS

# DeepSpeed's documentation: offload_optimizer is valid from ZeRO-1, offload_param only at ZeRO-3, and a
# card's gradient slice goes down with the optimizer where the stage splits the gradients.
MOVED = [
    (Offload.NONE, Stage.ZERO3, set()),
    (Offload.OPTIMIZER, Stage.DP, set()),
    (Offload.OPTIMIZER, Stage.ZERO1, {M, A}),
    (Offload.OPTIMIZER, Stage.ZERO2, {G, M, A}),
    (Offload.OPTIMIZER, Stage.ZERO3, {G, M, A}),
    (Offload.OPTIMIZER_PARAMS, Stage.ZERO2, {G, M, A}),
    (Offload.OPTIMIZER_PARAMS, Stage.ZERO3, {W, G, M, A}),
    (Offload.NVME, Stage.ZERO1, {M, A}),
    (Offload.NVME, Stage.ZERO3, {W, G, M, A}),
]


@pytest.mark.parametrize(("offload", "stage", "moved"), MOVED)
def test_what_leaves_the_card(offload: Offload, stage: Stage, moved: set[Band]) -> None:
    assert Placement(offload).moved(stage) == moved


@pytest.mark.parametrize(
    ("placement", "stage", "home"),
    [
        (Placement(Offload.NVME), Stage.ZERO3, Home.NVME),
        (Placement(Offload.NVME), Stage.ZERO2, Home.CPU),
        (Placement(Offload.OPTIMIZER, Device.NVME), Stage.ZERO3, Home.NVME),
        (Placement(Offload.OPTIMIZER), Stage.ZERO3, Home.CPU),
    ],
)
def test_nvme_needs_zero_3(placement: Placement, stage: Stage, home: Home) -> None:
    assert placement.home(stage) is home
    assert placement.band_home(stage, Band.MASTER) is home
    assert placement.band_home(Stage.DP, Band.MASTER) is Home.GPU


@pytest.mark.parametrize(
    ("offload", "stage", "caveat"),
    [
        (Offload.NONE, Stage.DP, None),
        (Offload.OPTIMIZER, Stage.DP, "Data parallelism offloads nothing"),
        (Offload.OPTIMIZER_PARAMS, Stage.ZERO1, "offloading them needs ZeRO-3"),
        (Offload.NVME, Stage.ZERO2, "keeps its weights on the card"),
        (Offload.OPTIMIZER_PARAMS, Stage.ZERO3, None),
    ],
)
def test_a_stage_that_does_less_says_so(offload: Offload, stage: Stage, caveat: str | None) -> None:
    said = Placement(offload).caveat(stage)
    assert said == caveat if caveat is None else caveat in (said or "")


@pytest.mark.parametrize(
    ("gpus", "nodes", "per_node", "cluster"),
    [
        (8, None, None, Cluster(1, 8)),
        (64, None, None, Cluster(8, 8)),
        (12, None, None, Cluster(1, 12)),
        (16, 4, None, Cluster(4, 4)),
        (16, None, 2, Cluster(8, 2)),
        (16, 2, 8, Cluster(2, 8)),
    ],
)
def test_nodes_of_8_by_default(gpus: int, nodes: int | None, per_node: int | None, cluster: Cluster) -> None:
    assert cluster_of(gpus, nodes, per_node) == cluster
    assert cluster.gpus == gpus


@pytest.mark.parametrize(
    ("gpus", "nodes", "per_node", "message"),
    [
        (16, 3, None, "16 GPUs do not split evenly across 3 nodes."),
        (16, None, 3, "16 GPUs are not a whole number of nodes of 3."),
        (16, 2, 4, "2 nodes of 4 GPUs are 8 GPUs, not 16."),
    ],
)
def test_numbers_that_disagree_are_refused(gpus: int, nodes: int | None, per_node: int | None, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cluster_of(gpus, nodes, per_node)


# (placement, stage, the caveat word for word)
CAVEATS = [
    (
        Placement(Offload.OPTIMIZER),
        Stage.DP,
        "Data parallelism offloads nothing: DeepSpeed's offload needs ZeRO-1 or above.",
    ),
    (
        Placement(Offload.OPTIMIZER_PARAMS),
        Stage.ZERO1,
        "ZeRO-1 keeps its weights on the card: offloading them needs ZeRO-3.",
    ),
    (
        Placement(Offload.OPTIMIZER, Device.NVME),
        Stage.ZERO2,
        "ZeRO-2 offloads to the CPU: NVMe needs ZeRO-3 (ZeRO-Infinity).",
    ),
    (Placement(Offload.OPTIMIZER, Device.NVME), Stage.ZERO3, None),
    (Placement(Offload.OPTIMIZER), Stage.ZERO2, None),
]


@pytest.mark.parametrize(("placement", "stage", "caveat"), CAVEATS)
def test_each_caveat_word_for_word(placement: Placement, stage: Stage, caveat: str | None) -> None:
    assert placement.caveat(stage) == caveat


@pytest.mark.parametrize(("nodes", "per_node"), [(0, 8), (1, 0)])
def test_a_cluster_has_a_node_of_a_card(nodes: int, per_node: int) -> None:
    with pytest.raises(ValueError, match=r"^a cluster has at least one node of at least one GPU$"):
        Cluster(nodes, per_node)


@pytest.mark.parametrize(
    ("gpus", "nodes", "per_node", "message"),
    [
        (8, 1, 4, "1 node of 4 GPUs is 4 GPUs, not 8."),
        (2, 1, 1, "1 node of 1 GPU is 1 GPU, not 2."),
        (24, 2, 4, "2 nodes of 4 GPUs are 8 GPUs, not 24."),
    ],
)
def test_nodes_and_cards_that_disagree_are_said_in_words(gpus: int, nodes: int, per_node: int, message: str) -> None:
    with pytest.raises(ValueError, match=rf"^{re.escape(message)}$"):
        cluster_of(gpus, nodes=nodes, gpus_per_node=per_node)


@pytest.mark.parametrize(
    ("gpus", "nodes", "per_node", "expected"),
    [
        (12, 3, 4, (3, 4)),  # both given: 3 nodes of 4, not of the default 8
        (16, None, 4, (4, 4)),
        (16, 4, None, (4, 4)),
        (16, None, None, (2, 8)),
    ],
)
def test_a_cluster_counts_whole_nodes_and_cards(
    gpus: int, nodes: int | None, per_node: int | None, expected: tuple[int, int]
) -> None:
    cluster = cluster_of(gpus, nodes, per_node)
    # Whole numbers, as the page prints them ("2 nodes", not "2.0 nodes").
    assert (f"{cluster.nodes}", f"{cluster.gpus_per_node}") == tuple(map(str, expected))
