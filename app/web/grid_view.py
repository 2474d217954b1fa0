"""The cards at rest: each card's columns of cells (one per weight drawn), its figures and its bar."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import lru_cache
from typing import ClassVar

from app.domain.recipes import Band, Recipe, bytes_a_weight
from app.domain.report import Change, Holding, Place, StageReport
from app.domain.scenario import Scenario
from app.domain.sharding import Cell, CellState, Layout, layout
from app.domain.stages import Stage
from app.domain.units import ByteUnit, per_weight
from app.web.bars import BarView, card_bar
from app.web.card_words import holding_sentence
from app.web.parts import shown


@dataclass(frozen=True)
class CellView:
    """One band of one weight on one card."""

    card: int
    weight: int
    band: Band
    state: CellState
    holder: int
    nbytes: int
    label: str
    holding: Holding | None = None
    """During a step: held, gathered for this phase only, or dashed; None at rest."""
    active: bool = False
    """Whether the phase shown works on this cell."""
    strip: tuple[int, int] | None = None
    """A partial cell's part of the column, in 48ths: where its strip starts and ends."""
    share: str = ""
    """A partial cell's part of the column as people write it ("1/2"), for the card's sentence; blank if whole."""
    changed: bool = False
    """Whether the cell changed state (filled or dashed) since the stage the person came from."""
    on_host: bool = False
    """Whether it lives in the card's host (offloaded), drawn in the host's strip under the card."""
    replica: bool = False
    """Kept because hybrid sharding replicates it across the shard groups, where one group would dash it."""
    expert: bool = False
    """A mixture of experts' routed experts' cell (`expert_view`): another rank's are hatched the other way."""
    css: str = field(init=False, repr=False, compare=False)
    """The cell's classes: band hue, state, height in bytes, and during a step its holding."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", self._css())

    def _css(self) -> str:
        extra = (f" {self.holding}" if self.holding else "") + (" active" if self.active else "")
        if self.strip:
            extra += f" from-{self.strip[0]} to-{self.strip[1]}"
        if self.changed:
            extra += " changed"
        if self.on_host:
            extra += " on-host"
        if self.replica:
            extra += " replica"
        if self.expert:
            extra += " expert"
        return f"cell band-{self.band} {self.state} nb-{self.nbytes}{extra}"


@dataclass(frozen=True)
class ColumnView:
    """One weight's stack of bands on one card, or the gap standing for the weights not drawn."""

    weight: int | None
    responsible: bool
    cells: tuple[CellView, ...]
    gap_label: str = ""
    axis_label: str = "…"
    missing: int = 0
    """Bytes of the bands a frozen weight has not (gradients, master copy, moments): left blank."""
    away: tuple[int, ...] = ()
    """Bytes of each band left blank: on a card in a step, the offloaded ones; in a host's strip, a frozen weight's."""
    group: str = ""
    """Its column group's classes: "expert" for a mixture of experts' (`expert_view`), "first" the rule before."""
    kind: str = field(init=False, repr=False, compare=False)
    """Which of the template's drawings: "column", or "gap" for the weights not drawn."""
    css: str = field(init=False, repr=False, compare=False)
    axis_class: str | None = field(init=False, repr=False, compare=False)
    missings: tuple[int, ...] = field(init=False, repr=False, compare=False)
    """The frozen weight's blank place, if it has one."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", "gap" if self.weight is None else "column")
        css = "column responsible" if self.responsible else "column"
        object.__setattr__(self, "css", f"{css} {self.group}" if self.group else css)
        axis = " ".join(word for word in ("responsible" if self.responsible else "", self.group) if word)
        object.__setattr__(self, "axis_class", axis or None)
        object.__setattr__(self, "missings", (self.missing,) if self.missing else ())


@dataclass(frozen=True)
class CardView:
    """One GPU: its columns, its total and its memory bar."""

    index: int
    title: str
    columns: tuple[ColumnView, ...]
    bytes_per_weight: str
    model_bytes: str
    bar: BarView
    """Its memory, at rest then in hand, on the scale of all four stages; its caption the total, then the verdict."""
    summary: str = ""
    """What it holds, in one sentence (`holding_sentence`): what a screen reader reads instead of its cells."""
    tab_stop: bool = False
    """Whether it is the grid's one tab stop (static/grid.js moves it to the card of the cell last focused)."""
    host: Host | None = None
    """The card's host strip, with the bands offloaded to it; None when nothing is."""
    secondary: Secondary | None = None
    """ZeRO++'s hpZ: the card's slice of the second copy of the weights; None without hpZ."""
    kind: ClassVar[str] = "card"
    stack_css: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The plot and its host's strip in one stack, with its classes; empty without a host (`bare_plots`)."""
    bare_plots: tuple[tuple[ColumnView, ...], ...] = field(init=False, repr=False, compare=False)
    secondaries: tuple[Secondary, ...] = field(init=False, repr=False, compare=False)
    tabindex: int = field(init=False, repr=False, compare=False)
    """0 for the grid's one tab stop, -1 for the other cards: its cells are hidden from assistive tech, so the
    tab stop is the card, whose sentence is read; the arrow keys go on into its cells (static/grid.js)."""

    def __post_init__(self) -> None:
        host = self.host
        stack = () if host is None else (f"stack hs-{host.share}" + ("" if host.shrinks else " in-step"),)
        object.__setattr__(self, "stack_css", stack)
        object.__setattr__(self, "bare_plots", () if host else (self.columns,))
        object.__setattr__(self, "secondaries", shown(self.secondary))
        object.__setattr__(self, "tabindex", 0 if self.tab_stop else -1)


@dataclass(frozen=True)
class SecondarySlot:
    """One drawn weight in hpZ's strip: whether this card keeps that weight's slice of the second copy."""

    solid: bool
    label: str
    kind: ClassVar[str] = "slot"
    css: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", f"slot band-weights {'solid' if self.solid else 'dashed'}")


@dataclass(frozen=True)
class SlotGap:
    """Where hpZ's strip leaves weights out."""

    kind: ClassVar[str] = "gap"


SLOT_GAP = SlotGap()


@dataclass(frozen=True)
class Secondary:
    """hpZ's band of its own, under a card: the second copy of the weights, split across `hpz` cards."""

    title: str
    slots: tuple[SecondarySlot | None, ...]
    """One a drawn weight, None where the grid leaves weights out."""
    kind: str = field(init=False, repr=False, compare=False)
    """"placeholder" (`placeholder`) or "secondary"."""
    parts: tuple[SecondarySlot | SlotGap, ...] = field(init=False, repr=False, compare=False)
    """The slots, a gap where the grid leaves weights out."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", "placeholder" if self.placeholder else "secondary")
        object.__setattr__(self, "parts", tuple(slot or SLOT_GAP for slot in self.slots))

    @property
    def placeholder(self) -> bool:
        """An empty strip, under the stages without hpZ's copy: every stage's cards are as tall."""
        return not self.slots


NO_COPY = Secondary("", ())
"""hpZ's strip under a stage that keeps no second copy: its room, kept empty (an embed keeps one height)."""


def secondary(run_gpus: int, hpz: int, shown: tuple[int, ...], card: int, nbytes: Fraction) -> Secondary:
    """A card's slots of hpZ's copy: a weight's slice lives on the card of its place among each hpz cards."""
    slots: list[SecondarySlot | None] = []
    for position, weight in enumerate(shown):
        if _hidden_before(shown, position):
            slots.append(None)
        holder = card - card % hpz + weight % hpz
        solid = holder == card
        where = f"Weight {weight:,}, hpZ's second copy of its weights ({bytes_a_weight(nbytes)} B)"
        slots.append(
            SecondarySlot(
                solid,
                f"{where}: kept here, for the backward's gather inside the node."
                if solid
                else f"{where}: not here. GPU {holder:,}, in this card's hpZ group, keeps it.",
            )
        )
    return Secondary(f"hpZ copy, 1/{hpz:,} a card", tuple(slots))


@dataclass(frozen=True)
class Host:
    """The strip under a card: the bands that live in its host's memory, in the card's columns."""

    title: str
    columns: tuple[ColumnView, ...]
    share: int
    """Its height, in 48ths of the card's plot: the offloaded bands' share of the bytes of a weight."""
    shrinks: bool = True
    """Whether the card's plot gives the strip its share (at rest), or keeps its height (in a step)."""


@dataclass(frozen=True)
class CardGap:
    """Where the grid leaves cards out."""

    label: str
    kind: ClassVar[str] = "gap"


def band_height(nbytes: Fraction) -> int:
    """A band's height in the grid, in whole bytes (the CSS classes nb-1 to nb-16).

    Its bytes a weight rounded to the nearest, half up, and at least 1 where it has any. A blockwise
    format's fraction of a byte (8-bit Adam's 2.03 B) would not show at a cell's size, and NF4's
    0.516 B still gets a cell.
    """
    return 0 if nbytes == 0 else max(1, math.floor(nbytes + Fraction(1, 2)))


def column_height(recipe: Recipe) -> int:
    """A column's height in the grid: its bands' drawn heights together."""
    return sum(band_height(spec.nbytes) for spec in recipe.specs)


def cell_label(cell: Cell, recipe: Recipe, sharded: bool) -> str:
    """What a person hovering, focusing or listening to a cell is told; `sharded`: whether the stage shards its band."""
    spec = recipe.spec(cell.band)
    # The card is named once, by its heading (the tooltip opens over it) and its sentence (what a screen reader
    # reads; the plot is hidden from it): 520 B of the first load's 40 kB were "GPU n, " in each cell.
    where = f"Weight {cell.weight}, {spec.label} ({spec.precision}, {spec.shown} B)"
    if cell.state is CellState.DASHED:
        return f"{where}: not stored here. GPU {cell.holder} holds it on this weight's behalf."
    if cell.replica:
        return (
            f"{where}: stored on this card, which is responsible for weight {cell.weight} in its shard group; "
            "each shard group keeps its own copy (hybrid sharding)."
        )
    # A band the stage keeps whole is every card's own copy, on the card responsible for the weight too.
    if sharded and cell.holder == cell.card:
        return f"{where}: stored on this card, which is responsible for weight {cell.weight}."
    return f"{where}: stored on this card; every card keeps its own copy."


def _hidden_before(shown: tuple[int, ...], position: int) -> int:
    """How many cards (or weights) a sampled grid leaves out just before `shown[position]`."""
    return shown[position] - shown[position - 1] - 1 if position else 0


def _columns(
    grid: Layout, card: int, moved: Change | None = None, frozen: frozenset[int] = frozenset()
) -> tuple[ColumnView, ...]:
    """A card's columns.

    A `frozen` weight's column keeps its weights band only: no gradient, master copy or moments.
    """
    recipe = grid.recipe
    cells = [
        c
        for c in grid.card_cells(card)
        if recipe.nbytes(c.band) > 0 and (c.band is Band.WEIGHTS or c.weight not in frozen)
    ]
    by_weight: dict[int, list[Cell]] = {}
    for c in cells:
        by_weight.setdefault(c.weight, []).append(c)
    columns: list[ColumnView] = []
    for position, weight in enumerate(grid.shown):
        if hidden := _hidden_before(grid.shown, position):
            columns.append(ColumnView(None, False, (), f"{hidden:,} more weights"))
        responsible = weight % grid.shards == card % grid.shards and bool(grid.stage.sharded)
        # Past ten columns every other number is left out, so two-digit labels still fit.
        labelled = len(grid.shown) <= 10 or weight % 2 == 0 or responsible
        columns.append(
            ColumnView(
                weight=weight,
                responsible=responsible,
                axis_label=str(weight) if labelled else "",
                missing=column_height(recipe) - band_height(recipe.nbytes(Band.WEIGHTS)) if weight in frozen else 0,
                cells=tuple(
                    CellView(
                        card=c.card,
                        weight=c.weight,
                        band=c.band,
                        state=c.state,
                        holder=c.holder,
                        nbytes=band_height(recipe.nbytes(c.band)),
                        label=cell_label(c, recipe, c.band in grid.stage.sharded)
                        + (" Frozen: it has no gradient and needs no optimizer state." if c.weight in frozen else ""),
                        changed=moved is not None
                        and moved.cell_changes(c.card, c.weight, c.band, grid.gpus, grid.shards),
                        replica=c.replica,
                    )
                    for c in by_weight[weight]
                ),
            )
        )
    return tuple(columns)


# A card's cells depend on the stage, the cluster and the recipe (and the stage left), not on the
# model's size: a class trying other sizes on the same cluster gets them built once. Pure
# functions of hashable inputs, bounded: split_host's 512, full of clusters of thousands of GPUs, held
# 13.2 MB (bench.memory's distinct clusters, tracemalloc); docs/performance.md adds up a worker's bound.
_layout = lru_cache(maxsize=64)(layout)


@lru_cache(maxsize=512)
def card_columns(
    stage: Stage,
    gpus: int,
    recipe: Recipe,
    card: int,
    moved: Change | None,
    frozen: frozenset[int] = frozenset(),
    shards: int | None = None,
) -> tuple[ColumnView, ...]:
    """One drawn card's columns of cells (see `_columns`), built once for each set of inputs."""
    return _columns(_layout(stage, gpus, recipe, shards), card, moved, frozen)


def host_title(row: StageReport) -> str:
    """What a card's host strip is: the server's CPU memory (pinned or not) or its NVMe drive."""
    places = set(row.band_places.values())
    if Place.NVME in places:
        return "Host: the server's NVMe drive"
    return "Host: the server's CPU memory" + (", pinned" if Place.CPU_PINNED in places else "")


IN_HAND = frozenset({Holding.GATHERED, Holding.SENT})
"""What a card holds of a band for the layer in hand, offloaded or not: it is on the card for that phase."""


@lru_cache(maxsize=512)
def split_host(
    columns: tuple[ColumnView, ...],
    away: frozenset[Band],
    recipe: Recipe,
    title: str,
    rest: tuple[ColumnView, ...] | None = None,
) -> tuple[tuple[ColumnView, ...], Host | None]:
    """A card's columns, with the bands in `away` moved into its host's strip, in the same places.

    At rest the card's plot shrinks by the host's share and the strip takes it, so a byte is as tall
    on both sides of the link and the two together are as tall as the card was. During a step (`rest`:
    the same card's columns at rest) the card keeps its height, with a blank where each offloaded band
    was, so that the layer in hand, gathered or computed on the card, shows in its place; the strip
    keeps that band's slice as it is at rest.
    """
    if not away:
        return columns, None
    where = f" Offloaded: it lives in {title.removeprefix('Host: ')}, not on the card."
    moved_bytes = sum(band_height(recipe.nbytes(b)) for b in away)
    kept_bytes = column_height(recipe) - moved_bytes if rest is None else column_height(recipe)
    on_card: list[ColumnView] = []
    hosted: list[ColumnView] = []
    for index, column in enumerate(columns):
        if column.weight is None:
            on_card.append(column)
            hosted.append(column)
            continue
        at_rest = {c.band: c for c in (rest[index].cells if rest else ())}
        here = tuple(c for c in column.cells if c.band not in away or (rest and c.holding in IN_HAND))
        gone = tuple(
            replace(at_rest[c.band] if c.holding in IN_HAND else c, on_host=True, label=c.label + where)
            for c in column.cells
            if c.band in away
        )
        lacks = tuple(  # a frozen weight has no optimizer state to offload: its place stays blank
            band_height(recipe.nbytes(b))
            for b in Band
            if b in away and band_height(recipe.nbytes(b)) and all(c.band is not b for c in gone)
        )
        # A frozen column's blank is what it lacks on the card: the card's bytes less its cells'.
        missing = moved_bytes and column.missing and kept_bytes - sum(c.nbytes for c in here)
        blanks = () if rest is None else tuple(c.nbytes for c in gone if all(h.band is not c.band for h in here))
        on_card.append(replace(column, cells=here, missing=missing, away=blanks))
        hosted.append(replace(column, cells=gone, away=lacks, missing=0))
    share = round(48 * moved_bytes / column_height(recipe))
    return tuple(on_card), Host(title, tuple(hosted), share, shrinks=rest is None)


def card_total(row: StageReport, units: ByteUnit, step: bool = False) -> tuple[str, str]:
    """A card's total at its peak, and its verdict on the card given (blank without one).

    Each short enough for one line under a card: "Peak 69.8 GiB", then "✓ fits, 4.7 GiB left" or
    "✗ over by 32.8 GiB". In the step (`step`), "Step's peak 69.8 GiB": the whole step's, which the verdict
    weighs, beside the card's own figure now and its peak so far.
    """
    total = ("Step's peak " if step else "Peak ") + units.show(row.peak_bytes)
    if row.fits is None or row.headroom_bytes is None:
        return total, ""
    if row.fits:
        return total, f"✓ fits, {units.show(row.headroom_bytes)} left"
    return total, f"✗ over by {units.show(-row.headroom_bytes)}"


def rest_cards(
    scenario: Scenario, stage: Stage, row: StageReport, moved: Change | None = None
) -> tuple[CardView | CardGap, ...]:
    """The cards of `stage` at rest, their bars on the scale of all four stages; `moved` marks what a switch changed."""
    grid = _layout(stage, scenario.run.gpus, scenario.recipe, scenario.run.shards)
    units = scenario.units
    bar = card_bar(scenario, stage, row.extra, None, *card_total(row, units), row.fits)
    # Every card at rest holds as much as every other: its figures are printed once, shown on each.
    bytes_per_weight = f"{per_weight(row.bytes_per_weight)} B/weight"
    model_bytes = units.show(row.per_gpu_bytes)
    figure = units.show(row.rest_bytes) + (
        f" at rest, {units.show(row.peak_bytes)} at its peak" if row.peak_bytes != row.rest_bytes else ""
    )
    frozen = frozenset(w for w in grid.shown if scenario.run.frozen_column(w, grid.gpus))
    away, title = row.on_host, host_title(row)
    cards: list[CardView | CardGap] = []
    for position, card in enumerate(grid.shown):
        if hidden := _hidden_before(grid.shown, position):
            cards.append(CardGap(f"GPU {card - hidden:,} to GPU {card - 1:,}: the same pattern"))
        columns = card_columns(stage, grid.gpus, grid.recipe, card, moved, frozen, grid.shards)
        columns, host = split_host(columns, away, grid.recipe, title)
        name = f"GPU {card:,}"
        hosted = host.columns if host else ()
        cards.append(
            CardView(
                index=card,
                title=name,
                columns=columns,
                bytes_per_weight=bytes_per_weight,
                model_bytes=model_bytes,
                bar=bar,
                summary=holding_sentence(name, "weight", grid.gpus, grid.recipe, columns, hosted, figure),
                tab_stop=position == 0,
                host=host,
                secondary=secondary_strip(scenario, stage, grid.shown, card),
            )
        )
    return tuple(cards)


def secondary_strip(scenario: Scenario, stage: Stage, shown: tuple[int, ...], card: int) -> Secondary | None:
    """HpZ's strip under a card, under ZeRO-3 with hpZ; None otherwise."""
    run = scenario.run
    if run.setup.hpz < 2:
        return None
    if stage is not Stage.ZERO3:
        return NO_COPY
    return secondary(run.gpus, run.setup.hpz, shown, card, run.recipe.nbytes(Band.WEIGHTS))


@dataclass(frozen=True)
class TpGroup:
    """A cut model's tensor-parallel group: its drawn cards, in a frame inside their stage's (`cut_view`)."""

    title: str
    items: tuple[CardView | CardGap, ...]
    width: int
    """The grid's columns it spans: one a drawn card."""
    kind: ClassVar[str] = "tp"
    css: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", f"tp-group span-{self.width}")


@dataclass(frozen=True)
class NodeView:
    """One node's drawn cards, in a box whose border is the link inside it (or a cut model's pipeline stage)."""

    index: int
    title: str
    link: str
    """The link inside the node, in words: "NVLink inside, 450 GB/s a card"."""
    items: tuple[CardView | CardGap | TpGroup, ...]
    width: int = 8
    """The grid's columns it spans: a whole row, or a cut's stage beside others (`cut_grid.stage_room`)."""
    kind: ClassVar[str] = "node"
    css: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", "node-box" + (f" span-{self.width}" if self.width < 8 else ""))


@dataclass(frozen=True)
class NodeGap:
    """Nodes the grid leaves out, and the link between nodes, which every gap and boundary crosses."""

    label: str
    link: str
    kind: ClassVar[str] = "network"
    words: str = field(init=False, repr=False, compare=False)
    """The link, and the nodes left out if any."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "words", f"{self.link}. {self.label}" if self.label else self.link)


def in_nodes(
    cards: tuple[CardView | CardGap, ...], per_node: int, nodes: int, link: tuple[str, str]
) -> tuple[NodeView | NodeGap, ...]:
    """The drawn cards in their nodes, with the link between nodes at each boundary; () for one node.

    `link` says the link inside a node and the link between nodes, in words. A sampled grid's cards
    left out are said where they are: at a node's end, or as whole nodes between two drawn ones.
    """
    if nodes < 2:
        return ()
    inside, between = link
    by_node: dict[int, list[CardView]] = {}
    for item in cards:
        if isinstance(item, CardView):
            by_node.setdefault(item.index // per_node, []).append(item)
    found: list[NodeView | NodeGap] = []
    last = -1
    for node, drawn in by_node.items():
        if last >= 0:
            skipped = node - last - 1
            said = {0: "", 1: f"Node {last + 1:,}: the same pattern"}.get(
                skipped, f"Nodes {last + 1:,} to {node - 1:,}: the same pattern"
            )
            found.append(NodeGap(said, between))
        first, end = node * per_node, (node + 1) * per_node - 1
        items: list[CardView | CardGap] = []
        if drawn[0].index > first:
            items.append(CardGap(f"GPU {first:,} to GPU {drawn[0].index - 1:,}: the same pattern"))
        items += drawn
        if drawn[-1].index < end:
            items.append(CardGap(f"GPU {drawn[-1].index + 1:,} to GPU {end:,}: the same pattern"))
        title = f"Node {node:,}: GPUs {first:,}–{end:,}" + (f", {len(drawn)} drawn" if len(drawn) < per_node else "")
        found.append(NodeView(node, title, inside, tuple(items)))
        last = node
    return tuple(found)
