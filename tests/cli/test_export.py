"""`zero-bands export`: URL to file naming, link rewriting, and a whole export whose every link resolves."""

from __future__ import annotations

import posixpath
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from bs4 import BeautifulSoup, Tag
from fastapi.testclient import TestClient

from app import cli
from app.cli import export as export_module
from app.cli.export import (
    EXPORT_HOST,
    FORM_NOTE,
    MISSING_NOTE,
    ExportError,
    Rendered,
    default_urls,
    file_name,
    meta_policy,
    plan,
    relative,
    rewrite,
    slug,
    url_key,
)
from app.domain.stages import Stage
from app.domain.step import LAST_PHASE
from app.paths import STATIC_DIR
from app.serving.assets import BUNDLES, minified
from app.serving.config import Settings
from app.serving.security import content_security_policy
from tests.conftest import dom, one, text

STAGES = ("dp", "zero1", "zero2", "zero3")
URL_ATTRIBUTES = ("href", "src", "action", "hx-get", "hx-post", "hx-push-url", "hx-replace-url")


@pytest.mark.parametrize(
    ("url", "media_type", "name"),
    [
        ("/", "text/html", "index.html"),
        ("/?stage=zero1", "text/html", "zero1.html"),
        ("/?stage=zero3&phase=5", "text/html", "zero3-phase-5.html"),
        ("/?phase=5&stage=zero3", "text/html", "zero3-phase-5.html"),
        ("/?stage=zero3&phase=5#step", "text/html", "zero3-phase-5.html"),
        ("/embed", "text/html", "embed.html"),
        ("/embed?stage=zero2&phase=7", "text/html", "embed-zero2-phase-7.html"),
        ("/compare?left=dp&right=zero3", "text/html", "compare-left-dp_right-zero3.html"),
        ("/compare?right=zero3&left=dp", "text/html", "compare-left-dp_right-zero3.html"),
        ("/?stage=zero1&gpus=16&capacity=80GiB", "text/html", "zero1-capacity-80GiB_gpus-16.html"),
        ("/?stage=dp&params=7,500,000,000", "text/html", "dp-params-7~2C500~2C000~2C000.html"),
        ("/api/memory", "application/json", "api/memory.json"),
        ("/api/layout?stage=zero1", "application/json", "api/layout/zero1.json"),
        ("/openapi.json", "application/json", "openapi.json"),
        ("/favicon.ico", "image/svg+xml", "favicon.ico"),
    ],
)
def test_file_names_follow_from_the_url(url: str, media_type: str, name: str) -> None:
    assert file_name(url, media_type) == name


@pytest.mark.parametrize(("text_in", "out"), [("zero3", "zero3"), ("7.5e9", "7.5e9"), ("a/b", "a~2Fb"), ("..", "~2E.")])
def test_slugs_keep_safe_characters_and_never_climb_out(text_in: str, out: str) -> None:
    assert slug(text_in) == out


def test_a_query_cannot_write_outside_the_export() -> None:
    for url in ("/?stage=..", "/?stage=../../etc", "/..?stage=x", "/a/../../b"):
        name = file_name(url)
        assert not name.startswith(("/", "..")), name
        assert ".." not in name.split("/"), name


# The page at rest and each stage, each stage's 53 phases, the same as embeds, and the 16 compare pairs;
# the pages and the pairs again in the projector theme; the 7 measured arrangements in both themes.
PAGES = 2 * (1 + 4 + 4 * 53) + 4 + 4 * 53 + 2 * 16 + 2 * 7


def _exported_pages() -> set[str]:
    """The file name of every exported page, written out by hand from the naming rule."""
    phases = range(LAST_PHASE + 1)
    page = {"index.html"} | {f"{s}.html" for s in STAGES} | {f"{s}-phase-{p}.html" for s in STAGES for p in phases}
    projector = (
        {"theme-projector.html"}
        | {f"{s}-theme-projector.html" for s in STAGES}
        | {f"{s}-phase-{p}_theme-projector.html" for s in STAGES for p in phases}
    )
    embeds = {f"embed-{s}.html" for s in STAGES} | {f"embed-{s}-phase-{p}.html" for s in STAGES for p in phases}
    pairs = {f"compare-left-{a}_right-{b}.html" for a in STAGES for b in STAGES}
    pairs |= {f"compare-left-{a}_right-{b}_theme-projector.html" for a in STAGES for b in STAGES}
    measured = {f"measured-{s}.html" for s in STAGES} | {f"measured-{s}-impl-fsdp1.html" for s in ("zero2", "zero3")}
    measured |= {"measured-zero3-impl-hsdp.html"}
    measured |= {name.replace(".html", "_theme-projector.html" if "impl" in name else "-theme-projector.html")
                 for name in measured}  # fmt: skip
    return page | projector | embeds | pairs | measured


def test_the_default_urls_are_every_stage_at_rest_and_every_phase() -> None:
    urls = default_urls()
    names = {file_name(u) for u in urls if not u.startswith(("/api", "/openapi", "/favicon"))}
    assert names == _exported_pages()
    assert len(names) == PAGES
    assert len(urls) == len(set(urls))


def test_relative_links_between_files() -> None:
    assert relative("zero3-phase-5.html", "index.html") == "zero3-phase-5.html"
    assert relative("static/app.css", "zero1.html") == "static/app.css"
    assert relative("index.html", "embed/zero1.html") == "../index.html"


def test_two_urls_for_one_file_are_refused() -> None:
    page = [Rendered("/?stage=zero1", 200, "text/html", b""), Rendered("/zero1", 200, "text/html", b"")]
    with pytest.raises(ExportError, match=r"both be written to zero1\.html"):
        plan(page)


def test_the_meta_policy_is_the_header_without_frame_ancestors() -> None:
    header = content_security_policy(Settings("'self'"))
    assert "frame-ancestors" in header
    assert "frame-ancestors" not in meta_policy()
    assert meta_policy() == header.replace("; frame-ancestors 'self'", "")
    assert "script-src 'self'" in meta_policy()


PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>T &amp; t</title>
  <link rel="stylesheet" href="/static/app.css">
  <script src="/static/htmx-2.0.11.min.js" defer></script>
</head>
<body>
  <!-- a comment -->
  <h1><a href="/">Home</a></h1>
  <a id="tab" href="/?stage=zero1&amp;phase=2" hx-get="/?stage=zero1&amp;phase=2" hx-target="#widget"
     hx-swap="outerHTML" hx-push-url="true">ZeRO-1 &rarr;</a>
  <a id="gone" href="/embed?stage=zero1" hx-get="/embed?stage=zero1" hx-target="#widget" hx-swap="outerHTML">Embed</a>
  <a id="inner" href="/?stage=zero1&amp;phase=2" hx-get="/?stage=zero1&amp;phase=2" hx-target="#x">Inner</a>
  <a id="far" href="https://example.org/x">Away</a> <a id="here" href="#grid">Grid</a>
  <form id="run-form" action="/" method="get" hx-get="/" hx-trigger="change">
    <input type="hidden" name="stage" value="dp"><input id="gpus" name="gpus" value="8">
    <select id="s"><option>a</option></select><button type="submit">Go</button></form>
  <form class="phase-form" action="/"><input id="slider" type="range" name="phase"></form>
</body>
</html>
"""
TARGETS = {url_key(u): file_name(u) for u in ("/", "/?stage=zero1&phase=2")}


@pytest.fixture(scope="module")
def rewritten() -> tuple[BeautifulSoup, set[str], str]:
    result = rewrite(PAGE, "index.html", TARGETS, "default-src 'self'")
    return dom(result.html), result.missing, result.html


def test_links_point_at_the_exported_files(rewritten: tuple[BeautifulSoup, set[str], str]) -> None:
    tree, _, _ = rewritten
    tab = one(tree, "#tab")
    assert (tab["href"], tab["hx-get"]) == ("zero1-phase-2.html", "zero1-phase-2.html")
    assert one(tree, "h1 a")["href"] == "index.html"
    assert one(tree, "link[rel=stylesheet]")["href"] == "static/app.css"
    assert one(tree, "#far")["href"] == "https://example.org/x"
    assert one(tree, "#here")["href"] == "#grid"


def test_htmx_takes_the_target_out_of_the_whole_static_page(rewritten: tuple[BeautifulSoup, set[str], str]) -> None:
    tree, _, _ = rewritten
    assert one(tree, "#tab")["hx-select"] == "#widget"
    assert one(tree, "#tab")["hx-push-url"] == "true"
    # An innerHTML swap of a whole page cannot be selected safely: it becomes a plain link.
    inner = one(tree, "#inner")
    assert inner["href"] == "zero1-phase-2.html"
    assert not [a for a in inner.attrs if a.startswith("hx-")]


def test_a_link_to_a_page_not_exported_becomes_text_that_says_so(
    rewritten: tuple[BeautifulSoup, set[str], str],
) -> None:
    tree, missing, _ = rewritten
    gone = one(tree, "#gone")
    assert "href" not in gone.attrs
    assert not [a for a in gone.attrs if a.startswith("hx-")]
    assert gone["aria-disabled"] == "true"
    assert gone["title"] == MISSING_NOTE
    assert missing == {"/embed?stage=zero1"}


def test_forms_are_disabled_with_a_note(rewritten: tuple[BeautifulSoup, set[str], str]) -> None:
    tree, _, _ = rewritten
    for form in tree.select("form"):
        assert "action" not in form.attrs
        assert not [a for a in form.attrs if a.startswith("hx-")]
    assert all(c.has_attr("disabled") for c in tree.select("#gpus, #s, button, #slider"))
    assert not one(tree, "input[type=hidden]").has_attr("disabled")
    notes = tree.select(".export-note")
    assert [n.get_text() for n in notes] == [FORM_NOTE]  # the run form's; the slider's is its title
    assert notes[0].find_next_sibling() is one(tree, "#run-form")
    assert "needs the live app" in str(one(tree, "#slider")["title"])


def test_the_head_carries_the_policy_and_the_file_script(rewritten: tuple[BeautifulSoup, set[str], str]) -> None:
    tree, _, _ = rewritten
    meta = one(tree, "meta[http-equiv='Content-Security-Policy']")
    assert meta["content"] == "default-src 'self'"
    assert one(tree, "meta[name=referrer]")["content"] == "no-referrer"
    scripts = [s["src"] for s in tree.select("script")]
    assert scripts == ["static/export.js", "static/htmx-2.0.11.min.js"]


def test_everything_else_is_copied_as_it_was(rewritten: tuple[BeautifulSoup, set[str], str]) -> None:
    _, _, html = rewritten
    assert html.startswith('<!doctype html>\n<html lang="en">\n<head>\n  <meta charset="utf-8">')
    assert "<title>T &amp; t</title>" in html
    assert "<!-- a comment -->" in html
    assert "ZeRO-1 &rarr;</a>" in html
    assert html.endswith("</body>\n</html>\n")


# The whole export, once for the module.


@pytest.fixture(scope="module")
def site(exported_site: Path) -> Path:
    return exported_site


@pytest.fixture(scope="module")
def pages(site: Path) -> dict[Path, BeautifulSoup]:
    """Every exported page, parsed once."""
    return {page: dom(page.read_text()) for page in sorted(site.rglob("*.html")) if page.parent.name != "static"}


def _internal(value: str) -> bool:
    parts = urlsplit(value)
    return not (parts.scheme or parts.netloc) and bool(parts.path)


def test_the_export_has_every_page_json_and_asset(site: Path) -> None:
    names = {p.relative_to(site).as_posix() for p in site.rglob("*") if p.is_file()}
    pages = _exported_pages()
    json = {"api/memory.json", "api/stages.json", "api/layout.json", "api/measured.json", "openapi.json"}
    json |= {f"api/layout/{stage.value}.json" for stage in Stage}
    assets = {f"static/{p.name}" for p in STATIC_DIR.iterdir()} | {f"static/{name}" for name in BUNDLES}
    assert names == pages | json | assets | {"favicon.ico"}
    for asset in STATIC_DIR.iterdir():
        assert (site / "static" / asset.name).read_bytes() == asset.read_bytes()
    # The bundle the pages load, with each of its modules in it.
    bundle = (site / "static" / "app.js").read_bytes()
    assert all(minified(name, (STATIC_DIR / name).read_bytes()).rstrip(b";\n") in bundle for name in BUNDLES["app.js"])


def test_every_internal_address_in_every_page_resolves_to_a_file(site: Path, pages: dict[Path, BeautifulSoup]) -> None:
    checked = 0
    for page, tree in pages.items():
        folder = page.parent.relative_to(site).as_posix()
        for element in tree.find_all(True):
            for name in URL_ATTRIBUTES:
                value = element.get(name)
                if not isinstance(value, str) or value in {"true", "false"}:
                    continue
                assert _internal(value) or value.startswith("#"), f"{page.name}: {name}={value} leaves the export"
                if value.startswith("#"):
                    continue
                assert not urlsplit(value).query, f"{page.name}: {value} has a query a static host ignores"
                target = posixpath.normpath(posixpath.join(folder, urlsplit(value).path))
                assert (site / target).is_file(), f"{page.name}: {name}={value} is missing"
                checked += 1
    assert checked > PAGES * 20


def test_every_htmx_request_selects_what_it_swaps_and_pushes_the_file(pages: dict[Path, BeautifulSoup]) -> None:
    for page, tree in pages.items():
        for element in tree.select("[hx-get]"):
            assert element["hx-select"] == element["hx-target"] == "#widget", page.name
            assert element["hx-swap"] == "morph"
            assert element["hx-get"] == element["href"]
        assert tree.select("form[action], form[hx-get]") == []


def test_every_page_carries_the_policy_and_no_inline_code(pages: dict[Path, BeautifulSoup]) -> None:
    assert len(pages) == PAGES
    for tree in pages.values():
        assert one(tree, "meta[http-equiv='Content-Security-Policy']")["content"] == meta_policy()
        assert tree.select("style, [style]") == []
        assert all(s.has_attr("src") for s in tree.select("script"))
        assert not [a for el in tree.find_all(True) for a in el.attrs if a.startswith("on")]


def test_each_page_shows_what_the_app_shows_at_that_address(site: Path, client: TestClient) -> None:
    for url in ("/", "/?stage=zero2", "/?stage=zero3&phase=5", "/?stage=dp&phase=20"):
        exported = dom((site / file_name(url)).read_text())
        live = dom(client.get(url).text)
        assert text(exported, "#stage-heading") == text(live, "#stage-heading")
        assert text(exported, "#grid") == text(live, "#grid")
        assert exported.title == live.title
        step: Tag | None = exported.select_one("#step")
        assert (step["data-phase"] if step else None) == (one(live, "#step")["data-phase"] if step else None)


def test_a_non_empty_folder_is_refused_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export", str(tmp_path)])
    assert exit_info.value.code == 2
    message = f"zero-bands export: {tmp_path} is not empty; use --force to write into it anyway\n"
    assert capsys.readouterr().err == message
    assert [p.name for p in tmp_path.iterdir()] == ["notes.txt"]


def test_a_file_in_the_way_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "site").write_text("")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export", str(tmp_path / "site")])
    assert exit_info.value.code == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_the_command_writes_the_site_and_says_how_much(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two pages are enough to count, and leave links to pages the copy lacks, which it lists.
    monkeypatch.setattr(export_module, "default_urls", lambda: ["/", "/?stage=zero1"])
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export", str(tmp_path), "--force"])
    assert exit_info.value.code == 0
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p.name != "notes.txt"]
    nbytes = sum(p.stat().st_size for p in files)
    out = capsys.readouterr()
    assert out.out.startswith(f"Wrote {len(files):,} files ({nbytes:,} bytes) to {tmp_path}: 2 pages")
    assert len(files) == 2 + len(list(STATIC_DIR.iterdir())) + len(BUNDLES)
    header, *listed = out.err.splitlines()
    # The count it gives is the list it prints, and the list names the pages left out.
    assert header == f"{len(listed)} linked addresses are not in the copy and show as plain text:"
    assert {"  /?stage=zero3", "  /compare?left=dp&right=zero1", "  /?stage=zero1&theme=projector"} <= set(listed)
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert one(dom((tmp_path / "index.html").read_text()), "#switch-zero1")["href"] == "zero1.html"
    assert one(dom((tmp_path / "index.html").read_text()), "#switch-zero2")["title"] == MISSING_NOTE


def test_an_address_the_app_refuses_stops_the_export(tmp_path: Path) -> None:
    with pytest.raises(ExportError, match=r"the app answered 422 for /\?stage=zero9"):
        export_module.export(tmp_path / "out", urls=["/", "/?stage=zero9"])
    assert not (tmp_path / "out").exists()


def test_no_page_names_the_host_it_was_rendered_under(site: Path, pages: dict[Path, BeautifulSoup]) -> None:
    """The "Embed this" snippets need the live app's address: the copy says so instead of showing a made-up one."""
    for page, tree in pages.items():
        assert f"//{EXPORT_HOST}" not in page.read_text(encoding="utf-8"), page.name
        assert tree.select("#embed-this") == []
    index = pages[site / "index.html"]
    notes = [n.get_text() for n in index.select(".export-note")]
    assert any("run zero-bands" in n and "embed" in n.lower() for n in notes)


def test_the_list_of_keys_is_in_the_copy_itself(pages: dict[Path, BeautifulSoup]) -> None:
    # The live page fetches it on demand; a static host would answer that with the whole file.
    for page, tree in pages.items():
        if tree.select(".keys-hint"):
            assert tree.select("#keys-help-slot") == [], page.name
            first_key = one(tree, "dialog#keys-help dt").get_text(" ", strip=True)
            assert first_key == "0 1 2 3", page.name


def test_the_training_configs_need_the_live_app(pages: dict[Path, BeautifulSoup]) -> None:
    """Their links ask /api/config for the run and the paste box posts: a note stands in their place."""
    for page, tree in pages.items():
        assert tree.select("#config-tools") == [], page.name
        assert not tree.select('form[method="post"]'), page.name
    notes = [n.get_text() for tree in pages.values() for n in tree.select(".export-note")]
    assert any("DeepSpeed" in n and "run zero-bands" in n for n in notes)
