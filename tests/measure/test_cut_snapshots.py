"""The model cut across 8 ranks, measured, against the model: every figure worked by hand.

FSDP2 + TP: 2 blocks of q, k, v, o (64 × 64) and up, down (256 × 64): 12 × 64² = 49,152 weights a block,
98,304 in all, in fp32 with Adam (4 + 4 + 8 = 16 B a weight). On the 2 × 4 (dp, tp) mesh each rank keeps
the states ÷ tp = 4, sharded by ZeRO-3 over dp = 2: 98,304 × 16 / 8 = 196,608 B, and 12 step counters.

The pipeline: 8 Linear layers of 64 × 64, 4 a stage, data parallelism over 4 ranks without ZeRO: each rank
keeps its stage's 4 × 4,096 weights whole, 16 B each: 262,144 B, and 4 step counters. Each Linear keeps
its input for the backward: a micro-batch of 4 rows × 64 × 4 B = 1,024 B a layer, 4,096 B a stage.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from app.domain.parallel import Cut
from app.domain.recipes import RECIPES, Band, RecipeName
from app.domain.stages import Stage
from app.measure import SNAPSHOT
from app.measure.cut_snapshots import (
    CutReason,
    compare_cut,
    cut_band_bytes,
    cut_card_bytes,
    cut_run,
    in_flight,
    parse_cut,
)
from app.measure.snapshots import SnapshotError, comparison, parse

DATA = json.loads(SNAPSHOT.read_text())
SNAP = parse(DATA)
CUT = compare_cut(SNAP.cut, SNAP.recipe)
FP32_ADAM = RECIPES[RecipeName("fp32-adam")]
BLOCK = 12 * 64 * 64
BYTES_A_WEIGHT = 4 + 4 + 8


def _arrangement(key: str) -> Any:
    (found,) = (a for a in CUT.arrangements if a.key == key)
    return found


# (stage, the cut, dp, the pipeline stage): its card's bytes by hand. The toy of the pipeline: 8 layers of
# 4,096 weights; FSDP2 + TP's: 2 blocks of 12 × 64² weights, the largest layer 4 × 64².
PIPE, TOY = 8 * 4096, 2 * BLOCK
CARDS = [
    (Stage.ZERO3, TOY, 4 * 4096, Cut(tp=4), 2, 0, TOY * BYTES_A_WEIGHT // 8),  # ÷ tp, then ÷ dp
    (Stage.DP, PIPE, 4096, Cut(pp=2, microbatches=4), 4, 0, 4 * 4096 * BYTES_A_WEIGHT),  # a stage, replicated
    (Stage.DP, PIPE, 4096, Cut(pp=2, microbatches=4), 4, 1, 4 * 4096 * BYTES_A_WEIGHT),
    (Stage.ZERO1, PIPE, 4096, Cut(tp=2, pp=2), 2, 1, 4 * 4096 // 2 * (4 + 4) + 4 * 4096 // 2 * 8 // 2),
    (Stage.ZERO2, PIPE, 4096, Cut(pp=2), 4, 0, 4 * 4096 * 4 + 4 * 4096 * (4 + 8) // 4),
]


@pytest.mark.parametrize(("stage", "params", "largest", "cut", "dp", "index", "expected"), CARDS)
def test_the_models_card_is_its_stages_states_over_tp_sharded_over_dp(
    stage: Stage, params: int, largest: int, cut: Cut, dp: int, index: int, expected: int
) -> None:
    run = cut_run(params, largest, cut, dp, FP32_ADAM)
    assert cut_card_bytes(stage, run, index) == expected


def test_the_band_by_band_figure_sums_to_the_cards() -> None:
    run = cut_run(TOY, 4 * 4096, Cut(tp=4), 2, FP32_ADAM)
    assert [cut_band_bytes(b, Stage.ZERO3, run) for b in Band] == [49_152, 49_152, 0, 98_304]


@pytest.mark.parametrize(
    ("schedule", "cut", "index", "held"),
    [
        ("1F1B", Cut(pp=2, microbatches=4), 0, 2),
        ("1F1B", Cut(pp=2, microbatches=4), 1, 1),
        ("1F1B", Cut(pp=4, microbatches=2), 0, 2),
        ("GPipe", Cut(pp=2, microbatches=4), 0, 4),
        ("GPipe", Cut(pp=2, microbatches=4), 1, 4),
    ],
)
def test_in_flight_microbatches(schedule: str, cut: Cut, index: int, held: int) -> None:
    assert in_flight(schedule, cut, index) == held


def test_the_snapshot_records_the_two_layouts_on_8_ranks() -> None:
    assert [a.key for a in CUT.arrangements] == ["tp", "pp-1F1B", "pp-GPipe"]
    assert [(a.stage, a.tp, a.pp, a.dp, a.params) for a in CUT.arrangements] == [
        (Stage.ZERO3, 4, 1, 2, 2 * BLOCK),
        (Stage.DP, 1, 2, 4, 8 * 4096),
        (Stage.DP, 1, 2, 4, 8 * 4096),
    ]
    assert all(len(a.ranks) == 8 for a in CUT.arrangements)


def test_fsdp2_with_tp_holds_the_models_bytes_on_every_rank_plus_the_counters() -> None:
    tp = _arrangement("tp")
    assert [r.place for r in tp.ranks[:5]] == ["dp 0, tp 0", "dp 0, tp 1", "dp 0, tp 2", "dp 0, tp 3", "dp 1, tp 0"]
    for rank in tp.ranks:
        assert (rank.model_bytes, rank.measured_bytes) == (196_608, 196_608 + 12 * 4)
        assert [(b.model_bytes, b.measured_bytes) for b in rank.bands] == [(49_152,) * 2, (49_152,) * 2, (98_304,) * 2]
        assert {d.reason: d.bytes for d in rank.differences} == {CutReason.STEP_COUNTERS: 48}
        assert rank.unexplained_bytes == 0
        assert rank.activations is None
    # Column-parallel q: 64 rows ÷ 4 (tp) ÷ 2 (dp) = 8; row-parallel o: 64 columns ÷ 4, 64 rows ÷ 2.
    shapes = {name: (placements, local) for name, placements, _, local in tp.placements}
    assert shapes["0.q.weight"] == ("(_StridedShard(dim=0, sf=4), Shard(dim=0))", (8, 64))
    assert shapes["0.o.weight"] == ("(Shard(dim=0), Shard(dim=1))", (32, 16))
    assert shapes["1.up.weight"][1] == (32, 64)
    assert shapes["1.down.weight"] == ("(Shard(dim=0), Shard(dim=1))", (32, 64))


# The pipeline's activations at their peak per stage, by hand: (micro-batches, bytes).
PEAKS = {"1F1B": {0: (2, 2 * 4096), 1: (1, 4096)}, "GPipe": {0: (4, 4 * 4096), 1: (4, 4 * 4096)}}


@pytest.mark.parametrize("schedule", ["1F1B", "GPipe"])
def test_each_pipeline_rank_holds_its_stages_layers_and_the_microbatches_in_flight(schedule: str) -> None:
    pipeline = _arrangement(f"pp-{schedule}")
    for rank in pipeline.ranks:
        assert rank.stage_index == rank.rank // 4  # ranks 0-3 stage 0, 4-7 stage 1
        assert (rank.model_bytes, rank.measured_bytes) == (262_144, 262_144 + 4 * 4)
        assert rank.unexplained_bytes == 0
        a = rank.activations
        assert a is not None
        expected = PEAKS[schedule][rank.stage_index]
        assert (a.model_microbatches, a.model_bytes) == expected
        assert (a.measured_microbatches, a.measured_bytes) == expected
    assert pipeline.activations_agree
    assert CUT.unexplained == 0


def test_the_stages_hold_their_own_layers() -> None:
    rows = DATA["cut"]["pp"]["schedules"][0]["ranks"]
    assert [r["layers"] for r in (rows[0], rows[4])] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_the_comparison_serves_the_cut() -> None:
    assert comparison(SNAP).cut == CUT


def _broken(change: str) -> dict[str, Any]:
    data: dict[str, Any] = copy.deepcopy(DATA)
    if change == "missing":
        del data["cut"]
    elif change == "tp":
        del data["cut"]["tp"]["ranks"][0]["params"][0]["weights"]
    elif change == "mesh":
        data["cut"]["pp"]["mesh"]["names"] = ["pp"]
    return data


@pytest.mark.parametrize("change", ["missing", "tp", "mesh"])
def test_a_malformed_cut_is_a_snapshot_error(change: str) -> None:
    with pytest.raises(SnapshotError, match="not a measurement snapshot"):
        parse(_broken(change))


def test_the_parser_reads_the_local_shards() -> None:
    cut = parse_cut(DATA["cut"])
    first = cut.arrangements[0].ranks[0].params[0]
    assert (first.name, first.shape, first.local_shape, first.weights, first.counters) == (
        "0.q.weight",
        (64, 64),
        (8, 64),
        8 * 64 * 4,
        4,
    )
