"""app/web/live.py's questions: asking, voting, the teacher's panel, the reveal and the CSV, on the parsed DOM.

The page in Chromium, with three followers, is tests/browser/test_poll_browser.py; 300 followers voting
at once, and a worker killed mid-vote, are bench/votes.py's.
"""

from __future__ import annotations

import csv
import io
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from bs4 import Tag
from fastapi.testclient import TestClient

from app.domain.questions import AnswerKind, Question
from app.domain.report import TermKind
from app.live.redis_hub import BREAKER_SECONDS
from app.live.session import Poll
from app.main import create_app
from app.serving.config import STREAM_ENV, Settings
from app.web.live_view import VOTER
from app.web.poll_view import poll_panel, question_panel
from tests.conftest import dom, one, text
from tests.live.redis_server import running_redis
from tests.web.test_live import started

HTMX = {"HX-Request": "true"}
BAND_KINDS = [kind for kind in TermKind if kind.band is not None]
"""The four bands' kinds, in the grid's order."""


STREAM_SECONDS = 0.2
"""The streams' lifetime here: TestClient reads a stream whole, so a follower's ends soon (its seat is held after)."""


@pytest.fixture
def live() -> Iterator[TestClient]:
    """A teacher's browser on an app of its own."""
    with TestClient(create_app(Settings(live_stream_seconds=STREAM_SECONDS))) as client:
        yield client


def joined(teacher: TestClient, code: str, address: str = "testclient") -> TestClient:
    """A follower's browser that opened the session's page, then its stream, which hands out its token."""
    client = TestClient(teacher.app, client=(address, 50000))
    response = client.get(f"/live/{code}")
    assert response.status_code == 200
    assert not client.cookies.get(VOTER)  # a bare page hands out no token
    assert client.get(f"/live/{code}/events").status_code == 200
    assert client.cookies.get(VOTER)
    return client


def ask(teacher: TestClient, code: str, kind: str, card: str = "1") -> str:
    """Ask the class; the round's key, from the teacher's panel."""
    response = teacher.post(f"/live/{code}/ask", data={"kind": kind, "card": card}, headers=HTMX)
    assert response.status_code == 200, response.text
    panel = one(dom(response.text), "#live-poll")
    assert panel.has_attr("hx-get")  # open: its count is asked again
    question = follower_panel(teacher, code)
    return str(one(question, "input[name=key]")["value"])


def follower_panel(client: TestClient, code: str) -> Tag:
    """A follower's question panel as its stream's event has it fetched."""
    response = client.get(f"/live/{code}/question")
    assert response.status_code == 200
    return one(dom(response.text), "#live-question")


def vote(client: TestClient, code: str, key: str, *answers: str, status: int = 200) -> str:
    """A follower's answer, sent as its panel's form is; the panel that comes back."""
    response = client.post(f"/live/{code}/vote", data={"key": key, "answer": list(answers)}, headers=HTMX)
    assert response.status_code == status, response.text
    return response.text


def act(teacher: TestClient, code: str, action: str) -> Tag:
    """One of the teacher's buttons on the question; the panel it brings."""
    response = teacher.post(f"/live/{code}/poll", data={"action": action}, headers=HTMX)
    assert response.status_code == 200, response.text
    return one(dom(response.text), "#live-poll")


def test_a_cells_reveal_says_the_answer_in_words_and_the_most_missed_cells_and_folds_the_earlier_round(
    live: TestClient,
) -> None:
    code = started(live, "/?stage=zero3")
    key = ask(live, code, "cells", "2")
    # The cells to tap carry their band's colour class, the grid's own (TermKind's look), and their labels.
    boxes = follower_panel(live, code).select("td:has(> input[type=checkbox])")
    assert [td["class"] for td in boxes[:4]] == [[kind.look.css] for kind in BAND_KINDS]
    assert one(boxes[4], "input")["aria-label"] == "GPU 2, weight 1, weights"
    students = [joined(live, code) for _ in range(3)]
    # ZeRO-3 on 8 cards: GPU 2 keeps weight 2's four bands. Round 1: one right, one leaves out the moments,
    # one taps weight 1's weights too.
    right = ["2.weights", "2.gradients", "2.master", "2.moments"]
    for student, cells in zip(students, [right, right[:3], [*right, "1.weights"]], strict=True):
        vote(student, code, key, *cells)
    act(live, code, "show")
    act(live, code, "again")
    key2 = str(one(follower_panel(students[0], code), "input[name=key]")["value"])
    for student, cells in zip(students, [right, right, right[:2]], strict=True):
        vote(student, code, key2, *cells)
    revealed = act(live, code, "reveal")
    assert text(revealed, "#poll-answer") == "The answer: GPU 2 keeps all four bands of weight 2 only (4 of 32 cells)."
    earlier, latest = revealed.select(".poll-round")
    assert earlier.name == "details"  # round 1, one click away
    assert not earlier.has_attr("open")
    assert text(one(earlier, "summary"), "h3") == "Round 1: 3 answered · 33.3% right (1 of 3)"
    # Round 1: the second left out the moments, the third tapped weight 1's weights: 1 of 3 each.
    assert text(earlier, ".poll-missed") == (
        "Most missed (1 of 3 answers wrong about each): weight 1's weights (not kept), "
        "weight 2's optimizer's moments (kept)."
    )
    assert latest.name == "div"
    assert text(latest, "h3") == "Round 2: 3 answered · 66.7% right (2 of 3)"
    # Round 2: the third left out weight 2's master copy and moments: 1 of 3 wrong about each, no other cell.
    assert text(latest, ".poll-missed") == (
        "Most missed (1 of 3 answers wrong about each): weight 2's fp32 master copy (kept), "
        "weight 2's optimizer's moments (kept)."
    )


def test_a_choice_is_counted_once_per_follower_changed_until_closed_and_the_spread_and_share_are_right(
    live: TestClient,
) -> None:
    code = started(live, "/?stage=zero1")
    key = ask(live, code, "choice")
    choices = [" ".join(label.get_text(" ").split()) for label in follower_panel(live, code).select("fieldset label")]
    # Every stage's own bytes per weight on 8 cards, high to low: 16; 2+2+12/8; 2+(2+12)/8; 16/8.
    assert choices == ["16.00 B", "5.50 B", "3.75 B", "2.00 B"]
    students = [joined(live, code) for _ in range(4)]
    for student, answer in zip(students, ["1", "1", "0", "2"], strict=True):
        vote(student, code, key, answer)
    vote(students[2], code, key, "1")  # changed its mind: still one vote
    panel = one(dom(live.get(f"/live/{code}/poll").text), "#live-poll")
    # None follows by a stream here (a page's script opens it): the answers are counted all the same.
    assert text(panel, "#poll-count") == "4 of 4 following have answered"  # counted of the seats held
    shown = act(live, code, "show")
    assert not shown.has_attr("hx-get")
    counts = [(text(li, ".poll-label"), text(li, ".poll-n")) for li in shown.select(".poll-bars li")]
    assert counts == [("16.00 B", "0"), ("5.50 B", "3"), ("3.75 B", "1"), ("2.00 B", "0")]
    assert not shown.select(".poll-tick")  # the right one is not marked before the reveal
    vote(students[3], code, key, "1", status=409)  # closed
    act(live, code, "again")
    key2 = str(one(follower_panel(students[0], code), "input[name=key]")["value"])
    assert key2 != key
    for student in students:
        vote(student, code, key2, "1")
    revealed = act(live, code, "reveal")
    shares = [text(h, ".poll-share") for h in revealed.select(".poll-round h3")]
    assert shares == ["75% right (3 of 4)", "100% right (4 of 4)"]
    assert text(revealed, "#poll-answer") == "The answer: 5.50 B."
    mine = follower_panel(students[2], code)
    assert "Yours, 5.50 B, was right" in text(mine, ".poll-answer")


def test_a_cells_question_is_the_grids_own_solid_cells_and_its_heat_map_counts_taps(live: TestClient) -> None:
    code = started(live, "/?stage=zero2")
    key = ask(live, code, "cells", "1")
    boxes = follower_panel(live, code).select("input[type=checkbox]")
    assert len(boxes) == 8 * 4
    # ZeRO-2 on 8 cards: GPU 1 stores every weight's bf16 copy, and weight 1's gradients, master and moments.
    right = [f"{w}.weights" for w in range(8)] + ["1.gradients", "1.master", "1.moments"]
    student, guesser = joined(live, code), joined(live, code)
    vote(student, code, key, *right)
    vote(guesser, code, key, "1.weights", "1.gradients")
    heat = act(live, code, "reveal")
    cells = {td["title"]: str(td.find(string=True)).strip() for td in heat.select("td[title]")}
    assert cells["GPU 1, weight 1, gradients"] == "2"
    assert cells["GPU 1, weight 0, weights"] == "1"
    assert cells["GPU 1, weight 0, moments"] == "0"
    assert len(heat.select("td.right")) == len(right)
    assert text(heat, ".poll-share") == "50% right (1 of 2)"
    assert "Yours, 11 cells tapped, was right" in text(follower_panel(student, code), ".poll-answer")


def test_predict_then_step_reveals_by_stepping_every_screen_to_the_phase_asked_about(live: TestClient) -> None:
    code = started(live, "/?stage=zero3&phase=6")
    response = live.post(f"/live/{code}/ask", data={"kind": "number"}, headers=HTMX)
    panel = one(dom(response.text), "#live-poll")
    assert "phase 7" in text(panel, ".poll-prompt")
    assert not panel.has_attr("data-hides")  # the next phase is not on the screen: the picture stays
    student = joined(live, code)
    question = follower_panel(student, code)
    assert question.has_attr("data-predicts")  # the step's controls wait (app.css): no stepping ahead to it
    key = str(one(question, "input[name=key]")["value"])
    vote(student, code, key, "62.9")
    act(live, code, "show")
    assert not follower_panel(student, code).has_attr("data-predicts")  # answers are in: explore freely
    response = live.post(f"/live/{code}/poll", data={"action": "reveal"}, headers=HTMX)
    assert response.headers["HX-Refresh"] == "true"
    widget = one(dom(student.get(f"/live/{code}").text), "#widget")
    assert (widget["data-stage"], widget["data-phase"]) == ("zero3", "7")
    assert "was right" in text(follower_panel(student, code), ".poll-answer")


@pytest.mark.parametrize(
    ("answers", "status", "words"),
    [
        (["lots"], 422, "Give a number of GiB"),
        (["-3"], 422, "from 0 to"),
        (["nan"], 422, "from 0 to"),
        (["1", "2"], 422, "Give one answer."),
        ([], 422, "Give one answer."),
    ],
)
def test_a_malformed_vote_is_told_why_in_the_panel_and_not_counted(
    live: TestClient, answers: list[str], status: int, words: str
) -> None:
    code = started(live, "/?stage=zero1")
    key = ask(live, code, "number")
    student = joined(live, code)
    panel = one(dom(vote(student, code, key, *answers, status=status)), "#live-question")
    assert words in text(panel, ".poll-error")
    assert text(one(dom(live.get(f"/live/{code}/poll").text), "#live-poll"), "#poll-count").startswith("0 of")


def test_a_vote_without_a_followers_token_or_for_another_round_is_refused(live: TestClient) -> None:
    code = started(live)
    key = ask(live, code, "choice")
    stranger = TestClient(live.app)
    assert stranger.post(f"/live/{code}/vote", data={"key": key, "answer": "1"}).status_code == 403
    stranger.cookies.set(VOTER, "forged.0123456789abcdef0123456789abcdef", path=f"/live/{code}")
    assert stranger.post(f"/live/{code}/vote", data={"key": key, "answer": "1"}).status_code == 403
    student = joined(live, code)
    assert student.post(f"/live/{code}/vote", data={"key": "9.1", "answer": "1"}).status_code == 409
    plain = student.post(f"/live/{code}/vote", data={"key": key, "answer": "1"}, follow_redirects=False)
    assert (plain.status_code, plain.headers["location"]) == (303, f"/live/{code}")


def test_only_the_teacher_asks_closes_reveals_and_downloads(live: TestClient) -> None:
    code = started(live)
    student = joined(live, code)
    assert student.post(f"/live/{code}/ask", data={"kind": "choice"}).status_code == 403
    ask(live, code, "choice")
    for action in ("show", "reveal", "done"):
        assert student.post(f"/live/{code}/poll", data={"action": action}).status_code == 403
    assert student.get(f"/live/{code}/poll").status_code == 403
    assert student.get(f"/live/{code}/results.csv").status_code == 403


def test_followers_never_see_the_spread_and_the_picture_hides_until_the_reveal(live: TestClient) -> None:
    code = started(live, "/?stage=zero1")
    key = ask(live, code, "choice")
    student = joined(live, code)
    vote(student, code, key, "0")
    act(live, code, "show")
    panel = follower_panel(student, code)
    assert panel.has_attr("data-hides")
    assert not panel.select(".poll-bars, .poll-card")
    assert "right" not in text(panel, ".poll-own")
    assert one(dom(live.get(f"/live/{code}/teach").text), "#live-poll").has_attr("data-hides")
    act(live, code, "reveal")
    assert not follower_panel(student, code).has_attr("data-hides")
    act(live, code, "done")
    assert follower_panel(student, code).has_attr("hidden")
    assert one(dom(live.get(f"/live/{code}/teach").text), "#live-poll").has_attr("hidden")


def test_the_csv_has_each_question_and_round_and_counts_only(live: TestClient) -> None:
    code = started(live, "/?stage=zero1")
    key = ask(live, code, "choice")
    student = joined(live, code)
    vote(student, code, key, "1")
    act(live, code, "show")
    act(live, code, "again")
    response = live.get(f"/live/{code}/results.csv")
    assert response.headers["content-type"] == "text/csv; charset=utf-8"
    rows = list(csv.DictReader(io.StringIO(response.text)))
    assert [(r["question"], r["round"], r["answered"], r["right"]) for r in rows] == [
        ("1", "1", "1", "1"),
        ("1", "2", "0", "0"),
    ]
    assert rows[0]["spread"] == "16.00 B: 0; 5.50 B: 1; 3.75 B: 0; 2.00 B: 0"
    assert str(student.cookies.get(VOTER)).split(".")[0] not in response.text


@pytest.mark.parametrize(
    ("kind", "card", "words"),
    [("cells", "7", "GPU 7 is not drawn"), ("poem", "1", "That is not one of the questions offered")],
)
def test_a_question_the_view_cannot_have_is_refused_with_a_reason(
    live: TestClient, kind: str, card: str, words: str
) -> None:
    code = started(live, "/?stage=zero1&gpus=2")
    response = live.post(f"/live/{code}/ask", data={"kind": kind, "card": card})
    assert response.status_code == 422
    assert words in text(dom(response.text), "main")
    fragment = live.post(f"/live/{code}/ask", data={"kind": kind, "card": card}, headers=HTMX)
    assert fragment.status_code == 422
    assert words in text(dom(fragment.text), "#live-poll[role=alert]")


def test_a_followers_stream_brings_the_question_panel_when_asked() -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(STREAM_ENV, "0.5")
        with TestClient(create_app()) as teacher:
            code = started(teacher)
            ask(teacher, code, "choice")
            student = joined(teacher, code)
            body = student.get(f"/live/{code}/events").text
    polls = re.findall(r"event: poll\r?\ndata: (.*)", body)
    assert len(polls) == 1
    loader = one(dom(polls[0]), "#live-question")
    assert loader["hx-get"] == f"/live/{code}/question"
    assert loader.has_attr("data-hides")


@pytest.mark.parametrize(
    ("base_url", "same_site", "partitioned"),
    [("http://testserver", "SameSite=lax", False), ("https://testserver", "SameSite=none", True)],
)
def test_the_followers_token_comes_with_its_stream_httponly_and_kept_to_the_sessions_addresses(
    live: TestClient, base_url: str, same_site: str, partitioned: bool
) -> None:
    code = started(live)
    phone = TestClient(live.app, base_url=base_url)
    for page in (phone.get(f"/live/{code}"), phone.get(f"/embed?live={code}")):
        assert page.status_code == 200  # over https too: Partitioned is written by hand, never a 500
        assert not [v for k, v in page.headers.multi_items() if k == "set-cookie"]  # a bare page hands out no token
    response = phone.get(f"/live/{code}/events")
    cookie = next(v for k, v in response.headers.multi_items() if k == "set-cookie" and v.startswith(VOTER))
    assert f"Path=/live/{code}" in cookie
    assert "HttpOnly" in cookie
    assert same_site in cookie
    assert ("; Partitioned" in cookie, "; Secure" in cookie) == (partitioned, partitioned)
    again = phone.get(f"/live/{code}/events")  # its token is kept: no new one, the same seat
    assert not [v for k, v in again.headers.multi_items() if k == "set-cookie"]


@pytest.mark.slow  # 200 pages and votes: a load test by nature
def test_two_hundred_cookie_less_loads_and_votes_from_one_address_count_none(live: TestClient) -> None:
    """The ballot stuffed by reloading without the cookie: a bare page hands out no token, so no vote counts."""
    code = started(live)
    key = ask(live, code, "choice")
    refused = 0
    for _ in range(200):
        phone = TestClient(live.app, client=("203.0.113.7", 50000))
        assert phone.get(f"/live/{code}").status_code == 200
        refused += phone.post(f"/live/{code}/vote", data={"key": key, "answer": "1"}, headers=HTMX).status_code == 403
    assert refused == 200
    assert one(dom(live.get(f"/live/{code}/poll").text), "#poll-count")["data-answered"] == "0"


def test_cookie_less_streams_from_one_address_count_at_most_its_share_of_the_room() -> None:
    """The same with each load's stream opened: every stream a new token, each seat held after, to its share."""
    app = create_app(Settings(live_stream_seconds=0.05, live_followers=20))
    with TestClient(app) as teacher:
        code = started(teacher)
        key = ask(teacher, code, "choice")
        statuses = []
        for _ in range(60):
            phone = TestClient(app, client=("203.0.113.7", 50000))
            phone.get(f"/live/{code}/events")
            sent = phone.post(f"/live/{code}/vote", data={"key": key, "answer": "1"}, follow_redirects=False)
            statuses.append(sent.status_code)
        share = 16  # four fifths of 20 places
        assert (statuses.count(303), statuses.count(403)) == (share, 60 - share)
        panel = one(dom(teacher.get(f"/live/{code}/poll").text), "#poll-count")
        assert panel["data-answered"] == str(share)
        count = text(dom(teacher.get(f"/live/{code}/followers").text), "#live-count")
        assert count == f"{share} following ({share} of them from one address)"  # streams ended, seats held


@pytest.mark.slow  # a real Redis, restarted under the round: as tests/live/test_redis_hub.py
def test_over_redis_votes_count_across_workers_and_a_restarted_redis_ends_the_round_with_a_clear_message(
    tmp_path: Path,
) -> None:
    with running_redis(tmp_path) as server:
        settings = Settings(redis_url=server.url, live_stream_seconds=STREAM_SECONDS)
        with TestClient(create_app(settings)) as teacher, TestClient(create_app(settings)) as phones:
            code = started(teacher, "/?stage=zero1")
            key = ask(teacher, code, "choice")
            for answer in ("1", "2"):  # two phones, one after the other, on the other worker
                phones.cookies.clear()
                assert phones.get(f"/live/{code}/events").status_code == 200  # its seat, and its token
                vote(phones, code, key, answer)
            assert one(dom(teacher.get(f"/live/{code}/poll").text), "#poll-count")["data-answered"] == "2"
            server.restart()  # without persistence: the session and its votes are gone, as after a crash
            time.sleep(BREAKER_SECONDS)  # the breaker the restart tripped lets the next call try
            refused = phones.post(f"/live/{code}/vote", data={"key": key, "answer": "1"})
            assert refused.status_code == 404
            assert "There is no live session with that code" in text(dom(refused.text), "main")
            teacher_count = teacher.get(f"/live/{code}/followers")
            assert teacher_count.status_code == 286
            assert "no longer running" in text(dom(teacher_count.text), "#live-lost")


CHOICE = Question(AnswerKind.CHOICE, "Bytes per weight under ZeRO-1?", "1", "zero1", choices=("16 B", "5.5 B", "2 B"))
ANON = ("Your answer is anonymous.",)


@pytest.mark.parametrize(
    ("poll", "own", "state", "heading", "sent", "unsent", "checked", "yours"),
    [
        # Open: the form; the follower's choice checked once sent.
        (Poll(CHOICE, 3), None, "open", "Question 3", (), ANON, (None, None, None), ()),
        (Poll(CHOICE, 3, round=2), "1", "open", "Question 3 · vote 2", ("5.5 B",), (), (None, "", None),
         (("5.5 B", "right"),)),
        # Closed: the follower's answer, or that there was none; revealed: whether it was right.
        (Poll(CHOICE, 3, open=False), None, "closed", "Question 3", (), ANON, (None, None, None), ()),
        (Poll(CHOICE, 3, open=False, revealed=True), "2", "revealed", "Question 3", ("2 B",), (), (None, None, ""),
         (("2 B", "not right"),)),
    ],
)  # fmt: skip
def test_a_followers_panel_is_decided_when_built(
    poll: Poll,
    own: str | None,
    state: str,
    heading: str,
    sent: tuple[str, ...],
    unsent: tuple[str, ...],
    checked: tuple[str | None, ...],
    yours: tuple[tuple[str, str], ...],
) -> None:
    panel = question_panel(poll, "/vote", own)
    assert (panel.state, panel.heading, panel.sent, panel.unsent) == (state, heading, sent, unsent)
    assert (tuple(c for _, _, c in panel.choices), panel.yours) == (checked, yours)


@pytest.mark.parametrize(
    ("poll", "actions", "polled"),
    [
        (Poll(CHOICE, 1), ("show",), "every 500ms"),
        (Poll(CHOICE, 1, open=False, shown=True), ("again", "reveal"), None),
        (Poll(CHOICE, 1, open=False, shown=True, revealed=True), (), None),
    ],
)
def test_the_teachers_buttons_follow_the_vote(poll: Poll, actions: tuple[str, ...], polled: str | None) -> None:
    panel = poll_panel(poll, 3, 10, (), ("/poll", "/action", "/csv"))
    assert tuple(a.value for a in panel.actions) == actions
    assert panel.attrs.get("hx-trigger") == polled
    assert panel.count_line == "3 of 10 following have answered" + ("" if poll.open else " · the vote is closed")
