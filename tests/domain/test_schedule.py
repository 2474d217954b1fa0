"""The pipeline's schedule: 1F1B and interleaved 1F1B, worked by hand and set against torch's own orders."""

from __future__ import annotations

import itertools
import warnings
from fractions import Fraction

import pytest

from app.domain.architecture import ModelName
from app.domain.parallel import Cut
from app.domain.scenario import Inputs, resolve
from app.domain.schedule import (
    BACKWARD,
    DRAWN_SLOTS,
    FORWARD,
    Held,
    Work,
    interleaving_refused,
    microbatch_activations,
    peak_in_flight,
    schedule,
)
from app.domain.stages import Stage


def test_1f1b_with_4_stages_and_8_microbatches_by_hand() -> None:
    # Stage 0 fills the pipeline with F0–F3, waits for B0 to come back (3 stages' forwards and backwards
    # of the others, then its own), alternates, then drains; the last stage alternates from the start.
    plan = schedule(Cut(pp=4, microbatches=8))
    labels = [" ".join(slot.label for slot in slots) for slots in plan.stages]
    assert labels[0] == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7"
    assert labels[3] == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7"
    # B0 leaves stage 3 at 3 + 1 + 2 = 6, stage 2 at 8, stage 1 at 10: stage 0 runs it from 10 to 12.
    b0 = plan.stages[0][4]
    assert (b0.work, b0.microbatch, b0.start, b0.end) == (Work.BACKWARD, 0, Fraction(10), Fraction(12))
    assert plan.makespan == (8 + 4 - 1) * (FORWARD + BACKWARD) == 33
    assert plan.ideal == 24
    assert plan.bubble == Fraction(3, 8) == Cut(pp=4, microbatches=8).bubble


@pytest.mark.parametrize(("stage", "holds"), [(0, 4), (1, 3), (2, 2), (3, 1)])
def test_stage_s_of_1f1b_holds_at_most_min_pp_minus_s_and_m(stage: int, holds: int) -> None:
    cut = Cut(pp=4, microbatches=8)
    assert schedule(cut).peak_chunks(stage) == holds == min(4 - stage, 8)
    assert peak_in_flight(cut, stage) == holds


def test_stage_0_holds_its_activations_from_each_forward_to_its_backward() -> None:
    held = schedule(Cut(pp=4, microbatches=8)).held(0)
    # One more at each of F0–F3's start (0, 1, 2, 3); from 12 each backward ends as the next forward starts
    # (B0 at 12 as F4, …, B3 at 21 as F7): still 4; then one fewer as B4, B5, B6 and B7 end (24, 27, 30, 33).
    assert held == tuple(Held(Fraction(t), n) for t, n in [(0, 1), (1, 2), (2, 3), (3, 4), (24, 3), (27, 2),
                                                           (30, 1), (33, 0)])  # fmt: skip


@pytest.mark.parametrize("m", [1, 2, 3, 5])
def test_fewer_microbatches_than_stages_hold_them_all(m: int) -> None:
    cut = Cut(pp=4, microbatches=m)
    assert schedule(cut).peak_chunks(0) == min(4, m)
    assert schedule(cut).bubble == Fraction(3, m)


@pytest.mark.parametrize(
    ("pp", "m", "bubble", "first"),
    [
        # (pp − 1) / (m · vpp); the first card: pp (1 + (pp − 1) / (pp · vpp)) micro-batches' worth.
        (2, 8, Fraction(1, 16), Fraction(5, 2)),  # 2 × (1 + 1/4)
        (4, 8, Fraction(3, 16), Fraction(11, 2)),  # 4 × (1 + 3/8)
        (4, 4, Fraction(3, 8), Fraction(4)),  # m = pp: every forward before the first backward, 8 chunks of ½
        (8, 16, Fraction(7, 32), Fraction(23, 2)),  # 8 × (1 + 7/16)
    ],
)
def test_interleaved_with_2_chunks_a_card(pp: int, m: int, bubble: Fraction, first: Fraction) -> None:
    cut = Cut(pp=pp, vpp=2, microbatches=m)
    plan = schedule(cut)
    assert plan.bubble == bubble == cut.bubble
    assert Fraction(plan.peak_chunks(0), 2) == first == peak_in_flight(cut, 0)
    if m > pp:
        assert first == pp * (1 + Fraction(pp - 1, pp * 2))


def test_an_interleaved_chunks_passes_take_a_share_of_a_stages() -> None:
    plan = schedule(Cut(pp=2, vpp=2, microbatches=4))
    first = plan.stages[0][0]
    assert (first.label, first.chunk, first.end - first.start) == ("F0", 0, Fraction(1, 2))
    assert {s.end - s.start for s in plan.stages[1] if s.work is Work.BACKWARD} == {1}
    # Chunk 1 of card 0 is virtual stage 2: its forwards start once card 1's chunk 0 has passed them on.
    assert [(s.label, s.chunk) for s in plan.stages[0][:4]] == [("F0", 0), ("F1", 0), ("F0", 1), ("F1", 1)]


@pytest.mark.parametrize(
    ("pp", "vpp", "m"),
    [(p, 1, m) for p in (2, 3, 4, 8) for m in (1, 2, 3, 5, 8, 9)]
    + [(p, v, k * p) for p in (2, 3, 4, 8) for v in (2, 3) for k in (1, 2, 3) if p * v * k * p <= DRAWN_SLOTS],
)
def test_the_closed_forms_agree_with_the_laid_out_schedule(pp: int, vpp: int, m: int) -> None:
    cut = Cut(pp=pp, vpp=vpp, microbatches=m)
    plan = schedule(cut)
    assert [Fraction(plan.peak_chunks(s), vpp) for s in range(pp)] == [peak_in_flight(cut, s) for s in range(pp)]
    # Every pass once, each stage never doing two things at once.
    for slots in plan.stages:
        assert sorted((s.work, s.microbatch, s.chunk) for s in slots) == sorted(
            (w, mb, c) for w in Work for mb in range(m) for c in range(vpp)
        )
        assert all(a.end <= b.start for a, b in itertools.pairwise(slots))
    assert plan.bubble == cut.bubble


@pytest.mark.parametrize("m", [2, 6, 9])
def test_interleaving_asks_for_a_multiple_of_pp_microbatches(m: int) -> None:
    cut = Cut(pp=4, vpp=2, microbatches=m)
    assert interleaving_refused(cut) == (
        f"Interleaved 1F1B takes the micro-batches in groups of pp = 4: {m} micro-batches is not a multiple "
        "of it, so its schedule is not drawn."
    )
    with pytest.raises(ValueError, match="groups of pp = 4"):
        schedule(cut)
    assert interleaving_refused(Cut(pp=4, microbatches=m)) == ""


def test_one_stage_is_no_pipeline() -> None:
    plan = schedule(Cut(microbatches=4))
    assert not plan.pipelined
    assert " ".join(s.label for s in plan.stages[0]) == "F0 B0 F1 B1 F2 B2 F3 B3"
    assert (plan.bubble, plan.makespan, plan.peak_chunks(0)) == (Fraction(0), Fraction(12), 1)


def test_a_schedule_too_large_to_draw_is_not_laid_out() -> None:
    with pytest.raises(ValueError, match="1,024 forwards"):
        schedule(Cut(pp=8, microbatches=128))
    assert peak_in_flight(Cut(pp=64, vpp=2, microbatches=4096), 0) == Fraction(2 * 63 + 64 + 1, 2)


# Llama 3 8B at one sequence of 8,192 tokens, tp = 2 (docs/parallelism.md): a block keeps 822,607,872 B on a
# card; the last stage adds the final norm's input (s·h·2 = 67,108,864 B, outside the tensor-parallel region)
# and the output layer's input (67,108,864 B) and its logits in fp32 ÷ tp (8,192 × 128,256 × 4 / 2 =
# 2,101,346,304 B); the embedding keeps nothing (no dropout).
BLOCK = 822_607_872
LAST = 67_108_864 + 67_108_864 + 8_192 * 128_256 * 4 // 2


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ({"gpus": 8, "pp": 2, "microbatches": 8}, (16 * BLOCK, 16 * BLOCK + LAST)),
        ({"gpus": 16, "pp": 4, "microbatches": 8}, (8 * BLOCK, 8 * BLOCK, 8 * BLOCK, 8 * BLOCK + LAST)),
        ({"gpus": 16, "pp": 4, "vpp": 2, "microbatches": 8}, (8 * BLOCK, 8 * BLOCK, 8 * BLOCK, 8 * BLOCK + LAST)),
        # Two sequences a micro-batch: twice each.
        ({"gpus": 8, "pp": 2, "microbatches": 8, "batch": 2}, (32 * BLOCK, 2 * (16 * BLOCK + LAST))),
    ],
)
def test_a_microbatchs_activations_on_each_stages_card_by_hand(
    query: dict[str, int], expected: tuple[int, ...]
) -> None:
    run = resolve(Inputs(model=ModelName.LLAMA_3_8B, seq=8192, tp=2, **query)).run  # type: ignore[arg-type]
    assert microbatch_activations(run) == expected


@pytest.mark.parametrize(
    ("query", "peak"),
    [
        # The brief's case: the first stage holds min(pp, m) = 2 micro-batches of its 16 blocks.
        ({"gpus": 8, "pp": 2, "microbatches": 8}, 2 * 16 * BLOCK),
        ({"gpus": 16, "pp": 4, "microbatches": 8}, 4 * 8 * BLOCK),
        # Interleaved: 4 (1 + 3/8) = 5.5 micro-batches' worth, the schedule's 11 chunks of half a stage each.
        ({"gpus": 16, "pp": 4, "vpp": 2, "microbatches": 8}, 11 * 8 * BLOCK // 2),
    ],
)
def test_the_first_stages_peak_in_the_schedule_is_the_reports_activations(query: dict[str, int], peak: int) -> None:
    scenario = resolve(Inputs(model=ModelName.LLAMA_3_8B, seq=8192, tp=2, **query))  # type: ignore[arg-type]
    run = scenario.run
    plan = schedule(run.cut)
    held = Fraction(plan.peak_chunks(0), run.cut.vpp) * microbatch_activations(run)[0]
    assert held == peak == scenario.report[Stage.DP].activation_bytes


def test_a_bare_count_keeps_no_activations() -> None:
    run = resolve(Inputs(params=8 * 10**9, gpus=8, pp=2, microbatches=4)).run
    assert microbatch_activations(run) == (0, 0)


def _torch_orders(pp: int, vpp: int, m: int) -> dict[int, list[str]]:
    """torch.distributed.pipelining's order of passes on each rank, built without stages, groups or a run."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's CPU build warns that NumPy is absent
        from torch.distributed.pipelining.schedules import Schedule1F1B, ScheduleInterleaved1F1B
    if vpp == 1:
        single = object.__new__(Schedule1F1B)
        single._num_stages, single._n_microbatches = pp, m
        order = single._get_pipeline_order()
        assert order is not None
        return {r: [str(a) for a in order[r] if a is not None and "REDUCE" not in str(a)] for r in order}
    multi = object.__new__(ScheduleInterleaved1F1B)
    multi.pp_group_size, multi.n_local_stages, multi._n_microbatches = pp, vpp, m
    multi.number_of_rounds = max(1, m // pp)
    multi.microbatches_per_round = m // multi.number_of_rounds
    return {r: [str(a) for a in multi._calculate_single_rank_operations(r) if a is not None] for r in range(pp)}


@pytest.mark.slow  # imports torch
@pytest.mark.parametrize(("pp", "vpp", "m"), [(4, 1, 8), (2, 1, 5), (2, 2, 8), (4, 2, 8), (4, 3, 12), (8, 2, 16)])
def test_the_order_of_passes_is_torchs(pp: int, vpp: int, m: int) -> None:
    plan = schedule(Cut(pp=pp, vpp=vpp, microbatches=m))
    ours = {r: [f"{s.chunk * pp + r}{s.work.value}{s.microbatch}" for s in plan.stages[r]] for r in range(pp)}
    theirs = _torch_orders(pp, vpp, m)
    if vpp == 1:
        # torch 2.13's Schedule1F1B numbers the last rank's forwards from 1 (F1 … F8 for 8 micro-batches) in
        # the order it draws; its runtime does not read that order. Every other rank is ours.
        assert {r: theirs[r] for r in range(pp - 1)} == {r: ours[r] for r in range(pp - 1)}
    else:
        assert theirs == ours
