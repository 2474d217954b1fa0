"""The page: the switcher, the form, the key and the stage's view, or the message when a request was not understood."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

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
from app.web.set_aside_view import SetAsideView
from app.web.stage_view import StageLink, StageView, stage_links, stage_view

if TYPE_CHECKING:  # the live bars' module builds on the errors', which builds on this one
    from app.web.live_view import LiveView


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
    configs: ConfigView | None = None
    """The run as a DeepSpeed config or FSDP2 snippet to copy, and the box to paste a config in (the page only)."""
    address: str = ""
    """The view's own address (on the widget, where a live session's teacher page reads what to send)."""
    live: LiveView | None = None
    """A live session's bar around the widget: the teacher's, or a follower's (app/web/live_view.py)."""

    @property
    def key(self) -> Key | None:
        """The key to the cards (app/web/key_view.py); None where no stage is drawn."""
        return page_key(self)


DEFAULT_SCENARIO = resolve(Inputs())


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
) -> PageView:
    """The page for a stage of a run, at rest or at one phase of a training step.

    `previous` is the stage the person came from: the cells that changed are marked and the change
    said in a sentence. `compare` is the side-by-side page's address, without its query.
    """
    return PageView(
        title=f"{stage.info.title} · {APP_NAME}",
        links=stage_links(stage, link),
        legend=legend(scenario.recipe),
        form=replace(form_view(scenario, stage, inputs or Inputs(), phase), action=link.page, keep=link.options),
        content=stage_view(stage, scenario, link, phase, previous),
        step_href=link.at(stage, 0),
        step_enter_href=link.at(stage, 1),
        compare_href=compare_href(compare, stage, link.kept) if compare else "",
        theme=link.theme,
        theme_href=link.themed(link.theme.other).at(stage, phase),
    )


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
