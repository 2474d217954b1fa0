"""What each node's host keeps for its cards, and what crosses each card's PCIe link in a step.

The host's figures are per node: its cards' offloaded state in CPU RAM (pinned or not) and on NVMe.
DeepSpeed's accounting takes its estimators' CPU rule instead (`deepspeed.cpu_bytes_per_node`),
which also counts building the model and a buffer factor. PCIe is per card: the gradients' slice
goes down to the host after the backward, the host updates it, and the weights' slice comes back up;
with the weights offloaded, each card fetches its slice for every gather instead, twice a step.
"""

from __future__ import annotations

import math

from app.domain import deepspeed
from app.domain.accounting import Accounting
from app.domain.figures import HostReport
from app.domain.placement import Home
from app.domain.recipes import Band
from app.domain.run import Run
from app.domain.stages import Stage
from app.domain.state_bytes import per_gpu_bytes
from app.domain.terms import Place, shard_weights


def _placed(stage: Stage, run: Run, place: Place) -> int:
    card = run.heaviest
    experts = run.experts_of(card)
    return per_gpu_bytes(stage, card.params, run.shards, run.recipe, card.frozen, run.setup, place, experts)


def _pcie(stage: Stage, run: Run) -> tuple[int, int]:
    """Gradients down and weights up over one card's link in a step."""
    moved = run.on_host(stage)
    if Band.MASTER not in moved:
        return 0, 0
    fsdp = run.setup.accounting is Accounting.FSDP2
    by_band = {t.band: t.nbytes for t in run.terms(stage) if t.band is not None}
    gradient = by_band[Band.GRADIENTS] if fsdp else run.recipe.nbytes(Band.GRADIENTS)
    card = run.heaviest
    experts = run.experts_of(card)
    # The routed experts' slice is over their own group (`terms.Experts`); with none apart, the card's one slice.
    own = experts.weights - experts.frozen
    trains = shard_weights(card.params - card.frozen - own, run.shards) + shard_weights(own, experts.group)
    slice_ = shard_weights(card.params - experts.weights, run.shards) + shard_weights(experts.weights, experts.group)
    # Whole bytes, rounded up, as `terms.term_bytes` counts a band's on the card.
    down = math.ceil(trains * gradient)
    if Band.WEIGHTS in moved:  # each gather, forward and backward, starts from the slice on the host
        # FSDP2's ZeRO-2 keeps what it gathered from the forward to the backward: fetched once.
        gathers = 1 if fsdp and stage is Stage.ZERO2 else 2
        return down, math.ceil(gathers * slice_ * by_band[Band.WEIGHTS])
    return down, math.ceil(trains * by_band[Band.WEIGHTS])


def host_report(stage: Stage, run: Run) -> HostReport:
    """The host of each node, which are all alike, under `stage`."""
    per_node = run.gpus_per_node
    pinned = _placed(stage, run, Place.CPU_PINNED) * per_node
    cpu = pinned + _placed(stage, run, Place.CPU_PAGEABLE) * per_node
    nvme = _placed(stage, run, Place.NVME) * per_node
    placement = run.setup.placement
    building = None
    if run.setup.accounting is Accounting.DEEPSPEED:
        if placement.offloads and placement.home(stage) is Home.NVME:
            weights_on_nvme = run.band_places(stage)[Band.WEIGHTS] is Place.NVME
            buffers = deepspeed.nvme_swap_buffers(
                shard_weights(run.params, run.shards), weights_on_nvme, run.recipe.nbytes(Band.WEIGHTS)
            )
            pinned += buffers * per_node
            cpu = pinned
        else:
            largest = run.deepspeed_layer or run.params  # its estimators' largest layer: the largest module
            cpu, building = deepspeed.cpu_rule(
                stage, run.params, largest, run.nodes, per_node, placement, run.zero_init
            )
    down, up = _pcie(stage, run)
    fetched = Band.WEIGHTS in run.on_host(stage)
    return HostReport(
        cpu_bytes=cpu,
        pinned_bytes=pinned,
        nvme_bytes=nvme,
        pcie_bytes_per_step=down + up,
        gradients_down=down,
        weights_up=up,
        weights_fetched=fetched,
        cpu_fits=None if run.host_memory is None else cpu <= run.host_memory,
        nvme_fits=None if run.nvme_space is None or not nvme else nvme <= run.nvme_space,
        cpu_building=building,
    )
