"""The `zero-bands` command: serve the app, print the table for a run, or export a static copy."""

from __future__ import annotations

import argparse
import ipaddress
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from app.domain.stages import Stage
from app.serving.config import (
    ALLOWED_HOSTS_ENV,
    DEFAULT_LIMIT,
    LIMIT_ENV,
    LISTEN_HOST_ENV,
    PUBLIC_URL_ENV,
    REDIS_ENV,
    WORKERS_ENV,
    Settings,
    SettingsError,
    allowed_hosts,
    check_public_url,
    quoted,
)
from app.serving.server import serve
from app.web.config_view import ConfigFormat
from app.web.fields import FIELDS, Kind, RunField


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{quoted(text, limit=None)} is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is not between 0 and 65535")
    return port


def _positive(text: str) -> int:
    if not (text.isdigit() and 0 < len(text) < 7 and int(text) > 0):
        raise argparse.ArgumentTypeError(f"{quoted(text, limit=None)} is not a whole number from 1 to 999999")
    return int(text)


def _proxies(text: str) -> str:
    """Addresses and networks of trusted proxies, comma-separated, or * (any): as uvicorn takes them."""
    for item in (part.strip() for part in text.split(",")):
        if item == "*":
            continue
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{quoted(item)} is not an IP address or network (examples: 10.0.0.5, 10.0.0.0/24, *)"
            ) from None
    return text


def _public_url(text: str) -> str:
    """An http or https address students can open, as the settings take it."""
    try:
        check_public_url(text.strip())
    except SettingsError as error:
        raise argparse.ArgumentTypeError(str(error).replace(f"{PUBLIC_URL_ENV}=", "")) from None
    return text.strip().rstrip("/")


def _allowed_hosts(text: str) -> str:
    """Host names, comma-separated, as the settings take them."""
    try:
        allowed_hosts(text)
    except SettingsError as error:
        raise argparse.ArgumentTypeError(str(error).replace(f"{ALLOWED_HOSTS_ENV}: ", "")) from None
    return text.strip()


def parser() -> argparse.ArgumentParser:
    """The command line: serving options, and the `table` subcommand."""
    p = argparse.ArgumentParser(prog="zero-bands", description="Serve ZeRO Bands, the ZeRO sharding grid.")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default: 127.0.0.1)")
    p.add_argument("--port", type=_port, default=8000, help="port to listen on (default: 8000)")
    p.add_argument("--root-path", default="", help="path prefix when served behind a proxy, e.g. /tools/zero")
    p.add_argument(
        "--workers", type=_positive, default=None,
        help=f"worker processes, each with its own cache (default: one, which keeps live sessions in memory; "
        f"with --redis-url, one per core, here {os.cpu_count() or 1})",
    )  # fmt: skip
    p.add_argument(
        "--redis-url", default=None, metavar="URL",
        help=f"keep live sessions in Redis, e.g. redis://localhost:6379/0, so that several workers or machines "
        f"serve them (default: ${REDIS_ENV}, or in this process)",
    )  # fmt: skip
    p.add_argument(
        "--limit-concurrency", type=_positive, default=None,
        help=f"requests in progress per worker past which the next gets a 503 at once (default: {DEFAULT_LIMIT})",
    )  # fmt: skip
    p.add_argument(
        "--forwarded-allow-ips", type=_proxies, default=None, metavar="IPS",
        help="proxies whose X-Forwarded-For and X-Forwarded-Proto are believed: addresses or networks, "
        "comma-separated, or * (default: $FORWARDED_ALLOW_IPS, else 127.0.0.1). Set it to the proxy's address "
        "when the proxy runs on another machine (docs/deploying.md)",
    )  # fmt: skip
    p.add_argument(
        "--public-url", type=_public_url, default=None, metavar="URL",
        help=f"the address students open, e.g. http://192.168.1.20:8000 or https://zero.example.edu/tools/zero: "
        f"a live session's join address and QR code, and the embed snippets, use it (default: ${PUBLIC_URL_ENV}, "
        f"else the address the page was opened at; a teacher on 127.0.0.1 or localhost is told students cannot "
        f"reach it)",
    )  # fmt: skip
    p.add_argument(
        "--allowed-hosts", type=_allowed_hosts, default=None, metavar="HOSTS",
        help=f"the host names people open the app at, comma-separated, e.g. zero.example.edu or *.example.edu: "
        f"a request naming another Host is refused, so no snippet or join address is written on it "
        f"(default: ${ALLOWED_HOSTS_ENV}, else any valid host name: a laptop on the room's network)",
    )  # fmt: skip
    p.add_argument("--access-log", action="store_true", help="log every request (off by default: it costs time)")
    commands = p.add_subparsers(dest="command", metavar="{table,config,export,measure}")
    table = commands.add_parser(
        "table", help="print memory, traffic and fit per stage for a run", description="Print the table for a run."
    )
    for field in FIELDS:  # every run field, as the page and the API take it (app/web/fields.py)
        table.add_argument(field.option, dest=field.name, choices=field.values or None, help=_help(field),
                           type=_reader(field), metavar=_metavar(field))  # fmt: skip
    config = commands.add_parser(
        "config",
        help="print the run as a training config: DeepSpeed, FSDP2, Megatron-LM, torchtitan or a device mesh",
        description="Print the run under one stage as /api/config writes it (docs/export.md).",
    )
    config.add_argument("format", choices=[f.value for f in ConfigFormat], help="what to write")
    config.add_argument("--stage", choices=[s.value for s in Stage], default=Stage.DP.value,
                        help="the arrangement, dp (ZeRO stage 0) to zero3 (default: dp)")  # fmt: skip
    for field in FIELDS:
        config.add_argument(field.option, dest=field.name, choices=field.values or None, help=_help(field),
                            type=_reader(field), metavar=_metavar(field))  # fmt: skip
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
        "ZeroRedundancyOptimizer, FSDP1 and FSDP2, then the model cut across them (FSDP2 with tensor parallelism, "
        "a 2-stage pipeline), and write the bytes each rank holds as a JSON snapshot.",
    )
    measure.add_argument("--out", type=Path, help="where to write the snapshot (default: print a summary only)")
    return p


MAX_CONFIG_FILE = 64 * 1024
"""The largest config.json file read, as the page's upload takes: a config.json is a few kilobytes."""


def _config_file(path: str) -> str:
    """A config.json file's text, for the run field the page takes pasted (`--config FILE`)."""
    try:
        with Path(path).open("rb") as file:
            data = file.read(MAX_CONFIG_FILE + 1)
    except OSError as error:
        raise argparse.ArgumentTypeError(f"cannot read {path!r}: {error.strerror or error}") from None
    if len(data) > MAX_CONFIG_FILE:
        raise argparse.ArgumentTypeError(f"{path!r} is over {MAX_CONFIG_FILE // 1024} KB: a config.json is a few")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise argparse.ArgumentTypeError(f"{path!r} is not UTF-8 text: a config.json is JSON, which is") from None


def _reader(field: RunField) -> Callable[[str], str]:
    """A config field is a file on the command line: its text is what the page takes pasted; the rest as typed."""
    return _config_file if field.kind is Kind.CONFIG else str


def _metavar(field: RunField) -> str | None:
    return "FILE" if field.kind is Kind.CONFIG else None


def _help(field: RunField) -> str:
    """The option's help: the field's own, and its default where it has a plain one."""
    text = field.help.replace("%", "%%")  # argparse formats help with %
    if field.kind is Kind.SWITCH:
        return f"{text} 1 or 0 (default: {int(field.default)})"
    if field.default is None or field.choices is not None:
        return text
    return f"{text} (default: {field.default})"


def table(args: argparse.Namespace) -> int:
    """Validate the run as the API does, then print its table; 2 and a message when it is wrong."""
    # Imported here: serving needs none of it, and every worker starts sooner without it.
    from pydantic import ValidationError

    from app.cli.text_table import render_table
    from app.domain.scenario import resolve
    from app.web.errors import describe
    from app.web.inputs import RunQuery

    fields = {f.name: getattr(args, f.name) for f in FIELDS if getattr(args, f.name) is not None}
    try:
        query = RunQuery.model_validate(fields)
    except ValidationError as error:
        errors = [{**e, "loc": ("option", *e["loc"])} for e in error.errors()]
        message = describe(errors, show_input=True)
        print(f"zero-bands table: {_printable(message)}", file=sys.stderr)
        return 2
    try:
        print(render_table(resolve(query.inputs())))
        sys.stdout.flush()
    except BrokenPipeError:
        # `zero-bands table | head`: the reader has what it wanted. Quietly, as other tools do: point
        # stdout at nothing so the interpreter's own final flush cannot complain either.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def config(args: argparse.Namespace) -> int:
    """Validate the run as the API does, then print it as a config; 2 and a message when there is none."""
    import json

    from pydantic import ValidationError

    from app.domain.scenario import resolve
    from app.web.config_view import ConfigQuery, written
    from app.web.errors import describe

    fields = {f.name: getattr(args, f.name) for f in FIELDS if getattr(args, f.name) is not None}
    try:
        query = ConfigQuery.model_validate({**fields, "stage": args.stage, "format": args.format})
    except ValidationError as error:
        errors = [{**e, "loc": ("option", *e["loc"])} for e in error.errors()]
        print(f"zero-bands config: {_printable(describe(errors, show_input=True))}", file=sys.stderr)
        return 2
    scenario = resolve(query.inputs())
    answer = written(query.format, query.stage, scenario.run, scenario.architecture, scenario.model_title)
    body = bytes(answer.body).decode()
    if answer.status_code != 200:
        print(f"zero-bands config: {json.loads(body)['message']}", file=sys.stderr)
        return 2
    # The JSON as a person reads it; the text exports as written.
    text = json.dumps(json.loads(body), indent=2) + "\n" if answer.media_type == "application/json" else body
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:  # `zero-bands config … | head`, as the table does
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _printable(text: str) -> str:
    """A message with any control character (an escape sequence typed into an option) shown as an escape."""
    return "".join(c if c.isprintable() or c == "\n" else ascii(c)[1:-1] for c in text)


def export_site(args: argparse.Namespace) -> int:
    """Write the static copy and say what was written; 2 and a message when it cannot be."""
    from app.cli.export import ExportError, export

    out: Path = args.dir
    try:
        summary = export(out, force=args.force)
    except (ExportError, SettingsError) as error:
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

    from app.measure.cut_snapshots import compare_cut
    from app.measure.snapshots import compare, offload_comparison, parse

    print("Measuring on 8 CPU ranks (gloo), one arrangement at a time:", flush=True)
    data = run_measurement()
    snapshot = parse(data)
    for measured in snapshot.arrangements:
        agreement = compare(snapshot, measured)
        share = float(agreement.ratio)
        print(f"{measured.stage.info.title}, {measured.title}: {share:.2%} of the model's bytes, "
              f"{agreement.unexplained:,} B unexplained")  # fmt: skip
    offload = offload_comparison(snapshot)
    cpu, model = offload.ranks[0].measured_bytes, offload.ranks[0].model_bytes
    peak = max(c.measured_bytes for c in offload.compute)
    model_peak = max(c.model_bytes for c in offload.compute)
    print(f"{offload.stage.info.title}, {offload.title}: {cpu:,} B on each rank's CPU against the model's {model:,} B, "
          f"compute peak {peak:,} B against {model_peak:,} B, {offload.unexplained:,} B unexplained")  # fmt: skip
    for cut in compare_cut(snapshot.cut, snapshot.recipe).arrangements:
        held = sorted({(r.measured_bytes, r.model_bytes) for r in cut.ranks})
        words = "; ".join(f"{measured:,} B against the model's {model:,} B" for measured, model in held)
        peaks = sorted({(r.activations.measured_bytes, r.activations.model_bytes) for r in cut.ranks if r.activations})
        kept = "; ".join(f"{measured:,} B against {model:,} B" for measured, model in peaks)
        print(f"{cut.title}: {words} a rank" + (f", activations at their peak {kept}" if kept else "")
              + f", {cut.unexplained:,} B unexplained")  # fmt: skip
    if args.out is not None:
        args.out.write_text(json.dumps(data, indent=1) + "\n")
        print(f"Wrote {args.out}.")
    print(f"Measured in {snapshot.seconds:.1f} s with torch {snapshot.torch}.")
    return 0


def workers_for(asked: int | None, redis_url: str) -> int:
    """The workers to start: as asked; else one, which keeps live sessions in memory, or with Redis one per core."""
    return asked or ((os.cpu_count() or 1) if redis_url else 1)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments; print a table, export a static copy, or serve until interrupted."""
    args = parser().parse_args(argv)
    if args.command == "table":
        raise SystemExit(table(args))
    if args.command == "config":
        raise SystemExit(config(args))
    if args.command == "export":
        raise SystemExit(export_site(args))
    if args.command == "measure":
        raise SystemExit(measure(args))
    if args.limit_concurrency is not None:
        os.environ[LIMIT_ENV] = str(args.limit_concurrency)
    if args.redis_url is not None:
        os.environ[REDIS_ENV] = args.redis_url
    if args.public_url is not None:
        os.environ[PUBLIC_URL_ENV] = args.public_url
    if args.allowed_hosts is not None:
        os.environ[ALLOWED_HOSTS_ENV] = args.allowed_hosts
    os.environ[LISTEN_HOST_ENV] = args.host
    workers = workers_for(args.workers, os.environ.get(REDIS_ENV, ""))
    os.environ[WORKERS_ENV] = str(workers)
    try:
        # Each worker builds its own app from the environment: check it once here, with a clear message.
        Settings.from_env()
    except SettingsError as error:
        parser().exit(2, f"zero-bands: {error}\n")
    serve(args.host, args.port, args.root_path, workers=workers, access_log=args.access_log,
          forwarded_allow_ips=args.forwarded_allow_ips)  # fmt: skip
