"""The view models: one frozen dataclass per thing a template draws.

Built by `views` (at rest) and `step_view` (during a training step); templates only lay them out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from enum import StrEnum
from functools import cached_property
from urllib.parse import urlencode

from app.domain.bands import Band, BandSpec, Recipe
from app.domain.sharding import CellState
from app.domain.stages import Stage, StageInfo
from app.domain.step import Holding

LinkFor = Callable[[Stage], str]


class Theme(StrEnum):
    """How the page is drawn: for a screen close by, or for the back of a room (`?theme=projector`)."""

    DEFAULT = "default"
    PROJECTOR = "projector"

    @property
    def other(self) -> Theme:
        """The theme the page's toggle switches to."""
        return Theme.DEFAULT if self is Theme.PROJECTOR else Theme.PROJECTOR


@dataclass(frozen=True)
class Links:
    """Each stage's page address, keeping the run described; hashable, so views can be cached."""

    page: str
    run: tuple[tuple[str, str], ...] = ()
    phase: int | None = None
    keep: tuple[tuple[str, str], ...] = ()
    """Options every link carries after the run and the phase (an embed's controls and calculator)."""
    theme: Theme = Theme.DEFAULT
    """Kept in every address, so a swap or a form never drops the projector view."""

    @property
    def options(self) -> tuple[tuple[str, str], ...]:
        """What every address carries after the run: the embed's options, then the theme."""
        theme = () if self.theme is Theme.DEFAULT else (("theme", self.theme.value),)
        return (*self.keep, *theme)

    @property
    def kept(self) -> tuple[tuple[str, str], ...]:
        """The parameters every address carries besides the stage and the phase."""
        return (*self.run, *self.options)

    def themed(self, theme: Theme) -> Links:
        """The same addresses in another theme."""
        return replace(self, theme=theme)

    def __call__(self, stage: Stage) -> str:
        """The address of `stage` with the same run, at the same moment of the step."""
        return self.at(stage, self.phase)

    @cached_property
    def _encoded(self) -> tuple[str, str]:
        # The run and the options, encoded once: a page writes some twenty addresses of one run.
        run, options = urlencode(self.run), urlencode(self.options)
        return (f"&{run}" if run else ""), (f"&{options}" if options else "")

    def at(self, stage: Stage, phase: int | None) -> str:
        """The address of `stage` with the same run at `phase` (None: at rest)."""
        run, options = self._encoded
        moment = "" if phase is None else f"&phase={phase}"
        # A stage's value is a plain word (dp, zero1...): nothing in it to encode.
        return f"{self.page}?stage={stage.value}{run}{moment}{options}"

    def switch(self, stage: Stage, current: Stage | None) -> str:
        """The address of `stage`, with a `from` hint naming the stage shown so the page can mark what changed."""
        if current is None or current is stage:
            return self(stage)
        return f"{self(stage)}&from={current.value}"


@dataclass(frozen=True)
class StageLink:
    """One tab of the stage switcher."""

    stage: Stage
    title: str
    summary: str
    href: str
    current: bool


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
    focusable: bool
    holding: Holding | None = None
    """During a step: held, gathered for this phase only, or dashed; None at rest."""
    active: bool = False
    """Whether the phase shown works on this cell."""
    strip: tuple[int, int] | None = None
    """A partial cell's part of the column, in 48ths: where its strip starts and ends."""
    changed: bool = False
    """Whether the cell changed state (filled or dashed) since the stage the person came from."""

    @property
    def css(self) -> str:
        """The cell's classes: band hue, state, height in bytes, and during a step its holding."""
        extra = (f" {self.holding}" if self.holding else "") + (" active" if self.active else "")
        if self.strip:
            extra += f" from-{self.strip[0]} to-{self.strip[1]}"
        if self.changed:
            extra += " changed"
        return f"cell band-{self.band} {self.state} nb-{self.nbytes}{extra}"


@dataclass(frozen=True)
class ColumnView:
    """One weight's stack of bands on one card, or the gap standing for the weights not drawn."""

    weight: int | None
    responsible: bool
    cells: tuple[CellView, ...]
    gap_label: str = ""
    axis_label: str = "…"


@dataclass(frozen=True)
class Segment:
    """One stretch of a memory bar, in percent of the bar's scale."""

    css: str
    x: float
    width: float
    label: str


@dataclass(frozen=True)
class BarView:
    """A card's memory drawn to scale: its bands stacked, and the card's capacity marked."""

    segments: tuple[Segment, ...]
    capacity_x: float | None
    rest_x: float | None
    """Where the state at rest ends, marked when something is drawn beyond it."""
    broken: bool
    """Whether the part at rest is drawn shortened, behind a break, so that one layer shows."""
    label: str
    verdict: str
    fits: bool | None


@dataclass(frozen=True)
class CardView:
    """One GPU: its columns, its total and its memory bar."""

    index: int
    title: str
    columns: tuple[ColumnView, ...]
    bytes_per_weight: str
    model_bytes: str
    bar: BarView


@dataclass(frozen=True)
class CardGap:
    """Where the grid leaves cards out."""

    label: str


@dataclass(frozen=True)
class TableRow:
    """One row of the comparison table."""

    stage: Stage
    title: str
    href: str
    bytes_per_weight: str
    per_gpu: str
    peak: str
    communication: str
    communication_bytes: str
    breakdown: tuple[str, ...]
    fits: bool | None
    headroom: str | None
    max_model: str | None
    current: bool


@dataclass(frozen=True)
class Boundary:
    """ZeRO-3's limit: one assembled layer must fit on one card."""

    largest_layer: str | None
    source: str
    assembled: str | None
    exceeds: bool | None
    verdict: str


@dataclass(frozen=True)
class Option:
    """One choice in a select or datalist."""

    value: str
    label: str
    selected: bool = False


@dataclass(frozen=True)
class BandField:
    """One band's bytes in the recipe form."""

    name: str
    label: str
    value: int
    minimum: int
    readonly: bool


@dataclass(frozen=True)
class FieldProblem:
    """A form field whose value was set aside: what the person typed, and what it should be."""

    name: str
    typed: str
    message: str


@dataclass(frozen=True)
class SetAsideField:
    """A field of the run set aside, as the message at the top of the widget names it."""

    label: str
    """The form's label for it: "GPUs"."""
    typed: str
    """What was given, shortened; escaped when rendered."""
    message: str
    """What would be accepted, as a sentence: "Enter a whole number of GPUs between 1 and 4096."."""
    field_id: str
    """The form field's id, to go and correct it."""


@dataclass(frozen=True)
class SetAsideView:
    """What the top of the widget says when values of the run were set aside, and what is drawn instead."""

    fields: tuple[SetAsideField, ...]
    drawn: str
    """What the picture is of: "Drawn without gpus=0: 8 GPUs, the default."."""


@dataclass(frozen=True)
class FormView:
    """The run the person describes, as the form shows it."""

    stage: Stage
    models: tuple[Option, ...]
    params: str
    params_readonly: bool
    gpus: int
    recipes: tuple[Option, ...]
    bands: tuple[BandField, ...]
    bands_readonly: bool
    largest_layer: str
    largest_layer_placeholder: str
    more_open: bool
    capacity: str
    cards: tuple[Option, ...]
    units: tuple[Option, ...]
    problems: tuple[FieldProblem, ...] = ()
    """Fields whose value was set aside; the page shows what was typed there, and why it is wrong."""
    phase: int | None = None
    """The moment of the step shown, kept when the run changes; None at rest."""
    action: str = ""
    """Where the form is sent (the page's or the embed's path); empty: the page."""
    keep: tuple[tuple[str, str], ...] = ()
    """Hidden fields the form sends besides the run: an embed's options."""

    def problem(self, name: str) -> FieldProblem | None:
        """The problem with the field `name`, if it has one."""
        # Asked for each of the form's eleven fields, and there is rarely a problem at all.
        return next((p for p in self.problems if p.name == name), None) if self.problems else None


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
    boundary: Boundary
    notes: tuple[str, ...]
    step: StepView | None = None
    change: str = ""
    """What changed on every card since the stage the person came from; blank without one."""
    bar_note: str = ""
    """What the bars under the cards are drawn to."""
    bar_keys: tuple[str, ...] = ()
    """What of one layer the bars draw: "gathered" (weights assembled), "sent" (gradients computed)."""
    narration: Narration | None = None
    """What the polite live region says after a swap."""

    @property
    def model_per_gpu(self) -> str:
        """The table's heading for one card's bytes: '30B model per GPU', '7-weight model per GPU'."""
        size = self.params_label if self.params_label[-1:].isalpha() else f"{self.params_label}-weight"
        return f"{size} model per GPU"


@dataclass(frozen=True)
class Narration:
    """One sentence each for what a swap can change; the script picks the one that applies."""

    stage: str
    """The stage change: what it does to each card."""
    phase: str
    """The phase: its number, title and traffic so far; blank at rest."""
    fit: str
    """The fit verdict on the card given; blank without a capacity."""


@dataclass(frozen=True)
class TransferNode:
    """A card in the transfer drawing, or the gap standing for the cards left out (card None)."""

    x: float
    width: float
    label: str
    card: int | None


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
    """What each of the 8 columns stands for, e.g. '5: layers 51–61 of 80'."""
    relation: str = ""
    """How the cards' slices line up with the columns."""
    partial: bool = False
    """Whether any drawn cell is part held, so the legend explains it only when it is there."""
    action: str = ""
    """Where the phase slider is sent (the page's or the embed's path); empty: the page."""


@dataclass(frozen=True)
class PageView:
    """The page: switcher, form and legend always, and either the stage's view or an error."""

    title: str
    links: tuple[StageLink, ...]
    legend: tuple[BandSpec, ...]
    form: FormView | None = None
    content: StageView | None = None
    error: str | None = None
    step_href: str = ""
    step_enter_href: str = ""
    """The step's phase 1, where → and PageDown go at rest (static/step.js): its first move, not its start."""
    compare_href: str = ""
    measured_href: str = ""
    """The same stage measured in PyTorch (8 ranks, the toy model); on the page only."""
    theme: Theme = Theme.DEFAULT
    """A class on <html>: the page's one place that knows the theme."""
    theme_href: str = ""
    """The same view in the other theme (a whole page load: the theme styles the page, not the widget)."""
    embed: EmbedView | None = None
    """Set when the widget is drawn alone, inside another site's page."""
    share_href: str = ""
    """Where the "Embed this" panel comes from when it is opened (on the page only): its snippets name
    the app's absolute address, which every page would otherwise carry in its first load."""
    set_aside: SetAsideView | None = None
    """Values of the run that were set aside, said at the top of the widget (a bad link, not a keystroke)."""
    form_first: bool = False
    """The run form straight under that message, before the picture, and kept there while it is corrected."""
    memory_href: str = ""
    """The footer's "same figures as JSON": /api/memory for the run drawn; empty, the bare address (an error)."""
    layout_href: str = ""
    """And /api/layout for the stage and run drawn; empty, the bare address."""


@dataclass(frozen=True)
class EmbedView:
    """What an embed shows around the picture."""

    controls: str
    """stages, step or none."""
    calculator: bool

    @property
    def switcher(self) -> bool:
        """Whether the stage switcher is shown."""
        return self.controls != "none"

    @property
    def step_controls(self) -> bool:
        """Whether the step's controls (and the way into the step) are shown."""
        return self.controls == "step"


@dataclass(frozen=True)
class EmbedSnippet:
    """The HTML a teacher pastes to embed the view shown, with one choice of controls and of the calculator."""

    controls: str
    label: str
    url: str
    html: str
    selected: bool
    calculator: bool = False


@dataclass(frozen=True)
class EmbedChoice:
    """A link to the panel with another choice, for a browser without JavaScript (which has no drop-down)."""

    label: str
    href: str
    current: bool


@dataclass(frozen=True)
class ShareView:
    """The "Embed this" panel: a share link and copy-ready snippets, all absolute."""

    link: str
    snippets: tuple[EmbedSnippet, ...]
    """One for each choice of controls and calculator, the calculator's after the others."""
    choices: tuple[EmbedChoice, ...] = ()
    """The choice of controls as links, then the calculator's."""
    calculator_choices: tuple[EmbedChoice, ...] = ()

    @property
    def chosen(self) -> EmbedSnippet:
        """The snippet shown first."""
        return next(s for s in self.snippets if s.selected)

    @property
    def options(self) -> tuple[tuple[EmbedSnippet, EmbedSnippet], ...]:
        """The choice of controls, each with its snippet without the calculator and with it."""
        plain = [s for s in self.snippets if not s.calculator]
        full = {s.controls: s for s in self.snippets if s.calculator}
        return tuple((s, full[s.controls]) for s in plain)


@dataclass(frozen=True)
class SharePageView:
    """The "Embed this" panel: swapped into the page's when opened, or a page of its own without JavaScript."""

    title: str
    share: ShareView
    back_href: str
    """The view the panel embeds."""
    theme: Theme = Theme.DEFAULT


def legend(recipe: Recipe) -> tuple[BandSpec, ...]:
    """The bands the grid draws, top to bottom; a band of 0 bytes is not drawn."""
    return tuple(spec for spec in recipe.specs if spec.nbytes > 0)
