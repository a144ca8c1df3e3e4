"""Real traces generated with CPU PyTorch 2.13.0 and 2 gloo ranks, through the whole pipeline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.cli import main
from tests import synth

pytestmark = pytest.mark.torch
SLEEP_MS = 60.0  # large against CPU-contention noise (a shared 2-core CI machine)


@pytest.fixture(scope="module")
def gloo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("gloo")
    script = Path(__file__).resolve().parents[2] / "scripts" / "gen_gloo_traces.py"
    subprocess.run(
        [
            sys.executable,
            str(script),
            str(out),
            "--ranks",
            "2",
            "--slow-loader-rank",
            "1",
            "--loader-sleep-ms",
            str(SLEEP_MS),
            "--port",
            str(synth.free_port()),
        ],
        check=True,
        timeout=600,
    )
    return out


def test_slow_data_loader_found(gloo_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["analyze", str(gloo_dir), "--json", str(out), "--html", str(tmp_path / "r.html"), "-q"]) == 0
    doc = json.loads(out.read_text())
    ranks = {r["rank"]: r for r in doc["ranks"]}
    assert set(ranks) == {0, 1}
    for r in ranks.values():
        assert len(r["steps"]) == 3
        for s in r["steps"]:
            assert s["compute_ns"] + s["exposed_comm_ns"] + s["exposed_memcpy_ns"] + s["idle_ns"] == s["step_time_ns"]
    # the injected sleep is a lower bound on rank 1's data-loading time in every step (1 item/batch)
    for s in ranks[1]["steps"]:
        assert s["cpu"]["dataloader_ns"] >= SLEEP_MS * 1e6
    for s in ranks[0]["steps"]:
        assert s["cpu"]["dataloader_ns"] < SLEEP_MS * 1e6 / 2
    # the fast rank waits for the slow one inside the gradient all-reduce: its exposed
    # communication exceeds the slow rank's by about the injected sleep (the all-reduce itself
    # takes a few ms either way, more under CPU contention, so compare the two ranks)
    med0 = sorted(s["exposed_comm_ns"] for s in ranks[0]["steps"])[1]
    med1 = sorted(s["exposed_comm_ns"] for s in ranks[1]["steps"])[1]
    assert med0 - med1 > SLEEP_MS * 1e6 / 2
    assert "all_reduce" in ranks[0]["steps"][0]["collectives"]
