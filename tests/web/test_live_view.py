"""app/web/live_view.py: the view a session keeps, the address each follower is sent, and the words of each refusal."""

from __future__ import annotations

from typing import Any, TypeVar

import pytest
from fastapi.testclient import TestClient
from httpx2 import Response

from app.live.service import LiveOff, NoSuchSession, NotTheTeacher, Refusal, RoomFull, SessionEnded, TooManyTries
from app.live.session import Session
from app.main import create_app
from app.serving.config import Settings
from app.serving.headers import NOT_A_HOST
from app.serving.overload import ConcurrencyLimit
from app.web.inputs import Theme
from app.web.live_view import (
    BAD_HOST,
    WORDING,
    BadView,
    StateView,
    canonical_view,
    follower_view,
    problem_for,
    qr_svg,
    state_view,
    view_query,
)
from tests.conftest import dom, one
from tests.web.test_live import join_key, started

T = TypeVar("T")


@pytest.mark.parametrize(
    ("address", "kept"),
    [
        ("/?stage=zero3", "stage=zero3"),
        ("/?stage=zero3&phase=0", "stage=zero3&phase=0"),
        ("/embed?phase=5&stage=zero2&controls=step", "stage=zero2&phase=5"),
        ("/?stage=zero2&from=zero1", "stage=zero2&from=zero1"),
        ("/?gpus=16&stage=zero1&theme=projector", "stage=zero1&gpus=16&theme=projector"),
        # The form's long query, as a browser sends it, kept as the page's own links write it.
        ("/?stage=dp&model=llama-3-8b&params=8030261248&gpus=8&recipe=mixed-adam", "stage=dp&model=llama-3-8b"),
        ("", "stage=dp"),
        ("/?stage=dp&phase=3&theme=default", "stage=dp&phase=3"),
    ],
)
def test_a_session_keeps_the_view_as_the_pages_links_write_it(address: str, kept: str) -> None:
    assert canonical_view(view_query(address)) == kept


@pytest.mark.parametrize("address", ["/?stage=zero4", "/?phase=53", "/?gpus=0", "/?theme=neon", "/?from=zero9"])
def test_an_address_that_is_no_view_is_refused(address: str) -> None:
    with pytest.raises(BadView):
        view_query(address)


def _session(shown: str, **changes: object) -> Session:
    return Session(code="ACD479", secret_digest="", view=shown, shown=shown, touched=0.0, **changes)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("shown", "base", "options", "theme", "expected"),
    [
        ("stage=zero3&phase=5", "/", (), Theme.DEFAULT, StateView(1, "/?stage=zero3&phase=5", False, False)),
        ("stage=zero2&from=zero1", "/", (), Theme.DEFAULT, StateView(1, "/?stage=zero2&from=zero1", False, False)),
        # The teacher's projector view is the teacher's: a follower draws the view in its own theme.
        (
            "stage=zero1&gpus=16&theme=projector", "/tools/embed", (("controls", "step"),), Theme.DEFAULT,
            StateView(1, "/tools/embed?stage=zero1&gpus=16&controls=step", False, False),
        ),
        ("stage=zero1&theme=projector", "/", (), Theme.DEFAULT, StateView(1, "/?stage=zero1", False, False)),
        ("stage=zero1", "/", (), Theme.PROJECTOR, StateView(1, "/?stage=zero1&theme=projector", False, False)),
        (
            "stage=zero1&theme=projector", "/", (), Theme.PROJECTOR,
            StateView(1, "/?stage=zero1&theme=projector", False, False),
        ),
    ],
)  # fmt: skip
def test_a_follower_is_sent_the_address_it_draws_in_its_own_theme(
    shown: str, base: str, options: tuple[tuple[str, str], ...], theme: Theme, expected: StateView
) -> None:
    assert state_view(_session(shown), base, options, theme) == expected


@pytest.mark.parametrize(
    ("shown", "theme", "drawn"),
    [
        ("stage=zero3&phase=5&theme=projector", Theme.DEFAULT, "stage=zero3&phase=5"),
        ("stage=zero3&phase=5", Theme.PROJECTOR, "stage=zero3&phase=5&theme=projector"),
        ("stage=dp&gpus=16&theme=projector", Theme.PROJECTOR, "stage=dp&gpus=16&theme=projector"),
    ],
)
def test_a_followers_page_draws_the_teachers_view_in_the_followers_theme(shown: str, theme: Theme, drawn: str) -> None:
    assert follower_view(shown, theme) == drawn


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({}, "Following the teacher."),
        ({"paused": True}, "The teacher has paused the class here."),
        ({"ended": True}, "The teacher has ended the session."),
        ({"paused": True, "ended": True}, "The teacher has ended the session."),
    ],
)
def test_the_bar_says_what_the_follower_is_doing(changes: dict[str, bool], words: str) -> None:
    assert state_view(_session("stage=dp", **changes), "/").words == words


@pytest.mark.parametrize(
    ("refusal", "status", "heading", "said"),
    [
        (LiveOff(), 503, "Live sessions are off here", "start it with --redis-url, or with one worker"),
        (NoSuchSession(), 404, "No such session", "There is no live session with that code."),
        (SessionEnded(), 410, "The session has ended", "The teacher has ended this session."),
        (TooManyTries(), 429, "Too many tries", "Too many wrong codes from this address. Wait ten minutes"),
        (NotTheTeacher(), 403, "Only the teacher can drive", "from the browser that started it."),
        (RoomFull(1234), 429, "This session is full", "This session is full: 1,234 are following already."),
    ],
)
def test_each_refusal_of_the_live_rules_is_worded_with_its_status(
    refusal: Refusal, status: int, heading: str, said: str
) -> None:
    problem = problem_for(refusal)
    assert (problem.status, problem.heading) == (status, heading)
    assert said in problem.message


def test_every_kind_of_refusal_has_its_words() -> None:
    assert set(WORDING) == set(Refusal.__subclasses__())


def _qr(settings: Settings, host: str) -> Response:
    with TestClient(create_app(settings)) as client:
        teach = client.post("/live", data={"view": "/?stage=zero2"}, follow_redirects=False)
        code = teach.headers["location"].split("/")[2]
        return client.get(f"/live/{code}/qr.svg", headers={"Host": host})


@pytest.mark.parametrize(
    ("host", "said"),
    [
        ("class.example", ""),
        ("class.example:8000", ""),
        ("10.0.0.7:8000", ""),
        ("[::1]:8000", ""),
        ("h" * 100, ""),
        ("h" * 101, BAD_HOST),  # a host the app answers to, but too long a QR for a phone (and 21 ms at 255)
        ("h" * 255, BAD_HOST),
        ("h" * 2_400, NOT_A_HOST),  # segno's DataOverflowError: a 500 before
        ("a b", NOT_A_HOST),
        ("class.example:8000:9", NOT_A_HOST),
        ("<script>", NOT_A_HOST),
    ],
)
def test_the_qr_code_is_drawn_for_a_short_host_name_and_refused_for_anything_else(host: str, said: str) -> None:
    response = _qr(Settings(), host)
    if not said:
        assert response.status_code == 200
        assert one(dom(response.text), "svg")["class"] == ["segno"]
    else:
        assert response.status_code == 400
        assert said in " ".join(dom(response.text).get_text(" ").split())
        assert len(host) < 10 or host not in response.text


def test_with_a_public_url_the_qr_code_is_of_it_whatever_the_host() -> None:
    with TestClient(create_app(Settings(public_url="https://zero.example.edu"))) as client:
        code = started(client, "/?stage=zero2")
        response = client.get(f"/live/{code}/qr.svg", headers={"Host": "h" * 200})
        assert response.status_code == 200
        assert response.content == qr_svg(f"https://zero.example.edu/live/{code}?k={join_key(client, code)}")


def test_the_qr_code_is_drawn_in_a_render_slot_and_is_busy_when_none_is_free() -> None:
    with TestClient(create_app(Settings(limit_concurrency=1))) as client:
        teach = client.post("/live", data={"view": "/?stage=zero2"}, follow_redirects=False)
        qr = teach.headers["location"].replace("/teach", "/qr.svg")
        limit = _layer(client.app, ConcurrencyLimit)
        assert client.get(qr).status_code == 200
        assert (limit.active, limit.refused) == (0, 0)
        limit.active = 1  # another request renders
        busy = client.get(qr, headers={"Host": "other.example"})
        limit.active = 0
    assert busy.status_code == 503
    assert busy.headers["retry-after"] == "1"
    assert one(dom(busy.text), "h1").text == "Busy"
    assert limit.refused == 1


def _layer(app: object, kind: type[T]) -> T:
    """The middleware of `kind` in a built app's stack."""
    layer: Any = getattr(app, "middleware_stack", None) or app
    while not isinstance(layer, kind):
        layer = layer.app
    return layer


def test_the_qr_code_of_an_address_is_drawn_once() -> None:
    url = "http://class.example/live/QRONCE"
    drawn = qr_svg.cache_info().misses
    assert qr_svg(url) == qr_svg(url)
    assert qr_svg.cache_info().misses == drawn + 1
