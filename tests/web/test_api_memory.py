from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain.architecture import ModelName


def _memory(client: TestClient, **params: str) -> dict[str, Any]:
    response = client.get("/api/memory", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def test_zero_paper_figure_1(client: TestClient) -> None:
    body = _memory(client, params="7.5e9", gpus="64")
    assert [row["per_gpu_bytes"] for row in body["stages"]] == [120e9, 31.40625e9, 16.640625e9, 1.875e9]
    assert [row["communication_p"] for row in body["stages"]] == [2, 2, 2, 3]
    assert [row["communication_bytes"] for row in body["stages"]] == [30e9, 30e9, 30e9, 45e9]
    assert body["inputs"]["model"] == "custom"
    assert body["inputs"]["params"] == 7_500_000_000


def test_defaults_are_the_seed_run_and_capacity_fields_are_absent(client: TestClient) -> None:
    body = _memory(client)
    # The seed's table: 16, 5.5, 3.75 and 2 B/weight × 30e9 weights.
    assert [row["per_gpu_bytes"] for row in body["stages"]] == [480e9, 165e9, 112.5e9, 60e9]
    # Its 8 equal layers of 3.75e9 weights: ZeRO-2 computes one layer's bf16 gradients (+7.5e9 B) before
    # the reduce-scatter, ZeRO-3 also gathers its bf16 weights (+7.5e9 B); DP and ZeRO-1 add nothing.
    assert [row["peak_bytes"] for row in body["stages"]] == [480e9, 165e9, 120e9, 75e9]
    assert all("fits" not in row for row in body["stages"])
    assert body["inputs"]["largest_layer"] == 3_750_000_000
    assert body["inputs"]["largest_layer_source"] == "one of its 8 equal layers"
    assert body["notes"] == []


def test_with_a_capacity(client: TestClient) -> None:
    body = _memory(client, model="llama-3-70b", gpus="64", capacity="80GiB", batch="0")
    rows = body["stages"]
    assert [row["fits"] for row in rows] == [False, False, False, True]
    assert rows[-1]["peak_bytes"] == rows[-1]["per_gpu_bytes"] + 1_050_673_152 * 4
    assert rows[0]["max_params_that_fit"] == 80 * 2**30 // 16
    inputs = body["inputs"]
    assert inputs["params"] == 70_553_706_496
    assert inputs["largest_layer"] == 1_050_673_152
    assert inputs["largest_layer_source"] == "derived from the architecture"
    assert inputs["layer_exceeds_card"] is False
    assert inputs["capacity"] == 80 * 2**30
    assert [b["bytes"] for b in inputs["bands"]] == [2, 2, 4, 8]


def test_with_a_capacity_no_model_fitting_is_null_not_absent(client: TestClient) -> None:
    # GPT-3's largest layer is 1,812,099,072 weights: assembled with its gradients, 2 B + 2 B each,
    # 7,248,396,288 B, more than a 1 GiB card. Not even a model of that one layer fits.
    body = _memory(client, model="gpt-3-175b", gpus="1024", capacity="1GiB")
    assert body["inputs"]["layer_exceeds_card"] is True
    rows = body["stages"]
    assert [row["fits"] for row in rows] == [False] * 4
    assert all("max_params_that_fit" in row for row in rows)
    assert [row["max_params_that_fit"] for row in rows] == [None] * 4


@pytest.mark.parametrize("model", [m.value for m in ModelName if m is not ModelName.CUSTOM])
def test_every_preset_resolves(client: TestClient, model: str) -> None:
    assert _memory(client, model=model)["inputs"]["model"] == model


@pytest.mark.parametrize(
    ("query", "field", "message"),
    [
        ({"params": "7.5 Q"}, "params", "“params” should be a number of weights under 10,000T, such as 7.5B"),
        ({"gpus": "0"}, "gpus", "greater than or equal to 1"),
        ({"gpus": "4097"}, "gpus", "less than or equal to 4096"),
        ({"capacity": "80MB"}, "capacity", "“capacity” should be a memory size"),
        ({"recipe": "lion"}, "recipe", "“recipe” must be"),
        ({"recipe": "custom", "weights_bytes": "0"}, "weights_bytes", "greater than or equal to 1"),
        ({"master_bytes": "17"}, "master_bytes", "less than or equal to 16"),
        ({"units": "MB"}, "units", "“units” must be 'GiB' or 'GB'"),
        ({"largest_layer": "-1"}, "largest_layer", "a number of weights"),
    ],
)
def test_bad_input_is_a_readable_422(client: TestClient, query: dict[str, str], field: str, message: str) -> None:
    response = client.get("/api/memory", params=query)
    assert response.status_code == 422
    body = response.json()
    assert body["detail"][0]["loc"] == ["query", field]
    assert message in body["message"]


# Korthikanti et al. 2022 with t = 1, GPT-3 175B at s = 2048, b = 1: sbh = 25,165,824 and 5as/h = 80.
@pytest.mark.parametrize(
    ("recompute", "per_layer"),
    [("none", 25_165_824 * 114), ("selective", 25_165_824 * 34), ("full", 25_165_824 * 2)],
)
def test_gpt3_activations_are_korthikantis(client: TestClient, recompute: str, per_layer: int) -> None:
    body = _memory(client, model="gpt-3-175b", gpus="1024", seq="2048", batch="1", recompute=recompute)
    assert body["inputs"]["activations_counted"] is True
    for row in body["stages"]:
        assert row["activation_bytes_per_layer"] == per_layer
        assert row["logits_bytes"] == 4 * 50_257 * 2048
        assert row["peak_bytes"] == row["state_peak_bytes"] + row["activation_bytes"] or row["stage"] != "dp"


def test_a_bare_count_has_no_activations(client: TestClient) -> None:
    body = _memory(client, model="zero-7.5b", batch="8", capacity="80GB")
    assert body["inputs"]["activations_counted"] is False
    for row in body["stages"]:
        assert row["activation_bytes"] == 0
        assert row["peak_bytes"] == row["state_peak_bytes"]
        assert "activation_bytes_per_layer" not in row
        assert "max_batch_that_fits" not in row


def test_the_largest_micro_batch_is_null_when_the_states_alone_are_over(client: TestClient) -> None:
    # Llama 3 70B under data parallelism keeps 16 B × 70.6B weights, 1.1 TB: over an 80 GiB card. ZeRO-3
    # on 64 cards keeps 17.6 GB, but one sequence of 8,192 tokens keeps 80 × 2.72 GB without
    # recomputation: 0 fits. With full recomputation, 80 × 2sbh = 10.7 GB, and more than one fits.
    rows = _memory(client, model="llama-3-70b", gpus="64", capacity="80GiB")["stages"]
    assert rows[0]["max_batch_that_fits"] is None
    assert rows[3]["max_batch_that_fits"] == 0
    full = _memory(client, model="llama-3-70b", gpus="64", capacity="80GiB", recompute="full")["stages"]
    assert full[3]["max_batch_that_fits"] > 1


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"batch": "-1"}, "batch"),
        ({"batch": "1.5"}, "batch"),
        ({"seq": "0"}, "seq"),
        ({"recompute": "some"}, "'none', 'selective' or 'full'"),
    ],
)
def test_bad_micro_batches_are_422s_that_say_why(client: TestClient, params: dict[str, str], said: str) -> None:
    answer = client.get("/api/memory", params={"model": "llama-3-8b", **params})
    assert answer.status_code == 422
    assert said in answer.json()["message"]


def test_overheads_are_listed_always_and_counted_on_request(client: TestClient) -> None:
    theory = _memory(client, model="llama-3-8b", gpus="8", stage="zero2", capacity="80GiB")["stages"][2]
    counted = _memory(client, model="llama-3-8b", gpus="8", capacity="80GiB", overheads="1")["stages"][2]
    names = [o["name"] for o in theory["overheads"]]
    assert names == ["CUDA context", "NCCL buffers", "Reduce bucket", "Allocator fragmentation"]
    assert all(o["source"].startswith("https://") for o in theory["overheads"])
    assert theory["overhead_bytes"] == 0
    # By hand: 400 MiB + 688 MiB + 5e8 × 2 B, then 10 % of the theory's peak and the bucket, rounded up.
    fixed = 400 * 2**20 + 688 * 2**20
    margin = -(-(theory["peak_bytes"] + 1_000_000_000) // 10)
    assert counted["overhead_bytes"] == fixed + 1_000_000_000 + margin
    assert counted["peak_bytes"] == theory["peak_bytes"] + counted["overhead_bytes"]
    assert counted["state_peak_bytes"] == theory["state_peak_bytes"]


def test_an_overhead_set_by_its_parameter(client: TestClient) -> None:
    rows = _memory(client, model="llama-3-8b", overheads="1", cuda_context="1GiB", fragmentation="0")["stages"]
    assert rows[0]["overheads"][0] == {
        "name": "CUDA context",
        "bytes": 2**30,
        "source": "https://github.com/pytorch/pytorch/issues/109888",
        "parameter": "cuda_context",
    }
    assert rows[0]["overheads"][-1]["bytes"] == 0
    bad = client.get("/api/memory", params={"fragmentation": "101"})
    assert bad.status_code == 422
    assert "fragmentation" in bad.json()["message"]


# Each setting at 0 takes its item to 0 B: a context of 0 bytes, buffers of 0 bytes, a bucket of 0
# elements × 2 B, and no weights prefetched (min(5e7, 0) × 2 B, or min(0, 1e9 − a layer) × 2 B).
# DeepSpeed's config takes 0 for the three buckets (deepspeed/runtime/zero/config.py: Field(..., ge=0)).
@pytest.mark.parametrize(
    ("parameter", "value", "item"),
    [
        ("prefetch_bucket_size", "0", "Prefetched weights"),
        ("max_live_parameters", "0", "Prefetched weights"),
        ("reduce_bucket_size", "0", "Reduce bucket"),
        ("cuda_context", "0GB", "CUDA context"),
        ("cuda_context", "0", "CUDA context"),
        ("nccl_per_group", "0GiB", "NCCL buffers"),
    ],
)
@pytest.mark.parametrize("route", ["/api/memory", "/api/step", "/api/layout", "/api/config", "/"])
def test_an_overhead_of_0_is_taken_everywhere(
    client: TestClient, route: str, parameter: str, value: str, item: str
) -> None:
    query = {"model": "llama-3-8b", "gpus": "8", "stage": "zero3", "overheads": "1", parameter: value}
    assert client.get(route, params=query).status_code == 200
    zero3 = _memory(client, **query)["stages"][3]
    assert {o["name"]: o["bytes"] for o in zero3["overheads"]}[item] == 0


def test_lora_through_the_api_is_peft_s_count(client: TestClient) -> None:
    # peft, Llama 3 8B, r = 16, all-linear: "trainable params: 41,943,040 || all params: 8,072,204,288".
    inputs = _memory(client, model="llama-3-8b", lora_rank="16", lora_targets="all-linear")["inputs"]
    assert (inputs["trainable_params"], inputs["params"]) == (41_943_040, 8_072_204_288)
    assert inputs["adapter_params"] == 41_943_040
    assert inputs["frozen_params"] == 8_030_261_248


@pytest.mark.parametrize(
    ("params", "said"),
    [
        ({"trainable": "9B"}, "more than the model's 8,030,261,248"),
        ({"trainable": "1.5"}, "a fraction from 0 to 1"),
        ({"trainable": "150%"}, "between 0 and 1"),
        ({"lora_rank": "0"}, "lora_rank"),
        ({"lora_targets": "mlp"}, "'qv', 'qkvo' or 'all-linear'"),
    ],
)
def test_bad_trainable_or_lora_is_a_422_that_says_why(client: TestClient, params: dict[str, str], said: str) -> None:
    answer = client.get("/api/memory", params={"model": "llama-3-8b", **params})
    assert answer.status_code == 422
    assert said in answer.json()["message"]


def test_as_the_paper_counts_with_nothing_offloaded_the_host_is_empty(client: TestClient) -> None:
    body = _memory(client)
    for row in body["stages"]:
        assert row["gpu_bytes"] == row["peak_bytes"]
        assert (row["cpu_bytes_per_node"], row["pinned_bytes_per_node"], row["nvme_bytes_per_node"]) == (0, 0, 0)
        assert row["pcie_bytes_per_step"] == 0
        assert row["differences"] == []
        assert "host_fits" not in row
    assert (body["inputs"]["accounting"], body["inputs"]["offload"]) == ("paper", "none")
    assert (body["inputs"]["nodes"], body["inputs"]["gpus_per_node"]) == (1, 8)


def test_deepspeeds_figures_through_the_api(client: TestClient) -> None:
    # DeepSpeed 0.19.8's estimate_zero3_model_states_mem_needs for Llama 3 70B on 4 nodes of 8 with the
    # optimizer offloaded (tests/domain/test_deepspeed.py): 8,612,299,264 B a GPU, 423,322,238,976 B a node.
    body = _memory(
        client, model="llama-3-70b", gpus="32", accounting="deepspeed", offload="optimizer", host_memory="400GB"
    )
    zero3 = body["stages"][3]
    assert zero3["state_peak_bytes"] == 8_612_299_264
    assert zero3["cpu_bytes_per_node"] == 423_322_238_976
    assert zero3["host_fits"] is False
    assert (body["inputs"]["nodes"], body["inputs"]["gpus_per_node"]) == (4, 8)
    assert any("fp32 copy" in said for said in zero3["differences"])


def test_megatrons_figures_through_the_api(client: TestClient) -> None:
    # Megatron-LM's weight_and_optimizer_memory for Llama 3 8B (8,030,261,248 weights by its own formula,
    # tests/domain/test_accounting.py) on 8 GPUs: 18 B a weight without its distributed optimizer,
    # 6 + 12/8 = 7.5 B with it; ZeRO-2 and 3 are counted as the distributed optimizer.
    body = _memory(client, model="llama-3-8b", gpus="8", accounting="megatron")
    assert body["inputs"]["accounting"] == "megatron"
    figures = [(row["stage"], row["per_gpu_bytes"], row["bytes_per_weight"]) for row in body["stages"]]
    assert figures == [
        ("dp", 144_544_702_464, 18.0),
        ("zero1", 60_226_959_360, 7.5),
        ("zero2", 60_226_959_360, 7.5),
        ("zero3", 60_226_959_360, 7.5),
    ]
    assert "Megatron-LM's count has no ZeRO-3" in " ".join(body["stages"][3]["differences"])


def test_offload_moves_bytes_from_the_gpu_to_the_host(client: TestClient) -> None:
    before, after = (_memory(client, offload=o)["stages"][2] for o in ("none", "optimizer"))
    moved = before["per_gpu_bytes"] - after["per_gpu_bytes"]
    # ZeRO-2's 14 B per weight of a card's slice, 8 cards in the node.
    assert moved == 14 * 30 * 10**9 // 8
    assert after["pinned_bytes_per_node"] == after["cpu_bytes_per_node"] == 8 * moved
    assert after["pcie_bytes_per_step"] == 2 * 2 * 30 * 10**9 // 8


# Issue 31's audit: each figure worked by hand, each wrong before layers carried what trains in them.
FROZEN_AND_LORA = [
    # Llama 3 70B training its head, final norm and last 2 blocks (2 × 856,121,344 + 8,192 +
    # 1,050,673,152 = 2,761,990,144). ZeRO-2's backward over the head computes its 1,050,673,152
    # weights' bf16 gradients: 145,940,895,744 at rest (2 B × P + 14 B × trained / 8) + 2,101,346,304.
    ("model=llama-3-70b&trainable=2761990144&batch=0", "zero2", "peak_bytes", 148_042_242_048),
    # LoRA r = 256 on all-linear, Llama 3 8B: the adapters sit in each block, 20,971,520 a block; the
    # head stays frozen. ZeRO-2: 18,577,104,896 at rest + block 32's adapters' gradients, 2 × 20,971,520.
    ("model=llama-3-8b&lora_rank=256&lora_targets=all-linear&batch=0", "zero2", "peak_bytes", 18_619_047_936),
    # ZeRO-3: 3,349,742,592 at rest + the head gathered (2 × 525,336,576), which computes no gradients.
    ("model=llama-3-8b&lora_rank=256&lora_targets=all-linear&batch=0", "zero3", "peak_bytes", 4_400_415_744),
    # ZeRO-1 moves the trained tenth only: a reduce-scatter of 750,000,000 bf16 gradients and an
    # all-gather of as many bf16 weights, 2 × 2 B × 750,000,000.
    ("model=zero-7.5b&trainable=10%25&batch=0", "zero1", "communication_bytes", 3_000_000_000),
    ("model=zero-7.5b&trainable=10%25&batch=0", "zero2", "communication_bytes", 3_000_000_000),
    ("model=zero-7.5b&trainable=10%25&batch=0", "zero1", "communication_p", 0.2),
    # Full recomputation, Llama 3 8B, s = 8192, b = 1: at the head's backward, 32 checkpoints of 2sbh
    # (67,108,864 each), the final norm's input (2sbh), the head's input (2sbh) and the logits (4sbv,
    # 4,202,692,608): 6,484,393,984 B, with the head gathered and its gradients (4 × 525,336,576) on
    # ZeRO-3's 16,060,522,496 at rest.
    ("model=llama-3-8b&recompute=full&batch=1", "zero3", "peak_bytes", 16_060_522_496 + 2_101_346_304 + 6_484_393_984),
    ("model=llama-3-8b&recompute=full&batch=1", "zero3", "activation_bytes", 6_484_393_984),
]


@pytest.mark.parametrize(("query", "stage", "field", "expected"), FROZEN_AND_LORA)
def test_frozen_weights_and_lora_layer_by_layer(
    client: TestClient, query: str, stage: str, field: str, expected: float
) -> None:
    rows = {row["stage"]: row for row in client.get(f"/api/memory?{query}").json()["stages"]}
    assert rows[stage][field] == expected


def test_the_largest_layer_that_trains_is_assembled_with_its_gradients(client: TestClient) -> None:
    # GPT-3 with 90% training: its largest layer, a block of 1,812,099,072 weights, trains whole, so
    # assembled it is 4 B × 1,812,099,072 = 7,248,396,288, more than a 5 GB card.
    body = client.get("/api/memory?model=gpt-3-175b&trainable=90%25&capacity=5GB&batch=0").json()
    assert body["inputs"]["assembled_layer_bytes"] == 7_248_396_288
    assert body["inputs"]["layer_exceeds_card"] is True


@pytest.mark.parametrize("stage", ["dp", "zero1", "zero2", "zero3"])
def test_the_largest_model_that_fits_fits_when_entered(client: TestClient, stage: str) -> None:
    # The search keeps the share as entered: 0.9 of the found count trains, as the form reads it.
    query = "trainable=0.9&gpus=2&capacity=80GB&batch=0"
    found = next(r for r in client.get(f"/api/memory?params=1000001&{query}").json()["stages"] if r["stage"] == stage)
    largest = found["max_params_that_fit"]
    for params, fits in ((largest, True), (largest + 1, False)):
        rows = client.get(f"/api/memory?params={params}&{query}").json()["stages"]
        assert next(r for r in rows if r["stage"] == stage)["fits"] is fits


def test_the_largest_model_is_exact_and_any_size_is_said(client: TestClient) -> None:
    # ZeRO-3 on 4,096 cards of 100 TB: ⌈P / 4,096⌉ × 16 B ≤ 1e14 B, P ≤ 25,600,000,000,000,000
    # (tests/domain/test_sizing.py).
    rows = _memory(client, params="1000", gpus="4096", capacity="100TB")["stages"]
    assert rows[-1]["max_params_that_fit"] == 25_600_000_000_000_000
    assert "any_size_fits" not in rows[-1]
    # With everything that grows with the weights offloaded, no size is the largest: null, and any_size_fits.
    rows = _memory(client, params="1000", gpus="8", capacity="80GB", batch="0", offload="optimizer+params")["stages"]
    assert (rows[-1]["max_params_that_fit"], rows[-1]["any_size_fits"]) == (None, True)
    assert (rows[0]["max_params_that_fit"], rows[0].get("any_size_fits")) == (5_000_000_000, None)


def test_a_cut_reports_its_most_loaded_card(client: TestClient) -> None:
    # Llama 3 8B, tp = 2, pp = 2 on 8 GPUs (dp = 2), 8 micro-batches, s = 8192 (docs/parallelism.md): the first
    # stage's card keeps 2,007,629,824 weights and 2 micro-batches of its 16 blocks, 822,607,872 B each.
    body = _memory(client, model="llama-3-8b", tp="2", pp="2", microbatches="8")
    card = 2_007_629_824
    assert [row["per_gpu_bytes"] for row in body["stages"]] == [16 * card, 10 * card, 9 * card, 8 * card]
    assert {row["pipeline_stage"] for row in body["stages"]} == {0}
    assert {row["activation_bytes_per_layer"] for row in body["stages"]} == {822_607_872}
    assert {row["activation_bytes"] for row in body["stages"]} == {2 * 16 * 822_607_872}
    assert "pipeline_stage" not in _memory(client, model="llama-3-8b")["stages"][0]


def test_a_shard_group_splits_the_data_parallel_group(client: TestClient) -> None:
    response = client.get("/api/memory", params={"gpus": "8", "shard": "8", "tp": "2", "cp": "2"})
    assert response.status_code == 422
    message = response.json()["message"]
    assert "the 4 cards ZeRO shards over, the data-parallel group with the context-parallel one" in message
    assert "gpus ÷ (tp × pp) = 8 ÷ (2 × 1). Choose one of 1, 2 or 4." in message


def test_megatrons_step_peaks_at_its_own_figure(client: TestClient) -> None:
    # Under accounting=megatron the step keeps the app's shape of the activations, scaled to Megatron-LM's own
    # formula: its highest moment is the peak /api/memory reports, 100,871,721,370 B for ZeRO-1 (docs/parallelism.md).
    query = {"accounting": "megatron", "model": "llama-3-8b"}
    peaks = [row["peak_bytes"] for row in _memory(client, **query)["stages"]]
    timeline = client.get("/api/timeline", params=query).json()["stages"]
    assert [max(point["live_bytes"] for point in stage["points"]) for stage in timeline] == peaks
    assert peaks[1] == 100_871_721_370


# The logits upcast to fp32 for the loss, a term of their own beside the log-probabilities, 4 × v × s × b:
# Llama 3 (128,256 words) at 8,192 tokens, Qwen2.5 (152,064) and gpt-oss (201,088) at 4,096, two sequences.
@pytest.mark.parametrize(
    ("model", "seq", "upcast"),
    [
        ("llama-3-8b", "8192", 4 * 128_256 * 8192 * 2),  # 8,405,385,216 B
        ("qwen2.5-7b", "4096", 4 * 152_064 * 4096 * 2),  # 4,982,833,152 B
        ("gpt-oss-20b", "4096", 4 * 201_088 * 4096 * 2),  # 6,589,251,584 B
    ],
)
def test_the_fp32_logits_the_loss_upcasts_to_are_listed(client: TestClient, model: str, seq: str, upcast: int) -> None:
    body = _memory(client, model=model, seq=seq, batch="2")
    for row in body["stages"]:
        assert row["logits_upcast_bytes"] == upcast
        assert row["logits_bytes"] == upcast  # as large as the log-probabilities the backward keeps


def test_a_bare_count_lists_no_fp32_logits(client: TestClient) -> None:
    body = _memory(client, model="zero-7.5b")
    assert all("logits_upcast_bytes" not in row for row in body["stages"])


def test_the_experts_all_to_alls_are_a_cut_entry_by_link(client: TestClient) -> None:
    # Mixtral 8x7B, s = 4,096, ep = 8 in a node of 8 (docs/moe.md): 128 all-to-alls of 67,108,864 B, 7/8 of each sent.
    body = _memory(client, model="mixtral-8x7b", seq="4096", ep="8", capacity_factor="1")
    assert body["inputs"]["capacity_factor"] == "1"
    for row in body["stages"]:
        (link,) = row["cut"]["links"]
        assert (link["kind"], link["count"], link["buffer_bytes"]) == ("ep", 128, 67_108_864)
        assert (link["inside_bytes"], link["between_bytes"]) == (7_516_192_768, 0)
