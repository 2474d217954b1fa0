"""Frozen weights and LoRA, against peft's own printouts and sums worked by hand."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.architecture import GPT_3_175B, LLAMA_3_8B, ModelName
from app.domain.communication import Whose
from app.domain.presets import PRESETS
from app.domain.recipes import Band
from app.domain.scenario import Inputs, resolve
from app.domain.sizing import report
from app.domain.stages import Stage
from app.domain.state_bytes import band_bytes
from app.domain.step import Beat, step
from app.domain.trainable import LoraTargets, adapter_params, parse_trainable
from tests.conftest import examples

# peft's print_trainable_parameters() for Llama 3 8B with r = 16: "trainable params: 13,631,488" for
# q, k, v and o, and "trainable params: 41,943,040 || all params: 8,072,204,288" for all-linear.
PEFT_LLAMA_3_8B = [
    (LoraTargets.QKVO, 13_631_488),
    (LoraTargets.ALL_LINEAR, 41_943_040),
    # By hand, the LoRA paper's Q and V: 32 blocks × 16 × ((4096 + 4096) + (4096 + 1024)).
    (LoraTargets.QV, 32 * 16 * (8192 + 5120)),
]


@pytest.mark.parametrize(("targets", "expected"), PEFT_LLAMA_3_8B)
def test_adapters_are_peft_s_count(targets: LoraTargets, expected: int) -> None:
    assert adapter_params(LLAMA_3_8B, 16, targets) == expected


def test_gpt_3s_plain_mlp_has_two_matrices_to_adapt() -> None:
    # GPT-3 175B (h = 12,288, f = 4h = 49,152, 96 blocks, no gate): all-linear adapts Q, K, V, O (each
    # h × h) and the MLP's two matrices (h × f, f × h). r = 16: 96 × 16 × (4 × (12,288 + 12,288) +
    # 2 × (12,288 + 49,152)) = 96 × 16 × (98,304 + 122,880) = 339,738,624.
    assert adapter_params(GPT_3_175B, 16, LoraTargets.ALL_LINEAR) == 339_738_624


def test_all_linear_with_the_model_is_peft_s_all_params() -> None:
    run = resolve(Inputs(model=ModelName.LLAMA_3_8B, lora_rank=16, lora_targets=LoraTargets.ALL_LINEAR)).run
    assert run.params == 8_072_204_288
    assert run.params - run.frozen == 41_943_040


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.25", 250), ("25%", 250), ("1", 1000), ("0", 0), ("300", 300), ("1e2", 100), ("0.5%", 5)],
)
def test_trainable_as_a_count_or_a_fraction(text: str, expected: int) -> None:
    assert parse_trainable(text, 1000) == expected


@pytest.mark.parametrize(
    ("text", "params", "expected"),
    [
        ("0.25", 1003, 250),  # 250.75 weights: a part of a weight does not train, so 250
        ("75%", 1001, 750),  # 750.75, likewise
        ("1003", 1003, 1003),  # a count of every weight the model has trains them all
        ("1K", 1000, 1000),
        ("2", 1000, 2),  # a plain whole number above 1 is a count, not a fraction
        ("1,000", 2000, 1000),
    ],
)
def test_a_share_counts_whole_weights_and_a_count_may_be_all_of_them(text: str, params: int, expected: int) -> None:
    assert parse_trainable(text, params) == expected


@pytest.mark.parametrize(("text", "said"), [("2.5", "between 0 and 1"), ("150%", "between 0 and 1"), ("2K", "more")])
def test_trainable_out_of_range(text: str, said: str) -> None:
    with pytest.raises(ValueError, match=said):
        parse_trainable(text, 1000)


def test_a_frozen_weight_keeps_its_weights_band_only() -> None:
    # Llama 3 8B on one card, a quarter trainable: 2 B for every weight, and 2 + 4 + 8 B for the
    # 2,007,565,312 that train: 16,060,522,496 + 28,105,914,368 B.
    run = resolve(Inputs(model=ModelName.LLAMA_3_8B, gpus=1, trainable="0.25", batch=0)).run
    assert report(run)[0].per_gpu_bytes == 2 * 8_030_261_248 + 14 * 2_007_565_312


def test_lora_on_a_bare_count_says_why_there_are_no_adapters() -> None:
    scenario = resolve(Inputs(model=ModelName.ZERO_7_5B, lora_rank=8))
    assert scenario.adapters == 0
    assert scenario.notes == (
        "LoRA's adapters are counted from the layers' shapes, which a bare weight count has not: drawn without LoRA.",
    )
    # The same rank on a model with shapes draws its adapters, and says nothing of the kind.
    shaped = resolve(Inputs(model=ModelName.LLAMA_3_8B, lora_rank=8))
    assert shaped.adapters > 0
    assert not [note for note in shaped.notes if "bare weight count" in note]


@settings(max_examples=examples(60), deadline=None)
@given(
    name=st.sampled_from([ModelName.LLAMA_3_8B, ModelName.GPT_3_175B, ModelName.SEED_30B]),
    gpus=st.integers(1, 4096),
    share=st.integers(0, 100),
    rank=st.none() | st.integers(1, 256),
    stage=st.sampled_from(list(Stage)),
)
def test_frozen_weights_never_add_gradients_or_optimizer_state(
    name: ModelName, gpus: int, share: int, rank: int | None, stage: Stage
) -> None:
    frozen = resolve(Inputs(model=name, gpus=gpus, trainable=f"{share}%", lora_rank=rank, batch=0))
    every = resolve(Inputs(model=name, gpus=gpus, lora_rank=rank, trainable="1", batch=0))
    # Freezing can only take state away, never add it, at rest or at any moment of the step; the
    # gradients, master copy and moments are those of the trainable weights alone.
    row = list(Stage).index(stage)
    assert report(frozen.run)[row].per_gpu_bytes <= report(every.run)[row].per_gpu_bytes
    trains = frozen.run.params - frozen.run.frozen
    for band in (Band.GRADIENTS, Band.MASTER, Band.MOMENTS):
        alone = band_bytes(stage, band, trains, gpus, frozen.recipe)
        assert band_bytes(stage, band, frozen.run.params, gpus, frozen.recipe, frozen.run.frozen) == alone
    highest = max(p.live_bytes for p in step(stage, frozen.run, frozen.columns))
    assert highest <= max(p.live_bytes for p in step(stage, every.run, every.columns))
    # And the weights band stays whole: frozen weights are still weights.
    assert PRESETS[name].params <= frozen.run.params


def test_lora_moves_the_adapters_gradients_only_and_ddp_buckets_them_only() -> None:
    # Llama 3 70B with LoRA r = 16 on Q, K, V, O: 65,536,000 adapter weights train, by hand
    # 80 × 16 × ((8192 + 8192) × 2 + (8192 + 1024) × 2).
    run = resolve(Inputs(model=ModelName.LLAMA_3_70B, gpus=8, lora_rank=16, batch=0, count_overheads=True)).run
    trains = run.params - run.frozen
    assert trains == 80 * 16 * (16384 * 2 + 9216 * 2) == 65_536_000
    dp, _, _, zero3 = report(run)
    # Data parallelism all-reduces the adapters' bf16 gradients: 2 × 2 B × 65,536,000.
    assert dp.communication_bytes == 2 * 2 * trains
    # ZeRO-3 all-gathers every weight for the forward, frozen or not; the backward stops at block 1, so it
    # gathers all but the embedding (128,256 × 8,192 = 1,050,673,152) again, and reduce-scatters the
    # adapters' gradients.
    assert zero3.communication_bytes == 2 * run.params + 2 * (run.params - 1_050_673_152) + 2 * trains
    buckets = next(item for item in dp.overheads if item.name == "DDP gradient buckets")
    assert buckets.nbytes == 2 * trains


@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("trainable", ["0.25", "1", "0"])
def test_the_steps_tally_is_the_tables_traffic_with_frozen_weights(stage: Stage, trainable: str) -> None:
    scenario = resolve(Inputs(model=ModelName.LLAMA_3_8B, gpus=8, trainable=trainable, batch=0))
    run = scenario.run
    phases = step(stage, run, scenario.columns)
    row = report(run)[list(Stage).index(stage)]
    weights, gradients = (run.recipe.nbytes(band) for band in (Band.WEIGHTS, Band.GRADIENTS))
    # The tally is in units of P: weights traffic at the weights' bytes, gradients' at theirs.
    moved = sum(
        t.volume_p * run.params * (gradients if t.band is Band.GRADIENTS else weights)
        for p in phases
        for t in p.transfers
    )
    assert moved == row.communication_bytes
    # And the backward over a column computes gradients for the layer in hand's trained weights only,
    # and sends gradients only where the column has weights that train.
    for p in phases:
        if p.part.value == "backward" and p.column is not None:
            # Gradients are held at the column's compute phase only: not yet at its gather, sent at its discard.
            computes = stage in (Stage.ZERO2, Stage.ZERO3) and run.gpus > 1 and p.beat is Beat.COMPUTE
            assert p.extra.computed == (gradients * (p.trained or 0) if computes else 0)
            if not run.moved[Whose.TRAINED][p.column]:
                assert all(t.band is not Band.GRADIENTS for t in p.transfers)


def test_a_frozen_largest_layer_is_assembled_without_gradients() -> None:
    # Llama 3 70B's largest layer is its embedding, 128,256 × 8,192 = 1,050,673,152 weights: frozen
    # under LoRA, so ZeRO-3 assembles its bf16 weights only, 2 B each.
    lora = resolve(Inputs(model=ModelName.LLAMA_3_70B, lora_rank=16)).run
    full = resolve(Inputs(model=ModelName.LLAMA_3_70B)).run
    assert lora.assembled_layer_bytes == 2 * 1_050_673_152
    assert full.assembled_layer_bytes == 4 * 1_050_673_152


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1,000%", "a fraction of the weights is between 0 and 1 (0% and 100%)"),  # 1000 %, not a count
        ("1.5", "a fraction of the weights is between 0 and 1 (0% and 100%)"),
    ],
)
def test_a_share_out_of_range_says_so(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=rf"^{re.escape(message)}$"):
        parse_trainable(text, 1000)


def test_a_lora_rank_is_1_to_4096() -> None:
    # The largest rank: Llama 3 8B's Q and V at r = 4,096, 32 × 4,096 × (8,192 + 5,120) weights.
    assert adapter_params(LLAMA_3_8B, 4096, LoraTargets.QV) == 32 * 4096 * 13_312
    for rank in (0, 4097):
        with pytest.raises(ValueError, match=r"^a LoRA rank is between 1 and 4096$"):
            adapter_params(LLAMA_3_8B, rank, LoraTargets.QV)
