"""/measured's section on the model cut across the ranks (FSDP2 + TP, a 2-stage pipeline), on the parsed DOM."""

from __future__ import annotations

from dataclasses import fields

import pytest
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from app.measure.cut_snapshots import (
    ActivationAgreement,
    BandAgreement,
    CutAgreement,
    CutComparison,
    CutDifference,
    CutRankAgreement,
)
from app.measure.snapshots import comparison
from app.web.measured_view import shipped_snapshot
from tests.conftest import dom, one, text

# (section, the model's bytes a rank, measured, the difference: Adam's step counters).
RANKS = [
    ("#cut-tp", "196,608 B", "196,656 B", "+48 B"),
    ("#cut-pp-1f1b", "262,144 B", "262,160 B", "+16 B"),
    ("#cut-pp-gpipe", "262,144 B", "262,160 B", "+16 B"),
]


@pytest.mark.parametrize("url", ["/measured", "/measured?stage=zero3&impl=hsdp&theme=projector"])
@pytest.mark.parametrize(("section", "model", "measured", "difference"), RANKS)
def test_every_rank_is_set_against_its_layouts_figure(
    client: TestClient, url: str, section: str, model: str, measured: str, difference: str
) -> None:
    part = one(dom(client.get(url).text), section)
    assert "every byte of difference is named" in text(part, ".measured-agreement")
    rows = part.select(".cut-ranks tbody tr")
    assert len(rows) == 8
    for row in rows:
        assert (text(row, ".model"), text(row, ".torch"), text(row, ".difference")) == (model, measured, difference)
        assert f"step counters {difference}" in text(row, ".reasons")


def test_tp_reads_the_local_shards_band_by_band(client: TestClient) -> None:
    part = one(dom(client.get("/measured").text), "#cut-tp")
    bands = [(text(r, "th"), text(r, ".model"), text(r, ".torch")) for r in part.select(".cut-bands tbody tr")]
    assert bands == [
        ("Weights", "49,152 B", "49,152 B"),
        ("Gradients", "49,152 B", "49,152 B"),
        ("Adam's moments", "98,304 B", "98,304 B"),
    ]
    placements = {text(r, "th"): [td.get_text() for td in r.select("td")] for r in part.select("details tbody tr")}
    assert placements["0.q.weight"] == ["64 × 64 → 8 × 64", "(_StridedShard(dim=0, sf=4), Shard(dim=0))"]
    assert not part.select(".cut-activations")  # TP alone: activations not measured here


# Each stage's activations at their peak: (micro-batches, bytes), model and measured alike.
PEAKS = {"#cut-pp-1f1b": [("2", "8,192 B")] * 4 + [("1", "4,096 B")] * 4, "#cut-pp-gpipe": [("4", "16,384 B")] * 8}


@pytest.mark.parametrize("section", sorted(PEAKS))
def test_the_pipeline_shows_the_microbatches_each_stage_holds(client: TestClient, section: str) -> None:
    part = one(dom(client.get("/measured?stage=zero1").text), section)
    rows = part.select(".cut-activations tbody tr")
    assert [(text(r, "td.model:nth-of-type(2)"), text(r, "td.model:nth-of-type(4)")) for r in rows] == PEAKS[section]
    assert [[td.get_text() for td in r.select(".torch")] for r in rows] == [list(p) for p in PEAKS[section]]
    assert "Every rank at its peak holds the model's micro-batches and bytes." in text(
        part, f"{section}-activations-summary"
    )
    for table in part.select("table"):  # labelled for narrow screens, as the page's other tables
        headers = [th.get_text(strip=True) for th in table.select("thead th")]
        for row in table.select("tbody tr"):
            assert [td.get("data-label") for td in row.select("td")] == headers[1:]


def test_the_api_serves_the_cut(client: TestClient) -> None:
    cut = client.get("/api/measured").json()["cut"]["arrangements"]
    assert [(a["key"], a["tp"], a["pp"], a["dp"]) for a in cut] == [
        ("tp", 4, 1, 2),
        ("pp-1F1B", 1, 2, 4),
        ("pp-GPipe", 1, 2, 4),
    ]
    assert [r["measured_bytes"] for r in cut[0]["ranks"]] == [196_656] * 8
    assert [r["activations"]["measured_microbatches"] for r in cut[1]["ranks"]] == [2] * 4 + [1] * 4


def test_the_apis_cut_is_the_dataclasses_field_for_field(client: TestClient) -> None:
    cut = client.get("/api/measured").json()["cut"]
    arrangement = cut["arrangements"][1]
    rank = arrangement["ranks"][0]
    nested = {
        CutComparison: cut,
        CutAgreement: arrangement,
        CutRankAgreement: rank,
        BandAgreement: rank["bands"][0],
        CutDifference: rank["differences"][0],
        ActivationAgreement: rank["activations"],
    }
    documented = client.get("/openapi.json").json()["components"]["schemas"]
    for shape, data in nested.items():
        names = {field.name for field in fields(shape)}
        assert set(data) == names, shape
        assert set(documented[shape.__name__]["properties"]) == names
    assert cut == TypeAdapter(CutComparison).dump_python(comparison(shipped_snapshot()).cut, mode="json")
