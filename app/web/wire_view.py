"""The traffic by link beside the cards: what each card sends inside its node and between nodes, and how long.

Every figure is the stage report's (`StageReport.links`, `.time`); this module only words them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.domain.report import CutWire, LinkBytes, Run, Scope, StageReport
from app.domain.scenario import Scenario
from app.domain.units import ByteUnit, count_label, percent, seconds_label

NOT_MEASURED = "Estimates from the links' and the card's peak figures, not measurements."


@dataclass(frozen=True)
class CollectiveLine:
    """One collective of the step: what it moves, how, and one card's bytes on each link."""

    description: str
    algorithm: str
    inside: str
    between: str
    crosses: bool
    """Whether it sends anything between nodes: drawn apart from the traffic inside a node."""
    css: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", "crosses" if self.crosses else None)


@dataclass(frozen=True)
class WireView:
    """One stage's traffic by link and its time on the wire, in words."""

    sent: str
    """Each card's bytes a step: inside its node, and between nodes where there are several."""
    time: str
    """The seconds those bytes take, and the compute's, with the verdict's words."""
    hides: bool | None
    """Whether the traffic can hide behind the compute; None without a micro-batch to compute on."""
    assumptions: str
    collectives: tuple[CollectiveLine, ...]
    table_bytes: str
    """The table's cell: "131.3 GiB inside · 14.0 GiB between"."""
    table_time: str
    """The table's cell: "0.61 s on the wire, 1.86 s compute"."""
    cut_words: tuple[str, ...] = ()
    """The model cut's traffic, its bubble and the step with them, a sentence each; none without a cut."""
    cut_table: tuple[str, ...] = ()
    """The table's cell for the cut: its bytes by link, the bubble and the step; none without a cut."""
    time_css: str = field(init=False, repr=False, compare=False)
    """The time's classes beside the cards: "exposed" where the traffic cannot hide behind the compute."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "time_css", "wire-time exposed" if self.hides is False else "wire-time")


def _description(link: LinkBytes, run: Run) -> str:
    t = link.transfer
    said = t.description
    if t.scope is Scope.EXPERTS:  # Megatron's expert order puts the group's ranks ep × etp apart
        said += f" of {link.span.cards:,} cards, {run.cut.ep * run.cut.expert_tp:,} ranks apart"
    if t.scope is Scope.SECONDARY:  # hpZ's group wider than a node gathers between nodes too
        said += ", from hpZ's copy" + (
            f", across {link.span.nodes:,} nodes" if link.span.nodes > 1 else " inside the node"
        )
    if link.quantized:
        said += f", in {link.quantized}"
    return said


def wire_view(scenario: Scenario, row: StageReport) -> WireView:
    """The stage's traffic by link and its time, from its report."""
    run, units = scenario.run, scenario.units
    inside, between = units.show(row.inside_bytes), units.show(row.between_bytes)
    if run.gpus == 1:
        sent = "One card sends nothing: it has nobody to share with."
    elif run.nodes == 1:
        sent = f"Each card sends {inside} a step, all of it inside its node."
    else:
        sent = (
            f"Each card sends {inside} a step inside its node and {between} between nodes: the (n−1)/n of each "
            "collective over n cards, where the P count above takes each as a whole P."
        )
    if apart := experts_said(run, row):
        sent = f"{sent} {apart}"
    time = row.time
    wire = (
        f"On the wire: {seconds_label(time.inside)} inside the node"
        + (f" + {seconds_label(time.between)} between nodes = {seconds_label(time.wire)}" if run.nodes > 1 else "")
        + " a step"
    )
    if time.compute is None:
        said = f"{wire}; with no micro-batch there is no compute to hide it behind."
    elif time.hides:
        said = f"{wire}, under the compute's {seconds_label(time.compute)}: it can hide behind it, if overlapped."
    else:
        said = (
            f"{wire}, over the compute's {seconds_label(time.compute)}: at least "
            f"{seconds_label(time.wire - time.compute)} of waiting each step."
        )
    return WireView(
        sent=sent,
        time=said,
        hides=time.hides,
        assumptions=assumptions(run),
        collectives=tuple(
            CollectiveLine(
                _description(link, run),
                link.algorithm,
                units.show(link.inside),
                units.show(link.between),
                link.between > 0,
            )
            for link in row.links
        )
        + tuple(
            CollectiveLine(
                link.description, link.algorithm, units.show(link.inside), units.show(link.between), link.between > 0
            )
            for link in row.cut.links
        ),
        table_bytes=f"{inside} inside" + (f" · {between} between" if run.nodes > 1 else ""),
        table_time=f"{seconds_label(time.wire)}"
        + ("" if time.compute is None else f" vs {seconds_label(time.compute)} compute"),
        cut_words=cut_words(run, row.cut, units) if run.cut.cuts else (),
        cut_table=(cut_table(run, row.cut, units),) if run.cut.cuts else (),
    )


def experts_said(run: Run, row: StageReport) -> str:
    """Where a mixture of experts' routed experts go apart from the rest, which group each goes over; else empty."""
    experts = [link.span for link in row.links if link.transfer.scope is Scope.EXPERTS]
    if not experts:
        return ""
    where = experts[0]
    place = "inside the node" if where.nodes == 1 else f"across {where.nodes:,} nodes"
    return (
        f"Its routed experts' {count_label(row.expert_params)} of {count_label(row.card_params)} weights go over "
        f"their expert-data-parallel group, {where.cards:,} card{'' if where.cards == 1 else 's'} "
        f"ep × etp = {run.cut.ep * run.cut.expert_tp:,} ranks apart ({place}), the rest over dp × cp's "
        f"{run.shards:,}: Megatron-LM's and DeepSpeed-MoE's groups."
    )


def _named(run: Run) -> str:
    cut = run.cut
    said = [
        f"{name}={value:,}"
        for name, value in (("tp", cut.tp), ("pp", cut.pp), ("cp", cut.cp), ("ep", cut.ep))
        if value > 1
    ]
    return ", ".join(said + (["sp"] if cut.sp else []))


def cut_words(run: Run, cut: CutWire, units: ByteUnit) -> tuple[str, ...]:
    """The cut's traffic, the bubble and the step, in words: every figure the report's (`CutWire`)."""
    said = []
    if not cut.known:
        said.append(
            f"The model is cut ({_named(run)}), but a weight count alone has no shape: what its activations send "
            "(b · s · h a micro-batch) is unknown, so the cut's traffic is not counted. Choose a model to count it."
        )
    else:
        between = f" and {units.show(cut.between_bytes)} between nodes" if cut.between_bytes else ""
        said.append(
            f"Cutting the model ({_named(run)}) sends {units.show(cut.inside_bytes)} more a step inside the node"
            f"{between} from its most loaded card: {seconds_label(cut.wire)} on the wire, between the blocks' "
            "matrix multiplies. The embedding's and output layer's own collectives are left out."
        )
    if run.cut.pp > 1:
        interleaved = f" ÷ vpp {run.cut.vpp:,}" if run.cut.vpp > 1 else ""
        idle = "" if cut.bubble_seconds is None else f": {seconds_label(cut.bubble_seconds)} a step"
        said.append(
            f"The pipeline idles {percent(cut.bubble)} of the ideal step, (pp − 1)/microbatches = "
            f"{run.cut.pp - 1:,}/{run.cut.microbatches:,}{interleaved}{idle}."
        )
    if cut.step is not None and cut.compute is not None:
        said.append(
            f"A step with the cut: {seconds_label(cut.compute)} of compute (this card's "
            f"1/{run.cut.model_parallel:,} of the model, {run.cut.microbatches:,} "
            f"micro-batch{'es' if run.cut.microbatches > 1 else ''})"
            + (f" + {seconds_label(cut.bubble_seconds)} bubble" if cut.bubble_seconds else "")
            + (
                f" + {seconds_label(cut.wire)} of the cut's traffic = {seconds_label(cut.step)}, none of it hidden; "
                if cut.known
                else f" = {seconds_label(cut.step)}, the cut's traffic unknown; "
            )
            + "ZeRO's collectives above apart."
        )
    return tuple(said)


def cut_table(run: Run, cut: CutWire, units: ByteUnit) -> str:
    """The table's cell for the cut: its bytes by link, the bubble and the step."""
    if cut.known:
        sent = f"cut: {units.show(cut.inside_bytes)} inside" + (
            f" · {units.show(cut.between_bytes)} between" if run.nodes > 1 else ""
        )
    else:
        sent = "cut: traffic unknown without a model's shape"
    bubble = f"; bubble {percent(cut.bubble)}" if run.cut.pp > 1 else ""
    step = "" if cut.step is None else f"; step {seconds_label(cut.step)}"
    return sent + bubble + step


def assumptions(run: Run) -> str:
    """Every figure the time is estimated from, stated beside it."""
    links = run.links
    # A mixture of experts computes with the weights a token uses (`wire.compute_seconds`).
    active = " active" if run.active_params != run.params else ""
    compute = (
        f"compute is 6 × {count_label(run.active_params)}{active} weights × {run.tokens:,} tokens a card at "
        f"{links.mfu}% of {links.tflops:,} TFLOP/s"
        if run.tokens
        else "no tokens to compute on"
    )
    return (
        f"{NOT_MEASURED} {links.nvlink:,} GB/s a card inside a node, {links.network:,} Gb/s a card between nodes; "
        f"{compute}. Each collective is a hierarchical ring, its two rings one after the other (docs/wire.md)."
    )
