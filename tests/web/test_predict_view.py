"""Predict first (app/web/predict_view.py, the `predict` route), on the parsed DOM.

The question, the answer beside the prediction, the mode kept in every link, and bad predictions refused.

Every expected cell and figure is worked out by hand. The default run is the seed's: 30B weights in 8
equal layers on 8 GPUs, mixed-precision Adam (2 + 2 + 4 + 8 = 16 B a weight). The step in Chromium is
tests/browser/test_predict_browser.py's.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient

from app.domain import layers, scenario
from app.domain.questions import AnswerKind, Question
from app.domain.stages import Stage
from app.domain.step import LAST_PHASE
from app.main import create_app
from app.serving.config import Settings
from app.web.inputs import PREDICT_HELP, PageQuery
from app.web.live import question_for
from app.web.predict_view import CheckCell
from tests.conftest import dom, one, text
from tests.web.helpers import HX, query_of
from tests.web.test_one_report import RUN as ONE_REPORT_RUN
from tests.web.test_one_report import _patch_everywhere

BANDS = ("weights", "gradients", "master", "moments")
WEIGHTS = range(8)

# Which cells GPU 1 stores under each stage, by hand from the seed: ZeRO-1 splits the optimizer state (master,
# moments), ZeRO-2 the gradients too, ZeRO-3 the weights too; GPU 1 owns weight 1's share of each.
STORED_BY_GPU_1 = {
    Stage.DP: {f"{w}.{b}" for w in WEIGHTS for b in BANDS},
    Stage.ZERO1: {f"1.{b}" for b in BANDS} | {f"{w}.{b}" for w in WEIGHTS for b in ("weights", "gradients")},
    Stage.ZERO2: {f"1.{b}" for b in BANDS} | {f"{w}.weights" for w in WEIGHTS},
    Stage.ZERO3: {f"1.{b}" for b in BANDS},
}


def predict(client: TestClient, params: dict[str, str] | list[tuple[str, str]], status: int = 200) -> BeautifulSoup:
    """The predict route's page for `params`, answered with `status`."""
    response = client.get(f"/predict?{urlencode(params)}")
    assert response.status_code == status, response.text[:400]
    assert "set-cookie" not in response.headers  # the state is the address, no one's cookie
    return dom(response.text)


def answered(client: TestClient, to: Stage, cells: set[str], status: int = 200) -> BeautifulSoup:
    """The answer to "which cells will GPU 1 store" on switching from data parallelism to `to`, given `cells`."""
    params = [("stage", "dp"), ("to", to.value), ("predict", "1"), ("shown", "1"), *(("answer", c) for c in cells)]
    return predict(client, params, status)


def marks(tree: BeautifulSoup, css: str) -> set[str]:
    """The cells of the answer's card marked `css` (hit, missed, wrong)."""
    return {str(td["data-cell"]) for td in tree.select(f"#predict-check td.{css}")}


@pytest.mark.parametrize("to", [Stage.ZERO1, Stage.ZERO2, Stage.ZERO3])
def test_a_switch_asks_which_cells_gpu_1_will_store_on_the_polls_card(client: TestClient, to: Stage) -> None:
    tree = predict(client, {"stage": "dp", "to": to.value, "predict": "1"})
    assert (
        text(tree, "#predict-prompt")
        == f"Under {to.info.title}, which bands does GPU 1 store itself? Tap each cell it keeps."
    )
    boxes = tree.select("form.predict-form table.poll-vote input[type=checkbox][name=answer]")
    assert [b["value"] for b in boxes] == [f"{w}.{b}" for w in WEIGHTS for b in BANDS]
    assert not any(b.has_attr("checked") for b in boxes)
    form = one(tree, "form.predict-form")
    assert (form["method"], form["action"]) == ("get", "/predict")
    hidden = [(i["name"], i["value"]) for i in form.select("input[type=hidden]")]
    assert hidden == [("stage", "dp"), ("to", to.value), ("predict", "1"), ("shown", "1")]
    assert not tree.select("#predict-answer")  # the answer comes after the prediction only


def test_a_right_prediction_marks_every_stored_cell_and_nothing_else(client: TestClient) -> None:
    # ZeRO-2: GPU 1 keeps the weights of all 8 and weight 1's gradients, master and moments: 8 + 3 = 11 cells.
    stored = STORED_BY_GPU_1[Stage.ZERO2]
    assert len(stored) == 11
    tree = answered(client, Stage.ZERO2, stored)
    assert text(tree, ".predict-verdict") == (
        "Right. GPU 1 stores 11 of its 32 cells. You predicted 11: 11 it stores, 0 it does not; you missed 0."
    )
    assert marks(tree, "hit") == stored
    assert marks(tree, "missed") == marks(tree, "wrong") == set()
    assert not tree.select("form.predict-form")


def test_a_wrong_prediction_marks_the_right_the_missed_and_the_wrong_cells(client: TestClient) -> None:
    # Under ZeRO-1 on 8 GPUs, GPU 1 keeps all four bands of weight 1 and weights + gradients of the other 7: 18.
    stored = STORED_BY_GPU_1[Stage.ZERO1]
    assert len(stored) == 4 + 7 * 2
    given = {"1.weights", "1.gradients", "1.master", "1.moments", "0.weights", "2.master"}
    tree = answered(client, Stage.ZERO1, given)
    assert text(tree, ".predict-verdict") == (
        "Not quite. GPU 1 stores 18 of its 32 cells. You predicted 6: 5 it stores, 1 it does not; you missed 13."
    )
    assert marks(tree, "hit") == {"1.weights", "1.gradients", "1.master", "1.moments", "0.weights"}
    assert marks(tree, "wrong") == {"2.master"}
    assert marks(tree, "missed") == stored - given
    wrong = one(tree, '#predict-check td[data-cell="2.master"]')
    assert wrong.get_text(" ", strip=True).startswith("✗")
    assert "GPU 1, weight 2, master: not stored; you predicted it" in wrong.get_text(" ")


def test_an_empty_prediction_is_an_answer_too(client: TestClient) -> None:
    tree = answered(client, Stage.ZERO3, set())
    assert text(tree, ".predict-verdict").startswith("Not quite. GPU 1 stores 4 of its 32 cells. You predicted 0:")
    assert marks(tree, "missed") == STORED_BY_GPU_1[Stage.ZERO3]


def test_one_gpu_is_asked_about_gpu_0(client: TestClient) -> None:
    # One card stores everything whatever the stage: 8 weights x 4 bands.
    tree = predict(client, {"stage": "dp", "to": "zero3", "gpus": "1"})
    assert text(tree, "#predict-prompt").startswith("Under ZeRO-3, which bands does GPU 0 store itself?")


# The figure GPU 0 holds in the next phase, by hand, with no activations (batch=0), so that it is the state at
# rest alone: 30e9 weights x 16 B under DP, x (2 + 2 + 12/8) under ZeRO-1, x 16/8 under ZeRO-3 at the step's end.
GIB = 2**30
NEXT_PHASE = [
    ("dp", 0, 30 * 10**9 * 16 / GIB, "440", True, "You were 7.0 GiB under, within 5%: right."),
    ("dp", 0, 30 * 10**9 * 16 / GIB, "400", False, "You were 47.0 GiB under, not within 5%."),
    ("zero1", 3, 30 * 10**9 * 5.5 / GIB, "160", True, "You were 6.3 GiB over, within 5%: right."),
    ("zero3", LAST_PHASE - 1, 30 * 10**9 * 2 / GIB, "100", False, "You were 44.1 GiB over, not within 5%."),
]


@pytest.mark.parametrize(("stage", "phase", "figure", "given", "right", "gap"), NEXT_PHASE)
def test_the_next_phase_asks_a_figure_then_shows_it_beside_the_guess(
    client: TestClient, stage: str, phase: int, figure: float, given: str, right: bool, gap: str
) -> None:
    asked = predict(client, {"stage": stage, "phase": str(phase), "batch": "0", "predict": "1"})
    assert text(asked, "#predict-prompt").endswith(
        f"what will GPU 0 hold in the next phase, phase {phase + 1}, in GiB?"
    )
    assert one(asked, "#predict-number")["name"] == "answer"
    tree = predict(client, {"stage": stage, "phase": str(phase), "batch": "0", "shown": "1", "answer": given})
    assert text(tree, "#predict-given") == f"{given} GiB"
    assert text(tree, "#predict-true") == f"{figure:.3f} GiB"
    assert text(tree, ".predict-verdict") == ("Right." if right else "Not quite.")
    assert text(tree, ".predict-gap") == gap
    assert query_of(str(one(tree, "#predict-go")["href"]))["phase"] == [str(phase + 1)]


def test_the_predict_mode_goes_by_the_question_for_a_switch_and_the_next_phase(client: TestClient) -> None:
    response = client.get("/?stage=zero1&phase=3&predict=1")
    tree = dom(response.text)
    for stage in Stage:
        href = str(one(tree, f"#switch-{stage.value}")["href"])
        if stage is Stage.ZERO1:
            assert href.startswith("/?")
            assert query_of(href)["predict"] == ["1"]
        else:
            assert href.startswith("/predict?")
            assert query_of(href) == {"stage": ["zero1"], "phase": ["3"], "to": [stage.value], "predict": ["1"]}
    assert query_of(str(one(tree, "#step-next")["href"])) == {"stage": ["zero1"], "phase": ["3"], "predict": ["1"]}
    assert str(one(tree, "#step-next")["href"]).startswith("/predict?")
    # Every other link of the page keeps the mode: back a phase, the theme's toggle, the run form's fields.
    for kept in ("#step-prev", "#step-leave", "#scheme-dark"):
        assert query_of(str(one(tree, kept)["href"]))["predict"] == ["1"]
    assert tree.select('form.run-form input[type=hidden][name=predict][value="1"]')


def test_without_the_mode_a_switch_goes_straight_to_the_view(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero1&phase=3").text)
    hrefs = [str(a["href"]) for a in tree.select("a[href]")]
    assert not any(h.startswith("/predict") for h in hrefs)
    # Only the switch that turns it on names it.
    assert [h for h in hrefs if "predict=" in h] == [str(one(tree, "#predict-toggle")["href"])]


def test_the_question_keeps_the_run_the_theme_and_the_mode_in_its_ways_on(client: TestClient) -> None:
    tree = predict(client, {"stage": "zero1", "gpus": "16", "theme": "dark", "to": "zero3", "predict": "1"})
    go, back = query_of(str(one(tree, "#predict-go")["href"])), query_of(str(one(tree, "#predict-back")["href"]))
    assert go == {"stage": ["zero3"], "gpus": ["16"], "theme": ["dark"], "predict": ["1"], "from": ["zero1"]}
    assert back == {"stage": ["zero1"], "gpus": ["16"], "theme": ["dark"], "predict": ["1"]}
    assert one(tree, "html")["data-scheme"] == "dark"
    # 16 cards draw 16 weights: 64 cells to tap.
    assert len(tree.select("table.poll-vote input[type=checkbox]")) == 16 * 4


def test_a_swap_is_the_fragment_and_names_its_own_address(client: TestClient) -> None:
    response = client.get("/predict?stage=dp&to=zero2&predict=1", headers=HX)
    assert response.status_code == 200
    assert response.headers["HX-Push-Url"] == "/predict?stage=dp&to=zero2&predict=1"
    tree = dom(response.text)
    assert not tree.select("header.masthead")
    assert one(tree, "section#widget")["class"] == ["widget", "predict"]
    # "Teach this live", in the page's masthead around it, teaches the view the question was asked from.
    assert one(tree, 'input[form="teach-live-form"]')["value"] == "/?stage=dp&predict=1"


BAD = [
    ("stage=dp&to=zero1&shown=1&answer=9.weights", "That answer names a cell the card does not have."),
    (
        "stage=dp&to=zero1&shown=1&answer=%3Cscript%3Ealert(1)%3C/script%3E",
        "That answer names a cell the card does not have.",
    ),
    ("stage=dp&phase=0&shown=1&answer=lots", "Give a number of GiB from 0 to"),
    ("stage=dp&phase=0&shown=1&answer=1&answer=2", "Give one answer."),
    ("stage=dp&to=dp", "Data parallelism is the arrangement shown: there is no switch to predict."),
    (f"stage=dp&phase={LAST_PHASE}", f"There is no next phase to predict: give a phase from 0 to {LAST_PHASE - 1}"),
    ("stage=dp", "There is no next phase to predict"),
]


@pytest.mark.parametrize(("query", "said"), BAD)
def test_a_bad_prediction_is_a_422_saying_why_without_echoing_it(client: TestClient, query: str, said: str) -> None:
    response = client.get(f"/predict?{query}")
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("text/html")
    tree = dom(response.text)
    assert text(tree, "#predict-error").startswith(said)
    assert not tree.select("#widget script")
    assert "<script>alert" not in response.text


def test_a_bad_number_is_given_back_escaped_in_its_field(client: TestClient) -> None:
    response = client.get("/predict?stage=dp&phase=0&shown=1&answer=" + "%3Cb%3Ebig%3C/b%3E")
    assert response.status_code == 422
    tree = dom(response.text)
    field = one(tree, "#predict-number")
    assert field["value"] == "<b>big</b>"
    assert (field["aria-invalid"], field["aria-describedby"]) == ("true", "predict-error")
    assert not tree.select("#widget b")


@pytest.mark.parametrize(
    "query",
    [
        "stage=dp&to=zero9",
        "stage=dp&phase=-1",
        "stage=dp&to=zero1&shown=maybe",
        "stage=dp&to=zero1&" + "answer=0.weights&" * 65,
    ],
)
def test_a_bad_parameter_is_the_apps_422_page(client: TestClient, query: str) -> None:
    response = client.get(f"/predict?{query}")
    assert response.status_code == 422
    assert text(dom(response.text), ".notice-message")


CHECKS = [
    (True, True, "hit", "✓", "stored; you predicted it"),
    (True, False, "missed", "■", "stored; you did not predict it"),
    (False, True, "wrong", "✗", "not stored; you predicted it"),
    (False, False, "", "", "not stored"),
]


@pytest.mark.parametrize(("stored", "predicted", "css", "mark", "said"), CHECKS)
def test_a_cell_at_the_answer_is_marked_by_glyph_class_and_words(
    stored: bool, predicted: bool, css: str, mark: str, said: str
) -> None:
    cell = CheckCell("3.master", 3, "M", "GPU 1, weight 3, master", stored, predicted)
    assert (cell.css, cell.mark, cell.words) == (css, mark, f"GPU 1, weight 3, master: {said}")


def test_the_question_is_the_live_sessions(client: TestClient) -> None:
    # The same prompt "Ask the class" puts (app/web/live.py question_for): one question, for one person or a class.

    asked: Question = question_for("stage=zero2", AnswerKind.CELLS, 1)
    tree = predict(client, {"stage": "dp", "to": "zero2"})
    assert text(tree, "#predict-prompt") == asked.prompt
    assert set(asked.answer.split(",")) == STORED_BY_GPU_1[Stage.ZERO2]


def test_the_docs_row_is_the_query_models_help() -> None:
    assert PageQuery.model_fields["predict"].description == PREDICT_HELP
    docs = (Path(__file__).resolve().parents[2] / "docs" / "url-options.md").read_text()
    # By hand beside `theme`'s, in the view's table (tests/test_readme.py holds the options to two tables).
    row = next(line for line in docs.splitlines() if line.startswith("| `predict` |"))
    assert row.startswith(f"| `predict` | page | {PREDICT_HELP} ")


def test_a_pasted_config_keeps_the_mode(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero2&gpus=16&predict=1").text)
    action = str(one(tree, "form.config-paste")["action"])
    assert query_of(action)["predict"] == ["1"]
    config = json.dumps({"zero_optimization": {"stage": 3}})
    response = client.post(action, data={"config": config}, follow_redirects=False)
    assert response.status_code == 303
    # A config without bf16 or fp16 is fp32 Adam (app/domain/configs.py).
    assert query_of(response.headers["location"]) == {
        "stage": ["zero3"],
        "gpus": ["16"],
        "recipe": ["fp32-adam"],
        "predict": ["1"],
    }


@pytest.fixture(scope="module")
def uncached() -> Iterator[TestClient]:
    """The app without its response cache, so that every request is computed (as tests/web/test_one_report.py's)."""
    with TestClient(create_app(Settings(cache_bytes=0))) as test_client:
        yield test_client


@pytest.mark.parametrize("move", ["to=dp", "phase=5"])
def test_a_question_resolves_its_run_once(uncached: TestClient, monkeypatch: pytest.MonkeyPatch, move: str) -> None:
    counts: Counter[str] = Counter()
    _patch_everywhere(monkeypatch, scenario, "resolve", counts)
    _patch_everywhere(monkeypatch, layers, "column_moments", counts)
    assert uncached.get(f"/predict?{ONE_REPORT_RUN}&{move}&shown=1&answer=1").status_code in (200, 422)
    assert sum(n for key, n in counts.items() if key.startswith("app.domain.scenario.resolve")) == 1
    assert {key: n for key, n in counts.items() if n > 1} == {}


def test_its_stylesheet_comes_with_the_question_not_with_the_page(client: TestClient) -> None:
    page = dom(client.get("/?stage=dp&predict=1").text)
    linked = " ".join(str(link["href"]) for link in page.select("link[href]"))
    assert "predict.css" not in linked
    assert "poll.css" not in linked
    fragment = dom(client.get("/predict?stage=dp&to=zero1", headers=HX).text)
    hrefs = [str(link["href"]) for link in fragment.select("#widget link[rel=stylesheet]")]
    # The poll's card (poll.css, the live session's too) and the question's own rules.
    assert [href.partition("?")[0] for href in hrefs] == ["/static/poll.css", "/static/predict.css"]
    assert all(client.get(href).status_code == 200 for href in hrefs)


@pytest.mark.parametrize(
    ("url", "href", "label"),
    [
        # Off: the same view, predict first on (it comes last in an address, as `Links.options` writes it).
        ("/?stage=zero1&phase=3", "/?stage=zero1&phase=3&predict=1", "Predict first"),
        ("/?stage=zero2&theme=projector", "/?stage=zero2&theme=projector&predict=1", "Predict first"),
        # On: the same view without it, the theme kept.
        ("/?stage=zero1&predict=1&theme=projector", "/?stage=zero1&theme=projector", "Stop predicting"),
    ],
)
def test_the_page_turns_predict_first_on_and_off(client: TestClient, url: str, href: str, label: str) -> None:
    toggle = one(dom(client.get(url).text), "#scheme-menu #predict-toggle")
    assert (toggle["href"], toggle.text) == (href, label)
    # Followed, the link turns it on or off: the switcher's links to the other stages go to the question, or on.
    switches = [str(a["href"]) for a in dom(client.get(href).text).select(".switcher a.switch:not([aria-current])")]
    assert all(s.startswith("/predict?") for s in switches) is (label == "Predict first")
