"""app/serving/reach.py: which hosts are this machine only, and this machine's address on the network."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from app.serving import reach


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("[::1]", True),
        ("::1", True),
        ("::ffff:127.0.0.1", True),
        ("localhost", True),
        ("LOCALHOST.", True),
        ("class.localhost", True),
        ("10.0.0.5", False),
        ("192.168.1.20", False),
        ("[fd00::7]", False),
        ("localhost.example.edu", False),
        ("class.example", False),
        ("0.0.0.0", False),
    ],
)
def test_loopback_hosts_are_this_machine_only(host: str, loopback: bool) -> None:
    assert reach.is_loopback(host) is loopback


@pytest.mark.parametrize(("host", "everywhere"), [("0.0.0.0", True), ("::", True), ("[::]", True), ("", True),
                                                  ("127.0.0.1", False), ("192.168.1.20", False)])  # fmt: skip
def test_a_server_on_the_unspecified_address_listens_everywhere(host: str, everywhere: bool) -> None:
    assert reach.is_everywhere(host) is everywhere


class FakeSocket:
    """A UDP socket whose connect records where it was pointed, and is given `address`."""

    def __init__(self, address: str | None, seen: list[tuple[str, int]]) -> None:
        self.address, self.seen = address, seen

    def __enter__(self) -> FakeSocket:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def connect(self, where: tuple[str, int]) -> None:
        self.seen.append(where)
        if self.address is None:
            raise OSError("Network is unreachable")

    def getsockname(self) -> tuple[str, int]:
        assert self.address is not None
        return self.address, 40000


@pytest.mark.parametrize(
    ("given", "found"), [("192.168.7.20", "192.168.7.20"), ("127.0.0.1", None), ("0.0.0.0", None), (None, None)]
)
def test_the_outward_address_is_the_interface_a_udp_connect_picks(
    monkeypatch: pytest.MonkeyPatch, given: str | None, found: str | None
) -> None:
    seen: list[tuple[str, int]] = []
    kinds: list[Any] = []

    def fake(family: int, kind: int) -> FakeSocket:
        kinds.append((family, kind))
        return FakeSocket(given, seen)

    monkeypatch.setattr(socket, "socket", fake)
    assert reach.outward_address() == found
    # UDP, pointed at TEST-NET-1, which is never routed: no packet leaves.
    assert kinds == [(socket.AF_INET, socket.SOCK_DGRAM)]
    assert seen == [("192.0.2.1", 9)]


def test_the_outward_address_on_this_machine_is_an_address_or_none() -> None:
    found = reach.outward_address()
    assert found is None or not (reach.is_loopback(found) or reach.is_everywhere(found))
