"""The words beside the host strips: what each node's host keeps, its verdict, PCIe, and how the count differs."""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from app.domain.report import Accounting, HostReport, StageReport
from app.domain.scenario import Scenario
from app.domain.stages import Stage
from app.domain.units import ByteUnit, gpus_label, per_weight
from app.web.parts import Verdict, shown, verdicts


@dataclass(frozen=True)
class HostView:
    """One stage's host and its accounting, a sentence each; blank where there is nothing to say."""

    headline: str
    """What each node's host keeps."""
    verdict: str
    fits: bool | None
    pcie: str
    differences: tuple[str, ...]
    headlines: tuple[str, ...] = field(init=False, repr=False, compare=False)
    verdicts: tuple[Verdict, ...] = field(init=False, repr=False, compare=False)
    pcies: tuple[str, ...] = field(init=False, repr=False, compare=False)
    difference_lists: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "headlines", shown(self.headline))
        object.__setattr__(self, "verdicts", verdicts(self.verdict, self.fits))
        object.__setattr__(self, "pcies", shown(self.pcie))
        object.__setattr__(self, "difference_lists", shown(self.differences))


def _node(scenario: Scenario) -> str:
    run = scenario.run
    return f"each node of {gpus_label(run.gpus_per_node)}" if run.nodes > 1 else f"the node of {gpus_label(run.gpus)}"


def _headline(stage: Stage, scenario: Scenario, host: HostReport, state_peak: int) -> str:
    run, units = scenario.run, scenario.units
    node = _node(scenario)
    if host.cpu_building is not None:  # DeepSpeed's rule
        why = (
            "each of its processes building the model in fp32 before ZeRO splits it"
            if host.cpu_building
            else "the state offloaded to it"
        )
        return (
            f"DeepSpeed's estimator counts {units.show(state_peak)} on each GPU and {units.show(host.cpu_bytes)} of "
            f"CPU memory for {node}: {why}, times its buffer factor of 1.5."
        )
    if not host.cpu_bytes and not host.nvme_bytes:
        return ""
    on_nvme = host.nvme_bytes > 0
    kept = host.nvme_bytes if on_nvme else host.cpu_bytes
    where = "on the server's NVMe drive" if on_nvme else "in the server's CPU memory"
    share = per_weight(Fraction(kept, run.gpus_per_node * run.params))
    said = (
        f"Each card's host keeps {share} bytes per weight for it {where}: "
        f"{units.show(kept // run.gpus_per_node)} per card, {units.show(kept)} for {node}"
    )
    if on_nvme and host.pinned_bytes:
        return f"{said}; the pinned buffers it passes through take {units.show(host.pinned_bytes)} of CPU RAM."
    if not on_nvme and host.pinned_bytes:
        pinned = "pinned" if host.pinned_bytes == host.cpu_bytes else f"{units.show(host.pinned_bytes)} of it pinned"
        return f"{said}, {pinned}."
    return f"{said}."


def _verdict(scenario: Scenario, host: HostReport) -> str:
    run, units = scenario.run, scenario.units
    said = []
    if run.host_memory is not None:
        room = run.host_memory - host.cpu_bytes
        state = f"fits, {units.show(room)} left" if room >= 0 else f"over by {units.show(-room)}"
        said.append(f"A node's {units.show(run.host_memory)} of CPU RAM: {state}.")
    if run.nvme_space is not None and host.nvme_bytes:
        room = run.nvme_space - host.nvme_bytes
        state = f"fits, {units.show(room)} left" if room >= 0 else f"over by {units.show(-room)}"
        said.append(f"Its {units.show(run.nvme_space)} of NVMe: {state}.")
    return " ".join(said)


def _pcie(units: ByteUnit, host: HostReport, weights_fetched: bool) -> str:
    if not host.pcie_bytes_per_step:
        return ""
    up = "fetched for each gather, forward and backward" if weights_fetched else "back up after the update"
    return (
        f"PCIe, each card per step: {units.show(host.gradients_down)} of gradients down to the host, "
        f"{units.show(host.weights_up)} of weights {up}. That is {units.show(host.pcie_bytes_per_step)}, "
        "apart from the traffic between cards."
    )


def host_view(scenario: Scenario, row: StageReport) -> HostView | None:
    """The host's words for one stage; None for a run counted as the paper counts, with nothing offloaded."""
    run = scenario.run
    if not run.setup.placement.offloads and run.setup.accounting is Accounting.PAPER:
        return None
    host = row.host
    return HostView(
        headline=_headline(row.stage, scenario, host, row.state_peak_bytes),
        verdict=_verdict(scenario, host),
        fits=host.fits,
        pcie=_pcie(scenario.units, host, host.weights_fetched),
        differences=row.differences,
    )
