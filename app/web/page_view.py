"""The page: the switcher, the form, the key and the stage's view, or the message when a request was not understood."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, TypedDict, Unpack

from app import APP_NAME
from app.domain.recipes import BandSpec
from app.domain.scenario import Inputs, Scenario, resolve
from app.domain.stages import Stage
from app.web.bars import legend
from app.web.config_view import ConfigView
from app.web.embed_view import EmbedView
from app.web.form_view import FieldProblem, FormView, form_view
from app.web.inputs import Theme
from app.web.key_view import Key, page_key
from app.web.links import LinkFor, Links, compare_address
from app.web.parts import shown
from app.web.set_aside_view import SetAsideView
from app.web.stage_view import StageLink, StageView, stage_links, stage_view

if TYPE_CHECKING:  # the live bars' module builds on the errors', which builds on this one
    from app.web.live_view import LiveView


@dataclass(frozen=True)
class ThemeToggle:
    """The link to the same view in the other type (normal or projector), in the same colours."""

    href: str
    label: str


@dataclass(frozen=True)
class SchemeLink:
    """The link to the same view in one colour scheme: the system's, light or dark; the scheme shown is marked."""

    id: str
    href: str
    label: str
    attrs: dict[str, str | None] = field(compare=False)
    """`aria-current` on the scheme shown; left out on the others."""


_SCHEME_LABELS = (("system", "Auto"), ("light", "Light"), ("dark", "Dark"))
"""Each scheme the toggle offers, in the order of `Theme.schemes`: its id's word and its label."""


@dataclass(frozen=True)
class ThemeTools:
    """The page's theme toggle: the other type, and each colour scheme; and predict first, on or off."""

    size: ThemeToggle
    schemes: tuple[SchemeLink, ...]
    predict: ThemeToggle


@dataclass(frozen=True)
class WayOn:
    """One of the page's other ways on: the side-by-side page, the measured one."""

    id: str
    href: str
    words: str


@dataclass(frozen=True)
class Watch:
    """The way into the step at rest, and where → goes from there (its phase 1)."""

    href: str
    enter_href: str


@dataclass(frozen=True)
class JsonLinks:
    """The footer's "same figures as JSON" (blank: the bare address, in the template)."""

    memory_href: str
    layout_href: str


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
    """The same view in the other type (a whole page load: the theme styles the page, not the widget)."""
    scheme_hrefs: tuple[str, ...] = ()
    """The same view in the system's colours, light and dark (`Theme.schemes`), in the same type."""
    predict_href: str = ""
    """The same view with predict first turned on, or off where it is on (`predicting`)."""
    predicting: bool = False
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
    configs: ConfigView | None = None
    """The run as a DeepSpeed config or FSDP2 snippet to copy, and the box to paste a config in (the page only)."""
    address: str = ""
    """The view's own address (on the widget, where a live session's teacher page reads what to send)."""
    live: LiveView | None = None
    """A live session's bar around the widget: the teacher's, or a follower's (app/web/live_view.py)."""

    # What the layouts and the widget draw, decided here once the view is whole (and again on each
    # `replace`, which builds a new view): the templates loop over these, a part left out is empty.
    key: Key | None = field(init=False)
    """The key to the cards (app/web/key_view.py); None where no stage is drawn."""
    widget_class: str = field(init=False)
    widget_attrs: dict[str, str | None] = field(init=False, compare=False)
    """The widget's own address, and the stage and phase shown (None: the attribute is left out)."""
    teach_field: tuple[str, ...] = field(init=False)
    """The page's "Teach this live" field (the view's address), on the page only, not live."""
    tools_top: tuple[tuple[ThemeTools, ...], ...] = field(init=False)
    """Full screen (and the theme's toggle) at the top; in an embed's default theme, beside the heading instead."""
    tools_side: tuple[tuple[ThemeTools, ...], ...] = field(init=False)
    switcher: tuple[tuple[StageLink, ...], ...] = field(init=False)
    """The switcher, at the top of the widget; with the form, when the form comes first."""
    switcher_alone: tuple[tuple[StageLink, ...], ...] = field(init=False)
    form_top: tuple[FormView, ...] = field(init=False)
    """The run form first, under a bad link's message; else after the picture (`form_bottom`)."""
    form_bottom: tuple[FormView, ...] = field(init=False)
    set_aside_notices: tuple[SetAsideView, ...] = field(init=False)
    drawn_instead: tuple[str, ...] = field(init=False)
    errors: tuple[str, ...] = field(init=False)
    stages: tuple[StageView, ...] = field(init=False)
    """The stage drawn; empty for an error."""
    explained: tuple[str, ...] = field(init=False)
    """The stage in a sentence: left out of an embed of the picture alone."""
    step_panels: tuple[StageView, ...] = field(init=False)
    watch: tuple[Watch, ...] = field(init=False)
    step_controls: tuple[str, ...] = field(init=False)
    """The step's controls, by the class of their bar (at the window's foot on the page); none in some embeds."""
    calculator: tuple[StageView, ...] = field(init=False)
    """ZeRO-3's limit, the table and the words: on the page, and in an embed with the calculator."""
    shares: tuple[str, ...] = field(init=False)
    config_tools: tuple[ConfigView, ...] = field(init=False)
    ways_on: tuple[WayOn, ...] = field(init=False)
    json_links: tuple[JsonLinks, ...] = field(init=False)
    """The footer's JSON links, brought out of band by a swap: none in an embed, which has no footer."""
    live_bars: tuple[LiveView, ...] = field(init=False)
    htmx_config: str = field(init=False)
    """Which of htmx's configs: "live" keeps a live page's own address, else "page"."""

    def __post_init__(self) -> None:
        e, content, theme = self.embed, (None if self.error else self.content), self.theme
        calculator = e is None or e.calculator
        first = self.form_first and calculator and not self.error
        tools_later = e is not None and not theme.projector and not self.error
        label = "Normal view" if theme.projector else "Projector view"
        schemes = tuple(
            SchemeLink(f"scheme-{word}", href, words, {"aria-current": "true" if t is theme else None})
            for (word, words), href, t in zip(_SCHEME_LABELS, self.scheme_hrefs, theme.schemes, strict=False)
        )
        predict = ThemeToggle(self.predict_href, "Stop predicting" if self.predicting else "Predict first")
        tools = ThemeTools(ThemeToggle(self.theme_href, label), schemes, predict)
        toggles = shown(tools if self.theme_href and e is None else None)
        links = self.links if e is None or e.switcher or self.error else None
        steps = e is None or e.step_controls
        attrs: dict[str, str | None] = {"data-address": self.address or None}
        if content is not None and content.narration is not None:
            attrs |= {"data-stage": str(content.stage), "data-phase": str(content.step.index) if content.step else ""}
        ways = (
            WayOn("compare-link", self.compare_href, "Compare two arrangements side by side"),
            WayOn("measured-link", self.measured_href, "Measured in PyTorch"),
        )
        derived = {
            "key": page_key(self),
            "widget_class": "widget embedded" if e else "widget",
            "widget_attrs": attrs,
            "teach_field": (self.address,) if self.live is None and e is None else (),
            "tools_top": () if tools_later else (toggles,),
            "tools_side": ((),) if tools_later else (),
            "switcher": shown(links),
            "switcher_alone": () if first else shown(links),
            "form_top": shown(self.form if first else None),
            "form_bottom": shown(self.form if calculator and not first and content else None),
            "set_aside_notices": shown(self.set_aside),
            "drawn_instead": (self.set_aside.drawn,) if self.set_aside else (),
            "errors": shown(self.error),
            "stages": shown(content),
            "explained": (content.explanation,) if content and (e is None or e.switcher) else (),
            "step_panels": shown(content if content and content.step else None),
            "watch": (Watch(self.step_href, self.step_enter_href),) if content and not content.step and steps else (),
            "step_controls": ("step-nav" if e else "step-nav step-bar",) if steps else (),
            "calculator": shown(content if calculator else None),
            "shares": shown(self.share_href),
            "config_tools": shown(self.configs),
            "ways_on": tuple(way for way in ways if way.href),
            "json_links": () if e else (JsonLinks(self.memory_href, self.layout_href),),
            "live_bars": shown(self.live),
            "htmx_config": "live" if self.live else "page",
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


DEFAULT_SCENARIO = resolve(Inputs())


class WaysOut(TypedDict, total=False):
    """Fields of a PageView the page's route knows before it builds the view (app/web/pages.py).

    Passed to `page_view`, so that the view is built once: a `replace` runs `PageView.__post_init__` again.
    """

    share_href: str
    measured_href: str
    memory_href: str
    layout_href: str
    configs: ConfigView | None
    address: str
    form_first: bool


def compare_href(base: str, stage: Stage, run: tuple[tuple[str, str], ...]) -> str:
    """The side-by-side page for this stage and the next one up (ZeRO-3 beside data parallelism)."""
    order = list(Stage)
    left, right = (Stage.DP, stage) if stage is Stage.ZERO3 else (stage, order[order.index(stage) + 1])
    return compare_address(base, left, right, run)


# Not memoised: a repeat is answered by the one response cache (app/serving/cache.py) before it
# gets here, so a memo of views only held some 7 MB a worker for a second way of asking.
def page_view(
    stage: Stage,
    link: Links,
    scenario: Scenario = DEFAULT_SCENARIO,
    inputs: Inputs | None = None,
    phase: int | None = None,
    previous: Stage | None = None,
    compare: str = "",
    **ways: Unpack[WaysOut],
) -> PageView:
    """The page for a stage of a run, at rest or at one phase of a training step.

    `previous` is the stage the person came from: the cells that changed are marked and the change
    said in a sentence. `compare` is the side-by-side page's address, without its query. `ways`: the
    route's own fields of the view (its ways out, its address), set as it is built.
    """
    content = _predicting(stage_view(stage, scenario, link, phase, previous), link)
    return PageView(
        title=f"{stage.info.title} · {APP_NAME}",
        links=tuple(_ask_first(s, link, stage, phase) for s in stage_links(stage, link)),
        legend=legend(scenario.recipe),
        form=replace(form_view(scenario, stage, inputs or Inputs(), phase), action=link.page, keep=link.options),
        content=content,
        step_href=link.at(stage, 0),
        step_enter_href=link.at(stage, 1),
        compare_href=compare_href(compare, stage, link.kept) if compare else "",
        theme=link.theme,
        theme_href=link.themed(link.theme.other).at(stage, phase),
        scheme_hrefs=tuple(link.themed(t).at(stage, phase) for t in link.theme.schemes),
        # Predict first's options come last in an address (`Links.options`): on, it is one more of them.
        predict_href=(
            replace(link, predict="").at(stage, phase) if link.predict else f"{link.at(stage, phase)}&predict=1"
        ),
        predicting=bool(link.predict),
        **ways,
    )


def _ask_first(switch: StageLink, link: Links, stage: Stage, phase: int | None) -> StageLink:
    """Predict first (`Links.predict`): a switch from `stage` to another goes by the question about it."""
    if not link.predict or switch.current:
        return switch
    return replace(switch, href=link.ask(stage, phase, switch.stage))


def _predicting(content: StageView, link: Links) -> StageView:
    """Predict first: the step's next phase goes by the question about it (the slider and the rest go straight)."""
    step = content.step
    if not link.predict or step is None or step.next_href is None:
        return content
    return replace(content, step=replace(step, next_href=link.ask(content.stage, step.index, None)))


def with_problems(view: PageView, problems: tuple[FieldProblem, ...]) -> PageView:
    """The page with the form showing what was typed in fields that were set aside, and why."""
    if view.form is None or not problems:
        return view
    return replace(view, form=view.form.with_problems(problems))


def error_view(
    message: str, link: LinkFor, current: Stage | None = None, compare_href: str = "", measured_href: str = ""
) -> PageView:
    """The page when the request could not be understood: the message, and the ways on.

    The switcher always; on the page, the side-by-side page and the measured one too (`compare_href`,
    `measured_href`), as every other page of the widget offers them.
    """
    return PageView(
        title=f"Not understood · {APP_NAME}",
        links=stage_links(current, link),
        legend=legend(DEFAULT_SCENARIO.recipe),
        error=message,
        compare_href=compare_href,
        measured_href=measured_href,
        theme=link.theme if isinstance(link, Links) else Theme.DEFAULT,
    )
