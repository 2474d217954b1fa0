"""The real measurement of the two blocks: run in torch, it gives the shipped snapshot's activations exactly."""

from __future__ import annotations

import json
from importlib.util import find_spec

import pytest

from app.measure import SNAPSHOT
from app.measure.activation_snapshots import compare_activations, parse_activations
from app.measure.snapshots import parse


@pytest.mark.slow  # real PyTorch: a few seconds
def test_the_blocks_measured_now_are_the_shipped_snapshots() -> None:
    assert find_spec("torch") is not None, "torch is not installed: pip install -e '.[test,measure]'"
    from app.measure.activations import measure_activations

    fresh = measure_activations()
    shipped = parse(json.loads(SNAPSHOT.read_text())).activations
    assert parse_activations(fresh) == shipped
    assert all(table.unexplained == 0 for table in compare_activations(shipped).tables)
