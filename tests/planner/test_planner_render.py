"""The lines `plan --evaluate` prints under its table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main
from stepscope.report.plan_lines import memory_line, rate_line


def _rec(total_gb: float, headroom_gb: float) -> dict[str, object]:
    return {"memory_gb": {"total": total_gb}, "headroom_gb": headroom_gb, "fits": headroom_gb >= 0}


def test_memory_line_gives_headroom_and_flags_a_tight_fit() -> None:
    roomy = memory_line(_rec(70.0, 10.0))
    assert roomy == "memory: fits, 70.0 GB per device of 80.0 GB (10.0 GB headroom)"
    tight = memory_line(_rec(76.5, 3.5))  # 3.5 GB < 5% of 80 GB = 4 GB
    assert tight.startswith("memory: fits, 76.5 GB per device of 80.0 GB (3.5 GB headroom); less than 5%")
    assert "fragmentation" in tight
    assert (
        memory_line(_rec(76.0, 4.0)) == "memory: fits, 76.0 GB per device of 80.0 GB (4.0 GB headroom)"
    )  # exactly 5%: not flagged
    assert memory_line(_rec(105.9, -25.9)) == "memory: does not fit, 105.9 GB per device of 80.0 GB (25.9 GB over)"


def test_evaluate_prints_the_memory_line_from_the_same_numbers_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "4096",
        "--evaluate",
        "tp=2,dp=4,mb=2",
    ]
    assert main([*args, "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert main(args) == 0
    out = capsys.readouterr().out
    total, free = rec["memory_gb"]["total"], rec["headroom_gb"]
    assert total + free == pytest.approx(85.018279936)  # H100 "80 GB": 79.18 GiB as CUDA reports it
    word = "fits" if rec["fits"] else "does not fit"
    assert f"memory: {word}, {total:,.1f} GB per device of 85.0 GB" in out


def test_devices_must_fill_whole_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "--model", "llama3-8b", "--hardware", "h100", "--global-batch", "8", "--seq-len", "1024"]
    assert main([*base, "--devices", "8", "--devices-per-node", "3"]) == 2  # 2 2/3 nodes
    err = capsys.readouterr().err
    assert "8 devices do not fill whole nodes of 3" in err and "(e.g. 2;" in err  # the largest divisor of 8 up to 3
    assert main([*base, "--devices", "4", "--devices-per-node", "8", "--top", "1"]) == 0  # part of one node: fine
    assert main([*base, "--devices", "12", "--devices-per-node", "6", "--top", "1"]) == 0
    capsys.readouterr()


def test_a_what_if_needs_a_positive_measured_step(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "8",
        "--seq-len",
        "1024",
        "--evaluate",
        "tp=8",
        "--baseline",
        "tp=4,dp=2",
        "--measured-step-s",
    ]
    for bad in ("-1", "0", "nan", "inf"):
        with pytest.raises(SystemExit) as exc:
            main([*args, bad])
        assert exc.value.code == 2
        assert "--measured-step-s: must be a finite number more than 0" in capsys.readouterr().err


def test_rate_line_states_throughput_and_both_utilizations() -> None:
    rec = {
        "step_time_s": 2.5,
        "tokens_per_s_per_device": 12345.6,
        "tflops_per_device": 400.4,
        "mfu": 0.4047,
        "hfu": 0.5396,
    }
    assert rate_line(rec) == (
        "step 2.5 s: 12,346 tokens/s per device, 400 model TFLOP/s per device, MFU 40.5%, HFU 54.0%"
    )


def test_caveats_name_the_least_validated_terms() -> None:
    from stepscope.report.plan_lines import caveat_lines

    plain = [{"strategy": {"cp": 1}}]
    assert caveat_lines(plain, measured_ceiling=True, device="H100-SXM", fp8_rowwise=False) == []
    lines = caveat_lines([*plain, {"strategy": {"cp": 4}}], measured_ceiling=False, device="TPU-v5p", fp8_rowwise=True)
    assert len(lines) == 3
    assert lines[0].startswith("note: TPU-v5p has no measured matmul ceiling") and "0.7 prior" in lines[0]
    assert "cp > 1" in lines[1] and "rowwise fp8" in lines[2]
    assert caveat_lines(plain, measured_ceiling=True, device="H100-SXM", fp8_rowwise=False, moe=True)[0].startswith(
        "note: MoE step times are the least validated"
    )
    # gradient traffic a fifth of the step over 64 nodes: the regime of nanotron's 512-GPU runs
    wide = {"strategy": {"cp": 1, "dp": 128}, "time_s": {"dp": 0.25}, "step_time_s": 1.0}
    narrow = {"strategy": {"cp": 1, "dp": 128}, "time_s": {"dp": 0.15}, "step_time_s": 1.0}
    assert (
        "DP/FSDP traffic is 20%+"
        in caveat_lines([wide], measured_ceiling=True, device="H100-SXM", fp8_rowwise=False, nodes=64)[0]
    )
    assert caveat_lines([narrow], measured_ceiling=True, device="H100-SXM", fp8_rowwise=False, nodes=64) == []
    assert caveat_lines([wide], measured_ceiling=True, device="H100-SXM", fp8_rowwise=False, nodes=16) == []


def test_moe_models_carry_the_moe_caveat(capsys: pytest.CaptureFixture[str]) -> None:
    base = ["plan", "--hardware", "h100", "--devices", "64", "--global-batch", "64", "--seq-len", "4096"]
    assert main([*base, "--model", "mixtral-8x7b", "--evaluate", "tp=1,pp=1,dp=64,ep=8,zero=1"]) == 0
    assert "MoE step times are the least validated" in capsys.readouterr().out
    assert main([*base, "--model", "llama3-8b", "--evaluate", "tp=1,pp=1,dp=64,zero=1"]) == 0
    assert "MoE step times" not in capsys.readouterr().out
    assert main([*base, "--model", "mixtral-8x7b", "--evaluate", "tp=1,pp=1,dp=64,ep=8,zero=1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["caveats"][0].startswith("MoE step times are the least validated")
    assert main([*base, "--model", "llama3-8b", "--evaluate", "tp=1,pp=1,dp=64,zero=1", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["caveats"] == []


def test_a_device_without_a_measured_ceiling_is_said_unless_calibrated(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [
        "plan",
        "--model",
        "llama3-8b",
        "--devices",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "4096",
        "--evaluate",
        "dp=8,zero=3",
    ]
    assert main([*base, "--hardware", "tpu-v5p"]) == 0
    assert "TPU-v5p has no measured matmul ceiling" in capsys.readouterr().out
    assert main([*base, "--hardware", "h100"]) == 0
    assert "no measured matmul ceiling" not in capsys.readouterr().out


def test_a_calibrated_or_measured_gemm_efficiency_drops_the_prior_note() -> None:

    from stepscope.planner.job import make_job
    from stepscope.planner.plans import _caveats
    from stepscope.planner.search import hardware, model

    job = make_job(model("llama3-8b"), hardware("tpu-v5p"), 64, 64, 64, 2048)
    rows = [{"strategy": {"cp": 1}}]
    assert any("no measured matmul ceiling" in line for line in _caveats(job, rows))
    assert _caveats(job.replaced(gemm_scale=1.2), rows) == []  # fitted by --calibrate
    assert _caveats(job.replaced(gemm_eff=0.6), rows) == []  # measured by --from-analysis


def test_gb200_nodes_are_nvl72_racks(capsys: pytest.CaptureFixture[str]) -> None:
    """A GB200 NVL72 rack is one NVLink domain of 72 GPUs: the gradient reduction over 64 GPUs stays
    on NVLink by default (as with --devices-per-node 64), not on the network between 8-GPU nodes;
    256 GPUs do not fill racks of 72, and the error suggests 64 (the largest divisor of 256 up to 72)."""
    base = [
        "plan",
        "--model",
        "mixtral-8x7b",
        "--hardware",
        "gb200",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
        "--evaluate",
        "tp=1,pp=1,dp=64,ep=8,zero=1",
        "--json",
    ]
    dp_s = {}
    for per_node in (None, "64", "8"):
        assert main([*base, "--devices", "64", *(["--devices-per-node", per_node] if per_node else [])]) == 0
        dp_s[per_node] = json.loads(capsys.readouterr().out)["time_s"]["dp"]
    assert dp_s[None] == dp_s["64"] < dp_s["8"] / 5
    assert main([*base, "--devices", "256"]) == 2
    assert "256 devices do not fill whole nodes of 72" in (err := capsys.readouterr().err) and "(e.g. 64;" in err


def test_the_plan_renderers_are_registered_beside_analyze_ones() -> None:
    from stepscope.report import plan_html, plan_json, plan_terminal, registry

    assert {r.name for r in registry.for_subject("plan")} == {"terminal", "json", "html"}
    assert registry.for_path("plan", "plan.html") is plan_html.RENDERER
    assert registry.for_path("plan", "rows.json") is plan_json.RENDERER
    assert registry.by_name("plan", "terminal") is plan_terminal.RENDERER
    assert registry.by_name("analysis", "json") is not plan_json.RENDERER  # lookups keep to their subject


def test_dash_o_writes_the_bytes_of_html_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``-o x.html -o x.json`` (by extension) and ``-o - --format json`` write what ``--html`` and
    ``--json`` do; a file output keeps the table on the terminal."""
    args = ["plan", "--model", "llama3-8b", "--hardware", "h100", "--devices", "8", "--global-batch", "32"]
    args += ["--seq-len", "4096", "--top", "3"]
    assert main([*args, "--html", str(tmp_path / "a.html"), "--json"]) == 0
    json_out = capsys.readouterr().out
    assert main([*args, "-o", str(tmp_path / "b.html"), "-o", str(tmp_path / "b.json")]) == 0
    assert "Strategies, fastest that fit first" in capsys.readouterr().out  # the table
    assert (tmp_path / "b.html").read_bytes() == (tmp_path / "a.html").read_bytes()
    assert (tmp_path / "b.json").read_text() + "\n" == json_out  # standard output ends the line
    assert main([*args, "-o", "-", "--format", "json"]) == 0
    assert capsys.readouterr().out == json_out
    assert main([*args, "-o", "-", "--format", "json", "--json"]) == 2  # one output on standard output


def test_a_rows_strategy_text_reads_back_as_the_same_strategy(capsys: pytest.CaptureFixture[str]) -> None:
    """The strategy as a line prints it (the what-if's baseline and pick) is an --evaluate string:
    the TP overlap mechanism by name (``tp_overlap=bwd``, not its index, which would not parse)."""
    from stepscope.planner.strategy import parse_strategy
    from stepscope.planner.vocab import TP_OVERLAP
    from stepscope.report.plan_lines import _strategy_text

    args = ["plan", "--model", "llama3-8b", "--hardware", "h100", "--devices", "8", "--global-batch", "16"]
    args += ["--seq-len", "4096", "--set", "tp_overlap=bwd", "--set", "sequence_parallel=false"]
    assert main([*args, "--evaluate", "tp=4,dp=2", "--json"]) == 0
    strategy = json.loads(capsys.readouterr().out)["strategy"]
    assert strategy["tp_overlap"] == "bwd"
    text = _strategy_text(strategy)
    assert "tp_overlap=bwd" in text
    assert TP_OVERLAP[int(parse_strategy(text)["tp_overlap"][0])] == "bwd"
