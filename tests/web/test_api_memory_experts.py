"""A mixture of experts in /api/memory and on the page: the most loaded card with ep, and active against total.

The figures are tests/domain/test_loaded_experts.py's, worked by hand there: Mixtral 8x7B on 16 GPUs, tp = 2,
ep = 8, etp = 1 keeps 6,440,620,032 weights a card, 5,637,144,576 of them experts; under Megatron-LM's count
ZeRO-1 keeps 803,475,456 × 7.5 + 5,637,144,576 × 12 = 73,671,800,832 bytes.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import dom, text

MIXTRAL = {"model": "mixtral-8x7b", "gpus": "16", "nodes": "2", "tp": "2", "ep": "8", "etp": "1"}


def _memory(client: TestClient, **params: str) -> dict[str, Any]:
    response = client.get("/api/memory", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_mixtral_card_with_ep_in_the_api(client: TestClient) -> None:
    body = _memory(client, **MIXTRAL, accounting="megatron")
    inputs = body["inputs"]
    assert (inputs["ep"], inputs["etp"], inputs["edp"], inputs["dp"]) == (8, 1, 2, 8)
    assert inputs["active_params"] == 12_879_925_248
    assert inputs["params"] == 46_702_792_704
    # ZeRO-3's layer on a card: attention ÷ 2, router and norms whole, one expert: 20,971,520 + 40,960 + 176,160,768.
    assert inputs["largest_layer_per_gpu"] == 197_173_248
    assert inputs["largest_layer"] == 1_451_270_144
    rows = {row["stage"]: row for row in body["stages"]}
    assert {row["params_per_gpu"] for row in rows.values()} == {6_440_620_032}
    assert {row["expert_params_per_gpu"] for row in rows.values()} == {5_637_144_576}
    assert rows["zero1"]["per_gpu_bytes"] == 73_671_800_832
    assert rows["dp"]["per_gpu_bytes"] == 6_440_620_032 * 18


def test_a_dense_model_states_no_experts(client: TestClient) -> None:
    body = _memory(client, model="llama-3-8b", tp="2")
    assert "active_params" not in body["inputs"]
    assert "largest_layer_per_gpu" not in body["inputs"]
    assert all("expert_params_per_gpu" not in row and "params_per_gpu" not in row for row in body["stages"])


def test_the_page_names_the_active_weights_beside_the_total(client: TestClient) -> None:
    page = dom(client.get("/", params=MIXTRAL).text)
    assert "12,879,925,248 active of 46,702,792,704 weights" in text(page, "caption")
    dense = dom(client.get("/", params={"model": "llama-3-8b"}).text)
    assert "active" not in text(dense, "caption")


def test_the_page_says_what_a_card_keeps_and_assembles_with_ep(client: TestClient) -> None:
    page = dom(client.get("/", params={**MIXTRAL, "stage": "zero1"}).text)
    words = " ".join(page.get_text(" ").split())
    # Its 6,440,620,032 weights; ZeRO-3's layer on a card: 20,971,520 + 40,960 + 176,160,768 = 197,173,248.
    assert "its 6.44B weights (the model: its experts ÷ (ep 8 × etp 1), the rest ÷ tp 2)" in words
    assert "1,451,270,144 weights, of which a card of tp=2, ep=8, etp=1 assembles 197,173,248" in words


# DeepSeek-V3's own layout, PP16 × EP64 on 2,048 GPUs, under data parallelism: the most loaded card is the first
# stage's, 3 dense blocks (583,483,392 each) and the embedding (926,679,040), no experts: 0 is given, not left out.
# Under accounting=megatron the card is Megatron's formula's shard (tests/domain/test_megatron_memory.py):
# 2,519,279,040 weights, 638,582,784 of them experts.
DEEPSEEK = {"model": "deepseek-v3", "gpus": "2048", "nodes": "256", "pp": "16", "ep": "64", "stage": "dp"}


def test_a_card_without_experts_says_0(client: TestClient) -> None:
    rows = {row["stage"]: row for row in _memory(client, **DEEPSEEK)["stages"]}
    assert rows["dp"]["pipeline_stage"] == 0
    assert (rows["dp"]["params_per_gpu"], rows["dp"]["expert_params_per_gpu"]) == (3 * 583_483_392 + 926_679_040, 0)
    megatron = {row["stage"]: row for row in _memory(client, **DEEPSEEK, accounting="megatron")["stages"]}
    assert (megatron["dp"]["params_per_gpu"], megatron["dp"]["expert_params_per_gpu"]) == (2_519_279_040, 638_582_784)
    assert megatron["dp"]["per_gpu_bytes"] == 18 * 2_519_279_040


# The field test's 500s: ep with hpZ or ZeRO++ passed the query model and was refused only by `Run`. Each route
# now answers a 422 naming ep, before any run is built.
_GROUPED = [
    {"ep": "8", "hpz": "8"},
    {"ep": "8", "qwz": "1"},
    {"ep": "8", "qgz": "1"},
    {"ep": "8", "shard": "8"},
    {"ep": "4", "etp": "1", "tp": "2", "hpz": "4"},
]


@pytest.mark.parametrize("path", ["/", "/embed", "/compare", "/api/memory", "/api/layout", "/api/config"])
@pytest.mark.parametrize("given", _GROUPED, ids=lambda g: "&".join(f"{k}={v}" for k, v in g.items()))
def test_experts_apart_refuse_hpz_and_zeropp_with_a_422(client: TestClient, path: str, given: dict[str, str]) -> None:
    response = client.get(path, params={"model": "mixtral-8x7b", "gpus": "16", "nodes": "2", **given})
    assert response.status_code == 422, response.text[:300]
    assert "expert-data-parallel group" in response.text


_DEGREES = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["mixtral-8x7b", "gpt-oss-20b", "llama-3-8b"]),
        "gpus": st.sampled_from(["8", "16", "32"]),
        "nodes": st.sampled_from(["", "2", "4"]),
        "ep": st.sampled_from(["1", "2", "4", "8", "16"]),
        "etp": st.sampled_from(["0", "1", "2"]),
        "tp": st.sampled_from(["1", "2", "4"]),
        "pp": st.sampled_from(["1", "2"]),
        "hpz": st.sampled_from(["1", "2", "8"]),
        "qwz": st.sampled_from(["0", "1"]),
        "shard": st.sampled_from(["", "2", "8"]),
        "stage": st.sampled_from(["dp", "zero1", "zero3"]),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(query=_DEGREES)
def test_any_mix_of_experts_groups_and_zeropp_is_answered_or_refused(client: TestClient, query: dict[str, str]) -> None:
    for path in ("/", "/api/memory"):
        assert client.get(path, params=query).status_code in (200, 422), (path, query)


def test_deepseek_v3s_first_stage_keeps_no_experts(client: TestClient) -> None:
    # 61 blocks in 16 stages: 3, then 4 in 13 of the middle 14, then 3 (`stage_blocks`): the first stage keeps
    # blocks 1-3, DeepSeek-V3's dense ones (first_k_dense_replace = 3), and the embedding; no expert is on its cards.
    query = {"model": "deepseek-v3", "gpus": "2048", "nodes": "256", "pp": "16", "ep": "64", "stage": "zero1"}
    cards = client.get("/api/layout", params=query).json()["cut_cards"]
    first = [card for card in cards if card["pipeline_stage"] == 0]
    assert first
    assert all(card["experts"] == [] for card in first)
    assert all(len(card["experts"]) == 4 for card in cards if card["pipeline_stage"] > 0)  # 256 experts ÷ ep 64
    page = dom(client.get("/", params=query).text)
    assert "No experts: its pipeline stage, 1 of 16, keeps only blocks with a dense MLP." in page.get_text(" ")
