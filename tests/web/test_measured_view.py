"""/measured and /api/measured: the model's grid beside PyTorch's, on the parsed DOM; bad input is a 422."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest
from bs4 import BeautifulSoup
from fastapi.testclient import TestClient
from pydantic import TypeAdapter

from app.measure.activation_snapshots import ActivationsComparison, KernelNote, TermRow, TermTable
from app.measure.snapshots import (
    Agreement,
    Comparison,
    CurvePoint,
    Difference,
    LayerHeld,
    LiveBytes,
    RankAgreement,
    comparison,
)
from app.web.measured_view import shipped_snapshot
from tests.conftest import dom, one, text


@pytest.mark.parametrize(
    ("url", "stage", "impl", "partial", "dashed"),
    [
        # 8 ranks × 8 layers × 3 bands = 192 measured cells.
        ("/measured", "dp", "ddp", 0, 0),
        ("/measured?stage=zero1", "zero1", "zero-redundancy", 0, 56),
        # ZeRO-2 and ZeRO-3 open on FSDP2, whose step has the model's shape; FSDP1 is asked for.
        ("/measured?stage=zero2", "zero2", "fsdp2", 192, 0),
        ("/measured?stage=zero2&impl=fsdp1", "zero2", "fsdp1", 0, 3 * 56),
        ("/measured?stage=zero3&impl=fsdp1", "zero3", "fsdp1", 0, 3 * 56),
        ("/measured?stage=zero3&theme=projector", "zero3", "fsdp2", 192, 0),
        ("/measured?stage=zero3&impl=fsdp2", "zero3", "fsdp2", 192, 0),
        # HSDP: a quarter strip of every layer on every rank.
        ("/measured?stage=zero3&impl=hsdp", "zero3", "hsdp", 192, 0),
    ],
)
def test_each_arrangement_draws_the_measured_grid_to_scale(
    client: TestClient, url: str, stage: str, impl: str, partial: int, dashed: int
) -> None:
    response = client.get(url)
    assert response.status_code == 200
    assert "HX-Request" in response.headers["Vary"]
    tree = dom(response.text)
    section = one(tree, "#measured")
    assert (section["data-stage"], section["data-impl"]) == (stage, impl)
    cells = tree.select("#torch .cell")
    assert len(cells) == 192
    assert len(tree.select("#model .cell")) == 192
    assert sum(1 for c in cells if c["data-state"] == "partial") == partial
    assert sum(1 for c in cells if c["data-state"] == "dashed") == dashed
    assert len(tree.select("#ranks tbody tr")) == 8


@pytest.mark.parametrize(
    ("impl", "rank", "share", "start", "steps"),
    [
        # Rank 3 holds rows 24-31 of 64: from 3/8 to 4/8 of the cell, 18 to 24 in 48ths.
        ("fsdp2", 3, "1/8", "3/8", ("from-18", "to-24")),
        # HSDP: rank 5 is second in its group of 4, rows 16-31 of 64: from 1/4 to 2/4, 12 to 24 in 48ths.
        ("hsdp", 5, "1/4", "1/4", ("from-12", "to-24")),
    ],
)
def test_fsdp2_cells_are_strips_where_the_rows_fall(
    client: TestClient, impl: str, rank: int, share: str, start: str, steps: tuple[str, str]
) -> None:
    tree = dom(client.get(f"/measured?stage=zero3&impl={impl}").text)
    cell = one(tree, f"#torch-card-{rank}").find_parent("section").select(".cell")[0]  # type: ignore[union-attr]
    assert cell["data-share"] == share
    assert {"partial", *steps} <= set(cell["class"])
    assert f"holds {share} of it, from {start} of the way in" in cell["aria-label"]


def test_hsdp_is_set_against_the_model_with_shard_groups_of_4(client: TestClient) -> None:
    tree = dom(client.get("/measured?stage=zero3&impl=hsdp").text)
    assert "2 × 4 mesh" in text(tree, "#measured-heading")
    # The model's grid: each card keeps 2 whole layers of 8 (a quarter), in 3 bands: 8 × 2 × 3 cells solid.
    model = tree.select("#model .cell")
    assert sum(1 for c in model if c["data-state"] == "solid") == 8 * 2 * 3
    assert sum(1 for c in model if c["data-state"] == "dashed") == 8 * 6 * 3
    # Every rank: 8 × 4,096 × 16 B / 4 = 131,072 B in the model, measured 32 B more (8 step counters).
    for row in tree.select("#ranks tbody tr"):
        assert (text(row, ".model"), text(row, ".torch"), text(row, ".difference")) == (
            "131,072 B",
            "131,104 B",
            "+32 B",
        )
    assert "every byte of difference is named" in text(tree, "#agreement")
    assert "rank r + 4 hold the same rows" in text(tree, "#pattern")


def test_the_agreement_names_every_difference(client: TestClient) -> None:
    tree = dom(client.get("/measured?stage=zero2&impl=fsdp1").text)
    # Model 4 × 32,768 + 12 × 4,096 = 180,224 B; measured 65,540 B: 4 B of counters, 114,688 B of weights resharded.
    first = one(tree, "#ranks tbody tr")
    assert text(first, ".model") == "180,224 B"
    assert text(first, ".torch") == "65,540 B"
    assert text(first, ".difference") == "−114,684 B"
    assert "every byte of difference is named" in text(tree, "#agreement")
    named = text(tree, "#differences")
    assert "step counters" in named
    assert "Padding of the flat parameter: 0 B" in named
    assert "resharded after the backward pass" in named
    assert "fp32" in text(tree, "#precision")


def test_the_switches_keep_the_theme_and_the_other_fsdp_is_one_click_away(client: TestClient) -> None:
    tree = dom(client.get("/measured?stage=zero3&theme=projector").text)
    assert one(tree, "#impl-fsdp1")["href"] == "/measured?stage=zero3&impl=fsdp1&theme=projector"
    assert one(tree, "#impl-fsdp2")["aria-current"] == "page"
    assert one(tree, "#impl-fsdp2")["href"] == "/measured?stage=zero3&theme=projector"
    assert one(tree, "#impl-hsdp")["href"] == "/measured?stage=zero3&impl=hsdp&theme=projector"
    assert one(tree, "#measured-dp")["href"] == "/measured?stage=dp&theme=projector"
    assert one(tree, "#measured-back")["href"] == "/?stage=zero3&theme=projector"
    assert one(tree, "html")["class"] == ["theme-projector"]


@pytest.mark.parametrize(
    ("stage", "gathers"),
    [("zero2", "reduce-scatter each layer's gradients as it finishes"), ("zero3", "gather one layer at a time")],
)
def test_zero2_and_zero3_open_on_fsdp2_and_say_in_one_sentence_how_fsdp1_differs(
    client: TestClient, stage: str, gathers: str
) -> None:
    tree = dom(client.get(f"/measured?stage={stage}").text)
    assert one(tree, "#measured")["data-impl"] == "fsdp2"
    assert "FSDP2" in text(tree, "#measured-heading")
    note = text(tree, "#impl-note")
    assert note.startswith("FSDP1, one click away, wraps all 8 layers in one flat parameter")
    assert gathers in note
    assert note.count(". ") == 0
    assert note.endswith(".")
    # The same sentence on FSDP1's own page, whose curve says it is not the model's shape.
    fsdp1 = dom(client.get(one(tree, "#impl-fsdp1")["href"]).text)  # type: ignore[arg-type]
    assert one(fsdp1, "#measured")["data-impl"] == "fsdp1"
    assert text(fsdp1, "#impl-note") == note
    for other in ("/measured", "/measured?stage=zero1"):
        assert dom(client.get(other).text).select_one("#impl-note") is None


def test_the_curve_draws_both_lines_and_lists_the_numbers(client: TestClient) -> None:
    tree = dom(client.get("/measured?stage=zero3&impl=fsdp2").text)
    assert len(one(tree, ".curve-model")["points"].split()) == 19  # type: ignore[union-attr]
    assert len(one(tree, ".curve-measured")["points"].split()) == 19  # type: ignore[union-attr]
    rows = tree.select(".curve-table tbody tr")
    assert [r.th.get_text() for r in rows[:2] if r.th] == ["Start", "Forward 0"]
    # Forward 0: the model's 65,536 + 16,384 B; measured 32 B more (the step counters).
    assert [td.get_text() for td in rows[1].select("td")] == ["81,920 B", "81,952 B"]


def test_an_htmx_request_gets_the_section_alone(client: TestClient) -> None:
    response = client.get("/measured?stage=zero1", headers={"HX-Request": "true"})
    assert response.text.lstrip().startswith("<title>")
    assert dom(response.text).select_one("header.masthead") is None


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("/measured?stage=dp&impl=fsdp2", "impl=fsdp2 was not measured for data parallelism: choose ddp."),
        ("/measured?stage=zero1&impl=fsdp1", "impl=fsdp1 was not measured for ZeRO-1: choose zero-redundancy."),
        ("/measured?stage=zero2&impl=hsdp", "impl=hsdp was not measured for ZeRO-2: choose fsdp1 or fsdp2."),
        ("/measured?impl=deepspeed", "“impl”"),
        ("/measured?stage=zero4", "“stage”"),
    ],
)
def test_bad_input_is_a_422_page_that_says_why(client: TestClient, url: str, said: str) -> None:
    response = client.get(url)
    assert response.status_code == 422
    message = text(dom(response.text), ".notice-message")
    assert said in message
    assert "value error" not in message.lower()


def test_the_page_links_to_the_stage_measured(client: TestClient) -> None:
    tree = dom(client.get("/?stage=zero2&theme=projector").text)
    assert one(tree, "#measured-link")["href"] == "/measured?stage=zero2&theme=projector"


def test_the_api_serves_the_snapshot_and_the_comparison(client: TestClient) -> None:
    body = client.get("/api/measured").json()
    assert (body["world_size"], body["precision"], body["recipe"], body["layer_weights"]) == (
        8,
        "fp32",
        "fp32-adam",
        4096,
    )
    rows = {(a["stage"], a["impl"]): a for a in body["arrangements"]}
    dp = rows[("dp", "ddp")]["ranks"][0]
    assert (dp["model_bytes"], dp["storage_bytes"], dp["unexplained_bytes"]) == (16 * 32768, 16 * 32768 + 32, 0)
    assert [d["reason"] for d in dp["differences"]] == ["step-counters"]
    assert rows[("zero3", "fsdp2")]["cells_agreeing"] == 0
    schema = client.get("/openapi.json").json()
    assert "/api/measured" in schema["paths"]
    assert "MeasuredOut" in schema["components"]["schemas"]


def test_the_api_is_the_domains_dataclasses_field_for_field(client: TestClient) -> None:
    body = client.get("/api/measured").json()
    arrangement = body["arrangements"][0]
    rank = arrangement["ranks"][0]
    nested = {
        Comparison: body,
        Agreement: arrangement,
        RankAgreement: rank,
        LayerHeld: rank["layers"][0],
        LiveBytes: rank["phases"][0],
        Difference: rank["differences"][0],
        CurvePoint: arrangement["curve"][0],
        ActivationsComparison: body["activations"],
        TermTable: body["activations"]["tables"][0],
        TermRow: body["activations"]["tables"][0]["rows"][0],
        KernelNote: body["activations"]["kernels"][0],
    }
    documented = client.get("/openapi.json").json()["components"]["schemas"]
    for shape, data in nested.items():
        names = {field.name for field in fields(shape)}
        # No field of the web's own: each JSON object has its dataclass's fields, all required in the schema.
        assert set(data) == names, shape
        assert set(documented[shape.__name__]["properties"]) == set(documented[shape.__name__]["required"]) == names
    assert body == TypeAdapter(Comparison).dump_python(comparison(shipped_snapshot()), mode="json")
    # The descriptions are the domain's attribute docstrings.
    unexplained = documented["RankAgreement"]["properties"]["unexplained_bytes"]["description"]
    assert unexplained.startswith("Measured minus model minus the named differences")
    assert documented["MeasuredOut"]["$ref"] == "#/components/schemas/Comparison"


MEASURED = [
    "/measured",
    "/measured?stage=zero1",
    "/measured?stage=zero2",
    "/measured?stage=zero2&impl=fsdp1",
    "/measured?stage=zero3",
    "/measured?stage=zero3&impl=fsdp1",
    "/measured?stage=zero3&impl=hsdp",
]


@pytest.mark.parametrize("url", MEASURED)
def test_every_table_cell_is_labelled_with_its_column_for_narrow_screens(client: TestClient, url: str) -> None:
    tree = dom(client.get(url).text)
    tables = tree.select("#ranks, .curve-table, .activations-table")
    assert len(tables) == 2 + 8
    for table in tables:
        headers = [th.get_text(strip=True) for th in table.select("thead th")]
        for row in table.select("tbody tr, tfoot tr"):
            cells = row.select("td")
            assert cells
            # The row's own header is the first column; each td is labelled with the header above it.
            assert [td.get("data-label") for td in cells] == headers[1:]


def test_ddp_says_its_gradients_are_bucket_views_and_what_the_default_adds(client: TestClient) -> None:
    for url in ("/measured", "/measured?stage=zero1"):
        tree = dom(client.get(url).text)
        assert "gradient_as_bucket_view=True" in text(tree, "#measured-heading")
        # With the default, the gradients again in the buckets: 4 B × 32,768 weights = 131,072 B.
        assert "another 131,072 B" in text(tree, "#pattern")


@pytest.mark.parametrize(
    ("url", "coincide"),
    [
        ("/measured", "within 32 B"),  # DDP: 8 step counters
        ("/measured?stage=zero1", "within 4 B"),
        ("/measured?stage=zero3", "within 32 B"),  # FSDP2
        ("/measured?stage=zero3&impl=hsdp", "within 32 B"),
        ("/measured?stage=zero3&impl=fsdp1", None),
        ("/measured?stage=zero2&impl=fsdp1", None),
        ("/measured?stage=zero2", None),  # FSDP2
    ],
)
def test_the_caption_says_when_the_measured_line_hides_the_model(
    client: TestClient, url: str, coincide: str | None
) -> None:
    tree = dom(client.get(url).text)
    found = tree.select_one(".curve-coincide")
    if coincide is None:
        assert found is None
    else:
        assert found is not None
        assert f"The lines coincide: {coincide}" in found.get_text()


def test_the_fsdp1_curve_says_it_is_not_the_models_and_gives_both_peaks(client: TestClient) -> None:
    tree = dom(client.get("/measured?stage=zero3&impl=fsdp1").text)
    assert text(tree, ".curve-note").startswith("Not the model's shape.")
    # Measured peak: 65,540 B at rest + the whole model's weights and gradients, 2 × 131,072 B.
    assert "measured peak 327,684 B, the model's 98,304 B" in text(tree, "figcaption")
    rows = tree.select(".curve-table tbody tr")
    assert [td.get_text() for td in rows[16].select("td")] == ["98,304 B", "327,684 B"]


def test_the_projector_cuts_no_column_of_any_table() -> None:
    # The cost table's verdicts come first (templates/_widget.html) rather than its columns being cut.
    projector = (Path(__file__).resolve().parents[2] / "static" / "projector.css").read_text()
    assert [rule for rule in re.findall(r"([^{}]+)\{\s*display:\s*none", projector) if "th:nth-child" in rule] == []


def test_the_agreement_says_totals_as_totals_and_the_difference_per_card(client: TestClient) -> None:
    # The review read "Per card, measured +32 B … 4,194,560 B on 8 ranks" as one figure per card.
    said = " ".join(dom(client.get("/measured").text).get_text(" ").split())
    # 4,194,560 - 4,194,304 = 256 B over 8 ranks: 32 B each.
    assert (
        "Measured on 8 ranks together: 4,194,560 B against the model's 4,194,304 B, 100.01% of its bytes (+32 B a card)"
    ) in said


def _rows(tree: BeautifulSoup, table: str) -> dict[str, list[str]]:
    return {
        " ".join(row.th.get_text(" ").split()): [" ".join(td.get_text(" ").split()) for td in row.select("td")]
        for row in tree.select(f"{table} tbody tr")
        if row.th
    }


def test_the_activations_section_draws_each_block_and_choice_term_by_term(client: TestClient) -> None:
    tree = dom(client.get("/measured").text)
    assert text(tree, "#activations-heading") == "Activations, formula against measurement"
    ids = [t["id"] for t in tree.select("#activations table")]
    assert ids == [f"act-{b}-{c}" for b in ("gpt", "llama") for c in ("none", "selective", "full", "head")]
    gpt = _rows(tree, "#act-gpt-none")
    # s = 32, b = 2, h = 64, a = 4: 2as²b = 16,384 B, the mask as²b = 8,192 B, both measured so.
    assert gpt["softmax's output"][:4] == ["2as²b", "16,384 B", "16,384 B", "0 B"]
    assert gpt["attention dropout's mask"][:4] == ["as²b", "8,192 B", "8,192 B", "0 B"]
    assert gpt["LayerNorm's mean"][:4] == ["not counted (2 × 2sb)", "—", "256 B", "+256 B"]
    assert "bf16 here" in gpt["LayerNorm's mean"][4]
    total = [" ".join(td.get_text(" ").split()) for td in one(tree, "#act-gpt-none tfoot tr").select("td")]
    assert total[1:] == ["180,224 B", "180,736 B", "+512 B", "every byte of difference is named."]
    llama = _rows(tree, "#act-llama-selective")
    assert "softmax's log-sum-exp" not in llama  # recomputed with the kernel, as the formula says
    assert _rows(tree, "#act-llama-none")["softmax's log-sum-exp"][:4] == ["4asb", "1,024 B", "1,024 B", "0 B"]
    assert llama["rotary's cos"][:4] == ["not counted (2s·(h/a))", "—", "1,024 B", "+1,024 B"]
    assert list(_rows(tree, "#act-llama-full")) == ["attention norm's input"]
    head = _rows(tree, "#act-llama-head")
    assert head["logits, as fp32 log-probabilities"][:3] == ["4sbv", "81,920 B", "81,920 B"]
    assert all(
        " ".join(td.get_text(" ").split()).endswith("every byte of difference is named.")
        for td in tree.select("#activations tfoot td.reasons")
    )
    kernels = [li.get_text() for li in tree.select("#kernels li")]
    assert len(kernels) == 2
    assert "+16,384 B" in kernels[0]
    assert "+49,152 B" in kernels[1]


def test_the_activations_section_is_in_the_htmx_fragment_too(client: TestClient) -> None:
    response = client.get("/measured?stage=zero2", headers={"HX-Request": "true"})
    assert len(dom(response.text).select(".activations-table")) == 8
