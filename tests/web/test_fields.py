"""app/web/fields.py: every run field walked through every place derived from its one declaration.

The query model, the form (and its fold), the set-aside notice, the command line, the API's echo,
the OpenAPI schema and the docs' table. Deleting a field's line, or a field's use in the form's
template, fails here.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import re
import subprocess
import sys
from fractions import Fraction
from pathlib import Path
from urllib.parse import quote

import pytest
from bs4 import Tag
from fastapi.testclient import TestClient

from app.cli import main as cli_main
from app.domain.presets import stored_text
from app.domain.recipes import RecipeName
from app.domain.scenario import Inputs, resolve
from app.domain.stages import Stage
from app.web.fields import BY_NAME, FIELDS, FOLDS, Group, Kind, RunField, doc_table, given, unfolded
from app.web.inputs import RunQuery
from app.web.schemas import ResolvedInputs
from tests.conftest import dom, one, text

ROOT = Path(__file__).resolve().parents[2]
NAMES = [f.name for f in FIELDS]
# Every field of the form named (a custom model and recipe name their count and bands), every fold open.
EVERYTHING = "/?model=custom&params=7B&recipe=custom&batch=2&offload=optimizer"
# The form's own hidden fields, which are not the run's.
NOT_RUN = {"stage", "phase"}


def _bad(field: RunField) -> str:
    """A value the field refuses, whatever its kind."""
    return "-5" if field.kind is Kind.WHOLE else "zzz"


@pytest.fixture(scope="module")
def form(client: TestClient) -> Tag:
    return one(dom(client.get(EVERYTHING).text), "#run-form")


def parameter_schema(parameter: dict[str, object]) -> dict[str, object]:
    """The parameter's schema for a value given: the alternative that is not null (nor the empty string)."""
    found = parameter["schema"]
    assert isinstance(found, dict)
    for alternative in found.get("anyOf", [found]):
        if alternative.get("type") != "null" and alternative.get("maxLength") != 0:
            return dict(alternative)
    raise AssertionError(parameter)


@pytest.fixture(scope="module")
def schema(client: TestClient) -> dict[str, dict[str, object]]:
    parameters = client.get("/openapi.json").json()["paths"]["/api/memory"]["get"]["parameters"]
    return {p["name"]: p for p in parameters}


def test_the_declaration_names_each_field_once_and_the_query_model_takes_exactly_them() -> None:
    assert len(set(NAMES)) == len(NAMES)
    assert list(RunQuery.model_fields) == NAMES


def test_every_named_field_of_the_form_is_declared(form: Tag) -> None:
    named = {str(e["name"]) for e in form.select("[name]")} - NOT_RUN
    assert named == {f.name for f in FIELDS if f.group is not Group.ADDRESS}


@pytest.mark.parametrize("field", FIELDS, ids=NAMES)
def test_a_field_sits_in_its_fold_with_its_id(form: Tag, field: RunField) -> None:
    found = form.select(f'[name="{field.name}"]')
    if field.group is Group.ADDRESS:
        assert found == []
        return
    assert [e.get("id") for e in found] == [field.field_id]
    folds = [d.get("id") or "more" for d in found[0].find_parents("details")]
    assert (
        folds
        == {
            Group.SHOWN: [],
            Group.MORE: ["more"],
            Group.HOST: ["more-host"],
            Group.WIRE: ["more-wire"],
            Group.CUT: ["more-cut"],
        }[field.group]
    )


@pytest.mark.parametrize(
    ("query", "open_folds"),
    [
        ("", []),
        ("recipe=custom", ["more"]),
        ("lora_targets=qv", ["more"]),  # a value given opens its fold, whichever field it is
        ("zero_init=0", ["more-host"]),
        ("nvme_space=8TB&batch=2", ["more", "more-host"]),
        ("batch=-1", ["more"]),  # a value set aside opens its fold too
        ("pin_memory=maybe", ["more-host"]),
        ("gpus=0", []),
        ("mfu=50", ["more-wire"]),
        ("shard=3", ["more-wire"]),
        ("tp=2", ["more-cut"]),
    ],
)
def test_a_fold_is_open_when_it_holds_a_value_given_or_set_aside(
    client: TestClient, query: str, open_folds: list[str]
) -> None:
    tree = dom(client.get(f"/?{query}").text)
    assert [d.get("id") or "more" for d in tree.select("#run-form details[open]")] == open_folds


def test_every_fold_has_a_field_and_each_given_value_opens_its_own() -> None:
    for fold in FOLDS:
        assert any(f.group is fold for f in FIELDS)
    assert given(Inputs()) == frozenset()
    assert unfolded(["lora_targets", "gpus", "cuda_context"], custom_recipe=False) == {Group.MORE}
    assert unfolded([], custom_recipe=False, problems=["nodes"]) == {Group.HOST}


@pytest.mark.parametrize("field", FIELDS, ids=NAMES)
def test_a_bad_value_is_set_aside_in_the_fields_own_words(client: TestClient, field: RunField) -> None:
    bad = _bad(field)
    custom = "" if field.name == "recipe" else "&recipe=custom"  # a custom recipe names its bands
    response = client.get(f"/?{field.name}={bad}{custom}")
    assert response.status_code == 422
    tree = dom(response.text)
    said = text(tree, ".set-aside-fields li")
    label = "Bytes per weight, " if field.band is not None else f"{field.label} :"
    assert said.startswith(label), said
    drawn = text(tree, "#drawn-instead")
    assert drawn.startswith(f"Drawn without {field.name}={bad}: ")
    # Never a bare fallback: the value drawn is the field's own wording, or what stands in for none.
    assert drawn.endswith(", the default.") or drawn.endswith(f"{field.none}.")


# Whether each numeric field takes 0, by hand. 0 where it means "none of it": DeepSpeed's three buckets
# (its config's Field(..., ge=0)), an overhead left out (cuda_context, nccl_per_group, process_groups,
# fragmentation), a node with no NVMe, no activations (batch), a band of 0 bytes, nothing trained. Not
# where 0 is no run at all: no weights, no cards, a card or a host of no memory, an empty layer.
TAKES_ZERO = {
    "params": False,
    "gpus": False,
    "weights_bytes": False,
    "gradients_bytes": True,
    "master_bytes": True,
    "moments_bytes": True,
    "largest_layer": False,
    "capacity": False,
    "batch": True,
    "seq": False,
    "cuda_context": True,
    "nccl_per_group": True,
    "process_groups": True,
    "reduce_bucket_size": True,
    "prefetch_bucket_size": True,
    "max_live_parameters": True,
    "fragmentation": True,
    "trainable": True,
    "lora_rank": False,
    "nodes": False,
    "gpus_per_node": False,
    "host_memory": False,
    "nvme_space": True,
    "shard": False,
    "hpz": False,
    "tp": False,
    "pp": False,
    "vpp": False,
    "microbatches": False,
    "cp": False,
    "ep": False,
    "etp": True,
    "nvlink": False,
    "network": False,
    "tflops": False,
    "mfu": False,
}


def test_the_table_of_zeros_names_every_numeric_field() -> None:
    numeric = {f.name for f in FIELDS if f.kind in (Kind.WHOLE, Kind.COUNT, Kind.SIZE, Kind.TRAINABLE)}
    assert set(TAKES_ZERO) == numeric


@pytest.mark.parametrize(("name", "zero"), TAKES_ZERO.items())
def test_zero_is_taken_where_it_means_none(
    client: TestClient, schema: dict[str, dict[str, object]], name: str, zero: bool
) -> None:
    answer = client.get(f"/api/memory?{name}=0&recipe=custom")
    assert answer.status_code == (200 if zero else 422), answer.text
    page = dom(client.get(f"/?{name}=0&recipe=custom").text)
    assert bool(page.select(".set-aside-fields li")) is not zero
    # The schema says so: a size's or a count's grammar admits "0", a whole number's least is 0.
    field = BY_NAME[name]
    if field.pattern is not None:
        assert bool(re.fullmatch(str(parameter_schema(schema[name])["pattern"]), "0")) is zero
    else:
        assert (parameter_schema(schema[name])["minimum"] == 0) is zero


@pytest.mark.parametrize("name", [n for n, zero in TAKES_ZERO.items() if zero and BY_NAME[n].kind is Kind.SIZE])
@pytest.mark.parametrize("unit", ["GB", "GiB", "TB", "TiB"])
def test_a_size_of_zero_may_name_its_unit(client: TestClient, name: str, unit: str) -> None:
    assert client.get(f"/api/memory?{name}=0{unit}").status_code == 200


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("reduce_bucket_size", "“reduce_bucket_size” should be 0 or a number of elements under 10,000T"),
        ("cuda_context", "“cuda_context” should be 0 or a memory size, such as"),
        ("nvme_space", "“nvme_space” should be 0 or a memory size, such as 30TB"),
        ("capacity", "“capacity” should be a memory size, such as 80GB"),
    ],
)
def test_a_refusal_says_whether_zero_would_do(client: TestClient, name: str, said: str) -> None:
    answer = client.get(f"/api/memory?{name}=-1")
    assert answer.status_code == 422
    assert said in answer.json()["message"]


# The form's whole numbers, with the least and the most the declaration takes.
NUMBER_INPUTS = [f for f in FIELDS if f.kind is Kind.WHOLE and f.group is not Group.ADDRESS]


@pytest.mark.parametrize("field", NUMBER_INPUTS, ids=[f.name for f in NUMBER_INPUTS])
def test_the_forms_limits_are_the_declarations(form: Tag, field: RunField) -> None:
    element = one(form, f"#{field.field_id}")
    assert element["type"] == "number"
    assert (element.get("min"), element.get("max")) == (str(field.low), str(field.high))
    assert (int(str(element["min"])) == 0) is TAKES_ZERO[field.name]


@pytest.mark.parametrize("field", FIELDS, ids=NAMES)
def test_the_command_line_takes_every_field(field: RunField) -> None:
    said = io.StringIO()
    with contextlib.redirect_stderr(said), pytest.raises(SystemExit) as exited:
        cli_main(["table", field.option, _bad(field)])
    assert exited.value.code == 2
    assert field.name in said.getvalue() or field.option in said.getvalue()


def test_the_command_line_reads_a_field_as_the_page_does() -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(SystemExit) as exited:
        cli_main(["table", "--model", "llama-3-8b", "--zero-init", "0", "--fragmentation", "5", "--units", "GB"])
    assert exited.value.code == 0
    assert "GB" in printed.getvalue()


@pytest.mark.parametrize("field", FIELDS, ids=NAMES)
def test_the_api_echoes_every_field_but_the_overheads_settings(client: TestClient, field: RunField) -> None:
    # Each value given, as the API leaves out what is none.
    config = quote(stored_text("mistral-7b-v0.1.json"))
    echoed = client.get(f"/api/memory?capacity=80GB&host_memory=2TB&nvme_space=8TB&config={config}").json()["inputs"]
    if field.echo is None:
        # The overheads' settings are said item by item in each stage's overheads, not in the inputs.
        assert field.group is Group.ADDRESS
        assert field.into.startswith("overheads.")
        return
    assert field.echo in ResolvedInputs.model_fields
    assert field.echo in echoed


@pytest.mark.parametrize("field", FIELDS, ids=NAMES)
def test_the_schema_documents_every_field_and_an_empty_value_as_the_default(
    client: TestClient, schema: dict[str, dict[str, object]], field: RunField
) -> None:
    parameter = schema[field.name]
    assert str(parameter["description"]).startswith(field.help)
    accepts_empty = field.blank or field.pattern is not None
    assert str(parameter["description"]).endswith("Empty: the default.") == accepts_empty
    if field.blank:
        alternatives = parameter["schema"]["anyOf"]  # type: ignore[index]
        assert {"type": "string", "maxLength": 0} in alternatives
    if accepts_empty:
        assert client.get(f"/api/memory?{field.name}=").status_code == 200


@pytest.mark.parametrize("field", FIELDS, ids=NAMES)
def test_the_docs_table_has_a_row_per_field(field: RunField) -> None:
    docs = (ROOT / "docs/url-options.md").read_text()
    rows = [line for line in docs.splitlines() if line.startswith(f"| `{field.name}` |")]
    assert len(rows) == 1
    assert field.doc in rows[0]


def test_the_docs_table_is_the_generated_one() -> None:
    checked = subprocess.run(
        [sys.executable, "-m", "cogapp", "-I", ".", "--check", "docs/url-options.md"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert doc_table() in (ROOT / "docs/url-options.md").read_text()


def test_a_field_is_named_in_the_code_only_by_its_declaration() -> None:
    # The form's macro and the cross-field rules name fields, checked above; no other list of them.
    web = ROOT / "app" / "web"
    for path in (web / "set_aside_view.py", web / "page_view.py"):
        source = path.read_text()
        assert not re.search(r'"(gpus|batch|seq|offload|nodes|capacity|lora_rank)"', source), path
    assert BY_NAME["largest_layer"].field_id == "f-layer"
    assert RecipeName.CUSTOM.value == "custom"


# A declaration is complete, or a quick test says which part is missing: the words every place shows, a
# fold, a way into the domain (an attribute of `Inputs`, or a rule of its own), and the choices' words.
INPUTS = {f.name for f in dataclasses.fields(Inputs)}


@pytest.mark.parametrize("field", FIELDS, ids=NAMES)
def test_a_declaration_says_everything_each_place_shows(field: RunField) -> None:
    assert field.label.strip()
    assert field.help.strip()
    assert field.help.endswith(".")  # the schema's description and the option's help are sentences
    assert field.doc.strip()
    assert field.doc_default.strip()
    assert field.group in Group
    assert field.kind in Kind
    if field.kind in (Kind.CHOICE,):
        assert field.choices is not None
    if field.kind is Kind.WHOLE:
        assert field.low is not None
        assert field.high is not None


@pytest.mark.parametrize("field", FIELDS, ids=NAMES)
def test_a_field_reaches_the_domain_by_an_attribute_of_inputs_or_a_rule_of_its_own(field: RunField) -> None:
    if field.rule is not None:
        assert field.target not in INPUTS  # one way in, not two
        assert field.echoed  # and the API says the value it used
        return
    where = field.target.partition(".")[0]
    assert where in INPUTS


@pytest.mark.parametrize("field", [f for f in FIELDS if f.rule is not None], ids=lambda f: f.name)
def test_a_rule_changes_the_card_for_each_value_but_the_default(field: RunField) -> None:
    plain = resolve(Inputs()).report
    for value in field.values or ("1", "0"):  # a choice's values, or a switch's
        query = RunQuery.model_validate({field.name: value})
        ruled = resolve(query.inputs()).report
        changed = [ruled[stage].terms != plain[stage].terms for stage in Stage]
        assert any(changed) is (query.value(field.name) != field.default), value


@pytest.mark.parametrize("field", [f for f in FIELDS if f.labels], ids=lambda f: f.name)
def test_a_choices_words_are_for_exactly_its_values(field: RunField) -> None:
    worded = [str(value) for value, _ in field.labels]
    assert worded == (["1", "0"] if field.kind is Kind.SWITCH else list(field.values))


def test_a_field_and_its_options_in_the_form_are_the_declarations(form: Tag) -> None:
    for field in FIELDS:
        if field.group is Group.ADDRESS:
            continue
        element = one(form, f"#{field.field_id}")
        # Labelled: by its id, or (a band's) by the label around it.
        assert form.select_one(f'label[for="{field.field_id}"]') or element.find_parent("label")
        if field.kind in (Kind.CHOICE, Kind.SWITCH) and field.name not in ("model", "recipe"):
            values = [str(o["value"]) for o in element.select("option")]
            assert values == (["1", "0"] if field.kind is Kind.SWITCH else list(field.values)), field.name
            words = dict(field.labels)
            if words:
                assert [o.get_text() for o in element.select("option")] == [words[v] for v in values]


# grad_accum=fp32, by hand: 8B weights on 8 cards with mixed-precision Adam keep 2 B of weights, 4 B of fp32
# gradients, 4 B of master copy and 8 B of moments a weight (18 B, Megatron-LM's count), each stage splitting
# what it splits: ZeRO-1 the optimizer's 12 B, ZeRO-2 the gradients' 4 B too, ZeRO-3 all 18 B.
FP32_GRADIENTS = "model=custom&params=8B&gpus=8&grad_accum=fp32&units=GB"
FP32_BY_HAND = {
    Stage.DP: (18, 18 * 8 * 10**9),
    Stage.ZERO1: (Fraction(2 + 4) + Fraction(4 + 8, 8), (2 + 4) * 8 * 10**9 + (4 + 8) * 10**9),
    Stage.ZERO2: (2 + Fraction(4 + 4 + 8, 8), 2 * 8 * 10**9 + (4 + 4 + 8) * 10**9),
    Stage.ZERO3: (Fraction(18, 8), 18 * 10**9),
}


def test_gradients_kept_in_fp32_in_the_form_and_the_page(client: TestClient) -> None:
    tree = dom(client.get(f"/?{FP32_GRADIENTS}&stage=zero2").text)
    assert one(tree, "#f-grad_accum option[selected]")["value"] == "fp32"
    fold = one(tree, "#f-grad_accum").find_parent("details")
    assert fold is not None
    assert fold.has_attr("open")
    assert [c.get_text(strip=True) for c in tree.select("td.bpw")] == [
        f"{float(bpw):.2f}" for bpw, _ in FP32_BY_HAND.values()
    ]
    assert [c.get_text(strip=True) for c in tree.select("td.per-gpu")] == [
        f"{nbytes / 10**9:.1f} GB" for _, nbytes in FP32_BY_HAND.values()
    ]
    # The gradients band itself is fp32, 4 B, wherever it is drawn or named: the grid's cells (4 B tall) and their
    # tooltips, the key and its ratio; no stretch of another kind beside it.
    cells = tree.select("#grid .cell.band-gradients")
    assert cells
    assert {c["class"][-1] for c in cells} == {"nb-4"}
    assert all("Gradients (fp32, 4 B)" in c["aria-label"] for c in cells)
    legend = text(tree, ".legend")
    assert ("Gradients · fp32, 4 B" in legend, "(2 : 4 : 4 : 8)" in legend) == (True, True)
    assert "bf16, 2 B): stored" not in str(tree.select("#grid .cell.band-gradients"))
    assert not tree.select("#grid .bar rect.main-gradients")


def test_gradients_kept_in_fp32_in_the_api(client: TestClient) -> None:
    answer = client.get(f"/api/memory?{FP32_GRADIENTS}").json()
    assert answer["inputs"]["grad_accum"] == "fp32"
    (gradients,) = (b for b in answer["inputs"]["bands"] if b["band"] == "gradients")
    assert (gradients["precision"], gradients["bytes"]) == ("fp32", 4)
    assert client.get("/api/memory").json()["inputs"]["grad_accum"] == "bf16"
    assert {Stage(s["stage"]): (s["bytes_per_weight"], s["per_gpu_bytes"]) for s in answer["stages"]} == {
        stage: (float(bpw), nbytes) for stage, (bpw, nbytes) in FP32_BY_HAND.items()
    }


def test_gradients_kept_in_fp32_on_the_command_line() -> None:
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), pytest.raises(SystemExit) as exited:
        cli_main(["table", "--params", "8B", "--gpus", "8", "--grad-accum", "fp32", "--units", "GB"])
    assert exited.value.code == 0
    # A row a stage: its bytes a weight, then its bytes a card.
    rows = [
        re.sub(r" +", " ", line)
        for line in printed.getvalue().splitlines()
        if re.match(r"^(Data parallelism|ZeRO-\d) +\d", line)
    ]
    assert len(rows) == len(FP32_BY_HAND)
    for row, (bpw, nbytes) in zip(rows, FP32_BY_HAND.values(), strict=True):
        assert f" {float(bpw):.2f} {nbytes / 10**9:.1f} GB " in row


def test_gradients_kept_in_fp32_in_the_docs() -> None:
    docs = (ROOT / "docs/url-options.md").read_text()
    assert "| `grad_accum` |" in docs
    assert "18 B a weight" in BY_NAME["grad_accum"].doc
