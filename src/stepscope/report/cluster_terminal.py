"""Terminal section for the cluster view."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from ..analysis.cluster.results import ClusterView
from .cluster_json import finding_text
from .fmt import esc, ms

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
    t = Table(title=f"Ranks, worst first (straggler if score >= {c.threshold:g}; robust z-scores)")
    for col in (
        "rank",
        "score",
        "cause",
        "z compute",
        "z loader",
        "z arrival",
        "excess ms/step",
        "what-if saving ms/step",
        "straggler",
    ):
        t.add_column(col, justify="right")
    for s in c.stragglers[: max(top, sum(x.is_straggler for x in c.stragglers))]:
        t.add_row(
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
    con.print(t)
    h = Table(title="Message sizes (transfer time = the rank that did not wait)")
    for col in ("size", "collectives", "transfer ms"):
        h.add_column(col, justify="right")
    for b in c.size_histogram:
        if b.count:
            h.add_row(b.label, str(b.count), ms(b.time_ns))
    con.print(h)
    if c.critical_paths:
        p = Table(title="Critical path per step (through the last arriver of each collective; ms)")
        for col in ("step", "length", *_PATH_KINDS, "ranks on the path (ms)"):
            p.add_column(col, justify="right")
        for cp in c.critical_paths:
            on = ", ".join(f"{r}: {v / 1e6:.1f}" for r, v in sorted(cp.by_rank_ns.items(), key=lambda kv: -kv[1])[:4])
            p.add_row(
                str(cp.step),
                ms(cp.length_ns),
                *(ms(cp.by_kind_ns[k]) for k in _PATH_KINDS),
                on,
            )
        con.print(p)
    for f in c.findings:
        con.print(f"- {esc(finding_text(f))}", highlight=False)
