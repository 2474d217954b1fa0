"""app/web/links.py: the one URL builder; every address reads back as the stage, run, phase and options."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import parse_qsl, urlsplit

import pytest
from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from app.domain.stages import Stage
from app.main import create_app
from app.web.inputs import Theme
from app.web.links import Links
from tests.conftest import dom, one, opened_panel

# Values as people type them into the run form: spaces, commas, ampersands, non-ASCII.
_values = st.text(st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), min_size=1, max_size=12)
_runs = st.dictionaries(st.sampled_from(["model", "params", "gpus", "capacity", "units"]), _values)
_keeps = st.dictionaries(st.sampled_from(["controls", "calculator"]), _values)


@given(
    run=_runs,
    keep=_keeps,
    theme=st.sampled_from(list(Theme)),
    stage=st.sampled_from(list(Stage)),
    phase=st.none() | st.integers(0, 20),
)
def test_an_address_reads_back_as_the_stage_the_run_the_phase_and_the_options_in_order(
    run: dict[str, str], keep: dict[str, str], theme: Theme, stage: Stage, phase: int | None
) -> None:
    links = Links("/prefix/", tuple(run.items()), phase, tuple(keep.items()), theme)
    for at in (phase, None, 3):
        address = urlsplit(links.at(stage, at))
        assert address.path == "/prefix/"
        moment = [] if at is None else [("phase", str(at))]
        themed = [] if theme is Theme.DEFAULT else [("theme", theme.value)]
        expected = [("stage", stage.value), *run.items(), *moment, *keep.items(), *themed]
        assert parse_qsl(address.query, keep_blank_values=True) == expected
    assert links(stage) == links.at(stage, phase)


def test_app_mounted_under_a_prefix_links_under_it() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from app.main import create_app

    outer = Starlette(routes=[Mount("/course/zero", app=create_app())])
    with TestClient(outer) as prefixed:
        tree = dom(prefixed.get("/course/zero/?stage=zero1").text)
        # The "Embed this" panel's links are absolute, for pasting elsewhere; its choices of what to embed
        # (which open the panel again, chosen) and every other link are root-relative.
        panel = opened_panel(prefixed, tree).select("[href]")
    choices = [tag for tag in panel if "/share?" in str(tag["href"])]
    shared = [tag for tag in panel if tag not in choices]
    assert shared
    assert choices
    assert all(str(tag["href"]).startswith("http://testserver/course/zero/") for tag in shared)
    assert all(str(tag["href"]).startswith("/course/zero/share?") for tag in choices)
    urls = [
        str(tag.get("href") or tag.get("src") or tag.get("hx-get"))
        for tag in tree.select("[href]:not(a.source), [src], [hx-get]")  # a.source: an overhead's source elsewhere
    ]
    assert urls
    # An in-page link (the skip link, "#grid") stays on whatever address the page has.
    assert all(url.startswith(("/course/zero/", "#")) for url in urls), urls
    assert any(not url.startswith("#") for url in urls)


@pytest.fixture(scope="module")
def under_root() -> Iterator[TestClient]:
    """The app behind a proxy that strips its prefix (`zero-bands --root-path /course/zero`)."""
    with TestClient(create_app(), root_path="/course/zero") as prefixed:
        yield prefixed


# What ZeRO-1 of the default run links to, worked out by hand: the prefix the server names, then the
# route's path and the query the page keeps (the next stage with the hint of the one shown; ZeRO-1
# beside the next stage up, ZeRO-2; the measured page of the stage; the panel; the layout's JSON).
UNDER_ROOT = [
    ("#switch-zero2", "href", "/course/zero/?stage=zero2&from=zero1"),
    ("#compare-link", "href", "/course/zero/compare?left=zero1&right=zero2"),
    ("#measured-link", "href", "/course/zero/measured?stage=zero1"),
    ("details#embed-this", "hx-get", "/course/zero/share?stage=zero1"),
    ("#json-links a:nth-of-type(3)", "href", "/course/zero/api/layout?stage=zero1"),
]


@pytest.mark.parametrize(("selector", "attribute", "address"), UNDER_ROOT)
def test_an_app_served_under_a_root_path_links_under_it(
    under_root: TestClient, selector: str, attribute: str, address: str
) -> None:
    tree = dom(under_root.get("/?stage=zero1").text)
    assert one(tree, selector)[attribute] == address
