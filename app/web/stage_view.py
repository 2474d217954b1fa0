"""One stage of a run: the switcher, the cards (at rest or at one phase), the table and the live region's words."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

from app.domain.eighths import COLUMNS
from app.domain.report import Change, Run, StageReport
from app.domain.scenario import NO_SHAPE, Scenario
from app.domain.stages import Stage, StageInfo, across_nodes
from app.domain.stages import stage_explanation as _stage_explanation
from app.domain.units import count_label as params_label
from app.domain.units import gpus_label, per_weight, percent
from app.domain.zeropp import zeropp_said
from app.web.bars import bar_keys, bar_note
from app.web.cut_view import cut_cards, cut_href, in_stages, sampled_said
from app.web.expert_view import draws_cut, experts_key, experts_said, moe_of
from app.web.fixes_view import FixLine, fix_lines
from app.web.grid_view import CardGap, CardView, NodeGap, NodeView, in_nodes, rest_cards
from app.web.host_view import HostView, host_view
from app.web.links import LinkFor, Links, switch_href
from app.web.parts import Verdict, shown, verdicts
from app.web.step_view import StepView, step_view
from app.web.table_view import Boundary, TableRow, boundary, table_rows
from app.web.wire_view import WireView, wire_view


@dataclass(frozen=True)
class StageLink:
    """One tab of the stage switcher."""

    stage: Stage
    title: str
    summary: str
    href: str
    current: bool
    link_current: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "link_current", "page" if self.current else None)


@dataclass(frozen=True)
class OverheadRow:
    """One overhead of the stage shown, as the list under the table gives it."""

    name: str
    size: str
    source: str
    parameter: str
    source_label: str = field(init=False, repr=False, compare=False)
    """The source's address without its scheme."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "source_label", self.source.split("://")[1])


@dataclass(frozen=True)
class OverheadsDetail:
    """The overheads' list under the table: whether it is open, and its words, counted or not."""

    open: str | None
    state: str
    said: str
    switch: str


@dataclass(frozen=True)
class TotalLine:
    """What a card really holds at its peak, part by part, and on the card given: the headline's second line."""

    words: str
    verdict: str = ""
    fits: bool | None = None
    verdicts: tuple[Verdict, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdicts", verdicts(self.verdict, self.fits))


def total_line(scenario: Scenario, row: StageReport) -> TotalLine | None:
    """State + the layer in hand + activations + overheads = the peak, on a card of C.

    None where the peak is the state alone and no card is given: the headline has said it all.
    """
    units, capacity = scenario.units, scenario.run.capacity
    extra = row.extra
    parts = [
        (row.rest_bytes - row.overhead_bytes, "of state"),
        # Whatever is held for the layer besides its activations, of any kind (a new one too), so the sum holds.
        (extra.total - extra.activations, "for the layer in hand"),
        (extra.activations, "of activations"),
        (row.overhead_bytes, "of overheads"),
    ]
    shown = [f"{units.show(nbytes)} {what}" for nbytes, what in parts if nbytes]
    if len(shown) < 2 and capacity is None:
        return None
    words = f"At its peak a card holds {' + '.join(shown)}" + (
        f" = {units.show(row.peak_bytes)}" if len(shown) > 1 else ""
    )
    if capacity is None or row.headroom_bytes is None:
        return TotalLine(words + ".")
    words += f", on a card of {units.show(capacity)}:"
    if row.fits:
        return TotalLine(words, f"fits, {units.show(row.headroom_bytes)} left.", True)
    return TotalLine(words, f"over by {units.show(-row.headroom_bytes)}.", False)


@dataclass(frozen=True)
class StageView:
    """Everything drawn for the chosen stage of the described run."""

    stage: Stage
    info: StageInfo
    explanation: str
    shards_anything: bool
    gpus: int
    params_label: str
    summary: str
    bytes_per_weight: str
    per_gpu: str
    share_of_dp: str
    cards: tuple[CardView | CardGap, ...]
    axis_digits: int
    sampled: bool
    rows: tuple[TableRow, ...]
    capacity: str | None
    activations: bool
    """Whether activations are counted from a shape: the table then has their columns."""
    overheads_counted: bool
    overheads_href: str
    """The same view with the overheads counted, or not: the other way."""
    overheads: tuple[OverheadRow, ...]
    boundary: Boundary
    notes: tuple[str, ...]
    step: StepView | None = None
    change: str = ""
    """What changed on every card since the stage the person came from; blank without one."""
    bar_note: str = ""
    """What the bars under the cards are drawn to."""
    bar_keys: tuple[str, ...] = ()
    """The css of each kind the bars draw beyond the bands (`bars.bar_keys`), e.g. "gathered", "sent", "overheads"."""
    narration: Narration | None = None
    """What the polite live region says after a swap."""
    host: HostView | None = None
    """What each node's host keeps, and how the accounting differs; None without offload, as the paper counts."""
    total: TotalLine | None = None
    """What a card holds at its peak, part by part, and its verdict on the card given."""
    table_note: str = ""
    """Under the table: why a bare weight count has no activation figures, and that one GPU's rows are the same;
    blank where neither is so."""
    wire: WireView | None = None
    """The stage's traffic by link and its time on the wire; None on one card."""
    nodes: tuple[NodeView | NodeGap, ...] = ()
    """The cards in their nodes, with the links between; empty for one node (the cards alone)."""
    replicated: bool = False
    """Whether hybrid sharding keeps a copy of each slice in every shard group: its cells are ringed."""
    hybrid_href: str = ""
    """The same view in one shard group, or sharded within each node: the switch that shows what refills."""
    hybrid_label: str = ""
    fixes: tuple[FixLine, ...] = ()
    """Under the verdict, where the run is over its card: the changes that would make it fit (`fixes_view`)."""
    cut_grid: bool = False
    cut_sampled: str = ""
    """Over a sampled cut grid, which cards of each stage it draws (`cut_view.sampled_said`); blank otherwise."""
    experts: str = ""
    experts_key: str = ""
    """The key's words for the columns where the model has experts (`expert_view.experts_key`); blank if dense."""
    elsewhere: bool = False
    """Whether some card draws another expert-parallel rank's experts, not here (ep above 1)."""
    """A mixture of experts' columns in words, with its active and total weights (`expert_view`); blank if dense."""
    """Whether the cards draw a cut model (`cut_view`): eighths of the model, framed by stage and tensor group."""
    tp_sliced: bool = False
    """Whether a cut grid's cells are part filled: each card its tensor slice (tp above 1), or a shared column."""
    pipelined: bool = False
    """Whether the cards draw other stages' layers absent (pp above 1), at rest or in the step."""
    cut_links: tuple[tuple[str, str], ...] = ()
    card_words: str = ""
    """Under a cut that splits the weights (tp or pp), the headline's card: "its 4.41B weights (stage 2's layers
    ÷ tp 8)"; blank otherwise (every card keeps state for the whole model)."""
    """Under ZeRO-3's limit, where one layer is bigger than a card: the same run with each layer cut (tp)."""

    # What the templates draw, decided here when the view is built: a part left out is empty.
    model_per_gpu: str = field(init=False, repr=False, compare=False)
    """The table's heading for one card's bytes: '30B model per GPU', '7-weight model per GPU'."""
    model_words: str = field(init=False, repr=False, compare=False)
    """The headline's weights: "a model of 30B weights", "a model of 1 weight", or the cut card's (`card_words`)."""
    wire_lines: tuple[WireView, ...] = field(init=False, repr=False, compare=False)
    """The traffic by link beside the cards, and its details under the table: on several nodes."""
    hybrids: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)
    """The switch between one shard group and a node's: its address and words."""
    totals: tuple[TotalLine, ...] = field(init=False, repr=False, compare=False)
    fix_lists: tuple[tuple[FixLine, ...], ...] = field(init=False, repr=False, compare=False)
    hosts: tuple[HostView, ...] = field(init=False, repr=False, compare=False)
    note_lists: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)
    grid_css: str = field(init=False, repr=False, compare=False)
    expert_notes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The experts' words over the grid: one, or none for a dense model."""
    """The grid's classes: its axis's digits, and a cut model's eight cards a row."""
    hatches: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The overheads' hatching, defined once where a bar draws them."""
    loose_cards: tuple[tuple[CardView | CardGap, ...], ...] = field(init=False, repr=False, compare=False)
    """The cards alone, on one node; empty when they are drawn in their nodes (`nodes`)."""
    bpw_minor: str | None = field(init=False, repr=False, compare=False)
    """A card's bytes a weight: minor at rest (the projector leaves it out); in a step its model's bytes are."""
    model_minor: str | None = field(init=False, repr=False, compare=False)
    steps: tuple[StepView, ...] = field(init=False, repr=False, compare=False)
    rest_notes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The note under the key at rest (the bars' note); in a step the step's note instead (`steps`)."""
    axis_note: str = field(init=False, repr=False, compare=False)
    """What the numbers under the cards are: weights, or a cut model's eighths."""
    responsible_note: str = field(init=False, repr=False, compare=False)
    sampled_note: str = field(init=False, repr=False, compare=False)
    fit_columns: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The table's columns on the card given: its capacity; none without one."""
    layer_notes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    batch_columns: tuple[str, ...] = field(init=False, repr=False, compare=False)
    activation_columns: tuple[str, ...] = field(init=False, repr=False, compare=False)
    overhead_columns: tuple[str, ...] = field(init=False, repr=False, compare=False)
    overhead_hints: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """Where to count the overheads, beside each verdict, while they are not."""
    wire_columns: tuple[WireView, ...] = field(init=False, repr=False, compare=False)
    """The traffic by link and its time, each row's under its P figure (no columns of their own)."""
    peak_notes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """Under the peak's heading: the parts of the peak each row says under its figure; none without any."""
    comm_notes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """Under the communication's heading: what each row says under its P figure, with the links' figures."""
    host_columns: tuple[str, ...] = field(init=False, repr=False, compare=False)
    table_notes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    overheads_details: tuple[OverheadsDetail, ...] = field(init=False, repr=False, compare=False)
    """The overheads item by item: with a card to fit, or once counted."""

    def __post_init__(self) -> None:
        label, counted, shape = self.params_label, self.overheads_counted, self.activations
        size = label if label[-1:].isalpha() else f"{label}-weight"
        switch = "Show the theory alone" if counted else "Count the overheads"
        said = (
            "The peak counts them, apart from the theory: the table's peak is the theory plus the hatched band."
            if counted
            else "The peak is the theory alone, as the ZeRO paper and the seed count it."
        )
        state = "counted in the peak" if counted else "not counted"
        detail = OverheadsDetail("" if counted else None, state, said, switch)
        sampled = (
            f"With {self.gpus:,} cards the grid draws the first four and the last four, and as many weights; "
            "every card holds the same pattern."
        )
        derived = {
            "model_per_gpu": f"{size} model per GPU",
            "model_words": self.card_words or f"a model of {label} weight" + ("" if label == "1" else "s"),
            "wire_lines": shown(self.wire if self.nodes or (self.wire and self.wire.cut_words) else None),
            "hybrids": ((self.hybrid_href, self.hybrid_label),) if self.hybrid_href else (),
            "totals": shown(self.total),
            "fix_lists": shown(self.fixes),
            "hosts": shown(self.host),
            "note_lists": shown(self.notes),
            "hatches": ("hatch",) if "overheads" in self.bar_keys else (),
            "grid_css": f"grid digits-{self.axis_digits}"
            + (" cut" if self.cut_grid else "")
            + (" experts" if self.experts else ""),
            "expert_notes": shown(self.experts),
            "loose_cards": () if self.nodes else (self.cards,),
            "bpw_minor": None if self.step else "minor",
            "model_minor": "minor" if self.step else None,
            "steps": shown(self.step),
            "rest_notes": () if self.step else (self.bar_note,),
            "axis_note": "Each card's figures and bar are the most loaded card's, by which the run is sized (a stage "
            "that keeps less has room to spare). Numbers under each card are eighths of the model, first layer to last"
            if self.cut_grid
            else "Numbers under each card are weights",
            "responsible_note": (
                "; the underlined one holds that card's share of what ZeRO splits"
                if self.cut_grid
                else "; the underlined one is the weight that card is responsible for"
            )
            if self.shards_anything
            else "",
            "sampled_note": (self.cut_sampled or sampled) if self.sampled else "",
            "fit_columns": shown(self.capacity),
            "layer_notes": ("(this micro-batch's activations and largest layer kept)",) if shape else (),
            "batch_columns": ("Largest micro-batch that fits",) if shape else (),
            "activation_columns": ("Activations at the peak",) if shape else (),
            "overhead_columns": ("Overheads",) if counted else (),
            "overhead_hints": () if counted else (self.overheads_href,),
            "wire_columns": shown(self.wire),
            "peak_notes": _peak_notes(shape, counted),
            "comm_notes": ("(a card's bytes by link; the time a step, an estimate)",) if self.wire else (),
            "host_columns": ("Host per node",) if self.rows and self.rows[0].host is not None else (),
            "table_notes": shown(self.table_note),
            "overheads_details": (detail,) if self.capacity or counted else (),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


def _peak_notes(shaped: bool, counted: bool) -> tuple[str, ...]:
    """The peak's heading's note: the parts of the peak said under each row's figure."""
    parts = [part for part, shown_ in (("activations", shaped), ("overheads", counted)) if shown_]
    return (f"(of it: {' and '.join(parts)})",) if parts else ()


ONE_GPU = (
    "With one GPU every arrangement is the same: there is no other card to split the state with or to send to, "
    "so the four rows agree."
)
"""Under the table on one card, said once rather than read off four identical rows."""


@dataclass(frozen=True)
class Narration:
    """One sentence each for what a swap can change; `said` picks the one that applies."""

    stage: str
    """The stage change: what it does to each card."""
    phase: str
    """The phase: its number, title and traffic so far; blank at rest."""
    fit: str
    """The fit verdict on the card given; blank without a capacity."""
    switched: bool = False
    """Whether the view came by the switcher from another stage (its `from`)."""
    after_move: str = field(init=False)
    """What #narration says after a move (a link): `said(False)`."""
    after_refine: str = field(init=False)
    """What it says after a change of the run (the run form, which keeps the phase): `said(True)`."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "after_move", self.said(False))
        object.__setattr__(self, "after_refine", self.said(True))

    def said(self, refined: bool) -> str:
        """What #narration says after the swap that brings this view.

        The change on a switch, the phase on a move of the step, else the fit. `refined`: a change of the
        run (the run form), which keeps the phase.
        """
        if self.switched:
            return self.stage
        if self.phase and not refined:
            return self.phase
        return self.fit or self.phase or self.stage


def stage_links(current: Stage | None, link: LinkFor) -> tuple[StageLink, ...]:
    """The switcher, with the current stage marked."""
    return tuple(
        StageLink(stage, stage.info.title, stage.info.summary, switch_href(link, stage, current), stage is current)
        for stage in Stage
    )


# A stage's explanation depends on the stage, the recipe and the cluster: built once, for every model size.
stage_explanation = lru_cache(maxsize=256)(_stage_explanation)


def card_words(scenario: Scenario, stage: int) -> str:
    """The most loaded card's weights under a cut that splits them: its stage's layers, ÷ tp; blank otherwise."""
    run = scenario.run
    cut = run.cut
    apart = cut.ep * cut.expert_tp != cut.tp and any(c.experts for c in run.cards)
    if cut.tp == 1 and cut.pp == 1 and not apart:
        return ""  # context parallelism alone splits the sequence: every card keeps the whole model
    card = next(c for c in run.cards if c.stage == stage)
    count = params_label(card.params)
    whole = f"stage {stage + 1}'s layers" if cut.pp > 1 else "the model"
    split = f" ÷ tp {cut.tp}" if cut.tp > 1 else ""
    if apart:  # a mixture of experts' routed experts are cut their own way
        split = f": its experts ÷ (ep {cut.ep} × etp {cut.expert_tp})" + (f", the rest{split}" if split else "")
    return f"its {count} weight{'' if count == '1' else 's'} ({whole}{split})"


def weights_said(run: Run) -> str:
    """The model's weights in words: a mixture of experts' active ones too, as compute uses those, memory all."""
    if run.active_params == run.params:
        return f"{run.params:,} weights"
    return f"{run.active_params:,} active of {run.params:,} weights"


def stage_view(
    stage: Stage, scenario: Scenario, link: Links, phase: int | None = None, previous: Stage | None = None
) -> StageView:
    """The grid, bars, totals, table and verdicts for one stage of a run (or one phase of its step)."""
    run, units, rows = scenario.run, scenario.units, scenario.report
    chosen = rows[stage]
    cards: tuple[CardView | CardGap, ...]
    stepping = None
    moved = None if previous is None or previous is stage else rows.change(previous, stage)
    cut = phase is None and draws_cut(scenario)  # the step draws the cut in its own cards (step_view), without frames
    if cut:
        cards = cut_cards(scenario, stage, chosen, None if moved is None else previous)
    elif phase is None:
        cards = rest_cards(scenario, stage, chosen, moved=moved)
    else:
        stepping, cards = step_view(stage, scenario, link, phase)
    return StageView(
        stage=stage,
        info=stage.info,
        explanation=" ".join(
            said
            for said in (
                stage_explanation(stage, run.recipe, run.gpus),
                across_nodes(stage, run.zero_group, run.shards),
                zeropp_said(stage, run),
            )
            if said
        ),
        shards_anything=bool(stage.sharded),
        gpus=run.gpus,
        params_label=params_label(run.params),
        card_words=card_words(scenario, chosen.pipeline_stage),
        summary=f"{scenario.model_title}, {weights_said(run)}, on {gpus_label(run.gpus)} with {run.recipe.title}"
        + (f", micro-batch {run.batch:,} × {scenario.seq:,} tokens" if run.activations else ""),
        bytes_per_weight=per_weight(chosen.bytes_per_weight),
        per_gpu=units.show(chosen.per_gpu_bytes),
        share_of_dp=percent(chosen.bytes_per_weight / rows[Stage.DP].bytes_per_weight),
        # A cut grid's columns are the model's eighths, 0 to 7, as a mixture of experts' are in the step too.
        axis_digits=1 if cut or moe_of(scenario) else len(str(run.gpus - 1)),
        cut_grid=cut,
        cut_sampled=sampled_said(run.cut, run.gpus) if cut else "",
        experts=experts_said(scenario, phase is not None),
        experts_key=experts_key(scenario, phase is not None),
        elsewhere=run.cut.ep > 1 and moe_of(scenario) is not None,
        tp_sliced=cut and (run.cut.tp > 1 or COLUMNS % run.cut.pp > 0),
        pipelined=run.cut.pp > 1,  # at rest and in the step, a card draws other stages' layers absent
        cards=cards,
        sampled=any(isinstance(card, CardGap) for card in cards),
        rows=table_rows(stage, link, rows.stages, scenario),
        capacity=None if run.capacity is None else units.show(run.capacity),
        activations=run.activations is not None,
        overheads_counted=run.count_overheads,
        overheads_href=link.setting("overheads", None if run.count_overheads else "1").at(stage, phase),
        overheads=tuple(
            OverheadRow(item.name, units.show(item.nbytes), item.source, item.parameter) for item in chosen.overheads
        ),
        boundary=boundary(scenario),
        notes=scenario.notes,
        step=stepping,
        change="" if moved is None else switch_said(scenario, moved),
        bar_note=bar_note(scenario, stage),
        bar_keys=bar_keys(chosen),
        narration=narration(stage, scenario, chosen, moved, stepping),
        host=host_view(scenario, chosen),
        total=total_line(scenario, chosen),
        fixes=fix_lines(scenario, stage, link, phase),
        table_note=" ".join(
            note for note, said in ((NO_SHAPE, run.activations is None), (ONE_GPU, run.gpus == 1)) if said
        ),
        wire=wire_view(scenario, chosen) if run.gpus > 1 else None,
        nodes=in_stages(
            cards,
            run.cut,
            run.gpus,
            run.gpus_per_node,
            link_words(run),
            scenario.architecture.layers if scenario.architecture else None,
        )
        if cut
        else in_nodes(cards, run.gpus_per_node, run.nodes, link_words(run)),
        cut_links=cut_href(scenario, link),
        replicated=bool(stage.sharded) and run.shards < run.zero_group,
        **_hybrid_switch(stage, run, link, phase),
    )


def _hybrid_switch(stage: Stage, run: Run, link: Links, phase: int | None) -> dict[str, str]:
    """Where a sharding stage on several nodes switches between one shard group and a node's (HSDP)."""
    if not stage.sharded or run.nodes < 2 or run.setup.hpz > 1 or run.qwz or run.qgz:
        return {}
    # With the model cut, ZeRO's group is dp × cp cards, not every card: it is not hybrid unless `shard` says so.
    if run.shards < run.zero_group:
        href = link.setting("shard", None).at(stage, phase)
        return {"hybrid_href": href, "hybrid_label": f"Shard across all {run.zero_group:,} cards instead"}
    if run.cut.cuts:
        return {}
    href = link.setting("shard", str(run.gpus_per_node)).at(stage, phase)
    label = f"Hybrid: shard within each node of {run.gpus_per_node:,}, and see which cells fill back in"
    return {"hybrid_href": href, "hybrid_label": label}


def link_words(run: Run) -> tuple[str, str]:
    """The link inside a node and the link between nodes, in words, with their bandwidths."""
    fabric = run.links
    return (
        f"NVLink inside: {fabric.nvlink:,} GB/s a card",
        f"Network between nodes: {fabric.network:,} Gb/s a card",
    )


def narration(
    stage: Stage, scenario: Scenario, row: StageReport, moved: Change | None, stepping: StepView | None
) -> Narration:
    """One sentence for each thing a swap can change, for the live region."""
    run = scenario.run
    said = moved.sentence if moved else scenario.report.change(Stage.DP, stage).sentence
    if stage is Stage.DP and moved is None:
        said = f"{stage.info.title}: every card keeps all {per_weight(row.bytes_per_weight)} bytes per weight."
    if run.setup.placement.moved(stage):  # the change's figures are the paper's, all on the card
        said = (
            f"{stage.info.title}, offloaded: each card keeps {per_weight(row.bytes_per_weight)} bytes per weight, "
            "its host the rest."
        )
    if moved is not None:
        said += per_gpu_said(scenario, moved)
    phase = (
        ""
        if stepping is None
        else (
            f"Phase {stepping.index} of {stepping.last}: {stepping.title.rstrip('.')}. "
            f"Traffic so far: {stepping.tally} of {stepping.total}.{phase_memory_said(scenario, stage, stepping.index)}"
        )
    )
    fit, units = "", scenario.units
    if run.capacity is not None and row.headroom_bytes is not None:
        card = units.show(run.capacity)
        if row.fits:
            # The peak holds the activations where they are counted: what is left is left over. Where
            # they are not (no micro-batch, or a bare weight count), it is the room they would have.
            rest = "." if row.activation_bytes else " for activations."
            fit = f"{stage.info.title} fits on {card}: {units.show(row.headroom_bytes)} left{rest}"
        else:
            fit = f"{stage.info.title} does not fit on {card}: {units.show(-row.headroom_bytes)} over."
    return Narration(stage=said, phase=phase, fit=fit, switched=moved is not None)


def switch_said(scenario: Scenario, moved: Change) -> str:
    """What a switch changed on every card, in the domain's sentence, and each card's memory before and after."""
    return moved.sentence + per_gpu_said(scenario, moved)


def per_gpu_said(scenario: Scenario, moved: Change) -> str:
    """Each card's state at rest after a switch and before it: " Each GPU keeps 104.8 GiB, was 153.7 GiB."."""
    rows, units = scenario.report, scenario.units
    now, was = rows[moved.after].per_gpu_bytes, rows[moved.before].per_gpu_bytes
    if now == was:
        return f" Each GPU keeps {units.show(now)}, as before."
    return f" Each GPU keeps {units.show(now)}, was {units.show(was)}."


def phase_memory_said(scenario: Scenario, stage: Stage, index: int) -> str:
    """What each card holds at a phase of the step against the phase before it, in a sentence (the live region's).

    From each phase's own figure (`Phase.live_bytes`), whatever the phase does: it rises with a gather, falls
    with a discard, and says so where it stays.
    """
    phases, units = scenario.report.step(stage), scenario.units
    now = phases[index].live_bytes
    said = f" Each GPU holds {units.show(now)}"
    if index == 0:
        return f"{said}."
    before = phases[index - 1].live_bytes
    if before == now:
        return f"{said}, as in the phase before."
    return f"{said}, {'up' if now > before else 'down'} from {units.show(before)} in the phase before."
