"""Device memory: how full the device got, how much of the reserved pool was not in use at that
moment, and what the allocator's own driver calls cost the steps.

From the allocator events (``trace/memory.py``; Kineto ``profile_memory=True``), per accelerator
device (``Device Type`` != 0):
- ``peak_allocated_bytes``: the largest ``Total Allocated`` (bytes in live tensors);
- ``peak_reserved_bytes``: the largest ``Total Reserved`` (what the caching allocator holds from the
  driver), -1 when the trace does not record it (traces before PyTorch 1.10);
- ``unallocated_at_peak_ratio`` = 1 - allocated / reserved at the event of the reserved peak: the
  share of the pool that was cached but free when the pool was largest (fragmentation, or blocks
  cached for sizes no longer asked for);
- ``capacity_bytes``: the device's memory (the runtime's ``totalGlobalMem`` in the trace, else the
  hardware catalog), None when unknown; ``peak_used_ratio`` = the reserved peak (the allocated one
  when reserved is not recorded) / capacity.

From the host's runtime calls (any trace): ``allocator_calls`` and ``allocator_ns`` per steady step,
the driver allocations and frees the framework made inside its CPU steps (``cudaMalloc``,
``cudaFree``, ``hipMalloc``... by name), and ``allocator_idle_ns``: the part of those calls during
which the device was idle (``ctx.idle_gaps``; ``cudaFree`` waits for the device, so the device
drains while it runs). Means over the steady steps.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ...catalog.hardware import reported_memory_bytes
from ...trace.schema import KIND_CODE as KIND
from .. import intervals as iv
from ..context import RankContext
from ..steps.warmup import steady

#: driver allocation / free calls of CUDA and HIP (the caching allocator's slow path)
ALLOCATOR_CALLS = re.compile(
    r"^(cuda|hip)(Malloc|MallocAsync|Free|FreeAsync|MallocManaged|MallocHost|FreeHost|HostAlloc)(_v\d+)?$"
    r"|^cuMem(Alloc|Free|Create|Release|Map|Unmap)(_v\d+)?$"
)


@dataclass(frozen=True, kw_only=True)
class DeviceMemory:
    device_id: int
    events: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int  # -1: not recorded
    unallocated_at_peak_ratio: float | None  # None: reserved not recorded
    capacity_bytes: float | None
    peak_used_ratio: float | None  # None: capacity unknown


@dataclass(frozen=True, kw_only=True)
class MemoryUsage:
    devices: tuple[DeviceMemory, ...]  # accelerators with allocator events, by device id
    allocator_calls: float  # per steady step
    allocator_ns: float  # per steady step: union of the calls
    allocator_idle_ns: float  # per steady step: of it, while the device was idle


def compute(ctx: RankContext) -> MemoryUsage:
    calls, call_ns, idle_ns = _allocator_calls(ctx)
    return MemoryUsage(devices=_devices(ctx), allocator_calls=calls, allocator_ns=call_ns, allocator_idle_ns=idle_ns)


def _devices(ctx: RankContext) -> tuple[DeviceMemory, ...]:
    m = ctx.memory
    if m is None or m.size == 0:
        return ()
    out = []
    for dev in np.unique(m.device_id[m.device_type > 0]):
        sel = (m.device_type > 0) & (m.device_id == dev)
        alloc, res = m.total_allocated[sel], m.total_reserved[sel]
        peak_res = int(res.max())
        unalloc = None
        if peak_res > 0:
            at = int(np.argmax(res))
            unalloc = max(0.0, 1.0 - max(int(alloc[at]), 0) / peak_res)
        cap = _capacity(ctx, int(dev))
        used = peak_res if peak_res >= 0 else int(alloc.max())
        out.append(
            DeviceMemory(
                device_id=int(dev),
                events=int(sel.sum()),
                peak_allocated_bytes=int(alloc.max()),
                peak_reserved_bytes=peak_res,
                unallocated_at_peak_ratio=unalloc,
                capacity_bytes=cap,
                peak_used_ratio=used / cap if cap and used >= 0 else None,
            )
        )
    return tuple(out)


def _capacity(ctx: RankContext, device_id: int) -> float | None:
    """The device's memory: its ``deviceProperties`` entry (``totalGlobalMem``), else the hardware's."""
    props = [p for p in ctx.info.device_properties if p.get("id") == device_id]
    got = reported_memory_bytes(props[0]) if props else None
    if got:
        return got
    return ctx.hardware_info.memory_bytes if ctx.hardware_info else None


def _allocator_calls(ctx: RankContext) -> tuple[float, float, float]:
    h = ctx.data.host
    steps = steady(ctx.steps)
    if not steps:
        return 0.0, 0.0, 0.0
    is_alloc = np.array([bool(ALLOCATOR_CALLS.match(n)) for n in h.names], dtype=bool)
    rows = np.flatnonzero((h.kind == KIND["runtime"]) & is_alloc[h.name_idx])
    if rows.size == 0:
        return 0.0, 0.0, 0.0
    s, e = h.ts[rows], h.end[rows]
    idle = ctx.idle_gaps.any_cause()
    calls = total = in_idle = 0
    for st in steps:
        c0, c1 = st.cpu_start_ns, st.cpu_start_ns + st.cpu_step_ns
        a, b = iv.clip(s, e, c0, c1)
        calls += int(a.size)
        ua, ub = iv.union(a, b)
        total += int((ub - ua).sum())
        in_idle += int(idle.between(ua, ub).sum())
    n = len(steps)
    return calls / n, total / n, in_idle / n
