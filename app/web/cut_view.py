"""The cards of a cut model at rest: each card's eighths of the model, framed by pipeline stage and tensor group.

The geometry is `app.domain.cut_grid`'s; this module words it and frames it. A cut run's grid draws the
model's eighths as columns (as the step does), a card's own stage's columns filled or part filled (its tensor
slice, and inside it ZeRO's share), the other stages' columns absent. The cards sit in one frame a pipeline
stage, and inside it in one frame a tensor-parallel group (neighbouring cards of one node, Megatron's order).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import ClassVar

from app.domain.cut_grid import ROW, cut_cell, cut_drawn, rank, stage_columns, stage_room, zero_group
from app.domain.eighths import COLUMNS, Column
from app.domain.parallel import Cut, stage_blocks
from app.domain.recipes import Band, BandSpec
from app.domain.report import Beat, Holding, Part, Phase, StageReport
from app.domain.scenario import Scenario
from app.domain.sharding import CellState
from app.domain.stages import Stage
from app.domain.units import per_weight
from app.web.bars import card_bar
from app.web.card_words import holding_sentence
from app.web.expert_view import expert_rest_columns, expert_step_columns, experts_held
from app.web.grid_view import (
    CardGap,
    CardView,
    CellView,
    ColumnView,
    NodeGap,
    NodeView,
    TpGroup,
    band_height,
    card_total,
)
from app.web.links import Links

SHARE_STEPS = 48
"""A part filled cell's strip is drawn in 48ths of the column (static/app.css has a class for each)."""


@dataclass(frozen=True)
class CutGap(CardGap):
    """Where a cut grid leaves cards out: beside its stage's drawn group, in the rest of the row."""

    width: int = 8
    brief: bool = False
    """A line under its stage's cards (stages side by side), not a box beside them."""
    kind: ClassVar[str] = "cut_gap"
    css: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "css", f"card-gap span-{self.width}" + (" brief" if self.brief else ""))


def _strip(start: float, end: float) -> tuple[int, int]:
    first = int(start * SHARE_STEPS)
    return first, max(first + 1, round(end * SHARE_STEPS))


def _blocks(scenario: Scenario) -> int | None:
    """The model's blocks, which share the columns between the stages; None for a bare weight count."""
    return scenario.architecture.layers if scenario.architecture is not None else None


def card_place(card: int, cut: Cut, gpus: int, blocks: int | None = None) -> str:
    """A card's stage and tensor slice in words: "stage 1 of 2, columns 0 to 3, tensor slice 2 of 2"."""
    here = rank(card, cut, gpus)
    columns = stage_columns(here.stage, cut.pp, blocks)
    span = f"column {columns[0]}" if len(columns) == 1 else f"columns {columns[0]} to {columns[-1]}"
    said = [f"stage {here.stage + 1} of {cut.pp}, {span}"] if cut.pp > 1 else []
    if cut.tp > 1:
        said.append(f"tensor slice {here.tp + 1} of {cut.tp}")
    if cut.cp > 1:
        said.append(f"context rank {here.cp + 1} of {cut.cp}")
    return ", ".join(said)


def _label(
    card: int,
    column: Column,
    spec: BandSpec,
    cut: Cut,
    gpus: int,
    sharded: bool,
    was: bool | None = None,
    blocks: int | None = None,
) -> tuple[CellView, str]:
    """A cell's drawing and its words: what this card keeps of one band of one eighth of the model.

    `was`: whether the stage the person came from sharded this band (None: they came from none); ringed if the
    cell is drawn otherwise now.
    """
    cell = cut_cell(card, column.index, sharded, cut, gpus, blocks)
    changed = was is not None and cut_cell(card, column.index, was, cut, gpus, blocks) != cell
    where = f"Column {column.index} ({column.label}), {spec.label} ({spec.precision}, {spec.shown} B)"
    if cell.state is CellState.ABSENT:
        stage = rank(cell.holder, cut, gpus).stage + 1
        said = f"{where}: not on this card. Pipeline stage {stage} keeps these layers (GPU {cell.holder:,} and others)."
    elif cell.state is CellState.DASHED:
        said = f"{where}: not stored here. GPU {cell.holder:,}, in this card's ZeRO group, holds it on its behalf."
    elif cell.part is not None:
        slice_words = f"its tensor slice, 1/{cut.tp}" if cut.tp > 1 else "its part"
        said = f"{where}: this card stores {slice_words} of it ({cell.part.text} of the column); other cards the rest."
    else:
        said = f"{where}: stored on this card."
    strip = None if cell.part is None else _strip(float(cell.part.start), float(cell.part.end))
    view = CellView(
        card=card,
        weight=column.index,
        band=spec.band,
        state=cell.state,
        holder=cell.holder,
        nbytes=band_height(spec.nbytes),
        label=said,
        strip=strip,
        share=cell.part.text if cell.part is not None else "",
        changed=changed,
    )
    return view, said


def cut_columns(scenario: Scenario, stage: Stage, card: int, previous: Stage | None = None) -> tuple[ColumnView, ...]:
    """One card's eighths of the model: its stage's filled or part filled, the others absent.

    `previous`: the stage the person came from, whose cells drawn otherwise are ringed.
    """
    run, recipe = scenario.run, scenario.recipe
    cut, gpus = run.cut, run.gpus
    blocks = _blocks(scenario)
    own = stage_columns(rank(card, cut, gpus).stage, cut.pp, blocks)
    columns = []
    for column in scenario.columns:
        cells = tuple(
            _label(
                card,
                column,
                spec,
                cut,
                gpus,
                spec.band in stage.sharded,
                None if previous is None else spec.band in previous.sharded,
                blocks,
            )[0]
            for spec in recipe.specs
            if spec.nbytes > 0
        )
        # Underlined: the column holding this card's ZeRO share (some sharded band kept here).
        responsible = bool(stage.sharded) and zero_group(cut, gpus) > 1 and column.index in own
        responsible = responsible and any(c.band in stage.sharded and c.state is not CellState.DASHED for c in cells)
        columns.append(ColumnView(column.index, responsible, cells, axis_label=str(column.index)))
    return (*columns, *expert_rest_columns(scenario, stage, card))


def _in_hand(phase: Phase, column: int, band: Band, whole: bool) -> Holding | None:
    """What a pass's phase does to a card's band of the column in hand, as `Phase.holding` does (None: nothing).

    `whole`: whether the card keeps all of its tensor slice of the band (unsharded, or its ZeRO share covers
    it), on the card; then nothing is gathered or sent. The cut's shares are the stage's, not the whole
    model's that `Phase.holding` knows, so the rule is asked here of the cut's cell.
    """
    if column != phase.column or not phase.reached or whole:
        return None
    if band is Band.WEIGHTS and phase.part in (Part.FORWARD, Part.BACKWARD) and phase.beat is not Beat.DISCARD:
        return Holding.GATHERED
    if band is Band.GRADIENTS and phase.part is Part.BACKWARD and phase.beat is not Beat.GATHER:
        return Holding.SENT
    return None


REST_HOLDING = {CellState.SOLID: Holding.HELD, CellState.PARTIAL: Holding.PARTIAL, CellState.DASHED: Holding.DASHED}
"""A cut cell at rest, as the step's holding says it."""


def cut_step_columns(phase: Phase, scenario: Scenario, card: int) -> tuple[ColumnView, ...]:
    """One card's eighths during a phase of the step, with the model cut.

    The card keeps its stage's columns and its tensor slice as at rest (`cut_cell`); another stage's columns are
    absent, and nothing of the phase happens on them. On its own stage's columns the phase's marks are the
    step's: the weights assembled for the gather and the compute (its tensor slice, from its ZeRO group), the
    gradients computed and sent at the discard, the cells the phase works on. The step's ZeRO member is the
    card's place in its ZeRO group (`cp_rank + cp × dp_rank`).
    """
    run, recipe = scenario.run, scenario.recipe
    cut, gpus = run.cut, run.gpus
    here = rank(card, cut, gpus)
    member = here.cp + cut.cp * here.dp
    own = stage_columns(here.stage, cut.pp)
    columns = []
    for column in scenario.columns:
        cells = []
        for spec in recipe.specs:
            if spec.nbytes == 0:
                continue
            rest, _ = _label(card, column, spec, cut, gpus, spec.band in phase.sharded)
            if rest.state is CellState.ABSENT:
                cells.append(rest)
                continue
            # The update works on the columns the card keeps a share of: ask the step for a member whose share
            # falls in this column (the step's shares are the whole model's, the cut's the stage's).
            if phase.part is Part.UPDATE:
                first = column.index * phase.group // COLUMNS
                active = rest.state is not CellState.DASHED and phase.active(first, column.index, spec.band)
            else:
                active = phase.active(member, column.index, spec.band)
            whole = spec.band not in phase.sharded or cut_cell(card, column.index, True, cut, gpus) == cut_cell(
                card, column.index, False, cut, gpus
            )
            holding = _in_hand(phase, column.index, spec.band, whole and spec.band not in phase.on_host)
            if holding is not None:
                where = f"GPU {card:,}, column {column.index} ({column.label}), {spec.label}"
                said = (
                    f"{where}: this card's tensor slice assembled here from its ZeRO group, for this phase only."
                    if holding is Holding.GATHERED
                    else f"{where}: its tensor slice's gradients computed here, then reduce-scattered over its "
                    "ZeRO group and dropped."
                )
                view = CellView(
                    card=card,
                    weight=column.index,
                    band=spec.band,
                    state=holding.state,
                    holder=card,
                    nbytes=rest.nbytes,
                    label=said,
                    holding=holding,
                    active=active,
                )
            else:
                view = replace(rest, holding=REST_HOLDING[rest.state], active=active)
            cells.append(view)
        responsible = bool(phase.sharded) and zero_group(cut, gpus) > 1 and column.index in own
        responsible = responsible and any(
            c.band in phase.sharded and c.state is not CellState.DASHED and c.holding is not Holding.GATHERED
            for c in cells
        )
        columns.append(ColumnView(column.index, responsible, tuple(cells), axis_label=str(column.index)))
    return (*columns, *expert_step_columns(phase, scenario, card))


def cut_cards(
    scenario: Scenario, stage: Stage, row: StageReport, previous: Stage | None = None
) -> tuple[CardView | CardGap, ...]:
    """The cards of a cut run at rest (every one up to 16; one tensor group a stage beyond), their bars as today."""
    run, units = scenario.run, scenario.units
    cut, gpus = run.cut, run.gpus
    bar = card_bar(scenario, stage, row.extra, None, *card_total(row, units), row.fits)
    bytes_per_weight = f"{per_weight(row.bytes_per_weight)} B/weight"
    figure = units.show(row.rest_bytes) + (
        f" at rest, {units.show(row.peak_bytes)} at its peak" if row.peak_bytes != row.rest_bytes else ""
    )
    shown = cut_drawn(cut, gpus)
    cards: list[CardView | CardGap] = []
    for position, card in enumerate(shown):
        if position and (hidden := card - shown[position - 1] - 1):
            words = _left_out(card - hidden, card - 1, cut, gpus)
            cards.append(_gap(words, shown, position, cut, gpus))
        columns = cut_columns(scenario, stage, card, previous)
        name = f"GPU {card:,}"
        cards.append(
            CardView(
                index=card,
                title=name,
                columns=columns,
                bytes_per_weight=bytes_per_weight,
                model_bytes=units.show(row.per_gpu_bytes),
                bar=bar,
                summary=holding_sentence(
                    f"{name} ({card_place(card, cut, gpus, _blocks(scenario))})" if cut.model_parallel > 1 else name,
                    "column",
                    COLUMNS,
                    scenario.recipe,
                    columns[:COLUMNS],  # the dense columns; the experts' are said after (`experts_held`)
                    (),
                    figure,
                )
                + experts_held(scenario, card),
                tab_stop=position == 0,
            )
        )
    if shown[-1] < gpus - 1:
        words = _left_out(shown[-1] + 1, gpus - 1, cut, gpus)
        cards.append(_gap(words, shown, len(shown), cut, gpus))
    return tuple(cards)


def _gap(words: str, shown: tuple[int, ...], position: int, cut: Cut, gpus: int) -> CutGap:
    """A gap's words and the grid's columns it takes.

    With the stages side by side a line under its stage's cards; else its row's room beside the drawn groups on
    either side, else a whole row.
    """
    if (room := stage_room(cut, gpus)) < ROW:
        return CutGap(words, room, brief=True)
    drawn = min(cut.tp, 8)
    between = (
        0 < position < len(shown)
        and rank(shown[position], cut, gpus).stage == rank(shown[position - 1], cut, gpus).stage
    )
    room = 8 - (2 if between else 1) * drawn if position else 8
    return CutGap(words, room if room > 0 else 8)


def _left_out(first: int, last: int, cut: Cut, gpus: int) -> str:
    """Which cards a gap stands for: their stages and data-parallel ranks, alike but for ZeRO's share."""
    a, b = rank(first, cut, gpus), rank(last, cut, gpus)
    stages = f"stage {a.stage + 1}" if a.stage == b.stage else f"stages {a.stage + 1} to {b.stage + 1}"
    cards = f"GPU {first:,}" if first == last else f"GPU {first:,} to GPU {last:,}"
    if cut.ep > 1:  # expert parallelism: each keeps its own experts too
        return f"{cards}: the other cards, each as a drawn card but for ZeRO's share and its own experts"
    if cut.pp == 1:  # no pipeline: one stage, which is not worth a name
        return f"{cards}: the other tensor groups, each as the drawn group but for ZeRO's share"
    return f"{cards}: {stages}'s other tensor groups, each as its stage's drawn group but for ZeRO's share"


def in_stages(
    cards: tuple[CardView | CardGap, ...],
    cut: Cut,
    gpus: int,
    per_node: int,
    link: tuple[str, str],
    blocks: int | None = None,
) -> tuple[NodeView | NodeGap, ...]:
    """The drawn cards in one frame a pipeline stage, and inside it one a tensor-parallel group.

    Between stages, the pipeline's link: the next stage's cards are on another node where a stage fills one.
    """
    between = link[1]
    by_stage: dict[int, list[CardView | CardGap]] = {}
    stage_of = 0
    for item in cards:
        if isinstance(item, CardView):
            stage_of = rank(item.index, cut, gpus).stage
        by_stage.setdefault(stage_of, []).append(item)
    per_stage = gpus // cut.pp
    room = stage_room(cut, gpus)
    found: list[NodeView | NodeGap] = []
    sends: list[str] = []
    for stage, items in by_stage.items():
        if found:
            crosses = (stage * per_stage) % per_node == 0
            over = f" ({between.split(':')[0].lower()})" if crosses else " (inside the node)"
            if room == ROW:  # one stage a row: the pipeline's link between them
                found.append(NodeGap("", f"Pipeline: stage {stage} sends its activations to stage {stage + 1}{over}"))
            else:
                sends.append(f"{stage} → {stage + 1}{over}")
        first, last = stage * per_stage, (stage + 1) * per_stage - 1
        nodes = (
            f"node {first // per_node:,}"
            if first // per_node == last // per_node
            else f"nodes {first // per_node:,}–{last // per_node:,}"
        )
        title = (
            f"Stage {stage + 1} of {cut.pp}: GPUs {first:,}–{last:,}, {nodes}"
            if cut.pp > 1
            else f"GPUs {first:,}–{last:,}"
        )
        found.append(
            NodeView(
                stage,
                title,
                _stage_link(stage, cut, blocks),
                _tp_groups(items, cut, per_node, per_stage > per_node),
                room,
            )
        )
    if sends:  # the stages side by side: their links in one line under them
        found.append(NodeGap("", "Pipeline, each stage sending its activations to the next: " + ", ".join(sends)))
    return tuple(found)


def _stage_link(stage: int, cut: Cut, blocks: int | None = None) -> str:
    """What a stage keeps, in words: its blocks where the stages are uneven (`parallel.stage_blocks`)."""
    share = "the whole model" if cut.pp == 1 else f"1/{cut.pp} of the layers"
    if cut.pp > 1 and cut.vpp == 1 and blocks is not None and blocks % cut.pp:
        share = f"{stage_blocks(blocks, cut.pp)[stage]} of the {blocks} blocks"
    return (
        f"keeps {share}"
        + (f", each layer cut {cut.tp} ways" if cut.tp > 1 else "")
        + (f", its experts split {cut.ep} ways" if cut.ep > 1 else "")
    )


def _tp_groups(
    items: list[CardView | CardGap], cut: Cut, per_node: int, spans: bool
) -> tuple[CardView | CardGap | TpGroup, ...]:
    """A stage's items, its cards gathered in their tensor-parallel groups (one card alone without tp).

    `spans`: whether the stage spans nodes; then each group says its node (a group is always inside one).
    """
    if cut.tp == 1:
        return tuple(items)
    grouped: list[CardView | CardGap | TpGroup] = []
    group: list[CardView] = []

    def close() -> None:
        if group:
            first = group[0].index - group[0].index % cut.tp
            words = f"TP group: GPUs {first:,}–{first + cut.tp - 1:,}"
            grouped.append(
                TpGroup(words + (f", node {first // per_node:,}" if spans else ""), tuple(group), len(group))
            )
            group.clear()

    for item in items:
        if isinstance(item, CardView) and group and item.index // cut.tp != group[0].index // cut.tp:
            close()
        if isinstance(item, CardView):
            group.append(item)
        else:
            close()
            grouped.append(item)
    close()
    return tuple(grouped)


def cut_href(scenario: Scenario, link: Links) -> tuple[tuple[str, str], ...]:
    """Where ZeRO-3's largest layer is too big for a card: the same run with each layer cut across 2 cards more."""
    run = scenario.run
    if not scenario.report.layer_exceeds_card:
        return ()
    tp = run.cut.tp * 2
    if run.gpus_per_node % tp or run.gpus % (tp * run.cut.pp * run.cut.cp):
        return ()
    words = f"Cut each layer across {tp} cards: TP {tp} × ZeRO-3" + (
        f" on {run.cut.pp} stages" if run.cut.pp > 1 else ""
    )
    return ((link.setting("tp", str(tp)).at(Stage.ZERO3, None), words),)


def sampled_said(cut: Cut, gpus: int) -> str:
    """The note over a sampled cut grid: which cards of each stage it draws, as `cut_drawn` chose them.

    With tp a stage's first tensor-parallel group (and its last ZeRO member's where there is room); with tp = 1 a
    group is a card, and with expert parallelism a stage's first four cards and last four, which keep different
    experts. Every stage where they fit, else the first and the last.
    """
    drawn = cut_drawn(cut, gpus)
    stages = {rank(card, cut, gpus).stage for card in drawn}
    each = len(drawn) // len(stages)
    groups = each // min(cut.tp, each)
    per = " a stage" if cut.pp > 1 else ""
    if cut.tp > 1:
        unit = f"one whole tensor-parallel group{per}" if groups == 1 else f"{_count(groups)} whole tensor-parallel "
        unit += "" if groups == 1 else f"groups{per}, the first and the last"
    elif each <= 2:
        unit = f"one card{per}" if each == 1 else f"two cards{per}, the first and the last"
    else:
        half = each // 2
        unit = f"the first {_count(half)} cards{' of a stage' if per else ''} and the last {_count(each - half)}"
        if cut.ep > 1:
            unit += ", which keep different experts"
    which = f"of each of the {cut.pp} stages" if len(stages) == cut.pp else "of the first and last stages only"
    which = "" if cut.pp == 1 else f" ({which})"
    return f"With {gpus:,} cards the grid draws {unit}{which}; the gaps say which cards are left out."


def _count(n: int) -> str:
    """A small count in words, as the page's prose writes them."""
    return ("one", "two", "three", "four", "five", "six", "seven", "eight")[n - 1] if 1 <= n <= 8 else f"{n:,}"
