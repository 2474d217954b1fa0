"""Under mutmut, every test starts with the app's memos empty (docs/testing.md, "Mutation testing").

A memo (`accounting.terms`, `state_bytes.bytes_per_weight`, the terms' own) answers a later test with what
an earlier one computed: mutmut would then see only the first test reach the functions behind it, and its
children, forked from a process whose memos hold the unmutated figures, would never run a mutant there.
Outside mutmut the memos stay, as the app keeps them.
"""

from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(autouse=True)
def _empty_memos_under_mutmut() -> None:
    if "MUTANT_UNDER_TEST" not in os.environ:  # mutmut sets it from its first step on
        return
    for name, module in list(sys.modules.items()):
        if name.startswith("app."):
            for value in vars(module).values():
                clear = getattr(value, "cache_clear", None)
                if callable(clear):
                    clear()
