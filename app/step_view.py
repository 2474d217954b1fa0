"""The view of one phase of a training step: the panel, the drawing of what moves, and the cards."""

from __future__ import annotations

from fractions import Fraction

from app.domain.bands import BandSpec
from app.domain.communication import Collective
from app.domain.scenario import Scenario
from app.domain.stages import Stage
from app.domain.step import LAST_PHASE, LAYERS, Holding, InFlight, Phase, explanation, live_table, peak_so_far, step
from app.view_models import (
    BarView,
    CardView,
    CellView,
    ColumnView,
    Links,
    Segment,
    StepView,
    TransferView,
    legend,
)


def p_units(value: Fraction) -> str:
    """Traffic in units of P, without trailing zeros: '0.125P', '2P'."""
    return f"{float(value):.3f}".rstrip("0").rstrip(".") + "P"


CARD_X = tuple(6.25 + 12.5 * card for card in range(LAYERS))
"""Centres of the cards in the transfer drawing; boxes span y 10 to 18."""


def _arc(x1: float, x2: float, above: bool) -> str:
    y, bend = (10, 10 - min(9.0, abs(x2 - x1) / 6 + 3)) if above else (18, 18 + min(9.0, abs(x2 - x1) / 6 + 3))
    return f"M{x1:.2f},{y} Q{(x1 + x2) / 2:.2f},{bend:.2f} {x2:.2f},{y}"


def _transfer_view(transfer: InFlight) -> TransferView:
    if len(transfer.layers) == 1:
        owner = transfer.layers[0]
        others = [card for card in range(LAYERS) if card != owner]
        # One layer lives on one card: it sends to every card (all-gather, arcs above), or every
        # card sends its part to it (reduce-scatter, arcs below).
        if transfer.collective is Collective.ALL_GATHER:
            paths = tuple(_arc(CARD_X[owner], CARD_X[c], above=True) for c in others)
        else:
            paths = tuple(_arc(CARD_X[c], CARD_X[owner], above=False) for c in others)
        return TransferView(transfer.description, p_units(transfer.volume_p), paths, ring=False)
    # Every layer at once: the ring algorithm, each card passing slices to its neighbour, the last
    # one back to the first.
    steps = tuple(f"M{CARD_X[c] + 4:.2f},14 L{CARD_X[c + 1] - 4:.2f},14" for c in range(LAYERS - 1))
    back = f"M{CARD_X[-1]:.2f},18 C{CARD_X[-1]:.2f},27 {CARD_X[0]:.2f},27 {CARD_X[0]:.2f},18"
    return TransferView(transfer.description, p_units(transfer.volume_p), (*steps, back), ring=True)


def _step_label(phase: Phase, card: int, layer: int, spec: BandSpec) -> str:
    where = f"GPU {card}, layer {layer + 1}, {spec.label} ({spec.precision}, {spec.nbytes} B)"
    holding = phase.holding(card, layer, spec.band)
    if holding is Holding.GATHERED:
        return f"{where}: here for this phase only, gathered from GPU {layer}, then discarded."
    if holding is Holding.DASHED:
        return f"{where}: not here. GPU {layer} holds it on this layer's behalf."
    return f"{where}: held on this card."


def _step_cell(phase: Phase, card: int, layer: int, spec: BandSpec, first_band: bool) -> CellView:
    holding = phase.holding(card, layer, spec.band)
    return CellView(
        card=card,
        weight=layer,
        band=spec.band,
        state=holding.state,
        holder=layer,
        nbytes=spec.nbytes,
        label=_step_label(phase, card, layer, spec),
        focusable=card == 0 and layer == 0 and first_band,
        holding=holding,
        active=(layer, spec.band) in phase.active,
    )


def _step_cards(scenario: Scenario, phases: tuple[Phase, ...], phase: Phase) -> tuple[CardView, ...]:
    run, units, recipe = scenario.run, scenario.units, scenario.recipe
    live = live_table(phases, run.params, recipe)
    peaks = peak_so_far(live, phase.index)
    capacity = run.capacity
    scale = max([Fraction(capacity or 0), *(max(row) for row in live)])
    specs = legend(recipe)
    cards = []
    for card in range(LAYERS):
        now = live[phase.index][card]
        peak = peaks[card]
        columns = tuple(
            ColumnView(
                weight=layer,
                responsible=layer == card and bool(phase.stage.sharded),
                axis_label=str(layer + 1),
                cells=tuple(_step_cell(phase, card, layer, spec, spec is specs[0]) for spec in specs),
            )
            for layer in range(LAYERS)
        )
        held = sum(cell.nbytes for column in columns for cell in column.cells if cell.holding is not Holding.DASHED)
        now_width = float(now / scale * 100)
        segments = (
            Segment("live", 0.0, now_width, f"now {units.show(now)}"),
            Segment("peak", now_width, float((peak - now) / scale * 100), f"peak so far {units.show(peak)}"),
        )
        bar = BarView(
            segments=segments,
            capacity_x=float(Fraction(capacity) / scale * 100) if capacity else None,
            label=f"Live memory on GPU {card}: {units.show(now)} now, {units.show(peak)} at most so far",
            verdict="",
            fits=None,
        )
        cards.append(
            CardView(
                index=card,
                title=f"GPU {card}",
                columns=columns,
                held_bytes=held,
                full_bytes=LAYERS * recipe.total,
                bytes_per_weight=f"now {units.show(now)}",
                model_bytes=f"peak {units.show(peak)}",
                bar=bar,
            )
        )
    return tuple(cards)


def step_view(stage: Stage, scenario: Scenario, link: Links, index: int) -> tuple[StepView, tuple[CardView, ...]]:
    """One phase of the step: the panel, and the cards as they are at that moment."""
    phases = step(stage)
    phase = phases[index]
    hidden = (("stage", stage.value), *link.run)
    view = StepView(
        index=index,
        last=LAST_PHASE,
        title=phase.title,
        explanation=explanation(phase),
        transfers=tuple(_transfer_view(t) for t in phase.transfers),
        tally=p_units(phase.tally_p),
        total=p_units(phases[-1].tally_p),
        prev_href=link.at(stage, index - 1) if index > 0 else None,
        next_href=link.at(stage, index + 1) if index < LAST_PHASE else None,
        first_href=link.at(stage, 0),
        last_href=link.at(stage, LAST_PHASE),
        rest_href=link.at(stage, None),
        hidden=hidden,
        note=""
        if scenario.run.gpus == LAYERS
        else f"The step is drawn on {LAYERS} cards with {LAYERS} layers; the table below uses your "
        f"{scenario.run.gpus:,} GPUs.",
    )
    return view, _step_cards(scenario, phases, phase)
