"""Device memory capacity: vendors write "80 GB" for 80 GiB of HBM, and the runtime reports a little
less. The catalog's measured figures are checked against the device properties recorded in the
bundled traces (an independent source: what CUDA / ROCm told the profiler), the fallback for
unmeasured devices by hand, and the planner's fit test against both."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from stepscope.catalog.hardware import by_name, detect_from_properties
from stepscope.cli import main
from stepscope.trace.loader import load

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "traces"


def test_measured_capacity_is_what_the_bundled_traces_report() -> None:
    a100 = load(str(EXAMPLES / "a100_nccl_rank0.json.gz")).ranks[0].device_properties[0]
    hw = detect_from_properties(a100)
    assert hw is not None and hw.name == "A100-SXM-40GB"
    assert hw.capacity_bytes == a100["totalGlobalMem"] == 42_297_524_224  # 39.39 GiB, not 40e9
    gfx950 = load(str(EXAMPLES / "jax_gpu_te_fused_attn.xplane.pb")).ranks[0].device_properties[0]
    assert (gfx950["computeMajor"], gfx950["computeMinor"], gfx950["numSms"]) == (9, 5, 256)  # MI350X/MI355X
    assert by_name("MI355X").capacity_bytes == gfx950["totalGlobalMem"] == 309_220_868_096


def test_unmeasured_devices_read_the_vendor_figure_as_gib_less_the_least_measured_share() -> None:
    h200 = by_name("H200")
    assert h200.hbm_bytes is None
    assert h200.capacity_bytes == pytest.approx(141 * 1073741824 * 0.984)  # 148.98 GB
    # below what NVML reports for an H200 (143,771 MiB = 150.75 GB, Modal's GPU memory table, 2024)
    assert h200.capacity_bytes is not None and h200.capacity_bytes < 143_771 * 2**20
    # a two-core TPU v4 chip seen per core: half the chip's 32 GiB
    assert by_name("TPU-v4-core").capacity_bytes == pytest.approx(16 * 1073741824 * 0.984)


def test_a_tensorcore_keeps_its_chips_static_memory() -> None:
    """XLA assigns a TPU program's memory ahead of time whether a profile shows chips or
    TensorCores: the per-core device reserves nothing either."""
    assert by_name("TPU-v7x").static_memory and by_name("TPU-v7x-core").static_memory
    assert by_name("TPU-v4-core").static_memory == by_name("TPU-v4").static_memory


def _device(tmp_path: Path, **memory: float) -> Path:
    """A device file (a new name each time: the catalog is cached by path)."""
    dev = {
        "name": "Mem",
        "match": "Mem",
        "peak_tflops": {"bf16": 989.4},
        "hbm_gbps": 3350,
        "intra_node_gbps": 450,
        **memory,
    }
    path = tmp_path / f"mem{len(list(tmp_path.iterdir()))}.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "devices": [dev]}), encoding="utf-8")
    return path


def test_the_fit_is_decided_against_the_capacity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "mem",
        "--devices",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "4096",
        "--evaluate",
        "dp=8,mb=2",
        "--json",
    ]
    assert main([*args, "--hardware-file", str(_device(tmp_path, hbm_gb=80))]) == 0
    total = json.loads(capsys.readouterr().out)["memory_gb"]["total"]
    # a device whose runtime reports 1 GB more than the strategy needs fits it, 1 GB less does not
    for extra_gb, fits in ((1.0, True), (-1.0, False)):
        assert (
            main([*args, "--hardware-file", str(_device(tmp_path, hbm_gb=80, hbm_bytes=int((total + extra_gb) * 1e9)))])
            == 0
        )
        rec = json.loads(capsys.readouterr().out)
        assert rec["fits"] is fits
        assert rec["headroom_gb"] == pytest.approx(extra_gb, abs=1e-6)


@pytest.mark.parametrize("bad", [-5, "lots"])
def test_a_bad_capacity_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: object) -> None:
    path = _device(tmp_path, hbm_gb=80, hbm_bytes=bad)  # type: ignore[arg-type]
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-8b",
                "--hardware",
                "mem",
                "--hardware-file",
                str(path),
                "--devices",
                "8",
                "--global-batch",
                "16",
                "--seq-len",
                "4096",
                "--evaluate",
                "dp=8",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "mem0.yaml" in err and "hbm_bytes" in err


def test_the_search_says_what_it_fits_against(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "--model", "llama3-8b", "--devices", "8", "--global-batch", "64", "--seq-len", "8192", "--top", "1"]
    assert main([*base, "--hardware", "h100"]) == 0
    assert (
        "memory per device: 85.0 GB on H100-SXM (as CUDA/ROCm report it), 3 GB of it reserved"
        in capsys.readouterr().out
    )
    assert main([*base, "--hardware", "h200"]) == 0  # 141 x 1073741824 x 0.984 = 148.98e9 B
    assert "memory per device: 149.0 GB on H200 (141 GiB x 0.984, no measured figure)" in capsys.readouterr().out


def test_a_what_if_from_a_trace_fits_against_the_memory_the_trace_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The analyze report carries the traced device's memory (the bundled A100 trace's runtime
    reported 42,297,524,224 B); a what-if on the same device fits against it."""
    report = tmp_path / "r.json"
    trace = EXAMPLES / "a100_nccl_rank0.json.gz"
    assert main(["analyze", str(trace), "--json", str(report), "-q"]) == 0
    hw = json.loads(report.read_text(encoding="utf-8"))["ranks"][0]["hardware"]
    assert hw["name"] == "A100-SXM-40GB" and hw["memory_bytes"] == 42_297_524_224
    capsys.readouterr()
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-8b",
                "--hardware",
                "a100-40gb",
                "--devices",
                "8",
                "--global-batch",
                "8",
                "--seq-len",
                "2048",
                "--evaluate",
                "tp=8,mb=1",
                "--baseline",
                "dp=8,mb=1",
                "--from-analysis",
                str(report),
                "--json",
            ]
        )
        == 0
    )
    rec = json.loads(capsys.readouterr().out)
    assert rec["calibration"]["trace_memory_gb"] == pytest.approx(42.297524224)
    assert rec["memory_gb"]["total"] + rec["headroom_gb"] == pytest.approx(42.297524224)


def test_h800_is_in_the_catalog_by_its_alias(capsys: pytest.CaptureFixture[str]) -> None:
    """DeepSeek-V3's device: the H100 SXM's die with NVLink cut to 400 GB/s (200 per direction);
    no measured capacity, so 80 GiB x 0.984 = 84,524,956,385 B."""
    base = ["plan", "--model", "llama3-8b", "--devices", "8", "--global-batch", "64", "--seq-len", "8192", "--top", "1"]
    assert main([*base, "--hardware", "h800"]) == 0
    assert "memory per device: 84.5 GB on H800-SXM (80 GiB x 0.984, no measured figure)" in capsys.readouterr().out
    from stepscope.planner.search import hardware

    h800, h100 = hardware("H800"), hardware("h100")
    assert h800.intra_node_gbps == 200 and h100.intra_node_gbps == 450
    assert h800.peak_tflops["bf16"] == h100.peak_tflops["bf16"] and h800.peak_tflops["fp64"] == 1.0


def test_the_search_keeps_a_margin_free_before_it_ranks_by_step(run_json: Callable[..., Any]) -> None:
    """Llama 3 8B on 8 H100 (85.0 GB visible): the fastest rows by step alone sit within 5% of the
    device; with the margin the first row leaves at least 5% free and is no faster than the
    margin-free ranking's first row; static TPU memory keeps no margin."""
    job = ["plan", "--model", "llama3-8b", "--hardware", "h100", "--devices", "8", "--global-batch", "64"]
    job += ["--seq-len", "8192", "--top", "3", "--json"]
    kept = run_json(*job)["rows"]
    bare = run_json(*job, "--set", "memory_margin=0")["rows"]
    cap = kept[0]["memory_gb"]["total"] + kept[0]["headroom_gb"]
    assert kept[0]["headroom_gb"] >= 0.05 * cap
    assert bare[0]["step_time_s"] <= kept[0]["step_time_s"]
    assert bare[0]["headroom_gb"] < 0.05 * cap  # the case the margin is for
