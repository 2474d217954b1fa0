"""Whether students can reach the address a teacher opened the app at, and this machine's own address.

A teacher who serves the app on a laptop and opens http://127.0.0.1:8000 would put that address in the
join QR code: no phone can open it. The teacher's bar says so (app/web/live_view.py `join_address`),
and gives the address students can use: `--public-url`, or this machine's address on the network.
"""

from __future__ import annotations

import ipaddress
import socket

PROBE = ("192.0.2.1", 9)
"""An address of TEST-NET-1 (RFC 5737), never routed: a UDP socket "connected" to it is given the address
of the interface the machine's routes would use to reach the network, and sends nothing."""


def bare_host(host: str) -> str:
    """A host as a URL names it, without an IPv6 address's brackets or a name's final dot, in small letters."""
    return host.strip("[]").rstrip(".").lower()


def is_loopback(host: str) -> bool:
    """Whether `host` (a name or an address) is this machine only: localhost, 127.0.0.0/8, ::1 and their kin."""
    name = bare_host(host)
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def is_everywhere(host: str) -> bool:
    """Whether a server listening on `host` listens on every interface: 0.0.0.0, ::, or no host at all."""
    return bare_host(host) in ("", "0.0.0.0", "::")


def outward_address() -> str | None:
    """The machine's IPv4 address on the network its default route leads to; None without one (offline).

    A UDP socket's connect sends no packet: the kernel only picks the interface, whose address the socket
    then has.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(PROBE)
            address: str = probe.getsockname()[0]
    except OSError:
        return None
    return None if is_loopback(address) or is_everywhere(address) else address
