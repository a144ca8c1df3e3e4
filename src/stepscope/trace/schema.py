"""The one definition of stepscope's normalized event table.

Every reader (Kineto JSON, JAX/XLA XPlane, nsys-jax, Nsight Systems SQLite) produces a ``pyarrow.Table`` with exactly
these columns, in this order. Analyses read only these columns.

Conventions
- Times are integer nanoseconds on the trace's own clock (``ts_ns``, ``dur_ns``); never floats.
- Link ids (``correlation``, ``external_id``, ``sequence_number``, ``flow_id``) are int32: a file
  whose ids do not fit is renumbered in order (equal ids stay equal, -1 stays -1), so an exported
  id can differ from the trace's own only then.
- Missing integers are ``-1`` (not null) so columns convert to numpy without masks.
- Missing strings are null. Repeated strings (``name``, ``cat``, ``kind``...) are dictionary-encoded.
- Launch flows (Kineto ``ac2g``, old ``async``/``launch``) are not rows: they repeat the
  ``correlation`` id that the runtime call and its kernel both carry. Other flows (``fwdbwd``:
  forward op -> backward op) are rows of kind ``flow`` with ``flow_id``/``flow_phase``.
- ``python_function`` rows are kept only when asked for, except ``nn.Module: <Class>_<n>`` ranges
  (``with_modules=True``): they give the module hierarchy.
- Collective args (``Collective name``, message sizes and dtype, group size, process group) are
  not columns: few rows carry them, so they sit in a side table (``COMM_ARGS_SCHEMA``, one row per
  event that has any of them, ``row`` = the event's index in its file's table).
- ``device``/``stream`` are set for device work (kernel, memcpy, memset, gpu_annotation, sync);
  ``pid``/``tid`` identify the host process/thread for host events.
- XLA columns (``op``, ``module``, ``scope``, ``op_class``, ``flops``, ``bytes_accessed``) are
  filled by the XPlane reader: HLO instruction, HLO module, name stack (``jax.named_scope`` /
  ``tf_op``), XLA's own op category, and XLA's cost analysis per event. Other readers leave them
  null / -1 (sharing one null buffer per chunk, so they cost no memory).
"""

from __future__ import annotations

import enum

import pyarrow as pa

SCHEMA_VERSION = 4

_dict_str = pa.dictionary(pa.int32(), pa.string())


class Kind(str, enum.Enum):
    """What an event is, independent of the profiler's own category spelling."""

    CPU_OP = "cpu_op"
    USER_ANNOTATION = "user_annotation"
    GPU_ANNOTATION = "gpu_annotation"
    PYTHON_FUNCTION = "python_function"
    RUNTIME = "runtime"
    KERNEL = "kernel"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    SYNC = "sync"
    FLOW = "flow"
    TRACE = "trace"
    INSTANT = "instant"
    COUNTER_RANGE = "counter_range"
    OTHER = "other"


#: Small integer code per kind, for vectorized comparisons in the analyses.
KIND_CODE: dict[str, int] = {k.value: i for i, k in enumerate(Kind)}

#: Profiler category (lower-cased) -> Kind. Unknown categories map to ``other``.
CATEGORY_TO_KIND: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "operator": Kind.CPU_OP,
    "user_annotation": Kind.USER_ANNOTATION,
    "gpu_user_annotation": Kind.GPU_ANNOTATION,
    "python_function": Kind.PYTHON_FUNCTION,
    "cuda_runtime": Kind.RUNTIME,
    "runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "hip_runtime": Kind.RUNTIME,
    "mtia_runtime": Kind.RUNTIME,
    "kernel": Kind.KERNEL,
    "mtia_ccp_events": Kind.KERNEL,
    "gpu_memcpy": Kind.MEMCPY,
    "memcpy": Kind.MEMCPY,
    "gpu_memset": Kind.MEMSET,
    "memset": Kind.MEMSET,
    "cuda_sync": Kind.SYNC,
    "trace": Kind.TRACE,
    "cpu_instant_event": Kind.INSTANT,
    "cuda_profiler_range": Kind.COUNTER_RANGE,
}

EVENT_SCHEMA = pa.schema(
    [
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("kind", _dict_str),
        pa.field("name", _dict_str),
        pa.field("cat", _dict_str),
        pa.field("pid", pa.int64(), nullable=False),
        pa.field("tid", pa.int64(), nullable=False),
        pa.field("device", pa.int32(), nullable=False),
        pa.field("stream", pa.int64(), nullable=False),
        pa.field("ts_ns", pa.int64(), nullable=False),
        pa.field("dur_ns", pa.int64(), nullable=False),
        pa.field("correlation", pa.int32(), nullable=False),
        pa.field("external_id", pa.int32(), nullable=False),
        pa.field("sequence_number", pa.int32(), nullable=False),  # autograd node seq nr (forward ops, backward nodes)
        pa.field("flow_id", pa.int32(), nullable=False),
        pa.field("flow_phase", _dict_str),
        pa.field("input_dims", pa.string()),
        pa.field("input_types", pa.string()),
        pa.field("bytes", pa.int64(), nullable=False),
        pa.field("op", pa.string()),
        pa.field("module", pa.string()),
        pa.field("scope", pa.string()),
        pa.field("op_class", pa.string()),
        pa.field("flops", pa.int64(), nullable=False),
        pa.field("bytes_accessed", pa.int64(), nullable=False),
    ],
    metadata={b"stepscope.schema_version": str(SCHEMA_VERSION).encode()},
)

#: The collective args of the events that have any (a side table: a few rows of a large trace).
#: ``row`` is the event's index in its file's table (in a rank's table when the file is one rank).
COMM_ARGS_SCHEMA = pa.schema(
    [
        pa.field("row", pa.int64(), nullable=False),
        pa.field("collective", _dict_str),
        pa.field("in_msg_nelems", pa.int64(), nullable=False),
        pa.field("out_msg_nelems", pa.int64(), nullable=False),
        pa.field("msg_dtype", _dict_str),
        pa.field("group_size", pa.int32(), nullable=False),
        pa.field("pg_name", _dict_str),
        pa.field("pg_desc", _dict_str),
        pa.field("pg_ranks", pa.string()),  # ``Process Group Ranks`` as recorded (text)
        pa.field("in_split", pa.string()),  # ``In split size`` as recorded
        pa.field("out_split", pa.string()),  # ``Out split size`` as recorded
    ]
)
COMM_STRING_COLUMNS = ("collective", "msg_dtype", "pg_name", "pg_desc", "pg_ranks", "in_split", "out_split")
COMM_INT_COLUMNS = ("in_msg_nelems", "out_msg_nelems", "group_size")

#: Link ids: only compared with each other (and ``sequence_number`` ordered), never added. int32 in
#: the table; a file whose ids do not fit is renumbered in order, -1 kept (``columns.narrow_ids``).
ID_COLUMNS = ("correlation", "external_id", "sequence_number", "flow_id")

#: What the readers build, before ``columns.narrow_ids``: the event schema with int64 ids.
READ_SCHEMA = pa.schema(
    [pa.field(f.name, pa.int64(), nullable=False) if f.name in ID_COLUMNS else f for f in EVENT_SCHEMA],
    metadata=EVENT_SCHEMA.metadata,
)

XLA_STRING_COLUMNS = ("op", "module", "scope", "op_class")
XLA_INT_COLUMNS = ("flops", "bytes_accessed")

_shared: dict[str, pa.Buffer] = {}


def _buffer(key: str, nbytes: int, fill: int) -> pa.Buffer:
    buf = _shared.get(key)
    if buf is None or buf.size < nbytes:
        import numpy as np

        buf = pa.py_buffer(np.full(max(nbytes, 1 << 16), fill, dtype=np.uint8))
        _shared[key] = buf
    return buf


def null_strings(n: int) -> pa.Array:
    """``n`` null strings, a view of one shared zero buffer (no allocation per table)."""
    zeros = _buffer("zeros", (n + 1) * 4, 0)
    return pa.Array.from_buffers(pa.string(), n, [zeros, zeros, zeros], null_count=n)


def absent_xla_columns(n: int) -> dict[str, pa.Array]:
    """The XLA columns for ``n`` rows of a reader that has none: all-null strings and -1 ints,
    views of one shared zero / 0xFF buffer (no allocation per table)."""
    null_str = null_strings(n)
    minus1 = pa.Array.from_buffers(pa.int64(), n, [None, _buffer("ones", n * 8, 0xFF)])
    return {**{c: null_str for c in XLA_STRING_COLUMNS}, **{c: minus1 for c in XLA_INT_COLUMNS}}


def rank_column(n: int, rank: int) -> pa.Array:
    """The ``rank`` column of ``n`` rows: a view of one buffer per rank value, shared by the chunks
    of a file (the last few values are kept)."""
    key = f"rank:{rank}"
    buf = _shared.get(key)
    if buf is None or buf.size < n * 4:
        import numpy as np

        if len(_shared) > 16:  # a few ranks' buffers at a time: the tables keep theirs alive
            for k in [k for k in _shared if k.startswith("rank:")]:
                _shared.pop(k, None)
        buf = pa.py_buffer(np.full(max(n, 1 << 14), rank, dtype=np.int32))
        _shared[key] = buf
    return pa.Array.from_buffers(pa.int32(), n, [None, buf])


def empty_table() -> pa.Table:
    return EVENT_SCHEMA.empty_table()
