"""A Prometheus exporter for the in-job monitor: one HTTP endpoint per rank, ``/metrics`` in the
Prometheus text format, fed by the monitor's writer thread (never the training thread).

The exporter binds **127.0.0.1** unless the job passes another ``host``: the endpoint is then reachable
only from this machine (a Prometheus server or agent on the node scrapes it); pass ``host="0.0.0.0"``
(or an interface's address) to let a remote server scrape it. ``port=0`` picks a free port, read back
with :attr:`PromExporter.port`. It needs the optional extra ``prometheus``
(``pip install 'stepscope[prometheus]'``, i.e. ``prometheus-client>=0.20``).

Each exporter has its own registry (never ``prometheus_client``'s global one), so two exporters in
one process do not clash. Metrics, in base units; no step number in any label (one series per
step would grow without bound); ``rank`` is the job's rank:

- ``stepscope_step_duration_seconds`` histogram, labels ``rank``: a step's period on the host
  (``dur_ns``); buckets 0.01 s .. 600 s;
- ``stepscope_step_phase_duration_seconds`` histogram, labels ``rank``, ``phase`` (``data``,
  ``forward``, ``backward``, ``optimizer``, ``comm``): the phase columns a step measured (level >= 1;
  ``comm`` at level 2); same buckets;
- ``stepscope_gc_pause_seconds`` histogram, labels ``rank``: the garbage-collection pause of one step
  (``gc_ns``, the sum of that step's collections), for steps with at least one collection; buckets
  0.0001 s .. 10 s;
- ``stepscope_steps_total`` counter, labels ``rank``: steps recorded;
- ``stepscope_tokens_total`` counter, labels ``rank``: tokens the job passed to ``mon.step(tokens=)``;
- ``stepscope_peak_memory_bytes`` gauge, labels ``rank``: the peak allocated device memory of the
  latest step that measured it (CUDA jobs);
- ``stepscope_anomaly_events_total`` counter, labels ``rank``, ``kind``, ``scope``: anomalies detected;
- ``stepscope_profile_captures_total`` counter, labels ``rank``, ``trigger``: profiler captures taken;
- ``stepscope_dropped_records`` gauge, labels ``rank``: records the monitor dropped so far (its
  queue was full), a running total set by the monitor;
- ``stepscope_build_info`` gauge (an info metric, value 1), labels ``version`` (stepscope's) and
  ``job_name`` (the ``job`` given; Prometheus sets its own ``job`` label from the scrape config).

The two duration histograms leave out tagged steps (``warmup``, ``eval``, ``checkpoint``,
``profiling`` or the job's own): like every statistic of the monitor (see :mod:`.record`), they
describe the steady training steps. The counters, the GC histogram and the memory gauge take every
step.
"""

from __future__ import annotations

import errno
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..errors import ConfigError
from .record import STEP_COLUMNS

if TYPE_CHECKING:
    from wsgiref.simple_server import WSGIServer

    from prometheus_client import Counter, Gauge, Histogram
    from prometheus_client.metrics import MetricWrapperBase

STEP_BUCKETS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 60, 120, 300, 600)
GC_BUCKETS: tuple[float, ...] = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
)
#: the phase label and the column it is read from
PHASE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("data", "data_ns"),
    ("forward", "forward_ns"),
    ("backward", "backward_ns"),
    ("optimizer", "optimizer_ns"),
    ("comm", "comm_ns"),
)
_COL = {name: i for i, name in enumerate(STEP_COLUMNS)}
_NS = 1e-9


def _nonneg(v: Any) -> bool:
    """A measured value (not None, not a negative a broken clock could give)."""
    return v is not None and v >= 0


class PromExporter:
    """Serve one rank's metrics on ``http://host:port/metrics`` from a daemon thread until
    :meth:`close`. The ``observe_*`` / ``set_*`` methods are thread-safe."""

    def __init__(self, *, port: int, host: str = "127.0.0.1", rank: int, job: str = "") -> None:
        try:
            import prometheus_client as pc
        except ImportError as e:
            raise ConfigError(
                "the Prometheus exporter needs prometheus-client", fix="pip install 'stepscope[prometheus]'"
            ) from e
        self._rank = str(int(rank))
        self._lock = threading.Lock()
        self._closed = False
        reg = pc.CollectorRegistry(auto_describe=True)
        self.registry = reg
        self._dur = pc.Histogram(
            "stepscope_step_duration_seconds",
            "Period of one training step on the host (untagged steps)",
            ["rank"],
            buckets=STEP_BUCKETS,
            registry=reg,
        )
        self._phase = pc.Histogram(
            "stepscope_step_phase_duration_seconds",
            "Time of one phase of a training step (untagged steps)",
            ["rank", "phase"],
            buckets=STEP_BUCKETS,
            registry=reg,
        )
        self._gc = pc.Histogram(
            "stepscope_gc_pause_seconds",
            "Python garbage-collection pause within one step (steps with a collection)",
            ["rank"],
            buckets=GC_BUCKETS,
            registry=reg,
        )
        self._steps = pc.Counter("stepscope_steps", "Training steps recorded", ["rank"], registry=reg)
        self._tokens = pc.Counter(
            "stepscope_tokens", "Tokens processed, as passed to mon.step()", ["rank"], registry=reg
        )
        self._mem = pc.Gauge(
            "stepscope_peak_memory_bytes", "Peak allocated device memory of the latest step", ["rank"], registry=reg
        )
        self._anomalies = pc.Counter(
            "stepscope_anomaly_events", "Anomalies detected", ["rank", "kind", "scope"], registry=reg
        )
        self._captures = pc.Counter(
            "stepscope_profile_captures", "Profiler captures taken", ["rank", "trigger"], registry=reg
        )
        self._drops = pc.Gauge(
            "stepscope_dropped_records", "Records the monitor dropped so far (queue full)", ["rank"], registry=reg
        )
        info = pc.Info("stepscope_build", "stepscope version and monitored job", registry=reg)
        info.info({"version": __version__, "job_name": job})
        # series that are meaningful at zero exist from the start; the others appear when measured
        self._dur_r: Histogram = self._dur.labels(rank=self._rank)
        self._steps_r: Counter = self._steps.labels(rank=self._rank)
        self._drops_r: Gauge = self._drops.labels(rank=self._rank)
        self._drops_r.set(0)
        self._phase_r: dict[str, Histogram] = {}

        try:
            started = pc.start_http_server(port, addr=host, registry=reg)
        except OSError as e:
            in_use = e.errno == errno.EADDRINUSE
            raise ConfigError(
                f"cannot serve Prometheus metrics on {host}:{port}: {e.strerror or e}",
                fix="choose another prometheus_port or 0"
                if in_use or e.errno == errno.EACCES
                else "check prometheus_host (127.0.0.1 serves this machine only), or choose another prometheus_port or 0",
            ) from e
        self._server: WSGIServer = started[0]
        self._thread: threading.Thread = started[1]

    @property
    def port(self) -> int:
        """The port the server is bound to (the one picked when ``port=0`` was given)."""
        return int(self._server.server_address[1])

    @property
    def host(self) -> str:
        """The address the server is bound to."""
        return str(self._server.server_address[0])

    def _child(self, metric: MetricWrapperBase, **labels: str) -> Any:
        return metric.labels(rank=self._rank, **labels)

    def observe_steps(self, rows: Sequence[Sequence[Any]]) -> None:
        """Add step records (rows in ``record.STEP_COLUMNS`` order)."""
        i_dur, i_gc, i_gcn, i_tok, i_mem, i_tags = (
            _COL[c] for c in ("dur_ns", "gc_ns", "gc_count", "tokens", "peak_mem_bytes", "tags")
        )
        tokens: int | None = None
        peak = None
        for row in rows:
            tagged = bool(row[i_tags])
            if not tagged:
                if _nonneg(row[i_dur]):
                    self._dur_r.observe(row[i_dur] * _NS)
                for phase, col in PHASE_COLUMNS:
                    v = row[_COL[col]]
                    if _nonneg(v):
                        child = self._phase_r.get(phase)
                        if child is None:
                            child = self._phase_r.setdefault(phase, self._child(self._phase, phase=phase))
                        child.observe(v * _NS)
            if _nonneg(row[i_gc]) and row[i_gcn] is not None and row[i_gcn] > 0:
                self._child(self._gc).observe(row[i_gc] * _NS)
            if _nonneg(row[i_tok]):
                tokens = (tokens or 0) + row[i_tok]
            if _nonneg(row[i_mem]):
                peak = row[i_mem]
        if tokens is not None:
            self._child(self._tokens).inc(tokens)
        if peak is not None:
            self._child(self._mem).set(peak)
        self._steps_r.inc(len(rows))

    def observe_anomaly(self, kind: str, scope: str) -> None:
        """Count one anomaly event of this kind and scope."""
        self._child(self._anomalies, kind=kind, scope=scope).inc()

    def observe_capture(self, trigger: str) -> None:
        """Count one profiler capture started by this trigger."""
        self._child(self._captures, trigger=trigger).inc()

    def set_drops(self, dropped: int) -> None:
        """Set the running total of records dropped."""
        self._drops_r.set(dropped)

    def close(self) -> None:
        """Stop serving and release the port (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> PromExporter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
