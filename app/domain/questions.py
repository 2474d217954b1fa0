"""Questions for the class, worked out from the run, so that their answers are always right; and their spread.

A teacher asks at the view on the screen (app/live/poll.py keeps the rounds, the hub the votes):

- **cells:** "Which bands does GPU k store under this stage?": the student taps cells on a copy of
  the card; the answer is the grid's own solid cells (`sharding.layout`).
- **number:** "How much does each card keep?", or in the step, "What will GPU 0 hold after the next
  phase?" (predict, then step); right within `TOLERANCE` of the domain's figure.
- **choice:** "How many bytes per weight does each card keep under ZeRO-2?"; the wrong choices are the
  other stages' own figures for the same run, never invented ones.

An answer travels as text (a form field, a Redis hash's value): `normal_answer` reads and checks it,
`spread` counts a round's answers, and neither keeps who gave which.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum
from fractions import Fraction

from app.domain.bounded import MAX_CHARS, MAX_EXPONENT, read_decimal, read_whole
from app.domain.recipes import Band
from app.domain.report import RunReport
from app.domain.sharding import CellState, layout
from app.domain.stages import Stage
from app.domain.units import ByteUnit, per_weight

TOLERANCE = Fraction(5, 100)
"""A number within 5% of the domain's figure counts as right: the page rounds to one decimal."""
BINS = 8
"""The histogram's bars for a number question."""
MAX_NUMBER = 10**15
"""The largest number an answer may be: a figure in GiB or GB, with room for a wild guess."""


class AnswerKind(StrEnum):
    """What the student answers with."""

    CELLS = "cells"
    NUMBER = "number"
    CHOICE = "choice"


@dataclass(frozen=True)
class Question:
    """One question about one view, with its right answer (as `normal_answer` writes one)."""

    kind: AnswerKind
    prompt: str
    answer: str
    stage: str
    unit: str = ""
    """A number's unit, as the page prints it ("GiB")."""
    choices: tuple[str, ...] = ()
    card: int = 0
    """A cells question's card."""
    weights: tuple[int, ...] = ()
    """A cells question's weights, as the grid draws them (a sample beyond 16 cards)."""
    reveal_phase: int | None = None
    """Predict, then step: the phase the reveal steps to; None: the view stays."""

    @property
    def cells(self) -> tuple[str, ...]:
        """A cells question's cells, weight by weight, bands in order: `weight.band`."""
        return tuple(f"{w}.{band.value}" for w in self.weights for band in Band)

    @property
    def hides_picture(self) -> bool:
        """Whether the picture shows the answer until the reveal (a prediction's answer is the next phase)."""
        return self.reveal_phase is None

    @property
    def answer_words(self) -> str:
        """The right answer, for people."""
        if self.kind is AnswerKind.CHOICE:
            return self.choices[int(self.answer)]
        if self.kind is AnswerKind.NUMBER:
            return f"{self.answer} {self.unit} (within {float(TOLERANCE):.0%})"
        return cells_words(self)

    def is_right(self, answer: str) -> bool:
        """Whether `answer` (normal) is right: the same cells, the same choice, or a number within TOLERANCE."""
        if self.kind is AnswerKind.NUMBER:
            right = Fraction(self.answer)
            return abs(Fraction(answer) - right) <= TOLERANCE * abs(right)
        return answer == self.answer


BAND_NOUNS = {Band.WEIGHTS: "weights", Band.GRADIENTS: "gradients", Band.MASTER: "fp32 master copy",
              Band.MOMENTS: "optimizer's moments"}  # fmt: skip
"""A band in the reveal's sentence, in the key's words."""


def cells_words(question: Question) -> str:
    """A cells question's answer in words: which bands the card keeps of which weights, then the count.

    "GPU 1 keeps the weights of all 8 weights, and the gradients, fp32 master copy and optimizer's moments of
    weight 1 only (11 of 32 cells)": the bands that the card keeps of the same weights are said together.
    """
    held = set(question.answer.split(",")) if question.answer else set()
    groups: dict[tuple[int, ...], list[Band]] = {}
    for band in Band:
        kept = tuple(w for w in question.weights if f"{w}.{band.value}" in held)
        if kept:
            groups.setdefault(kept, []).append(band)
    parts = [f"{_bands_words(bands)} of {_weights_words(kept, question.weights)}" for kept, bands in groups.items()]
    count = f"({len(held)} of {len(question.cells)} cells)"
    if not parts:
        return f"GPU {question.card} keeps none of these cells {count}"
    return f"GPU {question.card} keeps {_joined(parts, ', and ')} {count}"


def _bands_words(bands: list[Band]) -> str:
    return "all four bands" if len(bands) == len(Band) else "the " + _joined([BAND_NOUNS[b] for b in bands])


def _weights_words(kept: tuple[int, ...], shown: tuple[int, ...]) -> str:
    if kept == shown and len(shown) > 1:
        return f"all {len(shown)} weights"
    if len(kept) == 1:
        return f"weight {kept[0]}" + (" only" if len(shown) > 1 else "")
    return "weights " + _joined([str(w) for w in kept])


def _joined(words: list[str], last: str = " and ") -> str:
    """The words joined: "a", "a and b", "a, b and c" (`last` before the last)."""
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + last + words[-1]


@dataclass(frozen=True)
class Miss:
    """A cell of a cells question that answers got wrong: tapped though not kept, or left out though kept."""

    weight: int
    band: Band
    kept: bool
    """Whether the card keeps it (the wrong answers left it out) or not (they tapped it)."""
    wrong: int
    """How many of the round's answers got it wrong."""

    @property
    def words(self) -> str:
        """The cell and how it was wrong: "weight 0's gradients (not kept)", tapped; "(kept)", left out."""
        return f"weight {self.weight}'s {BAND_NOUNS[self.band]} ({'kept' if self.kept else 'not kept'})"


MOST_MISSED = 3
"""The cells a reveal names as most often wrong, at most (ties in the card's order)."""


def most_missed(question: Question, counted: Spread) -> tuple[Miss, ...]:
    """The cells of a cells round's spread that the most answers got wrong (none when every answer was right).

    A kept cell is wrong in every answer that left it out (answered - taps), any other in every answer that
    tapped it (taps).
    """
    misses = []
    for bar in counted.bars:
        weight, band = bar.label.split(".")
        wrong = counted.answered - bar.count if bar.right else bar.count
        misses.append(Miss(int(weight), Band(band), bar.right, wrong))
    worst = max((m.wrong for m in misses), default=0)
    return tuple(m for m in misses if worst and m.wrong == worst)[:MOST_MISSED]


class BadAnswer(ValueError):
    """An answer that cannot be one to this question; its message is for the person."""


def normal_answer(question: Question, given: list[str]) -> str:
    """The answer as kept: cells sorted in the card's order, a number in plain decimals, a choice's index.

    `given` is the form's values (a cells question's one per tapped cell). BadAnswer, with a sentence,
    if they cannot be an answer to `question`.
    """
    if question.kind is AnswerKind.CELLS:
        known = question.cells
        # Each of the card's cells once at most: a longer list is no one's tapping, and each is searched for.
        if len(given) > len(known):
            raise BadAnswer(f"That answer names more cells than the card has ({len(known)}).")
        if any(cell not in known for cell in given):
            raise BadAnswer("That answer names a cell the card does not have.")
        tapped = set(given)
        return ",".join(cell for cell in known if cell in tapped)
    if len(given) != 1:
        raise BadAnswer("Give one answer.")
    if question.kind is AnswerKind.CHOICE:
        choice = read_whole(given[0].strip(), len(question.choices) - 1)
        if choice is None:
            raise BadAnswer("Choose one of the answers offered.")
        return str(choice)
    # Read within bounds (app/domain/bounded.py): "1e-9999999" is refused before any number is built.
    value = read_decimal(given[0])
    if value is None or not 0 <= value <= MAX_NUMBER:
        raise BadAnswer(number_wanted(question.unit))
    return _decimal(value)


def number_wanted(unit: str) -> str:
    """What a number question takes, for the person whose answer it refused."""
    return (
        f"Give a number of {unit} from 0 to {MAX_NUMBER:,}, such as 12.5, 12,5, 1,234.5 or 1.5e3: "
        f"at most {MAX_CHARS} characters, and an exponent from -{MAX_EXPONENT} to {MAX_EXPONENT}."
    )


def _decimal(value: Fraction) -> str:
    # Up to three decimals, no trailing zeros: 12.5, 60, 0.125.
    text = f"{float(value):.3f}".rstrip("0").rstrip(".")
    return text or "0"


def _under(stage: Stage) -> str:
    """A stage's title inside a sentence: "Under ZeRO-2", "Under data parallelism"."""
    title = stage.info.title
    return f"Under {title if title.startswith('ZeRO') else title[0].lower() + title[1:]}"


def cells_question(report: RunReport, stage: Stage, card: int) -> Question:
    """Which of its cells GPU `card` stores (solid) under `stage`: the grid's own layout."""
    run = report.run
    grid = layout(stage, run.gpus, run.recipe, run.shards)
    if card not in grid.shown:
        raise ValueError(f"GPU {card} is not drawn")
    held = [f"{c.weight}.{c.band.value}" for c in grid.card_cells(card) if c.state is CellState.SOLID]
    prompt = f"{_under(stage)}, which bands does GPU {card} store itself? Tap each cell it keeps."
    return Question(AnswerKind.CELLS, prompt, ",".join(held), stage.value, card=card, weights=grid.shown)


def memory_question(report: RunReport, stage: Stage, unit: ByteUnit) -> Question:
    """How much each card keeps of the model's state at rest under `stage`."""
    nbytes = report[stage].per_gpu_bytes
    prompt = f"{_under(stage)}, how many {unit.value} of training state does each card keep at rest?"
    return Question(AnswerKind.NUMBER, prompt, _decimal(Fraction(nbytes, unit.size)), stage.value, unit=unit.value)


def next_phase_question(report: RunReport, stage: Stage, phase: int, unit: ByteUnit) -> Question:
    """Predict, then step: what GPU 0 holds in the phase after `phase` (the reveal steps to it)."""
    phases = report.step(stage)
    if not 0 <= phase < len(phases) - 1:
        raise ValueError("the last phase has no next one")
    after = phases[phase + 1]
    prompt = (f"{_under(stage)}, what will GPU 0 hold in the next phase, phase {after.index}, "
              f"in {unit.value}?")  # fmt: skip
    return Question(AnswerKind.NUMBER, prompt, _decimal(Fraction(after.live_bytes, unit.size)), stage.value,
                    unit=unit.value, reveal_phase=after.index)  # fmt: skip


def bytes_choice(report: RunReport, stage: Stage) -> Question:
    """Bytes per weight each card keeps under `stage`; the choices are every stage's figure for this run."""
    figures = sorted({per_weight(s.bytes_per_weight): s.bytes_per_weight for s in report}.items(),
                     key=lambda item: -item[1])  # fmt: skip
    choices = tuple(f"{text} B" for text, _ in figures)
    right = choices.index(f"{per_weight(report[stage].bytes_per_weight)} B")
    prompt = f"{_under(stage)}, how many bytes per weight does each card keep?"
    return Question(AnswerKind.CHOICE, prompt, str(right), stage.value, choices=choices)


@dataclass(frozen=True)
class Bar:
    """One bar of a spread: its label, and how many gave an answer in it."""

    label: str
    count: int
    right: bool = False
    """Whether the bar holds the right answer (shown only at the reveal)."""


@dataclass(frozen=True)
class Spread:
    """One round's answers, counted: how many, how many right, and the bars (choices, a histogram, or cells)."""

    answered: int
    right: int
    bars: tuple[Bar, ...]

    @property
    def share_right(self) -> Fraction:
        """The share of answers that were right; 0 with none."""
        return Fraction(self.right, self.answered) if self.answered else Fraction(0)


def spread(question: Question, answers: list[str]) -> Spread:
    """Count `answers` (normal) to `question`: per choice, a histogram of numbers, or taps per cell."""
    right = sum(1 for a in answers if question.is_right(a))
    if question.kind is AnswerKind.CHOICE:
        counts = Counter(answers)
        bars = tuple(Bar(c, counts[str(i)], str(i) == question.answer) for i, c in enumerate(question.choices))
    elif question.kind is AnswerKind.CELLS:
        taps = Counter(cell for a in answers for cell in a.split(",") if cell)
        held = set(question.answer.split(","))
        bars = tuple(Bar(cell, taps[cell], cell in held) for cell in question.cells)
    else:
        bars = _histogram(question, [Fraction(a) for a in answers])
    return Spread(len(answers), right, bars)


def _histogram(question: Question, values: list[Fraction]) -> tuple[Bar, ...]:
    """At most BINS bins of a round width from the lowest answer to the highest; the answer's own bin marked.

    Round: 1, 2, 2.5 or 5 times a power of ten, so that a projector shows 50–100, not 55.9–104.787.
    """
    if not values:
        return ()
    low, high = min(values), max(values)
    right = Fraction(question.answer)
    tol = TOLERANCE * right
    if high == low:
        return (Bar(_decimal(low), len(values), right - tol <= low <= right + tol),)
    width, start, bins = _round_bins(low, high)

    def bin_of(value: Fraction) -> int:  # bins are [edge, end); the last one holds the highest answer too
        return min(bins - 1, math.floor((value - start) / width))

    counts = Counter(bin_of(v) for v in values)
    # One bin is marked, the one the answer itself falls in: its ±5% band may straddle an edge.
    marked = bin_of(right) if start <= right <= start + bins * width else None
    labels = [f"{_decimal(start + i * width)}–{_decimal(start + (i + 1) * width)}" for i in range(bins)]
    return tuple(Bar(label, counts[i], i == marked) for i, label in enumerate(labels))


def _round_bins(low: Fraction, high: Fraction) -> tuple[Fraction, Fraction, int]:
    """The bins' width, the first bin's start (a multiple of the width) and how many, at most BINS."""
    power = Fraction(10) ** math.floor(math.log10((high - low) / BINS))
    for width in (power * m for m in (1, 2, Fraction(5, 2), 5, 10, 20, 25, 50)):
        start = math.floor(low / width) * width
        bins = max(1, math.ceil((high - start) / width))
        if bins <= BINS:
            return width, start, bins
    raise AssertionError("a width of 50 powers covers any range in BINS bins")  # (high-low)/BINS <= 10 powers
