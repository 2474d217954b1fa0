"""app/web/form_view.py: the run form, showing the run as resolved."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient

from app.domain.scenario import resolve
from app.domain.stages import Stage
from app.web.fields import BY_NAME
from app.web.form_view import Bands, Control, FieldProblem, FormView, form_view
from app.web.inputs import RunQuery
from tests.conftest import dom, one
from tests.web.helpers import run_page, table_cells


def test_form_shows_the_run(client: TestClient) -> None:
    tree = run_page(client, "model=llama-3-70b&gpus=64&capacity=80GiB&units=GB&stage=zero2")
    form = one(tree, "form#run-form")
    assert form["hx-get"] == "/"
    assert form["hx-trigger"] == "input changed delay:400ms, submit"
    assert one(form, 'input[name="stage"]')["value"] == "zero2"
    assert one(form, "#f-model option[selected]")["value"] == "llama-3-70b"
    assert one(form, "#f-params")["value"] == "70553706496"
    assert one(form, "#f-params").has_attr("readonly")
    assert one(form, "#f-gpus")["value"] == "64"
    assert one(form, "#f-capacity")["value"] == "80GiB"
    assert one(form, "#f-units option[selected]")["value"] == "GB"
    assert [o["value"] for o in form.select("#f-cards option")] == [
        "24GiB", "32GiB", "40GiB", "80GiB", "80GiB", "141GiB", "192GiB"
    ]  # fmt: skip
    assert one(form, 'button[type="submit"]') is not None


def test_custom_recipe(client: TestClient) -> None:
    query = "recipe=custom&weights_bytes=2&gradients_bytes=2&master_bytes=0&moments_bytes=1"
    tree = run_page(client, query)
    assert table_cells(tree, "td.bpw")[0] == "5.00"
    assert [i.has_attr("readonly") for i in tree.select(".bands-field input")] == [False] * 4


def test_a_value_the_form_shows_read_only_is_not_sent_back_as_if_typed(client: TestClient) -> None:
    # Choosing another model sends the form: a read-only count (the last model's) must not come back
    # as "the count entered", nor a preset recipe's bytes as bytes entered.
    form = one(run_page(client, "model=llama-3-8b"), "#run-form")
    assert one(form, "#f-params").has_attr("readonly")
    assert not one(form, "#f-params").has_attr("name")
    assert [i.get("name") for i in form.select(".bands-field input")] == [None] * 4
    # What a browser sends when the model is changed: every named field as it stands, the new model.
    sent = {str(i["name"]): str(i.get("value", "")) for i in form.select("input[name]")}
    for select in form.select("select[name]"):
        chosen = select.select_one("option[selected]") or select.select_one("option")
        sent[str(select["name"])] = str(chosen["value"]) if chosen else ""
    sent["model"] = "llama-3.1-405b"
    tree = run_page(client, urlencode(sent))
    assert one(tree, "#grid")
    assert not tree.select(".notes")
    # Typed, they are sent: a custom model's count, a custom recipe's bytes.
    form = one(run_page(client, "model=custom&params=5B&recipe=custom"), "#run-form")
    assert one(form, "#f-params")["name"] == "params"
    assert [i.get("name") for i in form.select(".bands-field input")] == [
        "weights_bytes", "gradients_bytes", "master_bytes", "moments_bytes"
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("query", "open_", "chosen"),
    [
        ("", False, {"offload": "none", "offload_device": "cpu", "accounting": "paper", "pin_memory": "1"}),
        (
            "offload=nvme&accounting=fsdp2&pin_memory=0",
            True,
            {"offload": "nvme", "offload_device": "nvme", "accounting": "fsdp2", "pin_memory": "0"},
        ),
    ],
)
def test_the_offload_fields_show_the_run(client: TestClient, query: str, open_: bool, chosen: dict[str, str]) -> None:
    tree = run_page(client, query)
    details = one(tree, "#run-form #more-host")
    assert details.has_attr("open") is open_
    for name, value in chosen.items():
        assert one(details, f'select[name="{name}"] option[selected]')["value"] == value
    assert one(details, 'input[name="gpus_per_node"]')["placeholder"] == "8"


def test_a_fields_control_is_its_declaration_built_once_for_each_value() -> None:
    inputs = RunQuery.model_validate({"gpus": "16", "capacity": "80GB"}).inputs()
    scenario = resolve(inputs)
    form = form_view(scenario, Stage.ZERO2, inputs)
    controls = {c.field: c for c in _controls(form)}
    gpus = controls["gpus"]
    assert gpus.attributes == (
        ("id", "f-gpus"), ("name", "gpus"), ("type", "number"), ("min", "1"), ("max", str(BY_NAME["gpus"].high)),
        ("step", "1"), ("value", "16"), ("required", ""),
    )  # fmt: skip
    assert controls["capacity"].attributes[2:4] == (("autocomplete", "off"), ("value", "80GB"))
    # The same value, the same control: its markup is rendered once (templating.form_part).
    again = form_view(resolve(inputs), Stage.ZERO2, inputs)
    assert all(a is b for a, b in zip(_controls(form), _controls(again), strict=True))
    # Set aside, a field shows what was typed, and says where its error is.
    said = form.with_problems((FieldProblem("gpus", "0", "Enter a whole number."),))
    marked = {c.field: c for c in _controls(said)}["gpus"]
    assert ("value", "0") in marked.attributes
    assert marked.attributes[-2:] == (("aria-invalid", "true"), ("aria-describedby", "f-gpus-error"))


def _controls(form: FormView) -> list[Control]:
    parts = [*form.shown, *(p for fold in form.folds for p in fold.parts)]
    return [c for p in parts for c in (p.controls if isinstance(p, Bands) else (p,))]


def _selects(tree: object, field: str) -> list[str]:
    return [str(o["value"]) for o in one(tree, f"#f-{field}").select("option")]  # type: ignore[arg-type]


@pytest.mark.parametrize("offload", ["none", "optimizer", "optimizer+params", "nvme"])
def test_every_offload_and_device_the_form_offers_is_a_run(client: TestClient, offload: str) -> None:
    # The form sends its offload and its device together: no pair of what it offers may be refused (offload=nvme
    # beside the device select's cpu was a 422). Under offload=nvme the device is NVMe, whatever is sent.
    tree = run_page(client, f"model=llama-3-8b&stage=zero3&offload={offload}")
    for chosen in _selects(tree, "offload"):
        for device in _selects(tree, "offload_device"):
            query = urlencode({"model": "llama-3-8b", "stage": "zero3", "offload": chosen, "offload_device": device})
            page = client.get(f"/?{query}")
            assert page.status_code == 200, query
            if chosen == "nvme":
                assert one(dom(page.text), "#f-offload_device option[selected]")["value"] == "nvme"


@pytest.mark.parametrize(
    ("model", "placeholder", "note"),
    [
        ("llama-3-8b", "8,192", "default 8,192: Llama 3's training length"),
        ("llama-3-70b", "8,192", "default 8,192: Llama 3's training length"),
        # Llama 3.1 was pre-trained at 8,192 tokens; its 131,072-token context came in a last, short stage.
        ("llama-3.1-405b", "8,192", "default 8,192: Llama 3.1's training length (its context: 131,072)"),
        ("gpt-3-175b", "2,048", "default 2,048: GPT-3's training length"),
        ("seed-30b", "4,096", "default 4,096"),
    ],
)
def test_the_sequence_field_says_its_default_and_why(
    client: TestClient, model: str, placeholder: str, note: str
) -> None:
    tree = run_page(client, f"model={model}")
    field = one(tree, "#f-seq")
    assert (field["placeholder"], field["aria-describedby"]) == (placeholder, "f-seq-note")
    assert one(tree, "#f-seq-note").get_text() == note
