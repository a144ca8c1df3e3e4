"""One way to run a function over a list of jobs: in this process, in a pool of worker processes, or as
tasks on an existing Dask cluster. Used by the loader (read jobs) and by analyze (read + analyze jobs).

Results come back in job order whatever the order of completion. ``progress(done, total)`` is called once
with ``done = 0`` before any job runs and once after each job finishes. Only the (small) results travel
back from the workers, so memory in this process does not grow with the size of the inputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any, TypeVar

from .errors import ConfigError

J = TypeVar("J")
R = TypeVar("R")

#: progress(done, total): jobs finished so far, jobs in all
Progress = Callable[[int, int], None]


def run_all(
    fn: Callable[[J], R],
    jobs: Sequence[J],
    *,
    workers: int | None = None,
    dask: str | None = None,
    progress: Progress | None = None,
) -> list[R]:
    """``[fn(j) for j in jobs]``: on the Dask cluster ``dask`` (a scheduler address or scheduler file)
    when given, else over ``workers`` processes (default: one per job, at most the CPU count; 1 runs
    here, in order). ``fn`` and the jobs must pickle for the processes and Dask."""
    total = len(jobs)
    tick: Progress = progress or (lambda _done, _total: None)
    tick(0, total)
    if dask:
        return _on_dask(dask, fn, jobs, tick)
    n = workers if workers is not None else min(total, os.cpu_count() or 1)
    out: list[R] = []
    if n > 1 and total > 1:
        share = max(1, (os.cpu_count() or 1) // n)
        with ProcessPoolExecutor(max_workers=n, initializer=_cpu_share, initargs=(share,)) as pool:
            for fut in [pool.submit(fn, j) for j in jobs]:
                out.append(fut.result())
                tick(len(out), total)
        return out
    for j in jobs:
        out.append(fn(j))
        tick(len(out), total)
    return out


#: the CPUs one job may use (threads inside a job, e.g. the threaded read of one large file)
CPU_SHARE_ENV = "STEPSCOPE_CPUS"


def _cpu_share(cpus: int) -> None:
    """Worker-process initializer: the jobs running side by side split the CPUs between them."""
    os.environ[CPU_SHARE_ENV] = str(cpus)


def cpus_for_one_job() -> int:
    """CPUs a job may use: its share when it runs in a worker process, else all this process may use."""
    share = os.environ.get(CPU_SHARE_ENV, "")
    if share.isdigit() and int(share) > 0:
        return int(share)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _on_dask(address: str, fn: Callable[[J], R], jobs: Sequence[J], tick: Progress) -> list[R]:
    """One task per job on an existing Dask cluster."""
    try:
        from distributed import Client, as_completed
    except ImportError:
        raise ConfigError("--dask needs the dask extra", fix='pip install "stepscope[dask]"') from None
    try:
        if os.path.isfile(address):
            client = Client(scheduler_file=address, timeout="20s")
        else:
            client = Client(address, timeout="20s")
    except Exception as exc:  # noqa: BLE001 - whatever answers there (not an address, not Dask, garbage)
        raise ConfigError(
            f"cannot reach the Dask scheduler ({exc.__class__.__name__})",
            path=address,
            fix="check the address (tcp://host:8786) or scheduler file",
        ) from None
    try:
        futures = client.map(fn, list(jobs), pure=False)
        index = {f.key: k for k, f in enumerate(futures)}
        got: dict[int, Any] = {}
        for fut in as_completed(futures):
            got[index[fut.key]] = fut.result()
            tick(len(got), len(jobs))
        return [got[k] for k in range(len(jobs))]
    finally:
        client.close()
