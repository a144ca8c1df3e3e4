"""HTML section for the cluster view (strings escaped)."""

from __future__ import annotations

from html import escape

from ..analysis.cluster.results import ClusterView
from .cluster_json import finding_text
from .fmt import ms


def section(c: ClusterView | None, top: int = 10) -> str:
    if c is None:
        return ""
    o = [
        f"<section id='cluster'><h2>Cluster ({c.ranks} ranks)</h2><p>{len(c.collectives)} collectives matched across ranks; "
        f"clock offsets estimated from collective end times.</p>"
    ]
    o.append(
        "<h3>Stragglers (robust z-scores, worst first)</h3><table><tr><th>rank</th><th>score</th><th class='l'>cause</th>"
        "<th>excess ms/step</th><th>what-if saving ms/step</th><th>straggler</th></tr>"
    )
    for s in c.stragglers[: max(top, sum(x.is_straggler for x in c.stragglers))]:
        o.append(
            f"<tr><td>{s.rank}</td><td>{s.score:.1f}</td><td class='l'>{escape(s.cause)}</td><td>{ms(s.excess_ns)}</td>"
            f"<td>{ms(s.what_if_saving_ns)}</td><td>{'yes' if s.is_straggler else ''}</td></tr>"
        )
    o.append(
        "</table><h3>Rank x step (ms)</h3><table><tr><th>rank</th><th>step</th><th>step ms</th><th>compute</th><th>exposed comm</th>"
        "<th>sync wait</th><th>data loader</th><th>idle</th></tr>"
    )
    for m in c.matrix[:400]:
        o.append(
            f"<tr><td>{m.rank}</td><td>{m.step}</td><td>{ms(m.step_ns)}</td><td>{ms(m.compute_ns)}</td><td>{ms(m.exposed_comm_ns)}</td>"
            f"<td>{ms(m.sync_wait_ns)}</td><td>{ms(m.dataloader_ns)}</td><td>{ms(m.idle_ns)}</td></tr>"
        )
    o.append("</table><ul>" + "".join(f"<li>{escape(finding_text(f))}</li>" for f in c.findings) + "</ul></section>")
    return "".join(o)
