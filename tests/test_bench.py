"""The benchmark runs and reports; its targets are judged by running it, not here (no timing in unit tests)."""

from __future__ import annotations

import pytest

from bench import render


def test_benchmark_runs_and_reports_every_request(capsys: pytest.CaptureFixture[str]) -> None:
    results = render.run(rounds=2)
    assert [m.name for m in results] == [
        "baseline /api/stages",
        "full page",
        "full page, new run",
        "htmx fragment",
        "api layout",
    ]
    assert all(m.seconds > 0 and 0 < m.gzip_bytes < m.raw_bytes for m in results)
    render.main(["--rounds", "2"])
    out = capsys.readouterr().out
    assert "full page time" in out
    assert "new run time" in out
    assert "full page gzip" in out
