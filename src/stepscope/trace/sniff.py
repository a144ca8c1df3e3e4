"""What a file is, from its bytes, before or after a reader has had it: whether a directory's JSON
file is a trace (``skip_reason``), whether a JSON file is a rocprofv3 document (``is_rocprof_path``),
and what a trace-event JSON the Kineto readers read really is (``interpret_json``: an Ascend
timeline, or a file no reader understands, refused rather than misread)."""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from ..errors import TraceFormatError
from .chrome_meta import overlapping_blocks, process_metadata
from .columns import FileRead
from .jsonstream import is_gzip

_SNIFF_BYTES = 1 << 20


def skip_reason(q: Path) -> str | None:
    """Why a directory's JSON file is not one of its traces, from its first MB: neither a
    ``traceEvents`` key nor a bare event list (``[`` first, an event's ``"ph"`` in it), or a trace
    stepscope wrote itself (``--critical-path-trace``: every rank's collectives, not a rank).
    None for a file that may be a trace: the readers judge the rest. A ``.sqlite`` file holding
    none of the tables an Nsight export has (another tool's database) is not one either."""
    if q.name.endswith(".sqlite"):
        from .nsys_sqlite import nsys_tables_present

        return None if nsys_tables_present(q) is not False else "an SQLite file without Nsight Systems tables"
    if not q.name.endswith((".json", ".json.gz")):
        return None
    head = b""
    try:
        with gzip.open(q, "rb") if is_gzip(q) else open(q, "rb") as fh:
            while len(head) < _SNIFF_BYTES:  # a trace names traceEvents in its first KBs: stop there
                part = fh.read(64 << 10)
                head += part
                if not part or b'"traceEvents"' in head:
                    break
    except (OSError, EOFError, zlib.error):
        return None  # unreadable: the reader says why
    body = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    from .rocprof import is_rocprof

    if is_rocprof(head):
        return None
    if body.startswith(b'{"stepscope_output"'):
        return "a trace stepscope wrote (--critical-path-trace), not a rank's"
    # a bare event list names "ph" in its first event; an empty file is the reader's to report
    if b'"traceEvents"' in head or (body[:1] == b"[" and (b'"ph"' in head or len(body.rstrip()) <= 2)) or not body:
        return None
    return "not a Chrome trace (no traceEvents near its start)"


def _head(path: str, n: int = 4096) -> bytes:
    """The first ``n`` bytes of a (possibly gzipped) file; b"" when it cannot be read."""
    try:
        with gzip.open(path, "rb") if is_gzip(Path(path)) else open(path, "rb") as fh:
            return fh.read(n)
    except (OSError, EOFError, zlib.error):
        return b""


def is_rocprof_path(path: str) -> bool:
    from .rocprof import is_rocprof

    return path.endswith((".json", ".json.gz")) and is_rocprof(_head(path))


#: event kinds only a profiler of framework ops writes (PyTorch's Kineto, torch_npu, XLA's export)
_PROFILER_KINDS = frozenset(
    ("cpu_op", "user_annotation", "gpu_annotation", "python_function", "runtime", "kernel", "memcpy", "memset", "sync")
)
_DEVICE_KINDS = frozenset(("kernel", "memcpy", "memset", "gpu_annotation"))
#: header keys of a Kineto trace (a JSON object beside ``traceEvents``)
_KINETO_HEADER = frozenset(("schemaVersion", "deviceProperties", "distributedInfo", "traceName", "baseTimeNanoseconds"))
#: process names of the device and analysis rows in an Ascend timeline (torch_npu / msprof ``trace_view.json``)
_ASCEND_MARKERS = (b'"Ascend Hardware"', b'"CANN"', b'"Overlap Analysis"')


def interpret_json(fr: FileRead) -> FileRead:
    """A trace-event JSON read by the Kineto readers, as what it is: an Ascend timeline is given its
    NPU meaning (``ascend.py``); one that is not a profile stepscope reads is refused rather than
    analyzed in part.

    Asked only of files without device rows (a GPU trace is never scanned again):
    - an Ascend timeline names its NPU rows' process "Ascend Hardware" (also "CANN", "Overlap
      Analysis"); one without NPU rows is refused (it would pass for a CPU-only trace);
    - a Chrome trace-event file without a Kineto header and without any framework-op event kind
      (xprof/TensorFlow trace viewer JSON, other tools' timelines) has no steps to find.
    """
    if fr.table.num_rows == 0:  # no event at all: the assembler says so
        return fr
    kinds = set(fr.table["kind"].unique().cast("string").to_pylist())
    if kinds & _DEVICE_KINDS:
        return fr
    if _file_holds(fr.path, _ASCEND_MARKERS):
        from .ascend import is_ascend, to_ascend

        meta = process_metadata(fr.path)
        read = to_ascend(fr, meta) if is_ascend(meta) else fr
        if set(read.table["kind"].unique().cast("string").to_pylist()) & _DEVICE_KINDS:
            return read
        raise TraceFormatError(
            "an Ascend NPU timeline (torch_npu / msprof trace_view.json) without NPU task rows "
            '(no "Ascend Hardware" process): it would read as a CPU-only trace',
            path=fr.path,
            fix="profile with torch_npu.profiler.ProfilerActivity.NPU among the activities",
        )
    if not kinds & _PROFILER_KINDS and not _KINETO_HEADER & set(fr.header):
        raise TraceFormatError(
            "a Chrome trace-event file with no profiler op events (no cpu_op, kernel or runtime rows, no Kineto header), such as an "
            "xprof/TensorFlow trace-viewer JSON",
            path=fr.path,
            fix="for JAX or TensorFlow pass the .xplane.pb the profiler wrote; for PyTorch the torch.profiler trace",
        )
    return fr


def _file_holds(path: str, needles: tuple[bytes, ...]) -> bool:
    """Whether the (possibly gzipped) file's bytes contain one of ``needles``; read in blocks."""
    keep = max(len(n) for n in needles) - 1
    return any(any(n in buf for n in needles) for buf in overlapping_blocks(path, keep))
