"""Calibration from a user's CSV of measured runs (``stepscope plan --calibrate runs.csv``).

Columns: ``model, hardware, devices, global_batch, seq_len, strategy, step_time_s`` (or, instead of
the time, ``analysis``: a ``stepscope analyze --json`` report of the run, whose median step is
used) and optionally any other key of a ``--batch`` record: ``devices_per_node``, ``network``,
``hardware_file`` (default: ``--hardware-file``) and the framework settings of
docs/plan-settings.md (generated from config.py's declaration; blank = the default). The fit (see
:mod:`calibrate`) uses every row; the accuracy it reports after calibration is leave-one-out (each
row predicted by a fit on the others), never on rows it was fitted to.
"""

from __future__ import annotations

import csv
import dataclasses
import math
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import ConfigError
from .calibrate import Fit, Run, cross_validate, errors, fit
from .cost import evaluate
from .job import Job
from .strategy import FIELDS, Strategy

_MEASURED = frozenset({"step_time_s", "analysis"})


@dataclass(frozen=True)
class Calibration:
    fit: Fit
    rows: int
    mape_before: float
    mape_after_loo: float
    ignored_columns: tuple[str, ...] = ()  # columns the planner does not read (notes, a misspelt flag)
    # per row: {line, measured_s, predicted_s (the priors), predicted_loo_s (fitted on the other rows)}
    per_run: tuple[dict[str, float], ...] = ()
    # each factor's (lowest, highest) over the leave-one-out fits: how firmly the runs determine it
    loo_range: dict[str, tuple[float, float]] = dataclasses.field(default_factory=dict)
    held: tuple[str, ...] = ()  # the factors a trace measured, which the fit held (PINS)
    not_held: str | None = None  # why the trace's fields were not held


# a traced calibration field -> the fit's factor it holds (calibrate.fit's ``pinned``)
PINS = {
    "gemm_eff": "gemm_scale",
    "attn_eff": "attn_scale",
    **{k: k for k in ("comm_scale", "inter_scale", "linear_attn_scale", "expert_scale", "ep_scale")},
}


def _step(job: Job, s: dict[str, np.ndarray]) -> np.ndarray:
    return evaluate(job, s, keys=("step_s",))["step_s"]


def _measured(r: dict[str, Any], n: int, path: str) -> float:
    """The row's step time: ``step_time_s``, or the median step of the ``stepscope analyze --json``
    report named in ``analysis`` (a path relative to the CSV's directory or absolute)."""
    if r.get("analysis") and not r.get("step_time_s"):
        from pathlib import Path

        from .from_trace import read

        report = Path(r["analysis"])
        report = report if report.is_absolute() else Path(path).parent / report
        try:
            return read(str(report)).step_s
        except ConfigError as exc:  # the report's own error, its path and fix kept
            where = f"{exc.path}: " if exc.path else ""
            raise ConfigError(f"line {n}: {where}{exc.message}", path=path, fix=exc.fix) from None
    try:
        return float(r["step_time_s"])
    except (KeyError, TypeError, ValueError):
        raise ConfigError(
            f"line {n}: needs a numeric step_time_s (or an analysis report)",
            path=path,
            fix="columns: model, hardware, devices, global_batch, seq_len, strategy, step_time_s or analysis",
        ) from None


def from_csv(
    path: str,
    make_job: Any,
    known_columns: Collection[str] = (),
    progress: Callable[[int, int], None] | None = None,
    traced: dict[str, Any] | None = None,
    traced_job: Job | None = None,
) -> Calibration:
    """``make_job(record) -> Job`` builds each row's job (the CLI's own parser); the columns that
    are neither in ``known_columns`` (what ``make_job`` reads) nor a measurement are reported in
    ``ignored_columns`` (none when ``known_columns`` is empty). ``progress(done, total)``: after
    each run's grid is evaluated (the long part). ``traced``: calibration fields a trace of
    ``traced_job``'s run measured (from_analysis): when every run is of that job's model on its
    device, the runs take them and the fit holds them (PINS) and fits the rest; else they are not
    held (``not_held`` says why: what a kernel class achieves is a property of its shapes on that
    device)."""
    try:
        with open(path, encoding="utf-8", newline="") as fh:
            rows = list(csv.DictReader(fh))
    except OSError as exc:
        raise ConfigError(
            f"cannot read calibration CSV ({exc.strerror})", path=path, fix="pass a CSV of measured runs"
        ) from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(
            f"not a UTF-8 CSV ({exc.__class__.__name__})", path=path, fix="save the runs as a UTF-8 CSV"
        ) from None
    runs = []
    for n, r in enumerate(rows, 2):
        try:
            if None in r:
                raise ConfigError(
                    f"more cells than columns ({len(r[None])} extra)", fix="quote values that contain commas"
                )
            job = make_job(r)
            strategy = Strategy.parse(r.get("strategy") or "").under(job.framework)
            st = {k: getattr(strategy, k) for k in FIELDS}
        except ConfigError as exc:
            raise ConfigError(f"line {n}: {exc.message}", path=path, fix=exc.fix) from None
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(
                f"line {n}: a value of the wrong type ({exc})",
                path=path,
                fix="numbers in devices, global_batch, seq_len, devices_per_node, reserve_gb, dp_bucket_mb, zero_gather_copy_us, moe_imbalance",
            ) from None
        measured = _measured(r, n, path)
        if not 0 < measured < math.inf:  # NaN fails this too
            raise ConfigError(
                f"line {n}: step_time_s must be a finite number > 0, not {measured}",
                path=path,
                fix="remove the row or fix the time",
            )
        runs.append(Run(job, st, measured, _step, group=str(n)))
    if len(runs) < 2:
        raise ConfigError(
            "calibration needs at least 2 measured runs", path=path, fix="add rows (the fit is checked leave-one-out)"
        )
    runs, pinned, not_held = _hold(runs, traced or {}, traced_job)
    prior = [float(_step(r.job, {k: np.array([v]) for k, v in r.strategy.items()})[0]) for r in runs]
    before = float(np.mean([abs(p - r.measured) / r.measured for p, r in zip(prior, runs, strict=True)]))
    errs = errors(runs, progress)  # each run's grid, evaluated once for the leave-one-out check and the fit
    cv = cross_validate(runs, errs=errs, pinned=pinned)
    after = float(np.mean([v["mape"] for v in cv.values()]))
    header = [k for k in rows[0] if k is not None] if rows and known_columns else []
    ignored = tuple(sorted(k for k in header if k not in known_columns and k not in _MEASURED))
    per_run = tuple(
        {
            "line": int(r.group),
            "measured_s": r.measured,
            "predicted_s": p,
            "predicted_loo_s": r.measured * (1 + float(cv[r.group]["mean_signed"])),
        }
        for p, r in zip(prior, runs, strict=True)
    )
    loo_range = {
        k: (min(float(v[k]) for v in cv.values()), max(float(v[k]) for v in cv.values()))
        for k in (f.name for f in dataclasses.fields(Fit))
        if k != "prior_pull"
    }
    held = tuple(sorted(pinned))
    return Calibration(fit(runs, errs, pinned), len(runs), before, after, ignored, per_run, loo_range, held, not_held)


def _hold(runs: list[Run], traced: dict[str, Any], like: Job | None) -> tuple[list[Run], frozenset[str], str | None]:
    """The runs with the trace's fields, the factors the fit holds, or why none is held."""
    if not traced or like is None:
        return runs, frozenset(), None
    if any(r.job.model != like.model or r.job.hw.name != like.hw.name for r in runs):
        return runs, frozenset(), "the runs are not all of the traced model on the traced device"
    held = [dataclasses.replace(r, job=r.job.calibrated(**traced)) for r in runs]
    return held, frozenset(PINS[k] for k in traced if k in PINS), None
