"""The run form, showing the run as resolved, and the fields whose value was set aside.

Every field of the form is built here from its declaration (`fields.FIELDS`): its label, its control
(a choice, or a text or number field), its choices, its value, its help and its error. The template
(templates/_form.html) only loops over the parts and writes each as its kind says. A field whose
presentation the run decides (a preset model's count, read-only; the models and recipes offered; a
recipe's bands) says so in `_SPECIAL`, the one place that names a field here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from typing import Any, Literal

from app.domain.architecture import DEFAULT_SEQ, ModelName
from app.domain.hf_config import HfModel
from app.domain.presets import PRESETS
from app.domain.recipes import RECIPES, RecipeName, bytes_a_weight
from app.domain.scenario import Inputs, Scenario
from app.domain.stages import Stage
from app.domain.units import factor_text
from app.web.fields import BY_NAME, FIELDS, FOLDS, Group, Kind, RunField, given, in_group, read, unfolded


@dataclass(frozen=True)
class Option:
    """One choice in a select or datalist."""

    value: str
    label: str
    selected: bool = False


@dataclass(frozen=True)
class FieldProblem:
    """A form field whose value was set aside: what the person typed, and what it should be."""

    name: str
    typed: str
    message: str
    drawn: str = ""
    """What the picture uses meanwhile, in a sentence: "Drawn with 64 GPUs, as on the screen before."."""


@dataclass(frozen=True)
class Control:
    """One field of the form, ready to write: a select where it has options, else an input."""

    field: str
    """The run field's name: the parameter the form sends, unless `sent` is False."""
    field_id: str
    label: str
    value: str = ""
    """What the field shows: the value given (or the run's), or what was typed where it was set aside."""
    options: tuple[Option, ...] = ()
    """A select's choices; empty: an input."""
    number: bool = False
    """A number input (with `low`, `high` and a step of 1), else a text one."""
    low: int | None = None
    high: int | None = None
    placeholder: str | None = None
    title: str | None = None
    inputmode: str = ""
    required: bool = False
    readonly: bool = False
    """Shown and not sent: the run's own value (a preset's count, a preset recipe's bytes)."""
    suggestions: tuple[Option, ...] = ()
    """A text field's datalist, `list_id`."""
    list_id: str = ""
    problem: FieldProblem | None = None
    notes: tuple[str, ...] = ()
    """Words beside the field, read with it (`aria-describedby`): where its default comes from; empty: none."""
    attributes: tuple[tuple[str, str], ...] = ()
    """Its input's or select's attributes, in the order written, from the rest (`_finished`): the template
    writes them as they are."""
    textarea: bool = False
    """A text of many lines (a config.json), its value between the tags rather than an attribute."""

    @property
    def set_aside(self) -> bool:
        """Whether it shows a value set aside: what someone typed, kept by no memo."""
        return self.problem is not None

    @property
    def kind(self) -> Literal["select", "input", "textarea"]:
        """How the template writes it."""
        return "select" if self.options else "textarea" if self.textarea else "input"

    @property
    def name(self) -> str | None:
        """The name it is sent under; None when read-only, so a value the run set is not sent back as typed."""
        return None if self.readonly else self.field

    @property
    def shown(self) -> str:
        """The value in the field: as typed where it was set aside."""
        return self.problem.typed if self.problem else self.value


@dataclass(frozen=True)
class Bands:
    """The recipe's bytes per band, four inputs under one legend."""

    readonly: bool
    controls: tuple[Control, ...]
    kind: Literal["bands"] = "bands"

    @property
    def set_aside(self) -> bool:
        """Whether one of the bands shows a value set aside."""
        return any(c.problem is not None for c in self.controls)

    @property
    def legend(self) -> str:
        """The fieldset's legend."""
        if self.readonly:
            return "Bytes per weight (set by the recipe: choose “Custom bytes per band” to edit)"
        return "Bytes per weight"


FormPart = Control | Bands


@dataclass(frozen=True)
class Fold:
    """A folded part of the form: its summary, whether it is open, and its fields."""

    group: Group
    summary: str
    parts: tuple[FormPart, ...]
    open: bool = False
    details_id: str | None = None


# The folds' words and ids: presentation of the form, not of a field.
_FOLDS = {
    Group.MORE: ("A model's config.json, micro-batch, frozen weights, LoRA, bytes per band and largest layer", None),
    Group.HOST: ("Offload, nodes and whose accounting", "more-host"),
    Group.WIRE: ("Across nodes: hybrid sharding, ZeRO++ and the links", "more-wire"),
    Group.CUT: ("The model cut across cards: tensor, pipeline, context and expert parallelism", "more-cut"),
}


@dataclass(frozen=True)
class FormView:
    """The run the person describes, as the form shows it."""

    stage: Stage
    shown: tuple[FormPart, ...]
    """The fields always shown."""
    folds: tuple[Fold, ...]
    custom_recipe: bool = False
    given: frozenset[str] = frozenset()
    """The run fields given a value other than their default (`fields.given`): their folds are open."""
    problems: tuple[FieldProblem, ...] = ()
    """Fields whose value was set aside; the page shows what was typed there, and why it is wrong."""
    phase: int | None = None
    """The moment of the step shown, kept when the run changes; None at rest."""
    action: str = ""
    """Where the form is sent (the page's or the embed's path); empty: the page."""
    keep: tuple[tuple[str, str], ...] = ()
    """Hidden fields the form sends besides the run: an embed's options."""

    @property
    def unfolded(self) -> frozenset[Group]:
        """The folds shown open: each holding a value given, or one set aside (`fields.unfolded`)."""
        return unfolded(self.given, self.custom_recipe, (p.name for p in self.problems))

    def problem(self, name: str) -> FieldProblem | None:
        """The problem with the field `name`, if it has one."""
        return next((p for p in self.problems if p.name == name), None) if self.problems else None

    def with_problems(self, problems: tuple[FieldProblem, ...]) -> FormView:
        """The form showing, in each field set aside, what was typed there and why it was set aside."""
        said = replace(self, problems=problems)

        def marked(part: FormPart) -> FormPart:
            if isinstance(part, Bands):
                return replace(part, controls=tuple(_marked(c, said.problem(c.field)) for c in part.controls))
            return _marked(part, said.problem(part.field))

        opened = said.unfolded
        return replace(
            said,
            shown=tuple(marked(p) for p in self.shown),
            folds=tuple(
                replace(f, parts=tuple(marked(p) for p in f.parts), open=f.group in opened) for f in self.folds
            ),
        )


def _marked(control: Control, problem: FieldProblem | None) -> Control:
    return control if problem is None else _finished(replace(control, problem=problem))


def _finished(c: Control) -> Control:
    """The control with its attributes written out.

    A number's limits or a text's keyboard, what it shows, its grey text and tooltip, and, where its value
    was set aside, its error's id.
    """
    pairs = [("id", c.field_id)]
    if c.name:
        pairs.append(("name", c.name))
    if not c.options:
        if c.number:
            pairs += [("type", "number"), ("min", str(c.low)), ("max", str(c.high)), ("step", "1")]
        elif c.textarea:
            pairs += [("rows", "3"), ("spellcheck", "false")]
        else:
            pairs.append(("autocomplete", "off"))
        if not c.textarea:  # a textarea's value is its content
            pairs.append(("value", c.shown))
        optional = (
            ("placeholder", c.placeholder),
            ("title", c.title),
            ("inputmode", c.inputmode or None),
            ("list", c.list_id or None),
            ("required", "" if c.required else None),
            ("readonly", "" if c.readonly else None),
        )
        pairs += [(name, value) for name, value in optional if value is not None]
    described = [f"{c.field_id}-note"] if c.notes else []
    if c.problem is not None:
        pairs.append(("aria-invalid", "true"))
        described.append(f"{c.field_id}-error")
    if described:
        pairs.append(("aria-describedby", " ".join(described)))
    return replace(c, attributes=tuple(pairs))


def _capacity_text(capacity: int) -> str:
    for unit, suffix in ((2**30, "GiB"), (10**9, "GB")):
        if capacity % unit == 0:
            return f"{capacity // unit}{suffix}"
    return str(capacity)


def _text(field: RunField, value: object) -> str:
    """A value as the form's field shows it."""
    if value is None:
        return ""
    if field.kind is Kind.SIZE and isinstance(value, int):
        return _capacity_text(value)
    if isinstance(value, Fraction):
        return factor_text(value)
    if isinstance(value, HfModel):
        return value.minimal
    return str(value)


def _options(field: RunField, chosen: object) -> tuple[Option, ...]:
    """A choice's or a switch's options, worded as its declaration says, the chosen one selected."""
    labels = {str(value): label for value, label in field.labels}
    if field.kind is Kind.SWITCH:
        return (Option("1", labels.get("1", "On"), bool(chosen)), Option("0", labels.get("0", "Off"), not chosen))
    return tuple(Option(value, labels.get(value, value), value == chosen) for value in field.values)


def control(field: RunField, scenario: Scenario, inputs: Inputs) -> Control:
    """A field as its declaration says, showing the value given (blank: the default)."""
    placeholder = field.placeholder(scenario) if callable(field.placeholder) else field.placeholder
    value = read(inputs, field)
    special = _SPECIAL.get(field.name)
    if special is None:
        return _declared(field.name, value, placeholder)
    return _shaped(field.name, value, placeholder, special[0](scenario))


@lru_cache(maxsize=2048)
def _shaped(name: str, value: object, placeholder: str | None, key: Hashable) -> Control:
    """A field the run shapes (`_SPECIAL`), once for each value and what of the run shapes it (`key`)."""
    return _finished(_SPECIAL[name][1](_declared(name, value, placeholder), key))


# A field shows one of few values, run after run: built once for each, the same object each time, so
# its markup is rendered once too (templates/_form.html `form_part`, app/web/templating.py).
@lru_cache(maxsize=2048)
def _declared(name: str, value: object, placeholder: str | None) -> Control:
    field = BY_NAME[name]
    return _finished(
        Control(
            field=field.name,
            field_id=field.field_id,
            label=field.form_label or field.label,
            options=_options(field, value) if field.kind in (Kind.CHOICE, Kind.SWITCH) else (),
            value=_text(field, value),
            number=field.kind is Kind.WHOLE,
            textarea=field.kind is Kind.CONFIG,
            low=field.low,
            high=field.high,
            placeholder=placeholder,
            title=field.help if field.tip is None else field.tip or None,
            inputmode=field.inputmode,
            required=field.required,
            suggestions=tuple(Option(value, label) for value, label in field.suggestions),
            list_id=field.list_id if field.suggestions else "",
        )
    )


def _model(built: Control, model_and_config: Any) -> Control:
    # A config.json given is the model: the custom choice says so, rather than asking for a count.
    model, config = model_and_config
    custom = f"{config}, from its config.json" if config else "Another model: enter its weights"
    options = (
        *(Option(p.name, p.title, p.name == model) for p in PRESETS.values()),
        Option(ModelName.CUSTOM, custom, model is ModelName.CUSTOM),
    )
    return replace(built, options=options)


def _config_title(scenario: Scenario) -> str | None:
    config = scenario.inputs.config if scenario.inputs else None
    return config.title if config else None


_PARAMS_EXAMPLES = "e.g. 7.5B, 7.5e9 or 7,500,000,000"


def _params(built: Control, model_and_count: Any) -> Control:
    # A preset's count is the model's: shown read-only and not sent, so choosing another model does not
    # send the last one's count back as if it had been typed. With JavaScript the field is editable, and
    # typing a count in it chooses "Another model" (static/tools.js).
    model, count, configured = model_and_count
    preset = model is not ModelName.CUSTOM or configured
    title = "Set by the model: choose “Another model” to type a count" if preset else _PARAMS_EXAMPLES
    return replace(built, value=str(count), readonly=preset, title=title)


def _recipe(built: Control, recipe: Any) -> Control:
    custom = recipe.name == RecipeName.CUSTOM
    options = (
        *(Option(r.name, f"{r.title} ({r.sizes} B)", r is recipe) for r in RECIPES.values()),
        Option(RecipeName.CUSTOM, "Custom bytes per band", custom),
    )
    return replace(built, options=options)


def _offload_device(built: Control, target: Any) -> Control:
    # Blank is the CPU, or NVMe for offload=nvme: the form shows where the state went.
    return replace(built, options=tuple(replace(o, selected=o.value == target) for o in built.options))


def default_seq_note(scenario: Scenario) -> str:
    """Beside the sequence field: its default, and where it comes from ("default 8,192: Llama 3's training length")."""
    shape = scenario.architecture
    if shape is None or not shape.family:
        return f"default {DEFAULT_SEQ:,}" if shape is None else f"default {shape.default_seq:,}"
    context = f" (its context: {shape.context:,})" if shape.default_seq != shape.context else ""
    return f"default {shape.default_seq:,}: {shape.family}'s training length{context}"


def _seq(built: Control, note: Any) -> Control:
    return replace(built, notes=(note,))


def config_note(scenario: Scenario) -> str:
    """Beside the config: the model read, its weights derived from the shapes, and the count it publishes."""
    config = scenario.inputs.config if scenario.inputs else None
    if config is None:
        return ""
    published = f"; {config.published:,} published in it" if config.published else ""
    return f"{config.title}: {config.params:,} weights, derived from its shapes{published}."


LONG_CONFIG = (
    "More than a few KB? Paste it in the box by \u201cRead the model\u201d, below the figure: it is sent whole."
)
"""Beside an empty config box: a pretty-printed config.json in this GET form's address meets the 8 KB address
limit (app/serving/cache.py) long before 64 KB; the upload form's box sends it in the body."""


def _config(built: Control, note: Any) -> Control:
    return replace(built, notes=(note or LONG_CONFIG,))


def _band(built: Control, recipe: Any) -> Control:
    band = BY_NAME[built.field].band
    assert band is not None
    spec = recipe.spec(band)
    custom = recipe.name == RecipeName.CUSTOM
    return replace(built, label=spec.label, value=bytes_a_weight(spec.nbytes), readonly=not custom)


Shaping = tuple[Callable[[Scenario], Hashable], Callable[[Control, Any], Control]]
"""What of the run shapes a field's control (a hashable key), and how."""

_SPECIAL: Mapping[str, Shaping] = {
    "model": (lambda s: (s.model, _config_title(s)), _model),
    "params": (lambda s: (s.model, s.run.params, _config_title(s) is not None), _params),
    "recipe": (lambda s: s.recipe, _recipe),
    "offload_device": (lambda s: s.run.setup.placement.target, _offload_device),
    "seq": (default_seq_note, _seq),
    "config": (config_note, _config),
    # A recipe's bands: its own bytes, read-only unless it is the custom one.
    **{f.name: (lambda s: s.recipe, _band) for f in FIELDS if f.band is not None},
}
"""The fields whose control the run shapes beyond their declaration, each with what of the run shapes it."""


def _parts(group: Group, scenario: Scenario, inputs: Inputs) -> tuple[FormPart, ...]:
    """A part of the form, in the declaration's order; a recipe's bands, one after the other, under one legend."""
    parts: list[FormPart] = []
    bands: list[Control] = []
    for field in in_group(group):
        if field.band is not None:
            bands.append(control(field, scenario, inputs))
            continue
        if bands:
            parts.append(Bands(bands[0].readonly, tuple(bands)))
            bands = []
        parts.append(control(field, scenario, inputs))
    if bands:
        parts.append(Bands(bands[0].readonly, tuple(bands)))
    return tuple(parts)


def form_view(scenario: Scenario, stage: Stage, inputs: Inputs, phase: int | None = None) -> FormView:
    """The form, showing the run as resolved."""
    custom = scenario.recipe.name == RecipeName.CUSTOM
    entered = given(inputs)
    opened = unfolded(entered, custom)
    folds = tuple(
        Fold(group, _FOLDS[group][0], _parts(group, scenario, inputs), group in opened, _FOLDS[group][1])
        for group in FOLDS
    )
    return FormView(stage, _parts(Group.SHOWN, scenario, inputs), folds, custom, entered, phase=phase)
