from __future__ import annotations

import pytest

from app.bands import MIXED_ADAM, Band, BandSpec, Recipe


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
