"""plan --hardware-file: a device of your own, in the layout of data/hardware.yaml, for the CLI's
job and for --batch and --calibrate rows. Checked against the catalog: the H100 copied under
another name plans exactly like the catalog's H100, and a device with twice its peaks and
memory bandwidth, and GEMM kernels of half the fixed time, runs a 1-GPU job's compute (FLOPs /
peak + elementwise bytes / bandwidth + kernels x their fixed time) in half the time."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest
import yaml

from stepscope.cli import main

ARGS = [
    "--model",
    "llama3-8b",
    "--devices",
    "8",
    "--global-batch",
    "16",
    "--seq-len",
    "4096",
    "--evaluate",
    "tp=2,dp=4",
    "--json",
]


def _h100_as(tmp_path: Path, name: str, speed: float = 1.0) -> Path:
    """The catalog's H100 under another name, its peaks and memory bandwidth x ``speed`` and its
    GEMM kernels' fixed time / ``speed``."""
    doc = yaml.safe_load(resources.files("stepscope.data").joinpath("hardware.yaml").read_text())
    h100 = next(d for d in doc["devices"] if d["name"] == "H100-SXM")
    mine = {
        **h100,
        "name": name,
        "match": name,
        "hbm_gbps": h100["hbm_gbps"] * speed,
        "peak_tflops": {k: (v * speed if v else v) for k, v in h100["peak_tflops"].items()},
        "gemm_kernel_us": h100["gemm_kernel_us"] / speed,
    }
    path = tmp_path / "mine.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "devices": [mine]}), encoding="utf-8")
    return path


def _plan(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(["plan", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_copy_of_a_catalog_device_plans_like_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _h100_as(tmp_path, "MyH100")
    ref = _plan(["--hardware", "h100", *ARGS], capsys)
    mine = _plan(["--hardware", "myh100", "--hardware-file", str(path), *ARGS], capsys)  # names are case-insensitive
    assert mine["step_time_s"] == ref["step_time_s"] and mine["memory_gb"] == ref["memory_gb"]


def test_twice_the_peak_and_bandwidth_halve_the_compute(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = [
        "--model",
        "llama3-8b",
        "--devices",
        "1",
        "--global-batch",
        "1",
        "--seq-len",
        "1024",
        "--evaluate",
        "dp=1",
        "--json",
    ]
    ref = _plan(["--hardware", "h100", *one], capsys)
    fast = _plan(["--hardware", "Fast", "--hardware-file", str(_h100_as(tmp_path, "Fast", 2.0)), *one], capsys)
    assert fast["time_s"]["compute"] == pytest.approx(ref["time_s"]["compute"] / 2, rel=1e-9)


def test_batch_rows_use_the_file_given_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _h100_as(tmp_path, "MyH100")
    ref = _plan(["--hardware", "h100", *ARGS], capsys)
    batch = tmp_path / "runs.jsonl"
    batch.write_text(
        json.dumps(
            {
                "model": "llama3-8b",
                "hardware": "MyH100",
                "devices": 8,
                "global_batch": 16,
                "seq_len": 4096,
                "strategy": "tp=2,dp=4",
            }
        )
        + "\n",
        encoding="utf-8",
    )
    assert main(["plan", "--batch", str(batch), "--hardware-file", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] == ref["step_time_s"]
    assert main(["plan", "--batch", str(batch), "--json"]) == 0  # without the file the device is unknown, per row
    assert "unknown hardware 'MyH100'" in json.loads(capsys.readouterr().out)["error"]
