"""A question put to a live class, as its screens show it: the teacher's panel with the spread, a follower's panel.

The question is worked out from the view the teacher is on (app/web/live.py `question_for`,
app/domain/questions.py); the answers are counted by the hub (app/live/service.py `spreads`); here
they are only formatted: the spread as bars of SVG drawn on the server, no chart script.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

from app.domain.questions import AnswerKind, Question, Spread
from app.domain.recipes import Band
from app.domain.units import percent
from app.live.session import Poll


@dataclass(frozen=True)
class TapCell:
    """One cell of a cells question's card: its field value, its label, and what a spread or a reveal marks."""

    value: str
    weight: int
    band: str
    label: str
    right: bool = False
    tapped: bool = False
    """The follower's own tap, or (on the teacher's heat map) how many tapped it, as a share."""
    share: float = 0.0
    count: int = 0


@dataclass(frozen=True)
class Bars:
    """One round's spread as bars: (label, count, width 0–1, right) each, and its words."""

    title: str
    answered: int
    rows: tuple[tuple[str, int, float, bool], ...]
    cells: tuple[TapCell, ...]
    right_words: str
    """"40% right (4 of 10)", shown at the reveal only."""


@dataclass(frozen=True)
class PollPanel:
    """The teacher's panel for the question now: the count while open, then the spread, then the answer."""

    question: Question
    poll: Poll
    answered: int
    followers: int
    href: str
    """Its own address: asked again every moment while the vote is open."""
    action_href: str
    csv_href: str
    rounds: tuple[Bars, ...] = ()
    """Each round's spread, once shown; empty before."""

    @property
    def count_words(self) -> str:
        """E.g. "12 of 30 following have answered"; more answers than screens following now (some left): both."""
        if self.answered > self.followers:
            return f"{self.answered:,} have answered · {self.followers:,} following now"
        return f"{self.answered:,} of {self.followers:,} following have answered"


@dataclass(frozen=True)
class QuestionPanel:
    """A follower's panel: the question, the form while open, the follower's own answer, the answer at the reveal."""

    question: Question
    poll: Poll
    vote_href: str
    own: str | None
    cells: tuple[TapCell, ...] = ()
    error: str = ""

    @property
    def own_words(self) -> str:
        """The follower's answer, for people."""
        return _answer_words(self.question, self.own)

    @property
    def own_right(self) -> bool:
        """Whether the follower's own answer is right."""
        return self.own is not None and self.question.is_right(self.own)


def _answer_words(question: Question, answer: str | None) -> str:
    if answer is None:
        return "none"
    if question.kind is AnswerKind.CHOICE:
        return question.choices[int(answer)]
    if question.kind is AnswerKind.NUMBER:
        return f"{answer} {question.unit}"
    tapped = [a for a in answer.split(",") if a]
    return f"{len(tapped)} cell{'' if len(tapped) == 1 else 's'} tapped"


BAND_SHORT = {Band.WEIGHTS: "W", Band.GRADIENTS: "G", Band.MASTER: "M", Band.MOMENTS: "A"}
"""A band's letter on a tapped cell (the key's own order: weights, gradients, master, Adam's moments)."""


def card_cells(question: Question, tapped: str | None = None, spread: Spread | None = None) -> tuple[TapCell, ...]:
    """A cells question's card: each cell with the follower's tap, or the class's count from `spread`."""
    taps = set((tapped or "").split(","))
    counts = {bar.label: bar.count for bar in spread.bars} if spread else {}
    right = set(question.answer.split(","))
    most = max(counts.values(), default=0) or 1
    cells = []
    for value in question.cells:
        weight, band = value.split(".")
        label = f"GPU {question.card}, weight {weight}, {Band(band).value}"
        count = counts.get(value, 0)
        cells.append(TapCell(value, int(weight), BAND_SHORT[Band(band)], label, value in right, value in taps,
                          count / most, count))  # fmt: skip
    return tuple(cells)


def round_bars(question: Question, number: int, spread: Spread, revealed: bool) -> Bars:
    """One round's spread, drawn: each bar's share of the tallest; the right one marked at the reveal only."""
    most = max((bar.count for bar in spread.bars), default=0) or 1
    rows = tuple((bar.label, bar.count, bar.count / most, revealed and bar.right) for bar in spread.bars)
    cells = card_cells(question, spread=spread) if question.kind is AnswerKind.CELLS else ()
    words = f"{percent(spread.share_right)} right ({spread.right:,} of {spread.answered:,})" if revealed else ""
    return Bars(f"Round {number}", spread.answered, rows, cells, words)


def poll_panel(
    poll: Poll, answered: int, followers: int, spreads: tuple[Spread, ...], hrefs: tuple[str, str, str]
) -> PollPanel:
    """The teacher's panel: `spreads` (each round's, counted) drawn once the teacher shows them."""
    shown = poll.shown or poll.revealed
    rounds = tuple(round_bars(poll.question, i, s, poll.revealed) for i, s in enumerate(spreads, 1)) if shown else ()
    href, action, csv = hrefs
    return PollPanel(poll.question, poll, answered, followers, href, action, csv, rounds)


def question_panel(poll: Poll, vote_href: str, own: str | None, error: str = "") -> QuestionPanel:
    """A follower's panel: their own answer (a cells question's taps on their copy of the card)."""
    cells = card_cells(poll.question, own) if poll.question.kind is AnswerKind.CELLS else ()
    return QuestionPanel(poll.question, poll, vote_href, own, cells, error)


CSV_HEADER = ("question", "round", "kind", "prompt", "answer", "answered", "right", "spread")


def results_csv(rounds: list[tuple[Poll, tuple[Spread, ...]]]) -> str:
    """The session's questions and each round's counts, as CSV: what was asked, how the class answered.

    Counts only: no token, no one's answer. A cells question's spread is the taps per cell.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_HEADER)
    for poll, spreads in rounds:
        q = poll.question
        for number, counted in enumerate(spreads, 1):
            bars = "; ".join(f"{bar.label}: {bar.count}" for bar in counted.bars)
            writer.writerow((poll.number, number, q.kind.value, q.prompt, q.answer_words, counted.answered,
                             counted.right, bars))  # fmt: skip
    return out.getvalue()
