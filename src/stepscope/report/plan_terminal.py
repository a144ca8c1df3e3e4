"""The plan's terminal output: the strategies as a table at its natural width (a cell cut to "…"
says nothing, a wrapped line still does), then the lines under it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..planner.result import PlanResult
from .base import Renderer

COLUMNS = (
    *(
        "TP",
        "SP",
        "PP",
        "VPP",
        "DP",
        "CP",
        "EP",
        "ETP",
        "ZeRO",
        "shard",
        "kept W",
        "sched",
        "MB",
        "GA",
        "remat",
        "offl",
    ),
    *("W", "G", "O", "act", "buf+res", "total GB"),
    *("compute", "host s", "TP s", "EP s", "DP s", "CP s", "PP+bubble", "offl s", "step s", "MFU", "bottleneck"),
)
#: what the abbreviated columns mean, printed under the table (only for the columns shown)
LEGEND = {
    "SP": "sequence parallelism off with TP",
    "VPP": "virtual pipeline stages",
    "ETP": "expert tensor parallelism",
    "shard": "ZeRO-3/FSDP shard group (HSDP)",
    "kept W": "ZeRO-3 weights kept between forward and backward",
    "sched": "pipeline schedule",
    "MB": "micro-batch",
    "GA": "gradient accumulation steps",
    "remat": "activation recomputation",
    "offl": "activation offload",
    "W": "weights GB",
    "G": "gradients GB",
    "O": "optimizer states GB",
    "act": "activations GB",
    "buf+res": "communication buffers + framework reserve GB",
    "host s": "device waiting on the host, s",
    "PP+bubble": "pipeline bubble + point-to-point, s",
    "offl s": "offload transfers not hidden, s",
}

# what a column shows when it says nothing (off in every row: no CP, no experts, no offload, no
# HSDP, plain 1F1B); such columns are left out so the rest fits a terminal (ETP: when equal to TP)
TRIVIAL = {
    "SP": "",
    "VPP": "1",
    "CP": "1",
    "EP": "1",
    "shard": "0",
    "kept W": "",
    "sched": "1f1b",
    "offl": "",
    "EP s": "0.00",
    "CP s": "0.00",
    "offl s": "0.00",
    "host s": "0.00",
}


def _cells(r: dict[str, Any]) -> list[str]:
    """One row's cells, in COLUMNS order."""
    s, m, ts = r["strategy"], r["memory_gb"], r["time_s"]
    return [
        str(s["tp"]),
        "no" if s["tp"] > 1 and not s["sp"] else "",
        *(str(s[k]) for k in ("pp", "vpp", "dp", "cp", "ep", "etp", "zero", "hsdp")),
        "yes" if s["keep_params"] else "",
        *(str(s[k]) for k in ("sched", "mb")),
        f"{r['grad_accum']:g}",
        s["recompute"],
        (str(s["offload_layers"]) if s["offload_layers"] else "yes") if s["offload"] else "",
        *(f"{m[k]:.1f}" for k in ("weights", "grads", "optimizer", "activations")),
        f"{m['buffers'] + m['reserve']:.1f}",
        f"{m['total']:.1f}",
        *(f"{ts[k]:.2f}" for k in ("compute", "host", "tp", "ep", "dp", "cp")),
        f"{ts['bubble'] + ts['pp_p2p']:.2f}",
        f"{ts['offload']:.2f}",
        f"{r['step_time_s']:.2f}",
        f"{r['mfu']:.1%}",
        r["bottleneck"] + ("" if r["fits"] else " (OOM)"),
    ]


def table(recs: list[dict[str, Any]]) -> Any:
    """The rows as a rich Table, without the columns that say nothing for them."""
    from rich.table import Table

    rows = [_cells(r) for r in recs]
    tp_col = COLUMNS.index("TP")

    def says_something(i: int) -> bool:
        if COLUMNS[i] == "ETP":
            return any(row[i] != row[tp_col] for row in rows)
        return COLUMNS[i] not in TRIVIAL or any(row[i] != TRIVIAL[COLUMNS[i]] for row in rows)

    keep = [i for i in range(len(COLUMNS)) if says_something(i)]
    t = Table(title="Strategies, fastest that fit first")
    for i in keep:
        t.add_column(COLUMNS[i], justify="right", no_wrap=True)
    for row in rows:
        t.add_row(*(row[i] for i in keep))
    return t


def render(result: PlanResult, options: Mapping[str, Any]) -> None:
    """Print the table and the lines on ``options["console"]`` (a rich Console; standard output, as
    wide as the table needs, if absent)."""
    from rich.console import Console
    from rich.measure import Measurement

    t = table(list(result.records))
    con = options.get("console")
    if con is None:
        probe = Console()
        need = Measurement.get(probe, probe.options.update(width=10_000), t).maximum
        con = Console(width=max(probe.width, need))
    con.print(t)
    shown = [str(c.header) for c in t.columns]
    legend = "; ".join(f"{k}: {v}" for k, v in LEGEND.items() if k in shown)
    if legend:
        con.print(legend, markup=False, highlight=False)
    for line in result.lines:  # user-given names and paths: no rich markup
        con.print(line, markup=False, highlight=False)


RENDERER = Renderer(name="terminal", subject="plan", extensions=(), render=render, description="the console table")
