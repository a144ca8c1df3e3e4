"""Efficiencies measured in a stepscope analysis, for planner what-ifs and calibration.

From an ``stepscope analyze --json`` report (first rank, or the rank given):
- ``attn_eff`` = attention-kernel FLOPs / (attention kernel time x peak);
- ``gemm_eff`` = FLOPs of every other compute kernel / (their time x peak; an XLA rank's FLOPs
  are XLA's cost analysis, from the XLA view's ``flops_by_category``): the planner's
  non-attention efficiency counts norms and elementwise kernels as time without FLOPs, and so does
  this ratio (the ``gemm``, ``conv``, ``elementwise``, ``normalization``, ``reduction``,
  ``optimizer`` and ``other`` categories; communication, memcpy, host transfers and the op
  classes of ``op_time_s`` are excluded; ``gemm_eff_with_experts`` counts the grouped GEMMs in,
  for a planner that does not rate them by class);
- ``dp_overlap`` = overlapped / total collective time (the share the run hid behind compute);
- ``step_s`` = the median step time; ``parts_s`` that step's compute, exposed communication and idle;
  ``host_bound_s`` the part of its idle the host caused (the work that ended a gap was launched
  after the gap began), which a what-if spreads over the baseline's layers and micro-batches as a
  host wait (``Job.layer_overhead_s``);
- ``memory_bytes`` = the traced device's memory, which a what-if on the same device fits against;
- ``comm_scale`` (multi-rank reports) = 1 / median(bus bandwidth / link peak) over the matched
  collectives of >= 1 MiB that have both (the cluster view's transfer time, not the wait) and do
  not cross nodes (or whose link is not known), so communication is modeled at the bandwidth the
  run achieved; ``inter_scale`` the same over those that cross nodes, relative to ``comm_scale``
  (the planner multiplies inter-node transfers by both). Within a node the reference is the
  device's measured collective bus bandwidth where the catalog has one (the rate the planner
  assumes), else the link peak;
- ``op_time_s``: the median step's kernel time of the op classes the planner scales by class
  (``linear_attention``, ``grouped_gemm``, ``all_to_all``; op_profile.py) / the rank's XLA
  devices (a JAX host traces several), seconds on one device.
The peak is the one the analysis used (its detected or given hardware and dtype). A ratio whose
FLOPs are unknown (the trace has no shapes) is ``None`` and the planner keeps its prior.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import jsonio
from ..catalog import hardware
from ..errors import ConfigError

# not in gemm_eff: transfers, host transfers and idle; the op classes the planner rates by class
# (op_time_s: linear attention always, at its own rate; the experts' grouped GEMMs when a
# profile's op-class calibration rates them, gemm_eff_with_experts otherwise)
_NOT_WORK = ("comm:", "memcpy", "memset", "idle", "infeed_outfeed", "host_transfer", "linear_attention")
_NOT_COMPUTE = (*_NOT_WORK, "grouped_gemm")


@dataclass(frozen=True)
class TraceEfficiency:
    step_s: float
    gemm_eff: float | None
    attn_eff: float | None
    dp_overlap: float | None
    hardware: str | None
    rank: int
    comm_scale: float | None = None
    inter_scale: float | None = None
    why_no_flops: str | None = None  # the analysis's reason when no kernel had FLOPs (e.g. no shapes)
    memory_bytes: float | None = None  # the traced device's memory (its runtime's figure where the trace has it)
    # the median step's parts, seconds: compute, exposed communication, idle (absent in old reports)
    parts_s: dict[str, float] | None = None
    host_bound_s: float | None = None  # the median step's host-bound idle
    op_time_s: dict[str, float] | None = None  # the median step's time by op class (op_profile.py)
    gemm_eff_with_experts: float | None = None  # gemm_eff counting the experts' grouped GEMMs too


def _ratio(flops: float, dur_ns: float, peak: float) -> float | None:
    ratio = flops / (dur_ns * 1e-9 * peak) if flops > 0 and dur_ns > 0 and peak > 0 else None
    return ratio if ratio is not None and math.isfinite(ratio) else None


def from_report(doc: dict[str, Any], rank: int | None = None, where: str = "report") -> TraceEfficiency:
    """The efficiencies of one rank of an analyze report. A report edited by hand or damaged (a
    field of the wrong type, a step time that is not a positive number) is one error naming the
    file, not a traceback or a NaN prediction."""
    try:
        return _from_report(doc, rank, where)
    except (AttributeError, TypeError, ValueError, KeyError) as exc:
        raise ConfigError(
            f"a malformed stepscope analyze report ({exc.__class__.__name__}: {exc})",
            path=where,
            fix="pass the file stepscope analyze --json wrote, unedited",
        ) from None


def _from_report(doc: dict[str, Any], rank: int | None, where: str) -> TraceEfficiency:
    ranks = doc.get("ranks") if isinstance(doc, dict) else None
    if not isinstance(ranks, list) or not ranks:
        raise ConfigError(
            "not a stepscope analyze report (no 'ranks')",
            path=where,
            fix="pass the file written by stepscope analyze --json",
        )
    r = next((x for x in ranks if rank is None or x.get("rank") == rank), None)
    if r is None:
        raise ConfigError(f"rank {rank} is not in the report", path=where, fix="pick a rank listed in the report")
    med = (r.get("step_stats") or {}).get("median_ns")
    if not med:
        raise ConfigError("the report has no step times", path=where, fix="analyze a trace with at least one step")
    if isinstance(med, bool) or not isinstance(med, (int, float)) or not 0 < med < math.inf:
        raise ConfigError(
            f"the report's median step time is {med!r}, not a positive number of ns",
            path=where,
            fix="pass the file stepscope analyze --json wrote, unedited",
        )
    hw = r.get("hardware") or {}
    peak = float(hw.get("peak_tflops") or 0.0) * 1e12
    rows = [(c.get("category"), c.get("flops"), c.get("dur_ns")) for c in r.get("roofline_by_category") or []]
    xla = (r.get("extras") or {}).get("xla")
    if not any(f for _, f, _ in rows) and isinstance(xla, dict) and xla.get("flops_by_category"):
        # an XLA rank: its FLOPs are XLA's cost analysis, by category in the XLA view
        fl = xla["flops_by_category"]
        rows = [(s.get("label"), fl.get(s.get("label")), s.get("time_ns")) for s in xla.get("by_category") or []]
    att_f, att_d, oth_f, oth_d = _sums(rows, _NOT_COMPUTE)
    _, _, all_f, all_d = _sums(rows, _NOT_WORK)
    comm = sum(float(v.get("comm_ns") or 0) for v in (r.get("collectives") or {}).values())
    hidden = sum(float(v.get("overlapped_ns") or 0) for v in (r.get("collectives") or {}).values())
    return TraceEfficiency(
        step_s=float(med) * 1e-9,
        gemm_eff=_ratio(oth_f, oth_d, peak),
        attn_eff=_ratio(att_f, att_d, peak),
        dp_overlap=(hidden / comm) if comm > 0 else None,
        hardware=_text(hw.get("name")),
        rank=int(r.get("rank") or 0),
        why_no_flops=(str(r.get("roofline_note")) if r.get("roofline_note") and not (oth_f or att_f) else None),
        memory_bytes=hardware.plausible_memory_bytes(hw.get("memory_bytes")),
        parts_s=_median_step_parts(r.get("steps")),
        host_bound_s=_median_step_host_bound(r.get("steps")),
        op_time_s=_median_step_op_time(r.get("steps"), xla),
        gemm_eff_with_experts=_ratio(all_f, all_d, peak),
        **_comm_scales(doc.get("cluster"), _measured_intra(hw.get("name"))),
    )


def _median_step(steps: Any) -> dict[str, Any] | None:
    """The step with the median step time (the upper one of an even count), None without steps."""
    rows = (
        [st for st in steps if isinstance(st, dict) and _positive(st.get("step_time_ns"))]
        if isinstance(steps, list)
        else []
    )
    return sorted(rows, key=lambda st: float(st["step_time_ns"]))[len(rows) // 2] if rows else None


def _median_step_host_bound(steps: Any) -> float | None:
    """The median step's host-bound idle in seconds; None when the report lacks it or it is not a
    part of that step (a damaged report)."""
    med = _median_step(steps)
    if med is None or med.get("window_source") == "cpu":  # a CPU-only rank: no device waited
        return None
    causes = med.get("idle_causes")
    v = causes.get("host_bound_ns") if isinstance(causes, dict) else None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= float(med["step_time_ns"]):
        return None
    return float(v) * 1e-9


def _median_step_parts(steps: Any) -> dict[str, float] | None:
    """Compute, exposed communication and idle time of the step with the median step time, in
    seconds (what the model's baseline is set against in a what-if); None when the report lacks them."""
    med = _median_step(steps)
    if med is None:
        return None
    keys = {"compute": "compute_ns", "exposed_comm": "exposed_comm_ns", "idle": "idle_ns"}
    vals = {k: med.get(v) for k, v in keys.items()}
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf for v in vals.values()):
        return None
    return {k: float(v) * 1e-9 for k, v in vals.items()}  # type: ignore[arg-type]


def _sums(rows: list[tuple[Any, Any, Any]], skip: tuple[str, ...]) -> tuple[float, float, float, float]:
    """(attention FLOPs, attention ns, other compute FLOPs, other compute ns) of (category, FLOPs,
    ns) rows; the categories starting with one of ``skip`` and uncategorised rows left out."""
    att_f = att_d = oth_f = oth_d = 0.0
    for cat, flops, dur in rows:
        if not cat or str(cat).startswith(skip):
            continue
        if cat == "attention":
            att_f, att_d = att_f + float(flops or 0), att_d + float(dur or 0)
        else:
            oth_f, oth_d = oth_f + float(flops or 0), oth_d + float(dur or 0)
    return att_f, att_d, oth_f, oth_d


# the analysis's category -> op_profile.py's class
_OP_CLASSES = {"linear_attention": "linear_attention", "grouped_gemm": "grouped_gemm", "comm:all_to_all": "all_to_all"}


def _median_step_op_time(steps: Any, xla: Any) -> dict[str, float] | None:
    """The median step's kernel seconds of each op class on one device (the rank's XLA devices
    share the step's kernel time); None when the step has none of them."""
    med = _median_step(steps)
    ktime = med.get("kernel_time_by_category_ns") if med else None
    if not isinstance(ktime, dict):
        return None
    devices = _positive(xla.get("devices")) if isinstance(xla, dict) else None
    out = {
        cls: float(v) * 1e-9 / (devices or 1.0)
        for cat, cls in _OP_CLASSES.items()
        if (v := _positive(ktime.get(cat))) is not None
    }
    return out or None


def _text(v: Any) -> str | None:
    """A non-empty string field of the report, else None (a damaged name is no name)."""
    return v if isinstance(v, str) and v else None


def _positive(v: Any) -> float | None:
    """A positive finite number of the report, else None (absent in reports before schema 1.2)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v < math.inf:
        return None
    return float(v)


def _measured_intra(name: Any) -> dict[str, float]:
    """The catalog device's measured intra-node bus bandwidth by collective kind (GB/s), which the
    planner uses in place of the link peak; empty when unknown."""
    if not name:
        return {}
    try:
        return dict(hardware.by_name(str(name)).intra_node_busbw_gbps)
    except ConfigError:
        return {}


def _comm_scales(cluster: Any, intra_ref: dict[str, float] | None = None) -> dict[str, float | None]:
    """comm_scale from the collectives within a node (or of unknown link), inter_scale from those
    across nodes relative to it. A collective within a node is compared with the rate the planner
    assumes for it: the device's measured bus bandwidth for its type where the catalog has one
    (``intra_ref``), else the link peak, so a what-if does not charge the measured shortfall twice."""
    within: list[float] = []
    across: list[float] = []
    ref = intra_ref or {}
    for c in (cluster.get("collectives") or []) if isinstance(cluster, dict) else []:
        if isinstance(c, dict) and c.get("busbw_gbps") and c.get("peak_gbps") and (c.get("bytes") or 0) >= 1 << 20:
            if c.get("link") == "inter":
                across.append(float(c["busbw_gbps"]) / float(c["peak_gbps"]))
            else:
                within.append(float(c["busbw_gbps"]) / (ref.get(str(c.get("type"))) or float(c["peak_gbps"])))
    comm, inter = _inverse_median(within), _inverse_median(across)
    return {"comm_scale": comm, "inter_scale": inter / (comm or 1.0) if inter else None}


def _inverse_median(ratios: list[float]) -> float | None:
    med = statistics.median(ratios) if ratios else 0.0
    return 1.0 / med if med > 0 else None


def read(path: str, rank: int | None = None) -> TraceEfficiency:
    try:
        doc = jsonio.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(
            f"cannot read analysis report ({exc.__class__.__name__})",
            path=path,
            fix="pass the JSON written by stepscope analyze --json",
        ) from None
    return from_report(doc, rank, path)
