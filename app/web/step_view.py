"""The view of one phase of a training step: the panel, the drawing of what moves, and the cards."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from fractions import Fraction
from math import ceil

from app.domain.eighths import COLUMNS, Column
from app.domain.parallel import stage_blocks
from app.domain.recipes import Band, BandSpec
from app.domain.report import LAST_PHASE, Collective, Holding, InFlight, Phase, Run, Scope
from app.domain.scenario import Scenario
from app.domain.sharding import Share, holders, owned_columns, shown_indices
from app.domain.stages import Stage
from app.domain.step_text import cards_text, detail, explanation
from app.domain.units import ByteUnit, p_units
from app.web.bars import card_bar, legend
from app.web.card_words import holding_sentence
from app.web.chart_view import ChartView, chart_view
from app.web.cut_view import cut_step_columns
from app.web.expert_view import draws_cut, experts_column_key, experts_held, moe_of
from app.web.grid_view import (
    NO_COPY,
    CardGap,
    CardView,
    CellView,
    ColumnView,
    band_height,
    card_total,
    column_height,
    host_title,
    split_host,
)
from app.web.links import Links
from app.web.parts import shown
from app.web.schedule_view import ScheduleView, schedule_view

UNKNOWN_LAYER_NOTE = "Largest layer unknown: the figures leave out the layer in hand (see ZeRO-3's limit below)."
LAYER_BANDS = frozenset({Band.WEIGHTS, Band.GRADIENTS})
"""The bands a card holds whole for the layer in hand when a stage splits them."""

SHARE_STEPS = 48
"""A partial cell's strip is drawn in 48ths of the column (static/app.css has a class for each)."""


@dataclass(frozen=True)
class TransferNode:
    """A card in the transfer drawing, or the gap standing for the cards left out (card None)."""

    x: float
    width: float
    label: str
    card: int | None
    css: str = field(init=False, repr=False, compare=False)
    label_css: str = field(init=False, repr=False, compare=False)
    """A label of more than two characters is drawn smaller."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", "node gap" if self.card is None else "node")
        object.__setattr__(self, "label_css", "node-label long" if len(self.label) > 2 else "node-label")


@dataclass(frozen=True)
class TransferView:
    """A collective in flight, and its arrows between the cards (SVG paths in a drawing `width` × 28)."""

    description: str
    volume: str
    nodes: tuple[TransferNode, ...]
    paths: tuple[str, ...]
    ring: bool
    width: float = 100.0
    """The drawing's width in SVG units; 28 high."""
    crossing: tuple[bool, ...] = ()
    """For each path, whether it goes between nodes: drawn dashed, as the network is on the grid."""
    boundaries: tuple[float, ...] = ()
    """Where one node ends and the next begins in the drawing: a dashed rule each."""
    arrows: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)
    """Each path with its classes: "arrow between" where it goes between nodes."""
    ring_words: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        between = tuple(self.crossing) + (False,) * (len(self.paths) - len(self.crossing))
        arrows = tuple((d, "arrow between" if far else "arrow") for d, far in zip(self.paths, between, strict=False))
        object.__setattr__(self, "arrows", arrows)
        object.__setattr__(self, "ring_words", ", passed around the ring" if self.ring else "")


@dataclass(frozen=True)
class StepButton:
    """One of the step's moves (first, previous, next, last), as a link.

    Where there is nowhere to go, a control that stays, disabled but focusable, so it neither moves nor drops
    the focus of someone pressing it.
    """

    attrs: dict[str, str | None]
    before: str
    """The arrow before the word (first, previous), or after it (`after`: next, last)."""
    word: str
    after: str


def step_button(href: str | None, rel: str, label: str, glyph: str, word: str, glyph_first: bool = True) -> StepButton:
    """A move's control; a narrow bar shows First and Last by their arrows alone (app.css), their names unchanged."""
    attrs: dict[str, str | None] = {"id": f"step-{rel}", "aria-label": label, "data-step": rel}
    if href:
        attrs |= {"class": "step-button", "href": href, "hx-get": href, "hx-target": "#widget", "hx-swap": "morph",
                  "hx-push-url": "true"}  # fmt: skip
    else:
        attrs |= {"class": "step-button disabled", "role": "link", "aria-disabled": "true", "tabindex": "0"}
    before, after = (f"{glyph} ", "") if glyph_first else ("", f" {glyph}")
    return StepButton(attrs, before, word, after)


@dataclass(frozen=True)
class StepView:
    """One phase of one training step: what happens, what moves, and the controls."""

    index: int
    last: int
    title: str
    explanation: str
    transfers: tuple[TransferView, ...]
    tally: str
    total: str
    prev_href: str | None
    next_href: str | None
    first_href: str
    last_href: str
    rest_href: str
    hidden: tuple[tuple[str, str], ...]
    """The fields the phase slider sends with the phase: the stage and the run."""
    note: str = ""
    more: str = ""
    """The longer explanation, one "More" away."""
    layers: str = ""
    """What the columns are: the model in eighths, or the lesson's 8 equal layers."""
    columns: tuple[str, ...] = ()
    """What each of the 8 columns stands for, e.g. '5: layers 51–61 of 80'; then a mixture of experts' columns."""
    relation: str = ""
    """How the cards' slices line up with the columns."""
    partial: bool = False
    """Whether any drawn cell is part held, so the legend explains it only when it is there."""
    action: str = ""
    """Where the phase slider is sent (the page's or the embed's path); empty: the page."""
    pcie: str = ""
    """What crosses each card's PCIe link in this phase, with offload; blank when nothing does."""
    pcie_tally: str = ""
    """Each card's PCIe bytes so far, of the step's; blank without offload."""
    chart: ChartView | None = None
    """One card's memory through the step, every stage, this phase marked."""
    links_tally: str = ""
    """Each card's bytes so far inside its node and between nodes, of the step's; blank on one node."""
    schedule: ScheduleView | None = None
    """The pipeline's schedule, with pp > 1 (`schedule_view`)."""
    buttons: tuple[StepButton, ...] = field(init=False, repr=False, compare=False)
    """First, previous, next and last."""
    links_tallies: tuple[str, ...] = field(init=False, repr=False, compare=False)
    pcie_tallies: tuple[str, ...] = field(init=False, repr=False, compare=False)
    mores: tuple[str, ...] = field(init=False, repr=False, compare=False)
    notes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    in_flight_css: str = field(init=False, repr=False, compare=False)
    """As tall with or without arrows: "none" marks a phase where nothing moves."""
    still: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """What is said where no arrow is drawn."""
    pcies: tuple[str, ...] = field(init=False, repr=False, compare=False)
    charts: tuple[ChartView, ...] = field(init=False, repr=False, compare=False)
    schedules: tuple[ScheduleView, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        buttons = (
            step_button(self.first_href if self.index > 0 else None, "first", "First phase", "«", "First"),
            step_button(self.prev_href, "prev", "Previous phase", "◀", "Previous"),
            step_button(self.next_href, "next", "Next phase", "▶", "Next", False),
            step_button(self.last_href if self.index < self.last else None, "last", "Last phase", "»", "Last", False),
        )
        derived = {
            "buttons": buttons,
            "links_tallies": shown(self.links_tally),
            "pcie_tallies": shown(self.pcie_tally),
            "mores": shown(self.more),
            "notes": shown(self.note),
            "in_flight_css": "in-flight" if self.transfers else "in-flight none",
            "still": () if self.transfers else ("Nothing moves between cards in this phase.",),
            "pcies": shown(self.pcie),
            "charts": shown(self.chart),
            "schedules": shown(self.schedule),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


NODE_SPACING = 12.5


def drawing_width(nodes: tuple[TransferNode, ...]) -> float:
    """The transfer drawing's width in SVG units: 100, or wider for more than 8 cards."""
    return max(100.0, NODE_SPACING * len(nodes))


def _nodes(shown: tuple[int, ...], gpus: int) -> tuple[TransferNode, ...]:
    """The cards in the transfer drawing: every drawn card, and the gap standing for the rest."""
    entries: list[tuple[str, int | None]] = []
    for position, card in enumerate(shown):
        if position and card - shown[position - 1] > 1:
            entries.append(("…", None))
        entries.append((str(card), card))
    # 12.5 units a card, as 8 cards across a 100-unit drawing: more cards make a wider drawing
    # rather than smaller boxes, so a label stays as large at 16 cards as at 8.
    spacing = max(100 / len(entries), NODE_SPACING)
    width = min(8.0, spacing * 0.8)
    return tuple(
        TransferNode(x=spacing * (i + 0.5), width=width, label=label, card=card)
        for i, (label, card) in enumerate(entries)
    )


def _arc(x1: float, x2: float, above: bool) -> str:
    bend = min(9.0, abs(x2 - x1) / 6 + 3)
    y, control = (10, 10 - bend) if above else (18, 18 + bend)
    return f"M{x1:.2f},{y} Q{(x1 + x2) / 2:.2f},{control:.2f} {x2:.2f},{y}"


def _owners(transfer: InFlight, run: Run) -> frozenset[int]:
    """The cards that hold a column's slice for a collective: in each of its groups, the slice's holders."""
    group = {Scope.GROUP: run.shards, Scope.SECONDARY: run.setup.hpz}.get(transfer.scope, run.gpus)
    held = holders(transfer.columns[0], group)
    return frozenset(start + h for start in range(0, run.gpus, group) for h in held)


def _transfer_view(transfer: InFlight, nodes: tuple[TransferNode, ...], run: Run, units: ByteUnit) -> TransferView:
    per_node = run.gpus_per_node
    node_of = {n.card: n.card // per_node for n in nodes if n.card is not None}
    boundaries = tuple(
        (a.x + b.x) / 2
        for a, b in itertools.pairwise(nodes)
        if a.card is not None and b.card is not None and node_of[a.card] != node_of[b.card]
    )
    volume = p_units(transfer.volume_p)
    if run.nodes > 1:
        volume += (
            f", {units.show(ceil(transfer.inside))} inside a node and {units.show(ceil(transfer.between))} between"
        )
    width = drawing_width(nodes)
    if transfer.scope is Scope.REPLICAS and run.shards > 1:
        # Hybrid sharding's all-reduce: each card with the one keeping the same slice in every other group.
        drawn_cards = [n for n in nodes if n.card is not None]
        pairs = [
            (a, b)
            for a in drawn_cards
            for b in drawn_cards
            if a.card is not None
            and b.card is not None
            and a.card < b.card
            and a.card % run.shards == b.card % run.shards
        ]
        paths = tuple(_arc(a.x, b.x, above=i % 2 == 0) for i, (a, b) in enumerate(pairs))
        crossing = tuple(_between(a, b, per_node) for a, b in pairs)
        return TransferView(
            transfer.description, volume, nodes, paths, ring=False, width=width, crossing=crossing,
            boundaries=boundaries,
        )  # fmt: skip
    if len(transfer.columns) == 1:
        owners = _owners(transfer, run)
        drawn = {n.card for n in nodes if n.card is not None}
        # Cards left out of the drawing speak through the gap node.
        hidden_owner = any(card not in drawn for card in owners)
        sources = [n for n in nodes if (n.card is None and hidden_owner) or (n.card is not None and n.card in owners)]
        targets = [n for n in nodes if n not in sources]
        if (transfer.scope is not Scope.REPLICAS and run.shards < run.gpus) or transfer.scope is Scope.SECONDARY:
            # Each group gathers from its own holders: a card's arcs stay in its group.
            size = run.setup.hpz if transfer.scope is Scope.SECONDARY else run.shards
            pairs = [(a, b) for a in sources for b in targets if _same_group(a, b, size)]
        else:
            pairs = [(a, b) for a in sources for b in targets]
        if transfer.collective is Collective.ALL_GATHER:
            # The owners send the column to every card: arcs above.
            paths = tuple(_arc(a.x, b.x, above=True) for a, b in pairs)
        else:
            # Every card sends its part of the sums to the owners: arcs below.
            paths = tuple(_arc(b.x, a.x, above=False) for a, b in pairs)
        crossing = tuple(_between(a, b, per_node) for a, b in pairs)
        return TransferView(
            transfer.description, volume, nodes, paths, ring=False, width=width, crossing=crossing,
            boundaries=boundaries,
        )  # fmt: skip
    # Every column at once: the ring algorithm, each card passing slices to its neighbour, the
    # last one back to the first.
    steps = tuple(f"M{a.x + a.width / 2:.2f},14 L{b.x - b.width / 2:.2f},14" for a, b in itertools.pairwise(nodes))
    first, last = nodes[0], nodes[-1]
    back = f"M{last.x:.2f},18 C{last.x:.2f},27 {first.x:.2f},27 {first.x:.2f},18"
    crossing = (*(_between(a, b, per_node) for a, b in itertools.pairwise(nodes)), _between(last, first, per_node))
    return TransferView(
        transfer.description, volume, nodes, (*steps, back), ring=True, width=width, crossing=crossing,
        boundaries=boundaries,
    )  # fmt: skip


def _same_group(a: TransferNode, b: TransferNode, size: int) -> bool:
    return a.card is None or b.card is None or a.card // size == b.card // size


def _between(a: TransferNode, b: TransferNode, per_node: int) -> bool:
    """Whether an arrow from one drawn card to another crosses between nodes (a gap: when either side may)."""
    if a.card is None or b.card is None:
        return False
    return a.card // per_node != b.card // per_node


def _step_label(phase: Phase, card: int, column: Column, spec: BandSpec, holding: Holding, part: Share | None) -> str:
    where = f"GPU {card:,}, column {column.index} ({column.label}), {spec.label} ({spec.precision}, {spec.shown} B)"
    start, held = card - card % phase.group, holders(column.index, phase.group)  # the card's own shard group
    owning = range(start + held.start, start + held.stop)
    owners = cards_text(owning)
    if holding is Holding.GATHERED:
        return f"{where}: assembled here from {owners}, one layer at a time, for this phase only, then discarded."
    if holding is Holding.SENT:
        kept = f"keeps the sums of its own {part.text} and sends the rest" if part else "sends them all"
        return f"{where}: computed here, then reduce-scattered to {owners}; this card {kept}, then drops them."
    if holding is Holding.DASHED:
        return f"{where}: not here. {owners} {'holds' if len(owning) == 1 else 'hold'} it on this column's behalf."
    if holding is Holding.PARTIAL and part is not None:
        return f"{where}: this card holds its slice, {part.text} of the column; {owners} hold the rest."
    if spec.band in phase.sharded:
        return f"{where}: held on this card, which is responsible for this column."
    return f"{where}: held on this card; every card keeps its own copy."


def _step_cell(phase: Phase, card: int, column: Column, spec: BandSpec) -> CellView:
    holding = phase.holding(card, column.index, spec.band)
    part = phase.slice_of(card, column.index)
    strip = None
    if holding is Holding.PARTIAL and part is not None:
        start = int(part.start * SHARE_STEPS)
        # Never narrower than one step, so a 1/128 slice still shows.
        strip = (start, max(start + 1, round(part.end * SHARE_STEPS)))
    return CellView(
        card=card,
        weight=column.index,
        band=spec.band,
        state=holding.state,
        holder=card - card % phase.group + holders(column.index, phase.group)[0],
        nbytes=band_height(spec.nbytes),
        label=_step_label(phase, card, column, spec, holding, part),
        holding=holding,
        active=phase.active(card, column.index, spec.band),
        strip=strip,
        share=part.text if strip and part else "",
    )


def _step_columns(phase: Phase, scenario: Scenario, card: int, mine: set[int]) -> tuple[ColumnView, ...]:
    """One card's columns in a phase."""
    run, recipe = scenario.run, scenario.recipe
    specs = legend(recipe)
    return tuple(
        ColumnView(
            weight=column.index,
            responsible=column.index in mine,
            axis_label=str(column.index),
            missing=column_height(recipe) - band_height(recipe.nbytes(Band.WEIGHTS))
            if run.frozen_column(column.index)
            else 0,
            cells=tuple(
                _step_cell(phase, card, column, spec)
                for spec in specs
                # A frozen column keeps its weights only: no gradient, master copy or moments.
                if spec.band is Band.WEIGHTS or not run.frozen_column(column.index)
            ),
        )
        for column in scenario.columns
    )


def _step_cards(scenario: Scenario, phases: tuple[Phase, ...], phase: Phase) -> tuple[CardView | CardGap, ...]:
    run, units, recipe = scenario.run, scenario.units, scenario.recipe
    peak = phase.peak_bytes_so_far
    now = phase.live_bytes
    row = scenario.report[phase.stage]
    bar = card_bar(scenario, phase.stage, phase.extra, peak, *card_total(row, units, step=True), row.fits)
    shown = shown_indices(run.gpus)
    away, title = row.on_host, host_title(row)
    cards: list[CardView | CardGap] = []
    for position, card in enumerate(shown):
        if position and (hidden := card - shown[position - 1] - 1):
            cards.append(CardGap(f"GPU {card - hidden:,} to GPU {card - 1:,}: the same pattern"))
        mine = set(owned_columns(card % run.shards, run.shards)) if phase.sharded else set()
        # With the model cut, the card's stage's columns and tensor slice (cut_view), the phase's marks on them.
        # A mixture of experts' cards draw the model's columns too, and the experts' apart (expert_view).
        cut = draws_cut(scenario)
        view_columns = cut_step_columns(phase, scenario, card) if cut else _step_columns(phase, scenario, card, mine)
        at_rest = cut_step_columns if moe_of(scenario) is not None else None
        rest = (
            (at_rest(phases[0], scenario, card) if at_rest else _step_columns(phases[0], scenario, card, mine))
            if away
            else None
        )
        on_card, host = split_host(view_columns, away, recipe, title, rest)
        name = f"GPU {card:,}"
        hosted = host.columns if host else ()
        cards.append(
            CardView(
                index=card,
                title=name,
                columns=on_card,
                host=host,
                bytes_per_weight=f"now {units.show(now)}",
                model_bytes=f"peak {units.show(peak)}",
                bar=bar,
                summary=holding_sentence(
                    name, "column", COLUMNS, recipe, on_card[:COLUMNS], hosted[:COLUMNS], f"{units.show(now)} now"
                )
                + experts_held(scenario, card),
                tab_stop=position == 0,
                # The step's 8 columns are eighths of the model, not the grid's weights: hpZ's strip keeps its room.
                secondary=NO_COPY if run.setup.hpz > 1 else None,
            )
        )
    return tuple(cards)


def _layers(scenario: Scenario) -> str:
    """What the step's columns stand for."""
    if scenario.equal_layers and scenario.run.largest_layer is not None:
        return (
            f"In the step the model is {COLUMNS} equal layers of {scenario.run.largest_layer:,} weights, "
            "one a column, first to last."
        )
    if moe_of(scenario) is not None:  # the experts' columns after the dense ones (expert_view)
        return (
            f"In the step columns 0 to {COLUMNS - 1} are the model in eighths, first layer to last, without their "
            "routed experts; a layer cut by a column's edge counts in both. After the rule, the experts' columns: "
            "while a column of expert blocks is in hand, each card computes the tokens routed to its experts."
        )
    return (
        f"In the step the {COLUMNS} columns are the model in eighths, first layer to last; a layer cut by a "
        "column's edge counts in both."
    )


def _relation(scenario: Scenario, stage: Stage) -> str:
    """How the cards' slices line up with the columns; with the model cut, what one card keeps of a column."""
    if scenario.run.cut.cuts:
        return _cut_relation(scenario, stage)
    return _uncut_relation(scenario.run.gpus)


def _cut_relation(scenario: Scenario, stage: Stage) -> str:
    """What one card keeps of a column with the model cut: its stage's blocks, ÷ tp, its experts, then ZeRO's share.

    In that order, as the card's state is counted (`sizing.loaded_card`): the pipeline stage's blocks, each
    ÷ tp, a mixture of experts' routed experts ÷ ep (each ÷ etp) instead, then ZeRO's slice of what is left
    over the data-parallel group (dp × cp), the experts' over their expert-data-parallel group.
    """
    run, architecture = scenario.run, scenario.architecture
    cut, gpus = run.cut, run.gpus
    kept: list[str] = []
    if cut.pp > 1:
        if architecture is None:
            kept.append(f"its pipeline stage's 1/{cut.pp} of the model")
        else:
            counts = stage_blocks(architecture.layers, cut.pp)
            least, most = min(counts), max(counts)
            some = f"{least}" if least == most else f"{least} to {most}"
            kept.append(f"its pipeline stage's blocks ({some} of the {architecture.layers}), not the other stages'")
    if cut.tp > 1:
        kept.append(f"each block's weights ÷ tp {cut.tp}")
    moe = moe_of(scenario)
    if moe is not None and moe.moe is not None and cut.ep > 1:
        experts = moe.moe.experts
        each = f", each ÷ etp {cut.expert_tp}" if cut.expert_tp > 1 else ""
        kept.append(f"of the {experts} routed experts only its {experts // cut.ep} (÷ ep {cut.ep}){each}")
    said = "With the model cut, a card keeps of a column only " + "; ".join(kept) + "."
    if not stage.sharded:
        return said
    if run.zero_group == 1:  # the cut takes every card: no other card keeps the same share
        return f"{said} Its data-parallel group is itself alone, so {stage.info.title} has nothing to split."
    dp, edp = run.shards, cut.edp(gpus)
    phrase = run.recipe.phrase(tuple(band for band in Band if band in stage.sharded))
    experts_too = (
        f", and for 1/{edp:,} of its experts' (over the expert-data-parallel group)"
        if moe is not None and cut.ep > 1 and edp > 1
        else ""
    )
    return (
        f"{said} Of that, {stage.info.title} makes it responsible for 1/{dp:,} of {phrase} "
        f"(over its data-parallel group){experts_too}."
    )


def _uncut_relation(gpus: int) -> str:
    """How the cards' slices line up with the columns."""
    if gpus == 1:
        return "With one GPU the card holds every column."
    if gpus == COLUMNS:
        return "With 8 GPUs, GPU i is responsible for column i (underlined)."
    per_card = Share(Fraction(0), Fraction(COLUMNS, gpus)).text
    if gpus < COLUMNS:
        return f"With {gpus} GPUs each card is responsible for {per_card} columns (underlined)."
    return f"With {gpus:,} GPUs each card is responsible for {per_card} of a column (underlined), drawn as a strip."


def _links_tally(scenario: Scenario, phase: Phase, last: Phase) -> str:
    """Each card's bytes so far on each link, of the step's: "62.8 GiB of 125.7 GiB inside a node, …"."""
    run, units = scenario.run, scenario.units
    if run.nodes == 1:  # one node: every byte is inside it, and the tally above says how many
        return ""
    inside = f"{units.show(ceil(phase.inside_so_far))} of {units.show(ceil(last.inside_so_far))} inside a node"
    between = f"{units.show(ceil(phase.between_so_far))} of {units.show(ceil(last.between_so_far))} between nodes"
    return f"{inside}, {between}"


def step_view(
    stage: Stage, scenario: Scenario, link: Links, index: int
) -> tuple[StepView, tuple[CardView | CardGap, ...]]:
    """One phase of the step: the panel, and the cards as they are at that moment."""
    run = scenario.run
    columns = scenario.columns
    phases = scenario.report.step(stage)
    phase = phases[index]
    nodes = _nodes(shown_indices(run.gpus), run.gpus)
    hidden = (("stage", stage.value), *link.kept)
    cards = _step_cards(scenario, phases, phase)
    view = StepView(
        index=index,
        last=LAST_PHASE,
        title=phase.title,
        explanation=explanation(phase, run.recipe, columns),
        more=detail(phase, columns),
        transfers=tuple(_transfer_view(t, nodes, run, scenario.units) for t in phase.transfers),
        tally=p_units(phase.tally_p),
        total=p_units(phases[-1].tally_p),
        prev_href=link.at(stage, index - 1) if index > 0 else None,
        next_href=link.at(stage, index + 1) if index < LAST_PHASE else None,
        first_href=link.at(stage, 0),
        last_href=link.at(stage, LAST_PHASE),
        rest_href=link.at(stage, None),
        hidden=hidden,
        action=link.page,
        # Said where a layer in hand would be counted, had it a size.
        note=UNKNOWN_LAYER_NOTE if run.largest_layer is None and (phase.sharded & LAYER_BANDS) else "",
        columns=(*(f"{column.index}: {column.label}" for column in columns), *experts_column_key(scenario)),
        relation=_relation(scenario, stage),
        layers=_layers(scenario),
        pcie=" ".join(f"Over PCIe: {m.description}, {scenario.units.show(m.nbytes)} per card." for m in phase.pcie),
        pcie_tally=(
            f"{scenario.units.show(phase.pcie_bytes)} of {scenario.units.show(phases[-1].pcie_bytes)}"
            if phases[-1].pcie_bytes
            else ""
        ),
        chart=chart_view(stage, scenario, index),
        links_tally=_links_tally(scenario, phase, phases[-1]),
        schedule=schedule_view(scenario),
        partial=any(
            cell.holding is Holding.PARTIAL
            for card in cards
            if isinstance(card, CardView)
            for column in card.columns
            for cell in column.cells
        ),
    )
    return view, cards
