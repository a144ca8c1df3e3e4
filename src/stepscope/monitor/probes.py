"""What the training thread measures inside one step: the accumulator the hooks add to, and the
level-1 hooks (forward, optimizer) on a model and an optimizer. torch is imported only here, and
only when a model or optimizer is watched.

Phases (level 1), from ``time.perf_counter_ns``:

- data: time in the wrapped loader's ``next()``;
- forward: the watched module's forward pre-hook to its forward hook (summed over micro-batches);
- optimizer: the optimizer's step pre-hook to its step post-hook;
- backward: step start to the optimizer's pre-hook, minus data and forward: the loss, backward and
  whatever the loop does before ``optimizer.step()`` (gradient clipping, zero_grad).
"""

from __future__ import annotations

import time
from typing import Any

_now = time.perf_counter_ns


class StepAcc:
    """One step's running sums on the training thread (and, for collectives completed on a
    communication thread, single attribute stores from it)."""

    __slots__ = (
        "data",
        "fwd",
        "fwd_t0",
        "opt",
        "opt_t0",
        "opt_pre",
        "comm",
        "comm_calls",
        "coll",
        "ddp_launch",
        "ddp_done",
        "ddp_calls",
        "in_hook",
        "tags",
    )

    def __init__(self) -> None:
        self.coll: dict[str, list[int]] = {}
        self.tags: list[str] = []
        self.reset()
        self.in_hook = False

    def reset(self) -> None:
        self.data = 0
        self.fwd = 0
        self.fwd_t0 = 0
        self.opt = 0
        self.opt_t0 = 0
        self.opt_pre = 0
        self.comm = 0
        self.comm_calls = 0
        if self.coll:  # a new dict only when one was used (no allocation on most steps)
            self.coll = {}
        self.ddp_launch = 0
        self.ddp_done = 0
        self.ddp_calls = 0
        if self.tags:
            self.tags = []

    def add_collective(self, op: str, dur_ns: int, nbytes: int) -> None:
        self.comm += dur_ns
        self.comm_calls += 1
        c = self.coll.get(op)
        if c is None:
            self.coll[op] = [1, dur_ns, nbytes]
        else:
            c[0] += 1
            c[1] += dur_ns
            c[2] += nbytes

    def ddp_wait_ns(self) -> int:
        """The time ``backward()`` waited for DDP's bucket all-reduces: the last completion minus
        the last launch (the last bucket is launched when the backward's compute ends)."""
        if self.ddp_calls and self.ddp_done > self.ddp_launch:
            return self.ddp_done - self.ddp_launch
        return 0


def watch_model(acc: StepAcc, model: Any) -> list[Any]:
    """Forward pre/post hooks on ``model`` (the root module only: one pair of calls per forward)."""

    def pre(mod: Any, args: Any) -> None:
        acc.fwd_t0 = _now()

    def post(mod: Any, args: Any, out: Any) -> None:
        if acc.fwd_t0:
            acc.fwd += _now() - acc.fwd_t0
            acc.fwd_t0 = 0

    return [model.register_forward_pre_hook(pre), model.register_forward_hook(post)]


def watch_optimizer(acc: StepAcc, optimizer: Any | None) -> list[Any]:
    """Step pre/post hooks on ``optimizer``; with ``None``, torch's global optimizer hooks (every
    optimizer's step, so the job need not pass its optimizer)."""

    def pre(opt: Any, args: Any, kwargs: Any) -> None:
        t = _now()
        acc.opt_t0 = t
        if not acc.opt_pre:
            acc.opt_pre = t

    def post(opt: Any, args: Any, kwargs: Any) -> None:
        if acc.opt_t0:
            acc.opt += _now() - acc.opt_t0
            acc.opt_t0 = 0

    if optimizer is not None:
        return [optimizer.register_step_pre_hook(pre), optimizer.register_step_post_hook(post)]
    from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

    return [register_optimizer_step_pre_hook(pre), register_optimizer_step_post_hook(post)]


class TimedLoader:
    """Iterates ``iterable``, adding the time of each ``next()`` to the step's data phase."""

    def __init__(self, acc: StepAcc, iterable: Any) -> None:
        self._acc = acc
        self._iterable = iterable

    def __iter__(self) -> Any:
        acc = self._acc
        it = iter(self._iterable)
        while True:
            t = _now()
            try:
                item = next(it)
            except StopIteration:
                return
            acc.data += _now() - t
            yield item

    def __len__(self) -> int:
        return len(self._iterable)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._iterable, name)
