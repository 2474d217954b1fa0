"""app/live/session.py: join codes, the teacher's secret, and how a session changes, with no clock of its own."""

from __future__ import annotations

import pytest

from app.domain.questions import AnswerKind, Question
from app.live.session import (
    ALPHABET,
    CODE_LENGTH,
    LIFETIME_SECONDS,
    MAX_POLLS,
    Session,
    digest,
    new_code,
    normal_code,
    start,
)

NOW = 1_800_000_000.0
VIEW = "stage=zero3&phase=4"
OTHER = "stage=zero1"


@pytest.mark.parametrize("look_alike", list("0OQ1IL2Z5S6G8BUV"))
def test_the_alphabet_has_no_look_alikes(look_alike: str) -> None:
    assert look_alike not in ALPHABET


def test_the_alphabet_is_capitals_and_digits_each_once() -> None:
    assert len(set(ALPHABET)) == len(ALPHABET) == 20
    assert all(c.isdigit() or c.isupper() for c in ALPHABET)


@pytest.mark.parametrize("draw", range(50))
def test_a_new_code_is_eight_characters_of_the_alphabet(draw: int) -> None:
    code = new_code()
    assert len(code) == CODE_LENGTH == 8
    assert set(code) <= set(ALPHABET)
    assert normal_code(code) == code


@pytest.mark.parametrize(
    ("typed", "stored"),
    [
        ("ACDEFHJK", "ACDEFHJK"),
        ("acdefhjk", "ACDEFHJK"),
        ("AcDeFhJk", "ACDEFHJK"),
        ("ACDE FHJK", "ACDEFHJK"),
        ("  acde fhjk ", "ACDEFHJK"),
        ("ACDE-FHJK", "ACDEFHJK"),
        ("a-c-d-e-f-h-j-k", "ACDEFHJK"),
        ("3797 XY4K", "3797XY4K"),
        ("acde\u2013fhjk", "ACDEFHJK"),  # a phone's keyboard turns "-" into an en dash
        ("ACDE\u2014FHJK", "ACDEFHJK"),
        ("ACDE\u2212FHJK", "ACDEFHJK"),
        ("ACDE.FHJK", "ACDEFHJK"),
        ("ACDE\u00a0FHJK", "ACDEFHJK"),
        ("ACDEFHJ", None),
        ("ACDEFHJKM", None),
        ("ACDEFH", None),
        ("", None),
        ("--------", None),
        ("ACDEFHJ0", None),
        ("ACDEFHJO", None),
        ("ACDEFHJ1", None),
        ("ACDEFHJI", None),
        ("ACDEFHJS", None),
        ("ACDEFHJB", None),
        ("ACDEFHJU", None),
        ("acdefhjv", None),
        ("ACDE_FHJK", None),
        ("ACDEFHJ\u0397", None),
        ("ACDE\tFHJK", None),
    ],
)
def test_normal_code(typed: str, stored: str | None) -> None:
    assert normal_code(typed) == stored


def _started() -> tuple[Session, str]:
    return start(VIEW, NOW)


def test_a_new_session_shows_the_teachers_view_at_version_one() -> None:
    session, secret = _started()
    assert (session.view, session.shown, session.version, session.touched) == (VIEW, VIEW, 1, NOW)
    assert (session.paused, session.ended) == (False, False)
    assert session.secret_digest == digest(secret)
    assert secret not in session.to_json()


def test_two_sessions_have_their_own_secrets() -> None:
    (first, first_secret), (second, second_secret) = _started(), _started()
    assert first_secret != second_secret
    assert first.secret_digest != second.secret_digest


@pytest.mark.parametrize(
    ("steps", "view", "shown", "paused", "ended"),
    [
        ([("show", OTHER)], OTHER, OTHER, False, False),
        ([("show", OTHER), ("show", VIEW)], VIEW, VIEW, False, False),
        ([("pause", True)], VIEW, VIEW, True, False),
        ([("pause", True), ("show", OTHER)], OTHER, VIEW, True, False),
        ([("pause", True), ("show", OTHER), ("show", "stage=dp")], "stage=dp", VIEW, True, False),
        ([("pause", True), ("show", OTHER), ("pause", False)], OTHER, OTHER, False, False),
        ([("pause", True), ("pause", True), ("show", OTHER)], OTHER, VIEW, True, False),
        ([("pause", False)], VIEW, VIEW, False, False),
        ([("show", OTHER), ("end", None)], OTHER, OTHER, False, True),
        ([("pause", True), ("show", OTHER), ("end", None)], OTHER, VIEW, True, True),
    ],
    ids=[
        "show", "show-twice", "pause", "paused-holds", "paused-holds-twice", "resume-brings-view",
        "pause-again", "resume-unpaused", "end", "end-paused",
    ],
)  # fmt: skip
def test_transitions(
    steps: list[tuple[str, str | bool | None]], view: str, shown: str, paused: bool, ended: bool
) -> None:
    session, _ = _started()
    for n, (action, value) in enumerate(steps, start=1):
        now = NOW + 60 * n
        if action == "show":
            assert isinstance(value, str)
            changed = session.show(value, now)
        elif action == "pause":
            assert isinstance(value, bool)
            changed = session.pause(value, now)
        else:
            changed = session.end(now)
        assert changed.version == session.version + 1
        assert changed.touched == now
        assert (changed.code, changed.secret_digest) == (session.code, session.secret_digest)
        session = changed
    assert (session.view, session.shown, session.paused, session.ended) == (view, shown, paused, ended)
    assert session.version == 1 + len(steps)


def test_a_change_leaves_the_session_it_came_from_as_it_was() -> None:
    session, _ = _started()
    session.show(OTHER, NOW + 1)
    session.pause(True, NOW + 1)
    session.end(NOW + 1)
    assert (session.view, session.version, session.paused, session.ended) == (VIEW, 1, False, False)


@pytest.mark.parametrize(
    ("since", "expired"),
    [
        (0, False),
        (LIFETIME_SECONDS - 1, False),
        (LIFETIME_SECONDS, False),
        (LIFETIME_SECONDS + 1, True),
        (LIFETIME_SECONDS + 3600, True),
    ],
)
def test_a_session_expires_four_hours_after_the_teachers_last_action(since: float, expired: bool) -> None:
    session, _ = _started()
    assert LIFETIME_SECONDS == 4 * 3600
    assert session.expired(NOW + since) is expired
    acted = session.show(OTHER, NOW + since)
    assert acted.expired(NOW + since + LIFETIME_SECONDS) is False
    assert acted.expired(NOW + since + LIFETIME_SECONDS + 1) is True


@pytest.mark.parametrize(
    ("cookie", "teacher"),
    [("the secret", True), ("the secret and more", False), ("another", False), ("empty", False), ("none", False)],
)
def test_is_teacher(cookie: str, teacher: bool) -> None:
    session, secret = _started()
    given = {"the secret": secret, "the secret and more": secret + "x", "another": _started()[1], "empty": ""}
    assert session.is_teacher(given.get(cookie)) is teacher


def test_the_secret_is_kept_as_its_sha256() -> None:
    assert digest("secret") == "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b"


@pytest.mark.parametrize(
    "session",
    [
        _started()[0],
        _started()[0].pause(True, NOW + 5).show(OTHER, NOW + 6),
        _started()[0].end(NOW + 1.5),
        Session("ACDEFH", digest("s"), "stage=dp&gpus=64", "stage=dp", 0.0, version=99, paused=True),
    ],
    ids=["new", "paused", "ended", "built"],
)
def test_json_round_trip(session: Session) -> None:
    text = session.to_json()
    assert Session.from_json(text) == session
    assert Session.from_json(text.encode()) == session
    assert ", " not in text
    assert ": " not in text


QUESTION = Question(AnswerKind.CELLS, "Which cells?", "0.weights", "zero1", card=0, weights=(0, 1))


def test_a_question_and_its_rounds_travel_in_the_sessions_json() -> None:
    session, _ = start("stage=zero1", 0.0)
    asked = session.ask(QUESTION, 1.0).poll_edit(2.0, None, open=False, shown=True).poll_edit(3.0, None, round=2)
    assert Session.from_json(asked.to_json()) == asked
    assert asked.poll is not None
    assert (asked.poll.key, asked.poll.keys, asked.version) == ("1.2", ("1.1", "1.2"), session.version + 3)


def test_a_question_put_away_is_no_longer_the_one_on_the_screens_and_the_next_is_numbered_after_it() -> None:
    session, _ = start("stage=zero1", 0.0)
    done = session.ask(QUESTION, 1.0).poll_edit(2.0, None, done=True)
    assert done.poll is None
    assert done.poll_edit(3.0, None, open=False) == done  # nothing to change
    assert done.ask(QUESTION, 4.0).poll is not None
    assert done.ask(QUESTION, 4.0).polls[-1].number == 2


def test_a_session_keeps_its_last_fifty_questions() -> None:
    session, _ = start("stage=zero1", 0.0)
    for i in range(MAX_POLLS + 5):
        session = session.ask(QUESTION, float(i))
    assert [p.number for p in session.polls] == list(range(6, MAX_POLLS + 6))


def test_a_reveal_that_steps_moves_the_view_in_the_same_version() -> None:
    session, _ = start("stage=zero3&phase=5", 0.0)
    asked = session.ask(QUESTION, 1.0)
    revealed = asked.poll_edit(2.0, "stage=zero3&phase=6", revealed=True)
    assert (revealed.view, revealed.version) == ("stage=zero3&phase=6", asked.version + 1)


def test_a_followers_token_is_signed_by_its_session_and_no_other() -> None:
    session, _ = start("stage=zero1", 0.0)
    other, _ = start("stage=zero1", 0.0)
    token = session.voter()
    assert session.is_voter(token)
    assert not other.is_voter(token)
    assert session.voter() != token
    nonce, _, signature = token.partition(".")
    assert not session.is_voter(f"{nonce}x.{signature}")
    assert not session.is_voter(None)
    assert not session.is_voter("")
