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
