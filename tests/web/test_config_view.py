"""A run as a config to copy, a DeepSpeed config read as a run, and the page's links and paste box.

GET /api/config writes, POST /api/config reads (JSON), POST /config reads the page's form.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from urllib.parse import parse_qsl, urlsplit

import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.requests import Request

from app.domain.configs import deepspeed_config, fsdp2_snippet
from app.domain.overheads import DEFAULTS
from app.domain.scenario import resolve
from app.domain.sizing import MAX_BATCH, Run
from app.domain.stages import Stage
from app.main import create_app
from app.web.config_view import MAX_CONFIG_BYTES, ConfigFormat, config_view, read_pasted, written
from app.web.inputs import PageQuery, RunQuery
from app.web.links import Links
from tests.conftest import dom, examples, one, text

ZERO3_CPU = {"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu", "pin_memory": True}}}


@pytest.fixture(scope="module")
def plain() -> Iterator[TestClient]:
    """A client that shows redirects as they are, rather than following them."""
    with TestClient(create_app(), follow_redirects=False) as test_client:
        yield test_client


# --- GET /api/config --------------------------------------------------------------------------


@pytest.mark.parametrize("stage", list(Stage))
@pytest.mark.parametrize("run", ["", "gpus=16&offload=nvme&pin_memory=0", "recipe=fp32-adam&batch=0"])
def test_the_deepspeed_config_is_the_domains(client: TestClient, stage: Stage, run: str) -> None:
    response = client.get(f"/api/config?stage={stage.value}&format=deepspeed&{run}")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    query = PageQuery.model_validate(dict(parse_qsl(run)))
    assert response.json() == deepspeed_config(stage, resolve(query.inputs()).run)


@pytest.mark.parametrize("stage", list(Stage))
def test_the_fsdp2_snippet_is_text(client: TestClient, stage: Stage) -> None:
    response = client.get(f"/api/config?stage={stage.value}&format=fsdp2&offload=optimizer")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    run = resolve(RunQuery.model_validate({"offload": "optimizer"}).inputs()).run
    # The snippet, after the line naming the model (the seed's bare count).
    assert response.text == "# The model: 30B weights in 8 equal layers.\n" + fsdp2_snippet(stage, run)


def test_the_format_defaults_to_deepspeed(client: TestClient) -> None:
    assert client.get("/api/config?stage=zero2").json()["zero_optimization"]["stage"] == 2


@pytest.mark.parametrize(("query", "where"), [("format=yaml", "format"), ("stage=zero4", "stage"), ("gpus=0", "gpus")])
def test_a_bad_parameter_is_a_422_in_json(client: TestClient, query: str, where: str) -> None:
    response = client.get(f"/api/config?{query}")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", where]


# Hybrid sharding: 8 cards in 2 nodes, each state split across a shard group of 4 (a node), 2 groups.
HYBRID = Run(gpus=8, nodes=2, shard_size=4, batch=1)
HSDP_SENTENCE = (
    "shard=4 is hybrid sharding (the state split across 4 cards, kept whole by each of 2 groups), and DeepSpeed has "
    "no config for it: its MiCS (mics_shard_size) was removed in its newest release. Use FSDP2 instead: its 2-D "
    "device mesh (HSDP) splits the state the same way."
)


@pytest.mark.parametrize("stage", [Stage.ZERO1, Stage.ZERO2, Stage.ZERO3])
def test_a_hybrid_runs_deepspeed_config_is_a_422_naming_shard(stage: Stage) -> None:
    response = written(ConfigFormat.DEEPSPEED, stage, HYBRID)
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    answer = json.loads(bytes(response.body))
    assert answer["message"] == HSDP_SENTENCE
    assert answer["detail"] == [{"loc": ["query", "shard"], "msg": HSDP_SENTENCE, "type": "config"}]


def test_a_hybrid_runs_fsdp2_snippet_is_its_2d_mesh() -> None:
    response = written(ConfigFormat.FSDP2, Stage.ZERO3, HYBRID)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert (
        'mesh = init_device_mesh("cuda", (2, 4), mesh_dim_names=("replicate", "shard"))'
        in bytes(response.body).decode().splitlines()
    )


def test_a_hybrid_runs_data_parallelism_is_written_as_stage_0() -> None:
    response = written(ConfigFormat.DEEPSPEED, Stage.DP, HYBRID)
    assert response.status_code == 200
    assert json.loads(bytes(response.body))["zero_optimization"] == {"stage": 0}


def _request() -> Request:
    """A request to the app, for what builds the app's addresses."""
    return Request({"type": "http", "app": create_app(), "root_path": "", "path": "/", "headers": []})


@pytest.mark.parametrize(
    ("stage", "run", "refused"),
    [
        (Stage.ZERO3, HYBRID, HSDP_SENTENCE),
        (Stage.ZERO1, HYBRID, HSDP_SENTENCE),
        (Stage.DP, HYBRID, ""),
        (Stage.ZERO3, Run(gpus=8, nodes=2, batch=1), ""),
    ],
)
def test_the_page_says_why_a_hybrid_run_has_no_deepspeed_config(stage: Stage, run: Run, refused: str) -> None:
    view = config_view(_request(), Links("/", (("gpus", "8"),)), stage, run)
    assert view.deepspeed_refused == refused
    assert dict(parse_qsl(urlsplit(view.fsdp2_href).query))["format"] == "fsdp2"


# --- POST /api/config -------------------------------------------------------------------------


def test_a_config_is_read_over_the_runs_query(client: TestClient) -> None:
    config = {**ZERO3_CPU, "bf16": {"enabled": True}, "gradient_clipping": 1.0, "train_micro_batch_size_per_gpu": 4}
    response = client.post("/api/config?model=llama-3-8b&gpus=16&offload=nvme", json=config)
    assert response.status_code == 200
    answer = response.json()
    # The config's offload replaces the query's; its model and cards stay.
    assert answer["query"] == {
        "stage": "zero3",
        "model": "llama-3-8b",
        "gpus": "16",
        "batch": "4",
        "offload": "optimizer",
    }
    assert answer["ignored"] == ["gradient_clipping"]
    url = urlsplit(answer["url"])
    assert url.path == "/"
    assert dict(parse_qsl(url.query)) == answer["query"]
    assert client.get(answer["url"]).status_code == 200


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "No config was given"),
        (b"stage: 3", "The config is not JSON"),
        (b"[1, 2]", "The config is not a JSON object"),
        (b'"zero"', "The config is not a JSON object"),
        (b"[" * 10_000 + b"]" * 10_000, "The config is not JSON"),
        (json.dumps({"zero_optimization": {"stage": 5}}).encode(), "zero_optimization.stage: 5 is not a ZeRO stage"),
        (
            json.dumps({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "tape"}}}).encode(),
            'zero_optimization.offload_optimizer.device: "tape" is not an offload device',
        ),
        # An integer of 401 digits, past what a float holds: refused by name, not a 500.
        (
            b'{"zero_optimization": {"stage": 3, "reduce_bucket_size": 1' + b"0" * 400 + b"}}",
            "zero_optimization.reduce_bucket_size: 1000",
        ),
    ],
)
def test_a_config_not_read_is_a_422_saying_why(client: TestClient, body: bytes, message: str) -> None:
    response = client.post("/api/config", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 422
    assert response.headers["content-type"] == "application/json"
    assert response.json()["message"].startswith(message)


def test_a_bad_value_is_located_by_its_key(client: TestClient) -> None:
    response = client.post("/api/config", json={"zero_optimization": {"stage": 2, "offload_param": {"device": "cpu"}}})
    assert response.status_code == 422
    detail = response.json()["detail"]
    assert detail[0]["loc"] == ["body", "zero_optimization", "offload_param", "device"]
    assert detail[0]["msg"] == 'zero_optimization.offload_param.device: "cpu" needs ZeRO stage 3, and the stage is 2.'


def _padded(size: int) -> bytes:
    """A config of exactly `size` bytes: spaces after the object, which JSON allows."""
    body = json.dumps(ZERO3_CPU).encode()
    return body + b" " * (size - len(body))


def test_a_config_at_the_cap_is_read_and_one_byte_more_is_a_413(client: TestClient) -> None:
    assert client.post("/api/config", content=_padded(MAX_CONFIG_BYTES)).status_code == 200
    response = client.post("/api/config", content=_padded(MAX_CONFIG_BYTES + 1))
    assert response.status_code == 413
    assert "64 KB" in response.json()["message"]


def test_a_body_sent_in_chunks_is_cut_off_at_the_cap(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield from [b" " * 1024] * 65
        yield b"{}"

    response = client.post("/api/config", content=chunks())
    assert response.status_code == 413


def test_a_mics_config_is_read_with_a_note_that_it_is_drawn_as_hsdp() -> None:
    config = {"zero_optimization": {"stage": 3, "mics_shard_size": 8, "mics_hierarchical_params_gather": True}}
    pasted = read_pasted(config, RunQuery.model_validate({"gpus": "16"}))
    assert pasted.notes == (
        "zero_optimization.mics_shard_size: 8 is MiCS, which DeepSpeed removed in its newest release: drawn as "
        "hybrid sharding (shard=8), as FSDP2's HSDP does it.",
    )
    assert pasted.ignored == ("zero_optimization.mics_hierarchical_params_gather",)


def test_a_config_without_mics_has_no_note() -> None:
    assert read_pasted(ZERO3_CPU, RunQuery()).notes == ()


def test_a_bad_run_in_the_query_is_a_422(client: TestClient) -> None:
    response = client.post("/api/config?gpus=0", json=ZERO3_CPU)
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "gpus"]


# --- the page --------------------------------------------------------------------------------


def test_the_page_links_to_its_run_as_configs_that_work_without_javascript(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero3&gpus=16&offload=optimizer&theme=projector").text)
    for selector, kind in (("#copy-deepspeed", "deepspeed"), ("#copy-fsdp2", "fsdp2")):
        link = one(tree, selector)
        assert link.has_attr("data-copy-config")
        href = str(link["href"])
        assert urlsplit(href).path == "/api/config"
        assert dict(parse_qsl(urlsplit(href).query)) == {
            "stage": "zero3",
            "gpus": "16",
            "offload": "optimizer",
            "format": kind,
        }
        assert client.get(href).status_code == 200
    assert text(tree, "#copy-deepspeed") == "Copy as DeepSpeed config"
    assert text(tree, "#copy-fsdp2") == "Copy as FSDP2"


def test_the_paste_box_is_a_form_sent_by_post_with_the_run_in_its_address(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero2&gpus=16&theme=projector").text)
    form = one(tree, "form.config-paste")
    assert form["method"] == "post"
    action = urlsplit(str(form["action"]))
    assert action.path == "/config"
    assert dict(parse_qsl(action.query)) == {"stage": "zero2", "gpus": "16", "theme": "projector"}
    assert one(form, "textarea")["name"] == "config"
    assert one(form, "label")["for"] == one(form, "textarea")["id"]
    assert one(form, "button")["type"] == "submit"


def test_a_pasted_config_answers_303_to_the_page_of_its_run(plain: TestClient) -> None:
    response = plain.post("/config?stage=dp&gpus=16&theme=projector", data={"config": json.dumps(ZERO3_CPU)})
    assert response.status_code == 303
    location = urlsplit(response.headers["location"])
    assert location.path == "/"
    assert dict(parse_qsl(location.query)) == {
        "stage": "zero3",
        "gpus": "16",
        "recipe": "fp32-adam",
        "offload": "optimizer",
        "theme": "projector",
    }
    assert plain.get(response.headers["location"]).status_code == 200


@pytest.mark.parametrize(
    ("pasted", "message"),
    [
        ("", "No config was given"),
        ("{not json", "The config is not JSON"),
        ('{"zero_optimization": {"stage": "<script>alert(1)</script>"}}', 'zero_optimization.stage: "<script>'),
        (
            '{"zero_optimization": {"stage": 1, "offload_optimizer": {"device": "nvme"}}}',
            'zero_optimization.offload_optimizer.device: "nvme" needs ZeRO stage 3',
        ),
    ],
)
def test_a_paste_not_read_is_the_page_again_saying_why(plain: TestClient, pasted: str, message: str) -> None:
    response = plain.post("/config?stage=zero2&gpus=16", data={"config": pasted})
    assert response.status_code == 422
    assert response.headers["content-type"].startswith("text/html")
    tree = dom(response.text)
    assert text(tree, "#config-problem").startswith(message)
    textarea = one(tree, "#config-text")
    assert textarea.get_text() == pasted
    assert textarea["aria-describedby"] == "config-problem"
    # What was pasted is text, never markup: no script came with it.
    assert not tree.select("#config-tools script")
    # The page is still the run's: its cards are drawn.
    assert one(tree, "#grid")["data-gpus"] == "16"


def test_a_paste_over_the_cap_is_a_413_page(plain: TestClient) -> None:
    response = plain.post("/config", data={"config": _padded(MAX_CONFIG_BYTES + 1).decode()})
    assert response.status_code == 413
    assert text(dom(response.text), "#config-problem").startswith("The config is over 64 KB")


def test_the_embed_has_no_config_tools(client: TestClient) -> None:
    assert not dom(client.get("/embed?stage=zero3").text).select("#config-tools")


# --- the round trip ----------------------------------------------------------------------------


def _bucket(default: int) -> st.SearchStrategy[int | None]:
    # A setting left out, or one that differs from the default (the default is written as no setting);
    # 0 is one, as DeepSpeed takes it.
    return st.none() | st.just(0) | st.integers(0, 10**12).filter(lambda n: n != default)


@st.composite
def expressible_runs(draw: st.DrawFn) -> dict[str, str]:
    """A run's parameters that a DeepSpeed config can say at its stage, and a model and cluster it cannot."""
    stage = draw(st.sampled_from(list(Stage)))
    offloads: list[dict[str, str]] = [{}]
    if stage is not Stage.DP:
        offloads.append({"offload": "optimizer"})
    if stage is Stage.ZERO3:
        offloads += [{"offload": "optimizer", "offload_device": "nvme"}, {"offload": "optimizer+params"}]
        offloads += [{"offload": "nvme"}]
    run = {"stage": stage.value, **draw(st.sampled_from(offloads))}
    if run.get("offload"):
        run["pin_memory"] = draw(st.sampled_from(["0", "1"]))
    buckets = [("reduce_bucket_size", DEFAULTS.reduce_bucket_size)] if stage is not Stage.DP else []
    if stage is Stage.ZERO3:
        buckets += [("prefetch_bucket_size", DEFAULTS.prefetch_bucket_size)]
        buckets += [("max_live_parameters", DEFAULTS.max_live_parameters)]
    for name, default in buckets:
        if (value := draw(_bucket(default))) is not None:
            run[name] = str(value)
    run["recipe"] = draw(st.sampled_from(["mixed-adam", "fp32-adam"]))
    run["batch"] = str(draw(st.integers(1, MAX_BATCH)))
    run["gpus"] = str(draw(st.sampled_from([1, 8, 16, 64, 4096])))
    run["model"] = draw(st.sampled_from(["seed-30b", "llama-3-8b", "zero-7.5b"]))
    return run


@settings(max_examples=examples(150), deadline=None)
@given(expressible_runs())
def test_a_run_written_as_deepspeed_reads_back_as_the_same_run(given_run: dict[str, str]) -> None:
    original = PageQuery.model_validate(given_run)
    scenario = resolve(original.inputs())
    config = deepspeed_config(original.stage, scenario.run)
    # What the config cannot hold comes from the query, as the page's paste box and the API send it.
    beside = RunQuery.model_validate({"gpus": given_run["gpus"], "model": given_run["model"]})
    pasted = read_pasted(json.loads(json.dumps(config)), beside)
    assert pasted.parameters == {"stage": original.stage.value, **original.canonical()}
    assert resolve(pasted.query.inputs()).run == scenario.run
    # The one key written and not read: NVMe's path, which DeepSpeed needs and the picture does not.
    assert all(key.endswith(".nvme_path") for key in pasted.ignored)


def test_the_round_trip_through_the_api(client: TestClient) -> None:
    page = "stage=zero3&gpus=16&offload=nvme&pin_memory=0&reduce_bucket_size=200000000&batch=3"
    config = client.get(f"/api/config?{page}").json()
    answer = client.post("/api/config?gpus=16", json=config).json()
    assert answer["query"] == PageQuery.model_validate(dict(parse_qsl(page))).canonical() | {"stage": "zero3"}


# The presets DeepSpeed's JSON tells apart, each stage and grad_accum: the app's own export, POSTed back
# over another recipe, reads as the recipe written, and none of its keys is reported ignored. (fp8-adam
# and qlora-nf4 it cannot: tests/domain/test_configs.py, CANNOT.)
@pytest.mark.parametrize("kept", ["bf16", "fp32"])
@pytest.mark.parametrize("recipe", ["mixed-adam", "fp32-adam", "bf16-adam", "mixed-sgd", "adam-8bit"])
@pytest.mark.parametrize("stage", ["dp", "zero1", "zero2", "zero3"])
def test_the_apps_own_export_reads_back_as_its_recipe(client: TestClient, stage: str, recipe: str, kept: str) -> None:
    written = client.get(f"/api/config?stage={stage}&recipe={recipe}&grad_accum={kept}&model=llama-3-8b")
    if stage == "dp" and kept == "fp32" and recipe != "fp32-adam":  # DeepSpeed refuses it without ZeRO
        assert written.status_code == 422
        assert written.json()["detail"][0]["loc"] == ["query", "grad_accum"]
        return
    config = written.json()
    other = "fp32-adam" if recipe != "fp32-adam" else "mixed-adam"
    answer = client.post(f"/api/config?recipe={other}&model=llama-3-8b", json=config)
    assert answer.status_code == 200
    query = answer.json()["query"]
    # fp32 Adam's gradients are fp32 already: grad_accum=fp32 changes nothing, and reads back as its own.
    assert (query.get("recipe", "mixed-adam"), query.get("grad_accum", "bf16")) == (
        recipe,
        kept if recipe != "fp32-adam" else "bf16",
    )
    assert answer.json()["ignored"] == []


@pytest.mark.parametrize(
    ("parameter", "key"),
    [
        ("reduce_bucket_size", "reduce_bucket_size"),
        ("prefetch_bucket_size", "stage3_prefetch_bucket_size"),
        ("max_live_parameters", "stage3_max_live_parameters"),
    ],
)
def test_a_bucket_of_0_goes_there_and_back(client: TestClient, parameter: str, key: str) -> None:
    config = client.get(f"/api/config?stage=zero3&{parameter}=0").json()
    assert config["zero_optimization"][key] == 0
    answer = client.post("/api/config", json=config)
    assert answer.status_code == 200
    assert answer.json()["query"][parameter] == "0"


@pytest.mark.parametrize("method", ["OPTIONS", "PUT", "DELETE"])
def test_another_method_is_a_405_naming_both(client: TestClient, method: str) -> None:
    response = client.request(method, "/api/config")
    assert response.status_code == 405
    assert response.headers["allow"] == "GET, POST"
