"""Time and FLOPs by module / annotation scope.

Scopes are ``nn.Module: <Class>_<n>`` ranges (``with_modules=True``; the instance suffix is
dropped so all ``Linear`` modules add up) and user annotations (``record_function``, Megatron/TE
named ranges; not ``ProfilerStep#``). A device kernel belongs to every scope whose range on the
launching thread contains its launch call (inclusive: an attention module includes its Linear
layers). Backward kernels run on the autograd thread, outside module ranges, so module figures are
forward-pass figures; annotations placed around backward code count it.
For the ``MAX_SCOPES`` scopes with the most host time:
``kernel_ns`` = summed kernel time, ``flops`` = FLOPs of the ops launched inside,
``achieved_tflops = flops / kernel time``, ``mfu_ratio = flops / (kernel time x peak)``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ...trace.dictcol import DictColumn, dict_mask, lookup_table
from ..context import RankContext
from .phases import ThreadRanges

#: scopes reported, those with the most host time
MAX_SCOPES = 40

_MODULE = "nn.Module: "
_INSTANCE = re.compile(r"_\d+$")
_SKIP = re.compile(r"^ProfilerStep#|^XLAStep#|^nccl:|^gloo:|^enumerate\(DataLoader\)|^Optimizer\.|^## ")


def _label(name: str) -> str:
    """A module range's class without its instance suffix; an annotation's own name."""
    return _INSTANCE.sub("", name[len(_MODULE) :]) if name.startswith(_MODULE) else name


@dataclass(frozen=True)
class ScopeStat:
    name: str
    kind: str  # "module" | "annotation"
    instances: int
    host_ns: int  # summed duration of the ranges (CPU time, inclusive)
    kernels: int
    kernel_ns: int
    flops: float
    achieved_tflops: float
    mfu_ratio: float | None


def compute(ctx: RankContext) -> tuple[ScopeStat, ...]:
    events, rd, dev_step = ctx.events, ctx.data, ctx.dev_step
    kernel_flops, peak_flops = ctx.costs.kernel_flops, ctx.peak_flops
    is_module = dict_mask(events["kind"], lambda k: k == "python_function") & dict_mask(
        events["name"], lambda n: n.startswith(_MODULE)
    )
    is_annot = dict_mask(events["kind"], lambda k: k == "user_annotation")
    rows = events.select(["kind", "name", "tid", "ts_ns", "dur_ns"]).take(
        pa.array(np.flatnonzero(is_module | is_annot))
    )
    if rows.num_rows == 0 or rd.dev.size == 0:
        return ()
    names = DictColumn.of(rows["name"])  # the regexes run once per distinct name
    distinct = names.values[:-1]
    mod = lookup_table(distinct, lambda n: n.startswith(_MODULE), null=False, dtype=bool)[names.codes]
    labels = lookup_table(distinct, _label)[names.codes]
    keep = lookup_table(distinct, lambda n: n.startswith(_MODULE) or not _SKIP.search(n), null=False, dtype=bool)
    keep = keep[names.codes]
    tid, ts, dur = rows["tid"].to_numpy(), rows["ts_ns"].to_numpy(), rows["dur_ns"].to_numpy()
    labels, mod, tid, ts, dur = labels[keep], mod[keep], tid[keep], ts[keep], dur[keep]
    if labels.size == 0:
        return ()
    uniq, inv = np.unique(labels.astype(str), return_inverse=True)
    host_ns = np.bincount(inv, weights=dur)
    order = np.argsort(-host_ns)[:MAX_SCOPES]
    d = rd.dev
    in_step = (dev_step >= 0) & (d.launch_ts >= 0)
    lt, lts, kdur, kfl = d.launch_tid[in_step], d.launch_ts[in_step], (d.end - d.ts)[in_step], kernel_flops[in_step]
    times = np.concatenate([ts, ts + dur, lts]) if lts.size else np.concatenate([ts, ts + dur])
    lo, span = int(times.min()), int(times.max() - times.min()) + 2
    out = []
    for j in order:
        m = inv == j
        inside = ThreadRanges(tid[m], ts[m], ts[m] + dur[m], lo, span).contains(lt, lts)
        k_ns = int(kdur[inside].sum())
        fl = float(kfl[inside].sum())
        out.append(
            ScopeStat(
                name=str(uniq[j]),
                kind="module" if mod[m].any() else "annotation",
                instances=int(m.sum()),
                host_ns=int(host_ns[j]),
                kernels=int(inside.sum()),
                kernel_ns=k_ns,
                flops=fl,
                achieved_tflops=fl / (k_ns / 1e9) / 1e12 if k_ns else 0.0,
                mfu_ratio=(fl / (k_ns / 1e9) / peak_flops) if (k_ns and peak_flops and fl) else None,
            )
        )
    return tuple(sorted(out, key=lambda s: -s.kernel_ns))
