"""Cards people size runs against.

Marketed sizes: HBM and GDDR capacities are powers of two per stack, so an '80 GB' H100 has
80 GiB of memory.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Card:
    """A GPU model and its memory."""

    name: str
    gib: int

    @property
    def nbytes(self) -> int:
        """Memory in bytes."""
        return self.gib * 2**30

    @property
    def entry(self) -> str:
        """How the size is written in the capacity field."""
        return f"{self.gib}GiB"


CARDS: tuple[Card, ...] = (
    Card("RTX 4090", 24),
    Card("V100", 32),
    Card("A100 40GB", 40),
    Card("A100 80GB", 80),
    Card("H100", 80),
    Card("H200", 141),
    Card("MI300X", 192),
)


@dataclass(frozen=True)
class Fabric:
    """What the time on the wire and the compute time are estimated with: peak figures, not measurements.

    Each default is one H100 SXM's in a DGX H100 (docs/wire.md gives the sources): NVLink 4 inside a
    node, one 400 Gb/s InfiniBand NDR port per GPU between nodes, the dense bf16 peak, and the MFU
    Llama 3's pre-training reports.
    """

    nvlink: int = 450
    """GB/s one card sends over the link inside a node: H100's NVLink 4, 900 GB/s both ways, halved."""
    network: int = 400
    """Gb/s one card sends between nodes: one ConnectX-7 InfiniBand NDR port per GPU."""
    tflops: int = 989
    """The card's dense bf16 peak, TFLOP/s: H100 SXM's (1,979 is with sparsity)."""
    mfu: int = 40
    """Percent of that peak the step's matrix multiplies reach: Llama 3 reports 38-43% on H100s."""

    def __post_init__(self) -> None:
        if min(self.nvlink, self.network, self.tflops) < 1:
            raise ValueError("a link moves at least 1 GB/s (1 Gb/s between nodes); a card computes at least 1 TFLOP/s")
        if not 1 <= self.mfu <= 100:
            raise ValueError("the MFU is a percent of the peak, 1-100")

    @property
    def nvlink_bytes_per_s(self) -> int:
        """Bytes per second inside a node."""
        return self.nvlink * 10**9

    @property
    def network_bytes_per_s(self) -> int:
        """Bytes per second between nodes: 8 bits a byte."""
        return self.network * 10**9 // 8

    @property
    def flops(self) -> int:
        """FLOP/s the step's matrix multiplies reach: the peak times the MFU."""
        return self.tflops * 10**12 * self.mfu // 100


H100_FABRIC = Fabric()
"""The defaults: an H100 SXM in a DGX H100 (docs/wire.md)."""
