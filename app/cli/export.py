"""`zero-bands export`: the app's pages written out as a static site that needs no Python.

Three steps, each replaceable: a list of app URLs (`default_urls`; a new view is exported by adding
its URLs), each rendered by the app in process through ASGI (`render_all`), and each written under a
name that depends on its URL alone (`file_name`), with every link, `hx-get`, `action` and asset URL
rewritten to the relative static file (`rewrite`). The static host answers any request with the whole
page, so every htmx request also gets `hx-select` for the element it swaps, and the pushed address
is the static file's own. Forms cannot work without the app: they are disabled, with a note.
"""

from __future__ import annotations

import asyncio
import functools
import html
import posixpath
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from starlette.types import ASGIApp, Message

from app.domain.stages import Stage
from app.domain.step import LAST_PHASE
from app.measure.snapshots import IMPLS, default_impl
from app.paths import STATIC_DIR
from app.serving.assets import BUNDLES, FINGERPRINT, bundled
from app.serving.config import Settings
from app.serving.security import content_security_policy

STATIC_PREFIX = "/static/"
STATIC_OUT = "static"
"""The assets keep their relative paths: /static/app.css is static/app.css in the export."""

# The key whose value stands alone in a file name rather than as a pair: '/?stage=zero3&phase=5'
# is 'zero3-phase-5.html', '/embed?stage=zero1' 'embed-zero1.html'.
FOLDER_KEY = "stage"

URL_ATTRIBUTES = ("href", "src", "action", "hx-get", "hx-post", "hx-push-url", "hx-replace-url")
HTMX_REQUESTS = ("hx-get", "hx-post", "hx-put", "hx-patch", "hx-delete")
FORM_CONTROLS = ("input", "select", "textarea", "button")

FORM_NOTE = "A static copy: the calculator needs the live app (run zero-bands), so it is switched off here."
SLIDER_NOTE = "In this static copy, step with the links or the arrow keys: the slider needs the live app."
MISSING_NOTE = "Not in this static copy: this view needs the live app."
DROPPED = {
    "embed-this": "To embed this view in a course page, take the snippet from the live app (run zero-bands).",
    # Its links ask /api/config for the run, and its paste box posts to the app: neither is a file.
    "config-tools": "To copy this run as a DeepSpeed or FSDP2 config, Megatron-LM's arguments, torchtitan's "
    "settings or a device mesh, or to paste one, use the live app (run zero-bands).",
    # The model with the measured offload's settings: a run of its own, with every page it links to.
    "offload-model-link": "The model with these settings is in the live app (run zero-bands).",
    # A live session is kept by the app: a static host can neither start nor serve one.
    "teach-live-form": "",
    # The forced colour schemes and predict first: pages of their own the copy does not hold (it follows the
    # system's colours, and a prediction is checked by the app).
    "scheme-menu": "",
}
"""Elements left out of the copy, by id, with the note that stands in their place (none if empty)."""
INLINED = {"keys-help-slot": "keys.html", "words-slot": "words.html"}
"""Slots the app fills on demand, by id, with the static file the copy puts in their place: a
static host answers an htmx request with the whole file, not what the slot asks for."""
FILE_SCRIPT = "export.js"
"""Turns htmx off on file:// pages, where a browser refuses its requests: links load whole pages."""


@functools.cache
def _static_text(name: str) -> str:
    # Put in every page of the copy: read once.
    return (STATIC_DIR / name).read_text()


class ExportError(Exception):
    """The export cannot be written; the message says why."""


def default_urls() -> list[str]:
    """Every stage at rest and every phase (in both themes), the embeds, every compare pair, and the JSON."""
    urls = ["/"]
    urls += [f"/?stage={stage.value}" for stage in Stage]
    urls += [f"/?stage={stage.value}&phase={phase}" for stage in Stage for phase in range(LAST_PHASE + 1)]
    # The same pages for the back of a room: the projector toggle links to them.
    urls += [f"{url}{'&' if '?' in url else '?'}theme=projector" for url in urls]
    # The embed views a course page frames, and each pair of stages side by side.
    urls += [f"/embed?stage={stage.value}" for stage in Stage]
    urls += [f"/embed?stage={stage.value}&phase={phase}" for stage in Stage for phase in range(LAST_PHASE + 1)]
    urls += [f"/compare?left={left.value}&right={right.value}" for left in Stage for right in Stage]
    urls += [f"/compare?left={left.value}&right={right.value}&theme=projector" for left in Stage for right in Stage]
    # Every arrangement measured in PyTorch, in both themes: the page links to them.
    measured = [f"/measured?stage={stage.value}" for stage in Stage]
    measured += [
        f"/measured?stage={stage.value}&impl={impl.value}"
        for stage in Stage
        for impl in IMPLS[stage]
        if impl is not default_impl(stage)
    ]
    urls += measured + [f"{url}&theme=projector" for url in measured]
    urls += ["/api/memory", "/api/stages", "/api/layout", "/api/measured", "/openapi.json"]
    # Each page's footer links to the layout of the stage it draws.
    urls += [f"/api/layout?stage={stage.value}" for stage in Stage]
    # Browsers ask for it on pages that name no icon, the JSON among them.
    urls += ["/favicon.ico"]
    return urls


EXPORT_HOST = "export"
"""The host the app is asked under while exporting; links to it are links within the copy."""

HINTS = frozenset({"from"})
"""Query parameters that only hint at how a page was reached; the copy does without them."""


def url_key(url: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """What identifies an app URL: its path and its query pairs in order of name (fragment dropped)."""
    parts = urlsplit(url)
    return parts.path or "/", tuple(sorted(parse_qsl(parts.query, keep_blank_values=True)))


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def slug(text: str) -> str:
    """A query name or value as part of a file name: safe characters kept, others as ~XX, no leading dot."""
    escaped = _UNSAFE.sub(lambda m: "".join(f"~{b:02X}" for b in m.group().encode()), text)
    if escaped.startswith("."):
        escaped = "~2E" + escaped[1:]
    return escaped or "~"


def file_name(url: str, media_type: str = "text/html") -> str:
    """The export's file for an app URL: deterministic, from the URL (and the kind of answer) alone.

    '/' is index.html, '/?stage=zero1' zero1.html, '/?stage=zero3&phase=5' zero3-phase-5.html,
    '/compare?left=dp&right=zero3' compare-left-dp_right-zero3.html. Pages all sit at the top:
    htmx pushes the address of each page it swaps in, and the links outside the widget (the
    masthead, the footer, the icon) stay those of the first page, relative to its folder. JSON
    keeps its path ('/api/memory' is api/memory.json); a path that already ends in an extension
    ('/openapi.json') keeps it whole.
    """
    path, pairs = url_key(url)
    segments = [slug(s) for s in path.split("/") if s]
    if segments and "." in segments[-1] and not pairs:
        return "/".join(segments)
    rest = [(k, v) for k, v in pairs if k != FOLDER_KEY]
    segments += [slug(v) for k, v in pairs if k == FOLDER_KEY]
    if rest:
        segments.append("_".join(f"{slug(k)}-{slug(v)}" for k, v in rest))
    if "json" in media_type:
        return "/".join(segments or ["index"]) + ".json"
    return "-".join(segments or ["index"]) + ".html"


def relative(target: str, source: str) -> str:
    """The link from exported file `source` to exported file `target`, both relative to the export's root."""
    return posixpath.relpath(target, posixpath.dirname(source) or ".")


def meta_policy(settings: Settings | None = None) -> str:
    """The app's Content-Security-Policy for a <meta> tag, which cannot carry frame-ancestors."""
    directives = content_security_policy(settings or Settings()).split("; ")
    return "; ".join(d for d in directives if not d.startswith("frame-ancestors"))


@dataclass
class Rewritten:
    """A page rewritten for the export, and the app URLs it linked to that the export lacks."""

    html: str
    missing: set[str] = field(default_factory=set)


class _Rewriter(HTMLParser):
    """Copies a page verbatim except the start tags it has to change."""

    def __init__(self, source: str, targets: Mapping[tuple[str, tuple[tuple[str, str], ...]], str], policy: str):
        super().__init__(convert_charrefs=False)
        self.source = source
        self.targets = targets
        self.policy = policy
        self.out: list[str] = []
        self.missing: set[str] = set()
        self.in_form = False
        self.dropping: str | None = None
        """The tag of the element being left out, while inside it."""
        self.depth = 0

    def _emit(self, text: str) -> None:
        if self.dropping is None:
            self.out.append(text)

    # Everything but start tags is copied as it came.
    def handle_endtag(self, tag: str) -> None:
        if self.dropping is not None:
            if tag == self.dropping:
                self.depth -= 1
                if self.depth == 0:
                    self.dropping = None
            return
        if tag == "form":
            self.in_form = False
        self._emit(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        self._emit(data)

    def handle_entityref(self, name: str) -> None:
        self._emit(f"&{name};")

    def handle_charref(self, name: str) -> None:
        self._emit(f"&#{name};")

    def handle_comment(self, data: str) -> None:
        self._emit(f"<!--{data}-->")

    def handle_decl(self, decl: str) -> None:
        self._emit(f"<!{decl}>")

    def handle_pi(self, data: str) -> None:
        self._emit(f"<?{data}>")

    def unknown_decl(self, data: str) -> None:
        self._emit(f"<![{data}]>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, closed=True)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, closed=False)

    def _link(self, value: str) -> str | None:
        """The relative file for an app URL; the value itself when it is not the app's; None if missing."""
        parts = urlsplit(value)
        if parts.netloc == EXPORT_HOST:
            # The app's own absolute links (the "Embed this" panel's): an address in the copy like any other.
            parts = parts._replace(scheme="", netloc="")
            value = urlunsplit(parts)
        if parts.scheme or parts.netloc or not (parts.path or parts.query):
            return value  # another origin, or a fragment of this page
        absolute = urlsplit(posixpath.normpath(posixpath.join("/", parts.path)) if parts.path else "/")
        app_path = absolute.path + (f"?{parts.query}" if parts.query else "")
        # An asset's fingerprint only tells a browser's cache when it changed; the copy has one version.
        if absolute.path.startswith(STATIC_PREFIX) and parts.query.partition("=")[0] in {"", FINGERPRINT}:
            asset = absolute.path.removeprefix(STATIC_PREFIX)
            if (STATIC_DIR / asset).is_file() or asset in BUNDLES:
                target = f"{STATIC_OUT}/{asset}"
                return urlunsplit(("", "", relative(target, self.source), "", parts.fragment))
            self.missing.add(app_path)
            return None
        # A switch link's `from` only rings the cells that changed: the copy links the stage itself.
        path, pairs = url_key(app_path)
        kept = tuple(p for p in pairs if p[0] not in HINTS)
        target_file = self.targets.get((path, kept))
        if target_file is None:
            self.missing.add(path + (f"?{urlencode(kept)}" if kept else ""))
            return None
        return urlunsplit(("", "", relative(target_file, self.source), "", parts.fragment))

    def _start(self, tag: str, attrs: list[tuple[str, str | None]], closed: bool) -> None:
        original = self.get_starttag_text() or ""
        values = dict(attrs)
        if self.dropping is not None:
            self.depth += tag == self.dropping and not closed
            return
        if values.get("id") in INLINED and not closed:
            self._emit(_static_text(INLINED[values["id"] or ""]))
            self.dropping, self.depth = tag, 1
            return
        if values.get("id") in DROPPED and not closed:
            # Its snippets name the live app's address, which a static copy does not have.
            if DROPPED[values["id"] or ""]:
                self._emit(f'<p class="export-note" role="note">{html.escape(DROPPED[values["id"] or ""])}</p>')
            self.dropping, self.depth = tag, 1
            return
        changed = False
        before: list[str] = []
        after: list[str] = []

        for name in URL_ATTRIBUTES:
            value = values.get(name)
            if value is None or (name.endswith("-url") and value in {"true", "false"}):
                continue
            link = self._link(value)
            if link is None:
                # Nowhere to go in the export: no silent 404, the link becomes text that says so.
                for gone in (*URL_ATTRIBUTES, *HTMX_REQUESTS, "hx-target", "hx-swap", "hx-trigger", "hx-select"):
                    values.pop(gone, None)
                values["aria-disabled"] = "true"
                values["title"] = MISSING_NOTE
                values["class"] = f"{values.get('class') or ''} export-missing".strip()
                changed = True
                break
            if link != value:
                values[name] = link
                changed = True

        if any(values.get(name) for name in HTMX_REQUESTS) and tag != "form":
            target, swap = values.get("hx-target") or "", values.get("hx-swap") or ""
            if target.startswith("#") and swap.split(" ")[0] in {"outerHTML", "morph"}:
                # A static host answers with the whole page: swap in the same element taken out of it.
                values["hx-select"] = target
            else:
                for name in (*HTMX_REQUESTS, "hx-target", "hx-swap", "hx-trigger", "hx-push-url"):
                    values.pop(name, None)
            changed = True

        # A dialog's own form (the keys' Close button) asks no server: it works in the copy as it is.
        if tag == "form" and values.get("method") != "dialog":
            self.in_form = True
            for name in [n for n in values if n == "action" or n.startswith("hx-")]:
                del values[name]
            values["data-export"] = "static"
            if values.get("class") != "phase-form":
                before.append(f'<p class="export-note" role="note">{html.escape(FORM_NOTE)}</p>')
            changed = True
        elif self.in_form and tag in FORM_CONTROLS and values.get("type") != "hidden":
            values["disabled"] = None
            if values.get("type") == "range":
                values["title"] = SLIDER_NOTE
            changed = True

        if tag == "meta" and "charset" in values:
            after.append(f'<meta http-equiv="Content-Security-Policy" content="{html.escape(self.policy)}">')
            after.append('<meta name="referrer" content="no-referrer">')
        if tag == "script" and (values.get("src") or "").endswith("htmx-2.0.11.min.js"):
            script = relative(f"{STATIC_OUT}/{FILE_SCRIPT}", self.source)
            before.append(f'<script src="{html.escape(script)}" defer></script>\n  ')

        text = _tag(tag, values, closed) if changed else original
        self._emit("".join([*before, text, *after]))


def _tag(tag: str, attrs: Mapping[str, str | None], closed: bool) -> str:
    rendered = "".join(f" {k}" if v is None else f' {k}="{html.escape(v, quote=True)}"' for k, v in attrs.items())
    return f"<{tag}{rendered}{' /' if closed else ''}>"


def rewrite(
    page: str, source: str, targets: Mapping[tuple[str, tuple[tuple[str, str], ...]], str], policy: str | None = None
) -> Rewritten:
    """Page `page`, to be written as `source`, with its app URLs pointing at the export's files.

    `targets` maps each exported URL's `url_key` to its file. Links to anything else lose their
    address and their htmx attributes and say why; the URLs are returned as `missing`.
    """
    parser = _Rewriter(source, targets, policy if policy is not None else meta_policy())
    parser.feed(page)
    parser.close()
    return Rewritten("".join(parser.out), parser.missing)


@dataclass(frozen=True)
class Rendered:
    """One app URL's answer."""

    url: str
    status: int
    media_type: str
    body: bytes


async def _get(app: ASGIApp, url: str) -> Rendered:
    """GET `url` from the app in process, as a browser would ask for a whole page."""
    parts = urlsplit(url)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "server": (EXPORT_HOST, 80),
        "client": ("127.0.0.1", 0),
        "root_path": "",
        "path": parts.path or "/",
        "raw_path": (parts.path or "/").encode(),
        "query_string": parts.query.encode(),
        "headers": [(b"host", EXPORT_HOST.encode()), (b"accept", b"text/html,application/json")],
    }
    status, media_type, body = 500, "", bytearray()
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if sent:
            await asyncio.sleep(3600)
        sent = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        nonlocal status, media_type
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = {k.decode().lower(): v.decode() for k, v in message.get("headers", [])}
            media_type = headers.get("content-type", "").split(";")[0].strip()
        elif message["type"] == "http.response.body":
            body.extend(message.get("body", b""))

    await app(scope, receive, send)
    return Rendered(url, status, media_type, bytes(body))


def render_all(app: ASGIApp, urls: Iterable[str]) -> list[Rendered]:
    """Each URL rendered by the app; an answer other than 200 is an error."""

    async def run() -> list[Rendered]:
        return [await _get(app, url) for url in urls]

    # A thread of its own, so the export also runs where an event loop is already running.
    with ThreadPoolExecutor(max_workers=1) as pool:
        rendered = pool.submit(lambda: asyncio.run(run())).result()
    for r in rendered:
        if r.status != 200:
            raise ExportError(f"the app answered {r.status} for {r.url}")
    return rendered


@dataclass
class Summary:
    """What an export wrote."""

    files: int = 0
    nbytes: int = 0
    pages: int = 0
    missing: set[str] = field(default_factory=set)


def plan(rendered: Sequence[Rendered]) -> dict[tuple[str, tuple[tuple[str, str], ...]], str]:
    """Each URL's file, refusing two URLs that would share one."""
    targets: dict[tuple[str, tuple[tuple[str, str], ...]], str] = {}
    owners: dict[str, str] = {}
    for r in rendered:
        name = file_name(r.url, r.media_type)
        if name in owners and url_key(owners[name]) != url_key(r.url):
            raise ExportError(f"{owners[name]} and {r.url} would both be written to {name}")
        if name.split("/")[0] == STATIC_OUT:
            raise ExportError(f"{r.url} would be written among the static files, as {name}")
        owners[name] = r.url
        targets[url_key(r.url)] = name
    return targets


def export(out: Path, urls: Sequence[str] | None = None, app: ASGIApp | None = None, force: bool = False) -> Summary:
    """Write the static site for `urls` (default: `default_urls()`) into `out`.

    Refuses a folder that exists and is not empty unless `force`, and a path that is a file.
    """
    if out.exists() and not out.is_dir():
        raise ExportError(f"{out} is a file, not a folder")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ExportError(f"{out} is not empty; use --force to write into it anyway")
    if app is None:
        from app.main import create_app

        app = create_app()
    rendered = render_all(app, urls if urls is not None else default_urls())
    targets = plan(rendered)
    policy = meta_policy()
    summary = Summary()
    files: dict[str, bytes] = {}
    for r in rendered:
        name = targets[url_key(r.url)]
        if r.media_type == "text/html":
            page = rewrite(r.body.decode(), name, targets, policy)
            summary.missing |= page.missing
            files[name] = page.html.encode()
            summary.pages += 1
        else:
            files[name] = r.body
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name, body in files.items():
            path = out / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
        shutil.copytree(STATIC_DIR, out / STATIC_OUT, dirs_exist_ok=True)
        for bundle, parts in BUNDLES.items():
            (out / STATIC_OUT / bundle).write_bytes(bundled(STATIC_DIR, parts))
    except OSError as error:
        raise ExportError(f"could not write {error.filename or out}: {error.strerror or error}") from None
    written = [out / name for name in files] + [p for p in (out / STATIC_OUT).rglob("*") if p.is_file()]
    summary.files = len(written)
    summary.nbytes = sum(p.stat().st_size for p in written)
    return summary
