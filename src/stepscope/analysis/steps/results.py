"""Frozen result types of the step accounting: one step's breakdown, its idle causes and host
figures, and the rank-level statistics over steps. Units are in the names: ``_ns`` integer
nanoseconds, ``_ratio`` 0-1."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CollectiveTime:
    """One collective type within a step: union of its device time and how much compute hid it."""

    type: str
    comm_ns: int
    overlapped_ns: int
    exposed_ns: int
    count: int


@dataclass(frozen=True)
class IdleCauses:
    """Why the device (or one stream) sat idle; the parts sum to the idle time.

    input_wait: a data-loader range ran on the host during the gap (waiting for input); the rest
    of each gap goes to one of the three below (``idle.py``).
    host_bound: the work that ended the gap was launched after the gap began (the CPU was late).
    wait: launched before the gap, while a sync/wait call was in flight on the host or (per
    stream) another stream was busy (a cross-stream dependency).
    other: launched in time but started late for no visible reason (launch latency, driver).
    """

    input_wait_ns: int = 0
    host_bound_ns: int = 0
    wait_ns: int = 0
    other_ns: int = 0
    gaps: int = 0


@dataclass(frozen=True)
class CpuStep:
    """Host-side figures of one step (unions over the step's CPU span, all host threads)."""

    dataloader_ns: int = 0
    optimizer_ns: int = 0
    sync_ns: int = 0
    sync_calls: int = 0
    cpu_bound_ns: int = 0  # device idle while the host had not yet launched the next work
    silent_ns: int = 0  # idle in gaps >= 1 ms with a nearly silent host (``idle.silent_ns``)
    compile_ns: int = 0  # host time compiling: torch.compile's "(dynamo_timed)" ranges, NVRTC, module loads


@dataclass(frozen=True)
class StepBreakdown:
    """Where one step's time goes.

    The window ``[window_start_ns, window_end_ns)`` is the step's part of a partition of the device
    timeline (``windows.step_windows``); all device work in it counts, whoever launched it, clipped
    to the window. Invariant: ``compute_ns + exposed_comm_ns + exposed_memcpy_ns + idle_ns ==
    step_time_ns``. Priority when kinds overlap: compute > communication > memcpy/memset > idle.
    ``spill_over_ns``: the union, in the window, of the work launched by earlier steps.
    ``warmup``: a leading warm-up step, kept out of the statistics (``warmup.py``).
    """

    name: str
    step_time_ns: int
    window_start_ns: int
    window_end_ns: int
    cpu_step_ns: int
    cpu_start_ns: int
    compute_ns: int
    comm_ns: int
    overlapped_comm_ns: int
    exposed_comm_ns: int
    memcpy_ns: int
    exposed_memcpy_ns: int
    idle_ns: int
    by_category_ns: dict[str, int]
    kernel_time_by_category_ns: dict[str, int]
    collectives: tuple[CollectiveTime, ...]
    idle_causes: IdleCauses
    cpu: CpuStep
    device_events: int
    window_source: str  # "device" (GPU work launched in the step) | "cpu" (no device work)
    spill_over_ns: int = 0
    warmup: bool = False


@dataclass(frozen=True)
class OpStat:
    """Duration statistics of one kernel or CPU op name over the analyzed steps."""

    name: str
    category: str
    count: int
    total_ns: int
    mean_ns: float
    p50_ns: int
    p99_ns: int
    share_of_step_ratio: float


@dataclass(frozen=True)
class StreamIdle:
    device: int
    stream: int
    busy_ns: int
    idle_ns: int
    causes: IdleCauses


@dataclass(frozen=True)
class LaunchStats:
    """Kernel launches: delay from the runtime call to kernel start, and short kernels."""

    kernels: int
    matched: int
    delay_p50_ns: int
    delay_p99_ns: int
    delay_mean_ns: float
    short_kernels: int  # shorter than ``short_threshold_ns``
    short_kernel_time_ns: int
    short_threshold_ns: int
    launch_call_mean_ns: float
    graph_launches: int = 0  # cudaGraphLaunch / hipGraphLaunch calls in the trace


@dataclass(frozen=True)
class StepFlag:
    """A step more than the threshold over the median, and which component grew most."""

    name: str
    step_time_ns: int
    over_median_ratio: float
    grew: str
    grew_by_ns: int


@dataclass(frozen=True)
class StepStats:
    """Statistics over the steady steps (warm-up steps excluded; ``warmup_steps`` of them), and the
    rank's device work outside every step window: ``outside_steps_ns`` of ``device_busy_ns`` (the
    union of all device work), ``outside_steps_ratio`` = their quotient (0 without device work)."""

    count: int
    mean_ns: float
    median_ns: float
    min_ns: int
    max_ns: int
    std_ns: float
    cv_ratio: float
    flagged: tuple[StepFlag, ...]
    warmup_steps: int = 0
    device_busy_ns: int = 0
    outside_steps_ns: int = 0
    outside_steps_ratio: float = 0.0
    dataloader_in_process: bool = False  # a single-process DataLoader (num_workers=0) is in the trace
