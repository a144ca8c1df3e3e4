"""The one definition of what the monitor records, shared by the in-job writer, the sinks and the
readers. Times are integer nanoseconds; a field the job did not measure is ``None`` (stored as
NULL / JSON null), never 0.

A **step record** is one iteration on one rank, from the end of the previous ``mon.step()`` (or the
monitor's start) to this one, measured with ``time.perf_counter_ns`` on the training thread:

- ``dur_ns``: the iteration period on the host;
- ``data_ns``: time inside the wrapped loader's ``next()`` (level >= 1);
- ``forward_ns``: the watched model's forward, pre-hook to post-hook (level >= 1);
- ``backward_ns``: forward end to the optimizer's step pre-hook: loss, backward and anything the
  loop does before ``optimizer.step()`` (gradient clipping) (level >= 1);
- ``optimizer_ns``: the optimizer's step, pre-hook to post-hook (level >= 1);
- ``comm_ns`` / ``comm_calls``: host time blocked in collective calls and their number (level 2;
  a DDP model's bucket all-reduces count from the last bucket's launch to the last completion,
  the time ``backward()`` waits for them);
- ``gc_ns`` / ``gc_count``: CPython garbage-collection pauses inside the step (``gc.callbacks``);
- ``tokens``: what the job passed to ``mon.step(tokens=...)``;
- ``peak_mem_bytes``: ``torch.cuda.max_memory_allocated`` over the step (CUDA jobs only);
- ``tags``: comma-separated step tags (``warmup``, ``eval``, ``checkpoint``, ``profiling`` or the
  job's own), kept out of statistics.

A **collective record** sums one collective kind (``all_reduce``, ``all_to_all``...) over one step of
one rank (level 2). A **device record** is the device's period of one step, from CUDA events read
back by the writer thread, never on the training thread.
"""

from __future__ import annotations

STEP_COLUMNS: tuple[str, ...] = (
    "rank",
    "step",
    "start_unix_ns",
    "dur_ns",
    "data_ns",
    "forward_ns",
    "backward_ns",
    "optimizer_ns",
    "comm_ns",
    "comm_calls",
    "gc_ns",
    "gc_count",
    "tokens",
    "peak_mem_bytes",
    "tags",
)
#: the integer columns (all but ``tags``)
STEP_INT_COLUMNS: tuple[str, ...] = STEP_COLUMNS[:-1]
#: the phases a step is split into at level 1, in the order they run
PHASES: tuple[str, ...] = ("data", "forward", "backward", "optimizer")

COLLECTIVE_COLUMNS: tuple[str, ...] = ("rank", "step", "op", "calls", "host_ns", "bytes")
DEVICE_COLUMNS: tuple[str, ...] = ("rank", "step", "device_ns")

#: tags the monitor sets itself; a job may add any other word
KNOWN_TAGS: tuple[str, ...] = ("warmup", "eval", "checkpoint", "profiling")

#: how a run directory's files are named: ``rank-00003.db`` / ``rank-00003.jsonl``
FILE_STEM = "rank-{rank:05d}"
SCHEMA_VERSION = 1
