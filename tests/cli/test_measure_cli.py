"""`zero-bands measure`: without torch it says how to get it; the view renders from the shipped snapshot."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.util import find_spec
from pathlib import Path

import pytest

from app.domain.stages import Stage
from app.measure import SNAPSHOT
from app.measure.cut_snapshots import compare_cut
from app.measure.snapshots import Impl, compare, offload_comparison, parse

# A Python in which `import torch` fails, as on a machine without the [measure] extra.
NO_TORCH = """
import sys
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError("No module named 'torch'")
        return None
sys.meta_path.insert(0, NoTorch())
"""


def _run(code: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", NO_TORCH + code], capture_output=True, text=True, check=False, cwd=tmp_path, timeout=120
    )


# Every rank holds a strip of every layer: 8 ranks × 8 layers × 3 bands = 192 partial cells.
@pytest.mark.slow  # a Python of its own, torch hidden, imports the whole app
@pytest.mark.parametrize("impl", ["fsdp2", "hsdp"])
def test_the_view_renders_from_the_shipped_snapshot_without_torch(tmp_path: Path, impl: str) -> None:
    result = _run(
        f"""
from fastapi.testclient import TestClient
from app.main import create_app
client = TestClient(create_app())
page = client.get("/measured?stage=zero3&impl={impl}")
api = client.get("/api/measured")
print(page.status_code, api.status_code, page.text.count('data-state="partial"'), "torch" in sys.modules)
""",
        tmp_path,
    )
    assert result.stdout.split() == ["200", "200", "192", "False"], result.stderr


def test_measure_without_torch_says_which_extra_to_install(tmp_path: Path) -> None:
    result = _run("from app.cli import main\nmain(['measure'])", tmp_path)
    assert result.returncode == 2
    assert "pip install 'zero-bands[measure]'" in result.stderr


def _bytes_only(data: dict[str, object]) -> object:
    """The snapshot without what varies from run to run: timings and versions."""
    arrangements = data["arrangements"]
    assert isinstance(arrangements, list)
    return [{k: v for k, v in a.items() if k != "seconds"} for a in arrangements]


def _offload_bytes(data: dict[str, object]) -> object:
    """The offload arrangement without its timing."""
    offload = data["offload"]
    assert isinstance(offload, dict)
    return {k: v for k, v in offload.items() if k != "seconds"}


def _cut_bytes(data: dict[str, object]) -> object:
    """The cut arrangements without their timings."""
    cut = data["cut"]
    assert isinstance(cut, dict)
    tp = {k: v for k, v in cut["tp"].items() if k != "seconds"}
    schedules = [{k: v for k, v in s.items() if k != "seconds"} for s in cut["pp"]["schedules"]]
    return tp, {**cut["pp"], "schedules": schedules}


@pytest.mark.slow  # a real PyTorch run of seven arrangements, the offload, FSDP2 + TP and the pipeline
def test_the_real_measurement_matches_the_shipped_snapshot_and_the_model(tmp_path: Path) -> None:
    # The README's test line installs the [measure] extra: without torch this fails, it does not skip.
    assert find_spec("torch") is not None, "torch is not installed: pip install -e '.[test,measure]'"
    out = tmp_path / "snapshot.json"
    command = [sys.executable, "-c", "from app.cli import main; main()", "measure", "--out", str(out)]
    result = subprocess.run(command, capture_output=True, text=True, check=False, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    # A progress line per arrangement, the offload and the three cut ones, then one per comparison, all explained.
    assert sum(1 for line in lines if line.startswith("  ") and line.endswith(" s")) == 11
    assert sum(1 for line in lines if line.endswith(", 0 B unexplained")) == 11
    fresh = json.loads(out.read_text())
    shipped = json.loads(SNAPSHOT.read_text())
    assert _bytes_only(fresh) == _bytes_only(shipped)
    assert _offload_bytes(fresh) == _offload_bytes(shipped)  # FSDP2's CPU offload, byte for byte
    assert fresh["activations"] == shipped["activations"]  # the two blocks' saved tensors, byte for byte
    assert _cut_bytes(fresh) == _cut_bytes(shipped)  # FSDP2 + TP and the pipeline, byte for byte
    snapshot = parse(fresh)
    assert snapshot.seconds < 120
    for measured in snapshot.arrangements:
        assert compare(snapshot, measured).unexplained == 0
    assert offload_comparison(snapshot).unexplained == 0
    # HSDP on its 2 × 4 mesh: every rank a quarter of the model, 8 × 4,096 × 16 B / 4, and 8 step counters.
    hsdp = compare(snapshot, snapshot.arrangement(Stage.ZERO3, Impl.HSDP))
    assert hsdp.shard_size == 4
    assert {(r.model_bytes, r.storage_bytes) for r in hsdp.ranks} == {(131_072, 131_072 + 32)}
    # FSDP2 + TP on the 2 × 4 (dp, tp) mesh: 2 blocks of 12 × 64² weights × 16 B ÷ 4 (tp) ÷ 2 (dp), 12 counters;
    # the pipeline's stage: 4 layers × 4,096 weights × 16 B, 4 counters; its first stage under 1F1B holds 2
    # micro-batches of 4 layers' inputs (4 rows × 64 × 4 B each), the second 1.
    cut = compare_cut(snapshot.cut, snapshot.recipe)
    assert cut.unexplained == 0
    tp, one_f_one_b, _ = cut.arrangements
    assert {(r.model_bytes, r.measured_bytes) for r in tp.ranks} == {(2 * 12 * 64 * 64 * 16 // 8, 196_608 + 48)}
    assert {(r.model_bytes, r.measured_bytes) for r in one_f_one_b.ranks} == {(4 * 4096 * 16, 262_144 + 16)}
    assert [r.activations and r.activations.measured_bytes for r in one_f_one_b.ranks] == [8192] * 4 + [4096] * 4
