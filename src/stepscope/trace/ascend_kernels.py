"""Per-task detail of an Ascend profile: ``ASCEND_PROFILER_OUTPUT/kernel_details.csv``.

torch_npu writes one row per NPU task (``_kernel_view_parser.py``): ``Name``, ``Type`` (the CANN
operator type: MatMulV2, Add...), ``Accelerator Core`` (AI_CORE, AI_VECTOR_CORE, MIX_AIC,
AI_CPU, HCCL...), ``Stream ID``, ``Start Time(us)`` (a decimal string, parsed exactly),
``Duration(us)``, the input and output shapes and data types (``"4096,12288;4608,12288"``,
``FLOAT16;FLOAT16``), and with ``aic_metrics`` the cores' own counters (``aic_cube_fops``,
``aiv_vector_fops``...). Column names drift between versions (``Block Dim`` / ``Block Num``,
``Step Id`` / ``Step ID``, an optional ``Device_id``); only the columns below are read, by name.

Each row is joined to the timeline's NPU task on the same stream that starts nearest to it, within
``MATCH_TOLERANCE_NS`` (both files are written from one record; the CSV may carry fewer decimals).
A matched task gets the row's input shapes and types (``input_dims`` / ``input_types``, as JSON
lists, the form Kineto gives an operator's) so the roofline can cost the task itself when no
ATen operator with shapes launched it, and its ``Accelerator Core`` as ``cat`` when the timeline
said only ``Other`` (older files). Communication rows (no stream) are left out: the timeline's
HCCL operators stand for them.
"""

from __future__ import annotations

import csv
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from .ascend_files import file_beside, unreadable
from .counters import CounterRange
from .limits import MAX_NAME_BYTES
from .numparse import strings_to_ns

FILE = "kernel_details.csv"
MATCH_TOLERANCE_NS = 500
_MAX_BYTES = 4 << 30
_WHAT = "its shapes"
#: our column -> the names it has had
_COLUMNS = {
    "name": ("Name",),
    "type": ("Type", "OP Type"),
    "core": ("Accelerator Core",),
    "stream": ("Stream ID", "Stream Id"),
    "start": ("Start Time(us)",),
    "dur": ("Duration(us)",),
    "in_shapes": ("Input Shapes",),
    "in_types": ("Input Data Types",),
    # the cube units' own operation counts, with aic_metrics=ArithmeticUtilization
    "aic_cube": ("aic_cube_fops",),
    "aiv_cube": ("aiv_cube_fops",),
}
#: only the cube (matrix) units' counts: the catalog's peak is theirs; the vector units' work is
#: held against memory, whose bytes the file does not count
_FOPS = ("aic_cube", "aiv_cube")
#: CANN data type -> the dtype whose peak a counted operation is held against
_COUNT_DTYPES = {
    "FLOAT16": "fp16",
    "BF16": "bf16",
    "DT_BF16": "bf16",
    "FLOAT": "fp32",
    "FLOAT32": "fp32",
    "INT8": "int8",
}
_REQUIRED = ("core", "stream", "start", "in_shapes", "in_types")
_PLACEHOLDER_CATS = frozenset(("", "Other", "OTHER", "UNKNOWN"))


def read_kernel_details(timeline: str) -> tuple[pa.Table | None, str | None]:
    """The ``kernel_details.csv`` beside a timeline as a table (stream, start_ns, core, dims, types),
    None when there is none, and a warning when it is there but cannot be used."""
    p, warning = file_beside(timeline, FILE, _MAX_BYTES, _WHAT)
    if p is None:
        return None, warning
    try:
        with p.open("rb") as f:
            names = next(csv.reader([f.readline(1 << 16).decode("utf-8-sig", "replace")]), [])
    except OSError as exc:
        return None, unreadable(p, exc, _WHAT)
    cols = {ours: next((c for c in alts if c in names), None) for ours, alts in _COLUMNS.items()}
    missing = [_COLUMNS[k][0] for k in _REQUIRED if cols[k] is None]
    if missing:
        return None, f"{p.name} has no {', '.join(missing)} column; {_WHAT} left out"
    try:
        t = pacsv.read_csv(
            p,
            convert_options=pacsv.ConvertOptions(
                include_columns=[c for c in cols.values() if c],
                column_types={c: pa.string() for c in cols.values() if c},
                strings_can_be_null=False,
            ),
        )
    except (OSError, pa.ArrowInvalid) as exc:
        return None, f"{p.name} cannot be read ({str(exc).splitlines()[0][:120]}); {_WHAT} left out"
    return _normalize(t, cols), None


def _normalize(t: pa.Table, cols: dict[str, str | None]) -> pa.Table:
    col = lambda k: t[cols[k]].combine_chunks() if cols[k] else pa.nulls(t.num_rows, pa.string())  # noqa: E731
    stream = pc.cast(
        pc.if_else(pc.match_substring_regex(col("stream"), r"^\d{1,12}$"), col("stream"), None), pa.int64()
    )
    return pa.table(
        {
            "stream": pc.fill_null(stream, -1),
            "start_ns": pa.array(strings_to_ns(col("start"))),
            "core": col("core"),
            "dims": _as_json(col("in_shapes"), _dims_json),
            "types": _as_json(col("in_types"), _types_json),
            "type": col("type"),
            "dur_ns": pa.array(strings_to_ns(col("dur"))),
            "fops": pa.array(sum((_count(col(k)) for k in _FOPS), np.zeros(t.num_rows))),
        }
    )


def _count(arr: pa.Array) -> np.ndarray:
    """A counter column as float64: a value that is not a plain non-negative number (N/A) is 0."""
    ok = pc.match_substring_regex(arr, r"^\d{1,20}(\.\d*)?([eE]\+?\d{1,3})?$")
    v = pc.cast(pc.if_else(ok, arr, None), pa.float64())
    out = pc.fill_null(v, 0.0).to_numpy(zero_copy_only=False)
    return np.where(np.isfinite(out) & (out < 1e18), out, 0.0)


def counter_ranges(details: pa.Table) -> tuple[CounterRange, ...]:
    """The tasks whose cube units counted their operations, as counter ranges
    (``trace/counters.py``): named by their CANN type, over their own duration, under the dtype of
    the first input (fp16 when the file names none)."""
    fops = details["fops"].to_numpy()
    rows = np.flatnonzero(fops > 0)
    if rows.size == 0:
        return ()
    sub = details.select(["type", "start_ns", "dur_ns"]).take(pa.array(rows))
    dtype = _as_json(details["types"].take(pa.array(rows)).combine_chunks(), _count_dtype).to_pylist()
    cols = (sub[c].to_pylist() for c in sub.column_names)
    return tuple(
        CounterRange(str(kind or "?")[:MAX_NAME_BYTES], int(ts), max(int(dur), 0), {str(dt): n}, None)
        for kind, ts, dur, dt, n in zip(*cols, dtype, fops[rows].tolist(), strict=True)
    )


def _count_dtype(types_json: str | None) -> str:
    first = json.loads(types_json)[0] if types_json else ""
    return _COUNT_DTYPES.get(str(first).upper(), "fp16")


def _as_json(arr: pa.Array, convert: Any) -> pa.Array:
    """Each distinct value converted once, to a string (a profile repeats a few hundred signatures)."""
    d = arr.dictionary_encode()
    lut = pa.array([convert(v) for v in d.dictionary.to_pylist()], pa.string())
    return lut.take(d.indices)


def _dims_json(v: str | None) -> str | None:
    """``"4096,12288;4608,12288"`` -> ``[[4096,12288],[4608,12288]]``; a scalar input is ``[]``;
    N/A or a malformed value -> None."""
    s = (v or "").strip().strip('"')
    if not s or s.upper() == "N/A":
        return None
    out = []
    for part in s.split(";"):
        p = part.strip()
        if p and not all(x.strip().isdigit() for x in p.split(",")):
            return None
        out.append([int(x) for x in p.split(",")] if p else [])
    return json.dumps(out, separators=(",", ":"))


def _types_json(v: str | None) -> str | None:
    s = (v or "").strip().strip('"')
    if not s or s.upper() == "N/A":
        return None
    return json.dumps([x.strip() for x in s.split(";")], separators=(",", ":"))


def join_kernel_details(t: pa.Table, on_task: np.ndarray, details: pa.Table) -> tuple[pa.Table, int]:
    """``t`` with its NPU task rows (``on_task``) given their matched detail row's shapes, types and
    core (see the module); and how many tasks matched."""
    rows = np.flatnonzero(on_task)
    d = details.filter(pc.greater_equal(details["stream"], 0))
    if rows.size == 0 or d.num_rows == 0:
        return t, 0
    match = _nearest(
        t["stream"].to_numpy()[rows], t["ts_ns"].to_numpy()[rows], d["stream"].to_numpy(), d["start_ns"].to_numpy()
    )
    hit = match >= 0
    rows, match = rows[hit], match[hit]
    if rows.size == 0:
        return t, 0
    take = pa.array(match)
    for name, src in (("input_dims", "dims"), ("input_types", "types")):
        t = _put(t, name, rows, d[src].take(take))
    cat = pc.cast(t["cat"].take(pa.array(rows)), pa.string())
    keep = pc.is_in(pc.fill_null(cat, ""), value_set=pa.array(sorted(_PLACEHOLDER_CATS)))
    t = _put(t, "cat", rows, pc.if_else(keep, d["core"].take(take), cat))
    return t, int(rows.size)


def _nearest(stream: np.ndarray, ts: np.ndarray, d_stream: np.ndarray, d_ts: np.ndarray) -> np.ndarray:
    """Per task, the index of the detail row on its stream starting nearest to it within the
    tolerance, else -1. One sort of the detail rows by (stream, start), then one binary search per
    stream (a device has tens of streams)."""
    order = np.lexsort((d_ts, d_stream))
    ds, dt = d_stream[order], d_ts[order]
    lo, hi = np.searchsorted(ds, stream, "left"), np.searchsorted(ds, stream, "right")
    out = np.full(ts.size, -1, np.int64)
    best = np.full(ts.size, MATCH_TOLERANCE_NS + 1, np.int64)
    # the binary search within each stream's block: position among that block's starts
    pos = np.empty(ts.size, np.int64)
    for s in np.unique(stream):
        sel = stream == s
        a, b = lo[sel][0], hi[sel][0]
        pos[sel] = a + np.searchsorted(dt[a:b], ts[sel])
    for cand in (pos - 1, pos):
        ok = (cand >= lo) & (cand < hi)
        c = np.clip(cand, 0, max(dt.size - 1, 0))
        gap = np.where(ok, np.abs(dt[c] - ts), MATCH_TOLERANCE_NS + 1)
        better = gap < best
        best = np.where(better, gap, best)
        out = np.where(better, order[c], out)
    return out


def _put(t: pa.Table, name: str, rows: np.ndarray, values: pa.Array) -> pa.Table:
    """Column ``name`` of ``t`` with ``values`` at ``rows`` (a scatter through an index array)."""
    i = t.schema.get_field_index(name)
    field = t.schema.field(i)
    src = np.full(t.num_rows, -1, np.int64)
    src[rows] = np.arange(rows.size)
    old = pc.cast(t[name], pa.string()).combine_chunks()
    new = pc.cast(values, pa.string()).take(pa.array(np.maximum(src, 0)))
    merged = pc.if_else(pa.array(src >= 0), new, old)
    return t.set_column(i, field, merged.cast(field.type))
