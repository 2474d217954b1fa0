from __future__ import annotations

import dataclasses
import re

import pytest

from app.domain.recipes import MIXED_ADAM, RECIPES, Band, BandSpec, Recipe, RecipeName, _recipe, custom_recipe


def test_mixed_adam_is_the_seed_recipe() -> None:
    assert [MIXED_ADAM.nbytes(band) for band in Band] == [2, 2, 4, 8]
    assert MIXED_ADAM.total == 16
    assert MIXED_ADAM.spec(Band.MASTER).precision == "fp32"


def test_recipe_must_list_every_band_in_order() -> None:
    specs = tuple(reversed(MIXED_ADAM.specs))
    with pytest.raises(ValueError, match="every band once"):
        Recipe("backwards", "Backwards", specs)


def test_recipe_rejects_negative_bytes() -> None:
    specs = (*MIXED_ADAM.specs[:3], BandSpec(Band.MOMENTS, "Moments", "fp32", -1, "impossible"))
    with pytest.raises(ValueError, match="negative"):
        Recipe("broken", "Broken", specs)


@pytest.mark.parametrize(
    ("name", "sizes"),
    [
        ("mixed-adam", [2, 2, 4, 8]),
        ("fp32-adam", [4, 4, 0, 8]),
        ("bf16-adam", [2, 2, 0, 4]),
        ("mixed-sgd", [2, 2, 4, 4]),
        ("adam-8bit", [2, 2, 4, 2]),
    ],
)
def test_recipe_presets(name: str, sizes: list[int]) -> None:
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
    assert [(s.band, s.label, s.precision, s.nbytes, s.description, s.noun) for s in recipe.specs] == [
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
        Recipe("x", "X", specs[::-1])
    negative = (*specs[:3], dataclasses.replace(specs[3], nbytes=-1))
    with pytest.raises(ValueError, match=r"^a band cannot cost negative bytes$"):
        Recipe("x", "X", negative)


def test_nothing_is_named_where_no_band_is_stored() -> None:
    assert custom_recipe(2, 2, 0, 0).phrase((Band.MASTER, Band.MOMENTS)) == "nothing"
    assert MIXED_ADAM.phrase((Band.MASTER,)) == "the fp32 master copy"


def test_a_preset_is_built_from_its_five_words_per_band() -> None:
    # The presets are built when the module is imported: the builder is called here, where a test sees it.
    words = ("Weights", "bf16", 2, "used", "the weights")
    recipe = _recipe("r", "R", words, words, words, words)
    assert (recipe.name, recipe.title, [s.band for s in recipe.specs]) == ("r", "R", list(Band))
    assert recipe.spec(Band.MOMENTS) == BandSpec(Band.MOMENTS, *words)
