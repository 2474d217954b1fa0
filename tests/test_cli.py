from __future__ import annotations

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
