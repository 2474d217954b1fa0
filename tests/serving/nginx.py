"""nginx with docs/deploying.md's configuration, run in front of the app by the tests that check the guide."""

from __future__ import annotations

import os
import re
import shutil
import socket
import ssl
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "deploying.md"
NGINX = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")


def blocks(language: str) -> list[str]:
    """The guide's code blocks in `language`, in order."""
    found = re.findall(rf"```{language}\n(.*?)```", GUIDE.read_text(), re.S)
    assert found, f"docs/deploying.md has no {language} block"
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def running_nginx(prefix: Path, server: str, probe: str) -> Iterator[None]:
    """Run nginx with `server` in its http block, under `prefix`, until the block ends; ready once `probe` answers."""
    assert NGINX is not None, "nginx is not installed: apt-get install nginx-light (the README's test line does)"
    temp = " ".join(f"{kind}_temp_path {prefix}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi",
                                                                        "scgi"))  # fmt: skip
    user = "user root;\n" if os.geteuid() == 0 else ""
    (prefix / "nginx.conf").write_text(
        f"{user}worker_processes 1;\npid {prefix}/nginx.pid;\nerror_log {prefix}/error.log;\n"
        f"events {{ worker_connections 512; }}\nhttp {{\naccess_log off;\n{temp}\n{server}\n}}\n"
    )
    process = subprocess.Popen(
        [NGINX, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    # The probe over https takes the test's own self-signed certificate.
    unverified = ssl.create_default_context()
    unverified.check_hostname, unverified.verify_mode = False, ssl.CERT_NONE
    try:
        deadline = time.monotonic() + 10
        while True:
            assert process.poll() is None, (prefix / "error.log").read_text()
            try:
                with urllib.request.urlopen(probe, timeout=1, context=unverified) as response:
                    response.read()
                break
            except OSError:
                assert time.monotonic() < deadline, "nginx did not answer within 10 s"
                time.sleep(0.05)
        yield
    finally:
        process.terminate()
        process.wait(timeout=10)
