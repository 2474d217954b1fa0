"""Where each band lives: on the card, in its host's RAM, or on the host's NVMe drive.

DeepSpeed's ZeRO-Offload moves the optimizer's state, and the update with it, to the CPU; ZeRO-3
can move the weights' slices there as well, and ZeRO-Infinity puts both on NVMe. What each stage
can offload follows DeepSpeed's configuration documentation: `offload_optimizer` is "valid for ZeRO
stages 1, 2 and 3", `offload_param` "only for ZeRO stage 3", and NVMe needs stage 3.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from app.domain.recipes import Band
from app.domain.stages import OPTIMIZER_STATE, Stage

DEFAULT_GPUS_PER_NODE = 8
"""An HGX or DGX machine: a cluster whose card count 8 divides is drawn as nodes of 8."""


class Offload(StrEnum):
    """What leaves the card."""

    NONE = "none"
    OPTIMIZER = "optimizer"
    """ZeRO-Offload: the master copy and the moments, with the update, and the gradients they need."""
    OPTIMIZER_PARAMS = "optimizer+params"
    """ZeRO-3's weights' slices as well."""
    NVME = "nvme"
    """ZeRO-Infinity: the optimizer and the weights' slices, on NVMe."""


class Device(StrEnum):
    """Where offloaded state goes."""

    CPU = "cpu"
    NVME = "nvme"


class Home(StrEnum):
    """Where a band lives under a stage."""

    GPU = "gpu"
    CPU = "cpu"
    NVME = "nvme"


@dataclass(frozen=True)
class Placement:
    """The offload settings of a run."""

    offload: Offload = Offload.NONE
    device: Device = Device.CPU
    """For `optimizer` and `optimizer+params`; `nvme` implies NVMe."""
    pin_memory: bool = True
    """Offloaded state on the CPU in page-locked memory, for fast copies (DeepSpeed's `pin_memory`)."""

    @property
    def offloads(self) -> bool:
        """Whether anything leaves the card at some stage."""
        return self.offload is not Offload.NONE

    @property
    def target(self) -> Device:
        """The device asked for."""
        return Device.NVME if self.offload is Offload.NVME else self.device

    def moved(self, stage: Stage) -> frozenset[Band]:
        """The bands that live off the card under `stage`: none at data parallelism."""
        if self.offload is Offload.NONE or stage is Stage.DP:
            return frozenset()
        moved = set(OPTIMIZER_STATE)
        if Band.GRADIENTS in stage.sharded:  # a card's gradient slice goes down to the update
            moved.add(Band.GRADIENTS)
        if self.offload is not Offload.OPTIMIZER and stage is Stage.ZERO3:
            moved.add(Band.WEIGHTS)
        return frozenset(moved)

    def home(self, stage: Stage) -> Home:
        """Where the moved bands of `stage` go: NVMe only under ZeRO-3 (ZeRO-Infinity), else the CPU."""
        return Home.NVME if self.target is Device.NVME and stage is Stage.ZERO3 else Home.CPU

    def band_home(self, stage: Stage, band: Band) -> Home:
        """Where one band lives under `stage`."""
        return self.home(stage) if band in self.moved(stage) else Home.GPU

    def caveat(self, stage: Stage) -> str | None:
        """Why this stage does less than was asked, in a sentence; None when it does it all."""
        title = stage.info.title
        if self.offload is Offload.NONE:
            return None
        if stage is Stage.DP:
            return "Data parallelism offloads nothing: DeepSpeed's offload needs ZeRO-1 or above."
        if stage is not Stage.ZERO3 and self.offload is not Offload.OPTIMIZER:
            return f"{title} keeps its weights on the card: offloading them needs ZeRO-3."
        if stage is not Stage.ZERO3 and self.target is Device.NVME:
            return f"{title} offloads to the CPU: NVMe needs ZeRO-3 (ZeRO-Infinity)."
        return None


NO_OFFLOAD = Placement()


@dataclass(frozen=True)
class Cluster:
    """The cards, by node: host memory and NVMe are per node."""

    nodes: int = 1
    gpus_per_node: int = DEFAULT_GPUS_PER_NODE

    def __post_init__(self) -> None:
        if self.nodes < 1 or self.gpus_per_node < 1:
            raise ValueError("a cluster has at least one node of at least one GPU")

    @property
    def gpus(self) -> int:
        """All the cards."""
        return self.nodes * self.gpus_per_node


def cluster_of(gpus: int, nodes: int | None = None, gpus_per_node: int | None = None) -> Cluster:
    """The nodes of a run of `gpus` cards: as given, else nodes of 8 where 8 divides, else one node.

    Raises ValueError, with a sentence for a person, when the numbers disagree.
    """
    if nodes is not None and gpus_per_node is not None:
        if nodes * gpus_per_node != gpus:
            made = f"{_count(nodes, 'node')} of {_count(gpus_per_node, 'GPU')} {'is' if nodes == 1 else 'are'}"
            raise ValueError(f"{made} {_count(nodes * gpus_per_node, 'GPU')}, not {gpus}.")
        return Cluster(nodes, gpus_per_node)
    if gpus_per_node is not None:
        if gpus % gpus_per_node:
            raise ValueError(f"{gpus} GPUs are not a whole number of nodes of {gpus_per_node}.")
        return Cluster(gpus // gpus_per_node, gpus_per_node)
    if nodes is not None:
        if gpus % nodes:
            raise ValueError(f"{gpus} GPUs do not split evenly across {nodes} nodes.")
        return Cluster(nodes, gpus // nodes)
    if gpus % DEFAULT_GPUS_PER_NODE == 0:
        return Cluster(gpus // DEFAULT_GPUS_PER_NODE, DEFAULT_GPUS_PER_NODE)
    return Cluster(1, gpus)


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
