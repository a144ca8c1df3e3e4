"""``stepscope monitor``: ``report`` a run directory, ``watch`` it live, ``import`` training logs
into one."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

from ..argtypes import positive_float
from ..report import outputs
from ..report.registry import by_name


def add_monitor_parser(sub: Any) -> None:
    m = sub.add_parser("monitor", help="per-step monitoring of a training job: report, watch, import logs")
    msub = m.add_subparsers(dest="monitor_cmd", required=True)
    r = msub.add_parser("report", help="anomalies (fluctuation, regression, stragglers) and per-rank figures of a run")
    r.add_argument("run_dir", help="the directory the job gave Monitor(...), or one `monitor import` wrote")
    r.add_argument("--json", metavar="FILE", help="write the report as JSON ('-' for standard output)")
    r.add_argument("--html", metavar="FILE", help="write the report as HTML")
    r.add_argument("-o", "--output", action="append", default=[], metavar="FILE", help="write a report (by extension)")
    r.add_argument("--format", default=None, help="the format of -o -")
    _thresholds(r)
    w = msub.add_parser("watch", help="a live terminal view of a running job's run directory")
    w.add_argument("run_dir")
    w.add_argument("--interval", type=positive_float, default=2.0, metavar="S", help="seconds between redraws")
    w.add_argument("--once", action="store_true", help="draw once and exit")
    _thresholds(w)
    i = msub.add_parser("import", help="turn Megatron-LM or torchtitan training logs into a run directory")
    i.add_argument("logs", nargs="+", help="log files (one per rank, or one with [rankN]: prefixes)")
    i.add_argument("-o", "--out-dir", required=True, metavar="DIR", help="the run directory to write")
    i.add_argument("--log-format", choices=("auto", "megatron", "torchtitan"), default="auto")


def _thresholds(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--threshold",
        type=positive_float,
        default=10.0,
        metavar="PCT",
        help="slow step: over the rolling median by PCT%% (10)",
    )
    p.add_argument(
        "--straggler-threshold",
        type=positive_float,
        default=10.0,
        metavar="PCT",
        help="straggler: own time over its peers' median by PCT%% (10)",
    )


def _detect_config(ns: argparse.Namespace) -> Any:
    from .config import DetectConfig

    return DetectConfig(fluctuation_ratio=ns.threshold / 100, straggler_ratio=ns.straggler_threshold / 100)


def run(ns: argparse.Namespace) -> int:
    if ns.monitor_cmd == "report":
        return _report(ns)
    if ns.monitor_cmd == "watch":
        return _watch(ns)
    return _import(ns)


def _report(ns: argparse.Namespace) -> int:
    from rich.console import Console

    from .summary import report

    outs = outputs.resolve(
        "monitor", aliases=(("--json", "json", ns.json), ("--html", "html", ns.html)), paths=ns.output, fmt=ns.format
    )
    rep = report(ns.run_dir, _detect_config(ns))
    html = [o.path for o in outs if o.renderer.name == "html" and o.path != "-"]
    # the HTML's links to capture files are relative to where it is written
    outputs.write_all(outs, rep, {"output_dir": str(Path(html[0]).resolve().parent)} if html else {})
    if any(o.path == "-" for o in outs):
        return 0
    by_name("monitor", "terminal").render(rep, {"console": Console()})
    for o in outs:
        print(f"wrote {o.renderer.name.upper()} report: {o.path}")
    return 0


def _watch(ns: argparse.Namespace) -> int:
    """Redraw the report every ``--interval`` seconds until interrupted (``--once``: one draw)."""
    from rich.console import Console

    from .summary import report

    con = Console()
    cfg = _detect_config(ns)
    while True:
        rep = report(ns.run_dir, cfg)
        if not ns.once and con.is_terminal:
            con.clear()
        con.print(time.strftime("%H:%M:%S"), highlight=False)
        by_name("monitor", "terminal").render(rep, {"console": con})
        if ns.once:
            return 0
        sys.stdout.flush()
        time.sleep(ns.interval)


def _import(ns: argparse.Namespace) -> int:
    from pathlib import Path

    from .logs import import_logs

    res = import_logs(ns.logs, Path(ns.out_dir), fmt=ns.log_format)
    for w in res.warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(
        f"wrote {ns.out_dir}: {res.steps:,} step records of {res.ranks} rank(s) from {res.format} logs; next: stepscope monitor report {ns.out_dir}"
    )
    return 0
