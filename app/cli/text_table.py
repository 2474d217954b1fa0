"""The comparison table as plain text, for `zero-bands table` in a terminal."""

from __future__ import annotations

from app.domain.scenario import Scenario
from app.domain.units import gpus_label
from app.web.table_view import TableRow, boundary, table_rows


def _cells(row: TableRow, with_capacity: bool, across: bool) -> list[str]:
    cells = [row.title, row.bytes_per_weight, row.per_gpu, row.peak, f"{row.communication} = {row.communication_bytes}"]
    if across:
        cells += [row.by_link, row.time]
    if with_capacity:
        cells += ["yes" if row.fits else "no", row.headroom or "", row.max_model or ""]
    return cells


def render_table(scenario: Scenario) -> str:
    """Every stage of a run, one aligned row each, with a line on ZeRO-3's limit."""
    run, units = scenario.run, scenario.units
    with_capacity = run.capacity is not None
    header = ["stage", "bytes/weight", "per GPU", "peak per GPU", "communication"]
    across = run.nodes > 1  # the links differ: each card's bytes inside its node and between, and their time
    if across:
        header += ["sent a card, by link", "time a step (estimate)"]
    if with_capacity:
        header += ["fits", "headroom", "largest model that fits"]
    rows = [
        _cells(row, with_capacity, across)
        for row in table_rows(None, lambda stage: "", scenario.report.stages, scenario)
    ]
    widths = [max(len(line[i]) for line in [header, *rows]) for i in range(len(header))]
    # Names left, figures right: how people read a table of numbers.
    lines = [
        "  ".join(
            cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths, strict=True))
        )
        for line in [header, *rows]
    ]
    rule = "-" * len(lines[0])
    capacity = f", card {units.show(run.capacity)}" if run.capacity is not None else ""
    title = f"{scenario.model_title}: {run.params:,} weights on {gpus_label(run.gpus)}, {run.recipe.title}{capacity}"
    limit = boundary(scenario)
    layer = f"Largest layer {limit.largest_layer}, {limit.assembled} assembled. " if limit.largest_layer else ""
    return "\n".join(
        [title, rule, lines[0], rule, *lines[1:], rule, f"ZeRO-3: {layer}{limit.verdict}", *scenario.notes]
    )
