"""The domain's mutation score per module, from the results `mutmut run` leaves in mutants/.

Run after `mutmut run --max-children 1` (docs/testing.md, "Mutation testing"):

    .venv/bin/python -m bench.mutation

A module's score is killed / (total − equivalent): a mutant no figure can tell from the code is no test's
miss. `EQUIVALENT` names those mutants, each with the reason; docs/testing.md lists them too. A timeout
counts as killed (the mutant hung the tests: they noticed); "no tests" counts as survived.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

KILLED = frozenset({1, 3, 24, -24, 36, 152, 255})
"""mutmut's exit codes for a mutant the tests caught, timeouts included (mutmut/stats.py)."""
SURVIVED = frozenset({0, 5, 33})
"""Survived, and "no tests": no test ran the mutated function."""

EQUIVALENT: dict[str, str] = {
    "app.domain.deepspeed.x_cpu_rule__mutmut_29": "4 × gpus > 17 for > 16: 4 × gpus is a multiple of 4, never 17",
    "app.domain.deepspeed.x_cpu_is_building__mutmut_16": "the side of the rule does not depend on the weights",
    "app.domain.deepspeed.x_cpu_is_building__mutmut_17": "nor on the largest layer",
    "app.domain.change.xǁChangeǁcell_changes__mutmut_3": "gpus >= 1 for > 1: card 0, the only one, owns every weight",
    "app.domain.change.x__kept__mutmut_4": "get(None, 0) for get(name, 0): a card's terms have names of their own",
    "app.domain.change.x__kept__mutmut_8": "each term +1 B in both stages: the comparisons are the same",
    "app.domain.change.x__moved__mutmut_36": "'XXXX'.join of one word or none is that word or nothing",
    **{
        f"app.domain.change.x__moved__mutmut_{n}": "a default for a term one stage lacks: every stage of a count "
        "lists the same terms, so it is never read"
        for n in (39, 41, 42, 47, 49, 50)
    },
    "app.domain.change.x__sentence__mutmut_7": "equal bytes per weight: no term changed, as stages only split more",
    "app.domain.host.x__pcie__mutmut_13": "a count with offload has the recipe's own gradients in its terms",
    "app.domain.host.x_host_report__mutmut_48": "= for += under ZeRO-Infinity: nothing else is pinned, all is on NVMe",
    "app.domain.recipes.xǁRecipeǁ__post_init____mutmut_30": "hash(None): all recipes hash alike, equality decides",
    "app.domain.recipes.xǁRecipeǁphrase__mutmut_10": "'XXXX'.join of one name or none is that name or nothing",
    **{
        f"app.domain.recipes.{name}": "zip without strict: every caller passes one item per band"
        for name in (
            "x__recipe__mutmut_13",
            "x__recipe__mutmut_16",
            "x__recipe__mutmut_17",
            "x_custom_recipe__mutmut_49",
            "x_custom_recipe__mutmut_53",
            "x_custom_recipe__mutmut_54",
        )
    },
    "app.domain.placement.x_cluster_of__mutmut_61": "Cluster's default gpus_per_node is the same 8",
    "app.domain.step_text.x__passes__mutmut_1": "or for and: every pass has a column, and no other phase has one",
    "app.domain.step_text.x_explanation__mutmut_5": "the same: a column is given exactly to the passes",
    "app.domain.units.x__digits__mutmut_9": "[0-9]{1} for [0-9]: the same expression",
    "app.domain.units.x__whole__mutmut_9": "a form needing the text '{-1}', which no number has",
    "app.domain.units.x__scientific__mutmut_44": r"exponents of 6 and up then take \.[0-9]{1,6}0{0,0}: the same",
    "app.domain.units.x__scientific__mutmut_56": "(?:9) for 9: the same expression",
    "app.domain.units.x__scientific__mutmut_60": "no run of exponents has exactly two; one in a group reads the same",
    "app.domain.units.x__fixed_of__mutmut_19": "numerator <= 0: a zero's digits are all 0, so no sign either way",
    "app.domain.units.x__fixed_of__mutmut_20": "numerator < 1 on whole numbers is <= 0, likewise",
    "app.domain.units.x__fixed_of__mutmut_22": "strip('XX0XX') strips X and 0: digits have no X",
    "app.domain.units.x__fixed_of__mutmut_34": "one more leading zero, which int() drops",
    "app.domain.units.x__amount__mutmut_26": "underscores kept: Decimal reads '1_000' as 1000",
    "app.domain.units.x_per_weight__mutmut_25": "partition for rpartition: the figure has one '.' at most",
    "app.domain.units.x_per_weight__mutmut_31": "rstrip('XX0XX') strips X and 0: decimals have no X",
    "app.domain.units.x_count_label__mutmut_48": "rstrip('XX0XX') on digits, likewise",
    "app.domain.units.x_percent__mutmut_27": "rstrip('XX0XX') on digits, likewise",
    "app.domain.units.x_percent__mutmut_28": "rstrip('XX.XX') strips X and '.': a figure has no X",
    "app.domain.units.x_parse_count__mutmut_19": "unreachable: the grammar admits whole counts only",
    "app.domain.units.x_parse_count__mutmut_20": "the same unreachable branch",
}
"""Mutants that change no figure the code can show, each with the reason (docs/testing.md lists them too)."""


def results(folder: Path) -> dict[str, dict[str, int | None]]:
    """Each mutated module's mutants and their exit codes (None: not run yet), by module name."""
    found: dict[str, dict[str, int | None]] = {}
    for meta in sorted(folder.glob("app/domain/*.py.meta")):
        codes = json.loads(meta.read_text())["exit_code_by_key"]
        if codes:
            found[meta.name.removesuffix(".py.meta")] = codes
    return found


def score(codes: dict[str, int | None]) -> Counter[str]:
    """A module's killed, survived, equivalent, not-run and total counts."""
    counts: Counter[str] = Counter(total=len(codes))
    for name, code in codes.items():
        if name in EQUIVALENT:
            counts["equivalent"] += 1
        elif code in KILLED:
            counts["killed"] += 1
        elif code in SURVIVED:
            counts["survived"] += 1
        else:  # not run yet, suspicious, segfault: neither a kill nor a miss
            counts["other"] += 1
    return counts


def table(found: dict[str, dict[str, int | None]]) -> str:
    """The Markdown table docs/testing.md shows: one row per module, the score in percent."""
    lines = ["| module | killed | survived | equivalent | total | score |", "| --- | --- | --- | --- | --- | --- |"]
    for module, codes in found.items():
        c = score(codes)
        judged = c["total"] - c["equivalent"]
        percent = f"{100 * c['killed'] / judged:.1f} %" if judged else "–"
        other = f" ({c['other']} not run)" if c["other"] else ""
        lines.append(
            f"| {module} | {c['killed']} | {c['survived']}{other} | {c['equivalent']} | {c['total']} | {percent} |"
        )
    return "\n".join(lines)


def survivors(found: dict[str, dict[str, int | None]], module: str) -> list[str]:
    """The surviving, non-equivalent mutants of one module, for `mutmut show`."""
    return [name for name, code in found.get(module, {}).items() if code in SURVIVED and name not in EQUIVALENT]


def main(argv: list[str] | None = None) -> int:
    """Print the score table, or one module's survivors."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--mutants", type=Path, default=Path("mutants"), help="mutmut's folder (default: mutants)")
    parser.add_argument("--survivors", metavar="MODULE", help="list one module's survivors instead, e.g. host")
    args = parser.parse_args(argv)
    found = results(args.mutants)
    if not found:
        print(f"no results in {args.mutants}/: run `mutmut run --max-children 1` first")
        return 1
    print("\n".join(survivors(found, args.survivors)) if args.survivors else table(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
