"""Every page, fragment, API answer, CLI table and live page of a fixed list, written to a folder.

Run before and after a change that should print the same, and compare the two folders:

    .venv/bin/python -m bench.golden /tmp/before      # on the old commit
    .venv/bin/python -m bench.golden /tmp/after       # on the new one
    diff -r /tmp/before /tmp/after

The list covers 1, 16 and 1,024 GPUs, every stage, phase, theme, accounting and offload, the embed,
compare, measured and live pages. The fingerprints of static files (`?v=…`) are blanked, so a
change of CSS or script alone does not show as a change of every page.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
from contextlib import redirect_stdout, suppress
from pathlib import Path

from fastapi.testclient import TestClient

from app.cli import main as cli_main
from app.main import create_app
from app.serving.config import Settings

STAGES = ("dp", "zero1", "zero2", "zero3")
RUNS = (
    "",
    "gpus=1",
    "gpus=16",
    "gpus=1024&model=llama-3.1-405b&capacity=80GB",
    "model=llama-3-8b&capacity=80GB&overheads=1",
    "model=llama-3-70b&gpus=64&capacity=80GB&seq=4096&recompute=selective",
    "model=llama-3-8b&accounting=deepspeed&capacity=80GB",
    "model=llama-3-8b&accounting=fsdp2&capacity=80GB",
    "model=llama-3-70b&offload=optimizer&capacity=80GB&host_memory=2TB",
    "model=llama-3-70b&offload=optimizer%2Bparams&offload_device=nvme&nvme_space=8TB&accounting=deepspeed",
    "model=gpt-3-175b&trainable=90%25&capacity=5GB&batch=0",
    "model=llama-3-8b&lora_rank=16&lora_targets=all-linear",
    "model=zero-7.5b&gpus=64&units=GB&capacity=32GB",
    "recipe=custom&weights_bytes=2&gradients_bytes=4&master_bytes=4&moments_bytes=8&largest_layer=1e9",
    "params=7e9&gpus=3&nodes=1&pin_memory=0&offload=optimizer",
    "gpus=0",
    "capacity=80G",
)
STEPPED = ("", "gpus=16", "model=llama-3-8b&capacity=80GB&overheads=1")
"""The runs drawn at every kind of phase; the others at one phase of the backward."""
EXTRA = (
    "/?stage=zero2&from=zero1",
    "/?stage=zero2&accounting=deepspeed&from=zero1",
    "/?stage=zero2&accounting=fsdp2&from=zero1&model=llama-3-8b",
    "/?stage=zero3&from=dp&theme=projector",
    "/?theme=dark",
    "/?stage=zero1&theme=light",
    "/embed?stage=zero1",
    "/embed?stage=zero3&controls=step&phase=26",
    "/embed?stage=zero2&controls=none&calculator=1&model=llama-3-8b",
    "/embed?gpus=0",
    "/compare",
    "/compare?left=dp&right=zero3&model=llama-3-8b&capacity=80GB",
    "/measured",
    "/measured?stage=zero3&impl=fsdp1",
    "/share?stage=zero3",
    "/api/stages",
    "/api/memory?model=llama-3-70b&trainable=2761990144&batch=0",
    "/api/config?stage=zero3&model=llama-3-8b",
    "/api/config?stage=zero3&model=llama-3-8b&format=fsdp2",
    "/api/layout?stage=zero2&gpus=16",
    "/api/measured",
    "/live",
)
CLI = (
    ["table"],
    ["table", "--params", "7.5e9", "--gpus", "64", "--units", "GB", "--capacity", "32GB"],
    ["table", "--model", "llama-3-70b", "--capacity", "80GB", "--accounting", "deepspeed"],
)
FINGERPRINT = re.compile(r"\?v=[0-9a-f]+")


def urls() -> list[str]:
    """Every address of the list."""
    found = []
    for run in RUNS:
        for stage in STAGES:
            query = f"stage={stage}" + (f"&{run}" if run else "")
            found += [f"/?{query}", f"/api/memory?{query}"]
            phases = (0, 1, 2, 3, 14, 25, 26, 27, 35, 49, 50, 51, 52) if run in STEPPED else (14,)
            found += [f"/?{query}&phase={phase}" for phase in phases]
            found += [f"/api/step?{query}&phase={phase}" for phase in phases]
    return found + list(EXTRA)


def _name(kind: str, address: str) -> str:
    return f"{kind}-{hashlib.sha256(address.encode()).hexdigest()[:16]}.txt"


def write(folder: Path) -> int:
    """Write every answer of the list into `folder`, one file each, headed by its address; the count."""
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    with TestClient(create_app(Settings(cache_bytes=0))) as client:
        for address in urls():
            for kind, headers in (("page", {}), ("fragment", {"HX-Request": "true"})):
                if kind == "fragment" and address.startswith("/api/"):
                    continue
                answer = client.get(address, headers=headers)
                body = FINGERPRINT.sub("?v=", answer.text)
                (folder / _name(kind, address)).write_text(f"{address}\n{answer.status_code}\n{body}")
                count += 1
        started = client.post("/live", data={"view": "/?stage=zero3&phase=14"}, follow_redirects=False)
        code = started.headers["location"].split("/")[2]
        for kind, path in (("teacher", f"/live/{code}/teach"), ("follower", f"/live/{code}")):
            body = FINGERPRINT.sub("?v=", client.get(path).text).replace(code, "CODE")
            body = body.replace(f"{code[:3]} {code[3:]}", "CODE")  # as the bar shows it
            (folder / f"live-{kind}.txt").write_text(body)
            count += 1
    for args in CLI:
        printed = io.StringIO()
        with redirect_stdout(printed), suppress(SystemExit):
            cli_main(args)
        (folder / _name("cli", " ".join(args))).write_text(" ".join(args) + "\n" + printed.getvalue())
        count += 1
    return count


def main() -> None:
    """Write the list's answers to the folder named."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    folder = parser.parse_args().folder
    print(f"{write(folder)} answers written to {folder}")


if __name__ == "__main__":
    main()
