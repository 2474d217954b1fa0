"""app/web/upload.py and the page's model config: a config.json pasted or uploaded draws that model.

Uploaded: a 303 to the page with the config minimised in its address; refused: the page again, the config
field saying why, with a 4xx (413 over the size); never a 5xx, never the file's markup unescaped.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs, quote, urlsplit

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.domain.hf_config import read_text
from app.domain.presets import STORED, stored_text
from app.serving.address import MAX_ADDRESS
from app.web.inputs import set_aside
from app.web.upload import UploadRefused, uploaded_text
from tests.conftest import dom, examples, text

MIXTRAL = stored_text("mixtral-8x7b-v0.1.json")


def _upload(client: TestClient, data: bytes, query: str = "gpus=16&stage=zero3") -> object:
    return client.post(
        f"/model-config?{query}", files={"file": ("config.json", data, "application/json")}, follow_redirects=False
    )


def _paste(client: TestClient, pasted: str, query: str = "gpus=16&stage=zero3") -> object:
    # The form's empty file input is sent too, as a browser sends it.
    files: dict[str, tuple[str | None, bytes, str | None]] = {
        "file": ("", b"", "application/octet-stream"),
        "text": (None, pasted.encode(), None),
    }
    return client.post(f"/model-config?{query}", files=files, follow_redirects=False)


def _pretty_deepseek() -> str:
    # DeepSeek-V3's config pretty-printed, with an inert key long enough to make it 6.8 KB: in a GET form's
    # address it would meet the 8 KB address limit once percent-encoded.
    config = {**json.loads(stored_text("deepseek-v3.json")), "layer_types": ["full_attention"] * 189}
    return json.dumps(config, indent=4)


def test_a_pasted_config_of_7_kb_goes_by_the_body_to_the_page_with_its_model(client: TestClient) -> None:
    pasted = _pretty_deepseek()
    assert 6_700 < len(pasted) < 7_000
    response = _paste(client, pasted)
    assert response.status_code == 303  # type: ignore[attr-defined]
    location = response.headers["location"]  # type: ignore[attr-defined]
    assert len(location) < MAX_ADDRESS
    page = client.get(location)
    assert page.status_code == 200
    assert text(dom(page.text), "#f-config-note") == ("deepseek_v3: 671,026,419,200 weights, derived from its shapes.")


def test_a_pasted_config_over_64_kb_in_the_body_is_a_413_beside_the_field(client: TestClient) -> None:
    response = _paste(client, json.dumps({"model_type": "llama", "notes": "x" * 70_000}))
    assert response.status_code == 413  # type: ignore[attr-defined]
    assert "over 64 KB" in text(dom(response.text), "#f-config-error")  # type: ignore[attr-defined]


@pytest.mark.parametrize("stored", STORED, ids=[s.file for s in STORED])
def test_every_stored_config_minimised_is_a_short_address(client: TestClient, stored: object) -> None:
    response = _paste(client, json.dumps(json.loads(stored_text(stored.file)), indent=4))  # type: ignore[attr-defined]
    location = response.headers["location"]  # type: ignore[attr-defined]
    # Well under the address limit (8,192), with the run's other fields beside it.
    assert len(location) < 2_000
    assert client.get(location).status_code == 200


def test_a_refused_config_is_the_only_error_not_a_cut_of_the_preset_in_its_place(client: TestClient) -> None:
    page = dom(client.get('/?config={"model_type":"llama"}&ep=8&gpus=16').text)
    assert [p.get_text(" ", strip=True) for p in page.select(".field-error")] == [
        "The config has no hidden_size, which the weight count needs. "
        "Drawn with 30B weights in 8 equal layers, the default."
    ]


def test_an_upload_goes_to_the_page_with_the_config_minimised(client: TestClient) -> None:
    response = _upload(client, MIXTRAL.encode())
    assert response.status_code == 303  # type: ignore[attr-defined]
    location = urlsplit(response.headers["location"])  # type: ignore[attr-defined]
    query = parse_qs(location.query)
    assert location.path == "/"
    assert (query["stage"], query["gpus"]) == (["zero3"], ["16"])
    # The keys read, without the inert ones (rope, token ids, dtype): the link stays short.
    assert query["config"] == [read_text(MIXTRAL).minimal]
    assert "rope_theta" not in query["config"][0]
    page = dom(client.get(response.headers["location"]).text)  # type: ignore[attr-defined]
    # The model's title and its weights derived from the shapes, beside the config.
    assert text(page, "#f-config-note") == "mixtral: 46,702,792,704 weights, derived from its shapes."


@pytest.mark.parametrize(
    ("data", "status", "said"),
    [
        (b"\xff\xfe{}", 422, "not UTF-8"),
        (b"", 422, "No config came"),
        (b" " * (80 * 1024), 413, "over 64 KB"),
        (b'{"model_type": "llama"}', 422, "hidden_size"),
        (b"[1, 2]", 422, "JSON object"),
        (b"[" * 50_000, 422, "nests too deep"),
        (b'{"model_type": "llama", "model_type": "mistral"}', 422, "The config gives model_type twice: keep one."),
        (b'{"hidden_size": ' + b"1" * 5000 + b"}", 422, "a number of more than 4,300 digits"),
    ],
)
def test_a_bad_upload_is_the_page_saying_why(client: TestClient, data: bytes, status: int, said: str) -> None:
    response = _upload(client, data)
    assert response.status_code == status  # type: ignore[attr-defined]
    page = dom(response.text)  # type: ignore[attr-defined]
    assert said in text(page, "#f-config-error")


def test_a_body_not_multipart_is_refused() -> None:
    with pytest.raises(UploadRefused) as refused:
        uploaded_text(b"{}", "application/json")
    assert refused.value.status == 415


def test_the_published_count_is_shown_beside_the_derived_one(client: TestClient) -> None:
    config = {**json.loads(MIXTRAL), "_name_or_path": "mistralai/Mixtral-8x7B-v0.1", "num_parameters": 46_702_792_704}
    page = dom(client.get(f"/?config={quote(json.dumps(config))}").text)
    assert text(page, "#f-config-note") == (
        "mistralai/Mixtral-8x7B-v0.1: 46,702,792,704 weights, derived from its shapes; 46,702,792,704 published in it."
    )
    echoed = client.get(f"/api/memory?config={quote(json.dumps(config))}").json()["inputs"]
    assert echoed["config"]["title"] == "mistralai/Mixtral-8x7B-v0.1"
    assert (echoed["params"], echoed["config"]["params"], echoed["config"]["published_params"]) == (
        46_702_792_704,
        46_702_792_704,
        46_702_792_704,
    )


def test_the_config_decides_the_cut_it_is_checked_against(client: TestClient) -> None:
    # Mixtral's 8 experts take ep=8; the seed's bare count, a dense model, would refuse it.
    config = quote(read_text(MIXTRAL).minimal)
    assert client.get(f"/api/memory?config={config}&gpus=8&ep=8").status_code == 200
    assert client.get("/api/memory?gpus=8&ep=8").status_code == 422
    refused = client.get(f"/api/memory?config={config}&gpus=16&ep=16").json()
    assert "16" in refused["message"]


def test_markup_in_a_config_is_never_written_unescaped(client: TestClient) -> None:
    config = {**json.loads(MIXTRAL), "_name_or_path": "<img src=x onerror=alert(1)>"}
    answer = client.get(f"/?config={quote(json.dumps(config))}")
    assert answer.status_code == 200
    assert "<img src=x" not in answer.text
    refused = client.get(f"/?config={quote(json.dumps({**config, '<b>k</b>': 1}))}")
    assert refused.status_code == 422
    assert "<b>k" not in refused.text
    assert "&lt;b&gt;k&lt;/b&gt;" in refused.text


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=300) | st.text(max_size=200).map(str.encode))
def test_any_file_is_answered_with_a_redirect_or_a_4xx(client: TestClient, data: bytes) -> None:
    response = _upload(client, data)
    assert response.status_code in (303, 413, 422)  # type: ignore[attr-defined]


def test_a_pasted_config_over_64_kb_is_set_aside_saying_so() -> None:
    # Past 65,536 characters the query model refuses it before reading it (an address that long is refused
    # by the test client itself, so the query model is asked directly).
    kept = set_aside({"config": " " * 65_537, "gpus": "8"})
    (problem,) = kept.problems
    assert problem.name == "config"
    assert problem.message == "Paste a Hugging Face config.json of at most 64 KB, or leave it blank."
    assert kept.query.value("gpus") == 8


def test_a_pasted_config_is_sized_at_4096_tokens_not_its_context(client: TestClient) -> None:
    # DeepSeek-V3's config says a context of 163,840 tokens and nothing of its training length.
    body = client.get("/api/memory", params={"config": stored_text("deepseek-v3.json")}).json()
    assert body["inputs"]["seq"] == 4096
    assert (
        "A config.json does not say the length the model was trained at: 4,096 tokens a sequence (its context is "
        "163,840) until seq is set." in body["notes"]
    )
    given = client.get("/api/memory", params={"config": stored_text("deepseek-v3.json"), "seq": "8192"}).json()
    assert given["inputs"]["seq"] == 8192
