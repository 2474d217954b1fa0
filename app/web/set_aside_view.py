"""A bad link said where the reader looks: the values set aside, what would be accepted, what is drawn instead.

A link with `gpus=0` is answered with the run drawn without it; the top of the widget says which
value was set aside, what the form accepts there, and what the picture is of instead, so the default
run is never taken for the one asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from app.domain.scenario import Scenario
from app.web.fields import BY_NAME
from app.web.form_view import FieldProblem

MAX_SHOWN = 40
"""A value given is repeated at most this long (as the error messages do)."""


@dataclass(frozen=True)
class SetAsideField:
    """A field of the run set aside, as the message at the top of the widget names it."""

    label: str
    """The form's label for it: "GPUs"."""
    typed: str
    """What was given, shortened; escaped when rendered."""
    message: str
    """What would be accepted, as a sentence: "Enter a whole number of GPUs between 1 and 4096."."""
    field_id: str
    """The form field's id, to go and correct it."""

    said: str = field(init=False, repr=False, compare=False)
    """What is said after the field's label: "“0” is not accepted. Enter a whole number of GPUs…"."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "said", f"“{self.typed}” is not accepted. {self.message}")


@dataclass(frozen=True)
class SetAsideView:
    """What the top of the widget says when values of the run were set aside, and what is drawn instead."""

    fields: tuple[SetAsideField, ...]
    drawn: str
    """What the picture is of: "Drawn without gpus=0: 8 GPUs, the default."."""
    which: str = field(init=False, repr=False, compare=False)
    """The heading's "a value was" or "some values were"."""
    it: str = field(init=False, repr=False, compare=False)
    """"it" or "them", as many as were set aside."""

    def __post_init__(self) -> None:
        one = len(self.fields) == 1
        object.__setattr__(self, "which", "a value was" if one else "some values were")
        object.__setattr__(self, "it", "it" if one else "them")


def shortened(text: str) -> str:
    """`text`, cut to `MAX_SHOWN` characters with an ellipsis."""
    return text if len(text) <= MAX_SHOWN else text[: MAX_SHOWN - 1] + "…"


def _label(name: str, scenario: Scenario) -> str:
    field = BY_NAME[name]
    if field.band is not None:  # named as the recipe drawn names its band
        return f"Bytes per weight, {scenario.recipe.spec(field.band).label.lower()}"
    return field.label


def field_id(name: str) -> str:
    """The run form's id for the field of the parameter `name` (templates/_widget.html run_form)."""
    return BY_NAME[name].field_id


def _instead(name: str, scenario: Scenario, from_screen: frozenset[str]) -> str:
    """What the picture uses in place of the field `name`: "64 GPUs, as on the screen before"."""
    field = BY_NAME[name]
    drawn = field.drawn(scenario)
    if drawn is None:
        return field.none
    return f"{drawn}, {'as on the screen before' if name in from_screen else field.fallback}"


def set_aside_view(problems: tuple[FieldProblem, ...], scenario: Scenario, from_screen: frozenset[str]) -> SetAsideView:
    """The message for `problems`, the fields set aside from the run `scenario` draws.

    `from_screen` are the fields drawn with the value on the screen before, the rest with their default.
    """
    fields = tuple(
        SetAsideField(_label(p.name, scenario), shortened(p.typed), p.message, field_id(p.name)) for p in problems
    )
    given = " and ".join(f"{p.name}={shortened(p.typed)}" for p in problems)
    instead = "; ".join(_instead(p.name, scenario, from_screen) for p in problems)
    return SetAsideView(fields, f"Drawn without {given}: {instead}.")


def with_drawn(
    problems: tuple[FieldProblem, ...], scenario: Scenario, from_screen: frozenset[str]
) -> tuple[FieldProblem, ...]:
    """Each problem with what the picture uses meanwhile, said beside its field.

    So the figures on the screen are never taken for those of the value typed.
    """
    return tuple(replace(p, drawn=f"Drawn with {_instead(p.name, scenario, from_screen)}.") for p in problems)
