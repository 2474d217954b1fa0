"""A run as a config to copy, and a pasted DeepSpeed config read as a run: what the routes share.

The domain (app/domain/configs.py) writes and reads the configs; a route's dependency reads the
body up to its cap (app/serving/body.py: `ConfigBody` and `FormBody` here). This module parses
it, merges what a config sets into the run the request describes (a DeepSpeed config holds no
model or cluster), and builds the page's links and paste box.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any

from fastapi import Depends
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import Field, ValidationError
from pydantic_core import from_json
from starlette.requests import Request

from app.domain.architecture import Architecture
from app.domain.configs import (
    ConfigError,
    NoConfig,
    cut_parameter,
    cut_refused_here,
    deepspeed_config,
    deepspeed_refused,
    fsdp2_snippet,
    ignored_keys,
    read_deepspeed,
    read_notes,
)
from app.domain.layout_configs import megatron_text, mesh_snippet, model_note, torchtitan_toml
from app.domain.sizing import Run
from app.domain.stages import Stage
from app.serving.body import CappedBody, capped
from app.web.inputs import PageQuery, RunQuery, Theme
from app.web.links import Links, path_for

MAX_CONFIG_BYTES = 64 * 1024
"""The largest config read: DeepSpeed's own are a few kB; more is a mistake, or an attack on memory."""
MAX_FORM_BYTES = 4 * MAX_CONFIG_BYTES
"""The form's body: a config percent-encoded takes up to three bytes a character, and the run's fields."""


class ConfigFormat(StrEnum):
    """What /api/config writes."""

    DEEPSPEED = "deepspeed"
    FSDP2 = "fsdp2"
    MEGATRON = "megatron"
    TORCHTITAN = "torchtitan"
    MESH = "mesh"


@dataclass(frozen=True)
class LayoutExport:
    """One export of the layout (the model cut across cards): its link's words and id, and what writes it, as text."""

    label: str
    writer: Callable[[Stage, Run, Architecture | None], str]
    description: str
    framework: str
    """The framework's name, as the page says what it lacks."""


LAYOUT_EXPORTS = {
    ConfigFormat.MEGATRON: LayoutExport(
        "Copy as Megatron-LM arguments", megatron_text, "megatron: Megatron-LM's command-line arguments", "Megatron-LM"
    ),
    ConfigFormat.TORCHTITAN: LayoutExport(
        "Copy as torchtitan",
        torchtitan_toml,
        "torchtitan: torchtitan's [parallelism] and [training] (TOML)",
        "torchtitan",
    ),
    ConfigFormat.MESH: LayoutExport(
        "Copy as FSDP2 + DTensor mesh",
        mesh_snippet,
        "mesh: a PyTorch device mesh with tensor parallelism and FSDP2",
        "FSDP2",
    ),
}
"""The layout's exports, declared once: the page's links, /api/config's formats and `zero-bands config` come from it."""


def layout_written(form: ConfigFormat, stage: Stage, run: Run, architecture: Architecture | None) -> str:
    """The layout as `form` writes it; NoConfig where that framework has none (ZeRO-1 outside Megatron-LM)."""
    return LAYOUT_EXPORTS[form].writer(stage, run, architecture)


class ConfigQuery(RunQuery):
    """A run under one stage, written as a training framework's config."""

    stage: Stage = Field(Stage.DP, description="The arrangement: dp is ZeRO stage 0.")
    format: ConfigFormat = Field(
        ConfigFormat.DEEPSPEED,
        description="deepspeed: a DeepSpeed JSON config; fsdp2: a PyTorch FSDP2 snippet; "
        + "; ".join(export.description for export in LAYOUT_EXPORTS.values())
        + ".",
    )


class NotAConfig(ValueError):
    """A body that is not a JSON object: a sentence for a person, with nothing of the body in it."""


ConfigBody = Annotated[CappedBody, Depends(capped(MAX_CONFIG_BYTES))]
"""/api/config's body, a JSON config, read by a dependency up to its cap."""
FormBody = Annotated[CappedBody, Depends(capped(MAX_FORM_BYTES))]
"""The paste box's form, read by a dependency up to its cap."""


# pydantic's parser's reasons (jiter's, fixed words with a place, never the text), said for a person;
# one not here is said in the parser's words.
_NOT_JSON = {
    "number out of range": "a number of thousands of digits",
    "unexpected end of hex escape": "a lone surrogate (half a character, \\ud800 to \\udfff)",
    "lone leading surrogate in hex escape": "a lone surrogate (half a character, \\ud800 to \\udfff)",
    "invalid unicode code point": "bytes that are not UTF-8 text",
    "recursion limit exceeded": "brackets nested too deep",
}
_PLACE = re.compile(r"(?P<reason>.+) at line (?P<line>[0-9]+) column (?P<column>[0-9]+)")
_BOM = b"\xef\xbb\xbf"
"""UTF-8's byte order mark, which a config saved by some editors starts with: no part of the JSON."""


def config_object(raw: bytes | str) -> Mapping[str, Any]:
    r"""The body read as a JSON object.

    pydantic's JSON parser, not the standard library's: it refuses what no config holds and what
    would fail later, in the answer. A lone surrogate (a `\ud800` escape) would pass `json.loads`
    and then fail to encode (a 500); an integer of over 4,300 digits would be a ValueError of Python's
    int limit; brackets nested past 200 deep would be a RecursionError.
    """
    if not raw.strip():
        raise NotAConfig(
            'No config was given: paste a DeepSpeed config, a JSON object such as {"zero_optimization": …}.'
        )
    try:
        data = raw.encode() if isinstance(raw, str) else raw
    except UnicodeEncodeError:  # a str of a lone surrogate: no text a form sends, but the reader's callers vary
        raise NotAConfig("The config is not text: a DeepSpeed config is a JSON object, {…}.") from None
    try:
        config = from_json(data.removeprefix(_BOM))
    except ValueError as exc:
        raise NotAConfig(
            f"The config is not JSON: {_why(str(exc))}. A DeepSpeed config is a JSON object, {{…}}."
        ) from None
    if not isinstance(config, dict):
        raise NotAConfig("The config is not a JSON object: a DeepSpeed config starts with { and ends with }.")
    return config


def _why(error: str) -> str:
    """The parser's reason and place, in words: "a number of thousands of digits at line 1, column 4308"."""
    place = _PLACE.fullmatch(error)
    if place is None:
        return _NOT_JSON.get(error, error)
    reason = _NOT_JSON.get(place["reason"], place["reason"])
    return f"{reason} at line {place['line']}, column {place['column']}"


@dataclass(frozen=True)
class Pasted:
    """A config read as a run: the page to draw it on, its short query and the keys set aside."""

    query: PageQuery
    ignored: tuple[str, ...]
    notes: tuple[str, ...] = ()
    """What was drawn otherwise than the config says (MiCS as hybrid sharding), a sentence each."""

    @property
    def parameters(self) -> dict[str, str]:
        """The run's parameters that differ from the defaults, the stage first."""
        return {"stage": self.query.stage.value, **self.query.canonical()}


def read_pasted(config: Mapping[str, Any], run: RunQuery) -> Pasted:
    """What `config` sets, over the run the request describes (its model, cards and the rest).

    Raises ConfigError for a value the domain refuses, and ValueError for a mix the query model refuses.
    """
    given = {**run.canonical(), **read_deepspeed(config)}
    if isinstance(run, PageQuery) and run.theme is not Theme.DEFAULT:
        given["theme"] = run.theme.value
    if isinstance(run, PageQuery) and run.predict:
        given["predict"] = "1"
    try:
        query = PageQuery.model_validate(given)
    except ValidationError as exc:  # a rule of the run as a whole, e.g. a cross-field one
        raise ValueError(" ".join(str(e["msg"]) for e in exc.errors())) from None
    return Pasted(query, ignored_keys(config), read_notes(config))


def pasted_url(request: Request, pasted: Pasted) -> str:
    """The page's address for the run read: the one URL builder, from the route's name."""
    query = pasted.query
    predict = path_for(request, "predict") if query.predict else ""
    return Links(path_for(request, "page"), tuple(query.canonical().items()), theme=query.theme, predict=predict)(
        query.stage
    )


class Refused(Exception):
    """Why a config was not read, for the asker: a status, a sentence and where in the request."""

    def __init__(self, status: int, message: str, loc: tuple[str, ...] = ("body",), text: str = "") -> None:
        super().__init__(message)
        self.status, self.message, self.loc, self.text = status, message, loc, text

    def json(self) -> JSONResponse:
        """As the API answers any refusal (app/web/errors.py): the sentence, and the details by location."""
        detail = [{"loc": list(self.loc), "msg": self.message, "type": "config"}]
        return JSONResponse({"message": self.message, "detail": detail}, status_code=self.status)


TOO_LARGE = f"The config is over {MAX_CONFIG_BYTES // 1024} KB: a DeepSpeed config is a few kB."


def _read(raw: bytes | str, run: RunQuery, text: str = "") -> Pasted:
    try:
        return read_pasted(config_object(raw), run)
    except ConfigError as exc:  # loc: where in the body, as DeepSpeed's dotted key
        raise Refused(422, str(exc), ("body", *exc.key.split(".")), text) from None
    except ValueError as exc:  # NotAConfig, or the run as a whole refused
        raise Refused(422, str(exc), text=text) from None


def read_body(body: CappedBody, run: RunQuery) -> Pasted:
    """The request's JSON body read as a run, over `run`; Refused says why not."""
    if body.over:
        raise Refused(413, TOO_LARGE)
    return _read(body.data, run)


def written(
    form: ConfigFormat, stage: Stage, run: Run, architecture: Architecture | None = None, title: str = ""
) -> Response:
    """`run` under `stage` as `form` writes it: JSON or text, or a 422 saying why there is none.

    DeepSpeed has no config for hybrid sharding: the refusal names the parameter, as a bad query's does.
    `architecture` is the model's shape, where known: Megatron-LM's and torchtitan's exports name it.
    `title` is the model's name: the text exports' first line says it (`model_note`), and a mixture of
    experts' experts; DeepSpeed's JSON has no place for a comment, and a key it does not know it would refuse.
    """
    named = model_note(title, architecture) + "\n" if title else ""
    if form in LAYOUT_EXPORTS:
        try:
            return PlainTextResponse(named + layout_written(form, stage, run, architecture))
        except NoConfig as exc:
            return Refused(422, str(exc), ("query", exc.parameter)).json()
    if form is ConfigFormat.FSDP2:
        if refused := fsdp2_refused(run):
            return Refused(422, refused, ("query", cut_parameter(run))).json()
        return PlainTextResponse(named + fsdp2_snippet(stage, run))
    try:
        return JSONResponse(deepspeed_config(stage, run))
    except NoConfig as exc:
        return Refused(422, str(exc), ("query", exc.parameter)).json()


def fsdp2_refused(run: Run) -> str:
    """Why the FSDP2 snippet (fully_shard over every card) cannot say the run: its model is cut; empty otherwise."""
    return cut_refused_here("the FSDP2 snippet", run) if cut_parameter(run) else ""


BOTH_CUT = "DeepSpeed's JSON config and the FSDP2 snippet"
"""The page's one sentence for both, where the model is cut."""


def read_form(body: CappedBody, run: PageQuery) -> Pasted:
    """The paste box's config read as a run, over the run on the page; Refused keeps what was pasted."""
    text = body.field("config")
    if body.over or len(text.encode()) > MAX_CONFIG_BYTES:
        raise Refused(413, TOO_LARGE)
    return _read(text, run, text)


@dataclass(frozen=True)
class LayoutCopy:
    """One of the layout's "Copy as" links, or why the run has none in that framework."""

    id: str
    label: str
    href: str
    refused: str = ""
    lead: str = " · "
    """What comes before it in the row: nothing for the first of them."""
    links: tuple[str, ...] = field(init=False, repr=False, compare=False)
    refusals: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "links", () if self.refused else (self.href,))
        object.__setattr__(self, "refusals", (self.refused,) if self.refused else ())


LIVE_PASTE = (
    "In a live session, paste a model's config.json in the run form's box \u201cOr paste a model's config.json\u201d: "
    "the session follows it. A config of more than a few KB, or a DeepSpeed config, is read on the plain page."
)
"""What a live page says where the plain page has its paste and upload forms."""


@dataclass(frozen=True)
class ConfigView:
    """The page's "Copy as" links and its paste box; `message` and `text` when a paste was refused."""

    deepspeed_href: str
    fsdp2_href: str
    paste_action: str
    message: str = ""
    text: str = ""
    deepspeed_refused: str = ""
    """Why the run has no DeepSpeed config (hybrid sharding), to say in its link's place; empty: it has one."""
    layout: tuple[LayoutCopy, ...] = ()
    """The layout's exports (`LAYOUT_EXPORTS`), each a link or why there is none."""
    fsdp2_refused: str = ""
    """Why the FSDP2 snippet cannot say the run (its model is cut); empty: it can."""
    upload_action: str = ""
    """Where a model's config.json is uploaded, the run in its query (`pages.upload_config`)."""
    live: bool = False
    """Drawn for a live session: both forms left out, as their POST answers with the plain page (out of the
    session; the drawing is shared by every session, so it cannot carry one's address back), and words say
    how to paste there instead."""
    paste_actions: tuple[str, ...] = field(init=False, repr=False, compare=False)
    upload_actions: tuple[str, ...] = field(init=False, repr=False, compare=False)
    live_words: tuple[str, ...] = field(init=False, repr=False, compare=False)
    fsdp2_links: tuple[str, ...] = field(init=False, repr=False, compare=False)
    fsdp2_refusals: tuple[str, ...] = field(init=False, repr=False, compare=False)
    deepspeed_links: tuple[str, ...] = field(init=False, repr=False, compare=False)
    refusals: tuple[str, ...] = field(init=False, repr=False, compare=False)
    messages: tuple[str, ...] = field(init=False, repr=False, compare=False)
    text_attrs: dict[str, str | None] = field(init=False, repr=False, compare=False)
    """The paste box marked invalid, and described by the message, when a paste was refused."""

    def __post_init__(self) -> None:
        refused, message = self.deepspeed_refused, self.message
        object.__setattr__(self, "deepspeed_links", () if refused else (self.deepspeed_href,))
        object.__setattr__(self, "refusals", (refused,) if refused else ())
        fsdp2 = self.fsdp2_refused
        object.__setattr__(self, "fsdp2_links", () if fsdp2 else (self.fsdp2_href,))
        # A cut model: DeepSpeed's refusal already says both cannot write it, once.
        object.__setattr__(self, "fsdp2_refusals", (fsdp2,) if fsdp2 and fsdp2 != refused else ())
        object.__setattr__(self, "messages", (message,) if message else ())
        invalid = {"aria-invalid": "true", "aria-describedby": "config-problem"} if message else {}
        object.__setattr__(self, "text_attrs", invalid)
        object.__setattr__(self, "paste_actions", () if self.live else (self.paste_action,))
        object.__setattr__(self, "upload_actions", () if self.live else (self.upload_action,))
        object.__setattr__(self, "live_words", (LIVE_PASTE,) if self.live else ())


def config_view(request: Request, link: Links, stage: Stage, run: Run) -> ConfigView:
    """The links of this run under `stage`, and the paste box that keeps its model and cluster.

    `run` is the run `link` describes, resolved: whether DeepSpeed has a config for it.
    """
    api = Links(path_for(request, "api_config"), link.run)

    def href(form: ConfigFormat) -> str:
        return api.at(stage, None) + f"&format={form.value}"

    # The run (and the theme, predict first) in the action's query: a form sent by POST keeps it, and the config is
    # the body.
    action = Links(path_for(request, "config_paste"), link.run, theme=link.theme, predict=link.predict).at(stage, None)
    upload = Links(path_for(request, "config_upload"), link.run, theme=link.theme, predict=link.predict).at(stage, None)
    refused = deepspeed_refused(stage, run)
    fsdp2 = fsdp2_refused(run)
    if fsdp2:  # a cut model: one sentence for both
        refused = fsdp2 = cut_refused_here(BOTH_CUT, run)
    layout = tuple(
        LayoutCopy(f"copy-{form.value}", export.label, href(form), _refusal(form, stage, run), " · " if n else "")
        for n, (form, export) in enumerate(LAYOUT_EXPORTS.items())
    )
    return ConfigView(
        href(ConfigFormat.DEEPSPEED),
        href(ConfigFormat.FSDP2),
        action,
        deepspeed_refused=refused,
        layout=layout,
        fsdp2_refused=fsdp2,
        upload_action=upload,
    )


def _refusal(form: ConfigFormat, stage: Stage, run: Run) -> str:
    """Why `form` has no export of `run` under `stage`, in a few words; empty where it has one.

    The API's 422 says it at length; the page, with three exports side by side, names the framework and the
    stage it lacks (written without the shape, which no refusal depends on).
    """
    try:
        layout_written(form, stage, run, None)
    except NoConfig as exc:
        if exc.parameter == "stage":
            return f"{LAYOUT_EXPORTS[form].framework} has no {stage.info.title} (choose ZeRO-2)"
        return str(exc)
    return ""
