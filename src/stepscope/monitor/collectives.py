"""Level 2: every collective call, timed on the host. ``torch.distributed``'s collective functions
are wrapped while a monitor runs (and restored when it closes): a blocking call's host time is the
time the rank waited for its peers plus the transfer; an ``async_op=True`` call counts its launch
only (its wait happens in torch's own ``Work.wait()``, which is left as it is, so handles keep their
type). A DistributedDataParallel model gets a comm hook (the default all-reduce over the model's
own process group, timed): its wait is the last completion minus the last launch of the step's
buckets.

Code that imported a function before the monitor started (``from torch.distributed import
all_reduce``) keeps the unwrapped one and is not seen; that is documented, not detected.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

from .probes import StepAcc

_now = time.perf_counter_ns

#: the wrapped ``torch.distributed`` functions, by the op name recorded
COLLECTIVES: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "all_to_all",
    "all_to_all_single",
    "broadcast",
    "broadcast_object_list",
    "reduce",
    "gather",
    "scatter",
    "barrier",
    "send",
    "recv",
)
# not isend / irecv: torch.distributed.P2POp accepts only the originals (batch_isend_irecv)


def _nbytes(x: Any) -> int:
    if hasattr(x, "element_size") and hasattr(x, "numel"):
        return int(x.element_size() * x.numel())
    if isinstance(x, list | tuple):
        return sum(_nbytes(t) for t in x[:64])
    return 0


def _wrap(fn: Callable[..., Any], op: str, acc: StepAcc) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        if acc.in_hook:
            return fn(*args, **kwargs)
        t = _now()
        out = fn(*args, **kwargs)
        dt = _now() - t
        try:
            acc.add_collective(op, dt, _nbytes(args[0]) if args else 0)
        except Exception:
            pass
        return out  # unchanged: the handle of an async call is torch's own

    timed.__stepscope_original__ = fn  # type: ignore[attr-defined]
    return timed


class CollectivePatch:
    """Wraps ``torch.distributed``'s collectives for ``acc``; ``remove()`` puts the originals back."""

    def __init__(self, acc: StepAcc) -> None:
        import torch.distributed as dist

        self._dist = dist
        self._saved: dict[str, Callable[..., Any]] = {}
        for op in COLLECTIVES:
            fn = getattr(dist, op, None)
            if fn is None or hasattr(fn, "__stepscope_original__"):
                continue
            self._saved[op] = fn
            setattr(dist, op, _wrap(fn, op, acc))

    def remove(self) -> None:
        for op, fn in self._saved.items():
            setattr(self._dist, op, fn)
        self._saved.clear()


def hook_ddp(acc: StepAcc, model: Any) -> bool:
    """Registers a timed copy of DDP's default all-reduce hook on ``model``; False when the model is
    not DDP or already has a comm hook (DDP allows one)."""
    try:
        from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:
        return False
    if not isinstance(model, DistributedDataParallel):
        return False

    def timed_allreduce(state, bucket):  # type: ignore[no-untyped-def]  # DDP rejects a hook whose bucket is not annotated GradBucket

        acc.ddp_launch = _now()
        acc.in_hook = True
        try:
            fut = default_hooks.allreduce_hook(state, bucket)
        finally:
            acc.in_hook = False

        def done(f: Any) -> Any:
            acc.ddp_done = max(acc.ddp_done, _now())
            acc.ddp_calls += 1
            return f.value()

        return fut.then(done)

    try:
        model.register_comm_hook(getattr(model, "process_group", None), timed_allreduce)
    except RuntimeError:  # a comm hook is already registered
        return False
    return True
