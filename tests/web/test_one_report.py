"""One report per request: the headline and the change note say one figure, and each is worked out once.

The change note once took bytes per weight from the recipe alone, while the headline took the card's
terms: with DeepSpeed's accounting the page said 4.25 and "now 3.75". And the views once asked the
domain again for what the report held: one page computed the peak's moment 11 times for 4 stages.
"""

from __future__ import annotations

import functools
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from app.domain import communication, host, layers, overheads, scenario, sizing, state_bytes, step, terms
from app.main import create_app
from app.serving.config import Settings
from tests.conftest import dom, one, text


@pytest.fixture(scope="module")
def uncached() -> Iterator[TestClient]:
    """The app without its response cache, so that every request is computed."""
    with TestClient(create_app(Settings(cache_bytes=0))) as test_client:
        yield test_client


# Each figure worked out by hand: DeepSpeed adds fp32 gradients (4 B), split by ZeRO-2, so ZeRO-2
# keeps 2 + (2 + 4 + 4 + 8) / 8 = 4.25 and ZeRO-1 2 + 2 + (4 + 4 + 8) / 8 = 6.00, a drop of 1.75.
# FSDP2's ZeRO-2 shards its fp32 weights, their gradients and the optimizer state: (4 + 4 + 8) / 8 =
# 2.00; it has no ZeRO-1 of its own, so ZeRO-1 is the paper's 2 + 2 + 12 / 8 = 5.50, a drop of 3.50. A card
# of 30e9 weights: 4.25 and 6.00 B a weight, 127.5e9 and 180e9 B = 118.7 and 167.6 GiB; 2.00 and 5.50, 55.9
# and 153.7 GiB.
TWO_TRUTHS = [
    ("/?stage=zero2&accounting=deepspeed&from=zero1", "4.25", "6.00", "1.75", "118.7 GiB, was 167.6 GiB"),
    ("/?stage=zero2&accounting=fsdp2&from=zero1", "2.00", "5.50", "3.50", "55.9 GiB, was 153.7 GiB"),
]


@pytest.mark.parametrize(("url", "now", "was", "dropped", "per_gpu"), TWO_TRUTHS)
def test_the_headline_and_the_change_note_say_one_figure(
    client: TestClient, url: str, now: str, was: str, dropped: str, per_gpu: str
) -> None:
    page = dom(client.get(url).text)
    headline = one(page, "p.headline strong").get_text()
    note = text(page, "#change-note")
    assert headline == f"{now} bytes"
    assert note.endswith(f"drops {dropped} of its {was} bytes per weight (now {now}). Each GPU keeps {per_gpu}.")
    # The live region says the same switch in the same words (out of band, with the swap's fragment).
    fragment = dom(client.get(url, headers={"HX-Request": "true"}).text)
    assert text(fragment, "#narration") == note


def _patch_everywhere(monkeypatch: pytest.MonkeyPatch, owner: object, name: str, counts: Counter[str]) -> None:
    """Count every call of `owner.name`, under every name a module of the app imported it by."""
    original: Callable[..., Any] = getattr(owner, name)
    key = f"{getattr(owner, '__name__', owner)}.{name}"

    @functools.wraps(original)
    def counted(*args: Any, **kwargs: Any) -> Any:
        # Keyed by what it is asked: the bisections' runs of other sizes and batches are other keys.
        asked = tuple(tuple(sorted(a.items())) if isinstance(a, dict) else a for a in args)
        counts[f"{key} {hash((asked, tuple(sorted(kwargs.items()))))}"] += 1
        return original(*args, **kwargs)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("app."):
            for attribute, value in list(vars(module).items()):
                if value is original:
                    monkeypatch.setattr(module, attribute, counted)


COUNTED = [
    (terms, "peak_moment"),
    (terms, "peak_bytes"),
    (sizing, "peak_moment"),
    (sizing, "theory_peak_bytes"),
    (sizing, "overheads"),
    (sizing, "counted_overhead_bytes"),
    (sizing, "stage_report"),
    (sizing, "max_params_that_fit"),
    (sizing, "max_batch_that_fits"),
    (overheads, "overhead_items"),
    (state_bytes, "per_gpu_bytes"),
    (communication, "transfers"),
    (host, "host_report"),
    (step, "step"),
]
RUN = "stage=zero3&model=llama-3-8b&capacity=80GB&overheads=1"
BY_NUMBERS = tuple(
    f"app.domain.{name} " for name in ("overheads.overhead_items", "terms.peak_bytes", "terms.peak_moment")
)


@pytest.mark.parametrize(
    "url", [f"/?{RUN}", f"/?{RUN}&phase=5", f"/?{RUN}&from=zero1", f"/api/memory?{RUN}", f"/api/step?{RUN}&phase=5"]
)
def test_a_request_works_out_each_figure_once_per_stage(
    uncached: TestClient, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    counts: Counter[str] = Counter()
    for owner, name in COUNTED:
        _patch_everywhere(monkeypatch, owner, name, counts)
    assert uncached.get(url).status_code == 200
    # A figure of one stage of one run, asked for more than once, was worked out again. `overhead_items` and
    # `terms`' peak and moment are keyed by their numbers, not their run: what would make it fit tries cuts
    # (fixes._cut) whose numbers are the run's own (cp 2 at rest), and a pipeline's middle stages are equal
    # cards; each is another run or card (sizing's figures, keyed by the run, stay once).
    assert {key: n for key, n in counts.items() if n > 1 and not key.startswith(BY_NUMBERS)} == {}
    per_function = Counter(key.split(" ")[0] for key in counts)
    assert per_function["app.domain.sizing.stage_report"] == 4
    # A page at a phase draws the step's chart, every stage's line: each stage's step, once. The API's step
    # is one stage's.
    steps = 0 if "phase=" not in url else 1 if url.startswith("/api/") else 4
    assert per_function["app.domain.step.step"] == steps


HX = {"HX-Request": "true"}
BARE = "stage=zero2&params=7000000000&capacity=80GB&overheads=1"
# (url, headers, status, column moments worked out). The shaped model's moments are worked out twice, for
# one sequence and for none: every other micro-batch the bisections try is one sequence's, multiplied.
# A bare count's layers are other layers at each size the bisection for the largest model tries (its
# overheads count, so the size changes them): each of those once, however many stages ask.
ONE_RESOLVE = [
    (f"/?{RUN}", {}, 200, 2),
    (f"/?{RUN}", HX, 200, 2),
    (f"/?{RUN}&phase=5", HX, 200, 2),
    (f"/?{RUN}&gpus=0", {}, 422, 2),  # set aside: the valid rest drawn, and its "Copy as" links
    (f"/?{BARE}", {}, 200, None),
    (f"/embed?{RUN}", {}, 200, 2),
    (f"/embed?{RUN}&gpus=0", {}, 422, 0),  # an embed without the calculator says why, and draws nothing
    (f"/compare?{RUN}", {}, 200, 2),
    # And, for the stages over the card, each run what would make it fit tries with layers of its own (other
    # recomputation, other sequences), each once: the runs with the same layers share the request's memo.
    # The cut's knobs (tp, cp, pp) are runs of layers of their own too: 9 before them, 20 with them.
    (f"/api/memory?{RUN}", {}, 200, 20),
    (f"/api/layout?{RUN}", {}, 200, 0),
    (f"/api/step?{RUN}&phase=5", {}, 200, 2),
    (f"/api/timeline?{RUN}", {}, 200, 2),
    (f"/api/config?{RUN}&format=deepspeed", {}, 200, 0),
]


@pytest.mark.parametrize(("url", "headers", "status", "moments"), ONE_RESOLVE)
def test_a_request_resolves_its_run_once_and_works_out_each_moment_once(
    uncached: TestClient,
    monkeypatch: pytest.MonkeyPatch,
    url: str,
    headers: dict[str, str],
    status: int,
    moments: int | None,
) -> None:
    """The route resolves the run and hands it down; the bisections' runs share the moments worked out.

    The page once resolved its run twice (its "Copy as" links again), and each run a bisection tried
    built its column moments afresh: 204 times for 18 inputs on this page.
    """
    counts: Counter[str] = Counter()
    _patch_everywhere(monkeypatch, scenario, "resolve", counts)
    _patch_everywhere(monkeypatch, layers, "column_moments", counts)
    assert uncached.get(url, headers=headers).status_code == status
    per_function = Counter(key.split(" ")[0] for key in counts.elements())
    assert per_function["app.domain.scenario.resolve"] == 1
    assert {key: n for key, n in counts.items() if n > 1} == {}
    if moments is not None:
        assert per_function["app.domain.layers.column_moments"] == moments
    else:
        assert per_function["app.domain.layers.column_moments"] > 8  # the bisection's sizes, each once


def test_the_holding_of_each_cell_is_asked_for_once(uncached: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    asked: Counter[tuple[int, int, str]] = Counter()
    original = step.Phase.holding

    def holding(self: step.Phase, card_index: int, column: int, band: Any) -> step.Holding:
        asked[card_index, column, str(band)] += 1
        return original(self, card_index, column, band)

    monkeypatch.setattr(step.Phase, "holding", holding)
    page = dom(uncached.get(f"/?{RUN}&phase=5").text)
    cells = page.select("#grid .cell")
    assert len(cells) == 8 * 8 * 4  # 8 cards of 8 columns of 4 bands: ZeRO-3 freezes nothing here
    assert set(asked.values()) == {1}
    assert len(asked) == len(cells)


def test_the_bisections_are_bounded(uncached: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """The largest model and micro-batch bisect: some 50 peaks of other runs a stage, not unbounded."""
    counts: Counter[str] = Counter()
    _patch_everywhere(monkeypatch, terms, "peak_bytes", counts)
    assert uncached.get(f"/?{RUN}").status_code == 200
    # 2 × 32 halvings for the size (doubling then bisecting up to 2^40) and 17 for a batch of up to 65,536.
    assert 0 < sum(counts.values()) <= 4 * (2 * 42 + 2 * 18)
