"""Terminal section for the cluster view."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..analysis.cluster.hccl_links import HcclLinkView
from ..analysis.cluster.hccl_wait import HcclWaitView
from ..analysis.cluster.results import ClusterView
from .cluster_json import finding_text
from .fit import Col, print_table
from .fmt import esc, ms

if TYPE_CHECKING:  # rich is loaded when a report is printed, not to write files
    from rich.console import Console

#: the critical path's kinds of time, in the order of the table's columns
_PATH_KINDS = (
    "compute",
    "communication",
    "data loading",
    "CPU",
    "launch overhead",
    "sync wait",
    "other idle",
    "memcpy",
)


def render(c: ClusterView | None, con: Console, top: int = 5) -> None:
    if c is None:
        return
    con.print(
        f"\n[bold]Cluster[/] ({c.ranks} ranks; {len(c.collectives)} collectives matched across ranks, "
        f"{c.unmatched_instances} seen on one rank only)",
        highlight=False,
    )
    offs = ", ".join(f"{r}: {v / 1e3:+.1f}" for r, v in sorted(c.clock_offsets_ns.items())[:16])
    con.print(
        f"clock offsets (us, from collective end times): {offs}{' ...' if len(c.clock_offsets_ns) > 16 else ''}",
        highlight=False,
    )
    cols = (
        Col("rank"),
        Col("score"),
        Col("cause", left=True),
        Col("z compute", drop=3),
        Col("z loader", drop=4),
        Col("z arrival", drop=5),
        Col("excess ms/step"),
        Col("what-if saving ms/step"),
        Col("straggler", drop=1),
    )
    rows = [
        (
            str(s.rank),
            f"{s.score:.1f}",
            s.cause,
            f"{s.z_compute:.1f}",
            f"{s.z_dataloader:.1f}",
            f"{s.z_arrival:.1f}",
            ms(s.excess_ns),
            ms(s.what_if_saving_ns),
            "yes" if s.is_straggler else "",
        )
        for s in c.stragglers[: max(top, sum(x.is_straggler for x in c.stragglers))]
    ]
    print_table(con, f"Ranks, worst first (straggler if score >= {c.threshold:g}; robust z-scores)", cols, rows)
    print_table(
        con,
        "Message sizes (transfer time = the rank that did not wait)",
        (Col("size", left=True), Col("collectives"), Col("transfer ms")),
        [(b.label, str(b.count), ms(b.time_ns)) for b in c.size_histogram if b.count],
    )
    if c.critical_paths:
        path_cols = (
            Col("step"),
            Col("length"),
            *(Col(k, drop=2 + i) for i, k in enumerate(_PATH_KINDS)),
            Col("ranks on the path (ms)", name=True),
        )
        path_rows = [
            (
                str(cp.step),
                ms(cp.length_ns),
                *(ms(cp.by_kind_ns[k]) for k in _PATH_KINDS),
                ", ".join(f"{r}: {v / 1e6:.1f}" for r, v in sorted(cp.by_rank_ns.items(), key=lambda kv: -kv[1])[:4]),
            )
            for cp in c.critical_paths
        ]
        print_table(
            con, "Critical path per step (through the last arriver of each collective; ms)", path_cols, path_rows
        )
    _hccl_wait(c, con)
    _hccl_links(c, con)
    for f in c.findings:
        con.print(f"- {esc(finding_text(f))}", highlight=False)


def _hccl_wait(c: ClusterView, con: Console) -> None:
    """The ranks the others wait for, as HCCL measured it (Ascend; ``analysis/cluster/hccl_wait.py``)."""
    view = c.extras.get("hccl_wait")
    if not isinstance(view, HcclWaitView):
        return
    late = ", ".join(f"rank {r.rank} ({ms(r.waited_for_ns)} ms per step)" for r in view.ranks if r.late)
    con.print(
        f"- HCCL's own timing: the others wait for {late}"
        if late
        else "- HCCL's own timing: no rank keeps the others waiting",
        highlight=False,
    )


def _hccl_links(c: ClusterView, con: Console) -> None:
    """HCCL's slow links (Ascend; ``analysis/cluster/hccl_links.py``)."""
    view = c.extras.get("hccl_links")
    if not isinstance(view, HcclLinkView) or not view.links:
        return
    for x in view.slow[:8]:
        con.print(
            f"- HCCL link {x.src} -> {x.dst} ({esc(x.transport)}) moved {x.gbps or 0:.1f} GB/s, under half the "
            f"{x.median_gbps or 0:.1f} GB/s median of its transport's links: a degraded link or port",
            highlight=False,
        )
    if not view.slow:
        con.print(
            f"- HCCL's links: {len(view.links)} measured, none under half its transport's median", highlight=False
        )
