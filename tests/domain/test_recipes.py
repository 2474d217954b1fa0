from __future__ import annotations

import dataclasses
import re
from fractions import Fraction

import pytest

from app.domain.architecture import ModelName
from app.domain.recipes import (
    BF16,
    FP8,
    FP32,
    INT8_BLOCKWISE,
    MIXED_ADAM,
    NF4_DOUBLE_QUANT,
    RECIPES,
    Band,
    BandSpec,
    Dtype,
    Optimizer,
    Recipe,
    RecipeName,
    _recipe,
    bytes_a_weight,
    custom_recipe,
    recipes_help,
)
from app.domain.scenario import Inputs, resolve


def test_mixed_adam_is_the_seed_recipe() -> None:
    assert [MIXED_ADAM.nbytes(band) for band in Band] == [2, 2, 4, 8]
    assert MIXED_ADAM.total == 16
    assert MIXED_ADAM.spec(Band.MASTER).precision == "fp32"


def test_recipe_must_list_every_band_in_order() -> None:
    specs = tuple(reversed(MIXED_ADAM.specs))
    with pytest.raises(ValueError, match="every band once"):
        Recipe("backwards", "Backwards", Optimizer.ADAM, specs)


def test_recipe_rejects_negative_bytes() -> None:
    specs = (*MIXED_ADAM.specs[:3], BandSpec(Band.MOMENTS, "Moments", FP32, -1, "impossible"))
    with pytest.raises(ValueError, match="negative"):
        Recipe("broken", "Broken", Optimizer.ADAM, specs)


@pytest.mark.parametrize(
    ("name", "sizes"),
    [
        ("mixed-adam", [2, 2, 4, 8]),
        ("fp32-adam", [4, 4, 0, 8]),
        ("bf16-adam", [2, 2, 0, 4]),
        ("mixed-sgd", [2, 2, 4, 4]),
        # bitsandbytes: two int8 moments and an fp32 absmax per block of 256 for each: 2 + 2 * 4 / 256.
        ("adam-8bit", [2, 2, 4, Fraction(203125, 100000)]),
        ("fp8-adam", [2, 2, 4, 8]),
        # QLoRA section 3: 4 + 8/64 + 32/(64 * 256) = 4.126953125 bits, over 8: 0.515869140625 B.
        ("qlora-nf4", [Fraction(515869140625, 10**12), 2, 0, 8]),
    ],
)
def test_recipe_presets(name: str, sizes: list[Fraction | int]) -> None:
    assert [RECIPES[RecipeName(name)].nbytes(band) for band in Band] == sizes


def test_mixed_adam_is_the_papers_k_equals_12() -> None:
    assert MIXED_ADAM.nbytes(Band.MASTER) + MIXED_ADAM.nbytes(Band.MOMENTS) == 12


def test_custom_recipe() -> None:
    recipe = custom_recipe(2, 2, 0, 1)
    assert [recipe.nbytes(band) for band in Band] == [2, 2, 0, 1]
    assert recipe.total == 5


@pytest.mark.parametrize(("sizes", "message"), [((0, 2, 4, 8), "at least 1 byte"), ((2, 2, 4, 17), "0 to 16")])
def test_custom_recipe_bounds(sizes: tuple[int, int, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        custom_recipe(*sizes)


def test_a_custom_recipe_names_its_bands_by_their_bytes() -> None:
    recipe = custom_recipe(2, 4, 4, 8)
    assert (recipe.name, recipe.title) == ("custom", "Custom (2/4/4/8)")
    assert [(s.band, s.label, s.precision, int(s.nbytes), s.description, s.noun) for s in recipe.specs] == [
        (Band.WEIGHTS, "Weights", "2 B", 2, "as entered", "the weights (2 B)"),
        (Band.GRADIENTS, "Gradients", "4 B", 4, "as entered", "the gradients (4 B)"),
        (Band.MASTER, "Master copy", "4 B", 4, "as entered", "the master copy (4 B)"),
        (Band.MOMENTS, "Adam moments", "8 B", 8, "as entered", "the adam moments (8 B)"),
    ]


@pytest.mark.parametrize(
    ("sizes", "message"),
    [
        ((2, 2, 4, 17), "each band costs 0 to 16 bytes per weight"),
        ((2, -1, 4, 8), "each band costs 0 to 16 bytes per weight"),
        ((0, 2, 4, 8), "the weights band costs at least 1 byte per weight"),
    ],
)
def test_a_custom_recipe_out_of_range_says_which_rule(sizes: tuple[int, int, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=rf"^{re.escape(message)}$"):
        custom_recipe(*sizes)


def test_a_recipe_is_every_band_once_at_no_negative_cost() -> None:
    specs = MIXED_ADAM.specs
    with pytest.raises(ValueError, match=r"^a recipe lists every band once, in Band order$"):
        Recipe("x", "X", Optimizer.ADAM, specs[::-1])
    negative = (*specs[:3], dataclasses.replace(specs[3], copies=-1))
    with pytest.raises(ValueError, match=r"^a band cannot cost negative bytes$"):
        Recipe("x", "X", Optimizer.ADAM, negative)


def test_nothing_is_named_where_no_band_is_stored() -> None:
    assert custom_recipe(2, 2, 0, 0).phrase((Band.MASTER, Band.MOMENTS)) == "nothing"
    assert MIXED_ADAM.phrase((Band.MASTER,)) == "the fp32 master copy"


def test_a_preset_is_built_from_its_five_words_per_band() -> None:
    # The presets are built when the module is imported: the builder is called here, where a test sees it.
    words = ("Weights", BF16, 1, "used", "the weights")
    recipe = _recipe("r", "R", Optimizer.SGD_MOMENTUM, words, words, words, words, note="n")
    assert (recipe.name, recipe.title, [s.band for s in recipe.specs]) == ("r", "R", list(Band))
    assert (recipe.optimizer, recipe.note, recipe.total) == (Optimizer.SGD_MOMENTUM, "n", Fraction(8))
    assert recipe.spec(Band.MOMENTS) == BandSpec(Band.MOMENTS, *words)


def test_every_choice_but_custom_is_a_declared_recipe_and_every_recipe_a_choice() -> None:
    # RECIPES is built through RecipeName, so a recipe without a member fails at import; this catches the other way.
    assert [*RECIPES, RecipeName.CUSTOM] == list(RecipeName)
    assert all(RecipeName(recipe.name) is name for name, recipe in RECIPES.items())


@pytest.mark.parametrize(
    ("dtype", "bits"),
    [
        (FP32, 32),
        (BF16, 16),
        # bitsandbytes' Optimizer2State.init_state: blocks = ceil(n / 256), one fp32 absmax per block.
        (INT8_BLOCKWISE, 8.125),
        # Dettmers et al. 2023, section 3: "4.127 bits per parameter" with double quantization.
        (NF4_DOUBLE_QUANT, 4.126953125),
    ],
)
def test_a_formats_bits_count_its_block_constants(dtype: Dtype, bits: float) -> None:
    assert dtype.bits == Fraction(bits)


def test_qlora_double_quantization_is_the_papers_4_127_bits() -> None:
    # 4 + 1/8 + 1/512 = 2113/512 bits: the paper's 4.127 to three decimals; over 8 bits a byte, 2113/4096 B.
    assert NF4_DOUBLE_QUANT.bits == Fraction(2113, 512)
    assert round(float(NF4_DOUBLE_QUANT.bits), 3) == 4.127
    assert RECIPES[RecipeName.QLORA_NF4].nbytes(Band.WEIGHTS) == Fraction(2113, 4096)


@pytest.mark.parametrize(
    ("name", "optimizer", "master", "trained"),
    [
        ("mixed-adam", Optimizer.ADAM, True, BF16),
        ("fp32-adam", Optimizer.ADAM, False, FP32),
        ("bf16-adam", Optimizer.ADAM, False, BF16),
        ("mixed-sgd", Optimizer.SGD_MOMENTUM, True, BF16),
        ("adam-8bit", Optimizer.ADAM_8BIT, True, BF16),
        ("fp8-adam", Optimizer.ADAM, True, BF16),
        ("qlora-nf4", Optimizer.ADAM, False, BF16),
    ],
)
def test_a_recipes_properties(name: str, optimizer: Optimizer, master: bool, trained: Dtype) -> None:
    recipe = RECIPES[RecipeName(name)]
    assert (recipe.optimizer, recipe.has_master, recipe.trained) == (optimizer, master, trained)


@pytest.mark.parametrize(
    ("nbytes", "shown"),
    [(Fraction(2), "2"), (Fraction(0), "0"), (Fraction(65, 32), "2.03"), (Fraction(2113, 4096), "0.516")],
)
def test_bytes_a_weight_are_whole_as_they_are_and_a_fraction_to_three_figures(nbytes: Fraction, shown: str) -> None:
    assert bytes_a_weight(nbytes) == shown


@pytest.mark.parametrize(
    ("name", "precisions", "sizes"),
    [
        ("adam-8bit", ["bf16", "bf16", "fp32", "int8 ×2"], "2/2/4/2.03"),
        ("fp8-adam", ["bf16", "bf16", "fp32", "fp32 ×2"], "2/2/4/8"),
        ("qlora-nf4", ["nf4", "bf16", "none", "fp32 ×2"], "0.516/2/0/8"),
    ],
)
def test_the_new_recipes_legend_words(name: str, precisions: list[str], sizes: str) -> None:
    recipe = RECIPES[RecipeName(name)]
    assert ([s.precision for s in recipe.specs], recipe.sizes) == (precisions, sizes)


def test_fp8_and_qlora_say_what_they_save_and_what_is_left_out() -> None:
    fp8 = RECIPES[RecipeName.FP8_ADAM]
    assert fp8.matmul == FP8
    assert ("16 B a weight" in fp8.note, "not this state" in fp8.note) == (True, True)
    qlora = RECIPES[RecipeName.QLORA_NF4]
    assert ("Give a LoRA rank" in qlora.without_lora, "1.48 B an adapter weight" in qlora.with_lora) == (True, True)
    # The note's figure is the hand's: bf16's 2 B less NF4's 2113/4096 B, to three figures.
    assert bytes_a_weight(2 - Fraction(2113, 4096)) == "1.48"


def test_the_help_lists_every_recipe_from_its_declaration() -> None:
    assert recipes_help() == (
        "`mixed-adam` 2/2/4/8 (K = 12), `fp32-adam` 4/4/0/8, `bf16-adam` 2/2/0/4, `mixed-sgd` 2/2/4/4, "
        "`adam-8bit` 2/2/4/2.03, `fp8-adam` 2/2/4/8, `qlora-nf4` 0.516/2/0/8, or `custom` with the four "
        "`*_bytes` below"
    )


QLORA_8B = Inputs(model=ModelName.LLAMA_3_8B, recipe=RecipeName.QLORA_NF4)


@pytest.mark.parametrize(
    ("inputs", "said", "not_said"),
    [
        # No rank: every weight is drawn as if it trains, and the note asks for a rank.
        (QLORA_8B, "as if NF4 weights could train", "1.48 B an adapter weight"),
        # A rank: what the app counts of the adapters and leaves out, and no request for a rank.
        (dataclasses.replace(QLORA_8B, lora_rank=16), "1.48 B an adapter weight", "Give a LoRA rank"),
    ],
)
def test_qlora_says_only_what_applies_to_the_run(inputs: Inputs, said: str, not_said: str) -> None:
    (note,) = (n for n in resolve(inputs).notes if n.startswith("QLoRA's NF4 weights"))
    assert said in note
    assert not_said not in note
