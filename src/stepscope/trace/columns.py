"""Shared last step of every reader: raw columns -> the normalized event table (``schema.py``).

Raw columns are a dict of ``ph, cat, name`` (Arrow strings), ``ts, dur`` (int64 ns, -1 absent),
``pid, tid, id`` and the int args (numpy int64, -1 absent), and the string args (Arrow strings).
Lookups by category/phase run once per distinct value, never per row.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import TraceFormatError
from . import schema
from .commside import comm_side_table
from .counters import CounterRange
from .dictcol import dict_mask, per_value
from .jsonstream import StreamState
from .limits import MAX_NAME_BYTES, TRUNCATED_MARK
from .memory import MemoryEvents


@dataclass(frozen=True)
class FileRead:
    """One file's events plus what the file says about itself."""

    path: str
    table: pa.Table
    header: dict[str, Any]
    truncated: bool
    note: str
    skipped_events: int
    bytes_read: int
    # collective args kept beside the table (``schema.COMM_ARGS_SCHEMA``: the rows that carry any,
    # by row index into ``table``); None when the file has none
    comm_args: pa.Table | None = None
    # CUPTI range-profiler counters (``cuda_profiler_range`` events), one per profiled kernel
    counters: tuple[CounterRange, ...] = ()
    # allocator events (``[memory]``, ``memory.py``); None when the file has none
    memory: MemoryEvents | None = None
    # what the reader left out besides events (a header key nested too deep, names cut short)
    warnings: tuple[str, ...] = ()


_KINDS = [k.value for k in schema.Kind]
_KIND_DICT = pa.array(_KINDS, pa.string())
_K = schema.KIND_CODE


def _kind_column(cat: pa.Array, ph: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Kind per row from the profiler category and phase: (dictionary array, int8 codes).

    Regexes/lookups run once per distinct category, never per row."""
    other = _K[schema.Kind.OTHER.value]
    code = per_value(
        cat, lambda c: _K[schema.CATEGORY_TO_KIND.get(c.lower(), schema.Kind.OTHER).value], null=other, dtype=np.int8
    )
    ph_code = per_value(ph, lambda v: 1 if v in ("s", "f", "t") else 2 if v in ("i", "I") else 0, null=0, dtype=np.int8)
    code = np.where(ph_code == 1, np.int8(_K["flow"]), code)
    code = np.where((ph_code == 2) & (code == _K["other"]), np.int8(_K["instant"]), code)
    kind = pa.DictionaryArray.from_arrays(pa.array(code.astype(np.int32)), _KIND_DICT)
    return kind, code


def _drop_rows(cols: dict[str, Any], include_python: bool) -> dict[str, Any]:
    """Portable path: drop metadata/counter rows, launch flows and (unless asked) python rows."""
    ph, cat = cols["ph"], cols["cat"]
    keep = pc.and_(pc.fill_null(pc.not_equal(ph, "M"), True), pc.fill_null(pc.not_equal(ph, "C"), True))
    # launch flows (CPU launch -> kernel) carry the same link as the correlation column: drop them
    launch_flow = pc.and_(
        pc.is_in(ph, pa.array(["s", "f", "t"])),
        pc.or_(pc.equal(cat, "ac2g"), pc.and_(pc.equal(cat, "async"), pc.equal(cols["name"], "launch"))),
    )
    keep = pc.and_(keep, pc.invert(pc.fill_null(launch_flow, False)))
    if not include_python:
        is_module = pc.fill_null(pc.starts_with(cols["name"], "nn.Module: "), False)
        keep = pc.and_(keep, pc.or_(pc.fill_null(pc.not_equal(cat, "python_function"), True), is_module))
    keep_np = keep.to_numpy(zero_copy_only=False)
    if keep_np.all():
        return cols
    idx = np.flatnonzero(keep_np)
    ia = pa.array(idx)
    return {k: (v.take(ia) if isinstance(v, pa.Array) else v[idx]) for k, v in cols.items()}


def columns_to_tables(
    cols: dict[str, Any], rank: int, include_python: bool, *, prefiltered: bool = False
) -> tuple[pa.Table, pa.Table | None]:
    """Shared last step of both paths: drop metadata rows (unless the C scanner already did:
    ``prefiltered``), derive kind/device/stream/flow; the collective args come back as a small side
    table (``schema.COMM_ARGS_SCHEMA``) of the rows that carry any of them."""
    if not prefiltered:
        cols = _drop_rows(cols, include_python)
    return _event_table(cols, rank), comm_side_table(cols)


def _event_table(cols: dict[str, Any], rank: int) -> pa.Table:
    """Kept rows -> the event table: kind, device/stream for device work, flows."""
    ph, cat = cols["ph"], cols["cat"]
    n = len(ph)
    ph = pc.fill_null(ph, "").dictionary_encode()  # a few distinct phases: encoded once, read thrice
    cat = cat.dictionary_encode()
    kind, code = _kind_column(cat, ph)
    pid, tid = cols["pid"], cols["tid"]
    on_device = np.isin(code, [_K[k] for k in ("kernel", "memcpy", "memset", "gpu_annotation", "sync")])
    device = cols["device"]
    stream = cols["stream"]
    # old schemas and non-CUDA devices: pid is the device, tid the stream
    device = np.where(on_device, np.where(device < 0, pid, device), -1).astype(np.int32)
    stream = np.where(on_device, np.where(stream < 0, tid, stream), -1)
    ext = np.where(cols["external_id"] < 0, cols["external_id_old"], cols["external_id"])
    is_flow = code == _K["flow"]
    flow_id = np.where(is_flow, cols["id"], -1)
    dur = cols["dur"]
    # a complete event ("X") whose duration is missing, not a number or negative cannot be placed:
    # its ts is cleared so that file_read drops and counts it with the untimed events
    complete = dict_mask(ph, lambda v: v == "X")
    ts = np.where(complete & (dur < 0), -1, cols["ts"])
    out = {
        "rank": schema.rank_column(n, rank),
        "kind": kind,
        "name": cap_names(cols["name"].dictionary_encode()),
        "cat": cat,
        "pid": pa.array(pid),
        "tid": pa.array(tid),
        "device": pa.array(device),
        "stream": pa.array(stream),
        "ts_ns": pa.array(ts),
        "dur_ns": pa.array(np.where(dur < 0, 0, dur)),
        "correlation": pa.array(cols["correlation"]),
        "external_id": pa.array(ext),
        "sequence_number": pa.array(cols["sequence_number"]),
        "flow_id": pa.array(flow_id),
        "flow_phase": _flow_phase(ph, is_flow),
        "input_dims": _shared_if_null(cols["input_dims"]),
        "input_types": _shared_if_null(cols["input_types"]),
        "bytes": pa.array(cols["bytes"]),
        **schema.absent_xla_columns(n),
    }
    return pa.Table.from_pydict(out, schema=schema.READ_SCHEMA)


def _flow_phase(ph: pa.DictionaryArray, is_flow: np.ndarray) -> pa.DictionaryArray:
    """The phase of flow rows (null elsewhere), over the flow phases only."""
    codes = ph.indices.to_numpy(zero_copy_only=False)
    flow_codes = np.unique(codes[is_flow])
    remap = np.full(len(ph.dictionary), -1, np.int32)
    remap[flow_codes] = np.arange(flow_codes.size, dtype=np.int32)
    idx = remap[codes]
    return pa.DictionaryArray.from_arrays(pa.array(idx, mask=~is_flow), ph.dictionary.take(pa.array(flow_codes)))


def _shared_if_null(a: pa.Array) -> pa.Array:
    """A string column with no value (shapes not recorded) as a view of the shared null buffer."""
    return schema.null_strings(len(a)) if a.null_count == len(a) and pa.types.is_string(a.type) else a


def cap_names(names: pa.DictionaryArray) -> pa.DictionaryArray:
    """Names longer than ``MAX_NAME_BYTES`` cut there (at a character boundary) and marked with
    ``TRUNCATED_MARK``; only the dictionary is touched (one entry per distinct name)."""
    values = names.dictionary
    if len(values) == 0 or pc.max(pc.binary_length(values)).as_py() <= MAX_NAME_BYTES:
        return names
    cut = [
        v
        if v is None or len(v.encode()) <= MAX_NAME_BYTES
        else v.encode()[:MAX_NAME_BYTES].decode("utf-8", "ignore") + TRUNCATED_MARK
        for v in values.to_pylist()
    ]
    return pa.DictionaryArray.from_arrays(names.indices, pa.array(cut, pa.string()))


def cut_names(table: pa.Table) -> int:
    """How many distinct names of ``table`` ``cap_names`` cut short."""
    col = table["name"]
    seen: set[str] = set()
    for chunk in col.chunks:
        dictionary = chunk.dictionary
        if len(dictionary):
            marked = pc.ends_with(dictionary, TRUNCATED_MARK)
            seen.update(v for v in dictionary.filter(pc.fill_null(marked, False)).to_pylist() if v is not None)
    return len(seen)


def concat_tables(tables: list[pa.Table]) -> pa.Table:
    if not tables:
        return schema.empty_table()
    if len(tables) == 1:
        return tables[0]
    # chunks stay separate (no full copy); dictionaries are unified so columns combine cheaply
    return pa.concat_tables(tables).unify_dictionaries()


def file_read(
    path: str, parts: list[tuple[pa.Table, pa.Table | None]], state: StreamState, skipped_events: int = 0
) -> FileRead:
    """The result of reading one file (chunk tables with their side args); a file truncated before
    its first complete event is an error. Events without a usable timestamp (absent, not a number,
    beyond int64 nanoseconds: ts -1 here; complete events without a usable duration get it too) are
    dropped and counted in ``skipped_events``: kept, one such event would stretch a whole-trace
    window from time 0 to the real events (decades)."""
    tables = [t for t, _ in parts]
    sides, base = [], 0
    for tab, side in parts:
        if side is not None and side.num_rows:
            sides.append(side.set_column(0, "row", pc.add(side["row"], pa.scalar(base, pa.int64()))))
        base += tab.num_rows
    if not tables and state.truncated:
        raise TraceFormatError(
            "truncated before the first complete event; nothing to recover",
            path=path,
            fix="re-capture the trace and let the profiler finish writing",
        )
    table = concat_tables(tables)
    cut = cut_names(table)
    if cut:
        state.warnings.append(
            f"{cut} name{'s' if cut != 1 else ''} longer than {MAX_NAME_BYTES >> 10} KiB cut short "
            f"(ending {TRUNCATED_MARK!r}); docs/limits.md"
        )
    return keep_plausible(
        FileRead(
            path=path,
            table=table,
            header=state.header,
            truncated=state.truncated,
            note=state.note,
            skipped_events=skipped_events,
            bytes_read=state.bytes_read,
            comm_args=pa.concat_tables(sides).unify_dictionaries() if sides else None,
            warnings=tuple(state.warnings),
        )
    )


# event times a trace can hold, ns: epoch timestamps reach 2^62 in 2116 and no profiled event lasts
# 2^50 ns (13 days); beyond is a damaged field, whose sums would overflow int64 in the analyses
MAX_TS_NS = 2**62
MAX_DUR_NS = 2**50


def narrow_ids(table: pa.Table) -> pa.Table:
    """``table`` with its link ids (``schema.ID_COLUMNS``) as int32, the event schema's type: cast
    when they fit, else renumbered in order over the whole file (equal ids stay equal, -1 stays -1),
    one column at a time."""
    for name in schema.ID_COLUMNS:
        col = table[name]
        if col.type == pa.int32():
            continue
        mm = pc.min_max(col)
        lo, hi = mm["min"].as_py(), mm["max"].as_py()
        i32 = np.iinfo(np.int32)
        if lo is None or (lo >= i32.min and hi <= i32.max):
            narrow: pa.Array | pa.ChunkedArray = col.cast(pa.int32(), safe=False)  # in range: checked above
        else:
            v = col.to_numpy()
            out = np.full(v.size, -1, dtype=np.int32)
            ok = v >= 0
            out[ok] = np.unique(v[ok], return_inverse=True)[1].ravel()
            narrow = pa.array(out)
        idx = table.schema.get_field_index(name)
        table = table.set_column(idx, schema.EVENT_SCHEMA.field(name), narrow)
    return table.replace_schema_metadata(schema.EVENT_SCHEMA.metadata)


def keep_plausible(fr: FileRead) -> FileRead:
    """``fr`` with its ids narrowed (``narrow_ids``), without the events whose start is missing,
    negative or beyond MAX_TS_NS or whose duration is negative or beyond MAX_DUR_NS (counted in
    ``skipped_events``), the comm side rows renumbered. Every reader's table passes here: JSON fields, a damaged Parquet cache, XPlane."""
    t = narrow_ids(fr.table)
    if t is not fr.table:
        fr = replace(fr, table=t)
    ts, dur = t["ts_ns"], t["dur_ns"]
    ok = pc.and_(
        pc.and_(pc.greater_equal(ts, 0), pc.less_equal(ts, MAX_TS_NS)),
        pc.and_(pc.greater_equal(dur, 0), pc.less_equal(dur, MAX_DUR_NS)),
    )
    keep = pc.fill_null(ok, False).to_numpy(zero_copy_only=False)
    if keep.all():
        return fr
    comm = fr.comm_args
    if comm is not None:  # side rows point into the table: renumber them, drop those of dropped events
        old = comm["row"].to_numpy()
        kept = keep[old]
        comm = comm.filter(pa.array(kept)).set_column(0, "row", pa.array((np.cumsum(keep) - 1)[old[kept]]))
    return replace(
        fr,
        table=t.filter(pa.array(keep)),
        comm_args=comm,
        skipped_events=fr.skipped_events + int(keep.size - keep.sum()),
    )


def _dict(a: pa.Array) -> pa.Array:
    return a if pa.types.is_dictionary(a.type) else a.dictionary_encode()


def _in_order(v: Any, order: np.ndarray | None) -> Any:
    """A column (numpy or Arrow) in ``order``; a column that holds one value (all null, all -1:
    the columns a reader does not have) is left as it is, so it stays a view of one shared buffer."""
    if order is None:
        return v
    if isinstance(v, pa.Array):
        if v.null_count == len(v):
            return v
        if pa.types.is_integer(v.type):
            mm = pc.min_max(v)
            if mm["min"].as_py() == mm["max"].as_py():
                return v
        return v.take(pa.array(order))
    a = np.asarray(v)
    return a if a.size and a.dtype.kind in "iu" and a.min() == a.max() else a[order]


def assemble_table(c: dict[str, Any], rank: int) -> pa.Table:
    """Readers that build whole columns (XPlane, nsys-jax, Nsight SQLite): their columns (strings as
    Arrow arrays, ints as numpy; ``bytes``, ``external_id``, ``sequence_number``, ``input_dims`` and
    ``input_types`` optional) plus the columns they do not have (-1 / null)
    -> the event table, sorted by time (stable: rows that start together keep the reader's order).
    The columns are put in time order before the table is built, so the absent ones are never
    copied by the sort."""
    n = len(c["ts"])
    ts = np.asarray(c["ts"], np.int64)
    order = np.argsort(ts, kind="stable") if n and np.any(ts[1:] < ts[:-1]) else None
    c = {k: _in_order(v, order) for k, v in c.items()}
    neg = pa.array(np.full(n, -1, dtype=np.int64))
    null_dict = pa.nulls(n, pa.dictionary(pa.int32(), pa.string()))
    cols = {
        "rank": schema.rank_column(n, rank),
        "kind": _dict(c["kind"]),
        "name": cap_names(_dict(c["name"])),
        "cat": _dict(c["cat"]),
        "pid": pa.array(np.asarray(c["pid"], np.int64)),
        "tid": pa.array(np.asarray(c["tid"], np.int64)),
        "device": pa.array(np.asarray(c["device"]).astype(np.int32)),
        "stream": pa.array(np.asarray(c["stream"], np.int64)),
        "ts_ns": pa.array(np.asarray(c["ts"], np.int64)),
        "dur_ns": pa.array(np.asarray(c["dur"], np.int64)),
        "correlation": pa.array(np.asarray(c["correlation"], np.int64)),
        "external_id": pa.array(np.asarray(c["external_id"], np.int64)) if "external_id" in c else neg,
        "sequence_number": pa.array(np.asarray(c["sequence_number"], np.int64)) if "sequence_number" in c else neg,
        "flow_id": neg,
        "flow_phase": null_dict,
        "input_dims": _shared_if_null(c["input_dims"]) if "input_dims" in c else schema.null_strings(n),
        "input_types": _shared_if_null(c["input_types"]) if "input_types" in c else schema.null_strings(n),
        "bytes": pa.array(np.asarray(c["bytes"], np.int64)) if "bytes" in c else neg,
        "op": c["op"],
        "module": c["module"],
        "scope": c["scope"],
        "op_class": c["op_class"],
        "flops": c["flops"] if isinstance(c["flops"], pa.Array) else pa.array(np.asarray(c["flops"], np.int64)),
        "bytes_accessed": c["bytes_accessed"]
        if isinstance(c["bytes_accessed"], pa.Array)
        else pa.array(np.asarray(c["bytes_accessed"], np.int64)),
    }
    return pa.Table.from_pydict(cols, schema=schema.READ_SCHEMA)
