"""DeepSpeed's accounting against DeepSpeed's own estimators, run for real.

The rows below are what DeepSpeed 0.19.8 printed, on the CPU, from a pure-Python install with no ops
built (`pip install torch==2.13.0`, then `DS_BUILD_OPS=0 pip install --no-build-isolation
deepspeed==0.19.8`), by this loop over its two estimators:

    from deepspeed.runtime.zero.stage_1_and_2 import estimate_zero2_model_states_mem_needs as e2
    from deepspeed.runtime.zero.stage3 import estimate_zero3_model_states_mem_needs as e3
    for (params, layer), (nodes, gpus_per_node) in product(MODELS, SHAPES):
        e2(params, gpus_per_node, nodes, cpu_offload)
        e3(params, layer, gpus_per_node, nodes, cpu_offload, cpu_offload_params, zero_init)

DeepSpeed stays a tool: nothing here imports it.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain import deepspeed
from app.domain.accounting import Accounting, Setup
from app.domain.architecture import ModelName
from app.domain.host import host_report
from app.domain.placement import Offload, Placement
from app.domain.presets import PRESETS
from app.domain.scenario import Inputs, resolve
from app.domain.sizing import Run, report, state_peak_bytes
from app.domain.stages import Stage

# (model, nodes, GPUs per node, stage, offload, zero_init, CPU bytes per node, GPU bytes per card)
ESTIMATES = [
    ("seed-30b", 1, 8, "zero2", "none", True, 1440000000000, 127500000000),
    ("seed-30b", 1, 8, "zero2", "optimizer", True, 1440000000000, 60000000000),
    ("seed-30b", 1, 8, "zero3", "none", True, 180000000000, 82500000000),
    ("seed-30b", 1, 8, "zero3", "none", False, 1440000000000, 82500000000),
    ("seed-30b", 1, 8, "zero3", "optimizer", True, 720000000000, 22500000000),
    ("seed-30b", 1, 8, "zero3", "optimizer", False, 1440000000000, 22500000000),
    ("seed-30b", 1, 8, "zero3", "optimizer+params", True, 810000000000, 15000000000),
    ("seed-30b", 1, 8, "zero3", "optimizer+params", False, 1440000000000, 15000000000),
    ("seed-30b", 4, 8, "zero2", "none", True, 1440000000000, 76875000000),
    ("seed-30b", 4, 8, "zero2", "optimizer", True, 5760000000000, 60000000000),
    ("seed-30b", 4, 8, "zero3", "none", True, 180000000000, 31875000000),
    ("seed-30b", 4, 8, "zero3", "none", False, 1440000000000, 31875000000),
    ("seed-30b", 4, 8, "zero3", "optimizer", True, 180000000000, 16875000000),
    ("seed-30b", 4, 8, "zero3", "optimizer", False, 1440000000000, 16875000000),
    ("seed-30b", 4, 8, "zero3", "optimizer+params", True, 202500000000, 15000000000),
    ("seed-30b", 4, 8, "zero3", "optimizer+params", False, 1440000000000, 15000000000),
    ("seed-30b", 2, 4, "zero2", "none", True, 720000000000, 127500000000),
    ("seed-30b", 2, 4, "zero2", "optimizer", True, 1440000000000, 60000000000),
    ("seed-30b", 2, 4, "zero3", "none", True, 90000000000, 82500000000),
    ("seed-30b", 2, 4, "zero3", "none", False, 720000000000, 82500000000),
    ("seed-30b", 2, 4, "zero3", "optimizer", True, 360000000000, 22500000000),
    ("seed-30b", 2, 4, "zero3", "optimizer", False, 720000000000, 22500000000),
    ("seed-30b", 2, 4, "zero3", "optimizer+params", True, 405000000000, 15000000000),
    ("seed-30b", 2, 4, "zero3", "optimizer+params", False, 720000000000, 15000000000),
    ("llama-3-8b", 1, 8, "zero2", "none", True, 385452539904, 34128610304),
    ("llama-3-8b", 1, 8, "zero2", "optimizer", True, 385452539904, 16060522496),
    ("llama-3-8b", 1, 8, "zero3", "none", True, 25216155648, 20169434112),
    ("llama-3-8b", 1, 8, "zero3", "none", False, 385452539904, 20169434112),
    ("llama-3-8b", 1, 8, "zero3", "optimizer", True, 192726269952, 4108911616),
    ("llama-3-8b", 1, 8, "zero3", "optimizer", False, 385452539904, 4108911616),
    ("llama-3-8b", 1, 8, "zero3", "optimizer+params", True, 216817053696, 2101346304),
    ("llama-3-8b", 1, 8, "zero3", "optimizer+params", False, 385452539904, 2101346304),
    ("llama-3-8b", 4, 8, "zero2", "none", True, 385452539904, 20577544448),
    ("llama-3-8b", 4, 8, "zero2", "optimizer", True, 1541810159616, 16060522496),
    ("llama-3-8b", 4, 8, "zero3", "none", True, 25216155648, 6618368256),
    ("llama-3-8b", 4, 8, "zero3", "none", False, 385452539904, 6618368256),
    ("llama-3-8b", 4, 8, "zero3", "optimizer", True, 48181567488, 2603237632),
    ("llama-3-8b", 4, 8, "zero3", "optimizer", False, 385452539904, 2603237632),
    ("llama-3-8b", 4, 8, "zero3", "optimizer+params", True, 54204263424, 2101346304),
    ("llama-3-8b", 4, 8, "zero3", "optimizer+params", False, 385452539904, 2101346304),
    ("llama-3-8b", 2, 4, "zero2", "none", True, 192726269952, 34128610304),
    ("llama-3-8b", 2, 4, "zero2", "optimizer", True, 385452539904, 16060522496),
    ("llama-3-8b", 2, 4, "zero3", "none", True, 12608077824, 20169434112),
    ("llama-3-8b", 2, 4, "zero3", "none", False, 192726269952, 20169434112),
    ("llama-3-8b", 2, 4, "zero3", "optimizer", True, 96363134976, 4108911616),
    ("llama-3-8b", 2, 4, "zero3", "optimizer", False, 192726269952, 4108911616),
    ("llama-3-8b", 2, 4, "zero3", "optimizer+params", True, 108408526848, 2101346304),
    ("llama-3-8b", 2, 4, "zero3", "optimizer+params", False, 192726269952, 2101346304),
    ("llama-3-70b", 1, 8, "zero2", "none", True, 3386577911808, 299853252608),
    ("llama-3-70b", 1, 8, "zero2", "optimizer", True, 3386577911808, 141107412992),
    ("llama-3-70b", 1, 8, "zero3", "none", True, 50432311296, 162948532224),
    ("llama-3-70b", 1, 8, "zero3", "none", False, 3386577911808, 162948532224),
    ("llama-3-70b", 1, 8, "zero3", "optimizer", True, 1693288955904, 21841119232),
    ("llama-3-70b", 1, 8, "zero3", "optimizer", False, 3386577911808, 21841119232),
    ("llama-3-70b", 1, 8, "zero3", "optimizer+params", True, 1904950075392, 4202692608),
    ("llama-3-70b", 1, 8, "zero3", "optimizer+params", False, 3386577911808, 4202692608),
    ("llama-3-70b", 4, 8, "zero2", "none", True, 3386577911808, 180793872896),
    ("llama-3-70b", 4, 8, "zero2", "optimizer", True, 13546311647232, 141107412992),
    ("llama-3-70b", 4, 8, "zero3", "none", True, 50432311296, 43889152512),
    ("llama-3-70b", 4, 8, "zero3", "none", False, 3386577911808, 43889152512),
    ("llama-3-70b", 4, 8, "zero3", "optimizer", True, 423322238976, 8612299264),
    ("llama-3-70b", 4, 8, "zero3", "optimizer", False, 3386577911808, 8612299264),
    ("llama-3-70b", 4, 8, "zero3", "optimizer+params", True, 476237518848, 4202692608),
    ("llama-3-70b", 4, 8, "zero3", "optimizer+params", False, 3386577911808, 4202692608),
    ("llama-3-70b", 2, 4, "zero2", "none", True, 1693288955904, 299853252608),
    ("llama-3-70b", 2, 4, "zero2", "optimizer", True, 3386577911808, 141107412992),
    ("llama-3-70b", 2, 4, "zero3", "none", True, 25216155648, 162948532224),
    ("llama-3-70b", 2, 4, "zero3", "none", False, 1693288955904, 162948532224),
    ("llama-3-70b", 2, 4, "zero3", "optimizer", True, 846644477952, 21841119232),
    ("llama-3-70b", 2, 4, "zero3", "optimizer", False, 1693288955904, 21841119232),
    ("llama-3-70b", 2, 4, "zero3", "optimizer+params", True, 952475037696, 4202692608),
    ("llama-3-70b", 2, 4, "zero3", "optimizer+params", False, 1693288955904, 4202692608),
    ("llama-3.1-405b", 1, 8, "zero2", "none", True, 19480962662400, 1724876902400),
    ("llama-3.1-405b", 1, 8, "zero2", "optimizer", True, 19480962662400, 811706777600),
    ("llama-3.1-405b", 1, 8, "zero3", "none", True, 153009782784, 925920940032),
    ("llama-3.1-405b", 1, 8, "zero3", "none", False, 19480962662400, 925920940032),
    ("llama-3.1-405b", 1, 8, "zero3", "optimizer", True, 9740481331200, 114214162432),
    ("llama-3.1-405b", 1, 8, "zero3", "optimizer", False, 19480962662400, 114214162432),
    ("llama-3.1-405b", 1, 8, "zero3", "optimizer+params", True, 10958041497600, 12750815232),
    ("llama-3.1-405b", 1, 8, "zero3", "optimizer+params", False, 19480962662400, 12750815232),
    ("llama-3.1-405b", 4, 8, "zero2", "none", True, 19480962662400, 1039999308800),
    ("llama-3.1-405b", 4, 8, "zero2", "optimizer", True, 77923850649600, 811706777600),
    ("llama-3.1-405b", 4, 8, "zero3", "none", True, 153009782784, 241043346432),
    ("llama-3.1-405b", 4, 8, "zero3", "none", False, 19480962662400, 241043346432),
    ("llama-3.1-405b", 4, 8, "zero3", "optimizer", True, 2435120332800, 38116652032),
    ("llama-3.1-405b", 4, 8, "zero3", "optimizer", False, 19480962662400, 38116652032),
    ("llama-3.1-405b", 4, 8, "zero3", "optimizer+params", True, 2739510374400, 12750815232),
    ("llama-3.1-405b", 4, 8, "zero3", "optimizer+params", False, 19480962662400, 12750815232),
    ("llama-3.1-405b", 2, 4, "zero2", "none", True, 9740481331200, 1724876902400),
    ("llama-3.1-405b", 2, 4, "zero2", "optimizer", True, 19480962662400, 811706777600),
    ("llama-3.1-405b", 2, 4, "zero3", "none", True, 76504891392, 925920940032),
    ("llama-3.1-405b", 2, 4, "zero3", "none", False, 9740481331200, 925920940032),
    ("llama-3.1-405b", 2, 4, "zero3", "optimizer", True, 4870240665600, 114214162432),
    ("llama-3.1-405b", 2, 4, "zero3", "optimizer", False, 9740481331200, 114214162432),
    ("llama-3.1-405b", 2, 4, "zero3", "optimizer+params", True, 5479020748800, 12750815232),
    ("llama-3.1-405b", 2, 4, "zero3", "optimizer+params", False, 9740481331200, 12750815232),
]


def _run(model: str, nodes: int, gpus_per_node: int, offload: str, zero_init: bool) -> Run:
    preset = PRESETS[ModelName(model)]
    return Run(
        params=preset.params,
        largest_layer=preset.largest_layer,
        gpus=nodes * gpus_per_node,
        nodes=nodes,
        zero_init=zero_init,
        setup=Setup(Accounting.DEEPSPEED, Placement(Offload(offload))),
    )


@pytest.mark.parametrize(("model", "nodes", "gpus_per_node", "stage", "offload", "zero_init", "cpu", "gpu"), ESTIMATES)
def test_deepspeed_accounting_gives_the_estimators_figures(
    model: str, nodes: int, gpus_per_node: int, stage: str, offload: str, zero_init: bool, cpu: int, gpu: int
) -> None:
    run = _run(model, nodes, gpus_per_node, offload, zero_init)
    assert state_peak_bytes(Stage(stage), run) == gpu
    assert host_report(Stage(stage), run).cpu_bytes == cpu


# The buffer factor, uneven slices and one card, from the same install:
# e2(1000003, 3, 1, False, 2.0), e2(1000003, 3, 1, True, 1.0), e3(1000003, 7777, 3, 2, True, False, False, 1.25)
# and e3(7, 3, 1, 1, False, False, True).
@pytest.mark.parametrize(
    ("stage", "params", "layer", "nodes", "per_node", "offload", "zero_init", "factor", "cpu", "gpu"),
    [
        (Stage.ZERO2, 1000003, 7777, 1, 3, Offload.NONE, True, 2.0, 24000072, 8000024),
        (Stage.ZERO2, 1000003, 7777, 1, 3, Offload.OPTIMIZER, True, 1.0, 16000048, 2000006),
        (Stage.ZERO3, 1000003, 7777, 2, 3, Offload.OPTIMIZER, False, 1.25, 15000045, 364442),
        (Stage.ZERO3, 7, 3, 1, 1, Offload.NONE, True, 1.5, 18, 138),
    ],
)
def test_every_input_of_the_estimators_is_taken(
    stage: Stage,
    params: int,
    layer: int,
    nodes: int,
    per_node: int,
    offload: Offload,
    zero_init: bool,
    factor: float,
    cpu: int,
    gpu: int,
) -> None:
    placement = Placement(offload)
    assert deepspeed.cpu_bytes_per_node(stage, params, layer, nodes, per_node, placement, zero_init, factor) == cpu
    run = Run(
        params=params,
        largest_layer=layer,
        gpus=nodes * per_node,
        nodes=nodes,
        zero_init=zero_init,
        setup=Setup(Accounting.DEEPSPEED, placement),
    )
    # The estimator does not pad a slice to whole weights, and truncates: where the cards do not divide
    # the model, the page's slices are up to one weight's 18 B larger (worked out in test_accounting.py),
    # and the page says so.
    assert 0 <= state_peak_bytes(stage, run) - gpu <= 18


@given(
    params=st.integers(1, 10**13),
    gpus_per_node=st.integers(1, 16),
    nodes=st.integers(1, 64),
    offload=st.sampled_from([Offload.NONE, Offload.OPTIMIZER, Offload.OPTIMIZER_PARAMS]),
    stage=st.sampled_from([Stage.ZERO2, Stage.ZERO3]),
)
def test_the_gpu_figure_is_the_estimators_formula_where_the_cards_divide_the_model(
    params: int, gpus_per_node: int, nodes: int, offload: Offload, stage: Stage
) -> None:
    # The estimators' formulas as their source reads, written out by hand: exact where N divides P.
    gpus = nodes * gpus_per_node
    params -= params % gpus
    if not params:
        return
    layer = max(1, params // 10)
    run = Run(
        params=params,
        largest_layer=layer,
        gpus=gpus,
        nodes=nodes,
        setup=Setup(Accounting.DEEPSPEED, Placement(offload)),
    )
    if stage is Stage.ZERO2:
        expected = 2 * params if offload is not Offload.NONE else 2 * params + int(18 * params / gpus)
    elif offload is Offload.OPTIMIZER_PARAMS:
        expected = 4 * layer
    elif offload is Offload.OPTIMIZER:
        expected = 4 * layer + int(2 * params / gpus)
    else:
        expected = 4 * layer + int(18 * params / gpus)
    assert state_peak_bytes(stage, run) == expected


@pytest.mark.parametrize(
    ("stage", "nodes", "per_node", "offload", "zero_init", "building"),
    [
        # ZeRO-2's max(4 × all GPUs, 16): 4 × 32 = 128 > 16, the processes building the model win.
        (Stage.ZERO2, 4, 8, Offload.OPTIMIZER, True, True),
        (Stage.ZERO2, 1, 2, Offload.OPTIMIZER, True, False),
        (Stage.ZERO3, 4, 8, Offload.OPTIMIZER, True, False),
        # max(4 × 8, 16 / 4): building.
        (Stage.ZERO3, 4, 8, Offload.OPTIMIZER, False, True),
        (Stage.ZERO3, 1, 2, Offload.OPTIMIZER_PARAMS, False, False),
        (Stage.ZERO3, 1, 8, Offload.NONE, True, True),
    ],
)
def test_the_page_says_which_side_of_the_cpu_rule_counts(
    stage: Stage, nodes: int, per_node: int, offload: Offload, zero_init: bool, building: bool
) -> None:
    placement = Placement(offload)
    assert deepspeed.cpu_is_building(stage, nodes, per_node, placement, zero_init) is building
    # The side named is the one the rule took: with a factor of 1 the two sides are 4 B × processes or the state.
    figure = deepspeed.cpu_bytes_per_node(stage, 10**9, 10**8, nodes, per_node, placement, zero_init, 1.0)
    processes = nodes * per_node if stage is not Stage.ZERO3 else per_node
    built = 4 * processes * (10**8 if stage is Stage.ZERO3 and zero_init else 10**9)
    assert (figure == built) is building


@pytest.mark.parametrize(
    ("model", "module", "params"),
    [
        # Llama 3.1 405B: the embedding, 128,256 × 16,384 = 2,101,346,304, is its largest module; a block
        # (3,187,806,208) is no module of DeepSpeed's.
        (ModelName.LLAMA_3_1_405B, 2_101_346_304, 405_853_388_800),
        # GPT-3: the embedding, 50,257 × 12,288 = 617,558,016, beats an MLP matrix (603,979,776 + 49,152).
        (ModelName.GPT_3_175B, 617_558_016, 174_604_259_328),
    ],
)
def test_deepspeeds_zero3_gpu_figure_takes_its_largest_module(model: ModelName, module: int, params: int) -> None:
    # estimate_zero3_model_states_mem_needs: 4 × largest_layer_params + int(18 × P / N), on 64 cards.
    inputs = Inputs(model=model, gpus=64, batch=0, accounting=Accounting.DEEPSPEED)
    row = report(resolve(inputs).run)[3]
    assert row.peak_bytes == 4 * module + 18 * params // 64
    assert any(f"{module:,}" in sentence for sentence in row.differences)


# The estimators end with `int(cpu_mem)`: a float product, truncated, never rounded up. Where a node's
# share of the model is 1/7 or 1/4 of it, the product has a fraction, which DeepSpeed drops.
@pytest.mark.parametrize(
    ("stage", "params", "nodes", "per_node", "offload", "zero_init", "factor", "cpu"),
    [
        # Llama 3 8B, ZeRO-3, weights offloaded, zero.Init, 7 nodes: 8,030,261,248 × 18 B / 7 × 1.5
        # = 30,973,864,813.71…, truncated.
        (Stage.ZERO3, 8_030_261_248, 7, 8, Offload.OPTIMIZER_PARAMS, True, 1.5, 30_973_864_813),
        # Without zero.Init, 4 nodes of 1 card: max(4 × 1, 18 / 4 = 4.5) × 1,000,000,001 × 1.5
        # = 6,750,000,006.75, truncated.
        (Stage.ZERO3, 1_000_000_001, 4, 1, Offload.OPTIMIZER_PARAMS, False, 1.5, 6_750_000_006),
        # A buffer factor of 1.1: ZeRO-2 offloading, 3 weights × max(4 × 1, 16) × 1.1 = 52.8, truncated.
        (Stage.ZERO2, 3, 1, 1, Offload.OPTIMIZER, True, 1.1, 52),
        # ZeRO-2 without offload, 3 weights × 4 B × 1 card × 1.1 = 13.2; ZeRO-3 building a 3-weight
        # layer likewise; 7 weights × 4 B × 2 cards × 1.1 = 61.6.
        (Stage.ZERO2, 3, 1, 1, Offload.NONE, True, 1.1, 13),
        (Stage.ZERO2, 7, 1, 2, Offload.NONE, True, 1.1, 61),
        (Stage.ZERO3, 7, 1, 2, Offload.NONE, False, 1.1, 61),
    ],
)
def test_the_cpu_figure_is_truncated_as_the_estimators_truncate_it(
    stage: Stage,
    params: int,
    nodes: int,
    per_node: int,
    offload: Offload,
    zero_init: bool,
    factor: float,
    cpu: int,
) -> None:
    placement = Placement(offload)
    assert deepspeed.cpu_bytes_per_node(stage, params, params, nodes, per_node, placement, zero_init, factor) == cpu


# (weights of a card's slice, weights on NVMe, bytes of a weight, one process's pinned swap buffers)
SWAP_BUFFERS = [
    # offload_optimizer's 4 buffers each hold a sub-group of min(1e9, slice) fp32 weights:
    # a slice of 5e8 fills half a sub-group, 4 × 5e8 × 4 B = 8e9.
    (500_000_000, False, 2, 8_000_000_000),
    # A slice beyond a sub-group: 4 × 1e9 × 4 B = 1.6e10.
    (3_750_000_000, False, 2, 16_000_000_000),
    # offload_param's 5 buffers of 1e8 weights, 2 B each (1e9), beside the optimizer's 8e9.
    (500_000_000, True, 2, 9_000_000_000),
    # fp32 weights: 5 × 1e8 × 4 B = 2e9; a slice of 1,000 weights: 4 × 1,000 × 4 B = 16,000.
    (1_000, True, 4, 2_000_016_000),
]


@pytest.mark.parametrize(("slice_weights", "on_nvme", "weight_bytes", "pinned"), SWAP_BUFFERS)
def test_zero_infinitys_swap_buffers(slice_weights: int, on_nvme: bool, weight_bytes: int, pinned: int) -> None:
    assert deepspeed.nvme_swap_buffers(slice_weights, on_nvme, weight_bytes) == pinned


def test_deepspeeds_largest_layer_stays_4_bytes_a_weight_with_lora() -> None:
    # Its estimator does not ask what trains: 4 B × the embedding's 525,336,576 weights, LoRA or not.
    inputs = Inputs(model=ModelName.LLAMA_3_8B, batch=0, lora_rank=16, accounting=Accounting.DEEPSPEED)
    row = report(resolve(inputs).run)[3]
    assert row.peak_bytes - row.per_gpu_bytes == 4 * 525_336_576
    assert any("count every weight as one that trains" in sentence for sentence in row.differences)


@pytest.mark.parametrize(
    ("stage", "nodes", "per_node", "offload", "zero_init", "building"),
    [
        # A tie names the state: ZeRO-2 on 4 cards, max(4 × 4, 16) is both sides at once.
        (Stage.ZERO2, 1, 4, Offload.OPTIMIZER, True, False),
        (Stage.ZERO2, 1, 5, Offload.OPTIMIZER, True, True),  # 4 × 5 = 20 > 16
        # Without offload the rule has one side: the processes building the model.
        (Stage.ZERO2, 1, 8, Offload.NONE, True, True),
        (Stage.DP, 1, 8, Offload.OPTIMIZER, True, True),
        # ZeRO-3 without zero.Init, 4 nodes of 1 card: max(4 × 1, 16 / 4 = 4), a tie again.
        (Stage.ZERO3, 4, 1, Offload.OPTIMIZER, False, False),
        (Stage.ZERO3, 2, 1, Offload.OPTIMIZER, False, False),  # 4 × 1 < 16 / 2
        (Stage.ZERO3, 4, 2, Offload.OPTIMIZER, False, True),  # 4 × 2 > 16 / 4
    ],
)
def test_the_side_of_the_cpu_rule_at_its_ties(
    stage: Stage, nodes: int, per_node: int, offload: Offload, zero_init: bool, building: bool
) -> None:
    assert deepspeed.cpu_is_building(stage, nodes, per_node, Placement(offload), zero_init) is building


def test_zero_init_is_the_estimators_default() -> None:
    # e3's zero_init=True: the seed's run on one node of 8 builds one 3.75e9-weight layer at a time,
    # 3.75e9 × 4 B × 8 × 1.5 = 180e9 (the estimators' row above), and keeps the state, not the model.
    none, optimizer = Placement(Offload.NONE), Placement(Offload.OPTIMIZER)
    assert deepspeed.cpu_bytes_per_node(Stage.ZERO3, 30 * 10**9, 3_750_000_000, 1, 8, none) == 180_000_000_000
    assert deepspeed.cpu_rule(Stage.ZERO3, 30 * 10**9, 3_750_000_000, 1, 8, none) == (180_000_000_000, True)
    assert deepspeed.cpu_is_building(Stage.ZERO3, 4, 8, optimizer) is False


def test_the_estimators_have_no_nvme_case() -> None:
    with pytest.raises(ValueError, match=r"^DeepSpeed's estimators have no NVMe case$"):
        deepspeed.cpu_rule(Stage.ZERO3, 10**9, 10**8, 1, 8, Placement(Offload.NVME))
