"""The experts' columns on a card of a mixture-of-experts model: at rest, in the step, and their words.

The geometry is `app.domain.expert_grid`'s; this module words it. After a card's eight dense columns (the model's
eighths, drawn as `cut_view` draws them), the experts' columns "E0" to "E7": solid where the card keeps those
experts, hatched the other way round where another expert-parallel rank keeps them (not here, nothing held on
this card's behalf), dashed where ZeRO keeps this card's share on another card of its expert-data-parallel group.
"""

from __future__ import annotations

from dataclasses import replace

from app.domain.architecture import Architecture
from app.domain.cut_grid import CutCell
from app.domain.eighths import COLUMNS
from app.domain.expert_grid import (
    card_experts,
    column_blocks,
    column_experts,
    expert_cell,
    expert_columns,
    expert_counts,
    expert_rank,
)
from app.domain.recipes import Band, BandSpec
from app.domain.report import Beat, Holding, Part, Phase
from app.domain.scenario import Scenario
from app.domain.sharding import CellState
from app.domain.stages import OPTIMIZER_STATE, Stage
from app.domain.units import count_label
from app.web.grid_view import CellView, ColumnView, band_height

SHARE_STEPS = 48
"""A part filled cell's strip, in 48ths of the column (as `cut_view`'s)."""

EXPERT_WORDS = (
    "A mixture of experts: after the rule, the routed experts' columns (E0 to E7), apart from the dense weights; "
    "hatched the other way round, another expert-parallel rank's experts, not here."
)
"""The compare page's words for the experts' columns (the main page says more, with the model's figures)."""

REST_HOLDING = {CellState.SOLID: Holding.HELD, CellState.PARTIAL: Holding.PARTIAL, CellState.DASHED: Holding.DASHED}


def moe_of(scenario: Scenario) -> Architecture | None:
    """The run's architecture where it has a mixture of experts (the grid then draws their columns); else None."""
    architecture = scenario.architecture
    return architecture if architecture is not None and architecture.moe is not None else None


def _span(found: range) -> str:
    """Experts in words: "expert 3", "experts 0–31"."""
    return f"expert {found[0]}" if len(found) == 1 else f"experts {found[0]}–{found[-1]}"


def _strip(start: float, end: float) -> tuple[int, int]:
    first = int(start * SHARE_STEPS)
    return first, max(first + 1, round(end * SHARE_STEPS))


def _expert_cell(scenario: Scenario, card: int, column: int, spec: BandSpec, sharded: bool) -> CellView:
    """One band of one experts' column on one card, at rest, with its words."""
    architecture = moe_of(scenario)
    # Only an MoE run draws experts' columns.
    assert architecture is not None
    assert architecture.moe is not None
    run = scenario.run
    cut, gpus, experts = run.cut, run.gpus, architecture.moe.experts
    cell = expert_cell(card, column, sharded, cut, gpus, experts)
    where = (
        f"Column E{column}, {_span(column_experts(column, experts))} of {experts} in each mixture-of-experts block "
        f"of this card's stage, {spec.label} ({spec.precision}, {spec.shown} B)"
    )
    stage = expert_rank(card, cut, gpus).stage
    if stage in run.dense_stages:  # its blocks all have a dense MLP: no experts anywhere on its cards
        cell = CutCell(CellState.ABSENT, None, card)
        said = (
            f"Column E{column}, {spec.label}: not on this card. Its pipeline stage, {stage + 1} of {cut.pp}, keeps "
            "only blocks with a dense MLP, so none of the experts."
        )
    elif cell.state is CellState.ABSENT:
        other = card_experts(cell.holder, cut, gpus, experts)
        said = (
            f"{where}: not on this card. Expert parallelism: GPU {cell.holder:,} (expert-parallel rank "
            f"{expert_rank(cell.holder, cut, gpus).ep + 1} of {cut.ep}) keeps {_span(other)}, and the tokens "
            "routed to them are sent there (all-to-all)."
        )
    elif cell.state is CellState.DASHED:
        said = (
            f"{where}: not stored here. GPU {cell.holder:,}, in this card's expert-data-parallel group of "
            f"{cut.edp(gpus):,} cards, holds it on its behalf (ZeRO shards the experts over that group)."
        )
    elif cell.part is not None:
        mine = card_experts(card, cut, gpus, experts)
        said = (
            f"{where}: this card stores {cell.part.text} of the column (its {_span(mine)}"
            + (f", expert tensor slice 1/{cut.expert_tp}" if cut.expert_tp > 1 else "")
            + (f", ZeRO's share of them over {cut.edp(gpus):,} cards" if sharded and cut.edp(gpus) > 1 else "")
            + "); other cards the rest."
        )
    else:
        said = f"{where}: stored on this card."
    return CellView(
        card=card,
        weight=column,
        band=spec.band,
        state=cell.state,
        holder=cell.holder,
        nbytes=band_height(spec.nbytes),
        label=said,
        strip=None if cell.part is None else _strip(float(cell.part.start), float(cell.part.end)),
        share=cell.part.text if cell.part is not None else "",
        expert=True,
    )


def _column(index: int, cells: tuple[CellView, ...]) -> ColumnView:
    """An experts' column: a rule before the first; its axis numbers it, in the experts' colour (E0 is "0")."""
    group = "expert first" if index == 0 else "expert"
    return ColumnView(COLUMNS + index, False, cells, axis_label=str(index), group=group)


def expert_rest_columns(scenario: Scenario, stage: Stage, card: int) -> tuple[ColumnView, ...]:
    """A card's experts' columns at rest; none for a dense model."""
    architecture = moe_of(scenario)
    if architecture is None or architecture.moe is None:
        return ()
    specs = [spec for spec in scenario.recipe.specs if spec.nbytes > 0]
    return tuple(
        _column(c, tuple(_expert_cell(scenario, card, c, spec, spec.band in stage.sharded) for spec in specs))
        for c in range(expert_columns(architecture.moe.experts))
    )


def _gathered(phase: Phase, band: Band) -> Holding | None:
    """What the phase in hand does to a band of a card's experts, sharded by ZeRO (as `cut_view._in_hand`)."""
    if band is Band.WEIGHTS and phase.part in (Part.FORWARD, Part.BACKWARD) and phase.beat is not Beat.DISCARD:
        return Holding.GATHERED
    if band is Band.GRADIENTS and phase.part is Part.BACKWARD and phase.beat is not Beat.GATHER:
        return Holding.SENT
    return None


def expert_step_columns(phase: Phase, scenario: Scenario, card: int) -> tuple[ColumnView, ...]:
    """A card's experts' columns during a phase of the step.

    While the forward or backward pass is on a column of blocks with experts, the card's experts are in use: only
    the tokens its router sends them (top_k of the experts a token) are computed, but any expert may be chosen,
    so under ZeRO-3 the card gathers all its experts' weights from its expert-data-parallel group, uses them and
    discards them, as the dense columns' layers. Another rank's experts stay not here.
    """
    architecture = moe_of(scenario)
    if architecture is None or architecture.moe is None:
        return ()
    moe, run = architecture.moe, scenario.run
    blocks = column_blocks(architecture, run.params - scenario.adapters)
    in_hand = (
        phase.column is not None
        and phase.reached
        and phase.part in (Part.FORWARD, Part.BACKWARD)
        and bool(blocks[phase.column])
    )
    mine = _span(card_experts(card, run.cut, run.gpus, moe.experts))
    columns = []
    for c in range(expert_columns(moe.experts)):
        cells = []
        for spec in scenario.recipe.specs:
            if spec.nbytes == 0:
                continue
            sharded = spec.band in phase.sharded
            rest = _expert_cell(scenario, card, c, spec, sharded)
            if rest.state is CellState.ABSENT:
                cells.append(rest)
                continue
            whole = not sharded or run.cut.edp(run.gpus) == 1
            whole = whole or spec.band in phase.on_host
            if phase.part is Part.UPDATE:
                # As `Phase.active`: the card updates its share; with the optimizer on the host, not its weights.
                updated = OPTIMIZER_STATE if Band.MASTER in phase.on_host else (Band.WEIGHTS, *OPTIMIZER_STATE)
                active = rest.state is not CellState.DASHED and spec.band in updated
            elif in_hand and phase.column is not None:
                # The bands the dense column in hand's phase works on, where something happens to the experts':
                # their compute; a gather or discard only of a sharded band, a reduction only over a group.
                moves = run.cut.edp(run.gpus) > 1 and (not whole or spec.band is Band.GRADIENTS)
                active = phase.active(card, phase.column, spec.band) and (phase.beat is Beat.COMPUTE or moves)
            else:
                active = False
            holding = _gathered(phase, spec.band) if in_hand and not whole else None
            used = (
                f" In use: {moe.top_k} of the {moe.experts} experts compute each token, so only the tokens routed to "
                f"this card's {mine} are computed here."
                if in_hand and spec.band is Band.WEIGHTS
                else ""
            )
            if holding is Holding.GATHERED:
                label = (
                    f"{rest.label.split(':')[0]}: this card's experts assembled here from its expert-data-parallel "
                    f"group, for this phase only, then discarded.{used}"
                )
                cells.append(
                    replace(rest, state=holding.state, holding=holding, active=active, label=label, strip=None)
                )
            elif holding is Holding.SENT:
                label = (
                    f"{rest.label.split(':')[0]}: its experts' gradients computed here, then reduce-scattered over "
                    "its expert-data-parallel group and dropped."
                )
                cells.append(
                    replace(rest, state=holding.state, holding=holding, active=active, label=label, strip=None)
                )
            else:
                kept = replace(rest, holding=REST_HOLDING[rest.state], label=rest.label + used)
                cells.append(replace(kept, active=active and rest.state is not CellState.DASHED))
        columns.append(_column(c, tuple(cells)))
    return tuple(columns)


def experts_said(scenario: Scenario, stepping: bool = False) -> str:
    """What the experts' columns are, with the model's active and total weights; blank for a dense model.

    `stepping`: in the step, which also says how the experts are used and gathered.
    """
    architecture = moe_of(scenario)
    counts = None if architecture is None else expert_counts(architecture)
    if counts is None:
        return ""
    run = scenario.run
    cut, gpus = run.cut, run.gpus
    n = expert_columns(counts.experts)
    columns = f"{_per_column(counts.experts)} a column"
    said = (
        f"{count_label(counts.active)} active of {count_label(counts.params)} weights: a token uses "
        f"{counts.top_k} of {counts.experts} experts in each of its {counts.blocks} mixture-of-experts blocks, so "
        f"compute uses the {count_label(counts.active)} and memory keeps all {count_label(counts.params)}. "
        f"On each card, columns 0 to 7 are the dense weights ({count_label(counts.dense)}: attention, routers, "
        f"norms, embeddings), then after the rule E0 to E{n - 1}, numbered 0 to {n - 1}, the routed experts "
        f"({count_label(counts.routed)}), {columns}: equal widths, not to scale."
    )
    if cut.ep > 1:
        said += (
            f" With ep={cut.ep:,} each card keeps {counts.experts // cut.ep:,} of the {counts.experts} experts "
            f"(GPU 0: {_span(card_experts(0, cut, gpus, counts.experts))}); another rank's experts are hatched, not "
            "here. "
            + (
                f"ZeRO shards the experts over the expert-data-parallel group of {cut.edp(gpus):,} cards."
                if cut.edp(gpus) > 1
                else "The expert-data-parallel group is one card (ep × etp fills a stage): ZeRO has none of the "
                "experts to shard, and each card keeps its own whole."
            )
        )
    else:
        said += " With ep=1 every card keeps all the experts."
    if stepping:
        gathered = (
            f"under ZeRO-3 it gathers its experts from its expert-data-parallel group of {cut.edp(gpus):,} cards, "
            "uses them and discards them, as the dense layers"
            if cut.edp(gpus) > 1
            else "its expert-data-parallel group is itself alone, so ZeRO-3 has nothing of its experts to gather"
        )
        said += (
            f" In the step, while a column's blocks are in hand each card uses its experts: only the tokens the "
            f"router sends them ({counts.top_k} of {counts.experts} experts a token) are computed on them; {gathered}."
        )
    return said


def _per_column(experts: int) -> str:
    """How many experts an experts' column stands for: "one expert", "32 experts", "about 7.5 experts"."""
    n = expert_columns(experts)
    if experts % n:
        return f"about {experts / n:.1f} experts"
    return "one expert" if experts == n else f"{experts // n} experts"


def experts_key(scenario: Scenario, stepping: bool = False) -> str:
    """The key's words for a card's columns where the model has experts: the dense eighths, then the experts'.

    Blank for a dense model, whose key says "an eighth of the model". `stepping`: in the step, where the experts'
    columns are used only by the tokens routed to them while their column's blocks are in hand.
    """
    architecture = moe_of(scenario)
    if architecture is None or architecture.moe is None:
        return ""
    experts = architecture.moe.experts
    used = ", computing only the tokens routed there" if stepping else ""
    return (
        f"Columns 0–7: an eighth of the dense weights; E0–E{expert_columns(experts) - 1}: {_per_column(experts)} "
        f"each, in all the stage's expert blocks{used}"
    )


def experts_column_key(scenario: Scenario) -> tuple[str, ...]:
    """The step's column key for the experts' columns, after the dense ones': each one's experts and their ranks.

    "E3: expert 3 of 8, in every expert block of a card's stage; expert-parallel rank 4 of 8 keeps it"; blank for
    a dense model. Expert-parallel rank r keeps experts r·E/ep to (r+1)·E/ep − 1 (`card_experts`).
    """
    architecture = moe_of(scenario)
    if architecture is None or architecture.moe is None:
        return ()
    experts, ep = architecture.moe.experts, scenario.run.cut.ep
    said = []
    for column in range(expert_columns(experts)):
        found = column_experts(column, experts)
        first, last = found[0] * ep // experts, found[-1] * ep // experts
        them = "it" if len(found) == 1 else "them"
        keep = (
            f"every card keeps {them}"
            if ep == 1
            else f"expert-parallel rank {first + 1} of {ep} keeps {them}"
            if first == last
            else f"expert-parallel ranks {first + 1}–{last + 1} of {ep} keep {them}"
        )
        said.append(f"E{column}: {_span(found)} of {experts}, in every expert block of a card's stage; {keep}")
    return tuple(said)


def experts_held(scenario: Scenario, card: int) -> str:
    """A card's experts in a sentence, after what it keeps of the dense columns; blank for a dense model."""
    architecture = moe_of(scenario)
    if architecture is None or architecture.moe is None:
        return ""
    run = scenario.run
    experts = architecture.moe.experts
    stage = expert_rank(card, run.cut, run.gpus).stage
    if stage in run.dense_stages:
        return f" No experts: its pipeline stage, {stage + 1} of {run.cut.pp}, keeps only blocks with a dense MLP."
    if run.cut.ep == 1:
        return f" Its experts' columns, E0 to E{expert_columns(experts) - 1}: all {experts} experts of each block."
    mine = card_experts(card, run.cut, run.gpus, experts)
    n = expert_columns(experts)
    first, last = mine[0] * n // experts, mine[-1] * n // experts
    where = f"column E{first}" if first == last else f"columns E{first} to E{last}"
    rank = expert_rank(card, run.cut, run.gpus)
    return (
        f" Its experts: {_span(mine)} of {experts} (expert-parallel rank {rank.ep + 1} of {run.cut.ep}), in "
        f"{where}; the other experts are on other cards."
    )


def draws_cut(scenario: Scenario) -> bool:
    """Whether the cards draw the model's columns (`cut_view`): with the model cut, or with experts to draw apart."""
    return scenario.run.cut.cuts or moe_of(scenario) is not None
