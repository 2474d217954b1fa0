"""The key beside the cards ("How to read a card"): which entries it shows and their words, decided here once.

The page's key and an embed's compact key name the same things: the compact one in a few words each, in
rows under the cards (static/embed.css); the projector's in a few words too, read from the back of the
room, and it also says what a ring at rest is (its note under the cards is off the screen). The template
only loops over the entries (templates/_widget.html `legend`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.domain.recipes import BandSpec
from app.domain.report import TermKind
from app.web.grid_view import CardView

if TYPE_CHECKING:
    from app.web.page_view import PageView
    from app.web.stage_view import StageView


@dataclass(frozen=True)
class KeyEntry:
    """One line of the key: a swatch, the name of what it marks in bold, and the words after it."""

    name: str
    words: str
    swatch: str = ""
    """The swatch's classes after "swatch"; blank: no swatch (the compact key's line on the bar's scale)."""
    css: str = ""
    """The line's own class, where a style picks it out."""
    swatches: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "swatches", (self.swatch,) if self.swatch else ())


@dataclass(frozen=True)
class Key:
    """The key to the cards of one view."""

    compact: bool
    area: str
    """What a column is, and that area is memory."""
    states: tuple[KeyEntry, ...]
    """How a cell is drawn: filled, part filled, striped, barred, dashed, on the host, ringed."""
    bands: tuple[KeyEntry, ...]
    bars: tuple[KeyEntry, ...]
    """What the bar under each card draws; empty: the key says nothing of the bar."""
    more: tuple[str, ...] = ()
    """The longer words, one click away ("More about the key"): the page's key reads in a few words each."""
    css: str = field(init=False, repr=False, compare=False)
    gap: str = field(init=False, repr=False, compare=False)
    """Between a swatch and its words: none in the compact key, whose swatches sit tight to their words."""
    bar_lists: tuple[tuple[KeyEntry, ...], ...] = field(init=False, repr=False, compare=False)
    more_lists: tuple[tuple[str, ...], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", "legend compact-key" if self.compact else "legend")
        object.__setattr__(self, "gap", "" if self.compact else "\n")
        object.__setattr__(self, "bar_lists", (self.bars,) if self.bars else ())
        object.__setattr__(self, "more_lists", (self.more,) if self.more else ())


@dataclass(frozen=True)
class _Drawn:
    """What the view draws that the key must explain: every flag, read once from the stage's view."""

    step: bool
    partial: bool
    hosted: bool
    hand: bool
    capacity: bool
    kinds: tuple[TermKind, ...]
    """The kinds the bars draw beyond the bands (`bars.bar_kinds`), in the key's order."""
    replicas: bool = False
    """Whether cells are kept because hybrid sharding replicates them (grid_view.CellView.replica)."""
    cut: bool = False
    """Whether the cards draw a cut model (`cut_view`): eighths of the model, tensor slices part filled."""
    absent: bool = False
    """Whether some card draws another pipeline stage's layers, absent from it (`CellState.ABSENT`)."""
    elsewhere: bool = False
    """Whether some card draws another expert-parallel rank's experts, not here (`expert_view`)."""
    experts: str = ""
    """The columns' words where the model has experts, dense then experts' (`expert_view.experts_key`)."""

    @classmethod
    def of(cls, s: StageView) -> _Drawn:
        card = s.cards[0]
        bar = card.bar if isinstance(card, CardView) else None
        kinds = tuple(kind for kind in TermKind if kind.look.css in s.bar_keys)
        return cls(
            step=s.step is not None,
            partial=s.step.partial if s.step else s.cut_grid and s.tp_sliced,
            hosted=isinstance(card, CardView) and card.host is not None,
            # The stage's, not the phase's: whether it holds anything in hand at any moment of the step, so
            # that the key (and all under it) stays put from phase to phase.
            hand=any(kind.in_hand for kind in kinds),
            capacity=bar is not None and bar.capacity_x is not None,
            kinds=kinds,
            replicas=s.replicated and s.step is None and not s.cut_grid,  # neither the step nor a cut draws it
            cut=s.cut_grid,
            absent=s.pipelined,
            elsewhere=s.elsewhere,
            experts=s.experts_key,
        )


def _band_swatch(spec: BandSpec) -> str:
    """A band's swatch: its kind's colour, filled; its words are the recipe's (its dtype and bytes)."""
    return f"{TermKind.of_band(spec.band).look.css} solid"


def _full(legend: tuple[BandSpec, ...], d: _Drawn) -> Key:
    """The page's key (the projector's too): each entry in a few words, the longer words one click away."""
    column = "column" if d.step else "weight"
    more: list[str] = []
    states = [KeyEntry("Filled", ": stored here", "neutral solid")]
    if d.partial and d.experts:  # part of a column is more than a tensor slice: a stage's blocks, a rank's experts
        states.append(KeyEntry("Part filled", ": its share stored here", "neutral partial from-0 to-24"))
        more.append(
            "Part filled: this card stores part of the column: its tensor slice, its stage's blocks of a column "
            "shared with another stage, or its own few of an experts' column's experts; other cards the rest."
        )
    elif d.partial and d.cut:
        states.append(KeyEntry("Part filled", ": its tensor slice stored here", "neutral partial from-0 to-24"))
        more.append(
            "Part filled: tensor parallelism cuts every layer's matrices across the group's cards; each stores its "
            "own slice of the column, the group's other cards the rest."
        )
    elif d.partial:
        states.append(KeyEntry("Part filled", ": its slice stored here", "neutral partial from-0 to-24"))
        more.append("Part filled: this card stores its slice of the column; other cards the rest.")
    if d.step:
        states += [
            KeyEntry("Striped", ": assembled here, for now", "neutral solid gathered"),
            KeyEntry("Barred", ": computed here, sent on", "neutral solid sent"),
        ]
        more.append("Striped: assembled here from the cards that own it, for this phase only, then discarded.")
        more.append("Barred: gradients computed here, then reduce-scattered to their owners and dropped.")
    states.append(KeyEntry("Dashed", ": held elsewhere", "neutral dashed"))
    more.append(f"Dashed outline: a gap. Another card stores it on this {column}'s behalf.")
    if d.replicas:
        states.append(KeyEntry("White dot", ": a replica's copy", "neutral solid replica"))
        more.append(
            "White dot: kept here because hybrid sharding gives each shard group its own copy; with one group "
            "of every card it would be dashed."
        )
    if d.absent:
        states.append(KeyEntry("Hatched, no outline", ": another stage's layers", "neutral absent"))
        more.append(
            "Hatched with no outline: absent. Another pipeline stage keeps these layers, and nothing is held on "
            "this card's behalf, unlike a dashed outline."
        )
    if d.elsewhere:
        states.append(KeyEntry("Hatched the other way", ": another card's experts", "neutral absent expert"))
        more.append(
            "Hatched the other way, no outline: not here. Expert parallelism gives each card its own experts; "
            "another card keeps these, and the tokens routed to them are sent there."
        )
    if d.hosted:
        states.append(KeyEntry("Dotted", ": on the host", "neutral solid on-host"))
        more.append("Dotted ring, under the card: offloaded, in the card's host memory, not on the card.")
    if d.step:
        states.append(KeyEntry("Ringed", ": this phase's work", "neutral solid active"))
    else:
        # The note under the cards says it too; on the projector that note is off the screen.
        ring = ": just changed by a switch"
        states.append(KeyEntry("Ringed", ring, "neutral solid active", "ring-entry"))
    bands = tuple(KeyEntry(k.label, f" · {k.precision}, {k.shown} B", _band_swatch(k)) for k in legend)
    more += [f"{k.label}: {k.description}" for k in legend]
    bars = [KeyEntry("Bar", ": at rest, then in hand; one scale" if d.hand else ": at rest, one scale", "bar-rest")]
    if d.capacity:
        bars.append(KeyEntry("Line", ": card size", "bar-capacity"))
    for kind in d.kinds:  # each kind drawn, in its own words (app/domain/terms.py)
        look = kind.look
        bars.append(KeyEntry(look.colour, f": {look.short}", f"bar-{look.css}"))
        more.append(f"{look.colour}: {look.long}")
    if d.step:
        bars.append(KeyEntry("Pale", ": peak so far", "bar-peak"))
    eighths = d.step or d.cut
    first = "A column is an eighth of the model, in forward order" if eighths else "A column is a weight"
    ratio = " : ".join(k.shown for k in legend)
    column = "Column: an eighth of the model" if eighths else "Column: a weight"
    if d.experts:  # a mixture of experts: its dense eighths, then its experts' columns
        first, column = f"{d.experts}; in each column", d.experts
    area = f"{column}; height: bytes ({ratio})."
    more.insert(0, f"{first}, its bands stacked top to bottom, each as tall as the bytes it costs: area is memory.")
    more.append(
        "The bar is drawn on one scale for the four arrangements, so a switch shows the saving: what a card keeps at "
        "rest, then what it holds in hand for the layer it works on, stacked after it. The longest bar holds the most."
    )
    return Key(False, area, tuple(states), bands, tuple(bars), tuple(more))


def _compact(legend: tuple[BandSpec, ...], d: _Drawn, ring_key: bool) -> Key:
    """An embed's key, in rows under the cards; `ring_key`: whether a switch of arrangement can ring cells here."""
    states = [KeyEntry("Filled", ": stored on this card", "neutral solid")]
    if d.partial:
        states.append(KeyEntry("Part filled", ": its slice of the column", "neutral partial from-0 to-24"))
    if d.absent:
        states.append(KeyEntry("Hatched", ": another stage's layers", "neutral absent"))
    if d.elsewhere:
        states.append(KeyEntry("Hatched /", ": another card's experts", "neutral absent expert"))
    if d.step:
        states.append(KeyEntry("Striped", ": assembled for this phase", "neutral solid gathered"))
        states.append(KeyEntry("Barred", ": gradients sent to their owners", "neutral solid sent"))
    states.append(KeyEntry("Dashed", ": another card stores it", "neutral dashed"))
    if d.hosted:
        states.append(KeyEntry("Dotted ring", ": in the host's memory", "neutral solid on-host"))
    if d.step:
        states.append(KeyEntry("Ringed", ": this phase's work", "neutral solid active"))
    elif ring_key:
        states.append(KeyEntry("Ringed", ", for a moment: changed by a switch", "neutral solid active"))
    bands = tuple(KeyEntry(k.label, f" {k.precision}, {k.shown} B", _band_swatch(k)) for k in legend)
    # What the bars draw besides their bands (app/web/bars.py), said in a phrase where the page has a line each.
    scale = ": at rest, one scale for all four"
    if d.hand:
        scale = ": at rest, then in hand, one scale for all four"
    if d.capacity:
        scale += "; the line, the card's size"
    bars = [KeyEntry("Bar", scale, css="bar-scale")]
    for kind in d.kinds:
        look = kind.look
        if look.compact is not None:
            bars.append(KeyEntry(f"Bar, {look.colour.lower()}", f": {look.compact}", f"bar-{look.css}"))
    if d.step:
        bars.append(KeyEntry("Bar, pale", ": peak so far", "bar-peak"))
    first = "A column is an eighth of the model" if d.step or d.cut else "A column is one weight"
    if d.experts:
        first = f"{d.experts}; in each column"
    return Key(True, f"{first}, its bands as tall as their bytes: area is memory.", tuple(states), bands, tuple(bars))


def page_key(view: PageView) -> Key | None:
    """The key of the page's stage: compact in an embed but the projector's; None on a page that draws no stage."""
    if view.content is None:
        return None
    drawn = _Drawn.of(view.content)
    if view.embed and not view.theme.projector:
        return _compact(view.legend, drawn, view.embed.switcher)
    return _full(view.legend, drawn)
