"""``stepscope plan``: search, ``--evaluate`` one strategy, or ``--batch`` many records."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

from .. import jsonio
from ..errors import ConfigError, InputError
from ..report import outputs, registry
from ..report.plan_json import versioned
from ..report.plan_lines import what_if_lines
from . import frameworks, whatif
from .args import CliSettings, cli_settings
from .job import Job
from .plans import check_on_job, evaluate_result, framework_of, one_record, search_result, strategy_of
from .record import CORE_KEYS, RECORD_KEYS, ignored_keys, job_from_record
from .result import PlanResult
from .settings import job_settings

__all__ = ["run"]


def _with_cli(rec: dict[str, Any], ns: argparse.Namespace, cli: CliSettings) -> dict[str, Any]:
    """A --batch record or --calibrate row with --hardware-file, the preset and the command line's
    settings where it has none of its own (absent or blank)."""
    out = dict(rec)
    defaults = {"hardware_file": getattr(ns, "hardware_file", None), "framework": cli.framework, **cli.values}
    for key, value in defaults.items():
        if out.get(key) in (None, "") and value not in (None, ""):
            out[key] = value
    return out


def _batch_line(n: int, line: str, ns: argparse.Namespace, cli: CliSettings) -> dict[str, Any]:
    """The output record of one --batch line (an ``error`` record when it cannot be evaluated)."""
    try:
        rec = jsonio.loads(line)
        if not isinstance(rec, dict):
            raise ConfigError(
                f"line {n}: a record must be a JSON object, not {type(rec).__name__}",
                path=ns.batch,
                fix='e.g. {"model": "llama3-8b", "hardware": "h100", ...}',
            )
        full = _with_cli(rec, ns, cli)
        job = job_from_record(full)
        out = one_record(job, strategy_of(job, framework_of(full.get("framework")), str(rec.get("strategy", ""))))
        out["settings"] = job_settings(job)
        if ignored := ignored_keys(rec):
            out["ignored_keys"] = ignored
    except ConfigError as exc:
        out = {"error": exc.one_line()}
    except (ValueError, TypeError) as exc:
        out = {"error": f"line {n}: {exc}"}
    return out


def _run_batch(ns: argparse.Namespace, cli: CliSettings) -> int:
    try:
        with open(ns.batch, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=ns.batch, fix="pass a JSONL file") from None
    for n, line in enumerate(lines, 1):
        if line.strip():
            print(json.dumps(versioned(_batch_line(n, line, ns, cli))))
    return 0


def _measured(job: Job, ns: argparse.Namespace, cli: CliSettings) -> tuple[Job, dict[str, Any]]:
    """Apply --from-analysis (what a trace measured: efficiencies, scales, op classes), then
    --calibrate (a fit on a CSV of runs, holding what the trace measured)."""
    info: dict[str, Any] = {}
    traced: dict[str, Any] = {}
    if ns.from_analysis:
        base = strategy_of(job, framework_of(cli.framework), ns.baseline) if ns.baseline else None
        if base is not None:  # the traced run's strategy must run this job before its profile is read by it
            check_on_job(job, base)
        untraced = job.calibration
        job, info = whatif.from_analysis(job, ns.from_analysis, ns.rank, "dp_overlap" in cli.values, base)
        traced = {
            f.name: getattr(job.calibration, f.name)
            for f in dataclasses.fields(job.calibration)
            if getattr(job.calibration, f.name) != getattr(untraced, f.name)
        }
    if ns.calibrate:
        with _progress("calibrating: runs evaluated over the grid") as step:
            job, fitted = whatif.from_csv(
                job, ns.calibrate, lambda r: job_from_record(_with_cli(r, ns, cli)), RECORD_KEYS, step, traced
            )
        info = fitted | info
    return job, info


@contextlib.contextmanager
def _progress(what: str) -> Iterator[Callable[[int, int], None]]:
    """A progress bar on standard error while the block runs, when standard error is a terminal
    (quiet when piped); yields ``update(done, total)``."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    with Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        disable=not err.is_terminal,
    ) as bar:
        task = bar.add_task(what, total=None)
        yield lambda done, total: bar.update(task, completed=done, total=total)


def run(ns: argparse.Namespace) -> int:
    cli = cli_settings(ns)
    if ns.batch:
        return _run_batch(ns, cli)
    outs = _outputs(ns)
    record = {k: getattr(ns, k, None) for k in CORE_KEYS} | cli.values | {"framework": cli.framework}
    if not cli.framework and not ns.evaluate:  # a search's rows are runnable in one named framework
        default = frameworks.default_for(job_from_record(record).hw.name)
        cli = CliSettings(values=cli.values, framework=default)
        record["framework"] = default
    job, calib = _measured(job_from_record(record), ns, cli)
    fw = framework_of(cli.framework)
    if ns.evaluate:
        result = evaluate_result(
            job,
            fw,
            ns.evaluate,
            model_name=ns.model,
            calib=calib,
            baseline_text=ns.baseline,
            measured_step_s=ns.measured_step_s,
        )
        _show(outs, result)
        return 0
    where = getattr(ns, "where", "") or ""
    distinct = not getattr(ns, "variants", False)
    result = search_result(job, fw, model_name=ns.model, top=ns.top, where=where, distinct=distinct, calib=calib)
    _show(outs, result)
    if _to_stdout(outs):  # the JSON is the rows: what the calibration used goes to standard error
        for line in what_if_lines({"calibration": calib}):
            print(line, file=sys.stderr)
    return 0


def _outputs(ns: argparse.Namespace) -> list[outputs.Output]:
    """``--html OUT``, ``--json`` (standard output), then each ``-o`` (report/outputs.py)."""
    aliases = (("--html", "html", ns.html), ("--json", "json", "-" if ns.json else None))
    return outputs.resolve("plan", aliases=aliases, paths=ns.output, fmt=ns.format)


def _to_stdout(outs: list[outputs.Output]) -> bool:
    return any(o.path == "-" for o in outs)


def _show(outs: list[outputs.Output], result: PlanResult) -> None:
    """Write every output asked for, then print the table (report/registry.py's plan renderers)
    unless one of them went to standard output."""
    outputs.write_all(outs, result)
    if not _to_stdout(outs):
        registry.by_name("plan", "terminal").render(result, {})
