"""Ranks as read -> rank analyses, the same for a file read in a worker and for a :class:`Trace` in memory.

A *unit* is what one read gives: a file (or one (process, device) of an Nsight export), or one rank of a
loaded Trace. It is analyzed into one rank, or, for a JAX/XLA host file with several devices
(``AnalyzeConfig.split_devices``), one rank per device: the host rows shared, each device with its own
rows and steps. :func:`merge` numbers the ranks of all units and collapses their notices.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import pyarrow.compute as pc

from ..notices import Notice
from ..trace.assemble import RankInfo, Trace, resolve_ranks
from .classify import Rules, load_rules
from .cluster.view import cluster_view
from .config import AnalyzeConfig
from .context import RankInput
from .rank import analyze_rank
from .results import Analysis, RankAnalysis


@dataclass(frozen=True)
class Part:
    """One rank of a unit, numbered as in its unit, with the notices about it."""

    analysis: RankAnalysis
    notices: tuple[Notice, ...]


@dataclass(frozen=True)
class UnitResult:
    found: tuple[int | None, str]  # the rank the unit names for itself, and where from
    notices: tuple[Notice, ...]  # about the unit's file
    parts: tuple[Part, ...]  # one, or one per device of a multi-device host


def renumbered(notices: tuple[Notice, ...] | list[Notice], old: int, new: int) -> tuple[Notice, ...]:
    """Notices of rank ``old`` under the rank's final number."""
    return tuple(dataclasses.replace(n, rank=new) if n.rank == old else n for n in notices)


def with_hlo(trace: Trace, cfg: AnalyzeConfig) -> tuple[Trace, list[Notice]]:
    """The trace with the HLO modules of ``cfg.hlo_files`` joined to its XLA ops (``xla/join.py``)."""
    if not cfg.hlo_files:
        return trace, []
    from ..trace.hlo import read_hlo
    from .xla.join import join_hlo

    modules = [m for f in cfg.hlo_files for m in read_hlo(f)]
    events, matched = join_hlo(trace.events, modules)
    notices = []
    if events["op"].null_count == events.num_rows:
        notices.append(Notice("--hlo given but the trace has no XLA ops to join (not a JAX/XLA profile)"))
    elif matched < 0.5:
        notices.append(
            Notice(
                f"only {matched:.0%} of the profiled XLA ops name an instruction of the HLO given; is it the same "
                "program?"
            )
        )
    return dataclasses.replace(trace, events=events), notices


def rank_inputs(trace: Trace) -> list[RankInput]:
    one = len(trace.ranks) == 1
    return [
        RankInput(
            info=info,
            events=trace.events if one else trace.events.filter(pc.equal(trace.events["rank"], info.rank)),
            comm_args=trace.comm_args.get(info.rank),
            counters=trace.counters.get(info.rank, ()),
            memory=trace.memory.get(info.rank),
        )
        for info in trace.ranks
    ]


def analyze_unit(unit: RankInput, cfg: AnalyzeConfig, rules: Rules) -> tuple[Part, ...]:
    """The unit's rank, or one rank per device (numbered by device) of a JAX/XLA host with several."""
    if unit.info.format == "xplane" and cfg.split_devices:
        from ..trace.xplane import split_devices

        tables = split_devices(unit.events)
        if len(tables) > 1:
            out = []
            for device, table in tables:
                info = dataclasses.replace(unit.info, num_events=table.num_rows)
                ra, notices = analyze_rank(dataclasses.replace(unit, info=info, events=table), cfg, rules)
                out.append(Part(dataclasses.replace(ra, rank=device), renumbered(notices, ra.rank, device)))
            return tuple(out)
    ra, notices = analyze_rank(unit, cfg, rules)
    return (Part(ra, tuple(notices)),)


def trace_units(trace: Trace, cfg: AnalyzeConfig) -> tuple[list[UnitResult], list[Notice]]:
    """Each rank of a loaded trace as a unit (ranks already numbered), and the trace's notices."""
    rules = load_rules(cfg.rules_file)
    trace, hlo_notices = with_hlo(trace, cfg)
    units = [UnitResult((u.info.rank, u.info.rank_source), (), analyze_unit(u, cfg, rules)) for u in rank_inputs(trace)]
    return units, [*trace.notices, *hlo_notices]


def merge(paths: list[str], units: list[UnitResult], first: list[Notice], cfg: AnalyzeConfig) -> Analysis:
    """Number the units' ranks (their own where known and free, else by order; when a unit was split by
    device, all ranks in order: 0, 1, ...), label split devices, collapse the notices, build the cluster
    view. ``paths``: the units' files; ``first``: notices placed before the units'."""
    resolved, notices = resolve_ranks(paths, [u.found for u in units])
    notices = [*first, *notices]
    multi = any(len(u.parts) > 1 for u in units)
    next_rank = 0
    new_rank: dict[tuple[int, int], int] = {}
    for i in sorted(range(len(units)), key=lambda i: resolved[i][0]):
        for j in range(len(units[i].parts)):
            new_rank[(i, j)] = next_rank if multi else resolved[i][0]
            next_rank += 1
    ranks = []
    for i, u in enumerate(units):
        notices.extend(u.notices)
        for j, part in enumerate(u.parts):
            ra, rank = part.analysis, new_rank[(i, j)]
            notices.extend(renumbered(part.notices, ra.rank, rank))
            device = _device_label(ra) if len(u.parts) > 1 else ra.device
            ranks.append(dataclasses.replace(ra, rank=rank, device=device))
    ranks.sort(key=lambda r: r.rank)
    # the parts of one export repeat its file-level notices: once each
    return Analysis(
        ranks=tuple(ranks),
        notices=tuple(dict.fromkeys(notices)),
        inputs=tuple(r.path for r in ranks),
        cluster=cluster_view(tuple(ranks), cfg),
    )


def _device_label(ra: RankAnalysis) -> str:
    """A device of a multi-device file (``ra.rank``: its device number)."""
    return f"{ra.device or ''} (device {ra.rank} of {Path(ra.path).name})".strip()


__all__ = ["Part", "RankInfo", "UnitResult", "analyze_unit", "merge", "trace_units"]
