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


def test_openapi_documents_the_api_and_not_the_page(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert set(schema["paths"]) == {"/api/stages", "/api/layout", "/api/memory", "/api/step", "/api/measured"}
    stage_param = schema["paths"]["/api/layout"]["get"]["parameters"][0]
    assert stage_param["name"] == "stage"
    assert set(schema["components"]["schemas"]["StageRow"]["required"]) >= {
        "stage", "bytes_per_weight", "per_gpu_bytes", "communication_p"
    }  # fmt: skip
