"""The query parameters that describe a run, shared by the page, the API and the command line.

One Pydantic model, built from the run fields' declaration (`app/web/fields.py`), so all validate
the same way and the OpenAPI schema documents exactly what is accepted: the count and size grammars
are the domain's own patterns, and an empty value is said to mean the default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    create_model,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from app.domain.accounting import Accounting
from app.domain.architecture import Architecture, ModelName
from app.domain.hf_config import ConfigRefused, read_text
from app.domain.overheads import DEFAULTS
from app.domain.parallel import Cut, cut_refused
from app.domain.placement import Device, Offload, cluster_of
from app.domain.presets import PRESETS
from app.domain.recipes import RecipeName
from app.domain.run import groups_refused
from app.domain.scenario import DEFAULT_MODEL, Inputs
from app.domain.stages import Stage
from app.domain.state_bytes import DEFAULT_GPUS
from app.domain.step import LAST_PHASE, OLD_PHASES, from_old_phase
from app.domain.trainable import parse_trainable
from app.domain.units import ambiguity, parse_bytes, parse_count, parse_factor
from app.measure.snapshots import IMPLS, Impl, default_impl
from app.web.fields import BY_NAME, FIELDS, Kind, RunField
from app.web.form_view import FieldProblem


class Theme(StrEnum):
    """How the page is drawn: its type, and its colours.

    The type is for a screen close by, or (`projector`) for the back of a room; the colours are the
    system's light or dark, or `light` or `dark` whatever the system says. Two choices in one word, so
    a link keeps both in one parameter: `projector-dark` is the projector's type in dark colours;
    `default` and `projector` follow the system's scheme, as they always did.
    """

    DEFAULT = "default"
    LIGHT = "light"
    DARK = "dark"
    PROJECTOR = "projector"
    PROJECTOR_LIGHT = "projector-light"
    PROJECTOR_DARK = "projector-dark"

    projector: bool
    """The projector's larger type and one-screen layout (static/projector.css)."""
    scheme: str | None
    """The colours forced, `light` or `dark`; None: the system's (`prefers-color-scheme`)."""
    sheets: tuple[str, ...]
    """The stylesheets the theme adds, after the page's own (templates/_head.html)."""
    home_query: str
    """The masthead's link home keeps the theme: its query, blank for the default."""
    html_attrs: dict[str, str | None]
    """<html>'s class (the type: `theme-default` or `theme-projector`) and `data-scheme` (left out: the system's)."""

    def __init__(self, value: str) -> None:
        words = value.split("-")
        self.projector = words[0] == "projector"
        self.scheme = words[-1] if words[-1] in ("light", "dark") else None
        self.sheets = ("projector.css",) if self.projector else ()
        self.home_query = "" if value == "default" else f"?theme={value}"
        self.html_attrs = {"class": f"theme-{'projector' if self.projector else 'default'}", "data-scheme": self.scheme}

    @staticmethod
    def of(projector: bool, scheme: str | None) -> Theme:
        """The theme with the projector's type or not, in `scheme` (None: the system's)."""
        return Theme("-".join(w for w in ("projector" if projector else "", scheme or "") if w) or "default")

    @property
    def other(self) -> Theme:
        """The theme the page's toggle switches to: the other type, in the same colours."""
        return Theme.of(not self.projector, self.scheme)

    @property
    def schemes(self) -> tuple[Theme, ...]:
        """The same type in each colour scheme the page's toggle offers: the system's, light, dark."""
        return tuple(Theme.of(self.projector, s) for s in (None, "light", "dark"))

    @property
    def framed(self) -> Theme:
        """The theme an embed's snippet carries: the colours chosen, not the projector's type (a frame is a column)."""
        return Theme.of(False, self.scheme)


THEME_HELP = (
    "'light' or 'dark': those colours, whatever the system says; 'projector': larger type and a layout for the back "
    "of a room, in the colours the system says; 'projector-light' or 'projector-dark': the projector in those "
    "colours; 'default': the normal view in the colours the system says"
)
"""What `theme` takes, as the query models, the OpenAPI schema and docs/url-options.md say it."""

MAX_ANSWERS = 64
"""A prediction's values at most: a card of 16 weights has 64 cells (the grid draws at most 16)."""

PREDICT_HELP = (
    "1: predict first. Before a switch of stage the page asks which cells GPU 1 will store, and before the step's "
    "next phase how much GPU 0 will hold; the answer is shown beside the prediction, then the view switches. "
    "Every link keeps it; 0: switch at once"
)
"""What `predict` takes, as the query model and docs/url-options.md (cog) say it."""


def _blank_is_none(value: object) -> object:
    # The form sends a blank field as an empty string: the field's default.
    return None if value == "" else value


def _empty_means_the_default(schema: dict[str, Any]) -> None:
    # The schema says what the reading does: an empty value is accepted, and means the default.
    schema["anyOf"].insert(-1, {"type": "string", "maxLength": 0})


MAX_CONFIG_CHARS = 65_536
"""The longest config.json taken, in characters: DeepSeek-V3's whole file is 1.7 KB, its keys read 0.7 KB."""


def _annotation(field: RunField) -> Any:
    """The type a query model reads the field as."""
    if field.kind in (Kind.COUNT, Kind.SIZE, Kind.TRAINABLE, Kind.FACTOR, Kind.CONFIG):
        return str | None
    base: Any = {Kind.CHOICE: field.choices, Kind.SWITCH: bool, Kind.WHOLE: int}[field.kind]
    if field.default is not None:
        return base
    return Annotated[base | None, BeforeValidator(_blank_is_none)] if field.blank else base | None


def _declared(field: RunField) -> tuple[Any, Any]:
    """The query model's field for a declared run field: type, default, limits, grammar and description."""
    blank = field.blank or field.pattern is not None
    described = f"{field.help} Empty: the default." if blank else field.help
    return _annotation(field), Field(
        field.default,
        pattern=field.pattern,
        description=described,
        json_schema_extra=_empty_means_the_default if field.blank else None,
        ge=field.low,
        le=field.high,
        max_length=MAX_CONFIG_CHARS if field.kind is Kind.CONFIG else None,
    )


def _config(text: str, zero: bool = False) -> Any:
    # The query model has read it already (`RunQuery._a_config`), so it is read here without fail.
    return read_text(text)


_READ: dict[Kind, Callable[..., Any]] = {
    Kind.COUNT: parse_count,
    Kind.SIZE: parse_bytes,
    Kind.FACTOR: parse_factor,
    Kind.CONFIG: _config,
}
"""How a text field becomes the domain's number (0 where the field takes it); the other kinds are read by pydantic."""


if TYPE_CHECKING:  # mypy sees a plain model; the fields come from the declaration, named nowhere else
    _RunFields = BaseModel
else:
    _RunFields = create_model(
        "_RunFields", __config__=ConfigDict(extra="ignore"), **{f.name: _declared(f) for f in FIELDS}
    )


class RunQuery(_RunFields):
    """A training run: model, cluster, recipe and card. Every field is optional; each is one of `fields.FIELDS`."""

    model_config = ConfigDict(extra="ignore")

    def value(self, name: str) -> Any:
        """A run field's value as given (or its default)."""
        return getattr(self, name)

    @field_validator("config")
    @classmethod
    def _a_config(cls, text: str | None) -> str | None:
        # Read at once, so a config refused is refused here, naming its key; kept as the keys read, so a link
        # carries the config minimised.
        if text is None or not text.strip():
            return None
        try:
            return read_text(text).minimal
        except ConfigRefused as refused:
            raise PydanticCustomError("config", str(refused)) from None

    @field_validator("trainable")
    @classmethod
    def _within_the_model(cls, text: str | None, info: ValidationInfo) -> str | None:
        if text is None or not text.strip():
            return None
        model, params = info.data.get("model"), info.data.get("params")
        # The model's count as the run will resolve it: a config's, a preset's own, a custom count, or the seed's.
        if (shape := _shape(info.data)) is not None:
            base = shape.params
        elif model in (None, ModelName.CUSTOM):
            base = parse_count(params) if params else PRESETS[DEFAULT_MODEL].params
        else:
            base = PRESETS[model].params
        try:
            parse_trainable(text, base)
        except ValueError as exc:
            # A sentence of its own: the error pages show it as it is, without pydantic's "Value error, ".
            raise PydanticCustomError("trainable", str(exc)) from None
        return text

    @field_validator("offload", mode="before")
    @classmethod
    def _plus_typed_in_an_address(cls, value: object) -> object:
        # A "+" typed into an address bar arrives as a space: "optimizer params" is what was meant.
        return "optimizer+params" if isinstance(value, str) and value.split() == ["optimizer", "params"] else value

    @field_validator("offload_device")
    @classmethod
    def _nvme_is_nvme(cls, device: Device | None, info: ValidationInfo) -> Device | None:
        # The device is for optimizer and optimizer+params (docs/url-options.md); offload=nvme is NVMe whatever it
        # says. The form sends its device select beside every offload, so the pair is no contradiction to refuse.
        return None if info.data.get("offload") is Offload.NVME else device

    @field_validator("nodes")
    @classmethod
    def _whole_nodes(cls, nodes: int | None, info: ValidationInfo) -> int | None:
        gpus = info.data.get("gpus", DEFAULT_GPUS)
        if nodes is not None and gpus % nodes:
            raise PydanticCustomError("cluster", f"{gpus} GPUs do not split evenly across {nodes} nodes.")
        return nodes

    @field_validator("gpus_per_node")
    @classmethod
    def _a_whole_cluster(cls, per_node: int | None, info: ValidationInfo) -> int | None:
        gpus = info.data.get("gpus", DEFAULT_GPUS)
        try:
            cluster_of(gpus, info.data.get("nodes"), per_node)
        except ValueError as exc:
            raise PydanticCustomError("cluster", str(exc)) from None
        return per_node

    @field_validator("shard")
    @classmethod
    def _whole_groups(cls, shard: int | None, info: ValidationInfo) -> int | None:
        if shard is not None:
            _refuse_groups(info, shard=shard)
        return shard

    @field_validator("hpz")
    @classmethod
    def _hpz_groups(cls, hpz: int, info: ValidationInfo) -> int:
        if hpz > 1:
            _refuse_groups(info, hpz=hpz)
        return hpz

    @field_validator("qwz", "qgz")
    @classmethod
    def _zeropp_allowed(cls, on: bool, info: ValidationInfo) -> bool:
        if on:
            _refuse_groups(info)
        return on

    @field_validator("tp", "sp", "pp", "vpp", "microbatches", "cp", "ep", "etp")
    @classmethod
    def _a_whole_cut(cls, value: int, info: ValidationInfo) -> int:
        # Run for each field given, with the earlier fields as read and the later ones at their defaults (which
        # they are, unless given: then their own check follows). A cut is refused once, at the first field given
        # that makes it wrong, which its words name: the same refusal again at each later field says nothing new.
        data = info.data
        if any(
            name not in data
            for name in ("gpus", "nodes", "gpus_per_node", *_CUT_FIELDS[: _CUT_FIELDS.index(str(info.field_name))])
        ):
            return value  # the cluster's or an earlier field's own error is the one to read
        name = str(info.field_name)
        refused = _cut_refusal(data, {name: value})
        if refused is not None and _cut_refusal(data, {name: BY_NAME[name].default}) is None:
            raise PydanticCustomError(*refused)
        return value

    def inputs(self) -> Inputs:
        """The domain's inputs, with texts read as counts and sizes: each field where its `into` says."""
        direct: dict[str, Any] = {}
        bands: list[int | None] = [None, None, None, None]
        settings: dict[str, Any] = {}
        ruled = []
        for field in FIELDS:
            value = self.value(field.name)
            read = _READ.get(field.kind)
            if read is not None:  # a blank text is the default
                value = read(value, zero=field.zero) if value and value.strip() else None
            if field.rule is not None:
                ruled.append((field.rule, value))
                continue
            where, _, key = field.target.partition(".")
            if where == "band_bytes":
                bands[int(key)] = value
            elif where == "overheads":
                if value is not None:  # a blank setting is its default
                    settings[key] = value
            else:
                direct[where] = value
        weights, gradients, master, moments = bands
        return Inputs(
            **direct,
            band_bytes=(weights, gradients, master, moments),
            overheads=replace(DEFAULTS, **settings),
            ruled=tuple(ruled),
        )

    def canonical(self) -> dict[str, str]:
        """The parameters that differ from the defaults, for short, shareable links."""
        values = self.model_dump(mode="json", exclude_defaults=True, exclude_none=True)
        # A preset brings its own count and a preset recipe its own bytes: the form sends them
        # back read-only, and they would only lengthen the link.
        ignored = set()
        if self.value("model") not in (None, ModelName.CUSTOM):
            ignored.add("params")
        if self.value("config") is not None:  # the config is the model: what the form sends beside it, aside
            ignored |= {"model", "params"}
        if self.value("recipe") is not RecipeName.CUSTOM:
            ignored |= {f.name for f in FIELDS if f.band is not None}
        if self.value("offload_device") is Device.CPU:  # the form's choice when nothing asks for NVMe: the default
            ignored.add("offload_device")
        return {
            key: str(value)
            for key, value in values.items()
            if key in RunQuery.model_fields and key not in ignored and value != ""
        }


def _refuse_groups(info: ValidationInfo, shard: int | None = None, hpz: int = 1) -> None:
    """A shard group or ZeRO++ the cluster cannot have, as `run.groups_refused` says; the cluster checked first."""
    data = info.data
    if "gpus" not in data or "gpus_per_node" not in data or "nodes" not in data:
        return  # the cluster's own error is the one to read
    cluster = cluster_of(data["gpus"], data["nodes"], data["gpus_per_node"])
    zeropp = info.field_name != "shard"
    accounting = data.get("accounting", Accounting.PAPER)
    refused = groups_refused(
        cluster.gpus, cluster.gpus_per_node, shard if shard is not None else data.get("shard"), hpz, zeropp, accounting
    )
    if refused:
        raise PydanticCustomError("groups", refused)


PHASE_HELP = "0: at rest; 1-24 forward, 25-48 backward, three a column (gather, compute, discard); 49-52 after."
OLD_PHASE_HELP = (
    "A phase as links numbered it before a column was three phases (0-20): read as the nearest phase now, "
    "a column's compute; `phase` wins."
)


_CUT_FIELDS = ("tp", "sp", "pp", "vpp", "microbatches", "cp", "ep", "etp")
"""The fields of `parallel.Cut`, in its order."""


def _cut_refusal(data: dict[str, Any], value: dict[str, Any]) -> tuple[str, str] | None:
    """Why the cut read so far (the later fields at their defaults) is refused, and the kind of refusal; None if not."""
    given = {**{n: BY_NAME[n].default for n in _CUT_FIELDS}, **data, **value}
    cluster = cluster_of(data["gpus"], data["nodes"], data["gpus_per_node"])
    tp, sp, pp, vpp, microbatches, cp, ep, etp = (int(given[n]) for n in _CUT_FIELDS)
    cut = Cut(tp, bool(sp), pp, vpp, microbatches, cp, ep, etp)
    architecture = _shape(data)
    blocks = architecture.layers if architecture is not None else None
    heads = (architecture.heads, architecture.kv_heads) if architecture is not None else None
    experts = (architecture.moe.experts if architecture.moe else 0) if architecture is not None else None
    if refused := cut_refused(cut, cluster.gpus, cluster.gpus_per_node, blocks, heads, experts):
        return "cut", refused
    # ZeRO shards over the data-parallel group the cut leaves: a shard group, hpZ's and ZeRO++'s split that, not
    # every card, and the experts' own group takes none of them. The same check as `Run`'s, on the same values.
    hpz = int(data.get("hpz", 1))
    zeropp = hpz > 1 or bool(data.get("qwz")) or bool(data.get("qgz"))
    accounting = data.get("accounting", Accounting.PAPER)
    if cut.cuts and (
        refused := groups_refused(
            cluster.gpus, cluster.gpus_per_node, data.get("shard"), hpz, zeropp, accounting, cut=cut
        )
    ):
        return "groups", refused
    return None


def _shape(data: dict[str, Any]) -> Architecture | None:
    """The architecture of the model read so far: a config's, or a preset's; None for a bare count."""
    if config := data.get("config"):
        return read_text(config).architecture
    model = data.get("model")
    return PRESETS[model].architecture if model in PRESETS else None


class _OldPhase(BaseModel):
    """`phase21`: an old link's phase, read as the nearest phase now (`step.from_old_phase`), then forgotten."""

    phase21: int | None = Field(None, ge=0, le=OLD_PHASES - 1, description=OLD_PHASE_HELP)
    if TYPE_CHECKING:  # each query declares its own phase field, with its own default
        phase: int | None

    @model_validator(mode="after")
    def _nearest(self) -> Self:
        old, self.phase21 = self.phase21, None
        if old is not None and "phase" not in self.model_fields_set:
            self.phase = from_old_phase(old)
        return self


class StepQuery(_OldPhase, RunQuery):
    """A phase of one training step under one stage, for the run's weights and recipe."""

    stage: Stage = Field(Stage.DP, description="The arrangement.")
    phase: int = Field(0, ge=0, le=LAST_PHASE, description=PHASE_HELP)


class LayoutQuery(RunQuery):
    """The grid of one stage for a run: its cards and its recipe's bands; the rest of the run is checked, not used."""

    stage: Stage = Field(Stage.DP, description="The arrangement.")


class PageQuery(_OldPhase, RunQuery):
    """The page's parameters: a run, the stage to draw, and a moment of the step."""

    stage: Stage = Field(Stage.DP, description="The arrangement to draw.")
    phase: int | None = Field(
        None, ge=0, le=LAST_PHASE, description=f"A phase of one training step ({PHASE_HELP}); none: at rest."
    )
    previous: Stage | None = Field(
        None, alias="from", description="The stage shown before this one: the cells that changed are marked."
    )
    theme: Theme = Field(Theme.DEFAULT, description=THEME_HELP)
    predict: bool = Field(False, description=PREDICT_HELP)


class PredictQuery(PageQuery):
    """A prediction asked before a move, and once `shown`, its answer: the view now, where it goes, what was given.

    The question's whole state is in its address (no session, no cookie): a person alone, as a live
    session's follower answers the teacher's question.
    """

    to: Stage | None = Field(None, description="The stage to switch to; none: the step's next phase.")
    answer: list[str] = Field(
        [], max_length=MAX_ANSWERS, description="The prediction: a cell (weight.band) each, or one number."
    )
    shown: bool = Field(False, description="1: show the answer beside the prediction.")


class CompareQuery(RunQuery):
    """Two stages of one run, side by side."""

    left: Stage = Field(Stage.ZERO1, description="The arrangement drawn on the left.")
    right: Stage = Field(Stage.ZERO3, description="The arrangement drawn on the right.")
    theme: Theme = Field(Theme.DEFAULT, description=THEME_HELP)


NOT_MEASURED = "not_measured"
"""The error type of an implementation asked for a stage it was not measured for."""


class MeasuredQuery(BaseModel):
    """One measured arrangement: the stage, and for ZeRO-2 and 3 which FSDP."""

    model_config = ConfigDict(extra="ignore")

    stage: Stage = Field(Stage.DP, description="The arrangement.")
    impl: Impl | None = Field(
        None,
        description="ddp (dp), zero-redundancy (zero1), fsdp1 or fsdp2 (zero2, zero3), hsdp (zero3); "
        "none: fsdp2 for zero2, zero3.",
    )
    theme: Theme = Field(Theme.DEFAULT, description=THEME_HELP)

    @field_validator("impl")
    @classmethod
    def _measured(cls, impl: Impl | None, info: ValidationInfo) -> Impl | None:
        stage = info.data.get("stage")
        if impl is not None and isinstance(stage, Stage) and impl not in IMPLS[stage]:
            choices = " or ".join(i.value for i in IMPLS[stage])
            # A sentence of its own: the error pages show it as it is, without pydantic's "Value error, ".
            raise PydanticCustomError(
                NOT_MEASURED,
                "impl={impl} was not measured for {stage}: choose {choices}",
                {
                    "impl": impl.value,
                    "stage": stage.info.title.lower() if stage is Stage.DP else stage.info.title,
                    "choices": choices,
                },
            )
        return impl

    @property
    def chosen(self) -> Impl:
        """The implementation to show."""
        return self.impl or default_impl(self.stage)


class Controls(StrEnum):
    """What an embed lets the reader change."""

    STAGES = "stages"
    """The stage switcher."""
    STEP = "step"
    """The stage switcher and the training step's controls."""
    NONE = "none"
    """Nothing: just the picture."""


class EmbedQuery(PageQuery):
    """An embed's parameters: the page's, and what the embed shows around the picture."""

    controls: Controls = Field(Controls.STAGES, description="stages: the switcher; step: and the step; none: neither.")
    calculator: bool = Field(False, description="Show the run form, the table and ZeRO-3's limit (1) or not (0).")
    live: str | None = Field(
        None, max_length=12, description="A live session's code: the embed follows its teacher, whose run it draws."
    )

    def options(self) -> tuple[tuple[str, str], ...]:
        """The embed's own parameters that differ from the defaults, for its links."""
        kept = self.model_dump(mode="json", include={"controls", "calculator"}, exclude_defaults=True)
        return tuple((key, str(int(value)) if isinstance(value, bool) else str(value)) for key, value in kept.items())


CROSS_FIELD = frozenset({"trainable", "cluster", "groups", "cut", "config"})
"""The error types of the rules that join fields: each refusal is a sentence naming both values (a config's,
the key at fault)."""


def _field_message(name: str, error: Mapping[str, Any], typed: str) -> str:
    """What to put beside a form field whose value was rejected; the value only where it explains why."""
    field = BY_NAME[name]
    reading = ambiguity(typed, show_input=True) if field.kind is Kind.SIZE else None
    if reading:
        return f"Ambiguous: {reading}."
    if error.get("type") in CROSS_FIELD:
        said = str(error.get("msg"))  # the rule's own sentence, naming both values
        return field.message.format(said=f"{said[:1].upper()}{said[1:]}") if "{said}" in field.message else said
    hint = field.hint()
    if hint is not None:
        return f"Enter {hint}, or leave it blank."
    if field.message:
        return field.message
    if field.kind is Kind.SWITCH:  # its two values, worded as the form words them
        words = dict(field.labels)
        return f"Enter 1 or 0: 1 is “{words.get('1', 'On')}”, 0 “{words.get('0', 'Off')}”."
    expected = (error.get("ctx") or {}).get("expected")
    return f"Choose one of {expected}." if expected else "This value is not understood."


@dataclass(frozen=True)
class SetAside:
    """A page request read as far as it can be: the valid parameters, and what was set aside."""

    query: PageQuery
    """The request with every invalid parameter treated as not given."""
    problems: tuple[FieldProblem, ...]
    """The run form's fields that were set aside, with what was typed."""
    errors: tuple[dict[str, Any], ...]
    """Every rejected parameter's error, located as FastAPI locates them (("query", name))."""
    fell_back: frozenset[str] = frozenset()
    """The rejected fields drawn with the value on the screen instead of their default."""

    @property
    def notice(self) -> bool:
        """Whether a parameter outside the form (the stage or the phase) was rejected."""
        return any(e["loc"][1] not in BY_NAME for e in self.errors)


_ON_THE_MODEL = frozenset({"ep", "etp"})
"""Fields refused by what the model is (experts to split): a config set aside leaves the preset, which may
have none, so their refusal then would blame a model the person did not choose."""


def set_aside(
    params: Mapping[str, str], model: type[PageQuery] = PageQuery, shown: Mapping[str, str] | None = None
) -> SetAside:
    """Read a page's (or an embed's) query parameters, setting aside each invalid one.

    An invalid field of the run form takes its value in `shown` (the run on the screen when the
    form was sent), so a typo redraws nothing: 0 GPUs typed over 16 keeps the 16 cards drawn. A
    field `shown` lacks, or holds no better, is treated as not given.
    """
    data = dict(params)
    fallback = {k: v for k, v in (shown or {}).items() if k in BY_NAME}
    fell_back: set[str] = set()
    problems: list[FieldProblem] = []
    errors: list[dict[str, Any]] = []
    while True:
        try:
            query = model.model_validate(data)
        except ValidationError as exc:
            rejected = {str(e["loc"][0]): e for e in exc.errors() if e["loc"] and e["loc"][0] in data}
            if not rejected:  # nothing left to set aside: cannot happen, every field has a default
                raise
            for name, error in rejected.items():
                typed = data.pop(name)
                if name in fell_back:
                    continue  # the value on the screen was no better: reported already, as typed
                if name in _ON_THE_MODEL and any(p.name == "config" for p in problems):
                    continue  # refused only for the preset drawn in the refused config's place: its error says it
                errors.append({**error, "loc": ("query", name)})
                if name in BY_NAME:
                    problems.append(FieldProblem(name, typed, _field_message(name, error, typed)))
                if name in fallback and fallback[name] != typed:
                    data[name] = fallback[name]
                    fell_back.add(name)
        else:
            drawn_from_screen = frozenset(n for n in fell_back if n in query.model_fields_set)
            return SetAside(query, tuple(problems), tuple(errors), drawn_from_screen)
