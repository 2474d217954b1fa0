"""app/web/embed_view.py: /embed, the widget alone, and the "Embed this" panel with its snippets."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from bs4 import Tag
from fastapi.testclient import TestClient

from app.web.embed_view import EMBED_HEIGHT, embed_view
from tests.conftest import dom, one, opened_panel, sent, text, unversioned
from tests.web.helpers import query_of


def _widget_urls(tree: Tag) -> list[str]:
    """Every address a reader can go to from the widget: links, htmx requests and form actions."""
    widget = one(tree, "#widget")
    # A source of an overhead's default (a.source) is a page elsewhere, opened in its own tab; the glossary
    # (#words) is a static file, the same for every view.
    urls = [str(tag["href"]) for tag in widget.select("a[href]:not(.source, #words a)")]
    urls += [str(tag["hx-get"]) for tag in widget.select("[hx-get]:not(#words-slot)")]
    urls += [str(tag["action"]) for tag in widget.select("form[action]")]
    return urls


def test_embed_is_the_widget_without_the_site_around_it(client: TestClient) -> None:
    response = client.get("/embed?stage=zero1")
    assert response.status_code == 200
    tree = dom(response.text)
    assert tree.select(".masthead, .colophon, #embed-this") == []
    assert one(tree, "body")["class"] == ["embed"]
    assert one(tree, "#grid")["data-stage"] == "zero1"
    scripts = [unversioned(str(s["src"])) for s in tree.select("script")]
    assert "/static/embed-frame.js" in scripts
    assert tree.select("meta[name=htmx-config]")


def test_the_page_keeps_its_site_and_does_not_report_its_height(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero1").text)
    assert tree.select(".masthead")
    assert tree.select(".colophon")
    assert "/static/embed-frame.js" not in [unversioned(str(s["src"])) for s in tree.select("script")]


@pytest.mark.parametrize(
    ("controls", "switcher", "step_controls"),
    [("", True, False), ("stages", True, False), ("step", True, True), ("none", False, False)],
)
@pytest.mark.parametrize("phase", ["", "&phase=5"])
def test_controls_choose_what_shows(
    client: TestClient, controls: str, switcher: bool, step_controls: bool, phase: str
) -> None:
    chosen = f"&controls={controls}" if controls else ""
    tree = dom(client.get(f"/embed?stage=zero2{chosen}{phase}").text)
    assert bool(tree.select("nav.switcher")) is switcher
    if phase:
        # The phase is drawn whatever the controls; only the step's buttons come and go.
        assert one(tree, "#step")["data-phase"] == "5"
        assert bool(tree.select(".step-controls #step-next, #phase-slider")) is step_controls
        assert bool(tree.select(".step-keys")) is step_controls
    else:
        # With the step's controls the step is always open, at rest at its first phase (the state at rest):
        # there is no way into it to take, and none elsewhere.
        assert tree.select("#watch-step, #step-enter") == []
        assert [str(s["data-phase"]) for s in tree.select("#step")] == (["0"] if step_controls else [])
    assert len(tree.select("#grid .card")) == 8


@pytest.mark.parametrize(
    ("controls", "asked", "drawn"),
    [("step", None, 0), ("step", 0, 0), ("step", 5, 5), ("stages", None, None), ("stages", 5, 5), ("none", None, None)],
)
def test_the_step_controls_open_the_step_at_its_first_phase(
    controls: str, asked: int | None, drawn: int | None
) -> None:
    assert embed_view(controls, False).phase(asked) == drawn


def test_the_calculator_is_hidden_unless_asked_for(client: TestClient) -> None:
    plain = dom(client.get("/embed?stage=zero3&gpus=16").text)
    assert plain.select("#run-form, table.figures, .boundary") == []
    # Still the run described: 16 cards.
    assert len(plain.select("#grid .card")) == 16
    shown = dom(client.get("/embed?stage=zero3&gpus=16&calculator=1&controls=none").text)
    form = one(shown, "#run-form")
    assert form["action"] == "/embed"
    assert form["hx-get"] == "/embed"
    hidden = {str(i["name"]): str(i["value"]) for i in form.select("input[type=hidden]")}
    assert hidden == {"stage": "zero3", "controls": "none", "calculator": "1"}
    assert shown.select("table.figures")
    assert shown.select(".boundary")


@pytest.mark.parametrize(
    "path",
    [
        "/embed?stage=zero1",
        "/embed?stage=zero3&phase=7&controls=step&gpus=16&model=llama-3-70b",
        "/embed?stage=dp&controls=step",
        "/embed?stage=zero2&calculator=1&capacity=80GB",
        "/embed?stage=zero2&phase=3&calculator=1&controls=step",
    ],
)
def test_every_link_in_an_embed_stays_in_the_embed_with_its_options(client: TestClient, path: str) -> None:
    asked = query_of(path)
    options = {k: v for k, v in asked.items() if k in {"controls", "calculator"}}
    run = {k: v for k, v in asked.items() if k in {"gpus", "model", "capacity"}}
    urls = _widget_urls(dom(client.get(path).text))
    assert urls
    for url in urls:
        assert urlsplit(url).path == "/embed", url
        query = query_of(url)
        if urlsplit(url).query:  # the forms carry the options in hidden fields instead
            assert {k: v for k, v in query.items() if k in {"controls", "calculator"}} == options, url
            assert {k: v for k, v in query.items() if k in run} == run, url
    # The phase slider sends the options too.
    for form in dom(client.get(path).text).select("form.phase-form"):
        hidden = {str(i["name"]): [str(i["value"])] for i in form.select("input[type=hidden]")}
        assert {k: v for k, v in hidden.items() if k in {"controls", "calculator"}} == options


@pytest.mark.parametrize("path", ["/?stage=zero1", "/embed?stage=zero1", "/embed?stage=zero1&controls=none"])
def test_full_screen_is_offered_by_script_with_a_note_for_when_it_is_forbidden(client: TestClient, path: str) -> None:
    tree = dom(client.get(path).text)
    button = one(tree, "#widget button#fullscreen")
    # Hidden until static/tools.js finds full screen allowed; otherwise the note shows instead.
    assert button.has_attr("hidden")
    assert one(tree, "#fullscreen-note").has_attr("hidden")
    assert "/static/app.js" in [unversioned(str(s["src"])) for s in tree.select("script")]


def _entries(tree: Tag, selector: str) -> list[str]:
    return [" ".join(li.get_text(" ").split()) for li in tree.select(selector)]


def test_an_embed_has_the_compact_key_and_leaves_the_full_pages_prose_to_screen_readers(client: TestClient) -> None:
    bare = dom(client.get("/embed?stage=zero2&controls=none").text)
    key = one(bare, ".legend")
    assert key["class"] == ["legend", "compact-key"]
    assert _entries(key, ".states li") == ["Filled : stored on this card", "Dashed : another card stores it"]
    assert _entries(key, ".bands li")[0] == "Weights bf16, 2 B"
    assert len(_entries(key, ".bands li")) == 4
    # The bars: what they are drawn to, and only what ZeRO-2's draw (gradients, no assembled weights).
    bars = _entries(key, ".bar-key li")
    assert bars[0].startswith("Bar : at rest, then in hand, one scale for all four")
    assert bars[1:] == ["Bar, dark amber : a layer's gradients"]
    # The picture alone: the stage's paragraph is the course page's to write; the note under the cards
    # stays for screen readers (hidden by static/embed.css, not removed).
    assert bare.select(".explanation") == []
    assert bare.select(".grid-note")
    # With the switcher: the stage's paragraph, and the ring a switch leaves.
    stages = dom(client.get("/embed?stage=zero2").text)
    assert stages.select(".explanation")
    assert "Ringed , for a moment: changed by a switch" in _entries(stages, ".compact-key .states li")
    # Full screen beside the stage's heading: after the picture (the grid's heading), before the heading.
    order = [str(t.get("id") or t["class"][0]) for t in one(stages, "#widget").find_all(["nav", "button", "h2"])]
    assert order == ["switcher", "grid-heading", "fullscreen", "stage-heading"]
    step = dom(client.get("/embed?stage=zero3&phase=5&controls=step").text)
    states = [e.split(" :")[0] for e in _entries(step, ".compact-key .states li")]
    assert states == ["Filled", "Striped", "Barred", "Dashed", "Ringed"]
    assert _entries(step, ".compact-key .bar-key li")[-1] == "Bar, pale : peak so far"
    # The full key on the page, and in the projector's embed, which has a layout of its own.
    for path in ["/?stage=zero2", "/embed?stage=zero2&theme=projector"]:
        assert dom(client.get(path).text).select(".compact-key") == [], path
        assert one(dom(client.get(path).text), ".legend")["class"] == ["legend"], path


def _snippet(tree: Tag) -> tuple[Tag, Tag]:
    """The iframe and script of the snippet in the panel's text box, parsed as a teacher's page would."""
    pasted = dom(one(tree, "#embed-snippet").get_text())
    return one(pasted, "iframe"), one(pasted, "script")


def test_the_page_offers_a_snippet_for_exactly_what_it_shows(client: TestClient) -> None:
    page = dom(client.get("/?stage=zero3&phase=6&gpus=16&model=llama-3-70b&capacity=80GB").text)
    assert text(page, "details#embed-this summary") == "Embed this"
    # The page carries only the way to the panel, loaded when opened.
    assert page.select("#embed-snippet") == []
    panel = opened_panel(client, page)
    frame, script = _snippet(panel)
    src = urlsplit(str(frame["src"]))
    assert (src.scheme, src.netloc, src.path) == ("http", "testserver", "/embed")
    assert query_of(str(frame["src"])) == {
        "stage": ["zero3"],
        "phase": ["6"],
        "gpus": ["16"],
        "model": ["llama-3-70b"],
        "capacity": ["80GB"],
    }
    assert frame["title"] == "ZeRO Bands: ZeRO-3"
    assert frame["allow"] == "fullscreen"
    assert frame["loading"] == "lazy"
    assert frame["width"] == "100%"
    assert frame["height"] == str(EMBED_HEIGHT)
    assert frame.has_attr("data-zero-bands")
    assert script["src"] == "http://testserver/static/embed.js"
    link = str(one(panel, "#share-link")["href"])
    assert link.startswith("http://testserver/?")
    assert query_of(link) == query_of(str(frame["src"]))
    assert one(panel, "#embed-url")["href"] == frame["src"]


def test_the_snippet_can_be_had_for_each_choice_of_controls(client: TestClient) -> None:
    page = dom(client.get("/?stage=zero1").text)
    tree = opened_panel(client, page)
    options = one(tree, "#embed-controls").select("option")
    assert [o["value"] for o in options] == ["stages", "step", "none"]
    assert [o.has_attr("selected") for o in options] == [True, False, False]
    for option in options:
        frame = one(dom(str(option["data-snippet"])), "iframe")
        expected = [] if option["value"] == "stages" else [option["value"]]
        assert query_of(str(frame["src"])).get("controls", []) == expected
        assert option["data-url"] == frame["src"]
    # No inline style on the page or the panel: the snippet's style attribute is text for the teacher.
    assert page.select("[style]") == tree.select("[style]") == []


def test_the_snippet_is_absolute_under_a_prefix() -> None:
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from app.main import create_app

    outer = Starlette(routes=[Mount("/course/zero", app=create_app())])
    with TestClient(outer, base_url="https://school.example") as prefixed:
        page = dom(prefixed.get("/course/zero/?stage=zero2").text)
        assert one(page, "#embed-this")["hx-get"] == "/course/zero/share?stage=zero2"
        frame, script = _snippet(opened_panel(prefixed, page))
        assert frame["src"] == "https://school.example/course/zero/embed?stage=zero2"
        assert script["src"] == "https://school.example/course/zero/static/embed.js"
        embedded = dom(prefixed.get("/course/zero/embed?stage=zero2").text)
        assert urlsplit(str(one(embedded, "#switch-zero1")["href"])).path == "/course/zero/embed"


# The panel in the page's theme; its snippet keeps the colours chosen, not the projector's type (a frame is a column).
@pytest.mark.parametrize(
    ("theme", "html_class", "framed"),
    [
        ("default", "theme-default", None),
        ("projector", "theme-projector", None),
        ("dark", "theme-default", "dark"),
        ("projector-light", "theme-projector", "light"),
    ],
)
def test_without_javascript_the_panel_opens_as_a_page_of_its_own(
    client: TestClient, theme: str, html_class: str, framed: str | None
) -> None:
    themed = "" if theme == "default" else f"&theme={theme}"
    page = dom(client.get(f"/?stage=zero1&gpus=16{themed}").text)
    link = one(page, "#embed-open")
    response = client.get(str(link["href"]))
    assert response.status_code == 200
    tree = dom(response.text)
    assert one(tree, "html")["class"] == [html_class]
    assert text(tree, "h1") == "ZeRO Bands"
    assert text(tree, "h2") == "Embed this view"
    # The way back is to the view the panel embeds, and the snippet embeds that same view.
    back = str(one(tree, "#share-back")["href"])
    assert query_of(back) == {"stage": ["zero1"], "gpus": ["16"], **({"theme": [theme]} if themed else {})}
    frame, _ = _snippet(tree)
    colours = {"theme": [framed]} if framed else {}
    assert query_of(str(frame["src"])) == {"stage": ["zero1"], "gpus": ["16"], **colours}
    # The Copy button and the choice of controls need the page's script: hidden until it runs, and the
    # hint says how to choose in the frame's address instead.
    assert one(tree, "#embed-copy").has_attr("hidden")
    assert one(tree, "#embed-controls-field").has_attr("hidden")
    assert "controls=" in text(tree, "#embed-controls-hint")
    assert [unversioned(str(s["src"])) for s in tree.select("script")] == [
        "/static/htmx-2.0.11.min.js",
        "/static/app.js",
    ]


def test_the_panel_is_fetched_on_its_own_and_never_pushes_an_address(client: TestClient) -> None:
    page = dom(client.get("/?stage=zero2&phase=3").text)
    panel = one(page, "details#embed-this")
    # Opened, it loads into its body; its request is its own, so it never waits on (or drops) a click.
    assert (panel["hx-trigger"], panel["hx-target"], panel["hx-swap"], panel["hx-sync"]) == (
        "toggle", "#embed-body", "innerHTML", "this:replace",
    )  # fmt: skip
    response = client.get(str(panel["hx-get"]), headers={"HX-Request": "true"})
    assert "hx-push-url" not in response.headers
    assert sent(response.text).select("html, h2, #share-back") == []
    frame, _ = _snippet(dom(response.text))
    assert query_of(str(frame["src"])) == {"stage": ["zero2"], "phase": ["3"]}


def test_the_panel_offers_the_calculator_and_each_snippet_follows_the_choice(client: TestClient) -> None:
    panel = opened_panel(client, dom(client.get("/?stage=zero1&gpus=16").text))
    box = one(panel, "input#embed-calculator[type=checkbox]")
    assert not box.has_attr("checked")
    # Shown by static/tools.js, with the drop-down; without it, links do the same.
    assert one(panel, "#embed-calculator-field").has_attr("hidden")
    for option in one(panel, "#embed-controls").select("option"):
        controls = [] if option["value"] == "stages" else [str(option["value"])]
        for data, calculator in [("data-snippet", []), ("data-snippet-calculator", ["1"])]:
            frame = one(dom(str(option[data])), "iframe")
            src = query_of(str(frame["src"]))
            assert (src.get("controls", []), src.get("calculator", []), src["gpus"]) == (controls, calculator, ["16"])
        assert option["data-url-calculator"] == one(dom(str(option["data-snippet-calculator"])), "iframe")["src"]


def test_without_javascript_the_panels_choices_are_links(client: TestClient) -> None:
    page = dom(client.get("/share?stage=zero1&gpus=16").text)
    links = {a.get_text(): str(a["href"]) for a in page.select("#embed-choices a")}
    assert links == {
        "The stage switcher": "/share?stage=zero1&gpus=16",
        "The stage switcher and the step's controls": "/share?stage=zero1&gpus=16&controls=step",
        "None: just the picture": "/share?stage=zero1&gpus=16&controls=none",
        "Without": "/share?stage=zero1&gpus=16",
        "With": "/share?stage=zero1&gpus=16&calculator=1",
    }
    # Followed, a link shows its choice: the snippet, the drop-down and the box, and the links mark it.
    chosen = dom(client.get("/share?stage=zero1&gpus=16&controls=none&calculator=1").text)
    frame, _ = _snippet(chosen)
    assert query_of(str(frame["src"])) == {
        "stage": ["zero1"],
        "gpus": ["16"],
        "controls": ["none"],
        "calculator": ["1"],
    }
    assert one(chosen, "#embed-url")["href"] == frame["src"]
    assert one(chosen, "#embed-controls option[selected]")["value"] == "none"
    assert one(chosen, "#embed-calculator").has_attr("checked")
    assert [a.get_text() for a in chosen.select('#embed-choices a[aria-current="true"]')] == [
        "None: just the picture",
        "With",
    ]
    # The way back is to the page, without the embed's options.
    assert query_of(str(one(chosen, "#share-back")["href"])) == {"stage": ["zero1"], "gpus": ["16"]}
    bad = client.get("/share?stage=zero1&controls=all")
    assert bad.status_code == 422
    assert "“controls”" in text(dom(bad.text), ".notice-message")
