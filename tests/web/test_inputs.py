"""app/web/inputs.py: the query models; every input within its bounds gives a 200, every one outside a 4xx."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from app.domain.hf_config import INERT, read_text
from app.domain.presets import stored_text
from app.domain.stages import Stage
from app.domain.units import BYTES_PATTERN, COUNT_PATTERN
from app.web.fields import FIELDS, Kind, RunField
from app.web.inputs import THEME_HELP, CompareQuery, MeasuredQuery, PageQuery, RunQuery, Theme, set_aside
from tests.conftest import dom, examples, one, text
from tests.web.helpers import get_tree, run_page, table_cells, theme_in

PATHS = ["/", "/api/memory"]
URL_OPTIONS = Path(__file__).resolve().parents[2] / "docs" / "url-options.md"
FAST = settings(max_examples=examples(80), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

counts = (
    st.from_regex(COUNT_PATTERN, fullmatch=True)
    | st.integers(1, 10**15).map(str)
    | st.integers(1, 10**15).map("{:,}".format)
    | st.just("")
)
sizes = st.from_regex(BYTES_PATTERN, fullmatch=True) | st.sampled_from(
    ["80GB", "80GiB", "24 gib", "32e9", "80e+09", ""]
)
# The fields a rule across fields joins (nodes and GPUs per node against gpus, the device against the
# offload, a trainable count against the model): values that agree with any value of the others.
_AGREEING = {
    "nodes": st.sampled_from(["", "1"]),
    "gpus_per_node": st.just(""),
    "offload_device": st.sampled_from(["nvme", ""]),
    "trainable": st.sampled_from(["", "0", "1", "0.5", "25%", "1e0"]),
    # Hybrid sharding and ZeRO++ against the cluster, the accounting and each other: off, or one group.
    "shard": st.sampled_from(["", "1"]),
    "hpz": st.just("1"),
    "qwz": st.just("0"),
    "qgz": st.just("0"),
    # The model cut across cards, against the cluster and the model's blocks: not cut (tests/domain/test_parallel.py).
    "tp": st.just("1"),
    "sp": st.just("0"),
    "pp": st.just("1"),
    "vpp": st.just("1"),
    "cp": st.just("1"),
    "ep": st.just("1"),
    "etp": st.sampled_from(["0", "1"]),
    # A capacity factor, any model's: blank (dropless) or above 0.
    "capacity_factor": st.sampled_from(["", "1", "1.25", "0.5", ".75", "2", " 100 "]),
    # A model's config.json: none, or a stored one, whole or minimised (its heads and blocks take any cut above).
    "config": st.sampled_from(
        ["", stored_text("qwen2.5-7b.json"), read_text(stored_text("mixtral-8x7b-v0.1.json")).minimal]
    ),
}


def _valid(field: RunField) -> st.SearchStrategy[str]:
    """Any value the field accepts, from its declared kind and limits."""
    if field.name in _AGREEING:
        return _AGREEING[field.name]
    blank = st.just("") if field.blank else st.nothing()
    if field.kind is Kind.CHOICE:
        return st.sampled_from(field.values) | blank
    if field.kind is Kind.SWITCH:
        return st.sampled_from(["0", "1"])
    if field.kind is Kind.WHOLE:
        assert field.low is not None
        assert field.high is not None
        return st.integers(field.low, field.high).map(str) | blank
    return sizes if field.kind is Kind.SIZE else counts


# Every run field, derived from the declaration: a field added there is drawn here too.
valid_queries = st.fixed_dictionaries(
    {},
    optional={"stage": st.sampled_from([s.value for s in Stage]), **{f.name: _valid(f) for f in FIELDS}},
)

utf8_text = st.text(st.characters(codec="utf-8"), max_size=30)


def _not(pattern: str) -> st.SearchStrategy[str]:
    return utf8_text.filter(lambda t: t != "" and re.fullmatch(pattern, t) is None)


def _out_of(low: int, high: int) -> st.SearchStrategy[str]:
    return (st.integers(max_value=low - 1) | st.integers(min_value=high + 1)).map(str) | _not(r"\s*[+-]?\d+\s*")


def _refused(field: RunField) -> st.SearchStrategy[str]:
    """Values the field refuses, from its declared kind and limits."""
    if field.kind is Kind.CHOICE:
        accepted = set(field.values) | ({""} if field.blank else set())
        return utf8_text.filter(lambda t: t not in accepted and t.split() != ["optimizer", "params"])
    if field.kind is Kind.SWITCH:
        return st.sampled_from(["2", "-1", "maybe", "", "10"])
    if field.kind is Kind.WHOLE:
        assert field.low is not None
        assert field.high is not None
        return _out_of(field.low, field.high)
    if field.kind is Kind.CONFIG:
        return hostile_configs
    return _not(field.pattern or "")


_MIXTRAL = json.loads(stored_text("mixtral-8x7b-v0.1.json"))
# What a config.json field is refused for: not JSON, not an object, too deep, a number too long to read, a key
# unknown (markup in it), a count of the wrong type, and random text; never a 5xx.
hostile_configs = st.one_of(
    utf8_text.filter(lambda t: t.strip() != ""),
    st.sampled_from(["[]", "null", "1", '"x"', "{", "[" * 5000, "{\"a\":" * 3000, "1" * 5000, "NaN"]),
    st.builds(lambda key, value: json.dumps({**_MIXTRAL, key: value}), utf8_text.filter(lambda t: t not in _MIXTRAL),
              st.integers() | utf8_text),
    st.builds(lambda key, value: json.dumps({**_MIXTRAL, key: value}), st.sampled_from(sorted(set(_MIXTRAL) - INERT)),
              st.floats(allow_nan=True) | st.booleans() | st.integers(max_value=0) | st.just("<script>")),
)  # fmt: skip

invalid_fields = st.one_of(*(st.tuples(st.just(f.name), _refused(f)) for f in FIELDS))
# The stage belongs to the page; the API has no use for it.
bad_stage = st.tuples(st.just("stage"), utf8_text.filter(lambda t: t not in set(Stage)))


@FAST
@given(query=valid_queries, path=st.sampled_from(PATHS))
def test_every_input_within_bounds_is_answered(client: TestClient, query: dict[str, str], path: str) -> None:
    response = client.get(path, params=query)
    assert response.status_code == 200, (query, response.text[:400])


@FAST
@given(
    query=valid_queries,
    bad=st.one_of(st.tuples(invalid_fields, st.sampled_from(PATHS)), st.tuples(bad_stage, st.just("/"))),
)
def test_every_input_outside_bounds_is_refused(
    client: TestClient, query: dict[str, str], bad: tuple[tuple[str, str], str]
) -> None:
    (field, value), path = bad
    response = client.get(path, params={**query, field: value})
    assert response.status_code == 422, (field, value, response.status_code)


def test_canonical_drops_defaults_blanks_and_what_a_preset_decides() -> None:
    query = RunQuery.model_validate(
        {"gpus": "8", "capacity": "", "model": "llama-3-8b", "params": "8030261248", "master_bytes": "4", "units": "GB"}
    )
    assert query.canonical() == {"model": "llama-3-8b", "units": "GB"}
    custom = RunQuery.model_validate({"model": "custom", "params": "7.5B", "recipe": "custom", "moments_bytes": "2"})
    assert custom.canonical() == {"model": "custom", "params": "7.5B", "recipe": "custom", "moments_bytes": "2"}


# Strings close to the grammar: digits, separators, exponents, suffixes, spaces and a newline.
near_misses = st.text(alphabet="0123456789.,_eE+- \nkKmMbBtTgGiI", min_size=1, max_size=14)


def _rust_accepts(field: str, value: str) -> bool:
    try:
        RunQuery.model_validate({field: value})
    except ValidationError:
        return False
    return True


@settings(max_examples=examples(400))
@given(value=near_misses | st.from_regex(COUNT_PATTERN, fullmatch=True) | st.from_regex(BYTES_PATTERN, fullmatch=True))
def test_python_and_pydantic_read_the_patterns_alike(value: str) -> None:
    # pydantic-core matches with Rust's regex crate, the domain with Python's re: the OpenAPI
    # schema is only honest if the two draw the same line.
    assert _rust_accepts("params", value) == (re.fullmatch(COUNT_PATTERN, value) is not None)
    assert _rust_accepts("capacity", value) == (re.fullmatch(BYTES_PATTERN, value) is not None)


@pytest.mark.parametrize(
    ("value", "count", "size"),
    [
        ("7.5e+09", True, True),
        ("1,000,000", True, True),
        ("1_000_000", True, True),
        ("7.5E9", True, True),
        ("2,750T", True, False),
        ("32e9", True, True),
        ("80GB", False, True),
        ("80G", False, False),
        ("1,00,0", False, False),
        ("1.2345e2", False, False),
        ("7.5B\n", False, False),
    ],
)
def test_the_engines_agree_on_the_examples(value: str, count: bool, size: bool) -> None:
    assert (_rust_accepts("params", value), re.fullmatch(COUNT_PATTERN, value) is not None) == (count, count)
    assert (_rust_accepts("capacity", value), re.fullmatch(BYTES_PATTERN, value) is not None) == (size, size)


def test_set_aside_keeps_the_valid_and_records_the_rest() -> None:
    kept = set_aside({"stage": "zero3", "gpus": "5000", "model": "custom", "params": "7B", "phase": "x"})
    assert (kept.query.stage, kept.query.value("gpus"), kept.query.value("params"), kept.query.phase) == (
        Stage.ZERO3,
        8,
        "7B",
        None,
    )
    assert [(p.name, p.typed) for p in kept.problems] == [("gpus", "5000")]
    assert sorted(e["loc"] for e in kept.errors) == [("query", "gpus"), ("query", "phase")]
    assert kept.notice
    clean = set_aside({"stage": "dp", "gpus": "4"})
    assert (clean.problems, clean.errors, clean.notice) == ((), (), False)


def test_an_invalid_field_takes_the_value_on_the_screen_once() -> None:
    kept = set_aside({"stage": "zero1", "gpus": "0", "params": "7B"}, shown={"gpus": "16", "params": "1B"})
    # Only the invalid field falls back; what was typed is still what the form shows and explains.
    assert (kept.query.value("gpus"), kept.query.value("params")) == (16, "7B")
    assert [(p.name, p.typed) for p in kept.problems] == [("gpus", "0")]
    assert [e["loc"] for e in kept.errors] == [("query", "gpus")]
    # A value on the screen that is no better is not given, and not reported a second time.
    worse = set_aside({"gpus": "0"}, shown={"gpus": "abc"})
    assert (worse.query.value("gpus"), [p.typed for p in worse.problems], len(worse.errors)) == (8, ["0"], 1)
    # Only the run form's fields: the stage shown is not a fallback for a bad stage.
    assert set_aside({"stage": "zero9"}, shown={"stage": "zero3"}).query.stage == Stage.DP


@pytest.mark.parametrize("params", ["7.5e9", "7500000000", "7.5B"])
def test_params_in_every_notation_without_naming_the_model(client: TestClient, params: str) -> None:
    tree = run_page(client, f"params={params}&gpus=64&units=GB")
    assert table_cells(tree, "td.per-gpu")[0] == "120.0 GB"
    assert one(tree, '#f-model option[value="custom"]').has_attr("selected")


@pytest.mark.parametrize("params", ["7.5e+09", "7.5e+9", "7.50E+09"])
def test_an_exponent_typed_into_the_address_reads_although_its_plus_arrives_as_a_space(
    client: TestClient, params: str
) -> None:
    # A raw '+' in a query string means a space: the server receives '7.5e 09'.
    response = client.get(f"/?params={params}&gpus=64&units=GB")
    assert response.status_code == 200
    assert table_cells(dom(response.text), "td.per-gpu") == ["120.0 GB", "31.4 GB", "16.6 GB", "1.9 GB"]
    api = client.get(f"/api/memory?params={params}&capacity=1e+11")
    assert api.status_code == 200
    assert (api.json()["inputs"]["params"], api.json()["inputs"]["capacity"]) == (7_500_000_000, 10**11)


def test_a_bad_previous_stage_is_refused(client: TestClient) -> None:
    get_tree(client, "stage=zero2&from=zero9", status=422)


@pytest.mark.parametrize("value", ["neon", "PROJECTOR", "dark-projector", "projector-auto", ""])
def test_a_bad_theme_is_a_clear_422(client: TestClient, value: str) -> None:
    response = client.get(f"/?stage=zero1&theme={value}")
    assert response.status_code == 422
    tree = dom(response.text)
    message = text(tree, ".notice-message")
    assert "“theme”" in message
    assert all(f"'{t.value}'" in message for t in Theme), message
    # The switcher still offers a way on, in the default theme.
    assert one(tree, "html").get("class") == ["theme-default"]
    assert theme_in(str(one(tree, "#switch-zero1").get("href"))) == []


# Once a 422 with no grid: a forced colour scheme, alone or with the projector's type, on every page that takes a theme.
@pytest.mark.parametrize("theme", ["light", "dark", "projector-light", "projector-dark"])
@pytest.mark.parametrize("path", ["/?stage=zero1", "/embed?", "/compare?left=dp", "/measured?stage=zero2", "/share?"])
def test_light_and_dark_are_themes(client: TestClient, path: str, theme: str) -> None:
    response = client.get(f"{path}&theme={theme}")
    assert response.status_code == 200
    html = one(dom(response.text), "html")
    assert html.get("data-scheme") == theme.rpartition("-")[2]
    assert html.get("class") == ["theme-projector" if theme.startswith("projector") else "theme-default"]


def test_the_theme_is_declared_once_and_the_docs_say_it() -> None:
    # The query models' description (and so the OpenAPI schema) is THEME_HELP; the docs' row says the same.
    for model in (PageQuery, CompareQuery, MeasuredQuery):
        assert model.model_fields["theme"].description == THEME_HELP
    row = next(line for line in URL_OPTIONS.read_text().splitlines() if line.startswith("| `theme` |"))
    assert THEME_HELP.replace("'", "`") in row


def test_the_api_does_not_take_a_theme(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    names = {p["name"] for path in schema["paths"].values() for op in path.values() for p in op.get("parameters", [])}
    assert "theme" not in names


@pytest.mark.parametrize(
    ("query", "said"),
    [
        ("gpus=16&nodes=3", "16 GPUs do not split evenly across 3 nodes."),
        ("gpus=16&gpus_per_node=3", "16 GPUs are not a whole number of nodes of 3."),
        ("gpus=16&nodes=2&gpus_per_node=4", "2 nodes of 4 GPUs are 8 GPUs, not 16."),
    ],
)
def test_a_cluster_that_contradicts_itself_is_a_422_saying_why(client: TestClient, query: str, said: str) -> None:
    response = client.get(f"/api/memory?{query}")
    assert response.status_code == 422
    assert said in response.text
    page = client.get(f"/?{query}")
    assert page.status_code == 422
    assert said in dom(page.text).get_text(" ")


@pytest.mark.parametrize(
    ("query", "said", "field"),
    [
        ("gpus=16&tp=16", "tp=16 does not fit in a node of 8 GPUs", "tp"),
        ("gpus=8&tp=2&cp=3", "tp × pp × cp = 2 × 1 × 3 = 6 does not divide gpus=8", "cp"),
        ("gpus=8&sp=1", "sp=1 splits the activations across the tensor-parallel group", "sp"),
        ("gpus=8&vpp=2", "vpp (virtual stages per card) interleaves a pipeline", "vpp"),
        # Llama 3 8B has 32 blocks: three stages of two interleaved chunks cannot each keep a whole number.
        ("model=llama-3-8b&gpus=24&pp=3&vpp=2", "pp × vpp = 3 × 2 does not divide the model's 32 blocks", "vpp"),
        # 64 stages for 32 blocks: one would keep none.
        ("model=llama-3-8b&gpus=64&pp=64", "pp=64 stages for the model's 32 blocks", "pp"),
        # Refused once, at the first field that makes it wrong, however many follow.
        ("gpus=16&tp=16&pp=2&vpp=2&cp=1", "tp=16 does not fit in a node of 8 GPUs", "tp"),
    ],
)
def test_a_cut_that_cannot_be_drawn_is_a_422_naming_its_numbers(
    client: TestClient, query: str, said: str, field: str
) -> None:
    response = client.get(f"/api/memory?{query}")
    assert response.status_code == 422
    assert said in response.json()["message"]
    assert [e["loc"][-1] for e in response.json()["detail"]] == [field]
    page = client.get(f"/?{query}")
    assert page.status_code == 422
    assert said in dom(page.text).get_text(" ")


@pytest.mark.parametrize(
    ("query", "said"),
    [
        # An on/off input's values, worded as the form words them (app/web/fields.py Kind.SWITCH).
        ("pin_memory=2", "Enter 1 or 0: 1 is “Pinned (page-locked)”, 0 “Pageable”."),
        ("zero_init=x", "Enter 1 or 0: 1 is “zero.Init: in slices”, 0 “Whole, then split”."),
        ("qwz=maybe", "Enter 1 or 0: 1 is “On”, 0 “Off”."),
        ("qgz=7", "Enter 1 or 0: 1 is “On”, 0 “Off”."),
    ],
)
def test_an_on_off_input_not_understood_says_its_two_values(client: TestClient, query: str, said: str) -> None:
    page = client.get(f"/?stage=zero3&{query}")
    assert page.status_code == 422
    assert said in dom(page.text).get_text(" ")
    assert "This value is not understood." not in page.text


def test_offload_nvme_is_nvme_whatever_device_the_form_sends(client: TestClient) -> None:
    # The form sends its device select (cpu, by default) beside offload=nvme: the device is for optimizer and
    # optimizer+params, and offload=nvme is NVMe (docs/url-options.md).
    query = "model=llama-3-8b&stage=zero3&offload=nvme&offload_device=cpu"
    answer = client.get(f"/api/memory?{query}")
    assert answer.status_code == 200
    assert (answer.json()["inputs"]["offload"], answer.json()["inputs"]["offload_device"]) == ("nvme", "nvme")
    page = client.get(f"/?{query}")
    assert page.status_code == 200
    assert one(dom(page.text), "#f-offload_device option[selected]")["value"] == "nvme"


def test_offload_device_set_aside_under_nvme_is_not_said_to_be_the_default(client: TestClient) -> None:
    # NVMe is what offload=nvme implies, not offload_device's default (the CPU).
    page = dom(client.get("/?model=llama-3-8b&stage=zero3&offload=nvme&offload_device=gpu").text).get_text(" ")
    assert "Drawn without offload_device=gpu: offload to NVMe, as the offload chosen implies" in page
    assert "NVMe, the default" not in page
