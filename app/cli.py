"""The `zero-bands` command: serve the app, print the table for a run, or export a static copy."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import uvicorn
from pydantic import ValidationError

from app.config import ConfigError
from app.domain.architecture import ModelName
from app.domain.bands import RecipeName
from app.domain.quantities import ByteUnit
from app.domain.scenario import resolve
from app.errors import describe
from app.inputs import RunQuery
from app.table import render_table


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not between 0 and 65535")
    return port


def parser() -> argparse.ArgumentParser:
    """The command line: serving options, and the `table` subcommand."""
    p = argparse.ArgumentParser(prog="zero-bands", description="Serve ZeRO Bands, the ZeRO sharding grid.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port to listen on (default: 8000)")
    p.add_argument("--root-path", default="", help="path prefix when served behind a proxy, e.g. /tools/zero")
    commands = p.add_subparsers(dest="command", metavar="{table,export,measure}")
    table = commands.add_parser(
        "table", help="print memory, traffic and fit per stage for a run", description="Print the table for a run."
    )
    table.add_argument("--model", choices=[m.value for m in ModelName], help="a preset model (default: the seed's 30B)")
    table.add_argument("--params", help="weights of a custom model: 7.5B, 7.5e9, 7.5e+09 or 7,500,000,000")
    table.add_argument("--gpus", default="8", help="number of GPUs, 1-4096 (default: 8)")
    table.add_argument("--recipe", choices=[r.value for r in RecipeName], default=RecipeName.MIXED_ADAM.value)
    for band in ("weights", "gradients", "master", "moments"):
        table.add_argument(f"--{band}-bytes", help=f"bytes per weight of the {band} band (custom recipe)")
    table.add_argument("--largest-layer", help="weights ZeRO-3 gathers at once (default: from the architecture)")
    table.add_argument("--capacity", help="one card's memory: 80GB, 80GiB, or bytes such as 80e9")
    table.add_argument("--units", choices=[u.value for u in ByteUnit], default=ByteUnit.GIB.value)
    export = commands.add_parser(
        "export",
        help="write a static copy of the pages that any static file server can serve",
        description="Write every stage at rest and every phase of every stage's step, for the default run, "
        "as static files into DIR, with the assets they use.",
    )
    export.add_argument("dir", metavar="DIR", type=Path, help="the folder to write (created if missing)")
    export.add_argument("--force", action="store_true", help="write into DIR even if it is not empty")
    measure = commands.add_parser(
        "measure",
        help="measure what PyTorch holds on 8 CPU ranks under each arrangement (needs zero-bands[measure])",
        description="Train a toy model of 8 equal layers on 8 CPU processes (gloo) under DDP, "
        "ZeroRedundancyOptimizer, FSDP1 and FSDP2, and write the bytes each rank holds as a JSON snapshot.",
    )
    measure.add_argument("--out", type=Path, help="where to write the snapshot (default: print a summary only)")
    return p


def table(args: argparse.Namespace) -> int:
    """Validate the run as the API does, then print its table; 2 and a message when it is wrong."""
    fields = {name: value for name, value in vars(args).items() if name in RunQuery.model_fields and value is not None}
    try:
        query = RunQuery.model_validate(fields)
    except ValidationError as error:
        errors = [{**e, "loc": ("option", *e["loc"])} for e in error.errors()]
        message = describe(errors, show_input=True)
        print(f"zero-bands table: {message}", file=sys.stderr)
        return 2
    print(render_table(resolve(query.inputs())))
    return 0


def export_site(args: argparse.Namespace) -> int:
    """Write the static copy and say what was written; 2 and a message when it cannot be."""
    from app.export import ExportError, export

    out: Path = args.dir
    try:
        summary = export(out, force=args.force)
    except (ExportError, ConfigError) as error:
        print(f"zero-bands export: {error}", file=sys.stderr)
        return 2
    print(
        f"Wrote {summary.files:,} files ({summary.nbytes:,} bytes) to {out}: {summary.pages} pages, "
        f"their JSON and the static assets. Serve the folder with any static file server, or open index.html."
    )
    if summary.missing:
        print(f"{len(summary.missing)} linked addresses are not in the copy and show as plain text:", file=sys.stderr)
        for url in sorted(summary.missing):
            print(f"  {url}", file=sys.stderr)
    return 0


MEASURE_NEEDS_TORCH = (
    "zero-bands measure needs PyTorch, which is not installed: pip install 'zero-bands[measure]' "
    "(the CPU build, torch==2.13.0)."
)


def measure(args: argparse.Namespace) -> int:
    """Run the measurement, a line per arrangement, and write the snapshot; 2 and a message without torch."""
    try:
        from app.measure.runner import measure as run_measurement
    except ImportError:
        print(MEASURE_NEEDS_TORCH, file=sys.stderr)
        return 2
    import json

    from app.domain.measured import compare, parse

    print("Measuring on 8 CPU ranks (gloo), one arrangement at a time:", flush=True)
    data = run_measurement()
    snapshot = parse(data)
    for measured in snapshot.arrangements:
        agreement = compare(snapshot, measured)
        share = float(agreement.ratio)
        print(f"{measured.stage.info.title}, {measured.title}: {share:.2%} of the model's bytes, "
              f"{agreement.unexplained:,} B unexplained")  # fmt: skip
    if args.out is not None:
        args.out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"Wrote {args.out}.")
    print(f"Measured in {snapshot.seconds:.1f} s with torch {snapshot.torch}.")
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments; print a table, export a static copy, or serve until interrupted."""
    args = parser().parse_args(argv)
    if args.command == "table":
        raise SystemExit(table(args))
    if args.command == "export":
        raise SystemExit(export_site(args))
    if args.command == "measure":
        raise SystemExit(measure(args))
    try:
        from app.main import create_app

        application = create_app()
    except ConfigError as error:
        parser().exit(2, f"zero-bands: {error}\n")
    # server_header=False: the brief asks for no Server header; the middleware drops it too.
    uvicorn.run(application, host=args.host, port=args.port, root_path=args.root_path, server_header=False)
