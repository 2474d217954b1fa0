from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from app.domain.stages import Stage


def test_stages_are_the_seed_table(client: TestClient) -> None:
    rows = client.get("/api/stages").json()
    assert [(r["stage"], r["bytes_per_weight"], r["per_gpu_bytes"], r["communication_p"]) for r in rows] == [
        ("dp", 16.0, 480e9, 2),
        ("zero1", 5.5, 165e9, 2),
        ("zero2", 3.75, 112.5e9, 2),
        ("zero3", 2.0, 60e9, 3),
    ]
    assert [sum(t["volume_p"] for t in r["communication"]) for r in rows] == [2, 2, 2, 3]


@pytest.mark.parametrize(("stage", "dashed"), [("dp", 0), ("zero1", 112), ("zero2", 168), ("zero3", 224)])
def test_layout_uses_the_dom_contract_fields(client: TestClient, stage: str, dashed: int) -> None:
    body = client.get("/api/layout", params={"stage": stage}).json()
    assert body["stage"] == stage
    assert (body["gpus"], body["weights"]) == (8, 8)
    assert [b["bytes"] for b in body["bands"]] == [2, 2, 4, 8]
    assert len(body["cells"]) == 256
    assert set(body["cells"][0]) == {"card", "weight", "band", "state", "holder"}
    assert sum(1 for c in body["cells"] if c["state"] == "dashed") == dashed


def test_layout_matches_the_page_cell_for_cell(client: TestClient) -> None:
    from tests.conftest import cell_facts, dom

    for stage in Stage:
        api = {
            (c["card"], c["weight"], c["band"]): c["state"]
            for c in client.get(f"/api/layout?stage={stage}").json()["cells"]
        }
        page = {
            (int(f["card"]), int(f["weight"]), f["band"]): f["state"]
            for f in map(cell_facts, dom(client.get(f"/?stage={stage}").text).select("#grid .cell"))
        }
        assert api == page


@pytest.mark.parametrize(
    ("query", "gpus", "cards", "bands"),
    [
        # 16 cards are all drawn: 16 × 16 cells of 4 bands.
        ("stage=zero1&gpus=16", 16, 16, [2, 2, 4, 8]),
        # 64 are drawn as the first four and the last four, as on the page.
        ("stage=zero3&gpus=64&recipe=fp32-adam", 64, 8, [4, 4, 0, 8]),
        ("stage=zero2&gpus=4&recipe=custom&weights_bytes=1&gradients_bytes=3&master_bytes=0&moments_bytes=2", 4, 4,
         [1, 3, 0, 2]),
    ],
)  # fmt: skip
def test_layout_honours_the_run_and_matches_its_page(
    client: TestClient, query: str, gpus: int, cards: int, bands: list[int]
) -> None:
    from tests.conftest import cell_facts, dom

    response = client.get(f"/api/layout?{query}")
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["gpus"], body["weights"]) == (gpus, gpus)
    assert [b["bytes"] for b in body["bands"]] == bands
    assert len(body["cells"]) == cards * cards * 4
    assert len({c["card"] for c in body["cells"]}) == cards
    # The page draws no cell of a band that costs 0 B (fp32 Adam has no master copy); the API lists it.
    drawn = {b["band"] for b in body["bands"] if b["bytes"] > 0}
    api = {(c["card"], c["weight"], c["band"]): c["state"] for c in body["cells"] if c["band"] in drawn}
    page = {
        (int(f["card"]), int(f["weight"]), f["band"]): f["state"]
        for f in map(cell_facts, dom(client.get(f"/?{query}").text).select("#grid .cell"))
    }
    assert api == page


# The cut's cards by hand (docs/parallelism.md, the grid of a cut model):
# card = tp + TP × (cp + CP × (dp + DP × stage)).
# pp = 3: stage 0 keeps weights [0, 1/3), columns 0 to 2 (2/8 < 1/3 < 3/8); stage 1 [1/3, 2/3), columns 2 to 5.
@pytest.mark.parametrize(
    ("query", "card", "stage", "tensor", "dp", "absent"),
    [
        ("gpus=16&tp=2&pp=2", 3, 0, 1, 1, [4, 5, 6, 7]),
        ("gpus=16&tp=2&pp=2", 14, 1, 0, 3, [0, 1, 2, 3]),
        ("gpus=12&pp=3", 5, 1, 0, 1, [0, 1, 6, 7]),
        ("gpus=12&pp=3", 11, 2, 0, 3, [0, 1, 2, 3, 4]),
        ("gpus=8&tp=4", 6, 0, 2, 1, []),
        ("gpus=64&tp=4&pp=4", 51, 3, 3, 0, [0, 1, 2, 3, 4, 5]),
    ],
)  # fmt: skip
def test_layout_lists_the_cut_cards(
    client: TestClient, query: str, card: int, stage: int, tensor: int, dp: int, absent: list[int]
) -> None:
    body = client.get(f"/api/layout?stage=zero3&{query}").json()
    found = {c["card"]: c for c in body["cut_cards"]}
    assert found[card] == {
        "card": card,
        "pipeline_stage": stage,
        "tensor_rank": tensor,
        "context_rank": 0,
        "data_parallel_rank": dp,
        "columns": [c for c in range(8) if c not in absent],
        "absent_columns": absent,
    }


def test_layout_without_a_cut_has_no_cut_cards(client: TestClient) -> None:
    assert "cut_cards" not in client.get("/api/layout?stage=zero3&gpus=16").json()


def test_layout_refuses_a_bad_run(client: TestClient) -> None:
    response = client.get("/api/layout", params={"stage": "zero1", "gpus": "0"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "gpus"]


def test_openapi_documents_the_api_and_not_the_page(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert set(schema["paths"]) == {
        "/api/stages",
        "/api/layout",
        "/api/memory",
        "/api/step",
        "/api/timeline",
        "/api/measured",
        "/api/config",
    }
    layout_params = {p["name"]: p for p in schema["paths"]["/api/layout"]["get"]["parameters"]}
    assert {"stage", "gpus", "recipe"} <= set(layout_params)
    assert set(schema["components"]["schemas"]["StageRow"]["required"]) >= {
        "stage", "bytes_per_weight", "per_gpu_bytes", "communication_p"
    }  # fmt: skip


# The seed (30B weights in 8 equal layers, 8 GPUs): ZeRO-3 keeps 30e9 × 16 / 8 at rest, gathers a layer's
# bf16 weights (30e9 / 8 × 2) in each pass and computes its gradients (as many bytes) in the backward.
SEED_REST = {"dp": 30 * 10**9 * 16, "zero3": 30 * 10**9 * 16 // 8}
LAYER_BYTES = 30 * 10**9 // 8 * 2


def test_timeline_gives_each_stages_points(client: TestClient) -> None:
    body = client.get("/api/timeline").json()
    assert (body["last_phase"], body["points_per_step"]) == (52, 53)
    assert [s["stage"] for s in body["stages"]] == [stage.value for stage in Stage]
    lines = {s["stage"]: s for s in body["stages"]}
    assert {p["live_bytes"] for p in lines["dp"]["points"]} == {SEED_REST["dp"]}
    zero3 = lines["zero3"]["points"]
    assert len(zero3) == 53

    def point(phase: int, instant: str, gathered: int = 0, computed: int = 0) -> dict[str, int | str]:
        rest = SEED_REST["zero3"]
        return {
            "phase": phase, "instant": instant, "live_bytes": rest + gathered + computed, "state_bytes": rest,
            "gathered_bytes": gathered, "computed_bytes": computed, "activation_bytes": 0, "overhead_bytes": 0,
        }  # fmt: skip

    # One point a phase: the forward's first column gathered, used and discarded; the backward's first
    # (column 7) gathered, its gradients computed beside it, then both dropped.
    assert zero3[:4] == [point(0, "whole"), point(1, "gather", LAYER_BYTES), point(2, "compute", LAYER_BYTES),
                         point(3, "discard")]  # fmt: skip
    assert zero3[25:28] == [point(25, "gather", LAYER_BYTES), point(26, "compute", LAYER_BYTES, LAYER_BYTES),
                            point(27, "discard")]  # fmt: skip
    highest = SEED_REST["zero3"] + 2 * LAYER_BYTES  # the backward's layer: weights and gradients
    assert lines["zero3"]["peak_bytes"] == max(p["live_bytes"] for p in zero3) == highest


def test_timeline_in_hand_is_the_steps_live_bytes(client: TestClient) -> None:
    run = {"model": "llama-3-8b", "seq": "4096", "stage": "zero2"}
    line = next(s for s in client.get("/api/timeline", params=run).json()["stages"] if s["stage"] == "zero2")
    for phase in (0, 13, 14, 15, 35, 49, 52):
        step = client.get("/api/step", params={**run, "phase": str(phase)}).json()
        assert [p["live_bytes"] for p in line["points"] if p["phase"] == phase] == [step["live_bytes"]]


def test_timeline_refuses_a_bad_run(client: TestClient) -> None:
    response = client.get("/api/timeline", params={"gpus": "0"})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "gpus"]
