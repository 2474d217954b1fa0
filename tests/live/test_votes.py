"""app/live/hub.py's votes, the same over MemoryHub and RedisHub: one per token, changed until closed, within limits."""

from __future__ import annotations

import asyncio

import pytest

from app.domain.questions import AnswerKind, Question
from app.live.hub import (
    SEAT_GRACE_SECONDS,
    STREAMS_PER_SEAT,
    VOTE_CHANGES,
    VOTE_WINDOW_SECONDS,
    Full,
    Hub,
    MemoryHub,
    Room,
    VoteRefused,
)
from app.live.session import Session
from tests.live.conftest import Clock, MakeHub, opened, run, started

QUESTION = Question(AnswerKind.CHOICE, "Bytes per weight under ZeRO-1?", "1", "zero1", choices=("16 B", "5.5 B", "2 B"))
PLENTY = 10_000
"""A per-address limit no test reaches but the one that tests it."""


async def asked(hub: Hub, clock: Clock, seats: int = 0, prefix: str = "t") -> Session:
    """A session with QUESTION open, round 1; the tokens a, b, c and `prefix`0 … held seats (admitted, then gone)."""
    session, _ = await started(hub, clock)
    changed = await hub.update(session.code, lambda s: s.ask(QUESTION, clock()))
    assert changed is not None
    await seated(hub, session.code, "a", "b", "c", *(f"{prefix}{i}" for i in range(seats)))
    return changed


async def seated(hub: Hub, code: str, *tokens: str, client: str = "10.9.9.9", room: Room | None = None) -> None:
    """Each token's follower admitted (its seat taken), then gone: the seat is held for its grace."""
    for token in tokens:
        await hub.leave(code, await hub.admit(code, client, room, token))


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
            session = await asked(h, clock, seats=100)
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
            session = await asked(h, clock, seats=200)
            votes = [h.vote(session.code, "1.1", f"t{i}", str(i % 3), f"10.1.{i}.1", PLENTY) for i in range(200)]
            counts = await asyncio.gather(*votes)
            assert sorted(c for c in counts if c is not None) == list(range(1, 201))
            assert await h.answered(session.code, "1.1") == 200

    run(scenario())


def test_a_token_without_a_seat_is_refused_and_counts_for_nothing(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            with pytest.raises(VoteRefused) as refused:
                await h.vote(session.code, "1.1", "minted-by-a-page", "1", "10.0.0.1", PLENTY)
            assert refused.value.why == "seat"
            assert await h.answered(session.code, "1.1") == 0

    run(scenario())


def test_a_seat_let_go_past_its_grace_no_longer_counts_until_its_follower_is_back(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            await h.vote(session.code, "1.1", "a", "0", "10.0.0.1", PLENTY)
            await h.vote(session.code, "1.1", "b", "1", "10.0.0.2", PLENTY)
            clock.now += SEAT_GRACE_SECONDS - 1
            assert await h.answered(session.code, "1.1") == 2  # a phone locked for two minutes still counts
            await seated(h, session.code, "b")  # b's phone is back: its seat held again from now
            clock.now += 2
            assert (await h.answered(session.code, "1.1"), await h.ballots(session.code, "1.1")) == (1, ["1"])
            with pytest.raises(VoteRefused) as refused:
                await h.vote(session.code, "1.1", "a", "1", "10.0.0.1", PLENTY)
            assert refused.value.why == "seat"
            await seated(h, session.code, "a")  # a is back: its vote, kept, counts again
            assert await h.answered(session.code, "1.1") == 2

    run(scenario())


def test_two_hundred_fresh_tokens_from_one_address_take_its_share_of_seats_and_no_more_votes(hub: MakeHub) -> None:
    """The ballot stuffed by reloading without the cookie: each load a new token, each admitted and voting."""

    async def scenario() -> None:
        clock = Clock()
        room = Room(50)  # one address's share: 40 seats
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            counted = refused = 0
            for i in range(200):
                try:
                    await seated(h, session.code, f"fresh{i}", client="203.0.113.7", room=room)
                except Full as full:
                    refused += full.address  # the address's share taken, not the room
                    continue
                counted = await h.vote(session.code, "1.1", f"fresh{i}", "0", "203.0.113.7", PLENTY) or 0
            assert (200 - refused, await h.answered(session.code, "1.1")) == (room.per_address, room.per_address)
            assert counted == room.per_address == 40
            # A classmate behind another address still takes a seat and votes.
            await seated(h, session.code, "classmate", client="198.51.100.2", room=room)
            assert await h.vote(session.code, "1.1", "classmate", "1", "198.51.100.2", PLENTY) == 41

    run(scenario())


def test_one_token_holds_a_few_streams_its_tabs_and_no_more(hub: MakeHub) -> None:
    async def scenario() -> None:
        clock = Clock()
        async with opened(hub, clock) as h:
            session = await asked(h, clock)
            tabs = [await h.admit(session.code, "10.0.0.1", Room(50), "tabs") for _ in range(STREAMS_PER_SEAT)]
            with pytest.raises(Full) as refused:
                await h.admit(session.code, "10.0.0.1", Room(50), "tabs")
            assert refused.value.streams
            assert (await h.seats(session.code))[0] == 4  # a, b, c and the one seat of all its tabs
            await h.leave(session.code, tabs[0])
            tabs[0] = await h.admit(session.code, "10.0.0.1", Room(50), "tabs")  # a tab closed: another opens
            for queue in tabs:
                await h.leave(session.code, queue)

    run(scenario())
