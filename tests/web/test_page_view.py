"""app/web/page_view.py: the page as a whole: its head, skip link, keys, footer and theme."""

from __future__ import annotations

import json
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import pytest
from bs4 import Tag
from fastapi.testclient import TestClient

from app.domain.stages import Stage
from app.web.embed_view import embed_view
from app.web.links import Links
from app.web.page_view import error_view, page_view
from tests.conftest import dom, one, text, unversioned
from tests.web.helpers import HX, RUN, get_tree, query_of, run_page, theme_in


def test_page_head_loads_only_local_assets_and_configures_htmx(client: TestClient) -> None:
    tree = dom(client.get("/").text)
    scripts = [unversioned(str(s["src"])) for s in tree.select("script")]
    assert scripts == [
        "/static/htmx-2.0.11.min.js",
        "/static/idiomorph-ext-0.8.0.min.js",
        "/static/app.js",
    ]
    assert all(not s.string for s in tree.select("script"))
    assert [unversioned(str(link["href"])) for link in tree.select("link[rel~=stylesheet]")] == ["/static/app.css"]
    assert tree.select("[style]") == []
    assert not any(attr.startswith(("on", "hx-on")) for tag in tree.find_all(True) for attr in tag.attrs)
    config = tree.select_one('meta[name="htmx-config"]')
    assert config is not None
    settings = json.loads(str(config["content"]))
    assert settings["allowEval"] is False
    assert settings["includeIndicatorStyles"] is False
    assert settings["historyCacheSize"] == 0


def test_the_skip_link_leads_to_the_grid(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero1").text)
    first = tree.body.find(True) if tree.body else None
    assert first is not None
    assert "skip-link" in (first.get("class") or [])
    assert first.get("href") == "#grid"
    assert tree.select_one("#grid") is not None
    # A notice has no grid, so no skip link that leads nowhere.
    assert dom(client.get("/?stage=nope").text).select(".skip-link") == []


def test_keys_script_hint_and_help_dialog(client: TestClient) -> None:
    tree = get_tree(client, "stage=dp")
    assert one(tree, 'script[src^="/static/app.js?v="]').has_attr("defer")
    assert text(tree, ".keys-hint") == "Press ? for keys"
    # The list itself is fetched when ? is first pressed: from the address the page names, with htmx.
    assert tree.select("dialog") == []
    slot = one(tree, "#keys-help-slot")
    assert (slot["hx-trigger"], slot["hx-swap"]) == ("keys-help from:body", "outerHTML")
    response = client.get(str(slot["hx-get"]))
    assert response.headers["content-type"].startswith("text/html")
    dialog = one(dom(response.text), "dialog#keys-help")
    keys = [" ".join(dt.get_text(" ").split()) for dt in dialog.select("dt")]
    assert keys == ["0 1 2 3", "← → PageUp PageDown", "Home End", "Space", "b .", "f", "?", "Esc"]
    assert one(dialog, "form[method=dialog] button").get_text() == "Close"


@pytest.mark.parametrize(
    ("stage", "left", "right"), [("dp", "dp", "zero1"), ("zero2", "zero2", "zero3"), ("zero3", "dp", "zero3")]
)
def test_the_page_links_to_compare(client: TestClient, stage: str, left: str, right: str) -> None:
    href = str(one(get_tree(client, f"stage={stage}&gpus=16"), "#compare-link")["href"])
    assert urlsplit(href).path == "/compare"
    assert query_of(href) == {"left": [left], "right": [right], "gpus": ["16"]}


@pytest.mark.parametrize("headers", [{}, {"HX-Request": "true"}], ids=["page", "swap"])
def test_the_json_links_carry_the_run_drawn_and_answer_for_it(client: TestClient, headers: dict[str, str]) -> None:
    tree = run_page(client, f"{RUN}&stage=zero3&phase=3&theme=projector", headers)
    links = one(tree, "#json-links")
    # A swap replaces the footer's links out of band: the footer itself is not swapped.
    assert links.get("hx-swap-oob") == ("innerHTML" if headers else None)
    memory, layout = one(links, "a:nth-of-type(1)")["href"], one(links, "a:nth-of-type(3)")["href"]
    assert isinstance(memory, str)
    assert isinstance(layout, str)
    run = parse_qs(RUN)
    # The run's parameters, and the stage for the layout; not the phase or the theme, which the JSON has not.
    assert urlsplit(memory).path == "/api/memory"
    assert parse_qs(urlsplit(memory).query) == run
    assert urlsplit(layout).path == "/api/layout"
    assert parse_qs(urlsplit(layout).query) == {**run, "stage": ["zero3"]}
    inputs = client.get(memory).json()["inputs"]
    assert (inputs["params"], inputs["gpus"], inputs["largest_layer"], inputs["recipe"]) == (7, 16, 5, "fp32-adam")
    grid = client.get(layout).json()
    assert (grid["stage"], grid["gpus"], [b["bytes"] for b in grid["bands"]]) == ("zero3", 16, [4, 4, 0, 8])


def test_the_default_runs_json_links_are_the_bare_addresses(client: TestClient) -> None:
    tree = run_page(client, "")
    assert one(tree, "#json-links a:nth-of-type(1)")["href"] == "/api/memory"
    assert one(tree, "#json-links a:nth-of-type(3)")["href"] == "/api/layout?stage=dp"
    assert run_page(client, "stage=zero2", {"HX-Request": "true"}).select("#json-links") != []


RUN_16 = "/?stage=zero3&gpus=16&capacity=80GiB"

# Each theme: <html>'s class (the type) and data-scheme (the colours forced; None: the system's).
THEMES = [
    ("projector", ["theme-projector"], None),
    ("light", ["theme-default"], "light"),
    ("dark", ["theme-default"], "dark"),
    ("projector-light", ["theme-projector"], "light"),
    ("projector-dark", ["theme-projector"], "dark"),
]


def _toggle_links(tag: Tag) -> bool:
    """The theme's own toggle, whose links name another theme on purpose."""
    return tag.find_parent(class_="theme-toggle") is not None


@pytest.mark.parametrize("phase", ["", "&phase=9"])
@pytest.mark.parametrize(("theme", "html_class", "scheme"), THEMES)
def test_the_theme_is_on_the_page_and_every_address_keeps_it(
    client: TestClient, phase: str, theme: str, html_class: list[str], scheme: str | None
) -> None:
    tree = dom(client.get(f"{RUN_16}&theme={theme}{phase}").text)
    assert (one(tree, "html").get("class"), one(tree, "html").get("data-scheme")) == (html_class, scheme)
    links = [
        str(tag.get("href") or tag.get("hx-get"))
        # The glossary is a static file, the same in every theme (it takes the page's styles when fetched in).
        for tag in tree.select("#widget a[href]:not(.source, #words a), #widget a[hx-get], .masthead a[href]")
        if not _toggle_links(tag)
        and not str(tag.get("href") or "").startswith("#")
        # A snippet for a course page embeds the colours only: the frame is a column, not a projector.
        and not tag.find_parent(class_=["embed-this", "config-tools"])  # a training config has no theme
    ]
    forms = [tag for tag in tree.select("#widget form") if tag.get("method") == "get"]
    assert links
    assert forms
    for url in links:
        assert theme_in(url) == [theme], url
    for form in forms:
        hidden = [i for i in form.select('input[type="hidden"]') if i.get("name") == "theme"]
        assert [i.get("value") for i in hidden] == [theme], form.get("id") or form.get("class")


def test_the_default_theme_adds_nothing_to_addresses(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero1&phase=3").text)
    assert one(tree, "html").get("class") == ["theme-default"]
    assert not one(tree, "html").has_attr("data-scheme")
    assert not any(theme_in(str(a.get("href"))) for a in tree.select("#widget a[href]") if not _toggle_links(a))
    assert not tree.select('input[name="theme"]')


# The toggle in each theme: the other type in the same colours ("Projector view" / "Normal view"), and
# each colour scheme in the same type, the one shown marked.
TOGGLES = [
    ("", "Projector view", ["projector"], [[], ["light"], ["dark"]], "scheme-system"),
    ("light", "Projector view", ["projector-light"], [[], ["light"], ["dark"]], "scheme-light"),
    ("dark", "Projector view", ["projector-dark"], [[], ["light"], ["dark"]], "scheme-dark"),
    ("projector", "Normal view", [], [["projector"], ["projector-light"], ["projector-dark"]], "scheme-system"),
    (
        "projector-light",
        "Normal view",
        ["light"],
        [["projector"], ["projector-light"], ["projector-dark"]],
        "scheme-light",
    ),
    (
        "projector-dark",
        "Normal view",
        ["dark"],
        [["projector"], ["projector-light"], ["projector-dark"]],
        "scheme-dark",
    ),
]


@pytest.mark.parametrize(("theme", "label", "other", "schemes", "current"), TOGGLES)
def test_the_toggle_offers_each_theme_keeping_the_run_and_phase(
    client: TestClient, theme: str, label: str, other: list[str], schemes: list[list[str]], current: str
) -> None:
    themed = f"&theme={theme}" if theme else ""
    tree = dom(client.get(f"/?stage=zero2&gpus=16&phase=5{themed}").text)
    toggle = one(tree, "#theme-toggle")
    assert text(tree, "#theme-toggle") == label
    # Whole page loads: the theme styles the page around the widget too.
    run = {"stage": ["zero2"], "gpus": ["16"], "phase": ["5"]}
    links = [toggle, *tree.select(".scheme-toggle a")]
    assert [a.get("hx-get") for a in links] == [None] * 4
    assert [query_of(str(a["href"])) for a in links] == [
        {**run, **({"theme": other} if other else {})},
        *({**run, **({"theme": s} if s else {})} for s in schemes),
    ]
    assert [(a["id"], a.get_text()) for a in tree.select(".scheme-toggle a")] == [
        ("scheme-system", "Auto"),
        ("scheme-light", "Light"),
        ("scheme-dark", "Dark"),
    ]
    assert [a["id"] for a in tree.select('.scheme-toggle a[aria-current="true"]')] == [current]
    # Each link leads to the view in that theme.
    back = dom(client.get(str(toggle["href"])).text)
    assert theme_in(str(one(back, "#theme-toggle")["href"])) == ([theme] if theme else [])


def test_a_swapped_fragment_keeps_the_theme(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero1&theme=projector", headers=HX).text)
    assert theme_in(str(one(tree, "#switch-zero2").get("href"))) == ["projector"]
    assert one(tree, '#run-form input[name="theme"]').get("value") == "projector"


# The words under the table: the run's own weight count for P in the page, the glossary fetched when the fold
# opens (static/words.html; tests/serving/test_assets.py reads it); an embed of the picture alone has none.
@pytest.mark.parametrize(
    ("path", "p_says"),
    [
        ("/?stage=zero3", "Here P is 30B weights."),
        ("/?stage=zero1&params=7.5B&gpus=64", "Here P is 7.5B weights."),
        ("/embed?stage=zero2&calculator=1", "Here P is 30B weights."),
        ("/embed?stage=zero2", None),
    ],
)
def test_the_words_the_figures_use_are_one_click_away(client: TestClient, path: str, p_says: str | None) -> None:
    for headers in ({}, {"HX-Request": "true"}):
        words = dom(client.get(path, headers=headers).text).select_one("details#words")
        if p_says is None:
            assert words is None
            continue
        assert words is not None
        assert "open" not in words.attrs
        assert " ".join(one(words, "p").get_text().split()) == p_says
        slot = one(words, "#words-slot")
        assert str(one(slot, "a")["href"]) == str(slot["hx-get"])
        assert str(slot["hx-get"]).startswith("/static/words.html?v=")


_PARTS = ("switcher", "switcher_alone", "form_top", "form_bottom", "explained", "watch", "step_controls",
          "calculator", "tools_top", "tools_side", "teach_field", "json_links")  # fmt: skip
"""What the widget draws or leaves out, decided in PageView (the template loops over each)."""


@pytest.mark.parametrize(
    ("embed", "first", "phase", "drawn"),
    [
        # The page: the switcher alone at the top, the form after the picture, every tool.
        (None, False, None, (1, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1, 1)),
        # A bad link's page: the form first, the switcher with it.
        (None, True, None, (1, 0, 1, 0, 1, 1, 1, 1, 1, 0, 1, 1)),
        # In the step: its panel, not the way into it.
        (None, False, 3, (1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1, 1)),
        # An embed by default: the switcher and the sentence, no step controls or calculator; the tools by the heading.
        (("stages", False), False, None, (1, 1, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0)),
        # The picture alone.
        (("none", False), False, None, (0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0)),
        # Everything an embed can have; a form first only where there is a calculator.
        (("step", True), True, None, (1, 0, 1, 0, 1, 1, 1, 1, 0, 1, 0, 0)),
        (("step", False), True, None, (1, 1, 0, 0, 1, 1, 1, 0, 0, 1, 0, 0)),
    ],
)
def test_each_part_of_the_widget_is_decided_when_the_view_is_built(
    embed: tuple[str, bool] | None, first: bool, phase: int | None, drawn: tuple[int, ...]
) -> None:
    view = page_view(Stage.ZERO2, Links("/", phase=phase), phase=phase)
    view = replace(view, embed=embed_view(*embed) if embed else None, form_first=first, theme_href="/?theme=projector")
    assert tuple(len(getattr(view, part)) for part in _PARTS) == drawn
    assert view.key is not None
    assert view.key.compact is (embed is not None)
    assert view.widget_class == ("widget embedded" if embed else "widget")


@pytest.mark.parametrize(
    ("embed", "nav", "toggles"),
    [(None, ("step-nav step-bar",), (("/?theme=projector", "Projector view"),)), (("step", False), ("step-nav",), ())],
)
def test_the_step_bar_and_the_theme_toggle_are_the_pages(
    embed: tuple[str, bool] | None, nav: tuple[str, ...], toggles: tuple[tuple[str, str], ...]
) -> None:
    view = replace(page_view(Stage.ZERO3, Links("/")), embed=embed_view(*embed) if embed else None,
                   theme_href="/?theme=projector")  # fmt: skip
    assert view.step_controls == nav
    assert tuple((t.size.href, t.size.label) for bar in view.tools_top + view.tools_side for t in bar) == toggles


def test_an_error_draws_no_stage_and_keeps_the_switcher_and_the_ways_on() -> None:
    view = error_view("Not understood.", Links("/"), Stage.ZERO1, "/compare", "/measured")
    assert (view.errors, view.stages, view.key, view.calculator, view.form_top, view.form_bottom) == (
        ("Not understood.",),
        (),
        None,
        (),
        (),
        (),
    )
    assert [link.stage for links in view.switcher_alone for link in links if link.link_current] == [Stage.ZERO1]
    assert [(w.id, w.href) for w in view.ways_on] == [("compare-link", "/compare"), ("measured-link", "/measured")]


@pytest.mark.parametrize(("address", "phase", "attrs"), [
    ("", None, {"data-address": None, "data-stage": "zero2", "data-phase": ""}),
    ("/?stage=zero2&phase=4", 4, {"data-address": "/?stage=zero2&phase=4", "data-stage": "zero2", "data-phase": "4"}),
])  # fmt: skip
def test_the_widget_names_its_address_stage_and_phase(address: str, phase: int | None, attrs: dict[str, str]) -> None:
    view = replace(page_view(Stage.ZERO2, Links("/", phase=phase), phase=phase), address=address)
    assert view.widget_attrs == attrs
    assert view.teach_field == (address,)
