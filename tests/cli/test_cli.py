from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import cli


def test_defaults_serve_on_localhost_8000() -> None:
    args = cli.parser().parse_args([])
    assert (args.host, args.port, args.root_path) == ("127.0.0.1", 8000, "")


def test_host_port_and_prefix() -> None:
    args = cli.parser().parse_args(["--host", "0.0.0.0", "--port", "9000", "--root-path", "/tools/zero"])
    assert (args.host, args.port, args.root_path) == ("0.0.0.0", 9000, "/tools/zero")


@pytest.mark.parametrize("port", ["eighty", "70000", "-1"])
def test_bad_port_is_refused_with_a_message(port: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.parser().parse_args(["--port", port])
    assert exit_info.value.code == 2
    assert "--port" in capsys.readouterr().err


def test_bad_frame_ancestors_stops_the_command_with_a_message(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ZERO_BANDS_FRAME_ANCESTORS", "https://a.example; script-src *")
    with pytest.raises(SystemExit) as exit_info:
        cli.main([])
    assert exit_info.value.code == 2
    assert "ZERO_BANDS_FRAME_ANCESTORS" in capsys.readouterr().err


def test_a_bare_g_in_the_table_command_names_both_readings(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["table", "--capacity", "80G"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "zero-bands table: The option “capacity” is ambiguous: “80G” could be 80 GB (80×10⁹ bytes)"
        " or 80 GiB (80×2³⁰ bytes); write 80GB or 80GiB.\n"
    )


@pytest.mark.parametrize(
    ("argv", "first_line"),
    [
        (["--params", "7.5e+09"], "Custom model: 7,500,000,000 weights"),
        (["--params", "7,500,000,000"], "Custom model: 7,500,000,000 weights"),
        (["--params", "128e9"], "Custom model: 128,000,000,000 weights"),
        (["--capacity", "32e9", "--units", "GB"], "card 32.0 GB"),
    ],
)
def test_the_table_command_reads_pasted_numbers(
    argv: list[str], first_line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["table", *argv])
    assert exit_info.value.code == 0
    assert first_line in capsys.readouterr().out.splitlines()[0]


def test_the_table_command_counts_as_megatron_does(capsys: pytest.CaptureFixture[str]) -> None:
    # Megatron-LM's figures for Llama 3 8B on 8 GPUs (tests/domain/test_accounting.py): 144,544,702,464 B
    # without its distributed optimizer, 60,226,959,360 B with it, shown in GB to one decimal.
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["table", "--model", "llama-3-8b", "--accounting", "megatron", "--units", "GB"])
    assert exit_info.value.code == 0
    rows = {line[:16].strip(): line[16:].split()[:2] for line in capsys.readouterr().out.splitlines()}
    assert rows["Data parallelism"] == ["18.00", "144.5"]
    assert rows["ZeRO-1"] == ["7.50", "60.2"]


@pytest.mark.parametrize(
    ("asked", "redis_url", "workers"),
    [(None, "", 1), (None, "redis://localhost:6379/0", os.cpu_count() or 1), (3, "", 3), (3, "redis://r:6379/0", 3)],
)
def test_one_worker_keeps_live_sessions_in_memory_and_redis_lets_every_core_serve(
    asked: int | None, redis_url: str, workers: int
) -> None:
    assert cli.workers_for(asked, redis_url) == workers


def test_serving_options_default_to_no_access_log() -> None:
    args = cli.parser().parse_args([])
    assert (args.workers, args.redis_url, args.access_log) == (None, None, False)
    args = cli.parser().parse_args(["--workers", "3", "--limit-concurrency", "50"])
    assert (args.workers, args.limit_concurrency) == (3, 50)


def test_the_header_deadline_is_the_proxys_not_an_option_that_would_promise_it() -> None:
    # uvicorn has no deadline for a request's headers: docs/deploying.md sets it in the proxy.
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--header-timeout", "5"])


@pytest.mark.parametrize(
    ("option", "value"),
    [("--workers", "0"), ("--workers", "two"), ("--limit-concurrency", "-5"), ("--port", "70000")],
)
def test_bad_serving_options_are_refused(option: str, value: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.parser().parse_args([option, value])
    assert exit_info.value.code == 2
    assert option in capsys.readouterr().err


def test_an_escape_sequence_in_an_option_is_shown_not_sent(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["table", "--params", "\x1b[2J\x1b[31mred"])
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert "\\x1b[2J" in err


@pytest.mark.slow  # the real command in a process of its own
def test_the_table_into_a_closed_pipe_exits_quietly() -> None:
    # As `zero-bands table | head -1` once head has gone: the reading end is closed before the first
    # write. Python's default is a BrokenPipeError traceback on stderr and exit 120.
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "app.cli", "table", "--gpus", "64"],
            stdout=write_end, stderr=subprocess.PIPE, text=True, check=False, timeout=60,
        )  # fmt: skip
    finally:
        os.close(write_end)
    assert result.stderr == ""
    assert result.returncode == 0


def test_a_public_url_is_taken_without_its_final_slash() -> None:
    assert cli.parser().parse_args([]).public_url is None
    args = cli.parser().parse_args(["--public-url", "https://zero.example.edu/tools/zero/"])
    assert args.public_url == "https://zero.example.edu/tools/zero"


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("ftp://files.example", "'ftp://files.example' is not an http or https address"),
        ("192.168.1.20:8000", "is not an http or https address"),
        ("http://a.example/?x=1", "has a query, fragment or user name"),
    ],
)
def test_a_public_url_students_could_not_open_is_refused(
    value: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.parser().parse_args(["--public-url", value])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --public-url" in err
    assert said in err


def test_the_help_names_the_public_url() -> None:
    assert "--public-url URL" in cli.parser().format_help()
    assert "ZERO_BANDS_PUBLIC_URL" in cli.parser().format_help()


def test_the_allowed_hosts_are_an_option_and_no_host_name_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.parser().parse_args([]).allowed_hosts is None
    assert cli.parser().parse_args(["--allowed-hosts", "zero.example.edu,*.school.example"]).allowed_hosts == (
        "zero.example.edu,*.school.example"
    )
    assert "ZERO_BANDS_ALLOWED_HOSTS" in cli.parser().format_help()
    with pytest.raises(SystemExit) as exit_info:
        cli.parser().parse_args(["--allowed-hosts", "zero.example.edu:8000"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert "argument --allowed-hosts" in err
    assert "'zero.example.edu:8000' is not a host name without a port" in err


def test_the_table_command_reads_a_models_config_json(capsys: pytest.CaptureFixture[str]) -> None:
    # Mixtral 8x7B's stored config.json: its 46,702,792,704 weights (the Hub's count) at 16 B a weight under data
    # parallelism, 747,244,683,264 B = 695.9 GiB a card.
    config = str(Path(cli.__file__).parents[1] / "domain" / "models" / "mixtral-8x7b-v0.1.json")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["table", "--config", config, "--gpus", "8"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("mixtral: 46,702,792,704 weights on 8 GPUs")
    assert "695.9 GiB" in next(line for line in out if line.startswith("Data parallelism"))


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "cannot read"),
        (b"\xff\xfe", "not UTF-8"),
        (b" " * (65 * 1024), "over 64 KB"),
        (b'{"model_type": "llama"}', "hidden_size"),
        (b'{"model_type": "bert"}', "model_type"),
    ],
)
def test_a_config_file_that_cannot_be_read_exits_2_saying_why(
    content: bytes | None, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.json"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["table", "--config", str(path)])
    assert exit_info.value.code == 2
    assert said in capsys.readouterr().err
