"""What a diff compares, from an analysis or from its ``analyze --json`` report: per rank, the steady
steps (warm-up excluded) with their breakdown, kernel time by name and by category, and the
advisor's findings.

The breakdown components of a step add up to its time (``docs/json-schema.md``, "Definitions"):
``compute + exposed_comm + exposed_memcpy + idle_input_wait + idle_host_bound + idle_sync_wait +
idle_other = step_time``, so mean deltas of the components add up to the mean step delta.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..analysis.results import Analysis
from ..errors import InputError

COMPONENTS = (
    "compute_ns",
    "exposed_comm_ns",
    "exposed_memcpy_ns",
    "idle_input_wait_ns",
    "idle_host_bound_ns",
    "idle_sync_wait_ns",
    "idle_other_ns",
)


@dataclass(frozen=True, kw_only=True)
class StepRow:
    step_ns: int
    parts: dict[str, int]  # COMPONENTS


@dataclass(frozen=True, kw_only=True)
class RankProfile:
    rank: int
    steps: tuple[StepRow, ...]
    kernels: dict[str, tuple[str, float]]  # name -> (category, total ns over the steady steps)
    kernel_categories: dict[str, float]  # category -> kernel time ns summed over the steady steps
    # "op [shapes, dtype]" -> (category, kernel time it launched, ns, over all steps): the framework
    # op and its input shapes are the same on every vendor, the kernels it launches are not
    ops: dict[str, tuple[str, float]] = field(default_factory=dict)
    all_steps: int = 0  # the steps the op times cover (the roofline's: warm-up included)


@dataclass(frozen=True, kw_only=True)
class RunProfile:
    source: str
    ranks: tuple[RankProfile, ...]
    findings: dict[str, float] = field(default_factory=dict)  # finding id -> mid saving ns per step
    device: str | None = None


def _parts(compute: int, comm: int, memcpy: int, causes: dict[str, int]) -> dict[str, int]:
    return {
        "compute_ns": compute,
        "exposed_comm_ns": comm,
        "exposed_memcpy_ns": memcpy,
        "idle_input_wait_ns": causes["input_wait_ns"],
        "idle_host_bound_ns": causes["host_bound_ns"],
        "idle_sync_wait_ns": causes["wait_ns"],
        "idle_other_ns": causes["other_ns"],
    }


def from_analysis(a: Analysis, source: str) -> RunProfile:
    ranks = []
    for r in a.ranks:
        steady = [s for s in r.steps if not s.warmup]
        rows = tuple(
            StepRow(
                step_ns=s.step_time_ns,
                parts=_parts(
                    s.compute_ns,
                    s.exposed_comm_ns,
                    s.exposed_memcpy_ns,
                    {k: getattr(s.idle_causes, k) for k in ("input_wait_ns", "host_bound_ns", "wait_ns", "other_ns")},
                ),
            )
            for s in steady
        )
        cats: dict[str, float] = {}
        for s in steady:
            for c, v in s.kernel_time_by_category_ns.items():
                cats[c] = cats.get(c, 0.0) + v
        kernels = {k.name: (k.category, float(k.total_ns)) for k in r.top_kernels}
        groups = r.roofline.groups if r.roofline is not None else ()
        ops = {_op_key(g.name, g.signature, g.dtype): ("op", float(g.dur_ns)) for g in groups}
        ranks.append(
            RankProfile(
                rank=r.rank, steps=rows, kernels=kernels, kernel_categories=cats, ops=ops, all_steps=len(r.steps)
            )
        )
    findings = {f.id: float(f.saving.mid_ns) for f in a.findings}
    device = a.ranks[0].device if a.ranks else None
    return RunProfile(source=source, ranks=tuple(ranks), findings=findings, device=device)


def from_report(d: Any, source: str) -> RunProfile:
    """A profile from an ``analyze --json`` report (schema 2.x)."""
    if not isinstance(d, dict) or d.get("tool") != "stepscope" or not str(d.get("schema_version", "")).startswith("2."):
        raise InputError(
            "not a stepscope analyze report of schema 2.x",
            path=source,
            fix="pass a trace, or a report of `stepscope analyze --json`",
        )
    try:
        ranks = tuple(_rank_from_report(r) for r in d["ranks"])
        findings = {str(f["id"]): float(f["saving_ns"]["mid"]) for f in d.get("findings", [])}
    except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as exc:
        raise InputError(
            f"a field of the report is missing or wrong ({exc})",
            path=source,
            fix="re-create it with `stepscope analyze --json`",
        ) from None
    device = d["ranks"][0].get("device") if d["ranks"] else None
    return RunProfile(source=source, ranks=ranks, findings=findings, device=device)


def _rank_from_report(r: dict[str, Any]) -> RankProfile:
    steady = [s for s in r["steps"] if not s.get("warmup", False)]
    rows = tuple(
        StepRow(
            step_ns=int(s["step_time_ns"]),
            parts=_parts(
                int(s["compute_ns"]), int(s["exposed_comm_ns"]), int(s["exposed_memcpy_ns"]), s["idle_causes"]
            ),
        )
        for s in steady
    )
    cats: dict[str, float] = {}
    for s in steady:
        for c, v in s["kernel_time_by_category_ns"].items():
            cats[c] = cats.get(c, 0.0) + float(v)
    kernels = {str(k["name"]): (str(k["category"]), float(k["total_ns"])) for k in r["top_kernels"]}
    ops = {
        _op_key(str(g["name"]), str(g["signature"]), str(g["dtype"])): ("op", float(g["dur_ns"]))
        for g in r.get("roofline", [])
    }
    return RankProfile(
        rank=int(r["rank"]),
        steps=rows,
        kernels=kernels,
        kernel_categories=cats,
        ops=ops,
        all_steps=len(r["steps"]),
    )


def _op_key(name: str, signature: str, dtype: str) -> str:
    """``aten::mm[[8944,1024],[1024,2816]] bf16``: the roofline group's signature (the op name with
    its input shapes) and dtype."""
    head = signature if signature.startswith(name) else f"{name} {signature}"
    return f"{head} {dtype}".strip()
