"""Perfetto / Chrome trace of the cluster view: one process per rank with its collectives (sync
wait and transfer), and a "critical path" process with the path's segments, linked by flow arrows
(``.perfetto.json``; open it in ui.perfetto.dev or chrome://tracing). Times are the aligned clock
of the cluster view (rank offsets removed), written in microseconds as the trace format wants.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..analysis.cluster.critical_path import Segment, StepPath
from ..analysis.cluster.results import ClusterView, Instance
from ..analysis.results import Analysis
from ..errors import ConfigError
from .base import Renderer

Event = dict[str, Any]


def _metadata(ranks: list[int], cp_pid: int) -> list[Event]:
    ev: list[Event] = []
    for r in ranks:
        ev.append({"ph": "M", "name": "process_name", "pid": r, "args": {"name": f"rank {r}"}})
        ev.append({"ph": "M", "name": "thread_name", "pid": r, "tid": 1, "args": {"name": "collectives"}})
        ev.append({"ph": "M", "name": "thread_name", "pid": r, "tid": 2, "args": {"name": "critical path"}})
    ev.append({"ph": "M", "name": "process_name", "pid": cp_pid, "args": {"name": "critical path (all ranks)"}})
    return ev


def _collectives(instances: Iterable[Instance]) -> list[Event]:
    """Each rank's part of each collective, and its sync wait (the leading part) when it waited."""
    ev: list[Event] = []
    for x in instances:
        for r, tm in x.ranks.items():
            args = {"wait_ns": tm.wait_ns, "transfer_ns": tm.transfer_ns, "bytes": x.bytes, "last_rank": x.last_rank}
            name = f"{x.type} {x.group}#{x.seq}"
            ev.append(
                {
                    "ph": "X",
                    "pid": r,
                    "tid": 1,
                    "ts": tm.start_ns / 1e3,
                    "dur": tm.dur_ns / 1e3,
                    "name": name,
                    "args": args,
                }
            )
            if tm.wait_ns:
                ev.append(
                    {
                        "ph": "X",
                        "pid": r,
                        "tid": 1,
                        "ts": tm.start_ns / 1e3,
                        "dur": tm.wait_ns / 1e3,
                        "name": "sync wait",
                    }
                )
    return ev


def _segment(p: StepPath, s: Segment, cp_pid: int) -> list[Event]:
    """The segment twice: on the all-ranks critical path and on its rank's own critical-path thread."""
    name = s.label if s.kind == "communication" else f"rank {s.rank} local"
    args = {
        "step": p.step,
        "rank": s.rank,
        "compute_ns": s.compute_ns,
        "comm_ns": s.comm_ns,
        "memcpy_ns": s.memcpy_ns,
        "loader_ns": s.loader_ns,
        "cpu_ns": s.host_ns,
        "launch_ns": s.launch_ns,
        "wait_ns": s.wait_ns,
        "other_ns": s.other_ns,
    }
    return [
        {
            "ph": "X",
            "pid": pid,
            "tid": tid,
            "ts": s.start_ns / 1e3,
            "dur": (s.end_ns - s.start_ns) / 1e3,
            "name": name,
            "cat": "critical_path",
            "args": args,
        }
        for pid, tid in ((cp_pid, 0), (s.rank, 2))
    ]


def _flow(flow_id: int, prev: Segment, s: Segment) -> list[Event]:
    """An arrow from the end of ``prev`` to the start of ``s`` (the path moving to another rank)."""
    return [
        {
            "ph": "s",
            "id": flow_id,
            "pid": prev.rank,
            "tid": 2,
            "ts": prev.end_ns / 1e3 - 0.001,
            "name": "path",
            "cat": "critical_path",
        },
        {
            "ph": "f",
            "bp": "e",
            "id": flow_id,
            "pid": s.rank,
            "tid": 2,
            "ts": s.start_ns / 1e3,
            "name": "path",
            "cat": "critical_path",
        },
    ]


def _paths(paths: Iterable[StepPath], cp_pid: int) -> list[Event]:
    ev: list[Event] = []
    flow = 0
    for p in paths:
        prev: Segment | None = None
        for s in p.segments:
            ev += _segment(p, s, cp_pid)
            if prev is not None and prev.rank != s.rank:
                flow += 1
                ev += _flow(flow, prev, s)
            prev = s
    return ev


def perfetto(paths: tuple[StepPath, ...], instances: list[Instance], ranks: list[int]) -> dict[str, Any]:
    """The trace as a JSON-ready dict. The ``stepscope_output`` marker comes first so that a
    directory read (``trace/loader.py``) recognises the file as an output, not an input trace."""
    cp_pid = max(ranks, default=0) + 1
    return {
        "stepscope_output": "critical-path",
        "traceEvents": _metadata(ranks, cp_pid) + _collectives(instances) + _paths(paths, cp_pid),
        "displayTimeUnit": "ns",
        "otherData": {"producer": "stepscope cluster view", "clock": "aligned (rank offsets removed)"},
    }


def render(a: Analysis, options: Mapping[str, Any]) -> str:
    c = a.cluster
    if not isinstance(c, ClusterView):
        raise ConfigError("a critical path trace needs 2 or more ranks", fix="pass the trace files of all ranks")
    return json.dumps(perfetto(c.critical_paths, list(c.collectives), [r.rank for r in a.ranks]))


RENDERER = Renderer(
    name="perfetto",
    subject="analysis",
    extensions=(".perfetto.json",),
    render=render,
    description="Perfetto/Chrome trace of the collectives and the cross-rank critical path, 2+ ranks",
)
