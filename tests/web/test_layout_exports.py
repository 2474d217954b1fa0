"""The layout's exports through the app: the page's "Copy as" links, /api/config's answers, `zero-bands config`."""

from __future__ import annotations

import json
import math
import tomllib
from urllib.parse import parse_qsl, urlsplit

import pytest
from fastapi.testclient import TestClient

from app import cli
from app.domain.layout_configs import read_megatron
from tests.conftest import dom, one, text

CUT = "model=llama-3-8b&gpus=16&nodes=2&tp=2&sp=1&pp=2&microbatches=8&batch=1&seq=4096"


@pytest.mark.parametrize(
    ("selector", "kind", "label"),
    [
        ("#copy-megatron", "megatron", "Copy as Megatron-LM arguments"),
        ("#copy-torchtitan", "torchtitan", "Copy as torchtitan"),
        ("#copy-mesh", "mesh", "Copy as FSDP2 + DTensor mesh"),
    ],
)
def test_the_page_links_to_its_layout_as_each_framework_writes_it(
    client: TestClient, selector: str, kind: str, label: str
) -> None:
    tree = dom(client.get(f"/?stage=zero3&{CUT}").text)
    link = one(tree, selector)
    assert text(tree, selector) == label
    assert link.has_attr("data-copy-config")
    href = str(link["href"])
    assert urlsplit(href).path == "/api/config"
    assert dict(parse_qsl(urlsplit(href).query))["format"] == kind
    answer = client.get(href)
    assert answer.status_code == 200
    assert answer.headers["content-type"] == "text/plain; charset=utf-8"


def test_a_cut_models_page_says_why_deepspeed_and_fsdp2_cannot_write_it(client: TestClient) -> None:
    tree = dom(client.get(f"/?stage=zero3&{CUT}").text)
    assert not tree.select("#copy-deepspeed")
    assert not tree.select("#copy-fsdp2")
    # One sentence for both, once.
    assert text(tree, "#deepspeed-refused") == (
        "The model is cut across cards (tp=2, pp=2, cp=1), which DeepSpeed's JSON config and the FSDP2 snippet "
        "cannot say (ZeRO over whole copies of the model alone). Copy the layout as Megatron-LM arguments, "
        "torchtitan or an FSDP2 + DTensor mesh."
    )
    assert not tree.select("#fsdp2-refused")


def test_zero1_has_megatrons_arguments_and_says_why_torchtitan_and_the_mesh_have_none(client: TestClient) -> None:
    tree = dom(client.get(f"/?stage=zero1&{CUT}").text)
    assert text(tree, "#copy-megatron") == "Copy as Megatron-LM arguments"
    assert text(tree, "#copy-torchtitan-refused") == "torchtitan has no ZeRO-1 (choose ZeRO-2)"
    assert text(tree, "#copy-mesh-refused") == "FSDP2 has no ZeRO-1 (choose ZeRO-2)"


def test_an_uncut_runs_page_keeps_deepspeed_and_fsdp2(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero3&gpus=16").text)
    assert text(tree, "#copy-deepspeed") == "Copy as DeepSpeed config"
    assert text(tree, "#copy-fsdp2") == "Copy as FSDP2"
    assert text(tree, "#copy-mesh") == "Copy as FSDP2 + DTensor mesh"


def test_the_apis_megatron_arguments_read_back_as_the_layout(client: TestClient) -> None:
    answer = client.get(f"/api/config?format=megatron&stage=zero1&{CUT}")
    read = read_megatron(answer.text)
    assert (read.cut.tp, read.cut.sp, read.cut.pp, read.cut.cp) == (2, True, 2, 1)
    assert read.namespace.global_batch_size == 32  # 1 × 8 micro-batches × dp 4
    assert read.namespace.use_distributed_optimizer


def test_the_apis_torchtitan_toml_names_the_degrees(client: TestClient) -> None:
    config = tomllib.loads(client.get(f"/api/config?format=torchtitan&stage=zero3&{CUT}").text)
    par = config["parallelism"]
    assert (par["tensor_parallel_degree"], par["pipeline_parallel_degree"], par["data_parallel_shard_degree"]) == (
        2,
        2,
        4,
    )


@pytest.mark.parametrize(
    ("query", "parameter"),
    [
        (f"format=torchtitan&stage=zero1&{CUT}", "stage"),
        (f"format=mesh&stage=zero1&{CUT}", "stage"),
        (f"format=deepspeed&stage=zero3&{CUT}", "tp"),
        (f"format=fsdp2&stage=zero3&{CUT}", "tp"),
    ],
)
def test_an_export_a_framework_cannot_write_is_a_422_naming_the_parameter(
    client: TestClient, query: str, parameter: str
) -> None:
    answer = client.get(f"/api/config?{query}")
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["query", parameter]


def test_the_config_command_prints_the_mesh(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["config", "mesh", "--stage", "zero3", "--gpus", "16", "--nodes", "2", "--tp", "2", "--pp", "2"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    line = next(line for line in out.splitlines() if line.startswith("mesh = init_device_mesh"))
    shape = line.split('"cuda", ')[1].split(", mesh_dim_names")[0]
    assert shape == "(2, 1, 4, 1, 2)"
    assert math.prod(int(n) for n in shape.strip("()").split(", ")) == 16


def test_the_config_command_prints_deepspeeds_json(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["config", "deepspeed", "--stage", "zero2"])
    assert exit_info.value.code == 0
    assert json.loads(capsys.readouterr().out)["zero_optimization"]["stage"] == 2


def test_the_config_command_says_why_there_is_none(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["config", "torchtitan", "--stage", "zero1"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("zero-bands config: torchtitan has no ZeRO-1")


MOE = "model=mixtral-8x7b&gpus=16&nodes=2&batch=1&seq=4096&ep=8&etp=1"


@pytest.mark.parametrize("form", ["megatron", "torchtitan", "mesh"])
def test_each_layout_export_names_the_model_and_its_experts(client: TestClient, form: str) -> None:
    answer = client.get(f"/api/config?format={form}&stage=zero3&{MOE}")
    assert answer.status_code == 200
    # Mistral's published figures for Mixtral 8x7B: 46.7B weights, 12.9B of them a token's.
    assert answer.text.splitlines()[0] == (
        "# The model: Mixtral 8x7B, a mixture of experts: 8 routed experts a block in 32 of its 32 blocks, 2 a "
        "token (46,702,792,704 weights, 12,879,925,248 of them a token's)."
    )


@pytest.mark.parametrize("form", ["megatron", "torchtitan", "mesh", "fsdp2"])
def test_a_dense_models_text_exports_name_it(client: TestClient, form: str) -> None:
    answer = client.get(f"/api/config?format={form}&stage=zero3&model=llama-3-8b")
    assert answer.text.splitlines()[0] == "# The model: Llama 3 8B."


def test_deepspeeds_json_names_no_model(client: TestClient) -> None:
    # JSON has no comment, and a key DeepSpeed does not know it would refuse: its keys as before.
    config = client.get("/api/config?format=deepspeed&stage=zero3&model=llama-3-8b").json()
    assert sorted(config) == ["bf16", "optimizer", "train_micro_batch_size_per_gpu", "zero_optimization"]


@pytest.mark.parametrize("form", ["deepspeed", "fsdp2"])
def test_experts_across_cards_are_a_422_naming_ep_in_deepspeed_and_fsdp2(client: TestClient, form: str) -> None:
    answer = client.get(f"/api/config?format={form}&stage=zero3&{MOE}")
    assert answer.status_code == 422
    assert answer.json()["detail"][0]["loc"] == ["query", "ep"]
    assert answer.json()["message"].startswith("The model is cut across cards (tp=1, pp=1, cp=1, ep=8)")


def test_a_mixture_of_experts_page_says_why_deepspeed_cannot_write_ep(client: TestClient) -> None:
    tree = dom(client.get(f"/?stage=zero3&{MOE}").text)
    assert not tree.select("#copy-deepspeed")
    assert text(tree, "#deepspeed-refused").startswith("The model is cut across cards (tp=1, pp=1, cp=1, ep=8)")
    assert text(tree, "#copy-megatron") == "Copy as Megatron-LM arguments"


def test_the_config_command_writes_the_experts_as_megatron_names_them(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["config", "megatron", "--model", "deepseek-v3", "--gpus", "1024", "--nodes", "128", "--pp", "16",
                  "--ep", "64", "--etp", "1", "--stage", "zero1"])  # fmt: skip
    assert exit_info.value.code == 0
    read = read_megatron(capsys.readouterr().out)
    assert (read.cut.ep, read.cut.expert_tp) == (64, 1)
    assert (read.namespace.num_experts, read.namespace.moe_layer_freq) == (256, "[0]*3+[1]*58")
