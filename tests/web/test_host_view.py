"""app/web/host_view.py: the host's words under the headline, on the seed's run of 30B weights on 8 cards."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.domain.sizing import MEGATRON_ACTIVATIONS
from tests.conftest import one, text
from tests.web.helpers import run_page

# (query, what the host's words say): 12 B of optimizer state per weight of a card's slice is
# 12 × 30e9 / 8 B = 41.9 GiB a card, 335.3 GiB for 8; its slices of gradients and weights, 7.0 GiB each.
WORDS = [
    (
        "stage=zero1&offload=optimizer",
        [
            "Each card's host keeps 1.50 bytes per weight for it in the server's CPU memory: 41.9 GiB per card, "
            "335.3 GiB for the node of 8 GPUs, pinned.",
            "PCIe, each card per step: 7.0 GiB of gradients down to the host, 7.0 GiB of weights back up after "
            "the update. That is 14.0 GiB, apart from the traffic between cards.",
        ],
    ),
    (
        "stage=zero3&offload=optimizer%2Bparams&gpus=16&gpus_per_node=8&host_memory=300GB",
        [
            "Each card's host keeps 1.00 bytes per weight for it in the server's CPU memory: 27.9 GiB per card, "
            "223.5 GiB for each node of 8 GPUs, pinned. A node's 279.4 GiB of CPU RAM: fits, 55.9 GiB left.",
            "PCIe, each card per step: 3.5 GiB of gradients down to the host, 7.0 GiB of weights fetched for "
            "each gather, forward and backward. That is 10.5 GiB, apart from the traffic between cards.",
        ],
    ),
    (
        "stage=zero3&offload=nvme&pin_memory=0",
        [
            "Each card's host keeps 2.00 bytes per weight for it on the server's NVMe drive: 55.9 GiB per card, "
            "447.0 GiB for the node of 8 GPUs.",
            "PCIe, each card per step: 7.0 GiB of gradients down to the host, 14.0 GiB of weights fetched for "
            "each gather, forward and backward. That is 21.0 GiB, apart from the traffic between cards.",
        ],
    ),
    # A node with no NVMe (nvme_space=0) holds none of ZeRO-Infinity's 480e9 B = 447.0 GiB.
    (
        "stage=zero3&offload=nvme&pin_memory=0&nvme_space=0GB",
        [
            "Each card's host keeps 2.00 bytes per weight for it on the server's NVMe drive: 55.9 GiB per card, "
            "447.0 GiB for the node of 8 GPUs. Its 0 GiB of NVMe: over by 447.0 GiB.",
            "PCIe, each card per step: 7.0 GiB of gradients down to the host, 14.0 GiB of weights fetched for "
            "each gather, forward and backward. That is 21.0 GiB, apart from the traffic between cards.",
        ],
    ),
]


@pytest.mark.parametrize(("query", "said"), WORDS)
def test_the_host_is_said_in_words(client: TestClient, query: str, said: list[str]) -> None:
    words = one(run_page(client, query), "#host-words")
    assert [p.get_text(" ", strip=True) for p in words.select("p")] == said


def test_an_over_full_host_is_marked(client: TestClient) -> None:
    tree = run_page(client, "stage=zero1&offload=optimizer&host_memory=300GB")
    assert text(tree, "#host-words .verdict.over") == "A node's 279.4 GiB of CPU RAM: over by 55.9 GiB."


def test_deepspeeds_cpu_figure_is_its_estimators_and_each_difference_a_sentence(client: TestClient) -> None:
    tree = run_page(client, "stage=zero3&accounting=deepspeed")
    words = one(tree, "#host-words")
    # No offload, zero.Init: each of the node's 8 processes builds one layer of 3.75e9 weights in fp32,
    # × 1.5: 3.75e9 × 4 × 8 × 1.5 = 180e9 B. On each GPU, 18 B × 30e9 / 8 + 4 B × 3.75e9 = 82.5e9 B.
    assert text(words, "p") == (
        "DeepSpeed's estimator counts 76.8 GiB on each GPU and 167.6 GiB of CPU memory for the node of 8 GPUs: "
        "each of its processes building the model in fp32 before ZeRO splits it, times its buffer factor of 1.5."
    )
    assert [li.get_text(" ", strip=True) for li in words.select(".differences li")] == [
        "DeepSpeed keeps the gradients' fp32 copy for the update instead of the 2-byte one: +2 B per weight, sharded.",
        "DeepSpeed counts 4 B for each weight of the largest layer, its weights and gradients assembled, even on "
        "one card.",
    ]


def test_megatrons_page_says_its_count_and_each_difference(client: TestClient) -> None:
    # Llama 3 8B on 8 cards under Megatron-LM's distributed optimizer: (2 + 4) B + (4 + 8) B / 8 = 7.5 B a
    # weight, 7.5 × 8,030,261,248 B = 56.1 GiB, 7.5 / 18 = 41.7% of its data parallelism's.
    tree = run_page(client, "accounting=megatron&model=llama-3-8b&stage=zero1")
    assert text(tree, ".headline").startswith(
        "Each card keeps 7.50 bytes per weight: 56.1 GiB for a model of 8.03B weights, 41.7% of what data "
        "parallelism keeps."
    )
    assert [li.get_text(" ", strip=True) for li in one(tree, "#host-words").select(".differences li")] == [
        "Megatron-LM accumulates and reduces the gradients in an fp32 main_grad buffer: +2 B per weight, on every "
        "card.",
        "Megatron-LM's distributed optimizer splits only the master copy and the moments: 6 + 12/N B per weight. "
        "The weights' and main gradients' buffers stay whole on every card; the reduce-scatter and the all-gather "
        "write into them, with no buffer of a layer's own.",
        MEGATRON_ACTIVATIONS,
    ]
    # Its peak: 60,226,959,360 B of states and its own formula's 40,644,762,009.6 B of activations, rounded up
    # (docs/parallelism.md): 100,871,721,370 B = 93.9 GiB.
    assert {text(card, ".card-peak") for card in tree.select("#grid .card")} == {"Peak 93.9 GiB"}
    chosen = one(tree, "select[name=accounting] option[selected]")
    assert (chosen["value"], chosen.get_text(strip=True)) == ("megatron", "Megatron-LM's")


def test_the_paper_without_offload_has_no_host_words(client: TestClient) -> None:
    assert run_page(client, "stage=zero3").select("#host-words") == []
