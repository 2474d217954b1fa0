"""Predict first: before a switch of stage or the step's next phase, a question, then its answer beside the prediction.

The live session's questions (app/domain/questions.py), for one person: which cells GPU 1 stores under
the stage switched to, or how much GPU 0 holds in the next phase. No session, no cookie: the question's
whole state (the view now, where it goes, the prediction) is its address, so a plain GET form asks it
and a plain link goes on; htmx only swaps it into the widget.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from fractions import Fraction

from app import APP_NAME
from app.domain.questions import AnswerKind, BadAnswer, Question, cells_question, next_phase_question, normal_answer
from app.domain.scenario import Scenario
from app.web.inputs import PredictQuery, Theme
from app.web.links import Links
from app.web.poll_view import TapCell, card_cells


class NoQuestion(ValueError):
    """A move with nothing to predict (the stage shown, or past the last phase); its message is for the person."""


@dataclass(frozen=True)
class CheckCell:
    """One cell of the card at the answer: stored or not, predicted or not, and said so."""

    value: str
    weight: int
    band: str
    label: str
    stored: bool
    predicted: bool
    css: str = field(init=False, repr=False, compare=False)
    """`hit` (stored, predicted), `missed` (stored, not predicted), `wrong` (predicted, not stored), or blank."""
    mark: str = field(init=False, repr=False, compare=False)
    words: str = field(init=False, repr=False, compare=False)
    """For a screen reader, and the cell's title: what it is and how the prediction went."""

    def __post_init__(self) -> None:
        css, mark, said = {
            (True, True): ("hit", "✓", "stored; you predicted it"),
            (True, False): ("missed", "■", "stored; you did not predict it"),
            (False, True): ("wrong", "✗", "not stored; you predicted it"),
            (False, False): ("", "", "not stored"),
        }[(self.stored, self.predicted)]
        object.__setattr__(self, "css", css)
        object.__setattr__(self, "mark", mark)
        object.__setattr__(self, "words", f"{self.label}: {said}")


def check_cells(question: Question, given: str) -> tuple[CheckCell, ...]:
    """A cells question's card at the answer: each cell, stored or not (the grid's own layout), predicted or not."""
    cells = card_cells(question, given, None, True)
    return tuple(CheckCell(c.value, c.weight, c.band, c.label, c.right, c.tapped) for c in cells)


@dataclass(frozen=True)
class NumberCheck:
    """A number's answer beside the prediction: both figures, how far apart, and whether it counts as right."""

    given: str
    answer: str
    unit: str
    right: bool
    words: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        gap = Fraction(self.given) - Fraction(self.answer)
        side = "over" if gap > 0 else "under"
        apart = "exactly" if gap == 0 else f"{float(abs(gap)):,.1f} {self.unit} {side}"
        verdict = "within 5%: right" if self.right else "not within 5%"
        object.__setattr__(self, "words", f"You were {apart}, {verdict}.")


@dataclass(frozen=True)
class PredictView:
    """The question before a move, or its answer beside the prediction; everything the template shows decided here."""

    heading: str
    context: str
    """Where the person is, and where the move goes."""
    question: Question | None
    action: str
    """The question's own address: the form's GET goes there."""
    hidden: tuple[tuple[str, str], ...]
    """The question's state, sent again with the prediction: the view now, the move, the options."""
    gos: tuple[tuple[str, str, str], ...]
    """The way on to the view after the move, its words, and the control focused there (static/step.js's
    data-focus-after: the stage's tab, or Next); none when there is no move."""
    back_href: str
    theme: Theme = Theme.DEFAULT
    given: str | None = None
    """The prediction as kept (`questions.normal_answer`), once shown; None while asking."""
    error: str = ""
    typed: str = ""
    """A number as typed, given back in its field beside the error (Jinja escapes it)."""

    title: str = field(init=False)
    htmx_config: str = field(init=False)
    live_bars: tuple[()] = field(init=False)
    stages: tuple[()] = field(init=False)
    """None of the page's parts the layout (_layout.html) loops over: no live bar, no cards to skip to."""
    errors: tuple[str, ...] = field(init=False)
    asks: tuple[Question, ...] = field(init=False)
    """The question and its form while asking (again, beside an error)."""
    vote_cells: tuple[tuple[TapCell, ...], ...] = field(init=False)
    number_fields: tuple[tuple[str, dict[str, str | None]], ...] = field(init=False)
    """A number's field: its value, and its attributes (invalid, described by the error)."""
    verdicts: tuple[str, ...] = field(init=False)
    """At the answer: "Right" or "Not quite", and what the answer is."""
    checks: tuple[tuple[CheckCell, ...], ...] = field(init=False)
    numbers: tuple[NumberCheck, ...] = field(init=False)
    summaries: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        q, given = self.question, self.given
        asking = q is not None and given is None
        cells = q is not None and q.kind is AnswerKind.CELLS
        invalid: dict[str, str | None] = {"aria-invalid": "true", "aria-describedby": "predict-error"}
        derived: dict[str, object] = {
            "title": f"{self.heading} · {APP_NAME}",
            "htmx_config": "page",
            "live_bars": (),
            "stages": (),
            "errors": (self.error,) if self.error else (),
            "asks": (q,) if asking and q is not None else (),
            "vote_cells": (card_cells(q),) if asking and q is not None and cells else (),
            "number_fields": ((self.typed, invalid if self.error else {}),) if asking and not cells else (),
            "verdicts": (),
            "checks": (),
            "numbers": (),
            "summaries": (),
        }
        if q is not None and given is not None:
            right = q.is_right(given)
            derived["verdicts"] = ("Right." if right else "Not quite.",)
            if cells:
                checks = check_cells(q, given)
                derived["checks"] = (checks,)
                derived["summaries"] = (_cells_summary(q, checks),)
            else:
                derived["numbers"] = (NumberCheck(given, q.answer, q.unit, right),)
        for name, value in derived.items():
            object.__setattr__(self, name, value)


def _cells_summary(question: Question, checks: tuple[CheckCell, ...]) -> str:
    """E.g. "GPU 1 stores 11 of its 32 cells. You predicted 9: 8 it stores, 1 it does not; you missed 3."."""
    stored = sum(c.stored for c in checks)
    hits = sum(c.stored and c.predicted for c in checks)
    wrong = sum(c.predicted and not c.stored for c in checks)
    predicted = hits + wrong
    cells = "cell" if len(checks) == 1 else "cells"
    return (
        f"GPU {question.card} stores {stored} of its {len(checks)} {cells}. "
        f"You predicted {predicted}: {hits} it stores, {wrong} it does not; you missed {stored - hits}."
    )


def _question(scenario: Scenario, query: PredictQuery) -> Question:
    """The question before the move `query` names: the cells of the stage switched to, or the next phase's figure."""
    report, stage, phase = scenario.report, query.stage, query.phase
    if query.to is not None:
        if query.to is stage:
            raise NoQuestion(f"{stage.info.title} is the arrangement shown: there is no switch to predict.")
        # GPU 1, as "Ask the class" asks first; a run of one GPU has only GPU 0.
        return cells_question(report, query.to, 1 if scenario.run.gpus > 1 else 0)
    last = len(report.step(stage)) - 1
    if phase is None or phase >= last:
        raise NoQuestion(
            f"There is no next phase to predict: give a phase from 0 to {last - 1}, or a stage to switch to (to=)."
        )
    return next_phase_question(report, stage, phase, scenario.units)


def predict_view(query: PredictQuery, scenario: Scenario, link: Links) -> PredictView:
    """The question before the move in `query`, or (`shown`) its answer beside the prediction, or why there is none.

    `link` keeps the run, the theme and predict first. BadAnswer's and NoQuestion's words go in `error`: the
    route answers 422 with them.
    """
    stage, phase, to = query.stage, query.phase, query.to
    back = link.at(stage, phase)
    if to is not None:
        heading, context = f"Predict: {to.info.title}", f"From {stage.info.title} to {to.info.title}."
        go, go_label, focus = link.switch(to, stage), f"Go on to {to.info.title}", f"switch-{to.value}"
    else:
        after = (phase or 0) + 1
        heading, context = f"Predict: phase {after}", f"{stage.info.title}'s step, from phase {phase} to phase {after}."
        go, go_label, focus = link.at(stage, after), f"Go on to phase {after}", "step-next"
    moment = () if phase is None else (("phase", str(phase)),)
    where = () if to is None else (("to", to.value),)
    hidden = (("stage", stage.value), *link.run, *moment, *where, *link.options, ("shown", "1"))
    base = PredictView(heading, context, None, link.predict, hidden, ((go, go_label, focus),), back, link.theme)
    try:
        question = _question(scenario, query)
    except NoQuestion as refused:
        return PredictView("Nothing to predict", "", None, link.predict, (), (), back, link.theme, error=str(refused))
    if not query.shown:
        return _with(base, question)
    try:
        given = normal_answer(question, query.answer)
    except BadAnswer as bad:
        typed = query.answer[0][:40] if question.kind is AnswerKind.NUMBER and query.answer else ""
        return _with(base, question, error=str(bad), typed=typed)
    return _with(base, question, given=given)


def _with(
    base: PredictView, question: Question, given: str | None = None, error: str = "", typed: str = ""
) -> PredictView:
    return replace(base, question=question, given=given, error=error, typed=typed)
