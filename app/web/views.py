"""Building the view models from the domain, at rest: the grid, bars, table, form and page.

Every figure the page prints is formatted here (or in `step_view`) from the domain's numbers, so
templates only lay things out and tests can check the same values the page shows.
"""

from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from markupsafe import escape

from app.domain.architecture import PRESETS, ModelName
from app.domain.bands import RECIPES, Band, Recipe, RecipeName
from app.domain.change import Change
from app.domain.change import change as _change
from app.domain.communication import transfers
from app.domain.fit import UNKNOWN_LAYER_RULE, Run, StageReport, layer_exceeds_card, layer_extra, report
from app.domain.hardware import CARDS
from app.domain.quantities import LARGEST_COUNT, ByteUnit, per_weight, percent
from app.domain.quantities import count_label as params_label
from app.domain.scenario import Inputs, Scenario, resolve
from app.domain.sharding import Cell, CellState, Layout, layout
from app.domain.stages import Stage
from app.domain.stages import explanation as _explanation
from app.web.bars import BarScale, bar_note, bar_view
from app.web.links import compare_address
from app.web.step_view import step_view
from app.web.view_models import (
    BandField,
    BarView,
    Boundary,
    CardGap,
    CardView,
    CellView,
    ColumnView,
    EmbedChoice,
    EmbedSnippet,
    EmbedView,
    FieldProblem,
    FormView,
    LinkFor,
    Links,
    Narration,
    Option,
    PageView,
    SharePageView,
    ShareView,
    StageLink,
    StageView,
    StepView,
    TableRow,
    Theme,
    legend,
)

APP_NAME = "ZeRO Bands"
DEFAULT_SCENARIO = resolve(Inputs())


def gpus_label(gpus: int) -> str:
    """'1 GPU', '8 GPUs', '1,024 GPUs'."""
    return f"{gpus:,} GPU{'' if gpus == 1 else 's'}"


def cell_label(cell: Cell, recipe: Recipe, sharded: bool) -> str:
    """What a person hovering, focusing or listening to a cell is told; `sharded`: whether the stage shards its band."""
    spec = recipe.spec(cell.band)
    where = f"GPU {cell.card}, weight {cell.weight}, {spec.label} ({spec.precision}, {spec.nbytes} B)"
    if cell.state is CellState.DASHED:
        return f"{where}: not stored here. GPU {cell.holder} holds it on this weight's behalf."
    # A band the stage keeps whole is every card's own copy, on the card responsible for the weight too.
    if sharded and cell.holder == cell.card:
        return f"{where}: stored on this card, which is responsible for weight {cell.weight}."
    return f"{where}: stored on this card; every card keeps its own copy."


def switch_href(link: LinkFor, stage: Stage, current: Stage | None) -> str:
    """A link to `stage` that names the stage shown (`from`), so the page can mark what changed."""
    return link.switch(stage, current) if isinstance(link, Links) else link(stage)


def stage_links(current: Stage | None, link: LinkFor) -> tuple[StageLink, ...]:
    """The switcher, with the current stage marked."""
    return tuple(
        StageLink(stage, stage.info.title, stage.info.summary, switch_href(link, stage, current), stage is current)
        for stage in Stage
    )


def _hidden_before(shown: tuple[int, ...], position: int) -> int:
    """How many cards (or weights) a sampled grid leaves out just before `shown[position]`."""
    return shown[position] - shown[position - 1] - 1 if position else 0


def _columns(grid: Layout, card: int, tab_stop: bool, moved: Change | None = None) -> tuple[ColumnView, ...]:
    """A card's columns; `tab_stop` makes its first cell the grid's single tab stop."""
    recipe = grid.recipe
    cells = [c for c in grid.card_cells(card) if recipe.nbytes(c.band) > 0]
    first = cells[0] if tab_stop else None
    by_weight: dict[int, list[Cell]] = {}
    for c in cells:
        by_weight.setdefault(c.weight, []).append(c)
    columns: list[ColumnView] = []
    for position, weight in enumerate(grid.shown):
        if hidden := _hidden_before(grid.shown, position):
            columns.append(ColumnView(None, False, (), f"{hidden:,} more weights"))
        responsible = weight == card and bool(grid.stage.sharded)
        # Past ten columns every other number is left out, so two-digit labels still fit.
        labelled = len(grid.shown) <= 10 or weight % 2 == 0 or responsible
        columns.append(
            ColumnView(
                weight=weight,
                responsible=responsible,
                axis_label=str(weight) if labelled else "",
                cells=tuple(
                    CellView(
                        card=c.card,
                        weight=c.weight,
                        band=c.band,
                        state=c.state,
                        holder=c.holder,
                        nbytes=recipe.nbytes(c.band),
                        label=cell_label(c, recipe, c.band in grid.stage.sharded),
                        # One tab stop for the whole grid; the arrow keys move within it.
                        focusable=c is first,
                        changed=moved is not None and moved.cell_changes(c.card, c.weight, c.band, grid.gpus),
                    )
                    for c in by_weight[weight]
                ),
            )
        )
    return tuple(columns)


# A card's cells depend on the stage, the cluster and the recipe (and the stage left), not on the
# model's size: a class trying other sizes on the same cluster gets them built once. Pure
# functions of hashable inputs; the bounds keep them to a few MB.
_layout = lru_cache(maxsize=64)(layout)
# So are what a switch changes and a stage's explanation: built once, for every model size.
change = lru_cache(maxsize=256)(_change)
explanation = lru_cache(maxsize=256)(_explanation)


@lru_cache(maxsize=512)
def card_columns(
    stage: Stage, gpus: int, recipe: Recipe, card: int, tab_stop: bool, moved: Change | None
) -> tuple[ColumnView, ...]:
    """One drawn card's columns of cells (see `_columns`), built once for each set of inputs."""
    return _columns(_layout(stage, gpus, recipe), card, tab_stop, moved)


def _verdict(row: StageReport, units: ByteUnit) -> str:
    if row.fits is None or row.headroom_bytes is None:
        return ""
    if row.fits:
        return f"Fits: {units.show(row.headroom_bytes)} left for activations."
    return f"Does not fit: {units.show(-row.headroom_bytes)} over."


def _rest_bar(scenario: Scenario, row: StageReport, scale: BarScale | None) -> BarView:
    run = scenario.run
    extra = layer_extra(row.stage, run, run.largest_layer, backward=True)
    bar = bar_view(scenario, row.stage, extra, row.peak_bytes, "Peak memory on one card", scale)
    return replace(bar, verdict=_verdict(row, scenario.units), fits=row.fits)


def rest_cards(
    scenario: Scenario, stage: Stage, row: StageReport, scale: BarScale | None = None, moved: Change | None = None
) -> tuple[CardView | CardGap, ...]:
    """The cards of `stage` at rest, each bar to `scale` (else the stage's own); `moved` marks what a switch changed."""
    grid = _layout(stage, scenario.run.gpus, scenario.recipe)
    bar = _rest_bar(scenario, row, scale)
    # Every card at rest holds as much as every other: its figures are printed once, shown on each.
    bytes_per_weight = f"{per_weight(row.bytes_per_weight)} B/weight"
    model_bytes = scenario.units.show(row.per_gpu_bytes)
    cards: list[CardView | CardGap] = []
    for position, card in enumerate(grid.shown):
        if hidden := _hidden_before(grid.shown, position):
            cards.append(CardGap(f"GPU {card - hidden:,} to GPU {card - 1:,}: the same pattern"))
        cards.append(
            CardView(
                index=card,
                title=f"GPU {card:,}",
                columns=card_columns(stage, grid.gpus, grid.recipe, card, position == 0, moved),
                bytes_per_weight=bytes_per_weight,
                model_bytes=model_bytes,
                bar=bar,
            )
        )
    return tuple(cards)


def table_rows(
    current: Stage | None, link: LinkFor, rows: tuple[StageReport, ...], scenario: Scenario
) -> tuple[TableRow, ...]:
    """The comparison table, one row per stage."""
    units, gpus = scenario.units, scenario.run.gpus
    return tuple(
        TableRow(
            stage=r.stage,
            title=r.stage.info.title,
            href=switch_href(link, r.stage, current),
            bytes_per_weight=per_weight(r.bytes_per_weight),
            per_gpu=units.show(r.per_gpu_bytes),
            peak=units.show(r.peak_bytes),
            communication=f"{r.communication_p}P",
            communication_bytes=units.show(r.communication_bytes),
            breakdown=tuple(t.description for t in transfers(r.stage, gpus)) or ("nothing: one card",),
            fits=r.fits,
            headroom=None if r.headroom_bytes is None else _headroom(r.headroom_bytes, units),
            max_model=_max_model(r),
            current=r.stage is current,
        )
        for r in rows
    )


def _max_model(row: StageReport) -> str | None:
    if row.fits is None:
        return None
    if row.max_params_that_fit is None:
        return "none: one layer alone is too big"
    if row.max_params_that_fit > LARGEST_COUNT:
        # More than the form reads: its largest count fits, and that is as far as it can say.
        return f"at least {params_label(_floor_significant(LARGEST_COUNT))} weights"
    # Rounded down, so the figure shown, entered as a model, still fits.
    return f"{params_label(_floor_significant(row.max_params_that_fit))} weights"


def _floor_significant(count: int, digits: int = 3) -> int:
    """`count` cut (never rounded up) to its first `digits` significant digits."""
    step: int = 10 ** max(len(str(count)) - digits, 0)
    return count // step * step


def _headroom(headroom: int, units: ByteUnit) -> str:
    return f"{units.show(headroom)} left" if headroom >= 0 else f"{units.show(-headroom)} over"


def boundary(scenario: Scenario) -> Boundary:
    """ZeRO-3's limit for this run, in words."""
    run, units = scenario.run, scenario.units
    assembled = run.assembled_layer_bytes
    exceeds = layer_exceeds_card(run)
    if assembled is None or run.largest_layer is None:
        verdict = UNKNOWN_LAYER_RULE
    elif exceeds is None:
        verdict = "Give the card's memory to check that one assembled layer fits."
    elif exceeds:
        verdict = (
            "One assembled layer alone is bigger than the card, so ZeRO cannot help: the layer itself "
            "must be split across cards, which is tensor parallelism."
        )
    elif run.gpus == 1:
        verdict = "One assembled layer fits on the card; with one card nothing is gathered, the whole model is there."
    else:
        verdict = "One assembled layer fits on a card, so ZeRO-3 can gather it."
    return Boundary(
        largest_layer=None if run.largest_layer is None else f"{run.largest_layer:,} weights",
        source=scenario.largest_layer_source,
        assembled=None if assembled is None else units.show(assembled),
        exceeds=exceeds,
        verdict=verdict,
    )


def form_view(scenario: Scenario, stage: Stage, inputs: Inputs, phase: int | None = None) -> FormView:
    """The form, showing the run as resolved."""
    run = scenario.run
    custom_recipe = scenario.recipe.name == RecipeName.CUSTOM
    models = (
        *(Option(p.name, p.title, p.name == scenario.model) for p in PRESETS.values()),
        Option(ModelName.CUSTOM, "Another model: enter its weights", scenario.model is ModelName.CUSTOM),
    )
    recipes = (
        *(Option(r.name, f"{r.title} ({_sizes(r)} B)", r is scenario.recipe) for r in RECIPES.values()),
        Option(RecipeName.CUSTOM, "Custom bytes per band", custom_recipe),
    )
    return FormView(
        stage=stage,
        models=models,
        params=str(run.params),
        params_readonly=scenario.model is not ModelName.CUSTOM,
        gpus=run.gpus,
        recipes=recipes,
        bands=tuple(
            BandField(f"{spec.band}_bytes", spec.label, spec.nbytes, _minimum(spec.band), not custom_recipe)
            for spec in scenario.recipe.specs
        ),
        bands_readonly=not custom_recipe,
        largest_layer="" if inputs.largest_layer is None else str(inputs.largest_layer),
        largest_layer_placeholder="derived" if scenario.run.largest_layer is not None else "unknown",
        # Open when it holds something the person entered, closed on the seed's view.
        more_open=custom_recipe or inputs.largest_layer is not None,
        capacity="" if run.capacity is None else _capacity_text(run.capacity),
        cards=tuple(Option(card.entry, f"{card.name}, {card.gib} GiB") for card in CARDS),
        units=tuple(Option(unit.value, unit.value, unit is scenario.units) for unit in ByteUnit),
        phase=phase,
    )


def _sizes(recipe: Recipe) -> str:
    return "/".join(str(spec.nbytes) for spec in recipe.specs)


def _minimum(band: Band) -> int:
    return 1 if band is Band.WEIGHTS else 0


def _capacity_text(capacity: int) -> str:
    for unit, suffix in ((2**30, "GiB"), (10**9, "GB")):
        if capacity % unit == 0:
            return f"{capacity // unit}{suffix}"
    return str(capacity)


def bar_keys(stage: Stage, run: Run) -> tuple[str, ...]:
    """What of one layer a stage's bars draw: its largest layer's, at the peak, has the most."""
    extra = layer_extra(stage, run, run.largest_layer, backward=True)
    return (*(("gathered",) if extra.gathered else ()), *(("sent",) if extra.computed else ()))


def stage_view(
    stage: Stage, scenario: Scenario, link: Links, phase: int | None = None, previous: Stage | None = None
) -> StageView:
    """The grid, bars, totals, table and verdicts for one stage of a run (or one phase of its step)."""
    run, units = scenario.run, scenario.units
    rows = report(run)
    by_stage = {r.stage: r for r in rows}
    chosen = by_stage[stage]
    cards: tuple[CardView | CardGap, ...]
    stepping = None
    moved = None if previous is None or previous is stage else change(previous, stage, run.recipe, run.gpus)
    if phase is None:
        cards = rest_cards(scenario, stage, chosen, moved=moved)
    else:
        stepping, cards = step_view(stage, scenario, link, phase)
    return StageView(
        stage=stage,
        info=stage.info,
        explanation=explanation(stage, run.recipe, run.gpus),
        shards_anything=bool(stage.sharded),
        gpus=run.gpus,
        params_label=params_label(run.params),
        summary=f"{scenario.model_title}, {run.params:,} weights, on {gpus_label(run.gpus)} with {run.recipe.title}",
        bytes_per_weight=per_weight(chosen.bytes_per_weight),
        per_gpu=units.show(chosen.per_gpu_bytes),
        share_of_dp=percent(chosen.bytes_per_weight / by_stage[Stage.DP].bytes_per_weight),
        axis_digits=len(str(run.gpus - 1)),
        cards=cards,
        sampled=any(isinstance(card, CardGap) for card in cards),
        rows=table_rows(stage, link, rows, scenario),
        capacity=None if run.capacity is None else units.show(run.capacity),
        boundary=boundary(scenario),
        notes=scenario.notes,
        step=stepping,
        change="" if moved is None else moved.sentence,
        bar_note=bar_note(scenario, stage),
        bar_keys=bar_keys(stage, run),
        narration=narration(stage, scenario, chosen, moved, stepping),
    )


def narration(
    stage: Stage, scenario: Scenario, row: StageReport, moved: Change | None, stepping: StepView | None
) -> Narration:
    """One sentence for each thing a swap can change, for the live region."""
    run = scenario.run
    said = moved.sentence if moved else change(Stage.DP, stage, run.recipe, run.gpus).sentence
    if stage is Stage.DP and moved is None:
        said = f"{stage.info.title}: every card keeps all {per_weight(row.bytes_per_weight)} bytes per weight."
    phase = (
        ""
        if stepping is None
        else (
            f"Phase {stepping.index} of {stepping.last}: {stepping.title.rstrip('.')}. "
            f"Traffic so far: {stepping.tally} of {stepping.total}."
        )
    )
    fit, units = "", scenario.units
    if run.capacity is not None and row.headroom_bytes is not None:
        card = units.show(run.capacity)
        if row.fits:
            fit = f"{stage.info.title} fits on {card}: {units.show(row.headroom_bytes)} left for activations."
        else:
            fit = f"{stage.info.title} does not fit on {card}: {units.show(-row.headroom_bytes)} over."
    return Narration(stage=said, phase=phase, fit=fit)


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


# Fields folded away under "Bytes per band and largest layer": opened when one of them is wrong.
_FOLDED = frozenset({"weights_bytes", "gradients_bytes", "master_bytes", "moments_bytes", "largest_layer"})


def with_problems(view: PageView, problems: tuple[FieldProblem, ...]) -> PageView:
    """The page with the form showing what was typed in fields that were set aside, and why."""
    if view.form is None or not problems:
        return view
    more_open = view.form.more_open or any(p.name in _FOLDED for p in problems)
    return replace(view, form=replace(view.form, problems=problems, more_open=more_open))


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


# Embedding: the widget alone in another site's page, and the snippet that puts it there.

EMBED_HEIGHT = 720
"""The snippet's height in pixels: with the host script the frame then fits its content; without,
the embed scrolls inside it."""

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
            url = replace(embed, keep=_embed_options(controls, calculator), theme=Theme.DEFAULT)(stage)
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
