"""A question put to a live class, as its screens show it: the teacher's panel with the spread, a follower's panel.

The question is worked out from the view the teacher is on (app/web/live.py `question_for`,
app/domain/questions.py); the answers are counted by the hub (app/live/service.py `spreads`); here
they are only formatted: the spread as bars of SVG drawn on the server, no chart script.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from app.domain.questions import AnswerKind, Question, Spread, most_missed
from app.domain.recipes import Band
from app.domain.report import TermKind
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
    revealed: bool = False
    """Whether the answer is shown: the right cells are then marked."""
    hue: str = ""
    """The band's colour class, the grid's own (`TermKind`'s look): the cell to tap is drawn in its band's colour."""
    checked: str | None = field(init=False, repr=False, compare=False)
    heat_css: str = field(init=False, repr=False, compare=False)
    """On the teacher's heat map: a fifth of the most tapped, and the right cells at the reveal."""
    mine_css: str = field(init=False, repr=False, compare=False)
    stored: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """A right cell's mark at the reveal."""
    tap_words: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The follower's own tap, said."""

    def __post_init__(self) -> None:
        marked = self.right and self.revealed
        derived = {
            "checked": "" if self.tapped else None,
            "heat_css": f"heat-{round(self.share * 4)}" + (" right" if marked else ""),
            "mine_css": " ".join(css for css, on in (("tapped", self.tapped), ("right", marked)) if on),
            "stored": ("stored",) if marked else (),
            "tap_words": ((", tapped" if marked else "tapped"),) if self.tapped else (),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True)
class BarLine:
    """One answer's bar in a round's spread: its words, count and width, and its tick when right."""

    label: str
    count: str
    width: str
    css: str | None
    ticks: tuple[str, ...]


@dataclass(frozen=True)
class Bars:
    """One round's spread as bars: (label, count, width 0–1, right) each, and its words."""

    title: str
    answered: int
    rows: tuple[tuple[str, int, float, bool], ...]
    cells: tuple[TapCell, ...]
    right_words: str
    """"40% right (4 of 10)", shown at the reveal only."""
    missed: str = ""
    """At a cells round's reveal, the cells most answers got wrong, in words."""
    unit: str = ""
    """After each answer's label: a number question's unit."""
    tick: str = "right"
    """Beside the right answer: "right", or a number's "holds the answer"."""
    folded: bool = False
    """An earlier round: its line shown, its spread one click away, so the latest and the grid stay in view."""
    frame: str = field(init=False, repr=False, compare=False)
    """"folded" (a summary that opens) or "shown"."""
    kind: str = field(init=False, repr=False, compare=False)
    """How the spread is drawn: "cells" (a heat map of the card), "rows" (bars) or "none" (no answers)."""
    lines: tuple[BarLine, ...] = field(init=False, repr=False, compare=False)
    right_notes: tuple[str, ...] = field(init=False, repr=False, compare=False)
    misses: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        unit = f" {self.unit}" if self.unit else ""
        lines = tuple(
            BarLine(
                label + unit,
                f"{count:,}",
                f"{width * 100:.1f}",
                *(("right", (f"✓ {self.tick}",)) if right else (None, ())),
            )
            for label, count, width, right in self.rows
        )
        object.__setattr__(self, "frame", "folded" if self.folded else "shown")
        object.__setattr__(self, "kind", "cells" if self.cells else "rows" if self.rows else "none")
        object.__setattr__(self, "lines", lines)
        object.__setattr__(self, "right_notes", (self.right_words,) if self.right_words else ())
        object.__setattr__(self, "misses", (self.missed,) if self.missed else ())


@dataclass(frozen=True)
class PollAction:
    """One of the teacher's buttons on the question: its action and its words."""

    value: str
    id: str
    label: str


def card_options(cards: tuple[int, ...]) -> tuple[tuple[int, str | None], ...]:
    """The cards "Ask the class" can ask about, each with its `selected` attribute: GPU 1 chosen first."""
    return tuple((card, "" if card == 1 else None) for card in cards)


def _heading(poll: Poll) -> str:
    return f"Question {poll.number}" + (f" · vote {poll.round}" if poll.round > 1 else "")


def _hides(poll: Poll) -> str | None:
    """`data-hides` while the picture shows the answer and it is not revealed: the picture hides."""
    return "" if poll.question.hides_picture and not poll.revealed else None


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
    count_words: str = field(init=False, repr=False, compare=False)
    """E.g. "12 of 30 following have answered"; more answers than screens following now (some left): both."""
    count_line: str = field(init=False, repr=False, compare=False)
    """The count, and that the vote is closed once it is."""
    heading: str = field(init=False, repr=False, compare=False)
    attrs: dict[str, str | None] = field(init=False, repr=False, compare=False)
    """The picture hidden (`data-hides`), and the panel asked again every half second while the vote is open."""
    actions: tuple[PollAction, ...] = field(init=False, repr=False, compare=False)
    """Before "Put the question away": close and show while open; then vote again or reveal, until revealed."""
    answers: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The right answer, once revealed."""

    def __post_init__(self) -> None:
        poll = self.poll
        if self.answered > self.followers:
            count = f"{self.answered:,} have answered · {self.followers:,} following now"
        else:
            count = f"{self.answered:,} of {self.followers:,} following have answered"
        attrs: dict[str, str | None] = {"data-hides": _hides(poll)}
        if poll.open:
            attrs |= {"hx-get": self.href, "hx-trigger": "every 500ms", "hx-swap": "morph"}
            actions: tuple[PollAction, ...] = (PollAction("show", "poll-show", "Close and show the answers"),)
        elif not poll.revealed:
            actions = (
                PollAction("again", "poll-again", "Vote again"),
                PollAction("reveal", "poll-reveal", "Reveal the answer"),
            )
        else:
            actions = ()
        derived = {
            "count_words": count,
            "count_line": count if poll.open else f"{count} · the vote is closed",
            "heading": _heading(poll),
            "attrs": attrs,
            "actions": actions,
            "answers": (self.question.answer_words,) if poll.revealed else (),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


@dataclass(frozen=True)
class QuestionPanel:
    """A follower's panel: the question, the form while open, the follower's own answer, the answer at the reveal."""

    question: Question
    poll: Poll
    vote_href: str
    own: str | None
    cells: tuple[TapCell, ...] = ()
    error: str = ""
    own_words: str = field(init=False, repr=False, compare=False)
    """The follower's answer, for people."""
    own_right: bool = field(init=False, repr=False, compare=False)
    """Whether the follower's own answer is right."""
    state: str = field(init=False, repr=False, compare=False)
    """Which panel: "open" (the form), "revealed" (the answer) or "closed" (talk it over)."""
    heading: str = field(init=False, repr=False, compare=False)
    key: str = field(init=False, repr=False, compare=False)
    """The round now, as the hub keys its votes (`number.round`): sent with the vote."""
    attrs: dict[str, str | None] = field(init=False, repr=False, compare=False)
    """The picture hidden (`data-hides`); `data-predicts` while a prediction's vote is open."""
    answer_words: str = field(init=False, repr=False, compare=False)
    errors: tuple[str, ...] = field(init=False, repr=False, compare=False)
    input_attrs: dict[str, str | None] = field(init=False, repr=False, compare=False)
    """A number's field, marked invalid and described by the error."""
    choices: tuple[tuple[int, str, str | None], ...] = field(init=False, repr=False, compare=False)
    """A choice question's choices: each one's value, words, and whether it is the follower's (checked)."""
    send_label: str = field(init=False, repr=False, compare=False)
    sent: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The follower's answer once sent; `unsent` the words in its place before."""
    unsent: tuple[str, ...] = field(init=False, repr=False, compare=False)
    yours: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)
    """At the reveal: the follower's answer, and "right" or "not right"."""
    unanswered: tuple[str, ...] = field(init=False, repr=False, compare=False)
    mine_tables: tuple[tuple[TapCell, ...], ...] = field(init=False, repr=False, compare=False)
    """The follower's card at the reveal: the right cells and their taps."""

    def __post_init__(self) -> None:
        poll, q, own = self.poll, self.question, self.own
        words = _answer_words(q, own)
        right = own is not None and q.is_right(own)
        sent = own is not None
        predicts = "" if q.reveal_phase is not None and poll.open else None
        derived = {
            "own_words": words,
            "own_right": right,
            "state": "open" if poll.open else "revealed" if poll.revealed else "closed",
            "heading": _heading(poll),
            "key": poll.key,
            "attrs": {"data-hides": _hides(poll), "data-predicts": predicts},
            "answer_words": q.answer_words,
            "errors": (self.error,) if self.error else (),
            "input_attrs": {"aria-invalid": "true", "aria-describedby": "live-question-error"} if self.error else {},
            "choices": tuple((i, c, "" if own == str(i) else None) for i, c in enumerate(q.choices)),
            "send_label": "Change my answer" if sent else "Send my answer",
            "sent": (words,) if sent else (),
            "unsent": () if sent else ("Your answer is anonymous.",),
            "yours": ((words, "right" if right else "not right"),) if sent else (),
            "unanswered": () if sent else ("You did not answer.",),
            "mine_tables": (self.cells,) if self.cells else (),
        }
        for name, value in derived.items():
            object.__setattr__(self, name, value)


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
BAND_HUE = {kind.band: kind.look.css for kind in TermKind if kind.band is not None}
"""Each band's colour class, as the grid's cells and the key take it from the terms' declarations."""


def card_cells(
    question: Question, tapped: str | None = None, spread: Spread | None = None, revealed: bool = False
) -> tuple[TapCell, ...]:
    """A cells question's card: each cell with the follower's tap, or the class's count from `spread`.

    `revealed`: the answer is shown, and the right cells marked.
    """
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
                             count / most, count, revealed, BAND_HUE[Band(band)]))  # fmt: skip
    return tuple(cells)


def round_bars(question: Question, number: int, spread: Spread, revealed: bool, folded: bool = False) -> Bars:
    """One round's spread, drawn: each bar's share of the tallest; the right one marked at the reveal only.

    `folded`: an earlier round, its spread one click away.
    """
    most = max((bar.count for bar in spread.bars), default=0) or 1
    rows = tuple((bar.label, bar.count, bar.count / most, revealed and bar.right) for bar in spread.bars)
    cells = card_cells(question, spread=spread, revealed=revealed) if question.kind is AnswerKind.CELLS else ()
    words = f"{percent(spread.share_right)} right ({spread.right:,} of {spread.answered:,})" if revealed else ""
    number_kind = question.kind is AnswerKind.NUMBER
    unit, tick = (question.unit, "holds the answer") if number_kind else ("", "right")
    missed = _missed(question, spread, revealed)
    return Bars(f"Round {number}", spread.answered, rows, cells, words, missed, unit, tick, folded)


def _missed(question: Question, spread: Spread, revealed: bool) -> str:
    """At a cells round's reveal, the cells most often wrong: "Most missed (2 of 3 answers wrong about each): …"."""
    misses = most_missed(question, spread) if revealed and question.kind is AnswerKind.CELLS else ()
    if not misses:
        return ""
    return (f"Most missed ({misses[0].wrong:,} of {spread.answered:,} answers wrong about each): "
            + ", ".join(m.words for m in misses))  # fmt: skip


def poll_panel(
    poll: Poll, answered: int, followers: int, spreads: tuple[Spread, ...], hrefs: tuple[str, str, str]
) -> PollPanel:
    """The teacher's panel: `spreads` (each round's, counted) drawn once the teacher shows them."""
    shown = poll.shown or poll.revealed
    last = len(spreads)
    rounds = tuple(round_bars(poll.question, i, s, poll.revealed, i < last) for i, s in enumerate(spreads, 1))
    rounds = rounds if shown else ()
    href, action, csv = hrefs
    return PollPanel(poll.question, poll, answered, followers, href, action, csv, rounds)


def question_panel(poll: Poll, vote_href: str, own: str | None, error: str = "") -> QuestionPanel:
    """A follower's panel: their own answer (a cells question's taps on their copy of the card)."""
    cells = card_cells(poll.question, own, revealed=poll.revealed) if poll.question.kind is AnswerKind.CELLS else ()
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
