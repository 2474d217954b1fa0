"""The `zero-bands` command: serve the app."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

import uvicorn

from app.config import ConfigError


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not between 0 and 65535")
    return port


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="zero-bands", description="Serve ZeRO Bands, the ZeRO sharding grid.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port to listen on (default: 8000)")
    p.add_argument("--root-path", default="", help="path prefix when served behind a proxy, e.g. /tools/zero")
    return p


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments and serve until interrupted."""
    args = parser().parse_args(argv)
    try:
        from app.main import create_app

        application = create_app()
    except ConfigError as error:
        parser().exit(2, f"zero-bands: {error}\n")
    # server_header=False: the brief asks for no Server header; the middleware drops it too.
    uvicorn.run(application, host=args.host, port=args.port, root_path=args.root_path, server_header=False)
