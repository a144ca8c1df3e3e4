"""Importing Megatron-LM and torchtitan training logs into a monitor run directory: hand-written
log snippets, expected values computed by hand in the comments."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from stepscope.errors import InputError
from stepscope.monitor.logs import import_logs
from stepscope.monitor.sinks import SinkKind
from stepscope.monitor.store import load_run

FIXTURES = Path(__file__).parent.parent / "fixtures" / "logs"
# 2024-05-01 12:00:00 UTC and 2025-01-01 12:00:00 UTC in unix seconds
T_MEG = 1_714_564_800
T_TITAN = 1_735_732_800
S = 1_000_000_000  # ns per second


def _write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return p


def _meg(it: int, ms: float, ts: str | None = None, gbs: int | None = 512) -> str:
    """A Megatron-LM training_log line, as training.py formats it."""
    line = f" [{ts}]" if ts else ""
    line += f" iteration {it:8d}/{500000:8d} | consumed samples: {it * 512:12d} |"
    line += f" elapsed time per iteration (ms): {ms:.1f} | throughput per GPU (TFLOP/s/GPU): 400.1 |"
    line += " learning rate: 3.000000E-04 |"
    line += f" global batch size: {gbs:5d} |" if gbs else ""
    return line + " lm loss: 2.300000E+00 | loss scale: 1.0 | grad norm: 0.500 | number of skipped iterations:   0 |"


def _timer(name: str, lo: float, hi: float) -> str:
    return "    {}: ({:.2f}, {:.2f})".format((name + " ").ljust(48, "."), lo, hi)


def _titan(step: int, ts: str, tps: str = "6,789", mem: str = "30.12", rank: int | None = None) -> str:
    """A torchtitan metrics line with its logger prefix, without colours."""
    prefix = f"[rank{rank}]:" if rank is not None else ""
    return (
        f"{prefix}[titan] {ts} - root - INFO - step: {step:2}  loss:  7.8934  grad_norm:  1.2345  "
        f"memory: {mem}GiB(31.70%)  tps: {tps}  tflops: 123.45  mfu: 12.48%"
    )


def test_megatron_interval_means_without_timestamps(tmp_path: Path) -> None:
    log = _write(tmp_path, "train.log", ["noise", _meg(10, 1000.0), "more noise", _meg(20, 1100.0), _meg(30, 1200.0)])
    res = import_logs([log], tmp_path / "run")
    assert (res.ranks, res.steps, res.format) == (1, 3, "megatron")
    run = load_run(tmp_path / "run")
    assert run.steps["step"].tolist() == [10, 20, 30]
    assert run.steps["dur_ns"].tolist() == [1.0e9, 1.1e9, 1.2e9]
    # no timestamps: record ends 10 x 1.0 s, + 10 x 1.1 s, + 10 x 1.2 s from 0; start = end - dur
    assert run.steps["start_unix_ns"].tolist() == [9 * S, 19_900_000_000, 31_800_000_000]
    assert np.isnan(run.steps["tokens"]).all()  # no seq_length in the log
    assert np.isnan(run.steps["peak_mem_bytes"]).all() and np.isnan(run.steps["forward_ns"]).all()
    meta = run.meta[0]
    assert meta["log_interval"] == 10
    assert (meta["rank"], meta["world_size"], meta["level"], meta["source"]) == (0, 1, 0, "megatron-log")
    assert meta["log_file"] == str(log)
    assert any("seq_length" in w for w in res.warnings)


def test_megatron_timestamps_timers_and_tokens(tmp_path: Path) -> None:
    lines = [
        "  seq_length ...................................... 4096",
        "(min, max) time across ranks (ms):",
        _timer("load-checkpoint", 4542.10, 4542.10),  # before training: no iteration, left out
        _meg(10, 1000.0, ts="2024-05-01 12:00:10"),
        "[Rank 7] (after 10 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0",
        "(min, max) time across ranks (ms):",
        _timer("forward-backward", 1200.12, 1210.55),
        _timer("optimizer", 50.00, 51.25),
        _meg(20, 1234.5, ts="2024-05-01 12:00:22"),
        "max time across ranks (ms):",
        _timer("forward-backward", 0, 0).replace("(0.00, 0.00)", "1300.50"),
    ]
    import_logs([_write(tmp_path, "megatron.log", lines)], tmp_path / "run", fmt="megatron")
    run = load_run(tmp_path / "run")
    assert run.steps["dur_ns"].tolist() == [1.0e9, 1_234_500_000.0]
    # the line is printed at the end of its iteration: start = timestamp - mean
    assert run.steps["start_unix_ns"].tolist() == [(T_MEG + 10) * S - S, (T_MEG + 22) * S - 1_234_500_000]
    assert run.steps["tokens"].tolist() == [512 * 4096, 512 * 4096]
    assert run.meta[0]["tokens_scope"] == "job"
    timers = [(e["step"], e["timers"]) for e in run.events if e["kind"] == "megatron_timers"]
    assert timers == [
        (10, {"forward-backward": [1200.12, 1210.55], "optimizer": [50.0, 51.25]}),
        (20, {"forward-backward": [None, 1300.5]}),
    ]
    assert run.events[0]["time_unix_ns"] == (T_MEG + 10) * S


def test_megatron_old_format_and_ranks_from_file_names(tmp_path: Path) -> None:
    old = [
        " iteration 100/500000 | consumed samples: 51200 | elapsed time per iteration (ms): 1234.5 | lm loss: 2.3E+00 |"
    ]
    a = _write(tmp_path, "job-rank-7.log", old)
    b = _write(tmp_path, "plain.log", [_meg(100, 999.9)])  # index 1 among the inputs
    c = _write(tmp_path, "node3_rank12.txt", [_meg(100, 1000.1)])
    res = import_logs([a, b, c], tmp_path / "run", sink="jsonl")
    assert res.ranks == 3
    run = load_run(tmp_path / "run")
    assert run.steps["rank"].tolist() == [1, 7, 12]
    assert run.steps["dur_ns"].tolist() == [999_900_000.0, 1_234_500_000.0, 1_000_100_000.0]
    assert {r: m["world_size"] for r, m in run.meta.items()} == {1: 13, 7: 13, 12: 13}
    assert run.meta[7]["log_interval"] is None  # one logged line: the interval is unknown
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == [
        "rank-00001.jsonl",
        "rank-00007.jsonl",
        "rank-00012.jsonl",
    ]


def test_torchtitan_two_prefixed_ranks(tmp_path: Path) -> None:
    lines = []
    for k, step in enumerate((10, 20, 30)):
        lines.append(_titan(step, f"2025-01-01 12:00:{k:02d},000", rank=0))
        # rank 1 logs 250 ms later and 1.5 s per 10 steps
        ms = 250 + 1500 * k
        lines.append(_titan(step, f"2025-01-01 12:00:{ms // 1000:02d},{ms % 1000:03d}", tps="1,000", rank=1))
    res = import_logs([_write(tmp_path, "titan.log", lines)], tmp_path / "run")
    assert (res.ranks, res.steps, res.format) == (2, 4, "torchtitan")  # each rank's first line: no record
    run = load_run(tmp_path / "run")
    assert run.steps["rank"].tolist() == [0, 0, 1, 1]
    assert run.steps["step"].tolist() == [20, 30, 20, 30]
    # 1 s / 10 steps = 0.1 s; 1.5 s / 10 steps = 0.15 s
    assert run.steps["dur_ns"].tolist() == [1e8, 1e8, 1.5e8, 1.5e8]
    assert run.steps["start_unix_ns"].tolist() == [
        (T_TITAN + 1) * S - 100_000_000,
        (T_TITAN + 2) * S - 100_000_000,
        T_TITAN * S + 1_750_000_000 - 150_000_000,
        T_TITAN * S + 3_250_000_000 - 150_000_000,
    ]
    # 30.12 GiB = 30.12 * 1073741824 = 32341103738.88 bytes
    assert run.steps["peak_mem_bytes"].tolist() == [32_341_103_738.0] * 4
    # tokens = tps x period: 6789 x 0.1 s = 678.9 -> 679; 1000 x 0.15 s = 150
    assert run.steps["tokens"].tolist() == [679.0, 679.0, 150.0, 150.0]
    assert {r: (m["world_size"], m["source"], m["log_interval"]) for r, m in run.meta.items()} == {
        0: (2, "torchtitan-log", 10),
        1: (2, "torchtitan-log", 10),
    }
    assert math.isnan(run.steps["data_ns"][0]) and run.events == []


def test_torchtitan_ansi_escapes_old_wps_and_validation_lines(tmp_path: Path) -> None:
    red, green, blue, magenta, reset = "\x1b[31m", "\x1b[32m", "\x1b[34m", "\x1b[35m", "\x1b[39m"

    def old(step: int, sec: int) -> str:  # the older metrics line: wps, no grad_norm
        return (
            f"[titan] 2025-01-01 12:00:{sec:02d},500 - root - INFO - {red}step: {step:2}  {green}loss:  7.8934  "
            f"\x1b[38;5;214mmemory: 10.00GiB(12.50%)  {blue}wps: 2,000  {magenta}mfu: 12.48%{reset}"
        )

    validate = f"[titan] 2025-01-01 12:00:03,000 - root - INFO - \x1b[33mvalidate step: 20  loss:  7.1  {blue}tps: 9,999{reset}"
    lines = [old(1, 0), old(10, 9), validate, old(20, 11)]
    res = import_logs([_write(tmp_path, "old.log", lines)], tmp_path / "run")
    run = load_run(tmp_path / "run")
    assert res.format == "torchtitan" and run.steps["rank"].tolist() == [0, 0]
    assert run.steps["step"].tolist() == [10, 20]  # the validation line is not a training step
    # 9 s over 9 steps = 1 s; 2 s over 10 steps = 0.2 s
    assert run.steps["dur_ns"].tolist() == [1e9, 2e8]
    assert run.steps["tokens"].tolist() == [2000.0, 400.0]
    assert run.steps["peak_mem_bytes"].tolist() == [10.0 * 2**30] * 2


def test_torchtitan_single_line_rank_warns(tmp_path: Path) -> None:
    lines = [_titan(10, "2025-01-01 12:00:00,000", rank=0), _titan(20, "2025-01-01 12:00:01,000", rank=0)]
    lines.append(_titan(10, "2025-01-01 12:00:00,000", rank=1))
    res = import_logs([_write(tmp_path, "t.log", lines)], tmp_path / "run")
    assert (res.ranks, res.steps) == (1, 1)
    assert len(res.warnings) == 1 and "rank 1: only one step line" in res.warnings[0]
    with pytest.raises(InputError, match="no step record"):
        import_logs([_write(tmp_path, "one.log", [lines[2]])], tmp_path / "run2")


def test_restarted_log_keeps_first_record_of_each_step(tmp_path: Path) -> None:
    lines = [_meg(10, 1000.0), _meg(20, 1000.0), _meg(30, 1000.0), "restart", _meg(20, 2000.0), _meg(40, 3000.0)]
    res = import_logs([_write(tmp_path, "r.log", lines)], tmp_path / "run")
    run = load_run(tmp_path / "run")
    assert run.steps["step"].tolist() == [10, 20, 30, 40]
    assert run.steps["dur_ns"].tolist() == [1e9, 1e9, 1e9, 3e9]
    assert any("1 repeated step" in w for w in res.warnings)


@pytest.mark.parametrize("sink", ["sqlite", "jsonl"])
def test_fixture_samples(tmp_path: Path, sink: SinkKind) -> None:
    res = import_logs([FIXTURES / "megatron_sample.log"], tmp_path / "meg", sink=sink)
    assert (res.format, res.ranks, res.steps, res.warnings) == ("megatron", 1, 3, ())
    meg = load_run(tmp_path / "meg")
    assert meg.steps["dur_ns"].tolist() == [1_398_700_000.0, 1_187_400_000.0, 1_190_200_000.0]
    assert meg.steps["tokens"].tolist() == [512 * 4096] * 3
    assert meg.steps["start_unix_ns"][0] == (T_MEG - 6) * S - 1_398_700_000  # 11:59:54
    assert [e["step"] for e in meg.events] == [10, 20, 30]
    assert meg.events[0]["timers"] == {"forward-backward": [1120.41, 1131.87], "optimizer": [180.22, 182.05]}

    res = import_logs([FIXTURES / "torchtitan_sample.log"], tmp_path / "titan", sink=sink)
    assert (res.format, res.ranks, res.steps, res.warnings) == ("torchtitan", 2, 6, ())
    titan = load_run(tmp_path / "titan")
    assert titan.steps["step"].tolist() == [10, 20, 30, 10, 20, 30]  # validate step 20 left out
    # rank 0: 12:00:21,000 -> 12:00:33,660 over 9 steps = 12.66 s / 9
    assert titan.steps["dur_ns"][0] == 1_406_666_667
    assert titan.steps["tokens"][0] == 8192  # 5,824 tps x 1.40667 s = 8192.4
    assert titan.steps["peak_mem_bytes"][3] == int(66.41 * 2**30)
    assert titan.meta[0]["log_interval"] == 10


def test_auto_detection_errors(tmp_path: Path) -> None:
    junk = _write(tmp_path, "junk.log", ["hello", "step 10 loss 3.0", "iteration 10 done"])
    with pytest.raises(InputError) as err:
        import_logs([junk], tmp_path / "run")
    msg = str(err.value)
    assert str(junk) in msg and "no Megatron-LM `elapsed time per iteration` or torchtitan" in msg
    assert "\n" not in msg
    titan = _write(tmp_path, "titan.log", [_titan(10, "2025-01-01 12:00:00,000")])
    with pytest.raises(InputError, match="titan.log: no Megatron-LM `iteration"):
        import_logs([titan], tmp_path / "run", fmt="megatron")
    with pytest.raises(InputError, match="missing.log: no such file"):
        import_logs([tmp_path / "missing.log"], tmp_path / "run")
    meg = _write(tmp_path, "meg.log", [_meg(10, 1000.0)])
    with pytest.raises(InputError, match="mix formats"):
        import_logs([meg, titan], tmp_path / "run")
    with pytest.raises(InputError, match="rank 0 is in two logs"):
        import_logs([meg, _write(tmp_path, "rank0.log", [_meg(10, 1000.0)])], tmp_path / "run")
    assert not (tmp_path / "run").exists()  # nothing written before every file is read


def test_refuses_a_run_directory_with_records(tmp_path: Path) -> None:
    log = _write(tmp_path, "train.log", [_meg(10, 1000.0)])
    import_logs([log], tmp_path / "run")
    with pytest.raises(InputError, match="already holds monitor records"):
        import_logs([log], tmp_path / "run")
    assert load_run(tmp_path / "run").n_steps == 1
