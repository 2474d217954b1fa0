"""The key beside the cards ("How to read a card"): which entries it shows and their words, decided here once.

The page's key and an embed's compact key name the same things: the compact one in a few words each, in
rows under the cards (static/embed.css); the projector's in a few words too, read from the back of the
room, and it also says what a ring at rest is (its note under the cards is off the screen). The template
only loops over the entries (templates/_widget.html `legend`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.domain.recipes import BandSpec
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


@dataclass(frozen=True)
class _Drawn:
    """What the view draws that the key must explain: every flag, read once from the stage's view."""

    step: bool
    partial: bool
    hosted: bool
    rest_tick: bool
    broken: bool
    capacity: bool
    bar_keys: tuple[str, ...]

    @classmethod
    def of(cls, s: StageView) -> _Drawn:
        card = s.cards[0]
        bar = card.bar if isinstance(card, CardView) else None
        return cls(
            step=s.step is not None,
            partial=s.step.partial if s.step else False,
            hosted=isinstance(card, CardView) and card.host is not None,
            rest_tick=bar is not None and bar.rest_x is not None,
            broken=bar is not None and bar.broken,
            capacity=bar is not None and bar.capacity_x is not None,
            bar_keys=s.bar_keys,
        )


def _full(legend: tuple[BandSpec, ...], d: _Drawn, projector: bool) -> Key:
    """The page's key; the projector's says each entry in a few words (`brief`)."""

    def say(long: str, brief: str) -> str:
        return brief if projector else long

    column = "column" if d.step else "weight"
    states = [KeyEntry("Filled", ": " + say("this card stores it.", "stored here"), "neutral solid")]
    if d.partial:
        slice_words = say("this card stores its slice of the column; other cards the rest.", "its slice stored here")
        states.append(KeyEntry("Part filled", ": " + slice_words, "neutral partial from-0 to-24"))
    if d.step:
        gathered = say(
            "assembled here from the cards that own it, for this phase only, then discarded.", "assembled here, for now"
        )
        sent = say(
            "gradients computed here, then reduce-scattered to their owners and dropped.", "computed here, sent on"
        )
        states += [
            KeyEntry("Striped", ": " + gathered, "neutral solid gathered"),
            KeyEntry("Barred", ": " + sent, "neutral solid sent"),
        ]
    gap = say(f"a gap. Another card stores it on this {column}'s behalf.", "another card holds it")
    states.append(KeyEntry("Dashed outline", ": " + gap, "neutral dashed"))
    if d.hosted:
        host = say("offloaded, in the card's host memory, not on the card.", "in the host's memory")
        states.append(KeyEntry("Dotted ring", ", under the card: " + host, "neutral solid on-host"))
    if d.step:
        states.append(KeyEntry("Ringed", ": what this phase works on" + say(".", ""), "neutral solid active"))
    elif projector:
        # The projector's key says it; elsewhere the note under the cards does (app.css, projector.css).
        ring = ", for a moment: changed by the last switch of arrangement"
        states.append(KeyEntry("Ringed", ring, "neutral solid active", "ring-entry"))
    bands = tuple(
        KeyEntry(k.label, f" · {k.precision}, {k.nbytes} B" + say(": " + k.description, ""), f"band-{k.band} solid")
        for k in legend
    )
    bars = []
    if "fp32-gradients" in d.bar_keys:
        bars.append(
            KeyEntry(
                "Bar, pale amber",
                ": fp32 gradients" + say(", DeepSpeed's copy for the update.", ""),
                "bar-fp32-gradients",
            )
        )
    if "gathered" in d.bar_keys:
        at_peak = say(", assembled" + ("" if d.step else " at the peak") + ".", "")
        bars.append(KeyEntry("Bar, grey", ": one layer's weights" + at_peak, "bar-gathered"))
    if "sent" in d.bar_keys:
        bars.append(
            KeyEntry(
                "Bar, dark amber",
                ": one layer's gradients" + say(", computed before the reduce-scatter.", ""),
                "bar-sent",
            )
        )
    if "activations" in d.bar_keys:
        kept = say(", kept from each layer's forward pass for its backward.", "")
        bars.append(KeyEntry("Bar, violet", ": activations" + kept, "bar-activations"))
    if "overheads" in d.bar_keys:
        listed = say(", kept all through the step (the list under the table says what each is).", "")
        bars.append(KeyEntry("Bar, hatched", ": overheads" + listed, "bar-overheads"))
    if d.step:
        bars.append(
            KeyEntry(
                "Bar, pale", ": " + say("the peak so far, above what the card holds now.", "peak so far"), "bar-peak"
            )
        )
    if d.rest_tick:
        bars.append(
            KeyEntry(
                "Tick",
                ": " + say("where the state at rest ends; the bar runs to the peak.", "state at rest"),
                "bar-tick",
            )
        )
    if d.broken:
        shortened = say("the part at rest is drawn shortened, so that one layer shows.", "part at rest shortened")
        bars.append(KeyEntry("Break", ": " + shortened, "bar-break"))
    first = "Each column is an eighth of the model, in forward order" if d.step else "Each column is one weight"
    ratio = " : ".join(str(k.nbytes) for k in legend)
    area = f"{first}, its bands stacked top to bottom, each as tall as the bytes it costs ({ratio}): area is memory."
    return Key(False, area, tuple(states), bands, tuple(bars))


def _compact(legend: tuple[BandSpec, ...], d: _Drawn, ring_key: bool) -> Key:
    """An embed's key, in rows under the cards; `ring_key`: whether a switch of arrangement can ring cells here."""
    states = [KeyEntry("Filled", ": stored on this card", "neutral solid")]
    if d.partial:
        states.append(KeyEntry("Part filled", ": its slice of the column", "neutral partial from-0 to-24"))
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
    bands = tuple(KeyEntry(k.label, f" {k.precision}, {k.nbytes} B", f"band-{k.band} solid") for k in legend)
    # What the bars draw besides their bands (app/web/bars.py), said in a phrase where the page has a line each.
    scale = ": " + ("to the peak" if d.rest_tick else "the card's memory")
    if d.broken:
        scale += ", the part at rest (to the tick) shortened"
    elif d.rest_tick:
        scale += ", the tick at rest"
    if d.capacity:
        scale += "; the line, the card's size"
    bars = [KeyEntry("Bar", scale, css="bar-scale")]
    if "gathered" in d.bar_keys:
        bars.append(KeyEntry("Bar, grey", ": a layer's weights, assembled", "bar-gathered"))
    if "sent" in d.bar_keys:
        bars.append(KeyEntry("Bar, dark amber", ": a layer's gradients", "bar-sent"))
    if "activations" in d.bar_keys:
        bars.append(KeyEntry("Bar, violet", ": activations", "bar-activations"))
    if "overheads" in d.bar_keys:
        bars.append(KeyEntry("Bar, hatched", ": overheads", "bar-overheads"))
    if d.step:
        bars.append(KeyEntry("Bar, pale", ": peak so far", "bar-peak"))
    first = "A column is an eighth of the model" if d.step else "A column is one weight"
    return Key(True, f"{first}, its bands as tall as their bytes: area is memory.", tuple(states), bands, tuple(bars))


def page_key(view: PageView) -> Key | None:
    """The key of the page's stage: compact in an embed's default theme; None on a page that draws no stage."""
    if view.content is None:
        return None
    drawn = _Drawn.of(view.content)
    if view.embed and view.theme == "default":
        return _compact(view.legend, drawn, view.embed.switcher)
    return _full(view.legend, drawn, view.theme == "projector")
