"""Embedding: the widget alone in another site's page, and the "Embed this" panel whose snippet puts it there."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from markupsafe import escape

from app import APP_NAME
from app.domain.stages import Stage
from app.web.inputs import Theme
from app.web.links import Links


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
        """Whether the step's controls are shown."""
        return self.controls == "step"

    def phase(self, asked: int | None) -> int | None:
        """The phase drawn for the phase `asked` (None: at rest).

        With the step's controls the step is always open, at rest at its first phase (the state at rest):
        a frame as tall as the step from the start, so that entering it never moves the course page.
        """
        return STEP_START if asked is None and self.step_controls else asked


@dataclass(frozen=True)
class EmbedSnippet:
    """The HTML a teacher pastes to embed the view shown, with one choice of controls and of the calculator."""

    controls: str
    label: str
    url: str
    html: str
    selected: bool
    calculator: bool = False
    checked: str | None = field(init=False, repr=False, compare=False)
    """The calculator's box, ticked when this snippet (shown first) has it."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "checked", "" if self.calculator else None)


@dataclass(frozen=True)
class EmbedChoice:
    """A link to the panel with another choice, for a browser without JavaScript (which has no drop-down)."""

    label: str
    href: str
    current: bool
    aria_current: str | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "aria_current", "true" if self.current else None)


@dataclass(frozen=True)
class ControlsOption:
    """One choice of controls in the panel's drop-down: its snippet without the calculator and with it."""

    plain: EmbedSnippet
    full: EmbedSnippet
    selected: str | None


@dataclass(frozen=True)
class ShareView:
    """The "Embed this" panel: a share link and copy-ready snippets, all absolute."""

    link: str
    snippets: tuple[EmbedSnippet, ...]
    """One for each choice of controls and calculator, the calculator's after the others."""
    choices: tuple[EmbedChoice, ...] = ()
    """The choice of controls as links, then the calculator's."""
    calculator_choices: tuple[EmbedChoice, ...] = ()
    chosen: EmbedSnippet = field(init=False, repr=False, compare=False)
    """The snippet shown first."""
    options: tuple[ControlsOption, ...] = field(init=False, repr=False, compare=False)
    """The choice of controls, each with its snippet without the calculator and with it."""
    choice_lists: tuple[tuple[tuple[EmbedChoice, ...], tuple[EmbedChoice, ...]], ...] = field(
        init=False, repr=False, compare=False
    )
    """The choices as links, where the panel has them: the controls', then the calculator's."""

    def __post_init__(self) -> None:
        plain = [s for s in self.snippets if not s.calculator]
        full = {s.controls: s for s in self.snippets if s.calculator}
        options = tuple(
            ControlsOption(s, full[s.controls], "" if s.selected or full[s.controls].selected else None) for s in plain
        )
        object.__setattr__(self, "chosen", next(s for s in self.snippets if s.selected))
        object.__setattr__(self, "options", options)
        lists = ((self.choices, self.calculator_choices),) if self.choices else ()
        object.__setattr__(self, "choice_lists", lists)


@dataclass(frozen=True)
class SharePageView:
    """The "Embed this" panel: swapped into the page's when opened, or a page of its own without JavaScript."""

    title: str
    share: ShareView
    back_href: str
    """The view the panel embeds."""
    theme: Theme = Theme.DEFAULT


STEP_START = 0
"""The step's first phase: every card's state at rest, before anything moves (app/domain/step.py)."""

EMBED_HEIGHT = 800
"""The snippet's height in pixels: with the host script the frame then fits its content; without,
the embed scrolls inside it. The switcher's embed (the snippet's default) fits in it in a 700–800 px column."""


_CONTROL_LABELS = {
    "stages": "The stage switcher",
    "step": "The stage switcher and the step's controls",
    "none": "None: just the picture",
}


def embed_view(controls: str, calculator: bool) -> EmbedView:
    """What an embed shows around the picture."""
    return EmbedView(controls=controls, calculator=calculator)


def _embed_options(controls: str, calculator: bool) -> tuple[tuple[str, str], ...]:
    """An embed's options in its address, as the embed's own links keep them (`EmbedQuery.options`)."""
    return (
        *((("controls", controls),) if controls != "stages" else ()),
        *((("calculator", "1"),) if calculator else ()),
    )


def share_view(
    stage: Stage,
    page: Links,
    embed: Links,
    script: str,
    chosen: tuple[str, bool] = ("stages", False),
    panel: Links | None = None,
) -> ShareView:
    """The "Embed this" panel for the view shown.

    `page` and `embed` build absolute addresses (the request's scheme, host and prefix) of the page
    and the embed with the same run and phase; `script` is the host script's absolute address.
    `chosen` is the controls and calculator whose snippet is shown first; `panel`, when given, builds
    the panel's own address, for links to the other choices that need no JavaScript.
    """
    title = f"{APP_NAME}: {stage.info.title}"
    snippets = []
    for calculator in (False, True):
        for controls, label in _CONTROL_LABELS.items():
            url = replace(embed, keep=_embed_options(controls, calculator), theme=embed.theme.framed)(stage)
            html = (
                f'<iframe src="{escape(url)}" title="{escape(title)}" width="100%" height="{EMBED_HEIGHT}"'
                ' style="border:0;max-width:800px" allow="fullscreen" loading="lazy" data-zero-bands></iframe>\n'
                f'<script src="{escape(script)}" defer></script>'
            )
            snippets.append(EmbedSnippet(controls, label, url, html, (controls, calculator) == chosen, calculator))
    choices: tuple[EmbedChoice, ...] = ()
    calculators: tuple[EmbedChoice, ...] = ()
    if panel is not None:
        controls_now, calculator_now = chosen

        def choice(label: str, controls: str, calculator: bool) -> EmbedChoice:
            href = replace(panel, keep=_embed_options(controls, calculator))(stage)
            return EmbedChoice(label, href, (controls, calculator) == chosen)

        choices = tuple(choice(label, c, calculator_now) for c, label in _CONTROL_LABELS.items())
        calculators = (choice("Without", controls_now, False), choice("With", controls_now, True))
    return ShareView(page(stage), tuple(snippets), choices, calculators)


def share_page_view(
    stage: Stage,
    link: Links,
    page: Links,
    embed: Links,
    script: str,
    chosen: tuple[str, bool] = ("stages", False),
    panel: Links | None = None,
) -> SharePageView:
    """The "Embed this" panel for `stage` of the run `link` keeps, with a way back to that view.

    `chosen` and `panel` as `share_view` takes them.
    """
    title = f"Embed {stage.info.title} · {APP_NAME}"
    return SharePageView(title, share_view(stage, page, embed, script, chosen, panel), link(stage), link.theme)
