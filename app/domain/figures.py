"""The report's value types: what one stage of a run comes to, as every page, answer and table prints it.

Computed in `sizing` (`stage_report`) and `host` (`host_report`), gathered per request in `report`
(`RunReport`); the views read these and compute nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from fractions import Fraction

from app.domain.communication import Transfer
from app.domain.cut_wire import NO_CUT_WIRE, CutWire
from app.domain.overheads import OverheadItem
from app.domain.recipes import Band
from app.domain.stages import Stage
from app.domain.terms import AT_REST, Moment, Place, TermKind
from app.domain.wire import NO_TIME, LinkBytes, StepTime


class AnySize(Enum):
    """The largest model that fits where there is none: nothing on the card grows with the weights."""

    ANY = "any size"


ANY_SIZE = AnySize.ANY
"""Every band that grows with the weights is offloaded and no layer is known: a model of any size fits."""


@dataclass(frozen=True)
class LayerExtra:
    """What a card holds beyond its state while it works on one layer: each kind's bytes, in the kinds' order.

    Built with `held`; a kind held in hand that is new is carried like the rest, and drawn from its kind.
    """

    parts: tuple[tuple[TermKind, int], ...] = ()
    """Each kind held and its bytes, none of 0 bytes, in `TermKind`'s order."""

    @classmethod
    def held(cls, nbytes: Mapping[TermKind, int]) -> LayerExtra:
        """From each kind's bytes: those of 0 left out, in the kinds' order (so that equal holdings are equal)."""
        return cls(tuple((kind, nbytes[kind]) for kind in TermKind if nbytes.get(kind, 0)))

    def of(self, kind: TermKind) -> int:
        """The bytes of one kind held; 0 where none."""
        return next((n for k, n in self.parts if k is kind), 0)

    @property
    def gathered(self) -> int:
        """The layer's whole weights, assembled from their owners (ZeRO-3), or FSDP2's kept gathered weights."""
        return self.of(TermKind.GATHERED)

    @property
    def computed(self) -> int:
        """The layer's whole gradients, computed here before they are reduce-scattered (ZeRO-2 and 3)."""
        return self.of(TermKind.COMPUTED)

    @property
    def activations(self) -> int:
        """The micro-batch's activations kept at that moment."""
        return self.of(TermKind.ACTIVATIONS)

    @property
    def total(self) -> int:
        """All of it together."""
        return sum(n for _, n in self.parts)


NOTHING_IN_HAND = LayerExtra()
"""Nothing held beyond the state: at rest, with no activations."""


@dataclass(frozen=True)
class HostReport:
    """One node's host under one stage, and one card's PCIe traffic."""

    cpu_bytes: int
    """CPU RAM the node's processes keep for training state, pinned memory included."""
    pinned_bytes: int
    """Of which page-locked: the offloaded state with `pin_memory`, and ZeRO-Infinity's swap buffers."""
    nvme_bytes: int
    """State on the node's NVMe drives."""
    pcie_bytes_per_step: int
    """Bytes one card's PCIe link carries in a step, both ways: apart from the traffic between cards."""
    gradients_down: int
    weights_up: int
    weights_fetched: bool
    """Whether the weights' slices live on the host, so that every gather fetches them over PCIe."""
    cpu_fits: bool | None
    """The CPU RAM against `host_memory`; None without it."""
    nvme_fits: bool | None
    """The NVMe bytes against `nvme_space`; None without it or with nothing on NVMe."""
    cpu_building: bool | None = None
    """With DeepSpeed's rule, whether its CPU figure is the processes building the model (else the
    offloaded state); None where the figure is not DeepSpeed's rule."""

    @property
    def fits(self) -> bool | None:
        """The host's verdict: None when nothing is known."""
        verdicts = [v for v in (self.cpu_fits, self.nvme_fits) if v is not None]
        return all(verdicts) if verdicts else None


@dataclass(frozen=True)
class TermBytes:
    """One term a card keeps all through the step, and its bytes on one card at rest."""

    kind: TermKind
    place: Place
    nbytes: int

    @property
    def band(self) -> Band | None:
        """The band of model state it is; None for a term that is no band (DeepSpeed's fp32 gradients)."""
        return self.kind.band


@dataclass(frozen=True)
class StageReport:
    """One stage of one run."""

    stage: Stage
    bytes_per_weight: Fraction
    """What one card keeps per weight it keeps state for, padding included: per_gpu_bytes / params (with the
    model cut, per weight of its stage's part ÷ tp)."""
    per_gpu_bytes: int
    communication_p: Fraction
    communication_bytes: int
    peak_bytes: int
    """The whole GPU peak: model states, the layer in hand and activations at the highest moment."""
    state_peak_bytes: int
    """Model states and the layer in hand at their own highest moment, as the ZeRO paper counts."""
    activation_bytes: int
    """Activations at the moment of `peak_bytes`."""
    overheads: tuple[OverheadItem, ...]
    """The overheads at that moment, counted in `peak_bytes` only with `overheads=1`."""
    overhead_bytes: int
    """Those counted: all of them, or 0."""
    fits: bool | None
    headroom_bytes: int | None
    """The capacity less `peak_bytes`, activations and counted overheads included: what is left over, negative
    when over; None without a capacity."""
    max_params_that_fit: int | AnySize | None
    """None without a capacity, and when not even a model of one largest layer fits; ANY_SIZE when any size does."""
    max_batch_that_fits: int | None
    """None without a capacity or activations, and when not even an empty micro-batch fits."""
    host: HostReport
    """Each node's host, and each card's PCIe traffic."""
    differences: tuple[str, ...] = ()
    """How the run's accounting and placement count this stage differently from the paper, a sentence each."""
    peak_moment: Moment = AT_REST
    """The highest moment of the step, where the peak, the bars and the verdict look."""
    extra: LayerExtra = NOTHING_IN_HAND
    """What a card holds beyond its state at that moment: gathered, computed and activations."""
    terms: tuple[TermBytes, ...] = ()
    """The card's terms that stay all through the step, each with its bytes at rest, wherever it lives."""
    transfers: tuple[Transfer, ...] = ()
    """The collectives of one step, behind `communication_p` and `communication_bytes`."""
    links: tuple[LinkBytes, ...] = ()
    """The same collectives, each with one card's bytes inside its node and between nodes (`wire`)."""
    time: StepTime = NO_TIME
    """The time those bytes take on their links, and the step's compute time (`wire.step_time`)."""
    pipeline_stage: int = 0
    """The pipeline stage (0-based) of the most loaded card, whose figures these are: 0 without a pipeline."""
    cut: CutWire = NO_CUT_WIRE
    """The model cut's own traffic by link (tensor, pipeline, context parallelism), its time and the bubble."""
    card_params: int = 0
    """The weights the most loaded card keeps state for, before ZeRO shards them: the model's, or with the
    model cut its stage's ÷ tp (its routed experts ÷ ep × etp)."""
    expert_params: int = 0
    """Of those, its routed experts' weights, whose state ZeRO shards over the expert-data-parallel group."""

    @property
    def inside_bytes(self) -> int:
        """Bytes one card sends over the link inside its node in a step."""
        return sum(link.inside for link in self.links)

    @property
    def between_bytes(self) -> int:
        """Bytes one card sends between nodes in a step."""
        return sum(link.between for link in self.links)

    @property
    def on_gpu(self) -> tuple[TermBytes, ...]:
        """The terms on the card's GPU (not offloaded), with bytes."""
        return tuple(t for t in self.terms if t.place is Place.GPU and t.nbytes)

    @property
    def band_places(self) -> dict[Band, Place]:
        """Where each band of model state lives: on the card, or offloaded to its host."""
        return {t.band: t.place for t in self.terms if t.band is not None}

    @property
    def on_host(self) -> frozenset[Band]:
        """The bands a card's host keeps for it: none without offload."""
        return frozenset(band for band, place in self.band_places.items() if place is not Place.GPU)

    @property
    def rest_bytes(self) -> int:
        """What a card keeps all through the step: its state at rest, and the overheads when counted."""
        return self.per_gpu_bytes + self.overhead_bytes

    @property
    def live_bytes(self) -> int:
        """What a card holds at the peak's moment, the overheads when counted: the peak, drawn part by part."""
        return self.rest_bytes + self.extra.total
