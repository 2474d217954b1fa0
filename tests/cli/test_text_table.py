"""`zero-bands table`: the same figures in a terminal, aligned."""

from __future__ import annotations

import pytest

from app import cli


def _table(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["table", *argv])
    assert exit_info.value.code == 0
    return capsys.readouterr().out.splitlines()


def test_zero_paper_figure_1_in_the_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _table(capsys, "--params", "7.5e9", "--gpus", "64", "--units", "GB", "--capacity", "32GB")
    assert lines[0] == "Custom model: 7,500,000,000 weights on 64 GPUs, Mixed-precision Adam, card 32.0 GB"
    name_width = len("Data parallelism")
    rows = {line[:name_width].strip(): line[name_width:].split() for line in lines[4:8]}
    assert rows["Data parallelism"][:3] == ["16.00", "120.0", "GB"]
    assert rows["ZeRO-1"][:3] == ["4.19", "31.4", "GB"]
    assert rows["ZeRO-2"][:3] == ["2.22", "16.6", "GB"]
    assert rows["ZeRO-3"][:3] == ["0.25", "1.9", "GB"]
    assert "no" in rows["Data parallelism"]
    assert "yes" in rows["ZeRO-3"]


def test_columns_are_aligned(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _table(capsys, "--model", "llama-3-70b", "--gpus", "64", "--capacity", "80GiB")
    header, rows = lines[2], lines[4:8]
    assert all(len(row) == len(header) for row in rows)
    # Figures are right-aligned under their header.
    end = header.index("per GPU") + len("per GPU")
    assert all(row[end - 1] == "B" for row in rows)
    assert lines[-1].startswith("ZeRO-3: Largest layer 1,050,673,152 weights")


def test_defaults_are_the_seed(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _table(capsys)
    assert "447.0 GiB" in lines[4]
    assert "3P = 167.6 GiB" in lines[7]


def test_bad_option_gives_a_message_and_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["table", "--params", "7.5 Q", "--gpus", "0"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "The option “params” should be a number of weights" in err
    assert "The option “gpus” is not valid: input should be greater than or equal to 1." in err


def test_one_gpu_reads_in_the_singular_and_moves_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    lines = _table(capsys, "--gpus", "1")
    assert lines[0] == "30B weights in 8 equal layers: 30,000,000,000 weights on 1 GPU, Mixed-precision Adam"
    assert all("0P = 0 GiB" in row for row in lines[4:8])
