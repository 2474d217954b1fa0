"""The benchmarks run and report; their targets are judged by running them, not here (no timing in unit tests)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys

import pytest

from bench import render


def test_the_render_benchmark_reports_every_request_and_its_exit_code_tells_the_misses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    results = render.run(rounds=2)
    assert [m.name for m in results] == [
        "baseline /api/stages",
        "full page",
        "full page, new run",
        "htmx fragment",
        "api layout",
    ]
    assert all(m.seconds > 0 and 0 < m.gzip_bytes < m.raw_bytes for m in results)
    code = render.main(["--rounds", "2"])
    out = capsys.readouterr().out
    verdicts = re.findall(r"^(ok  |MISS) (full page time|new run time|full page gzip)", out, re.MULTILINE)
    assert [name for _, name in verdicts] == ["full page time", "new run time", "full page gzip"]
    assert code == (1 if any(v == "MISS" for v, _ in verdicts) else 0)


def test_the_split_of_a_never_seen_run_times_each_step_where_the_route_calls_it() -> None:
    # A step the route stopped calling by that name would time nothing: its figure would be 0.
    parts = render.split(12)
    assert list(parts) == ["view", "template", "compression", "other", "total"]
    assert all(parts[name] > 0 for name in ("view", "template", "compression", "other"))
    assert parts["total"] > parts["view"] + parts["template"]


SERVE_FIGURES = [
    "cached fragment",
    "static asset",
    "never-seen run",
    "300 connections on the fragment",
    "1,000 connections",
    "slowloris connections",
    "first load",
    "click to swapped grid",
    "RSS per worker",
    "ready after start",
]


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (apt-get install wrk; .ci/run does)")
def test_the_serving_benchmark_runs_quickly_and_prints_every_figure_with_its_target() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bench.serve", "--quick"], capture_output=True, text=True, check=False, timeout=300
    )
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for figure in SERVE_FIGURES:
        line = next((line for line in lines if figure in line), None)
        assert line is not None, figure
        assert line.startswith(("ok  ", "MISS")), line
        assert "(target " in line, line
