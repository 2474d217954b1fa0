"""app/live/hub.py's votes, the same over MemoryHub and RedisHub: one per token, changed until closed, within limits."""

from __future__ import annotations

import asyncio

import pytest

from app.domain.questions import AnswerKind, Question
from app.live.hub import VOTE_CHANGES, VOTE_WINDOW_SECONDS, Hub, MemoryHub, VoteRefused
from app.live.session import Session
from tests.live.conftest import Clock, MakeHub, opened, run, started

QUESTION = Question(AnswerKind.CHOICE, "Bytes per weight under ZeRO-1?", "1", "zero1", choices=("16 B", "5.5 B", "2 B"))
PLENTY = 10_000
"""A per-address limit no test reaches but the one that tests it."""


async def asked(hub: Hub, clock: Clock) -> Session:
    """A session with QUESTION open, round 1."""
    session, _ = await started(hub, clock)
    changed = await hub.update(session.code, lambda s: s.ask(QUESTION, clock()))
    assert changed is not None
    return changed


def test_a_token_votes_once_and_its_change_replaces_its_vote(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            assert await h.vote(session.code, "1.1", "a", "0", "10.0.0.1", PLENTY) == 1
            assert await h.vote(session.code, "1.1", "b", "1", "10.0.0.2", PLENTY) == 2
            assert await h.vote(session.code, "1.1", "a", "1", "10.0.0.1", PLENTY) == 2
            assert sorted(await h.ballots(session.code, "1.1")) == ["1", "1"]
            assert (await h.answered(session.code, "1.1"), await h.own(session.code, "1.1", "a")) == (2, "1")
            assert await h.own(session.code, "1.1", "c") is None

    run(scenario())


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"open": False, "shown": True}, "1.1"),  # closed to show the spread
        ({"open": False, "revealed": True}, "1.1"),
        ({"open": False, "done": True}, "1.1"),
        ({"round": 2}, "1.1"),  # "Vote again": round 1 no longer takes votes
        ({}, "2.1"),  # a round not asked
    ],
)
def test_a_round_that_takes_no_votes_now_refuses_them(hub: MakeHub, change: dict[str, object], key: str) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            await h.update(session.code, lambda s: s.poll_edit(clock(), None, **change))
            with pytest.raises(VoteRefused) as refused:
                await h.vote(session.code, key, "a", "1", "10.0.0.1", PLENTY)
            assert refused.value.why == "closed"
            assert await h.answered(session.code, key) == 0

    run(scenario())


def test_vote_again_keeps_round_one_and_counts_round_two_apart(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            await h.vote(session.code, "1.1", "a", "0", "10.0.0.1", PLENTY)
            await h.update(session.code, lambda s: s.poll_edit(clock(), None, round=2))
            await h.vote(session.code, "1.2", "a", "1", "10.0.0.1", PLENTY)
            assert (await h.ballots(session.code, "1.1"), await h.ballots(session.code, "1.2")) == (["0"], ["1"])

    run(scenario())


def test_an_ended_or_lost_session_takes_no_votes(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            assert (
                await h.vote("ACDEFH" if session.code != "ACDEFH" else "HFEDCA", "1.1", "a", "1", "x", PLENTY) is None
            )
            await h.update(session.code, lambda s: s.end(clock()))
            with pytest.raises(VoteRefused):
                await h.vote(session.code, "1.1", "a", "1", "10.0.0.1", PLENTY)

    run(scenario())


def test_a_token_that_changes_its_mind_too_often_is_refused_and_its_last_vote_stands(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            for i in range(VOTE_CHANGES):
                await h.vote(session.code, "1.1", "a", str(i % 3), f"10.0.{i}.1", PLENTY)
            with pytest.raises(VoteRefused) as refused:
                await h.vote(session.code, "1.1", "a", "2", "10.0.99.1", PLENTY)
            assert refused.value.why == "token"
            assert await h.own(session.code, "1.1", "a") == str((VOTE_CHANGES - 1) % 3)

    run(scenario())


def test_one_address_is_limited_per_minute_and_a_class_behind_it_within_the_limit_all_vote(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            # A class of 40 behind one school address, each voting and changing its mind once: 80 votes.
            for token in range(40):
                await h.vote(session.code, "1.1", f"t{token}", "0", "192.0.2.1", 80)
                await h.vote(session.code, "1.1", f"t{token}", "1", "192.0.2.1", 80)
            with pytest.raises(VoteRefused) as refused:
                await h.vote(session.code, "1.1", "t99", "1", "192.0.2.1", 80)
            assert refused.value.why == "address"
            assert await h.vote(session.code, "1.1", "t99", "1", "192.0.2.2", 80) == 41  # another address

    run(scenario())


def test_memory_counts_an_address_again_in_the_next_minute() -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(MemoryHub, clock) as h:
            session = await asked(h, clock)
            await h.vote(session.code, "1.1", "a", "0", "192.0.2.1", 1)
            with pytest.raises(VoteRefused):
                await h.vote(session.code, "1.1", "b", "0", "192.0.2.1", 1)
            clock.now += VOTE_WINDOW_SECONDS
            assert await h.vote(session.code, "1.1", "b", "0", "192.0.2.1", 1) == 2

    run(scenario())


def test_many_votes_at_once_are_each_counted_once(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            votes = [h.vote(session.code, "1.1", f"t{i}", str(i % 3), f"10.1.{i}.1", PLENTY) for i in range(200)]
            counts = await asyncio.gather(*votes)
            assert sorted(c for c in counts if c is not None) == list(range(1, 201))
            assert await h.answered(session.code, "1.1") == 200

    run(scenario())
