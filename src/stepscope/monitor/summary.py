"""A run's monitor report: per-rank figures, anomalies, the worst ranks, captures and what was left
out. Built from the stored records (``store.load_run``) by the detectors; renderers only format it
(``report/monitor_*.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .capture import read_json, trace_name
from .config import DetectConfig
from .detect import detect
from .detect.anomaly import Anomaly
from .detect.series import RankSeries
from .store import RunData, load_run

SCHEMA = "stepscope.monitor/1"


@dataclass(frozen=True, kw_only=True)
class RankSummary:
    rank: int
    steps: int  # recorded
    excluded: int  # tagged or warm-up, out of the statistics
    median_step_ms: float | None
    p90_step_ms: float | None
    median_own_ms: float | None
    median_device_ms: float | None
    gc_pause_ms: float
    gc_pauses: int
    data_share: float | None  # data phase / step time, 0-1
    tokens_per_s: float | None
    mfu: float | None  # 0-1, when flops per token and the device peak were given


@dataclass(frozen=True, kw_only=True)
class MonitorReport:
    run_dir: str
    steps_recorded: int
    world_size: int
    level: int
    dropped_records: int
    ranks: tuple[RankSummary, ...]
    anomalies: tuple[Anomaly, ...]
    worst_ranks: tuple[dict[str, object], ...]
    captures: tuple[dict[str, Any], ...]
    notes: tuple[str, ...]
    warnings: tuple[str, ...]
    #: the steps the statistics used, per rank (for charts; not in the JSON)
    series: tuple[RankSeries, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "run_dir": self.run_dir,
            "steps_recorded": self.steps_recorded,
            "world_size": self.world_size,
            "level": self.level,
            "dropped_records": self.dropped_records,
            "anomalies": [a.as_dict() for a in self.anomalies],
            "worst_ranks": list(self.worst_ranks),
            "ranks": [r.__dict__ for r in self.ranks],
            "captures": list(self.captures),
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }


def _ms(x: np.ndarray, q: float = 50.0) -> float | None:
    return round(float(np.percentile(x, q)) / 1e6, 3) if x.size else None


def _rank_summary(run: RunData, s: RankSeries) -> RankSummary:
    st = run.steps
    sel = st["rank"] == s.rank
    meta = run.meta.get(s.rank, {})
    dev = run.devices["device_ns"][run.devices["rank"] == s.rank] if run.devices["rank"].size else np.empty(0)
    data = s.phases["data_ns"]
    dur_s = float(s.dur_ns.sum()) / 1e9
    tokens = np.nansum(st["tokens"][sel][np.isin(st["step"][sel], s.step)]) if s.step.size else 0.0
    tps = float(tokens) / dur_s if tokens and dur_s > 0 else None
    fpt, peak = meta.get("flops_per_token"), meta.get("peak_flops")
    mfu = round(tps * float(fpt) / float(peak), 4) if tps and fpt and peak else None
    return RankSummary(
        rank=s.rank,
        steps=int(sel.sum()),
        excluded=s.excluded,
        median_step_ms=_ms(s.dur_ns),
        p90_step_ms=_ms(s.dur_ns, 90.0),
        median_own_ms=_ms(s.own_ns),
        median_device_ms=_ms(dev[~np.isnan(dev)]),
        gc_pause_ms=round(float(np.nansum(st["gc_ns"][sel])) / 1e6, 3),
        gc_pauses=int(np.nansum(st["gc_count"][sel])),
        data_share=None if np.isnan(data).all() or dur_s <= 0 else round(float(np.nansum(data)) / 1e9 / dur_s, 4),
        tokens_per_s=round(tps, 1) if tps else None,
        mfu=mfu,
    )


def _captures(run: RunData) -> tuple[dict[str, Any], ...]:
    """Every capture planned under ``captures/``, with its state and the analysis written next to it."""
    out = []
    root = Path(run.run_dir) / "captures"
    if root.is_dir():
        for plan in sorted(root.glob("*/plan.json")):
            p = read_json(plan)
            if not p:
                continue
            d = plan.parent
            p["traces"] = sorted(trace_name(x) for x in d.glob("rank-*.done"))
            p["failed"] = {x.stem: str(read_json(x).get("reason", "unknown")) for x in sorted(d.glob("rank-*.failed"))}
            p["analysis"] = str(d / "analysis.json") if (d / "analysis.json").is_file() else None
            p["findings"] = str(d / "findings.txt") if (d / "findings.txt").is_file() else None
            out.append(p)
    return tuple(out)


def summarize(run: RunData, cfg: DetectConfig | None = None) -> MonitorReport:
    cfg = cfg or DetectConfig()
    det = detect(run, cfg)
    metas = list(run.meta.values())
    notes = list(det.notes)
    for s in det.series:
        if s.warmup:
            notes.append(
                f"rank {s.rank}: {s.warmup} leading steps over {cfg.warmup_ratio:g}x the median left out as warm-up"
            )
    return MonitorReport(
        run_dir=run.run_dir,
        steps_recorded=run.n_steps,
        world_size=max([int(m.get("world_size") or 0) for m in metas] + [len(run.meta)]),
        level=max([int(m.get("level") or 0) for m in metas] + [0]),
        dropped_records=sum(int(m.get("dropped_records") or 0) for m in metas),
        ranks=tuple(_rank_summary(run, s) for s in det.series),
        anomalies=det.anomalies,
        worst_ranks=det.worst_ranks,
        captures=_captures(run),
        notes=tuple(notes),
        warnings=run.warnings,
        series=det.series,
    )


def report(run_dir: str | Path, cfg: DetectConfig | None = None) -> MonitorReport:
    """Load a run directory and build its report."""
    return summarize(load_run(run_dir), cfg)
