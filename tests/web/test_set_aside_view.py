"""app/web/set_aside_view.py: the notice of the values a bad link set aside, and what is drawn instead."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
from bs4 import Tag
from fastapi.testclient import TestClient

from tests.conftest import dom, one, text
from tests.web.helpers import SHOWN_16, after_the_switcher

# A bad link: what is given, the field the form shows it in, what would be accepted, what is drawn instead.
BAD_LINKS = [
    ({"gpus": "0"}, "f-gpus", "GPUs", "between 1 and 4096", "8 GPUs, the default"),
    ({"gpus": "abc"}, "f-gpus", "GPUs", "between 1 and 4096", "8 GPUs, the default"),
    ({"params": "-1"}, "f-params", "Weights", "a number of weights", "30B weights, the default"),
    ({"capacity": "0"}, "f-capacity", "Card memory", "a memory size", "no card memory, so no fit check"),
    ({"stage": "zero9"}, None, "“stage”", "'dp', 'zero1', 'zero2' or 'zero3'", None),
]


@pytest.mark.parametrize(
    ("query", "field", "named", "accepted", "drawn"),
    BAD_LINKS,
    ids=["gpus=0", "gpus=abc", "params=-1", "capacity=0", "stage=zero9"],
)
def test_a_bad_link_says_so_first_naming_the_value_and_what_is_accepted(
    client: TestClient, query: dict[str, str], field: str | None, named: str, accepted: str, drawn: str | None
) -> None:
    response = client.get("/", params=query)
    assert response.status_code == 422
    tree = dom(response.text)
    after = after_the_switcher(tree)
    # The message is the first thing after the switcher (with the form to correct it under it, in one
    # part of the widget): the field, the value given and what is accepted.
    message = after[0] if field is None else after[0].find(True)
    assert isinstance(message, Tag)
    assert "notice" in message["class"]
    assert message.get("role") == "alert"
    said = " ".join(message.get_text(" ").split())
    (value,) = query.values()
    assert f"“{value}”" in said
    assert named in said
    assert accepted in said
    # The other ways on stay: the switcher, the side-by-side page, the measured one.
    assert len(tree.select("nav.switcher a")) == 4
    assert urlsplit(str(one(tree, "#compare-link")["href"])).path == "/compare"
    assert urlsplit(str(one(tree, "#measured-link")["href"])).path == "/measured"
    if field is None:
        assert tree.select("#grid") == []
        return
    # Then the form, its field marked with the message beside it; then the picture, said to be drawn without it.
    assert after[0]["class"] == ["form-first"]
    assert [str(c.get("id")) for c in after[0].find_all(True, recursive=False)] == ["set-aside", "run-form"]
    assert one(tree, f"#{field}") in after[0].select('#run-form [aria-invalid="true"]')
    assert one(message, "#set-aside-fix")["href"] == f"#{field}"
    assert text(tree, "#drawn-instead") == f"Drawn without {next(iter(query))}={value}: {drawn}."
    assert after[1]["class"] == ["stage-body"]
    stage_head = one(after[1], ".side > .stage-head")
    assert stage_head.select_one("#drawn-instead") is stage_head.find(True)
    assert tree.select(".side #run-form") == []


def test_a_bad_value_is_said_escaped_and_shortened(client: TestClient) -> None:
    value = '"><img src=x onerror=alert(1)>' + "x" * 200
    tree = dom(client.get("/", params={"model": "custom", "params": value}).text)
    notice = one(tree, "#set-aside")
    assert notice.select("img") == [] == tree.select("img")
    assert tree.select("script:not([src])") == []
    said = " ".join(notice.get_text(" ").split())
    assert '“"><img src=x onerror=alert(1)>xxxxxxxxx…”' in said
    assert len(text(tree, "#drawn-instead")) < 120


def test_several_values_set_aside_are_each_named(client: TestClient) -> None:
    tree = dom(client.get("/", params={"gpus": "0", "units": "furlongs", "stage": "zero3"}).text)
    items = [" ".join(li.get_text(" ").split()) for li in tree.select("#set-aside li")]
    assert [i.split(":")[0].strip() for i in items] == ["GPUs", "Units"]
    drawn = "Drawn without gpus=0 and units=furlongs: 8 GPUs, the default; GiB, the default."
    assert text(tree, "#drawn-instead") == drawn
    assert one(tree, "#grid")["data-stage"] == "zero3"


def test_the_run_on_the_screen_is_said_to_be_what_is_drawn(client: TestClient) -> None:
    # The form sent without JavaScript, over a page of 16 GPUs: the picture stays at 16, and says so.
    tree = dom(client.get("/?stage=zero2&gpus=0", headers={"Referer": SHOWN_16}).text)
    assert text(tree, "#drawn-instead") == "Drawn without gpus=0: 16 GPUs, as on the screen before."


def test_a_bad_link_to_an_embeds_calculator_says_so_first_and_stays_in_the_embed(client: TestClient) -> None:
    response = client.get("/embed?stage=zero2&calculator=1&controls=none&gpus=0")
    assert response.status_code == 422
    tree = dom(response.text)
    first = one(tree, "#widget .form-first")
    assert [str(c.get("id")) for c in first.find_all(True, recursive=False)] == ["set-aside", "run-form"]
    assert "“0” is not accepted" in text(first, "#set-aside")
    assert one(first, "#run-form")["action"] == "/embed"
    assert text(tree, "#drawn-instead") == "Drawn without gpus=0: 8 GPUs, the default."
    # Its links stay in the embed: no way out to the site's side-by-side or measured pages.
    assert tree.select("#compare-link, #measured-link, .masthead") == []


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("batch=-1", "a micro-batch of 1, the default"),
        ("seq=0", "sequences of 8,192 tokens, the default"),
        ("recompute=bogus", "no recomputation, the default"),
        ("overheads=1&fragmentation=500", "fragmentation=10, the default"),
    ],
)
def test_a_micro_batch_or_overhead_set_aside_says_what_is_drawn(client: TestClient, query: str, said: str) -> None:
    answer = client.get(f"/?model=llama-3-8b&{query}")
    assert answer.status_code == 422
    assert said in dom(answer.text).get_text(" ")
