"""JAX/XLA view of a rank: op categories, fusion kinds, async-collective stalls, named scopes,
autodiff phases and remat, per-op roofline. Registered as the ``xla`` rank analysis (``extras``);
``None`` for traces without HLO ops.

Times are sums of device-op durations inside the steps, over all devices of the rank (a host with
4 chips contributes 4 device timelines); shares are of that sum.
- **Async stall**: time in ``*-done`` ops of async collectives (``all-reduce-done``,
  ``all-gather-done``, ``collective-permute-done``...): the device waits there for a transfer it
  started earlier, i.e. exposed communication in XLA terms.
- **Named scopes**: the name stack (``tf_op`` in the profile, else the HLO ``op_name`` after
  ``--hlo``) without its last segment (the primitive); transformation wrappers are unwrapped
  (``transpose(jvp(layers))`` -> ``layers``), ``jit(f)``, ``shard_map``, ``while/body``,
  ``closed_call``, ``checkpoint``... are dropped, einsum specs too. The path and its leaf (the
  innermost ``jax.named_scope``) are reported. An op XLA merged from several (``prefix/(a/op:b/op)``)
  is attributed to ``prefix/a+b``.
- **Phases**: one definition with the "Device time by phase" table, ``roofline.phases.xla_phase``
  (``transpose(...)`` = backward, under remat = recompute, ``jvp(...)`` = forward, optimizer-named
  scopes outside autodiff = optimizer, the rest forward); shares here are of summed op time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..context import RankContext
from ..roofline.phases import PHASES, xla_phase
from .ops import fusion_kind, is_async_done

_WRAPPER = re.compile(
    r"^(jvp|transpose|vmap|pmap|remat|remat2|checkpoint|named_call|pjit|xla_pmap|custom_jvp_call|custom_vjp_call"
    r"|custom_vjp_call_jaxpr|core_call|shard_map|smap|xmap)\((.*)\)$"
)
_DROP = re.compile(
    r"^(jit\(.*\)|pjit\(.*\)|shard_map|while|body|cond|closed_call|core_call|checkpoint|rematted_computation|remat\d*"
    r"|scan|branch_\d+|jvp|transpose|vmap|xla_call|custom_jvp_call|custom_vjp_call|jaxpr|)$"
)


@dataclass(frozen=True)
class Share:
    label: str
    time_ns: int
    share: float  # of the rank's XLA op time
    count: int


@dataclass(frozen=True)
class XlaOp:
    op: str
    category: str
    fusion_kind: str | None
    count: int
    time_ns: int
    scope: str | None
    flops: float  # per execution, from the profile or the joined HLO (-1 unknown)
    bytes_accessed: float
    achieved_tflops: float | None
    intensity_flops_per_byte: float | None
    bound: str | None  # "compute" | "memory" against the device's ridge point
    efficiency: float | None  # roofline time / measured time


@dataclass(frozen=True)
class XlaSummary:
    devices: int
    op_time_ns: int
    by_category: tuple[Share, ...]
    by_fusion_kind: tuple[Share, ...]
    async_stall_ns: int
    async_stall_by_collective: tuple[Share, ...]
    by_scope: tuple[Share, ...]
    by_scope_leaf: tuple[Share, ...]
    phases: tuple[Share, ...]  # forward / backward / recompute / optimizer (roofline.phases.PHASES)
    recompute_share_of_backward: float | None
    custom_calls: tuple[Share, ...]
    loops: tuple[Share, ...]  # while / conditional / call ops (containers: their ops are counted above)
    scope_coverage_ratio: float  # share of op time with a name stack
    flops_coverage_ratio: float  # share of op time with known FLOPs
    top_ops: tuple[XlaOp, ...]
    # XLA's cost-analysis FLOPs summed by category (ops of unknown FLOPs count 0): with by_category's
    # times, what a category achieved (the planner's --from-analysis efficiencies, from_trace.py)
    flops_by_category: dict[str, float]


def scope_path(stack: str | None) -> str:
    if not stack:
        return ""
    if "/(" in stack and stack.endswith(")"):
        # XLA merged several ops (e.g. one all-reduce for many gradients): "prefix/(a/op:b/op)"
        prefix, _, alts = stack.partition("/(")
        paths = sorted({scope_path(f"{prefix}/{a}") for a in alts[:-1].split(":")})
        base = scope_path(prefix + "/x")
        leaves = sorted({p[len(base) :].lstrip("/") or "" for p in paths} - {""})
        return "/".join(x for x in (base, "+".join(leaves)) if x)
    segs = stack.split("/")[:-1]
    out = []
    for seg in segs:
        s = seg
        while True:
            m = _WRAPPER.match(s)
            if not m:
                break
            s = m.group(2)
        if "," in s or "->" in s or _DROP.match(s):
            continue
        out.append(s)
    return "/".join(out)


def phase_of(stack: str | None) -> str:
    """The phase name of an XLA op (``roofline.phases.xla_phase``)."""
    return PHASES[xla_phase(stack)]


def _shares(labels: np.ndarray, dur: np.ndarray, total: float, top: int | None = None) -> tuple[Share, ...]:
    if labels.size == 0:
        return ()
    uniq, inv = np.unique(labels.astype(str), return_inverse=True)
    t = np.bincount(inv, weights=dur, minlength=uniq.size)
    c = np.bincount(inv, minlength=uniq.size)
    order = np.argsort(-t, kind="stable")[:top]
    return tuple(Share(str(uniq[i]), int(t[i]), float(t[i] / total) if total else 0.0, int(c[i])) for i in order)


def applies(ctx: RankContext) -> bool:
    """A JAX/XLA rank: its device rows name HLO ops."""
    return ctx.data.dev.xla is not None


def compute(ctx: RankContext) -> XlaSummary | None:
    """None when no XLA op ran inside the steps."""
    rd, dev_step, events = ctx.data, ctx.dev_step, ctx.events
    peak_flops, hbm_bytes_per_s = ctx.peak_flops, ctx.hbm_bytes_per_s
    x = rd.dev.xla
    if x is None:
        return None
    sel = np.flatnonzero((dev_step >= 0) & x.op.valid)
    if sel.size == 0:
        return None
    dur = (rd.dev.end - rd.dev.ts)[sel].astype(np.float64)
    total = float(dur.sum())
    cat = np.asarray(rd.dev.categories.labels + ("",), dtype=str)[rd.dev.categories.codes[sel]]
    ops = x.op.rows(sel)
    scopes = x.scope.rows(sel)
    # per-row labels, each computed once per distinct value (or pair of values)
    pair = np.stack([x.op_class.codes[sel], x.op.codes[sel]], axis=1)
    _, first, inv = np.unique(pair, axis=0, return_index=True, return_inverse=True)
    fk_lut = np.array(
        [fusion_kind(c, o) or "not a fusion" for c, o in zip(x.op_class.rows(sel[first]), ops[first])], dtype=object
    )
    fk = fk_lut[inv.ravel()]
    done = x.op.map(is_async_done, sel).astype(bool)
    is_comm = np.char.startswith(cat, "comm:")
    paths = x.scope.map(lambda s: scope_path(s) or "(no scope)", sel)
    leaves = x.scope.map(lambda s: (scope_path(s) or "(no scope)").rsplit("/", 1)[-1], sel)
    phase = x.scope.map(phase_of, sel)
    ph = _shares(phase, dur, total)
    bwd = sum(s.time_ns for s in ph if s.label in ("backward", "recompute"))
    rec = sum(s.time_ns for s in ph if s.label == "recompute")
    custom = np.isin(cat, ["custom_call", "attention", "linear_attention", "grouped_gemm"])
    has_scope = x.scope.valid[sel]
    flops = x.flops[sel].astype(np.float64)
    nbytes = x.bytes_accessed[sel].astype(np.float64)
    devices = int(np.unique(rd.dev.device[sel]).size)
    return XlaSummary(
        devices=devices,
        op_time_ns=int(total),
        by_category=_shares(cat, dur, total),
        by_fusion_kind=_shares(fk, dur, total),
        async_stall_ns=int(dur[done & is_comm].sum()),
        async_stall_by_collective=_shares(cat[done & is_comm], dur[done & is_comm], total),
        by_scope=_shares(paths, dur, total, 30),
        by_scope_leaf=_shares(leaves, dur, total, 30),
        phases=ph,
        recompute_share_of_backward=(rec / bwd) if bwd else None,
        custom_calls=_shares(
            np.char.add(np.char.add(cat[custom], ": "), ops[custom].astype(str)), dur[custom], total, 20
        ),
        loops=_loops(events, total),
        scope_coverage_ratio=float(dur[has_scope].sum() / total) if total else 0.0,
        flops_coverage_ratio=float(dur[flops >= 0].sum() / total) if total else 0.0,
        top_ops=_top_ops(ops, cat, fk, scopes, dur, flops, nbytes, peak_flops, hbm_bytes_per_s, top=ctx.config.top_k),
        flops_by_category=_flops_by(cat, flops),
    )


def _flops_by(cat: np.ndarray, flops: np.ndarray) -> dict[str, float]:
    """Known FLOPs (>= 0) summed by category; categories without any are left out."""
    uniq, inv = np.unique(cat.astype(str), return_inverse=True)
    f = np.bincount(inv.ravel(), weights=np.where(flops > 0, flops, 0.0), minlength=uniq.size)
    return {str(uniq[i]): float(f[i]) for i in np.flatnonzero(f > 0)}


def _loops(events: pa.Table, total: float) -> tuple[Share, ...]:
    """Time inside control-flow ops (while loops from scans, conditionals, calls), by instruction;
    shares are of the op time (a loop's body ops are already in the other tables)."""
    if "op" not in events.column_names or events["op"].null_count == events.num_rows:
        return ()
    ann = events.filter(pc.equal(events["kind"].cast(pa.string()), "gpu_annotation"))
    ann = ann.filter(pc.fill_null(pc.match_substring_regex(ann["op"], r"^(while|conditional|call)(\.\d+)?$"), False))
    if ann.num_rows == 0:
        return ()
    labels = np.asarray(ann["op"].to_pylist(), dtype=object)
    return _shares(labels, ann["dur_ns"].to_numpy().astype(np.float64), total, 20)


def _top_ops(
    ops: np.ndarray,
    cat: np.ndarray,
    fk: np.ndarray,
    scopes: np.ndarray,
    dur: np.ndarray,
    flops: np.ndarray,
    nbytes: np.ndarray,
    peak: float | None,
    hbm: float | None,
    top: int,
) -> tuple[XlaOp, ...]:
    uniq, first, inv = np.unique(ops.astype(str), return_index=True, return_inverse=True)
    t = np.bincount(inv, weights=dur)
    c = np.bincount(inv)
    out = []
    for i in np.argsort(-t, kind="stable")[:top]:
        j = first[i]
        f, b = float(flops[j]), float(nbytes[j])
        total_f = f * c[i] if f >= 0 else None
        ach = total_f / (t[i] * 1e-9) / 1e12 if (total_f is not None and t[i] > 0) else None
        inten = f / b if (f >= 0 and b > 0) else None
        bound = eff = None
        if peak and hbm and f >= 0 and b >= 0:
            roof_s = max(f / peak, b / hbm) * c[i]
            bound = "compute" if f / peak >= b / hbm else "memory"
            eff = roof_s / (t[i] * 1e-9) if t[i] > 0 else None
        out.append(
            XlaOp(
                str(uniq[i]),
                str(cat[j]),
                None if fk[j] == "not a fusion" else str(fk[j]),
                int(c[i]),
                int(t[i]),
                None if scopes[j] is None else str(scopes[j]),
                f,
                b,
                ach,
                inten,
                bound,
                eff,
            )
        )
    return tuple(out)
