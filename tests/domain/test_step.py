from __future__ import annotations

import itertools
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.architecture import ModelName
from app.domain.communication import Collective
from app.domain.eighths import COLUMNS, Column, model_columns
from app.domain.host import host_report
from app.domain.placement import Offload
from app.domain.presets import PRESETS
from app.domain.recipes import MIXED_ADAM, RECIPES, Band, Recipe, custom_recipe
from app.domain.report import Accounting
from app.domain.scenario import Inputs, resolve
from app.domain.sharding import holders, owned_columns, share
from app.domain.sizing import Run, peak_bytes
from app.domain.stages import Stage
from app.domain.state_bytes import per_gpu_bytes
from app.domain.step import (
    LAST_PHASE,
    PHASES,
    Beat,
    Holding,
    Part,
    from_old_phase,
    peak_so_far,
    step,
)
from app.domain.step_text import detail, explanation
from tests.conftest import examples, full_run_only

GIB = 2**30
SEED = Run()
SEED_COLUMNS = model_columns(SEED.params, None, None)
LLAMA_8B = PRESETS[ModelName("llama-3-8b")]


def _llama(gpus: int, **kwargs: object) -> tuple[Run, tuple[Column, ...]]:
    run = Run(params=LLAMA_8B.params, gpus=gpus, largest_layer=LLAMA_8B.largest_layer, **kwargs)  # type: ignore[arg-type]
    return run, model_columns(run.params, LLAMA_8B.architecture, run.largest_layer)


def _gib(nbytes: int) -> str:
    return f"{nbytes / GIB:.1f}"


recipes = st.sampled_from(list(RECIPES.values())) | st.builds(
    custom_recipe, st.integers(1, 16), st.integers(0, 16), st.integers(0, 16), st.integers(0, 16)
)


@settings(max_examples=examples(150), deadline=None)
@given(
    stage=st.sampled_from(list(Stage)),
    gpus=st.integers(1, 4096),
    params=st.integers(10**3, 10**13),
    recipe=recipes,
    layer_share=st.none() | st.floats(1e-6, 1.0),
    architecture=st.booleans(),
)
def test_the_steps_highest_figure_is_the_tables_peak(
    stage: Stage, gpus: int, params: int, recipe: Recipe, layer_share: float | None, architecture: bool
) -> None:
    if architecture:
        arch = LLAMA_8B.architecture
        assert arch is not None
        run = Run(params=arch.params, gpus=gpus, recipe=recipe, largest_layer=arch.largest_layer)
        columns = model_columns(run.params, arch, run.largest_layer)
    else:
        layer = None if layer_share is None else max(1, int(params * layer_share))
        run = Run(params=params, gpus=gpus, recipe=recipe, largest_layer=layer)
        columns = model_columns(run.params, None, layer)
    phases = step(stage, run, columns)
    assert max(phase.live_bytes for phase in phases) == peak_bytes(stage, run)
    assert peak_so_far(phases, LAST_PHASE) == peak_bytes(stage, run)
    # At rest, and whenever no layer is in hand, a card holds what the table's per-GPU column says.
    assert phases[0].live_bytes == per_gpu_bytes(stage, run.params, run.gpus, run.recipe)


@pytest.mark.parametrize(
    ("query", "activations"),
    [
        # Llama 3 8B, tp = 2, pp = 2, 8 GPUs, 8 micro-batches, s = 8192 (docs/parallelism.md): the first stage's
        # card keeps 2 micro-batches of its 16 blocks at 822,607,872 B a block, its highest moment.
        ({"tp": 2, "pp": 2, "microbatches": 8}, 2 * 16 * 822_607_872),
        # Megatron-LM's own activations on 8 GPUs, TP = PP = 1: 40,644,762,009.6 B, held as whole bytes.
        ({"accounting": Accounting.MEGATRON}, 40_644_762_010),
        # Megatron's, cut: its most loaded shard's, 24,874,038,067.2 B.
        ({"accounting": Accounting.MEGATRON, "tp": 2, "pp": 2, "microbatches": 8}, 24_874_038_068),
    ],
)
@pytest.mark.parametrize("stage", list(Stage))
def test_a_cut_or_megatron_step_is_the_most_loaded_cards_and_peaks_at_the_tables_peak(
    query: dict[str, object], activations: int, stage: Stage
) -> None:
    inputs = Inputs(model=ModelName.LLAMA_3_8B, gpus=8, seq=8192, **query)  # type: ignore[arg-type]
    report = resolve(inputs).report
    phases = report.step(stage)
    assert max(phase.extra.activations for phase in phases) == activations == report[stage].activation_bytes
    assert max(phase.live_bytes for phase in phases) == report[stage].peak_bytes
    assert peak_so_far(phases, LAST_PHASE) == report[stage].peak_bytes


@pytest.mark.parametrize(
    ("stage", "forward", "backward"),
    # Llama 3 8B on 8 GPUs, by hand: a 1/8 slice of 16 B per weight at rest; column 0 holds the
    # embedding (525,336,576 weights, 2 B each as weights, 2 B as gradients).
    [
        (Stage.DP, 8_030_261_248 * 16, 8_030_261_248 * 16),
        (Stage.ZERO2, 8_030_261_248 * 2 + 1_003_782_656 * 14, 8_030_261_248 * 2 + 1_003_782_656 * 14 + 525_336_576 * 2),
        (Stage.ZERO3, 1_003_782_656 * 16 + 525_336_576 * 2, 1_003_782_656 * 16 + 525_336_576 * 4),
    ],
)
def test_llama_8b_on_8_gpus_column_0_by_hand(stage: Stage, forward: int, backward: int) -> None:
    run, columns = _llama(8)
    phases = step(stage, run, columns)
    assert (phases[2].part, phases[2].column, phases[2].beat) == (Part.FORWARD, 0, Beat.COMPUTE)
    assert (phases[47].part, phases[47].column, phases[47].beat) == (Part.BACKWARD, 0, Beat.COMPUTE)
    assert phases[2].live_bytes == forward
    assert phases[47].live_bytes == backward


def test_the_issues_figures_come_out_of_the_run() -> None:
    # The seed on 8 GPUs, largest layer unknown: model states only, 55.9 GiB throughout.
    assert {_gib(p.live_bytes) for p in step(Stage.ZERO3, SEED, SEED_COLUMNS)} == {"55.9"}
    assert {_gib(p.live_bytes) for p in step(Stage.ZERO2, SEED, SEED_COLUMNS)} == {"104.8"}
    # Llama 3 8B: ZeRO-3 peaks at 16.9 GiB and ZeRO-2 at 29.0, as the table says.
    run, columns = _llama(8)
    assert _gib(max(p.live_bytes for p in step(Stage.ZERO3, run, columns))) == "16.9"
    assert _gib(max(p.live_bytes for p in step(Stage.ZERO2, run, columns))) == "29.0"
    # 64 GPUs: 7.0 GiB per card at rest, not the 8-card figure.
    wide = Run(gpus=64)
    assert _gib(step(Stage.ZERO3, wide, SEED_COLUMNS)[0].live_bytes) == "7.0"
    # One GPU: the whole 447.0 GiB, at every phase of every stage.
    one = Run(gpus=1)
    assert {_gib(p.live_bytes) for stage in Stage for p in step(stage, one, SEED_COLUMNS)} == {"447.0"}


def test_405b_on_1024_gpus_at_phase_35_holds_its_slice_and_one_layer() -> None:
    preset = PRESETS[ModelName("llama-3.1-405b")]
    run = Run(params=preset.params, gpus=1024, largest_layer=preset.largest_layer, capacity=80 * 10**9)
    phase = step(Stage.ZERO3, run, model_columns(run.params, preset.architecture, run.largest_layer))[35]
    # Column 4 is all transformer blocks: 16 B for each of 396,341,200 weights in a slice, plus
    # one block's weights and gradients, 4 B × 3,187,703,808.
    assert phase.column == 4
    assert phase.live_bytes == 16 * 396_341_200 + 4 * 3_187_703_808
    assert _gib(phase.live_bytes) == "17.8"


@pytest.mark.parametrize(("stage", "p"), [(Stage.DP, 2), (Stage.ZERO1, 2), (Stage.ZERO2, 2), (Stage.ZERO3, 3)])
def test_the_tally_ends_the_step_at_the_seed_figures(stage: Stage, p: int) -> None:
    phases = step(stage, SEED, SEED_COLUMNS)
    assert len(phases) == PHASES == 53
    assert phases[LAST_PHASE].tally_p == p
    assert step(stage, Run(gpus=1), SEED_COLUMNS)[LAST_PHASE].tally_p == 0


def test_zero3_forward_gathers_the_column_from_its_owner() -> None:
    forward = step(Stage.ZERO3, SEED, SEED_COLUMNS)[7]
    assert (forward.part, forward.column, forward.beat) == (Part.FORWARD, 2, Beat.GATHER)
    assert [forward.holding(card, 2, Band.WEIGHTS) for card in range(8)] == [
        Holding.HELD if card == 2 else Holding.GATHERED for card in range(8)
    ]
    assert [(t.collective, t.band, t.columns) for t in forward.transfers] == [
        (Collective.ALL_GATHER, Band.WEIGHTS, (2,))
    ]
    # The compute still has it; the discard has dropped it.
    assert step(Stage.ZERO3, SEED, SEED_COLUMNS)[8].holding(0, 2, Band.WEIGHTS) is Holding.GATHERED
    assert step(Stage.ZERO3, SEED, SEED_COLUMNS)[9].holding(0, 2, Band.WEIGHTS) is Holding.DASHED


@pytest.mark.parametrize("stage", [Stage.ZERO2, Stage.ZERO3])
def test_gradients_computed_for_another_card_are_sent_not_gathered(stage: Stage) -> None:
    phases = step(stage, SEED, SEED_COLUMNS)
    backward, discard = phases[26], phases[27]
    assert (backward.part, backward.column, backward.beat) == (Part.BACKWARD, 7, Beat.COMPUTE)
    assert [backward.holding(card, 7, Band.GRADIENTS) for card in range(8)] == [Holding.SENT] * 7 + [Holding.HELD]
    assert Collective.REDUCE_SCATTER in {t.collective for t in discard.transfers}
    assert phases[25].holding(0, 7, Band.GRADIENTS) is Holding.DASHED  # the gather: not computed yet


@pytest.mark.parametrize("stage", [Stage.DP, Stage.ZERO1])
def test_stages_that_keep_every_gradient_compute_them_in_place(stage: Stage) -> None:
    backward = step(stage, SEED, SEED_COLUMNS)[26]
    assert {backward.holding(card, 7, Band.GRADIENTS) for card in range(8)} == {Holding.HELD}
    assert backward.transfers == ()


def test_zero2_has_nothing_left_to_do_after_the_backward_pass_and_rings_nothing() -> None:
    phases = step(Stage.ZERO2, SEED, SEED_COLUMNS)
    for phase in phases[49:51]:
        assert phase.transfers == ()
        assert not any(phase.active(card, c, band) for card in range(8) for c in range(COLUMNS) for band in Band)
        assert explanation(phase, MIXED_ADAM, SEED_COLUMNS).startswith(("Nothing to do", "Nothing more to do"))


@pytest.mark.parametrize(("stage", "gpus"), [(Stage.ZERO1, 8), (Stage.ZERO2, 16), (Stage.ZERO3, 4)])
def test_each_card_updates_only_its_own_columns(stage: Stage, gpus: int) -> None:
    update = step(stage, Run(gpus=gpus), SEED_COLUMNS)[51]
    assert update.part is Part.UPDATE
    for card in range(gpus):
        ringed = {c for c in range(COLUMNS) if update.active(card, c, Band.MASTER)}
        assert ringed == set(owned_columns(card, gpus))
        assert not any(update.active(card, c, Band.GRADIENTS) for c in range(COLUMNS))


def test_data_parallelism_updates_everything_everywhere_and_shows_the_all_reduce_as_two_halves() -> None:
    phases = step(Stage.DP, SEED, SEED_COLUMNS)
    assert all(phases[51].active(card, c, Band.MOMENTS) for card in range(8) for c in range(COLUMNS))
    sync = [t for phase in phases if phase.part is Part.GRADIENT_SYNC for t in phase.transfers]
    assert [(t.collective, t.band) for t in sync] == [
        (Collective.REDUCE_SCATTER, Band.GRADIENTS),
        (Collective.ALL_GATHER, Band.GRADIENTS),
    ]


@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("gpus", [1, 3, 8, 16, 1024])
def test_a_phase_rings_cells_exactly_when_its_text_says_something_happens(stage: Stage, gpus: int) -> None:
    run = Run(gpus=gpus)
    for phase in step(stage, run, SEED_COLUMNS)[1:]:
        text = explanation(phase, MIXED_ADAM, SEED_COLUMNS)
        ringed = any(phase.active(card, c, band) for card in (0, gpus - 1) for c in range(COLUMNS) for band in Band)
        assert ringed is not text.startswith("Nothing"), (phase.index, text)
        # Something moves exactly when the text names a collective at work now.
        names = not text.startswith("Nothing") and ("all-gather" in text or "reduce-scatter" in text)
        assert bool(phase.transfers) is names, (phase.index, text)


@pytest.mark.parametrize("recipe", ["fp32-adam", "bf16-adam"])
def test_recipes_without_a_master_copy_never_mention_one(recipe: str) -> None:
    from app.domain.recipes import RecipeName

    chosen = RECIPES[RecipeName(recipe)]
    for stage in Stage:
        for phase in step(stage, Run(recipe=chosen), SEED_COLUMNS):
            assert "master" not in explanation(phase, chosen, SEED_COLUMNS)


@pytest.mark.parametrize(
    ("gpus", "card", "column", "size"),
    [
        (8, 3, 3, Fraction(1)),
        (8, 3, 4, None),
        (16, 5, 2, Fraction(1, 2)),
        (4, 1, 3, Fraction(1)),
        (1024, 0, 0, Fraction(1, 128)),
    ],
)
def test_a_cards_share_of_a_column(gpus: int, card: int, column: int, size: Fraction | None) -> None:
    part = share(card, column, gpus)
    assert (None if part is None else part.size) == size


@given(gpus=st.integers(1, 4096), column=st.integers(0, COLUMNS - 1))
def test_the_holders_of_a_column_share_all_of_it_without_overlap(gpus: int, column: int) -> None:
    parts = [share(card, column, gpus) for card in holders(column, gpus)]
    assert all(part is not None for part in parts)
    assert sum(part.size for part in parts if part is not None) == 1
    # Slices tile the column in order, from its start.
    starts = [p.start for p in parts if p is not None]
    assert starts == sorted(starts)
    assert starts[0] == 0
    assert share(holders(column, gpus)[-1] + 1, column, gpus) is None


@given(gpus=st.integers(1, 4096), card=st.integers(0, 4095))
def test_a_card_is_responsible_for_an_nth_of_the_model(gpus: int, card: int) -> None:
    card %= gpus
    total = sum(part.size for c in owned_columns(card, gpus) if (part := share(card, c, gpus)) is not None)
    assert total == Fraction(COLUMNS, gpus)


@pytest.mark.parametrize("model", [m for m in ModelName if m is not ModelName.CUSTOM])
@pytest.mark.parametrize("gpus", [1, *full_run_only(3, 8, 16), 1024])
@pytest.mark.parametrize("offload", [Offload.NONE, Offload.OPTIMIZER, Offload.OPTIMIZER_PARAMS])
def test_every_phase_says_what_happens_in_at_most_35_words(model: ModelName, gpus: int, offload: Offload) -> None:
    # Read from the back of a room: the longer explanation is one "More" away.
    scenario = resolve(Inputs(model=model, gpus=gpus, offload=offload))
    for stage in Stage:
        for phase in step(stage, scenario.run, scenario.columns):
            said = explanation(phase, scenario.recipe, scenario.columns)
            assert len(said.split()) <= 35, said
            assert len(detail(phase, scenario.columns).split()) <= 60


# The review's question: the drawing shows column k coming from card k, which a student may take for a
# broadcast. "More" says why, and what a real all-gather does; and why a card's memory stays level.
@pytest.mark.parametrize("gpus", [2, 8, 64])
def test_zero3_more_says_how_the_drawn_gather_relates_to_a_real_one(gpus: int) -> None:
    lesson = resolve(Inputs(gpus=gpus))  # the seed's 30B in 8 equal layers: the largest layer is known
    passes = [p for p in step(Stage.ZERO3, lesson.run, lesson.columns) if p.part in (Part.FORWARD, Part.BACKWARD)]
    assert len(passes) == 48
    for phase in passes:
        more = detail(phase, lesson.columns)
        assert "at most 3,750,000,000 weights are assembled at once and the weights it holds stay level" in more
        assert more.endswith("a real run splits each layer across all the cards, each sending its part.")


# The seed's 30B on 8 cards with offload: (offload, stage, phases with PCIe moves, a card's PCIe bytes).
SLICE = 30 * 10**9 // 8
OFFLOADED = [
    (Offload.OPTIMIZER, Stage.ZERO1, [50, 52], 2 * 2 * SLICE),
    (Offload.OPTIMIZER, Stage.ZERO2, [50, 52], 2 * 2 * SLICE),
    # The weights on the host: every pass column's gather fetches its share of the card's slice, twice a step.
    (Offload.OPTIMIZER_PARAMS, Stage.ZERO3, [*range(1, 49, 3), 50], 3 * 2 * SLICE),
    (Offload.OPTIMIZER, Stage.DP, [], 0),
]


@pytest.mark.parametrize(("offload", "stage", "moving", "total"), OFFLOADED)
def test_pcie_crosses_after_the_backward_and_after_the_update(
    offload: Offload, stage: Stage, moving: list[int], total: int
) -> None:
    scenario = resolve(Inputs(offload=offload))
    phases = step(stage, scenario.run, scenario.columns)
    assert [p.index for p in phases if p.pcie] == moving
    assert phases[-1].pcie_bytes == total == host_report(stage, scenario.run).pcie_bytes_per_step
    # Gradients go down first; the tally only grows.
    assert all(a.pcie_bytes <= b.pcie_bytes for a, b in itertools.pairwise(phases))
    if moving:
        (down,) = phases[50].pcie
        assert (down.band, down.down) == (Band.GRADIENTS, True)


def test_the_update_of_offloaded_state_is_the_hosts() -> None:
    scenario = resolve(Inputs(offload=Offload.OPTIMIZER))
    update = step(Stage.ZERO2, scenario.run, scenario.columns)[51]
    assert {Band.MASTER, Band.MOMENTS} <= update.on_host
    assert "host updates the card's slice on its CPU" in explanation(update, scenario.recipe, scenario.columns)
    # The card keeps only what did not move: its whole weights.
    assert update.state_bytes == 2 * 30 * 10**9


@pytest.mark.parametrize(
    ("stage", "titles"),
    [
        (Stage.ZERO1, ("Gradients down to the host", "Weights up from the host, then all-gathered")),
        (Stage.ZERO3, ("Gradients down to the host", "Weights up from the host")),
    ],
)
def test_the_trips_over_pcie_are_phases_of_their_own(stage: Stage, titles: tuple[str, str]) -> None:
    scenario = resolve(Inputs(offload=Offload.OPTIMIZER))
    phases = step(stage, scenario.run, scenario.columns)
    down, update, up = phases[50], phases[51], phases[52]
    assert (down.title, up.title) == titles
    assert "down to its host over PCIe" in explanation(down, scenario.recipe, scenario.columns)
    assert "comes back up from its host over PCIe" in explanation(up, scenario.recipe, scenario.columns)
    # The host updates the optimizer state; the card's weights wait for theirs, and then come up.
    assert not update.active(0, 0, Band.WEIGHTS)
    assert update.active(0, 0, Band.MASTER)
    assert down.active(0, 0, Band.GRADIENTS)
    assert up.active(0, 0, Band.WEIGHTS)


def test_a_backward_phase_the_backward_pass_never_reaches_holds_and_moves_nothing() -> None:
    # The seed's 30B in 8 equal layers, the first 7 frozen: the backward stops at layer 8 (column 7).
    # Phase 47 is the backward's compute over column 0: nothing in hand, nothing gathered, nothing sent.
    run = Run(params=30 * 10**9, largest_layer=3_750_000_000, frozen=7 * 3_750_000_000)
    phases = step(Stage.ZERO3, run, model_columns(run.params, None, run.largest_layer, equal_layers=True))
    last = phases[47]
    assert (last.reached, last.transfers, last.extra.total) == (False, (), 0)
    assert last.holding(0, 0, Band.WEIGHTS) is Holding.HELD  # its own slice, at rest; not gathered
    assert not last.active(0, 0, Band.WEIGHTS)
    assert "never reaches column 0" in explanation(last, MIXED_ADAM, model_columns(run.params, None, None))
    # Phases 25-27, the backward over column 7, gather its 3,750,000,000 weights (1/8 P) and reduce-scatters
    # their gradients: the step's tally is then 1P forward + 1/8 P + 1/8 P.
    assert phases[25].reached
    assert phases[27].reached
    assert phases[-1].tally_p == Fraction(5, 4)


# Llama 3 8B on 8 GPUs, by hand, column 0 (the embedding, 525,336,576 weights) in its three phases of each
# pass: the gather assembles the layer (2 B a weight), the compute adds its gradients (2 B, backward), the
# discard drops both. At rest ZeRO-3 keeps a 1/8 slice of 16 B a weight; ZeRO-2 its 2 B weights whole.
EMBEDDING, LLAMA_8B_WEIGHTS = 525_336_576, 8_030_261_248
ZERO3_REST, ZERO2_REST = 1_003_782_656 * 16, LLAMA_8B_WEIGHTS * 2 + 1_003_782_656 * 14


@pytest.mark.parametrize(
    ("stage", "index", "beat", "nbytes"),
    [
        (Stage.ZERO3, 1, Beat.GATHER, ZERO3_REST + EMBEDDING * 2),
        (Stage.ZERO3, 2, Beat.COMPUTE, ZERO3_REST + EMBEDDING * 2),
        (Stage.ZERO3, 3, Beat.DISCARD, ZERO3_REST),
        (Stage.ZERO3, 46, Beat.GATHER, ZERO3_REST + EMBEDDING * 2),
        (Stage.ZERO3, 47, Beat.COMPUTE, ZERO3_REST + EMBEDDING * 4),
        (Stage.ZERO3, 48, Beat.DISCARD, ZERO3_REST),
        (Stage.ZERO2, 46, Beat.GATHER, ZERO2_REST),
        (Stage.ZERO2, 47, Beat.COMPUTE, ZERO2_REST + EMBEDDING * 2),
        (Stage.ZERO2, 48, Beat.DISCARD, ZERO2_REST),
        (Stage.DP, 47, Beat.COMPUTE, LLAMA_8B_WEIGHTS * 16),
    ],
)
def test_a_columns_gather_compute_and_discard_by_hand(stage: Stage, index: int, beat: Beat, nbytes: int) -> None:
    run, columns = _llama(8)
    phase = step(stage, run, columns)[index]
    assert (phase.column, phase.beat, phase.live_bytes) == (0, beat, nbytes)


def test_the_beats_carry_the_collectives_zero3_gathers_then_sends() -> None:
    phases = step(Stage.ZERO3, SEED, SEED_COLUMNS)
    moved = {p.index: [(t.collective, t.band) for t in p.transfers] for p in phases if p.transfers}
    gathers = [*range(1, 25, 3), *range(25, 49, 3)]
    assert {i: moved[i] for i in gathers} == {i: [(Collective.ALL_GATHER, Band.WEIGHTS)] for i in gathers}
    sends = range(27, 49, 3)
    assert {i: moved[i] for i in sends} == {i: [(Collective.REDUCE_SCATTER, Band.GRADIENTS)] for i in sends}
    assert set(moved) == {*gathers, *sends}


@pytest.mark.parametrize(("stage", "rises", "falls"), [(Stage.ZERO3, 16, 16), (Stage.ZERO2, 8, 8)])
def test_with_the_defaults_a_cards_figure_rises_and_falls_at_the_gathers_and_discards(
    stage: Stage, rises: int, falls: int
) -> None:
    lesson = resolve(Inputs())
    figures = [p.live_bytes for p in lesson.report.step(stage)]
    steps = list(itertools.pairwise(figures))
    assert sum(b > a for a, b in steps) >= rises
    assert sum(b < a for a, b in steps) >= falls
    assert max(figures) == lesson.report[stage].peak_bytes


@pytest.mark.parametrize(
    ("old", "new"),
    [(0, 0), (1, 2), (8, 23), (9, 26), (12, 35), (16, 47), (17, 49), (18, 50), (19, 51), (20, 52)],
)
def test_an_old_links_phase_is_the_nearest_phase_now(old: int, new: int) -> None:
    assert from_old_phase(old) == new
    phases = step(Stage.ZERO3, SEED, SEED_COLUMNS)
    assert phases[new].beat in (None, Beat.COMPUTE)  # a pass column's was its layer in hand


@pytest.mark.parametrize("old", [-1, 21])
def test_an_old_phase_out_of_the_old_step_is_refused(old: int) -> None:
    with pytest.raises(ValueError, match="0 to 20"):
        from_old_phase(old)


def test_a_bare_counts_cut_step_sends_the_most_loaded_cards_weights_by_hand() -> None:
    # 70e9 weights, tp = 8, pp = 2: a card keeps 70e9 / 16 = 4.375e9 (2 B each). ZeRO-3 over dp = 4 cards
    # 8 ranks apart (one a node of 8): k = 4 nodes, g = 1, so nothing inside and (k-1)/n = 3/4 between.
    # Its three collectives (gather, gather again, reduce-scatter) once in each of 8 micro-batches: 24P.
    run = resolve(Inputs(params=70 * 10**9, gpus=64, tp=8, pp=2, microbatches=8)).run
    last = step(Stage.ZERO3, run, SEED_COLUMNS)[LAST_PHASE]
    assert (last.tally_p, last.inside_so_far, last.between_so_far) == (
        Fraction(24),
        Fraction(0),
        24 * 4_375_000_000 * 2 * Fraction(3, 4),
    )


@pytest.mark.parametrize(
    "query",
    [
        {"tp": 2},
        {"pp": 2},
        {"tp": 8, "pp": 4, "microbatches": 8},
        {"tp": 2, "pp": 2, "microbatches": 4},
    ],
)
@pytest.mark.parametrize("stage", list(Stage))
def test_a_cut_steps_tally_is_the_tables_traffic(query: dict[str, int], stage: Stage) -> None:
    # The field test's Llama 3 70B on 64 cards: the step's last phase said the whole model's 295.7 GiB
    # inside and 86.2 between under tp = 2 where the table says the card's 147.8 and 43.1.
    report = resolve(Inputs(model=ModelName.LLAMA_3_70B, gpus=64, **query)).report  # type: ignore[arg-type]
    last, row = report.step(stage)[LAST_PHASE], report[stage]
    assert last.tally_p == row.communication_p
    # The table rounds each collective's bytes up to a whole byte.
    assert 0 <= row.inside_bytes - last.inside_so_far < len(row.links)
    assert 0 <= row.between_bytes - last.between_so_far < len(row.links)


def test_llama_3_70b_on_tp_2_the_steps_bytes_are_the_cards() -> None:
    report = resolve(Inputs(model=ModelName.LLAMA_3_70B, gpus=64, tp=2)).report
    last = report.step(Stage.ZERO3)[LAST_PHASE]
    assert (_gib(int(last.inside_so_far)), _gib(int(last.between_so_far))) == ("147.8", "43.1")


DSV3_CUT = Inputs(model=ModelName.DEEPSEEK_V3, gpus=2048, nodes=256, pp=16, ep=64)
LLAMA_70B_CUT = Inputs(model=ModelName.LLAMA_3_70B, gpus=32, nodes=4, tp=8, pp=2)


@pytest.mark.parametrize("inputs", [DSV3_CUT, LLAMA_70B_CUT], ids=["deepseek-v3-pp16-ep64", "llama-3-70b-tp8-pp2"])
@pytest.mark.parametrize("stage", list(Stage))
def test_only_zero3_gathers_in_a_pass_column_of_a_cut(inputs: Inputs, stage: Stage) -> None:
    """ZeRO-1 and 2 keep the weights whole on the card (its share, with the model cut): only ZeRO-3 gathers.

    The seed's gather-use-discard is ZeRO-3's; under the others the first beat of a column says the weights
    are already on the card, and the last drops nothing unless ZeRO-2 and 3 send the gradients (backward).
    """
    phases = resolve(inputs).report.step(stage)
    passes = [p for p in phases if p.beat is not None]
    assert len(passes) == 48
    gathers = {p.title.split(": ")[1] for p in passes if p.beat is Beat.GATHER}
    discards = {p.part: p.title.split(": ")[1] for p in passes if p.beat is Beat.DISCARD}
    assert gathers == ({"gather"} if stage is Stage.ZERO3 else {"weights here"})
    assert discards[Part.FORWARD] == ("discard" if stage is Stage.ZERO3 else "nothing to drop")
    sends = stage in (Stage.ZERO2, Stage.ZERO3)
    assert discards[Part.BACKWARD] == ("discard" if sends else "nothing to drop")
    # A gather's words agree with its title: under ZeRO-1 and 2 nothing moves, the card's share already whole.
    first = next(p for p in passes if p.beat is Beat.GATHER)
    said = explanation(first, resolve(inputs).run.recipe, resolve(inputs).columns)
    if stage is Stage.ZERO3:
        assert said.startswith("The cards all-gather column 0's weights")
    else:
        assert "each card's share of its weights is already whole on the card" in said
        assert first.transfers == ()
