"""One rank's events as numpy arrays, split host/device, with launches joined to device work.

Built once per rank and shared by every analysis, so each join/classification happens once.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..trace.commside import rows_with, side_column
from ..trace.dictcol import DictColumn, per_value
from ..trace.schema import KIND_CODE as KIND
from . import intervals as iv
from .classify import Categories, Rules, classify_device_events

HOST_KINDS = ("cpu_op", "user_annotation", "runtime")
DEVICE_KINDS = ("kernel", "memcpy", "memset")
_SYNC_RUNTIME = re.compile(
    r"(cuda|hip)(Stream|Device|Event|Ctx)Synchronize|^(cuda|hip)Memcpy$|^(cuda|hip)MemcpyWithStream$|aclrtSynchronize",
    re.I,
)
_SYNC_OPS = re.compile(r"^aten::(item|_local_scalar_dense)$")


_DEV_COLS = ["kind", "name", "device", "stream", "ts_ns", "dur_ns", "correlation", "external_id"]
_XLA_COLS = ["op", "module", "scope", "op_class", "flops", "bytes_accessed"]


@dataclass
class XlaArrays:
    """Per device row, for JAX/XLA traces: HLO op, module, name stack, XLA op class (dictionary
    columns, None when absent) and XLA's cost analysis (int64, -1 when absent)."""

    op: DictColumn
    module: DictColumn
    scope: DictColumn
    op_class: DictColumn
    flops: np.ndarray
    bytes_accessed: np.ndarray


@dataclass
class HostArrays:
    kind: np.ndarray  # int8 codes, see schema.KIND_CODE
    name_idx: np.ndarray  # int, index into names
    names: list[str]
    tid: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    correlation: np.ndarray
    external_id: np.ndarray
    sequence_number: np.ndarray
    rows: np.ndarray | None = None  # row index of each host row in the rank's event table

    @functools.cached_property
    def operators(self) -> np.ndarray:
        """The framework operators: ``cpu_op`` rows not nested in another ``cpu_op`` of the same
        thread (``aten::add_`` called from Python, not the ``aten::empty`` inside it), ordered by
        (thread, start). Computed once, read by the dispatch and fusion analyses; a thread at a
        time (``intervals.outermost``), so no sort when its rows are in time order already."""
        cpu = self.kind == KIND["cpu_op"]
        out = [np.empty(0, np.int64)]
        for t in np.unique(self.tid[cpu]):
            idx = np.flatnonzero(cpu & (self.tid == t))
            s = self.ts[idx]
            if s.size > 1 and bool(np.any(s[1:] < s[:-1])):
                idx = idx[np.argsort(s, kind="stable")]
            out.append(idx[iv.outermost(self.ts[idx], self.end[idx])])
        return np.concatenate(out)


@dataclass
class DeviceArrays:
    kind: np.ndarray
    name_idx: np.ndarray
    names: list[str]
    device: np.ndarray
    stream: np.ndarray
    ts: np.ndarray
    end: np.ndarray
    correlation: np.ndarray
    external_id: np.ndarray
    categories: Categories  # one category per row, as codes into sorted labels
    group: np.ndarray  # 0 compute, 1 comm, 2 memory
    launch_ts: np.ndarray  # host runtime call start, -1 if unknown
    launch_tid: np.ndarray  # host thread of that call, -1 if unknown
    xla: XlaArrays | None = None  # JAX/XLA traces only
    rows: np.ndarray | None = None  # row index of each device row in the rank's event table

    @property
    def size(self) -> int:
        return int(self.ts.size)

    @property
    def category(self) -> np.ndarray:
        """The category label per row (an object array, built on each call)."""
        return self.categories.objects()


@dataclass
class RankData:
    rank: int
    host: HostArrays
    dev: DeviceArrays
    sync_mask: np.ndarray  # over host rows: synchronizing calls


def _names(col: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, list[str]]:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if not pa.types.is_dictionary(arr.type):
        arr = arr.cast(pa.string()).dictionary_encode()
    names = [v if v is not None else "" for v in arr.dictionary.to_pylist()]
    idx = pc.fill_null(arr.indices, len(names)).to_numpy()
    names.append("")
    return idx, names


def _compact(idx: np.ndarray, names: list[str]) -> tuple[np.ndarray, list[str]]:
    """Only the names ``idx`` uses, in their order (a rank's rows use a few of a table's names:
    per-name work then follows the rank's rows, not the table's dictionary)."""
    present = np.bincount(idx, minlength=len(names)) > 0
    if present.all():
        return idx, names
    remap = (np.cumsum(present) - 1).astype(np.int32)
    return remap[idx], [n for n, keep in zip(names, present) if keep]


def _kind_np(t: pa.Table) -> np.ndarray:
    """Kind codes (``schema.KIND_CODE``) as int8, without a Python object per event."""
    return per_value(t["kind"], lambda v: KIND.get(v, KIND["other"]), null=KIND["other"], dtype=np.int8)


def xla_categories(x: XlaArrays, names: pa.ChunkedArray, category: np.ndarray) -> np.ndarray:
    """Rows with an HLO op get their category from the XLA rules, once per distinct
    (op class, op, name, scope); the instruction number (".N") does not change the category."""
    from .xla.ops import category as xla_category

    has_op = x.op.valid
    if not has_op.any():
        return category
    op_s, name_s = x.op.remap(_strip_num), DictColumn.of(names).remap(_strip_num)
    # distinct (op class, stripped op, stripped name, scope) rows among the rows with an op
    cols = [c.codes[has_op] for c in (x.op_class, op_s, name_s, x.scope)]
    _, first, inv = np.unique(np.stack(cols, axis=1), axis=0, return_index=True, return_inverse=True)
    rows = np.flatnonzero(has_op)[first]
    lut = np.array(
        [xla_category(*args) for args in zip(*(c.rows(rows) for c in (x.op_class, op_s, name_s, x.scope)))],
        dtype=object,
    )
    out = category.copy()
    out[has_op] = lut[inv.ravel()]
    return out


def _strip_num(s: str | None) -> str | None:
    return None if s is None else re.sub(r"\.\d+$", "", s)


def build(rank: int, events: pa.Table, rules: Rules, comm: pa.Table | None = None) -> RankData:
    """Host arrays are gathered column by column (one transient copy at a time); device rows
    and the host's communication ops are small and taken as tables, each with its recorded
    ``collective`` from the side table ``comm`` (``schema.COMM_ARGS_SCHEMA``)."""
    code = _kind_np(events)
    host_rows = _row_index(np.flatnonzero(_code_mask(HOST_KINDS)[code]), events.num_rows)
    dev_rows = np.flatnonzero(_code_mask(DEVICE_KINDS)[code])
    host = _host(events, host_rows, code[host_rows])
    del code
    hk, hidx, names = host.kind, host.name_idx, host.names
    sync_name = np.array([bool(_SYNC_RUNTIME.search(n)) for n in names], dtype=bool)
    sync_op = np.array([bool(_SYNC_OPS.search(n)) for n in names], dtype=bool)
    sync_mask = ((hk == KIND["runtime"]) & sync_name[hidx]) | ((hk == KIND["cpu_op"]) & sync_op[hidx])
    # host communication ops (by name or recorded collective args) and collective-named
    # annotations, for classifying the kernels they launched
    comm_name = np.array(
        [bool(rules.comm_ops.search(n)) or rules.is_collective_annotation(n) for n in names], dtype=bool
    )
    has_coll = np.zeros(events.num_rows, dtype=bool)
    has_coll[rows_with(comm)] = True
    has_coll = has_coll[host_rows]
    comm_rows = host_rows[comm_name[hidx] | has_coll]
    comm_t = events.select(["name", "external_id"]).take(pa.array(comm_rows))
    comm_t = comm_t.append_column("collective", side_column(comm, "collective", comm_rows))
    dev = _device(events, dev_rows, comm_t, host, rules, comm)
    return RankData(rank=rank, host=host, dev=dev, sync_mask=sync_mask)


def _code_mask(kinds: tuple[str, ...]) -> np.ndarray:
    """A lookup over int8 kind codes: True for ``kinds`` (one gather per row, no sort)."""
    lut = np.zeros(256, dtype=bool)
    lut[[KIND[k] for k in kinds]] = True
    return lut


def _row_index(rows: np.ndarray, n: int) -> np.ndarray:
    """Row numbers as int32 when the table is shorter than 2**31 rows (half the memory)."""
    return rows.astype(np.int32) if n < np.iinfo(np.int32).max else rows


def _host(events: pa.Table, host_rows: np.ndarray, kind: np.ndarray) -> HostArrays:
    nidx_all, all_names = _names(events["name"])
    hidx, names = _compact(nidx_all[host_rows], all_names)
    del nidx_all

    def host_col(name: str, narrow: bool = False) -> np.ndarray:
        a = events[name].to_numpy()[host_rows]
        # ids and thread numbers usually fit in int32: half the memory on multi-GB traces
        if narrow and a.size and a.min() >= np.iinfo(np.int32).min and a.max() <= np.iinfo(np.int32).max:
            return a.astype(np.int32)
        return a

    hts = host_col("ts_ns")
    return HostArrays(
        kind=kind,
        name_idx=hidx,
        names=names,
        tid=host_col("tid", narrow=True),
        ts=hts,
        end=hts + host_col("dur_ns"),
        correlation=host_col("correlation", narrow=True),
        external_id=host_col("external_id", narrow=True),
        sequence_number=host_col("sequence_number", narrow=True),
        rows=host_rows,
    )


def _device(
    events: pa.Table, dev_rows: np.ndarray, comm_t: pa.Table, host: HostArrays, rules: Rules, comm: pa.Table | None
) -> DeviceArrays:
    has_xla = "op" in events.column_names and events["op"].null_count < events.num_rows
    dev_t = events.select(_DEV_COLS + (_XLA_COLS if has_xla else [])).take(pa.array(dev_rows))
    dev_t = dev_t.append_column("collective", side_column(comm, "collective", dev_rows))
    dkind = _kind_np(dev_t)
    categories = classify_device_events(dev_t, dkind, comm_t, rules)
    xla = None
    if has_xla:
        xla = XlaArrays(
            op=DictColumn.of(dev_t["op"]),
            module=DictColumn.of(dev_t["module"]),
            scope=DictColumn.of(dev_t["scope"]),
            op_class=DictColumn.of(dev_t["op_class"]),
            flops=dev_t["flops"].to_numpy(),
            bytes_accessed=dev_t["bytes_accessed"].to_numpy(),
        )
        categories = Categories.of(xla_categories(xla, dev_t["name"], categories.objects()))
    didx, dnames = _compact(*_names(dev_t["name"]))
    dts = dev_t["ts_ns"].to_numpy()
    dcorr = dev_t["correlation"].to_numpy()
    launch, launch_tid = _launches(host, dcorr)
    return DeviceArrays(
        kind=dkind,
        name_idx=didx,
        names=dnames,
        device=dev_t["device"].to_numpy(),
        stream=dev_t["stream"].to_numpy(),
        ts=dts,
        end=dts + dev_t["dur_ns"].to_numpy(),
        correlation=dcorr,
        external_id=dev_t["external_id"].to_numpy(),
        categories=categories,
        group=categories.group(),
        launch_ts=launch,
        launch_tid=launch_tid,
        xla=xla,
        rows=dev_rows,
    )


def _launches(host: HostArrays, dcorr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per device row: the start and thread of the runtime call with the same correlation id (-1 if none)."""
    rt = (host.kind == KIND["runtime"]) & (host.correlation >= 0)
    rt_corr, rt_ts, rt_tid = host.correlation[rt], host.ts[rt], host.tid[rt]
    o = np.argsort(rt_corr, kind="stable")
    rt_corr, rt_ts, rt_tid = rt_corr[o], rt_ts[o], rt_tid[o]
    launch = np.full(dcorr.size, -1, dtype=np.int64)
    launch_tid = np.full(dcorr.size, -1, dtype=np.int64)
    if rt_corr.size and dcorr.size:
        pos = np.clip(np.searchsorted(rt_corr, dcorr), 0, rt_corr.size - 1)
        hit = (dcorr >= 0) & (rt_corr[pos] == dcorr)
        launch[hit] = rt_ts[pos[hit]]
        launch_tid[hit] = rt_tid[pos[hit]]
    return launch, launch_tid
