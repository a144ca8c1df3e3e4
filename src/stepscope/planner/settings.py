"""What a prediction assumes beyond the strategy: the job's framework settings as the cost model
runs them, as data for the JSON (``settings``) and one line for the terminal (``assumed: ...``),
both generated from the settings' declarations (config.py: each setting's Report says when it is
shown, under which key, at which place and in which words)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .config import SETTINGS
from .job import Job
from .knobs import Report, Setting


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One reported value: the setting's key (or the report's own), its default in the key's
    unit, how it is reported; ``setting``: the declared key whose value is reported (absent for
    the cluster's network)."""

    key: str
    setting: str
    default: Any
    report: Report


def _entry(s: Setting, report: Report) -> Entry:
    default = s.default * s.meta.unscale if isinstance(s.default, float) else s.default
    return Entry(key=report.key or s.key, setting=s.key, default=default, report=report)


def _network(job: Job) -> str | None:
    return job.network.name if job.network is not None else None


# in JSON order; the measured network (the cluster's, not the framework's) among them
ENTRIES: tuple[Entry, ...] = tuple(
    sorted(
        (
            *(_entry(s, s.meta.report) for s in SETTINGS if s.meta.report is not None),
            Entry(
                key="network",
                setting="",
                default=None,
                report=Report(rank=280, as_run=_network, says=lambda v, st: f"network {v}", line=180),
            ),
        ),
        key=lambda e: e.report.rank,
    )
)


def _shown(e: Entry, value: Any, job: Job) -> bool:
    """Whether the entry is in the settings (Report.when); a value of None never is, nor an array."""
    when = e.report.when
    if value is None or (when != "always" and not isinstance(value, bool | int | float | str)):
        return False
    if when in ("fp8", "fp8 changed") and job.precision != "fp8":
        return False
    if when == "moe":
        return bool(job.model.n_experts)
    return when in ("always", "fp8") or value != e.default


def job_settings(job: Job) -> dict[str, Any]:
    """The settings the cost model reads from the job, as it runs them (a compiled loss in an eager
    job is unfused, gradients in bytes), by the keys of the records."""
    out: dict[str, Any] = {}
    for e in ENTRIES:
        r = e.report
        value = r.as_run(job) if r.as_run is not None else job.framework.key_value(e.setting)
        if _shown(e, value, job):
            out[e.key] = value
    return out


def settings_line(st: dict[str, Any]) -> str:
    """One line: ``assumed: ...`` in the order the cost model's terms come."""
    parts = [
        text
        for e in sorted(ENTRIES, key=lambda e: e.report.line)
        if e.report.says is not None and e.key in st and (text := e.report.says(st[e.key], st))
    ]
    return "assumed: " + ", ".join(parts)
