"""Counts and settings no job can have (fractional devices, JSON's 1e400 read as infinity, NaN)
are refused with one line naming them: on the command line of plan and analyze (exit 2) and per
--batch record (an "error" line, the other records still evaluated), never truncated, planned as
given or a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stepscope.cli import main

TRACE = str(Path(__file__).resolve().parents[2] / "examples" / "traces" / "a100_nccl_rank0.json.gz")

BASE = [
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
]
GOOD = '{"model": "llama3-8b", "hardware": "h100", "devices": 8, "global_batch": 8, "seq_len": 1024, "strategy": "tp=8"'


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--set", "reserve_gb=inf"], "reserve_gb must be a finite number >= 0 (GB), not inf"),
        (["--set", "reserve_gb=nan"], "reserve_gb must be a finite number >= 0 (GB), not nan"),  # nan < 0 is False
        (["--set", "dp_bucket_mb=inf"], "dp_bucket_mb must be a finite number >= 0 (MB), not inf"),
        (["--set", "moe_imbalance=inf"], "moe_imbalance must be a finite number >= 1"),
        (["--devices-per-node", "0"], "devices per node must be a whole number >= 1, not 0"),  # 0 is not "the default"
    ],
)
def test_flags(flags: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(BASE + flags) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("record", "says"),
    [
        (
            GOOD.replace('"devices": 8', '"devices": 1e400') + "}",
            "devices must be a whole number up to 2,147,483,648, not inf",
        ),
        (
            GOOD.replace('"devices": 8', '"devices": 8.5') + "}",
            "devices must be a whole number up to 2,147,483,648, not 8.5",
        ),  # not rounded to 8
        (
            GOOD.replace('"seq_len": 1024', '"seq_len": true') + "}",
            "seq_len must be a whole number up to 2,147,483,648, not True",
        ),
        (
            GOOD.replace('"devices": 8', '"devices": 1' + "0" * 400) + "}",
            "devices must be a whole number up to",
        ),  # not an OverflowError
        (GOOD + ', "reserve_gb": Infinity}', "reserve_gb must be a finite number >= 0 (GB), not inf"),
        (GOOD + ', "reserve_gb": "lots"}', "reserve_gb must be a finite number >= 0 (GB), not 'lots'"),
        ("[1, 2]", "line 1: a record must be a JSON object, not list"),  # not a traceback
    ],
)
def test_batch_records(record: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(record + "\n" + GOOD + "}\n", encoding="utf-8")
    assert main(["plan", "--batch", str(path), "--json"]) == 0
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert says in first["error"]
    assert second["strategy"]["tp"] == 8 and second["step_time_s"] > 0  # the good record after it still runs


def test_whole_numbers_written_as_floats_or_strings_still_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.jsonl"
    path.write_text(
        GOOD
        + "}\n"
        + GOOD.replace('"devices": 8', '"devices": 8.0').replace('"seq_len": 1024', '"seq_len": "1024"')
        + "}\n",
        encoding="utf-8",
    )
    assert main(["plan", "--batch", str(path), "--json"]) == 0
    a, b = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert a == b


HEAD = "model,hardware,devices,global_batch,seq_len,strategy,step_time_s\n"
ROW = "llama3-8b,h100,8,16,4096,dp=8,"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ((HEAD + ROW + "2.0\n" + ROW + "inf\n").encode(), "line 3: step_time_s must be a finite number > 0, not inf"),
        (
            (HEAD + ROW + "2.0\n" + ROW + "nan\n").encode(),
            "line 3: step_time_s must be a finite number > 0, not nan",
        ),  # nan <= 0 is False
        (b"\xff\xfe" + HEAD.encode(), "not a UTF-8 CSV (UnicodeDecodeError)"),  # not a traceback
        ((HEAD.replace("step_time_s", "analysis") + ROW + "missing.json\n").encode(), "line 2: "),
    ],
)
def test_calibration_csv(content: bytes, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "runs.csv"
    path.write_bytes(content)
    assert main(BASE + ["--calibrate", str(path)]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
    assert (
        err.count("(") - err.count(")") == 0 and "stepscope analyze --json) (" not in err
    )  # one fix, not the report's and ours


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (
            ["--model-flops", "nan"],
            "--model-flops: must be a finite number more than 0, not nan",
        ),  # not an MFU of nan with exit 0
        (["--model-flops", "inf"], "--model-flops: must be a finite number more than 0, not inf"),
        (["--tokens-per-step", "0"], "--tokens-per-step: must be at least 1, not 0"),
        (["--seq-len", "-4096"], "--seq-len: must be at least 1, not -4096"),
        (["--straggler-z", "nan"], "--straggler-z: must be a finite number more than 0, not nan"),
        (["--gpus-per-node", "0"], "--gpus-per-node: must be at least 1, not 0"),
    ],
)
def test_analyze_flags(flags: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["analyze", TRACE, "-q", *flags])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


DEVICE = "version: 1\ndevices:\n  - name: MyGPU\n    match: 'MyGPU'\n    peak_tflops: {{bf16: {peak}}}\n    hbm_gb: 80\n    hbm_gbps: {hbm}\n"


@pytest.mark.parametrize(
    ("peak", "hbm", "says"),
    [
        (
            ".nan",
            "2000",
            "device MyGPU: peak_tflops.bf16 is nan, not a finite number > 0",
        ),  # not an MFU of nan with exit 0
        (".inf", "2000", "peak_tflops.bf16 is inf"),
        ("0", "2000", "peak_tflops.bf16 is 0.0"),  # the roofline divides by it
        ("500", "-1", "hbm_gbps is -1.0"),
        ("~", "2000", "device MyGPU: peak_tflops gives no peak"),  # no peak at all: the planner divides by it
        (
            "500}\n    matmul_ef: {bf16: 0.8",
            "2000",
            "device MyGPU: unknown key matmul_ef",
        ),  # a misspelt figure is not ignored
    ],
)
@pytest.mark.parametrize("command", ["analyze", "plan"])
def test_device_figures(
    peak: str, hbm: str, says: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hw.yaml"
    path.write_text(DEVICE.format(peak=peak, hbm=hbm), encoding="utf-8")
    args = (["analyze", TRACE, "-q"] if command == "analyze" else BASE[:3] + BASE[5:]) + [
        "--hardware",
        "MyGPU",
        "--hardware-file",
        str(path),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert says in err and str(path) in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("value", "says"), [("-5", "gemm_kernel_us is -5.0, not a finite number > 0"), (".nan", "gemm_kernel_us is nan")]
)
def test_gemm_kernel_time(value: str, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "hw.yaml"
    path.write_text(DEVICE.format(peak="500", hbm="2000") + f"    gemm_kernel_us: {value}\n", encoding="utf-8")
    assert main([*BASE[:3], *BASE[5:], "--hardware", "MyGPU", "--hardware-file", str(path)]) == 2
    err = capsys.readouterr().err
    assert "device MyGPU: " + says in err and str(path) in err and len(err.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("rep") / "r.json"
    assert main(["analyze", TRACE, "-q", "--json", str(out)]) == 0
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("path", "value", "says"),
    [
        (
            ("ranks", 0, "step_stats", "median_ns"),
            float("nan"),
            "median step time is nan, not a positive number",
        ),  # not a NaN what-if
        (("ranks", 0, "step_stats", "median_ns"), -5, "median step time is -5"),
        (("ranks", 0, "step_stats", "median_ns"), "abc", "median step time is 'abc'"),
        (("ranks", 0, "hardware"), 5, "a malformed stepscope analyze report (AttributeError"),  # not a traceback
        (("ranks", 0, "collectives"), "x", "a malformed stepscope analyze report"),
        (("ranks", 0, "roofline_by_category"), "x", "a malformed stepscope analyze report"),
    ],
)
def test_from_analysis_reports(
    report: dict, path: tuple, value: object, says: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(json.dumps(report))
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "a100-40gb",
        "--devices",
        "2",
        "--global-batch",
        "8",
        "--seq-len",
        "1024",
        "--evaluate",
        "dp=2",
        "--baseline",
        "dp=2",
        "--from-analysis",
        str(bad),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert says in err and str(bad) in err and len(err.strip().splitlines()) == 1


def test_keys_the_planner_does_not_read_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A misspelt flag (zero_sync_after_backwrd) does not pass unseen; a run's id or notes are
    fine. Both are named, in the record's output and in the calibration, and the job still runs."""
    batch = tmp_path / "runs.jsonl"
    batch.write_text(GOOD + ', "id": "run-7", "zero_sync_after_backwrd": true}\n' + GOOD + "}\n", encoding="utf-8")
    assert main(["plan", "--batch", str(batch), "--json"]) == 0
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["ignored_keys"] == ["id", "zero_sync_after_backwrd"] and "ignored_keys" not in second
    assert first["step_time_s"] == second["step_time_s"]
    runs = tmp_path / "runs.csv"
    runs.write_text(
        HEAD.strip() + ",notes\n" + ROW + "2.0,first\n" + ROW.replace("dp=8", '"tp=2,dp=4"') + "2.2,second\n"
    )
    assert main(BASE + ["--calibrate", str(runs), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["calibration"]["ignored_columns"] == ["notes"]
    runs.write_text(
        HEAD + ROW.replace("dp=8", "tp=2,dp=4") + "2.2\n" + ROW + "2.0\n"
    )  # an unquoted comma: one cell too many
    assert main(BASE + ["--calibrate", str(runs)]) == 2
    assert "line 2: more cells than columns (1 extra)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("strategy", "says"),
    [
        ("tp=8,tp=4", "the strategy sets tp twice (tp=8, tp=4)"),  # not: the last one wins
        ("zero=3,keep_params=1,reshard_after_forward=false", "sets keep_params twice"),  # an alias names the same field
        ("tp=99999999999999999999999", "strategy tp=99999999999999999999999 is beyond any device count"),
    ],
)
def test_strategies(strategy: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(BASE[:-1] + [strategy]) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("name", [5, ["A100"], ""])
def test_from_analysis_with_a_damaged_device_name(
    report: dict, name: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A device name that is not a string is no name (not a traceback): the what-if runs and does
    not compare devices."""
    doc = json.loads(json.dumps(report))
    doc["ranks"][0]["hardware"]["name"] = name
    bad = tmp_path / "r.json"
    bad.write_text(json.dumps(doc), encoding="utf-8")
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "a100-40gb",
        "--devices",
        "2",
        "--global-batch",
        "8",
        "--seq-len",
        "1024",
        "--evaluate",
        "dp=2",
        "--baseline",
        "dp=2",
        "--from-analysis",
        str(bad),
        "--json",
    ]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["what_if"]["baseline"]
