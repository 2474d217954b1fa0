from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.recipes import Band
from app.domain.sharding import CellState, layout, owner, shown_indices
from app.domain.stages import Stage
from app.domain.state_bytes import bytes_per_weight


@pytest.mark.parametrize(
    ("stage", "solid"),
    [
        (Stage.DP, [64, 64, 64, 64]),
        (Stage.ZERO1, [64, 64, 8, 8]),
        (Stage.ZERO2, [64, 8, 8, 8]),
        (Stage.ZERO3, [8, 8, 8, 8]),
    ],
)
def test_solid_cells_per_band(stage: Stage, solid: list[int]) -> None:
    grid = layout(stage, 8)
    assert len(grid.cells) == 8 * 8 * 4
    assert [grid.solid_count(band) for band in Band] == solid


@pytest.mark.parametrize("stage", list(Stage))
def test_a_dashed_cell_names_the_card_that_holds_it(stage: Stage) -> None:
    grid = layout(stage, 8)
    held = {(c.card, c.weight, c.band) for c in grid.cells if c.state is CellState.SOLID}
    for cell in grid.cells:
        assert cell.holder == cell.weight
        if cell.state is CellState.DASHED:
            assert cell.band in stage.sharded
            assert cell.holder != cell.card
            assert (cell.holder, cell.weight, cell.band) in held


def test_zero1_card_three_holds_optimizer_state_only_for_weight_three() -> None:
    cells = layout(Stage.ZERO1, 8).card_cells(3)
    master = {c.weight: c.state for c in cells if c.band is Band.MASTER}
    assert master == {w: CellState.SOLID if w == 3 else CellState.DASHED for w in range(8)}
    assert all(c.state is CellState.SOLID for c in cells if c.band is Band.WEIGHTS)


@pytest.mark.parametrize(("stage", "held"), [(Stage.DP, 128), (Stage.ZERO1, 44), (Stage.ZERO2, 30), (Stage.ZERO3, 16)])
def test_card_totals(stage: Stage, held: int) -> None:
    grid = layout(stage, 8)
    assert {grid.held_bytes(card) for card in range(8)} == {held}
    assert grid.full_bytes == 128


@given(stage=st.sampled_from(Stage), gpus=st.integers(1, 16))
def test_the_grid_agrees_with_the_memory_figures(stage: Stage, gpus: int) -> None:
    grid = layout(stage, gpus)
    for card in range(gpus):
        assert grid.held_bytes(card) == bytes_per_weight(stage, gpus) * grid.weights


@pytest.mark.parametrize("gpus", [1, 2, 8, 16])
def test_up_to_sixteen_cards_every_card_and_weight_is_drawn(gpus: int) -> None:
    grid = layout(Stage.ZERO2, gpus)
    assert grid.shown == tuple(range(gpus))
    assert not grid.sampled
    assert len(grid.cells) == gpus * gpus * 4


def test_beyond_sixteen_cards_a_fixed_sample_is_drawn() -> None:
    assert shown_indices(17) == (0, 1, 2, 3, 13, 14, 15, 16)
    grid = layout(Stage.ZERO3, 4096)
    assert grid.sampled
    assert grid.shown == (0, 1, 2, 3, 4092, 4093, 4094, 4095)
    assert len(grid.cells) == 8 * 8 * 4
    # Every drawn card still shows the weight it is responsible for, solid.
    for card in grid.shown:
        own = [c for c in grid.card_cells(card) if c.weight == card]
        assert {c.state for c in own} == {CellState.SOLID}


def test_owner_wraps_around() -> None:
    assert [owner(w, 4) for w in range(6)] == [0, 1, 2, 3, 0, 1]


def test_a_card_not_drawn_holds_nothing_drawn() -> None:
    # 1,024 cards: the grid draws cards 0-3 and 1,020-1,023; card 500 has no cell, and no bytes, in it.
    grid = layout(Stage.ZERO3, 1024)
    assert (grid.stage, grid.card_cells(500), grid.held_bytes(500)) == (Stage.ZERO3, (), Fraction(0))


@pytest.mark.parametrize("gpus", [0, -1])
def test_a_layout_has_a_card(gpus: int) -> None:
    with pytest.raises(ValueError, match=r"^gpus must be at least 1$"):
        layout(Stage.DP, gpus)
