"""app/web/live_page.py: a live page draws the session's view once for a whole class, and the same as the page does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient
from starlette.requests import Request

from app.main import create_app
from app.web import live_page
from app.web.config_view import LIVE_PASTE
from app.web.inputs import PageQuery
from app.web.links import Links
from app.web.page_view import PageView
from app.web.pages import stage_page
from tests.conftest import dom, one
from tests.web.test_live import follower, started

VIEW = "/?stage=zero3&model=llama-3-70b&gpus=64&phase=5"


@pytest.fixture
def live() -> Iterator[TestClient]:
    """A client of its own, and no view drawn before the test."""
    live_page._drawn.clear()
    live_page._pages.clear()
    with TestClient(create_app()) as client:
        yield client
    live_page._drawn.clear()
    live_page._pages.clear()


@pytest.fixture
def draws(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The views built for live pages, in order."""
    built: list[str] = []

    def counted(request: Request, query: PageQuery) -> tuple[PageView, Links]:
        built.append(query.stage)
        return stage_page(request, query)

    monkeypatch.setattr(live_page, "stage_page", counted)
    return built


@pytest.mark.slow  # 30 followers' whole pages: a load test by nature
def test_a_class_joining_is_drawn_one_view(live: TestClient, draws: list[str]) -> None:
    code = started(live, VIEW)
    assert live.get(f"/live/{code}/teach").status_code == 200  # the teacher's page draws the view
    pages = [follower(live).get(f"/live/{code}") for _ in range(30)]
    assert [p.status_code for p in pages] == [200] * 30
    assert draws == ["zero3"]
    # Each page is whole, with its own bar, and never kept by a shared cache.
    assert all(one(dom(p.text), "#live-follow") for p in pages)
    assert {p.headers["cache-control"] for p in pages} == {"no-store"}


def test_a_followers_widget_is_the_pages_own(live: TestClient) -> None:
    code = started(live, VIEW)
    followed = one(dom(follower(live).get(f"/live/{code}").text), "#widget")
    page = one(dom(live.get(VIEW).text), "#widget")
    # The page's widget carries the "Teach this live" form's field; a live page, being live already, does not.
    one(page, 'input[name="view"]').decompose()
    # Nor the config forms, whose POST answers with the plain page: words say how to paste there instead.
    for form in page.select("form.config-paste, form.config-upload"):
        form.decompose()
    one(followed, "#config-live").decompose()
    # (the whitespace the removed markup stood in aside)
    assert " ".join(str(followed).split()) == " ".join(str(page).split())


def test_each_host_gets_its_own_drawing_and_the_kept_views_are_bounded(live: TestClient, draws: list[str]) -> None:
    code = started(live, VIEW)
    for i in range(live_page.VIEWS_KEPT + 8):
        host = f"h{i}.example.edu" + "x" * 230 * (i % 2)  # up to the longest Host taken (app/serving/headers.py)
        assert follower(live).get(f"/live/{code}", headers={"host": host}).status_code == 200
    assert len(draws) == live_page.VIEWS_KEPT + 8
    assert len(live_page._drawn) == live_page.VIEWS_KEPT
    assert all(len(key) == 32 for key in live_page._drawn)


@pytest.mark.parametrize("coding", ["gzip, deflate, br, zstd", "gzip, deflate", "identity"])
def test_a_followers_page_is_kept_whole_per_coding_and_changes_with_the_session(live: TestClient, coding: str) -> None:
    code = started(live, VIEW)
    plain = follower(live).get(f"/live/{code}", headers={"Accept-Encoding": "identity"})
    pages = [follower(live).get(f"/live/{code}", headers={"Accept-Encoding": coding}) for _ in range(3)]
    expected = {"gzip, deflate, br, zstd": "br", "gzip, deflate": "gzip"}.get(coding)  # over https, and http
    assert {p.headers.get("content-encoding") for p in pages} == {expected}
    assert {p.text for p in pages} == {plain.text}  # decoded: the same page, whatever the coding
    assert len(live_page._pages) == 1 + (expected is not None)
    live.post(f"/live/{code}/show", data={"view": "/?stage=zero1"}, headers={"ZB-Live": "1"})
    moved = follower(live).get(f"/live/{code}", headers={"Accept-Encoding": coding})
    assert one(dom(moved.text), "#widget")["data-stage"] == "zero1"
    assert one(dom(moved.text), "#live-state")["data-version"] == "2"


def test_the_teachers_page_leaves_out_the_config_forms_and_says_how_to_paste(live: TestClient) -> None:
    # Their POST answers with the plain page: sent from a live page, it would take the teacher out of the session.
    code = started(live, VIEW)
    page = dom(live.get(f"/live/{code}/teach").text)
    assert page.select("form.config-upload, form.config-paste") == []
    assert one(page, "#config-live").get_text() == LIVE_PASTE
    # The run form's box, which the session follows, is there to paste in.
    assert one(page, "textarea#f-config")
    # The plain page keeps both.
    plain = dom(live.get("/").text)
    assert len(plain.select("form.config-upload, form.config-paste")) == 2
