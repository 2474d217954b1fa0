from __future__ import annotations

from dataclasses import replace
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.accounting import Accounting
from app.domain.activations import Recompute
from app.domain.architecture import ModelName
from app.domain.placement import Offload
from app.domain.presets import PRESETS
from app.domain.recipes import MIXED_ADAM, RECIPES, Band, Recipe, RecipeName, custom_recipe
from app.domain.scenario import Inputs, resolve
from app.domain.sizing import (
    ANY_SIZE,
    MAX_BATCH,
    LayerExtra,
    Run,
    communication_bytes,
    layer_exceeds_card,
    layer_extra,
    max_params_that_fit,
    peak_bytes,
    peak_moment,
    report,
    stage_report,
)
from app.domain.stages import Stage
from app.domain.step import step
from app.domain.terms import Moment, Pass, TermKind
from app.domain.units import ByteUnit
from tests.conftest import examples

recipes = st.sampled_from(list(RECIPES.values()))


def test_zero_paper_figure_1() -> None:
    # 7.5B weights on 64 GPUs with mixed-precision Adam (K = 12): 120 / 31.4 / 16.6 / 1.9 GB.
    rows = report(Run(params=7_500_000_000, gpus=64))
    assert [ByteUnit.GB.show(row.per_gpu_bytes) for row in rows] == ["120.0 GB", "31.4 GB", "16.6 GB", "1.9 GB"]


def test_seed_table_unchanged_at_the_defaults() -> None:
    rows = report(Run())
    assert [ByteUnit.GIB.show(row.per_gpu_bytes) for row in rows] == ["447.0 GiB", "153.7 GiB", "104.8 GiB", "55.9 GiB"]
    assert [row.communication_p for row in rows] == [2, 2, 2, 3]


def test_report_rows_are_in_stage_order() -> None:
    assert [row.stage for row in report(Run())] == list(Stage)


def test_communication_in_bytes_is_p_times_the_band_moved() -> None:
    run = Run(params=10**9)
    # Every collective moves bf16 (2 B): gradients for DP, ZeRO-1 and ZeRO-2, weights as well for ZeRO-3.
    assert [communication_bytes(stage, run) for stage in Stage] == [4 * 10**9, 4 * 10**9, 4 * 10**9, 6 * 10**9]
    fp32 = Run(params=10**9, recipe=RECIPES[RecipeName("fp32-adam")])
    assert communication_bytes(Stage.ZERO3, fp32) == 12 * 10**9


def test_zero3_peak_is_the_shard_plus_one_assembled_layer() -> None:
    llama = PRESETS[ModelName("llama-3-8b")]
    run = Run(params=llama.params, gpus=8, largest_layer=llama.largest_layer)
    shard = llama.params * 16 / 8
    assert peak_bytes(Stage.ZERO3, run) == shard + 525_336_576 * 4
    # ZeRO-2 holds one layer's whole gradients until they are reduce-scattered.
    assert peak_bytes(Stage.ZERO2, run) == llama.params * (2 + 14 / 8) + 525_336_576 * 2
    assert peak_bytes(Stage.ZERO1, run) == llama.params * (4 + 12 / 8)


def test_fit_headroom_and_largest_model() -> None:
    run = Run(params=7_500_000_000, gpus=64, capacity=32 * 2**30)
    rows = {row.stage: row for row in report(run)}
    assert [rows[s].fits for s in Stage] == [False, True, True, True]
    # 4 B of weights and gradients for every weight, 12 B for a 1/64 slice of 117,187,500 weights.
    assert rows[Stage.ZERO1].headroom_bytes == 32 * 2**30 - (7_500_000_000 * 4 + 117_187_500 * 12)
    # ZeRO paper Table 2 style, model states only (the largest layer is unknown): 16 B for each of
    # at most 2³¹ weights in a slice, so 64 × 2³¹ weights; data parallelism 32 GiB / 16 B = 2³¹.
    assert rows[Stage.ZERO3].max_params_that_fit == 64 * 2**31
    assert rows[Stage.DP].max_params_that_fit == 2**31


def test_the_largest_model_and_the_verdict_use_the_same_test() -> None:
    # Llama 3 8B on 8 cards of 16 GiB: ZeRO-3 is 0.9 GiB over, so the largest model that fits is smaller.
    llama = PRESETS[ModelName("llama-3-8b")]
    run = Run(params=llama.params, gpus=8, largest_layer=llama.largest_layer, capacity=16 * 2**30)
    zero3 = report(run)[-1]
    assert zero3.fits is False
    assert isinstance(zero3.max_params_that_fit, int)
    assert zero3.max_params_that_fit < llama.params
    # By hand: the assembled embedding, 525,336,576 weights × (2 B weights + 2 B gradients), leaves room
    # for a slice of (16 GiB - that) / 16 B weights; 8 such slices make the model.
    assembled = 525_336_576 * 4
    assert zero3.max_params_that_fit == (16 * 2**30 - assembled) // 16 * 8 == 7_539_261_440


@settings(max_examples=examples(60), deadline=None)
@given(
    params=st.integers(10**6, 10**13),
    gpus=st.integers(1, 4096),
    recipe=recipes,
    layer_share=st.none() | st.floats(1e-6, 1.0),
    capacity=st.integers(2**30, 2**40),
)
def test_the_largest_model_that_fits_fits_and_one_percent_more_does_not(
    params: int, gpus: int, recipe: Recipe, layer_share: float | None, capacity: int
) -> None:
    layer = None if layer_share is None else max(1, int(params * layer_share))
    run = Run(params=params, gpus=gpus, recipe=recipe, largest_layer=layer, capacity=capacity)
    for row in report(run):
        largest = row.max_params_that_fit
        if largest is None:
            # Not even a model of one largest layer fits.
            assert layer is not None
            assert peak_bytes(row.stage, replace(run, params=layer)) > capacity
            continue
        assert isinstance(largest, int)  # no offload: the peak grows with the weights
        assert peak_bytes(row.stage, replace(run, params=largest)) <= capacity
        assert peak_bytes(row.stage, replace(run, params=largest + 1)) > capacity
        assert peak_bytes(row.stage, replace(run, params=largest * 101 // 100 + 1)) > capacity
        assert row.fits is (params <= largest)


def test_a_peak_exactly_the_cards_size_fits_with_no_headroom() -> None:
    # 800 weights on 8 cards, layers of 100, mixed-precision Adam (2/2/4/8 B). ZeRO-3 by hand: a slice of
    # 800 / 8 = 100 weights × 16 B = 1,600 B, plus the assembled layer, 100 × (2 B weights + 2 B gradients)
    # = 400 B: a peak of 2,000 B. On a card of exactly 2,000 B it fits, with 0 B to spare; 801 weights
    # would need a slice of 101: 1,616 + 400 = 2,016 B, too many, so 800 is the largest model that fits.
    run = Run(params=800, gpus=8, largest_layer=100, capacity=2_000)
    zero3 = stage_report(Stage.ZERO3, run)
    assert zero3.peak_bytes == 2_000
    assert zero3.fits is True
    assert zero3.headroom_bytes == 0
    assert zero3.max_params_that_fit == 800
    # One byte less and the same peak no longer fits.
    smaller = stage_report(Stage.ZERO3, replace(run, capacity=1_999))
    assert (smaller.fits, smaller.headroom_bytes, smaller.max_params_that_fit) == (False, -1, 792)
    # 792 by hand: a slice of 99 weights, 99 × 16 + 400 = 1,984 B fits; 793 needs 100, 2,000 B > 1,999 B.


def test_the_layer_in_hand_counts_the_gradients_at_their_own_size() -> None:
    # bf16 weights (2 B) with fp32 gradients (4 B), as with fp32 gradient accumulation: no preset has
    # weights and gradients of different sizes. 800 weights on 8 cards, layers of 100 weights.
    run = Run(params=800, gpus=8, recipe=custom_recipe(2, 4, 4, 8), largest_layer=100)
    # ZeRO-3, backward: the layer's whole weights gathered, 100 × 2 = 200 B, and its whole gradients
    # computed, 100 × 4 = 400 B. Forward: the weights only.
    assert layer_extra(Stage.ZERO3, run, Moment(Pass.BACKWARD, 100)) == LayerExtra.held(
        {TermKind.GATHERED: 200, TermKind.COMPUTED: 400}
    )
    assert layer_extra(Stage.ZERO3, run, Moment(Pass.FORWARD, 100)) == LayerExtra.held({TermKind.GATHERED: 200})
    # ZeRO-2 keeps its weights whole, so it gathers nothing; it computes the 400 B of gradients.
    assert layer_extra(Stage.ZERO2, run, Moment(Pass.BACKWARD, 100)) == LayerExtra.held({TermKind.COMPUTED: 400})
    # The peaks. ZeRO-3: a slice of 100 weights × (2 + 4 + 4 + 8) = 1,800 B, + 200 + 400 = 2,400 B.
    # ZeRO-2: the whole weights, 800 × 2 = 1,600 B, a slice of the rest, 100 × 16 = 1,600 B, + 400 = 3,600 B.
    assert peak_bytes(Stage.ZERO3, run) == 2_400
    assert peak_bytes(Stage.ZERO2, run) == 3_600


def test_when_one_layer_exceeds_the_card_no_model_fits() -> None:
    gpt3 = PRESETS[ModelName("gpt-3-175b")]
    run = Run(params=gpt3.params, gpus=1024, largest_layer=gpt3.largest_layer, capacity=4 * 2**30)
    assert layer_exceeds_card(run) is True
    assert report(run)[-1].max_params_that_fit is None


@pytest.mark.parametrize("recipe", list(RECIPES.values()))
def test_one_gpu_every_stage_is_data_parallelism_and_moves_nothing(recipe: Recipe) -> None:
    llama = PRESETS[ModelName("llama-3-8b")]
    rows = report(Run(params=llama.params, gpus=1, recipe=recipe, largest_layer=llama.largest_layer))
    assert {row.peak_bytes for row in rows} == {llama.params * recipe.total}
    assert {row.per_gpu_bytes for row in rows} == {llama.params * recipe.total}
    assert {(row.communication_p, row.communication_bytes) for row in rows} == {(Fraction(0), 0)}


def test_a_layer_bigger_than_the_card_needs_tensor_parallelism() -> None:
    gpt3 = PRESETS[ModelName("gpt-3-175b")]
    assert gpt3.largest_layer is not None
    small = Run(params=gpt3.params, gpus=4096, largest_layer=gpt3.largest_layer, capacity=4 * 2**30)
    assert layer_exceeds_card(small) is True
    assert [row.fits for row in report(small)][-1] is False
    big = Run(params=gpt3.params, gpus=4096, largest_layer=gpt3.largest_layer, capacity=80 * 2**30)
    assert layer_exceeds_card(big) is False
    assert layer_exceeds_card(Run()) is None


@pytest.mark.parametrize(
    "bad",
    [
        {"params": 0},
        {"gpus": 0},
        {"gpus": 4097},
        {"largest_layer": 0},
        {"params": 10, "largest_layer": 11},
        {"capacity": 0},
    ],
)
def test_impossible_runs_are_refused(bad: dict[str, int]) -> None:
    with pytest.raises(ValueError):  # noqa: PT011 - each field has its own message
        Run(**bad)  # type: ignore[arg-type]


@given(params=st.integers(1, 10**13), gpus=st.integers(1, 4095), recipe=recipes)
def test_memory_never_rises_as_gpus_grow(params: int, gpus: int, recipe: Recipe) -> None:
    fewer = report(Run(params=params, gpus=gpus, recipe=recipe))
    more = report(Run(params=params, gpus=gpus + 1, recipe=recipe))
    assert all(m.per_gpu_bytes <= f.per_gpu_bytes for f, m in zip(fewer, more, strict=True))


@given(params=st.integers(1, 10**13), gpus=st.integers(1, 4096), recipe=recipes)
def test_each_stage_needs_no_more_than_the_one_before(params: int, gpus: int, recipe: Recipe) -> None:
    sizes = [row.per_gpu_bytes for row in report(Run(params=params, gpus=gpus, recipe=recipe))]
    assert sizes == sorted(sizes, reverse=True)


@given(params=st.integers(1, 10**13), gpus=st.integers(1, 4096), recipe=recipes)
def test_zero3_cards_together_hold_the_whole_state(params: int, gpus: int, recipe: Recipe) -> None:
    zero3 = report(Run(params=params, gpus=gpus, recipe=recipe))[-1]
    # Each slice is padded to whole weights: less than one weight of padding per card; and each band's
    # bytes on a card are rounded up to whole bytes (a fraction a weight): less than one byte a band.
    assert params * recipe.total <= zero3.per_gpu_bytes * gpus < (params + gpus) * recipe.total + len(Band) * gpus


def test_defaults() -> None:
    assert Run().recipe is MIXED_ADAM


# Activations: the runs a page draws, from a model's shape (app/domain/scenario.py).
shaped = st.sampled_from([ModelName.LLAMA_3_8B, ModelName.LLAMA_3_70B, ModelName.GPT_3_175B])


def _shaped_run(name: ModelName, gpus: int, batch: int, seq: int, recompute: Recompute, capacity: int | None) -> Run:
    inputs = Inputs(model=name, gpus=gpus, batch=batch, seq=seq, recompute=recompute, capacity=capacity)
    return resolve(inputs).run


@settings(max_examples=examples(60), deadline=None)
@given(
    name=shaped,
    gpus=st.integers(1, 4096),
    batch=st.integers(0, 64),
    seq=st.integers(1, 32768),
    recompute=st.sampled_from(list(Recompute)),
    stage=st.sampled_from(list(Stage)),
)
def test_the_steps_highest_moment_is_the_peak(
    name: ModelName, gpus: int, batch: int, seq: int, recompute: Recompute, stage: Stage
) -> None:
    scenario = resolve(Inputs(model=name, gpus=gpus, batch=batch, seq=seq, recompute=recompute))
    phases = step(stage, scenario.run, scenario.columns)
    assert max(p.live_bytes for p in phases) == peak_bytes(stage, scenario.run)
    # At rest and after the backward, no activations; the most are kept in the last column, the forward's
    # end or the backward's start (phases 22-27: its gathers, computes and discards).
    assert phases[0].extra.activations == phases[-1].extra.activations == 0
    assert max(p.extra.activations for p in phases) == max(phases[i].extra.activations for i in range(22, 28))


@settings(max_examples=examples(60), deadline=None)
@given(
    name=shaped,
    gpus=st.integers(1, 4096),
    seq=st.integers(1, 32768),
    recompute=st.sampled_from(list(Recompute)),
    capacity=st.integers(2**30, 2**40),
)
def test_the_largest_micro_batch_that_fits_fits_and_one_more_does_not(
    name: ModelName, gpus: int, seq: int, recompute: Recompute, capacity: int
) -> None:
    for row in report(_shaped_run(name, gpus, 1, seq, recompute, capacity)):
        largest = row.max_batch_that_fits
        if largest is None:  # not even an empty micro-batch fits: the model states alone are too big
            assert not stage_report(row.stage, _shaped_run(name, gpus, 0, seq, recompute, capacity)).fits
            continue
        assert stage_report(row.stage, _shaped_run(name, gpus, largest, seq, recompute, capacity)).fits
        if largest < MAX_BATCH:
            assert not stage_report(row.stage, _shaped_run(name, gpus, largest + 1, seq, recompute, capacity)).fits


def test_no_activations_leave_the_seeds_and_the_papers_figures_alone() -> None:
    # An empty micro-batch, or a bare count, adds nothing: peak_bytes is state_peak_bytes.
    for run in (_shaped_run(ModelName.LLAMA_3_8B, 8, 0, 8192, Recompute.NONE, None), resolve(Inputs(batch=4)).run):
        assert all(r.peak_bytes == r.state_peak_bytes and r.activation_bytes == 0 for r in report(run))


def test_llama_8b_zero3_peak_by_hand() -> None:
    # Llama 3 8B on 8 cards, s = 8192, b = 1, no recomputation. The peak is the backward's start, over
    # the last eighth: 32 blocks' 1,376,780,288 B each, plus the output layer (final norm's and head's
    # inputs, 2 × 2sbh = 134,217,728 B, and the logits, 4sbv = 4,202,692,608 B), on top of the state
    # at rest (16,060,522,496 B) and the output head gathered and its gradients computed
    # (2 × 2 B × 525,336,576 = 2,101,346,304 B).
    run = _shaped_run(ModelName.LLAMA_3_8B, 8, 1, 8192, Recompute.NONE, None)
    activations = 32 * 1_376_780_288 + 134_217_728 + 4_202_692_608
    row = stage_report(Stage.ZERO3, run)
    assert row.activation_bytes == activations
    assert row.peak_bytes == 16_060_522_496 + 2_101_346_304 + activations


@settings(max_examples=examples(40), deadline=None)
@given(name=shaped, gpus=st.integers(1, 4096), batch=st.integers(0, 8), stage=st.sampled_from(list(Stage)))
def test_counted_overheads_are_the_same_at_every_moment_and_the_peak_is_still_the_steps_highest(
    name: ModelName, gpus: int, batch: int, stage: Stage
) -> None:
    scenario = resolve(Inputs(model=name, gpus=gpus, batch=batch, count_overheads=True))
    phases = step(stage, scenario.run, scenario.columns)
    row = stage_report(stage, scenario.run)
    assert row.overhead_bytes == sum(item.nbytes for item in row.overheads) > 0
    assert {p.overhead_bytes for p in phases} == {row.overhead_bytes}
    assert max(p.live_bytes for p in phases) == row.peak_bytes


@pytest.mark.parametrize(
    ("capacity", "exceeds"),
    [
        # 8 layers of 125 weights, all training: 4 B × 125 = 500 B assembled.
        (None, None),
        (500, False),
        (499, True),
    ],
)
def test_the_assembled_layer_against_the_card(capacity: int | None, exceeds: bool | None) -> None:
    assert layer_exceeds_card(Run(params=1000, largest_layer=125, capacity=capacity)) is exceeds


def test_one_card_moves_nothing() -> None:
    assert communication_bytes(Stage.ZERO3, Run(params=1000, gpus=1)) == 0


@settings(max_examples=examples(80), deadline=None)
@given(
    model=st.sampled_from([ModelName.LLAMA_3_8B, ModelName.LLAMA_3_70B, ModelName.GPT_3_175B, ModelName.SEED_30B]),
    gpus=st.sampled_from([1, 2, 8, 16, 64]),
    accounting=st.sampled_from(list(Accounting)),
    offload=st.sampled_from(list(Offload)),
    batch=st.integers(0, 8),
    trainable=st.none() | st.sampled_from(["0.5", "10%", "1"]),
    capacity=st.integers(2**30, 2**38),
    stage=st.sampled_from(list(Stage)),
)
def test_the_largest_model_weighs_the_runs_highest_moment_alone_to_the_same_answer(
    model: ModelName,
    gpus: int,
    accounting: Accounting,
    offload: Offload,
    batch: int,
    trainable: str | None,
    capacity: int,
    stage: Stage,
) -> None:
    """Given the run's highest moment, the bisection weighs it alone at each size: the same largest model."""
    inputs = Inputs(model=model, gpus=gpus, accounting=accounting, offload=offload, batch=batch, capacity=capacity)
    run = resolve(replace(inputs, trainable=trainable)).run
    moment = peak_moment(stage, run)
    assert max_params_that_fit(stage, run, moment) == max_params_that_fit(stage, run)


def test_the_largest_model_is_exact_past_two_to_the_54() -> None:
    # ZeRO-3 on 4,096 cards of 100 TB, 16 B a weight split 4,096 ways, no layer known: ⌈P / 4,096⌉ × 16 B ≤ 1e14 B,
    # so P ≤ 1e14 / 16 × 4,096 = 25,600,000,000,000,000 (past 2^54 = 18,014,398,509,481,984); one more does not fit.
    run = Run(params=1000, gpus=4096, capacity=100 * 10**12)
    assert max_params_that_fit(Stage.ZERO3, run) == 25_600_000_000_000_000
    assert max_params_that_fit(Stage.DP, run) == 10**14 // 16


def test_with_every_band_that_grows_off_the_card_any_size_fits() -> None:
    # ZeRO-3 with the optimizer and the weights' slices offloaded, no layer known, no micro-batch: nothing on the
    # card grows with the weights, so no size is the largest. The other stages keep theirs on the card.
    run = resolve(Inputs(params=1000, gpus=8, capacity=80 * 10**9, batch=0, offload=Offload.OPTIMIZER_PARAMS)).run
    assert max_params_that_fit(Stage.ZERO3, run) is ANY_SIZE
    assert max_params_that_fit(Stage.DP, run) == 80 * 10**9 // 16
