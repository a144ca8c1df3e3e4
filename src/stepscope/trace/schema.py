"""The one definition of stepscope's normalized event table.

Every reader (Kineto JSON today; XPlane and Nsight later) produces a ``pyarrow.Table`` with exactly
these columns, in this order. Analyses read only these columns.

Conventions
- Times are integer nanoseconds on the trace's own clock (``ts_ns``, ``dur_ns``); never floats.
- Missing integers are ``-1`` (not null) so columns convert to numpy without masks.
- Missing strings are null. Repeated strings (``name``, ``cat``, ``kind``...) are dictionary-encoded.
- Launch flows (Kineto ``ac2g``, old ``async``/``launch``) are not rows: they repeat the
  ``correlation`` id that the runtime call and its kernel both carry. Other flows (``fwdbwd``:
  forward op -> backward op) are rows of kind ``flow`` with ``flow_id``/``flow_phase``.
- ``python_function`` rows are kept only when asked for, except ``nn.Module: <Class>_<n>`` ranges
  (``with_modules=True``): they give the module hierarchy.
- ``device``/``stream`` are set for device work (kernel, memcpy, memset, gpu_annotation, sync);
  ``pid``/``tid`` identify the host process/thread for host events.
"""

from __future__ import annotations

import enum

import pyarrow as pa

SCHEMA_VERSION = 2

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

#: Kinds that occupy a device stream and count towards device time accounting.
DEVICE_WORK_KINDS = (Kind.KERNEL.value, Kind.MEMCPY.value, Kind.MEMSET.value)

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
        pa.field("correlation", pa.int64(), nullable=False),
        pa.field("external_id", pa.int64(), nullable=False),
        pa.field("sequence_number", pa.int64(), nullable=False),  # autograd node seq nr (forward ops, backward nodes)
        pa.field("flow_id", pa.int64(), nullable=False),
        pa.field("flow_phase", _dict_str),
        pa.field("input_dims", pa.string()),
        pa.field("input_types", pa.string()),
        pa.field("collective", _dict_str),
        pa.field("in_msg_nelems", pa.int64(), nullable=False),
        pa.field("out_msg_nelems", pa.int64(), nullable=False),
        pa.field("msg_dtype", _dict_str),
        pa.field("group_size", pa.int32(), nullable=False),
        pa.field("pg_name", _dict_str),
        pa.field("pg_desc", _dict_str),
        pa.field("bytes", pa.int64(), nullable=False),
    ],
    metadata={b"stepscope.schema_version": str(SCHEMA_VERSION).encode()},
)

COLUMNS = tuple(EVENT_SCHEMA.names)


def empty_table() -> pa.Table:
    return EVENT_SCHEMA.empty_table()
