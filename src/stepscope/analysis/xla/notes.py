"""What the roofline section says about FLOPs on a JAX/XLA rank.

PyTorch ops get FLOPs from recorded input shapes (``record_shapes=True``); XLA ops get them from
XLA's cost analysis, carried by the profile (``flops`` stat of an XPlane op) or joined from the HLO
text (``--hlo``). Coverage = share of in-step XLA op time whose op has known FLOPs.
"""

from __future__ import annotations

import numpy as np

from ..context import RankContext

PYTORCH_NO_SHAPES = "the trace has no recorded shapes, so no FLOPs: profile with record_shapes=True"


def missing_flops_note(ctx: RankContext) -> str:
    """The note for a rank whose ops have no recorded shapes: PyTorch advice for a PyTorch trace;
    for an XLA profile, where its FLOPs are (the XLA view) or how to get them (``--hlo``)."""
    x = ctx.data.dev.xla
    if x is None:
        return PYTORCH_NO_SHAPES
    d = ctx.data.dev
    sel = (ctx.dev_step >= 0) & x.op.valid
    dur = (d.end - d.ts)[sel].astype(np.float64)
    total = float(dur.sum())
    known = float(dur[x.flops[sel] >= 0].sum())
    if total and known:
        return (
            f"FLOPs of XLA ops come from XLA's cost analysis ({known / total:.0%} of XLA op time): "
            "see the XLA view's per-op roofline"
        )
    return (
        "the XLA profile carries no FLOPs: pass --hlo with the program's HLO text (compiled.as_text() or an XLA dump)"
    )
