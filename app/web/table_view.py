"""The comparison table, one row per stage, and ZeRO-3's limit in words."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.domain.report import ANY_SIZE, MAX_BATCH, UNKNOWN_LAYER_RULE, Accounting, Run, StageReport
from app.domain.scenario import Scenario
from app.domain.stages import Stage
from app.domain.units import LARGEST_COUNT, ByteUnit, p_units, per_weight
from app.domain.units import count_label as params_label
from app.web.links import LinkFor, switch_href
from app.web.parts import shown
from app.web.wire_view import wire_view


@dataclass(frozen=True)
class TableRow:
    """One row of the comparison table."""

    stage: Stage
    title: str
    href: str
    bytes_per_weight: str
    per_gpu: str
    peak: str
    activations: str | None
    """At the peak; None when none are counted (a bare count), so the table leaves the column out."""
    communication: str
    communication_bytes: str
    breakdown: tuple[str, ...]
    fits: bool | None
    headroom: str | None
    max_model: str | None
    max_batch: str | None
    overheads: str
    """What the overheads come to, counted in the peak or not."""
    current: bool
    host: str | None = None
    """CPU RAM (and NVMe) of each node, with offload or DeepSpeed's accounting; None: the column is left out."""
    pcie: str | None = None
    """Each card's PCIe bytes per step, with offload; None when nothing crosses it."""
    by_link: str = ""
    """Each card's bytes a step inside its node, and between nodes (`wire_view`)."""
    time: str = ""
    """The time on the wire a step, against the compute's."""
    cuts: tuple[str, ...] = ()
    """The model cut's traffic by link, its bubble and the step (`wire_view.cut_table`); none without a cut."""
    fit_css: str = field(init=False, repr=False, compare=False)
    fit_words: str = field(init=False, repr=False, compare=False)
    row_class: str | None = field(init=False, repr=False, compare=False)
    row_current: str | None = field(init=False, repr=False, compare=False)
    link_current: str | None = field(init=False, repr=False, compare=False)
    shown_marks: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """"(shown)" beside the current row's arrangement."""
    pcies: tuple[str, ...] = field(init=False, repr=False, compare=False)
    hosts: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        current = self.current
        derived = {
            "fit_css": f"verdict {'fits' if self.fits else 'over'}",
            "fit_words": "✓ fits" if self.fits else "✗ does not fit",
            "row_class": "current" if current else None,
            "row_current": "true" if current else None,
            "link_current": "page" if current else None,
            "shown_marks": ("(shown)",) if current else (),
            "pcies": () if self.pcie is None else (self.pcie,),
            "hosts": () if self.host is None else (self.host,),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True)
class Boundary:
    """ZeRO-3's limit: one assembled layer must fit on one card."""

    largest_layer: str | None
    source: str
    assembled: str | None
    exceeds: bool | None
    verdict: str
    css: str = field(init=False, repr=False, compare=False)
    layers: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The largest layer, where it is known."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", "boundary exceeds" if self.exceeds else "boundary")
        object.__setattr__(self, "layers", shown(self.largest_layer))


def _tp_part(run: Run) -> str:
    """What of the largest layer a card assembles: its 1/tp (nothing said without), or with experts its own part.

    A mixture of experts' block on a card cut by ep is its non-routed weights ÷ tp and its experts ÷ (ep × etp)
    (`Run.largest_layer_on_card`), not a fraction of the whole block.
    """
    cut, tp = run.cut, run.cut.tp
    if cut.ep * cut.expert_tp != tp and (on_card := run.largest_layer_on_card) is not None:
        return (
            f", of which a card of tp={tp:,}, ep={cut.ep:,}, etp={cut.expert_tp:,} assembles {on_card:,} "
            "(its experts ÷ ep × etp, the rest ÷ tp)"
        )
    return f", of which a card of tp={tp:,} assembles 1/{tp:,}" if tp > 1 else ""


def table_rows(
    current: Stage | None, link: LinkFor, rows: tuple[StageReport, ...], scenario: Scenario
) -> tuple[TableRow, ...]:
    """The comparison table, one row per stage."""
    units, counted = scenario.units, scenario.run.activations is not None
    hosted = scenario.run.setup.placement.offloads or scenario.run.setup.accounting is Accounting.DEEPSPEED
    return tuple(
        TableRow(
            stage=r.stage,
            title=r.stage.info.title,
            href=switch_href(link, r.stage, current),
            bytes_per_weight=per_weight(r.bytes_per_weight),
            per_gpu=units.show(r.per_gpu_bytes),
            peak=units.show(r.peak_bytes),
            activations=units.show(r.activation_bytes) if counted else None,
            communication=p_units(r.communication_p),
            communication_bytes=units.show(r.communication_bytes),
            breakdown=tuple(t.description for t in r.transfers) or ("nothing: one card",),
            fits=r.fits,
            headroom=None if r.headroom_bytes is None else _headroom(r.headroom_bytes, units),
            max_model=_max_model(r),
            max_batch=_max_batch(r) if counted else None,
            overheads=units.show(sum(item.nbytes for item in r.overheads)),
            current=r.stage is current,
            host=_host(r, units) if hosted else None,
            pcie=units.show(r.host.pcie_bytes_per_step) if r.host.pcie_bytes_per_step else None,
            by_link=(wired := wire_view(scenario, r)).table_bytes,
            time=wired.table_time,
            cuts=wired.cut_table,
        )
        for r in rows
    )


def _host(row: StageReport, units: ByteUnit) -> str:
    """A node's CPU RAM, and its NVMe where there is some."""
    host = row.host
    # The NVMe's figure on a line of its own (a space that does not break keeps each figure whole).
    said = units.show(host.cpu_bytes) + (f" + {units.show(host.nvme_bytes)}\u00a0NVMe" if host.nvme_bytes else "")
    verdict = {True: " ✓ fits", False: " ✗ does not fit", None: ""}[host.fits]
    return said + verdict


def _max_model(row: StageReport) -> str | None:
    if row.fits is None:
        return None
    if row.max_params_that_fit is None:
        return (
            "none: one layer and this micro-batch's activations are too big"
            if row.activation_bytes
            else "none: one layer alone is too big"
        )
    if row.max_params_that_fit is ANY_SIZE:
        return "any size: nothing that grows with the weights stays on the card"
    if row.max_params_that_fit > LARGEST_COUNT:
        # More than the form reads: its largest count fits, and that is as far as it can say.
        return f"at least {params_label(_floor_significant(LARGEST_COUNT))} weights"
    # Rounded down, so the figure shown, entered as a model, still fits.
    return f"{params_label(_floor_significant(row.max_params_that_fit))} weights"


def _max_batch(row: StageReport) -> str | None:
    if row.fits is None and row.max_batch_that_fits is None:
        return None
    if row.max_batch_that_fits is None:
        return "none: the model states alone are too big"
    if row.max_batch_that_fits == MAX_BATCH:
        return f"at least {MAX_BATCH:,}"
    if row.max_batch_that_fits == 0:
        return "0: not one sequence"
    return f"{row.max_batch_that_fits:,} sequences" if row.max_batch_that_fits > 1 else "1 sequence"


def _floor_significant(count: int, digits: int = 3) -> int:
    """`count` cut (never rounded up) to its first `digits` significant digits."""
    step: int = 10 ** max(len(str(count)) - digits, 0)
    return count // step * step


def _headroom(headroom: int, units: ByteUnit) -> str:
    return f"{units.show(headroom)} left" if headroom >= 0 else f"{units.show(-headroom)} over"


def boundary(scenario: Scenario) -> Boundary:
    """ZeRO-3's limit for this run, in words."""
    run, units = scenario.run, scenario.units
    assembled = run.assembled_layer_bytes
    exceeds = scenario.report.layer_exceeds_card
    if assembled is None or run.largest_layer is None:
        verdict = UNKNOWN_LAYER_RULE
    elif exceeds is None:
        verdict = "Give the card's memory to check that one assembled layer fits."
    elif exceeds:
        verdict = (
            "One assembled layer alone is bigger than the card, so ZeRO cannot help: the layer itself "
            "must be split across cards, which is tensor parallelism."
        )
    elif (zero3 := scenario.report[Stage.ZERO3]).max_params_that_fit is None and zero3.activation_bytes:
        # The table's ZeRO-3 row says no model fits: the layer fits alone, not beside the activations.
        verdict = (
            "One assembled layer fits on the card alone, but not beside this micro-batch's activations "
            f"({units.show(zero3.activation_bytes)} at the peak): no model of any size fits under ZeRO-3 with them, "
            "as the table's ZeRO-3 row says. Fewer tokens a card, or recomputation, would leave the layer room."
        )
    elif run.gpus == 1:
        verdict = "One assembled layer fits on the card; with one card nothing is gathered, the whole model is there."
    else:
        verdict = "One assembled layer fits on a card, so ZeRO-3 can gather it."
    return Boundary(
        largest_layer=None if run.largest_layer is None else f"{run.largest_layer:,} weights{_tp_part(run)}",
        source=scenario.largest_layer_source,
        assembled=None if assembled is None else units.show(assembled),
        exceeds=exceeds,
        verdict=verdict,
    )
