"""FLOPs and bytes of the op instances that launched a rank's kernels, and of each kernel.

An op instance is a CPU op with an External id that launched kernels inside the steps; its time is
the summed duration of those kernels, its cost the formula of its signature (name, input shapes, input
types; ``flops.op_cost``), evaluated once per distinct signature. A kernel gets its op's FLOPs and bytes
split evenly over the op's kernels, and its op's dtype. Built once per rank (``RankContext.costs``) and
read by the roofline and the scopes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ...trace.schema import KIND_CODE as KIND
from ..rankdata import RankData
from .cann_flops import op_type, task_cost
from .flops import OpCost, op_cost


@dataclass(frozen=True)
class Signature:
    name: str
    dims: str  # the recorded input dims, whitespace removed
    cost: OpCost | None  # None: no formula for the op

    @property
    def dtype(self) -> str:
        return self.cost.dtype if self.cost else "fp32"


@dataclass(frozen=True, kw_only=True)
class OpCosts:
    kernel_time_ns: int  # kernels inside the steps
    has_shapes: bool  # some op launching kernels recorded its input dims
    signatures: tuple[Signature, ...]
    # per op instance
    inst_dur_ns: np.ndarray  # int64
    inst_step: np.ndarray  # int64, -1 outside the steps
    inst_category: np.ndarray  # str: the category of its first kernel
    inst_sig: np.ndarray  # index into signatures; len(signatures) when the op was not found
    inst_flops: np.ndarray
    inst_bytes: np.ndarray
    inst_modeled: np.ndarray  # bool: the signature has a cost formula
    inst_dtype: np.ndarray  # object
    # per device event
    in_step: np.ndarray  # bool: a kernel inside a step
    kernel_flops: np.ndarray
    kernel_bytes: np.ndarray
    kernel_dtype: np.ndarray  # object
    kernel_modeled: np.ndarray  # bool
    kernel_inst: np.ndarray  # int64: the instance each kernel belongs to, -1 for none


def op_costs(events: pa.Table, rd: RankData, dev_step: np.ndarray) -> OpCosts:
    """The op instances' costs; NPU tasks carrying their own shapes (Ascend ``kernel_details.csv``)
    whose op has no cost are instances of their own, costed by their CANN type
    (``cann_flops.task_cost``)."""
    d = rd.dev
    in_step = (dev_step >= 0) & (d.kind == KIND["kernel"])
    linked = in_step & (d.external_id >= 0)
    base = _ext_costs(events, rd, dev_step, in_step, linked)
    own = _own_shapes(events, rd, in_step & ~base.kernel_modeled)
    if own is None:
        return base
    rows, sigs, sig_of = own
    linked[rows] = False
    again = _ext_costs(events, rd, dev_step, in_step, linked)
    return _with_task_instances(again, rd, (rows, sigs, sig_of), dev_step)


def _ext_costs(
    events: pa.Table, rd: RankData, dev_step: np.ndarray, in_step: np.ndarray, linked: np.ndarray
) -> OpCosts:
    """Instances by External id over the ``linked`` kernels (of those ``in_step``, with an id)."""
    d = rd.dev
    dur = d.end - d.ts
    kernel_time = int(dur[in_step].sum())
    k_ext, k_dur, k_step, k_cat = d.external_id[linked], dur[linked], dev_step[linked], d.categories.codes[linked]
    uniq_ext, first_k, inv = np.unique(k_ext, return_index=True, return_inverse=True)
    inst_step = np.full(uniq_ext.size, -1, np.int64)
    np.maximum.at(inst_step, inv, k_step)
    ops = _launching_ops(events, rd, uniq_ext)
    sigs, sig_of_op, op_ext_u, has_shapes = _signatures(ops)
    pos = np.clip(np.searchsorted(op_ext_u, uniq_ext), 0, max(op_ext_u.size - 1, 0))
    found = (op_ext_u.size > 0) & (op_ext_u[pos] == uniq_ext) if op_ext_u.size else np.zeros(uniq_ext.size, bool)
    inst_sig = np.where(found, sig_of_op[pos] if sig_of_op.size else -1, -1)
    # per-signature lookup tables (index n = "no op found"), broadcast to instances: no loop over
    # instances, one small loop over distinct signatures
    n_sig = len(sigs)
    si = np.where(inst_sig >= 0, inst_sig, n_sig)
    sig_dtype = np.array([g.dtype for g in sigs] + ["fp32"], dtype=object)
    inst_flops = np.array([g.cost.flops if g.cost else 0.0 for g in sigs] + [0.0])[si]
    inst_bytes = np.array([g.cost.bytes if g.cost else 0.0 for g in sigs] + [0.0])[si]
    modeled = np.array([g.cost is not None for g in sigs] + [False])[si]
    # per kernel: the op's share
    rows = np.flatnonzero(linked)
    n_k = np.maximum(np.bincount(inv, minlength=uniq_ext.size), 1)
    kernel_flops, kernel_bytes = np.zeros(d.size), np.zeros(d.size)
    kernel_dtype = np.full(d.size, "fp32", dtype=object)
    kernel_modeled = np.zeros(d.size, bool)
    kernel_inst = np.full(d.size, -1, np.int64)
    if uniq_ext.size:
        kernel_flops[rows] = (inst_flops / n_k)[inv]
        kernel_bytes[rows] = (inst_bytes / n_k)[inv]
        kernel_dtype[rows] = sig_dtype[si][inv]
        kernel_modeled[rows] = modeled[inv]
        kernel_inst[rows] = inv
    return OpCosts(
        kernel_time_ns=kernel_time,
        has_shapes=has_shapes,
        signatures=sigs,
        inst_dur_ns=np.bincount(inv, weights=k_dur).astype(np.int64),
        inst_step=inst_step,
        inst_category=np.asarray(d.categories.labels + ("",), dtype=str)[k_cat[first_k]]
        if first_k.size
        else np.empty(0, str),
        inst_sig=si,
        inst_flops=inst_flops,
        inst_bytes=inst_bytes,
        inst_modeled=modeled,
        inst_dtype=sig_dtype[si],
        in_step=in_step,
        kernel_flops=kernel_flops,
        kernel_bytes=kernel_bytes,
        kernel_dtype=kernel_dtype,
        kernel_modeled=kernel_modeled,
        kernel_inst=kernel_inst,
    )


def _own_shapes(
    events: pa.Table, rd: RankData, cand: np.ndarray
) -> tuple[np.ndarray, tuple[Signature, ...], np.ndarray] | None:
    """The candidate kernels whose own row has shapes and whose task type has a formula: (device
    rows, their distinct signatures, signature index per row); None when there are none."""
    d = rd.dev
    if d.rows is None or not cand.any() or events["input_dims"].null_count == events.num_rows:
        return None
    rows = np.flatnonzero(cand)
    has_dims = pc.is_valid(events["input_dims"]).to_numpy(zero_copy_only=False)  # a bitmap: cheap
    rows = rows[has_dims[d.rows[rows]]]
    if rows.size == 0:
        return None
    t = events.select(["name", "input_dims", "input_types"]).take(pa.array(d.rows[rows]))
    key = (
        pc.binary_join_element_wise(
            pc.cast(t["name"], pa.string()),
            pc.fill_null(t["input_dims"], ""),
            pc.fill_null(t["input_types"], ""),
            "\x1f",
        )
        .combine_chunks()
        .dictionary_encode()
    )
    sigs, ok = [], []
    for s in key.dictionary.to_pylist():
        name, dims, types = (s.split("\x1f") + ["", ""])[:3]
        cost = task_cost(name, dims or None, types or None)
        sigs.append(Signature(op_type(name), dims, cost))
        ok.append(cost is not None)
    codes = key.indices.to_numpy()
    keep = np.asarray(ok, bool)[codes]
    if not keep.any():
        return None
    return rows[keep], tuple(sigs), codes[keep]


def _with_task_instances(
    c: OpCosts, rd: RankData, own: tuple[np.ndarray, tuple[Signature, ...], np.ndarray], dev_step: np.ndarray
) -> OpCosts:
    """``c`` with one more instance per kernel in ``rows``, costed by its own signature."""
    rows, sigs, sig_of = own
    d = rd.dev
    category = np.asarray(d.categories.labels + ("",), dtype=str)[d.categories.codes[rows]]
    n0 = len(c.signatures)
    inst_sig = np.where(c.inst_sig == n0, n0 + len(sigs), c.inst_sig)  # "not found" stays last
    flops = np.array([g.cost.flops if g.cost else 0.0 for g in sigs])[sig_of]
    nbytes = np.array([g.cost.bytes if g.cost else 0.0 for g in sigs])[sig_of]
    dtype = np.array([g.dtype for g in sigs], dtype=object)[sig_of]
    kernel_flops, kernel_bytes = c.kernel_flops.copy(), c.kernel_bytes.copy()
    kernel_dtype, kernel_modeled, kernel_inst = c.kernel_dtype.copy(), c.kernel_modeled.copy(), c.kernel_inst.copy()
    kernel_flops[rows], kernel_bytes[rows], kernel_dtype[rows] = flops, nbytes, dtype
    kernel_modeled[rows] = True
    kernel_inst[rows] = c.inst_dur_ns.size + np.arange(rows.size)
    return replace(
        c,
        has_shapes=True,
        signatures=c.signatures + sigs,
        inst_dur_ns=np.concatenate([c.inst_dur_ns, (d.end - d.ts)[rows].astype(np.int64)]),
        inst_step=np.concatenate([c.inst_step, dev_step[rows]]),
        inst_category=np.concatenate([c.inst_category, category]),
        inst_sig=np.concatenate([inst_sig, n0 + sig_of]),
        inst_flops=np.concatenate([c.inst_flops, flops]),
        inst_bytes=np.concatenate([c.inst_bytes, nbytes]),
        inst_modeled=np.concatenate([c.inst_modeled, np.ones(rows.size, bool)]),
        inst_dtype=np.concatenate([c.inst_dtype, dtype]),
        kernel_flops=kernel_flops,
        kernel_bytes=kernel_bytes,
        kernel_dtype=kernel_dtype,
        kernel_modeled=kernel_modeled,
        kernel_inst=kernel_inst,
    )


def _launching_ops(events: pa.Table, rd: RankData, uniq_ext: np.ndarray) -> pa.Table:
    """The CPU ops whose External id launched kernels in the steps (name, id, dims, types)."""
    h = rd.host
    cols = ["name", "external_id", "input_dims", "input_types"]
    if h.rows is None or uniq_ext.size == 0:
        return events.select(cols).slice(0, 0)
    is_op = h.kind == KIND["cpu_op"]
    ext = h.external_id
    pos = np.minimum(np.searchsorted(uniq_ext, ext), uniq_ext.size - 1)
    is_op &= uniq_ext[pos] == ext
    return events.select(cols).take(pa.array(h.rows[is_op]))


def _signatures(ops: pa.Table) -> tuple[tuple[Signature, ...], np.ndarray, np.ndarray, bool]:
    """The distinct signatures of the ops (one row per External id, the first op recorded with it):
    (signatures, signature index per op row, External id per op row (sorted), some op has shapes)."""
    op_ext_u, first = np.unique(ops["external_id"].to_numpy(), return_index=True)
    ops = ops.take(pa.array(first))
    # raw JSON text may be pretty-printed: drop whitespace so equal shapes give equal signatures
    compact = lambda col: pc.replace_substring_regex(pc.fill_null(ops[col], ""), r"\s+", "")  # noqa: E731
    sig_arr = pc.binary_join_element_wise(
        pc.fill_null(ops["name"].cast(pa.string()), ""), compact("input_dims"), compact("input_types"), "\x1f"
    ).combine_chunks()
    sig_d = sig_arr.dictionary_encode()
    sigs = []
    for s in sig_d.dictionary.to_pylist():
        name, dims, types = (s.split("\x1f") + ["", "", ""])[:3]
        sigs.append(Signature(name, dims, op_cost(name, dims or None, types or None)))
    has_shapes = bool(pc.any(pc.is_valid(ops["input_dims"])).as_py())
    return tuple(sigs), sig_d.indices.to_numpy(), op_ext_u, has_shapes
