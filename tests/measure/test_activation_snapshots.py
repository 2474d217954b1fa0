"""Two small blocks' saved tensors against activations.py's formula: every term and every difference, by hand.

The blocks: s = 32, b = 2, h = 64, a = 4, v = 320, in bf16, so sb = 64 and sbh = 4,096. GPT: f = 4h = 256,
kv = h; Llama: f = 176, 2 KV heads, so kv = 32.
"""

from __future__ import annotations

import copy
import json

import pytest

from app.domain.activations import Recompute
from app.measure import SNAPSHOT
from app.measure.activation_snapshots import compare_activations, compare_table
from app.measure.snapshots import SnapshotError, comparison, parse

DATA = json.loads(SNAPSHOT.read_text())
SNAP = parse(DATA).activations
TABLES = {(t.block, t.part, t.recompute): t for t in compare_activations(SNAP).tables}
SB, SBH = 64, 4096

# (block, part, recompute): the formula's bytes, and what the measurement adds, each named.
EXPECTED = [
    # 34sbh + 5as²b = 139,264 + 5 × 8,192; LayerNorm's bf16 mean and 1/σ: 2 norms × 2 × 2sb.
    (("gpt", "block", Recompute.NONE), 34 * SBH + 5 * 4 * 32 * 32 * 2, {"LayerNorm's mean": 256,
     "LayerNorm's reciprocal standard deviation": 256}),
    (("gpt", "block", Recompute.SELECTIVE), 34 * SBH, {"LayerNorm's mean": 256,
     "LayerNorm's reciprocal standard deviation": 256}),
    (("gpt", "block", Recompute.FULL), 2 * SBH, {}),
    # sbh + 2sbh + 2sbh + 4sbv; the ids (tokens 8sb, positions 8s), one LayerNorm, the loss's targets and count.
    (("gpt", "output layer", Recompute.NONE), 5 * SBH + 4 * SB * 320, {
        "token embedding's indices": 512, "position embedding's indices": 256, "LayerNorm's mean": 128,
        "LayerNorm's reciprocal standard deviation": 128, "loss's targets": 512, "loss's total weight": 4}),
    # 12sbh + 4sb·kv + 8sbf + 4asb = 49,152 + 8,192 + 90,112 + 1,024; two fp32 1/RMS (4sb each), rotary's tables.
    (("llama", "block", Recompute.NONE), 148_480, {"RMSNorm's reciprocal RMS": 512, "rotary's cos": 1024,
     "rotary's sin": 1024}),
    # Selective recomputes the attention kernel, log-sum-exp and all: 148,480 - 4asb (1,024).
    (("llama", "block", Recompute.SELECTIVE), 147_456, {
     "RMSNorm's reciprocal RMS": 512, "rotary's cos": 1024, "rotary's sin": 1024}),
    (("llama", "block", Recompute.FULL), 2 * SBH, {}),
    (("llama", "output layer", Recompute.NONE), 4 * SBH + 4 * SB * 320, {"token embedding's indices": 512,
     "RMSNorm's reciprocal RMS": 256, "loss's targets": 512, "loss's total weight": 4}),
]  # fmt: skip


@pytest.mark.parametrize(("key", "formula", "named"), EXPECTED, ids=[" ".join(map(str, e[0])) for e in EXPECTED])
def test_each_table_is_the_formula_plus_the_named_differences_exactly(
    key: tuple[str, str, Recompute], formula: int, named: dict[str, int]
) -> None:
    table = TABLES[key]
    assert table.formula_bytes == formula
    assert {row.name: row.difference for row in table.rows if row.difference} == named
    # No tolerance: each difference is the size its reason names, and nothing is left over.
    assert all(row.named == row.difference for row in table.rows)
    assert all(row.reason for row in table.rows if row.difference)
    assert table.measured_bytes == formula + sum(named.values())
    assert table.unexplained == 0


def test_there_are_eight_tables_and_every_formula_term_was_measured_by_its_own_tensors() -> None:
    assert len(TABLES) == 8
    for table in TABLES.values():
        for row in table.rows:
            if row.formula_bytes and row.name != "softmax's log-sum-exp":
                assert row.tensors >= 1, (table.block, table.recompute, row.name)


def test_k_and_v_are_two_tensors_of_kv_width_under_grouped_query_attention() -> None:
    row = next(r for r in TABLES[("llama", "block", Recompute.NONE)].rows if r.name == "K and V")
    assert (row.formula, row.formula_bytes, row.measured_bytes, row.tensors) == ("4sb·kv", 4 * SB * 32, 8192, 2)
    saved = [t for t in SNAP.block("llama").choice(Recompute.NONE).tensors if t.name == "K and V"]
    assert [t.shape for t in saved] == [(2, 2, 32, 16)] * 2


def test_the_flash_kernel_keeps_a_log_sum_exp_and_the_attention_output_is_the_projections_input() -> None:
    kept = {t.name: t for t in SNAP.block("llama").choice(Recompute.NONE).tensors}
    lse = kept["softmax's log-sum-exp"]
    assert (lse.dtype, lse.shape, lse.bytes) == ("float32", (2, 4, 32), 4 * 4 * SB)
    # One storage, kept by both the attention's backward (as its output) and the output projection's.
    assert "ScaledDotProductFlashAttentionForCpuBackward0.output" in kept["output projection's input"].saved_by
    assert "softmax's output" not in kept


def test_dropout_masks_are_one_byte_and_parameters_are_named_apart() -> None:
    recorded = SNAP.block("gpt").choice(Recompute.NONE)
    masks = [t for t in recorded.tensors if "mask" in t.name]
    assert {t.dtype for t in masks} == {"bool"}
    assert sum(t.bytes for t in masks) == 4 * 32 * 32 * 2 + 2 * SBH
    assert {t.name for t in recorded.excluded} >= {"q.weight", "norm1.bias", "down.weight"}
    assert "up.weight" in TABLES[("gpt", "block", Recompute.NONE)].excluded


def test_checkpointing_notes_the_generator_state_it_keeps_beside_the_saved_tensors() -> None:
    assert SNAP.checkpoint_rng_state_bytes == 5056
    assert "5,056 B" in TABLES[("gpt", "block", Recompute.FULL)].note
    assert TABLES[("gpt", "block", Recompute.NONE)].note == ""


def test_torchs_cpu_kernels_keep_more_and_say_what() -> None:
    notes = {k.block: k for k in compare_activations(SNAP).kernels}
    # F.dropout on the CPU: bf16 noise, 2 B an element, for the three 1-byte masks: as²b + 2 × sbh more.
    assert notes["gpt"].difference == 8192 + 2 * SBH
    # rms_norm on the CPU: each of 2 norms keeps 4sbh + 4sbh in fp32 for a 2sbh input: 2 × 6sbh more.
    assert notes["llama"].difference == 2 * 6 * SBH
    assert "1-byte bool mask" in notes["gpt"].text
    assert "composite of fp32 operations" in notes["llama"].text


def test_the_comparison_carries_the_activations() -> None:
    assert comparison(parse(DATA)).activations == compare_activations(SNAP)


def test_an_unnamed_tensor_is_refused_and_an_unknown_one_is_unexplained() -> None:
    broken = copy.deepcopy(DATA)
    broken["activations"]["blocks"][0]["choices"]["none"]["tensors"][0]["name"] = None
    with pytest.raises(SnapshotError):
        parse(broken)
    odd = copy.deepcopy(DATA)
    odd["activations"]["blocks"][0]["choices"]["none"]["tensors"][0]["name"] = "something else"
    snap = parse(odd).activations
    block = snap.block("gpt")
    table = compare_table(snap, block, block.choice(Recompute.NONE), Recompute.NONE)
    # The attention norm's input missing (−2sbh), and a tensor under a name no reason covers (+2sbh).
    assert table.unexplained == 2 * 2 * SBH
