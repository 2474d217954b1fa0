from __future__ import annotations

import pytest

from app.domain.recipes import MIXED_ADAM, RECIPES, Band, BandSpec, Recipe, RecipeName, custom_recipe


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
