"""The vendored htmx is the pinned release, with its licence, and nothing else is fetched."""

from __future__ import annotations

import hashlib
import re

from app.paths import STATIC_DIR

HTMX = STATIC_DIR / "htmx-2.0.11.min.js"
# sha256 of dist/htmx.min.js in the npm package htmx.org@2.0.11.
HTMX_SHA256 = "d6fdc75f204e6bdefa99b69bf1e6d4ac69b8a364f77929f45c13476b4000f717"


def test_htmx_is_the_pinned_release() -> None:
    assert hashlib.sha256(HTMX.read_bytes()).hexdigest() == HTMX_SHA256
    assert b'version:"2.0.11"' in HTMX.read_bytes().replace(b" ", b"")


def test_htmx_licence_is_alongside() -> None:
    licence = (STATIC_DIR / "htmx-2.0.11.LICENSE").read_text()
    assert licence.startswith("Zero-Clause BSD")


def test_our_static_files_name_no_other_origin() -> None:
    for path in STATIC_DIR.iterdir():
        if path.suffix in {".css", ".js", ".svg"} and path != HTMX:
            text = path.read_text().replace('xmlns="http://www.w3.org/2000/svg"', "")
            assert not re.search(r"(https?:)?//[a-z0-9-]+(\.[a-z0-9-]+)+", text, re.IGNORECASE), path
            assert "@import" not in text, path
