"""The Prometheus exporter: hand-computed metrics read back from /metrics, and a real Prometheus
server (the ``prometheus`` binary) scraping it on loopback."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stepscope import __version__
from stepscope.errors import ConfigError
from stepscope.monitor.record import STEP_COLUMNS

from ..conftest import in_ci
from ..synth import free_port

MS = 1_000_000  # ns
S = 1_000_000_000


def row(**fields: Any) -> tuple[Any, ...]:
    """A step record in STEP_COLUMNS order; unset columns are None (not measured)."""
    base: dict[str, Any] = {"rank": 0, "step": 0, "start_unix_ns": 0, "tags": ""}
    base.update(fields)
    unknown = set(base) - set(STEP_COLUMNS)
    assert not unknown, unknown
    return tuple(base.get(c) for c in STEP_COLUMNS)


@pytest.fixture
def exporter_cls() -> Any:
    pytest.importorskip("prometheus_client")
    from stepscope.monitor.prometheus import PromExporter

    return PromExporter


@pytest.fixture
def exporter(exporter_cls: Any) -> Iterator[Any]:
    exp = exporter_cls(port=0, rank=2, job="llama-test")
    yield exp
    exp.close()


def scrape(port: int) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """/metrics parsed: (sample name, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def lab(**labels: str) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def test_metrics_hand_computed(exporter: Any) -> None:
    exporter.observe_steps(
        [
            row(step=1, dur_ns=200 * MS, data_ns=10 * MS, forward_ns=50 * MS, backward_ns=100 * MS,
                optimizer_ns=20 * MS, gc_ns=2 * MS, gc_count=1, tokens=4096, peak_mem_bytes=1_000_000_000),
            row(step=2, dur_ns=300 * MS, data_ns=30 * MS, forward_ns=60 * MS, backward_ns=150 * MS,
                optimizer_ns=20 * MS, comm_ns=40 * MS, gc_ns=0, gc_count=0, tokens=4096, peak_mem_bytes=2_000_000_000),
        ]
    )  # fmt: skip
    exporter.observe_steps(
        [
            row(step=3, dur_ns=1500 * MS, gc_ns=30 * MS, gc_count=2, tokens=4096),  # level 0: no phases
            row(step=4, dur_ns=100 * S, tags="eval,checkpoint", tokens=1000),  # tagged: counted, not timed
        ]
    )
    exporter.observe_anomaly("slow_step", "rank")
    exporter.observe_anomaly("slow_step", "rank")
    exporter.observe_anomaly("straggler", "job")
    exporter.observe_capture("anomaly")
    exporter.set_drops(7)
    m = scrape(exporter.port)
    r2 = lab(rank="2")

    assert m[("stepscope_step_duration_seconds_count", r2)] == 3  # the eval step is left out
    assert m[("stepscope_step_duration_seconds_sum", r2)] == pytest.approx(2.0)
    buckets = {
        le: m[("stepscope_step_duration_seconds_bucket", lab(rank="2", le=le))]
        for le in ("0.1", "0.25", "0.5", "1.0", "2.5", "600.0", "+Inf")
    }
    assert buckets == {"0.1": 0, "0.25": 1, "0.5": 2, "1.0": 2, "2.5": 3, "600.0": 3, "+Inf": 3}

    def phase(p: str, suffix: str) -> float:
        return m[(f"stepscope_step_phase_duration_seconds_{suffix}", lab(rank="2", phase=p))]

    assert {p: phase(p, "count") for p in ("data", "forward", "backward", "optimizer", "comm")} == {
        "data": 2, "forward": 2, "backward": 2, "optimizer": 2, "comm": 1,
    }  # fmt: skip
    assert phase("data", "sum") == pytest.approx(0.04)
    assert phase("backward", "sum") == pytest.approx(0.25)
    assert phase("comm", "sum") == pytest.approx(0.04)
    assert m[("stepscope_step_phase_duration_seconds_bucket", lab(rank="2", phase="forward", le="0.05"))] == 1

    # GC: steps 1 (2 ms) and 3 (30 ms); step 2 had no collection
    assert m[("stepscope_gc_pause_seconds_count", r2)] == 2
    assert m[("stepscope_gc_pause_seconds_sum", r2)] == pytest.approx(0.032)
    assert m[("stepscope_gc_pause_seconds_bucket", lab(rank="2", le="0.0025"))] == 1
    assert m[("stepscope_gc_pause_seconds_bucket", lab(rank="2", le="0.05"))] == 2
    assert m[("stepscope_gc_pause_seconds_bucket", lab(rank="2", le="0.0001"))] == 0

    assert m[("stepscope_steps_total", r2)] == 4
    assert m[("stepscope_tokens_total", r2)] == 3 * 4096 + 1000
    assert m[("stepscope_peak_memory_bytes", r2)] == 2_000_000_000  # the latest step that measured it
    assert m[("stepscope_anomaly_events_total", lab(rank="2", kind="slow_step", scope="rank"))] == 2
    assert m[("stepscope_anomaly_events_total", lab(rank="2", kind="straggler", scope="job"))] == 1
    assert m[("stepscope_profile_captures_total", lab(rank="2", trigger="anomaly"))] == 1
    assert m[("stepscope_dropped_records", r2)] == 7
    assert m[("stepscope_build_info", lab(version=__version__, job_name="llama-test"))] == 1

    names = {name for name, _ in m}
    assert not any(n.startswith("python_") or n.startswith("process_") for n in names)  # private registry
    for name, labels in m:
        keys = {k for k, _ in labels}
        assert "step" not in keys, name
        assert keys <= {"rank", "phase", "kind", "scope", "trigger", "le", "version", "job_name"}, (name, keys)


def test_series_appear_only_when_measured(exporter: Any) -> None:
    """A job at level 0 without tokens or CUDA has no phase, token, GC or memory series (not zeros)."""
    exporter.observe_steps([row(step=1, dur_ns=10 * MS, gc_ns=0, gc_count=0)])
    names = {name for name, _ in scrape(exporter.port)}
    assert "stepscope_steps_total" in names
    assert "stepscope_step_duration_seconds_count" in names
    assert "stepscope_dropped_records" in names
    for absent in (
        "stepscope_step_phase_duration_seconds_count",
        "stepscope_tokens_total",
        "stepscope_peak_memory_bytes",
        "stepscope_gc_pause_seconds_count",
        "stepscope_anomaly_events_total",
    ):
        assert absent not in names


def non_loopback_ipv4() -> str | None:
    """This machine's address on its default route (no packet is sent), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))
            addr = str(s.getsockname()[0])
        except OSError:
            return None
    return None if addr.startswith("127.") or addr == "0.0.0.0" else addr


def test_binds_loopback_only(exporter: Any) -> None:
    assert exporter.host == "127.0.0.1"
    with socket.create_connection(("127.0.0.1", exporter.port), timeout=5):
        pass
    addr = non_loopback_ipv4()
    if addr is not None:
        with pytest.raises(OSError):  # refused: nothing listens on the machine's other address
            socket.create_connection((addr, exporter.port), timeout=5).close()


def test_two_exporters_do_not_clash(exporter_cls: Any) -> None:
    with exporter_cls(port=0, rank=0) as a, exporter_cls(port=0, rank=1) as b:
        assert a.port != b.port
        a.observe_steps([row(dur_ns=S)])
        b.observe_steps([row(dur_ns=S), row(dur_ns=S)])
        ma, mb = scrape(a.port), scrape(b.port)
    assert ma[("stepscope_steps_total", lab(rank="0"))] == 1
    assert mb[("stepscope_steps_total", lab(rank="1"))] == 2
    assert not any(dict(labels).get("rank") == "1" for _, labels in ma)


def test_port_in_use_is_a_config_error(exporter_cls: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ConfigError) as e:
            exporter_cls(port=port, rank=0)
    text = str(e.value)
    assert f"127.0.0.1:{port}" in text
    assert "choose another prometheus_port or 0" in text
    assert "\n" not in text


def test_close_releases_the_port(exporter_cls: Any) -> None:
    exp = exporter_cls(port=0, rank=0)
    port = exp.port
    exp.close()
    exp.close()  # idempotent
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    again = exporter_cls(port=port, rank=0)
    try:
        assert again.port == port
    finally:
        again.close()


def test_module_imports_without_prometheus_client() -> None:
    """The module imports without the extra; constructing the exporter says how to install it."""
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from stepscope.errors import ConfigError\n"
        "from stepscope.monitor.prometheus import PromExporter\n"
        "try:\n    PromExporter(port=0, rank=0)\n"
        "except ConfigError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert "pip install 'stepscope[prometheus]'" in out.stdout


# --- a real Prometheus server -----------------------------------------------------------------------


def get_json(url: str) -> Any:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return json.loads(r.read().decode())
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError):
        return None  # not up yet


@pytest.mark.slow
def test_real_prometheus_scrapes_the_exporter(exporter_cls: Any, tmp_path: Path) -> None:
    exe = shutil.which("prometheus")
    if exe is None:
        if in_ci():
            pytest.fail("the prometheus binary is missing in CI (apt-get install prometheus)")
        pytest.skip("prometheus not installed")
    with exporter_cls(port=0, rank=3, job="itest") as exp:
        exp.observe_steps([row(rank=3, step=i, dur_ns=100 * MS) for i in range(5)])
        cfg = tmp_path / "prometheus.yml"
        cfg.write_text(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n"
            "  - job_name: stepscope\n"
            "    scrape_interval: 1s\n"
            f"    static_configs:\n      - targets: ['127.0.0.1:{exp.port}']\n"
        )
        web = free_port()
        api = f"http://127.0.0.1:{web}/api/v1"
        log = tmp_path / "prometheus.log"
        with log.open("wb") as logf:
            proc = subprocess.Popen(
                [exe, f"--config.file={cfg}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{web}"],
                stdout=logf, stderr=subprocess.STDOUT, cwd=tmp_path,
            )  # fmt: skip
        try:

            def steps_total() -> tuple[float | None, Any]:
                q = get_json(f"{api}/query?" + urllib.parse.urlencode({"query": "stepscope_steps_total"}))
                res = (q or {}).get("data", {}).get("result", [])
                if len(res) != 1:
                    return None, q
                return float(res[0]["value"][1]), res[0]["metric"]

            def wait_for(expected: float) -> dict[str, str]:
                deadline = time.monotonic() + 60  # a hang guard, not a timing assertion
                last: Any = None
                while time.monotonic() < deadline:
                    assert proc.poll() is None, f"prometheus exited {proc.returncode}:\n{log.read_text()[-3000:]}"
                    value, last = steps_total()
                    if value == expected:
                        return dict(last)
                    time.sleep(0.5)
                pytest.fail(f"prometheus never saw stepscope_steps_total == {expected}; last: {last}")

            metric = wait_for(5)
            assert metric == {
                "__name__": "stepscope_steps_total",
                "instance": f"127.0.0.1:{exp.port}",
                "job": "stepscope",
                "rank": "3",
            }
            exp.observe_steps([row(rank=3, step=5, dur_ns=100 * MS), row(rank=3, step=6, dur_ns=100 * MS)])
            wait_for(7)  # live: the next scrapes see the new steps

            targets = get_json(f"{api}/targets")
            active = targets["data"]["activeTargets"]
            assert [(t["scrapeUrl"], t["health"]) for t in active] == [(f"http://127.0.0.1:{exp.port}/metrics", "up")]
            info = get_json(f"{api}/query?" + urllib.parse.urlencode({"query": "stepscope_build_info"}))
            [series] = info["data"]["result"]
            assert series["metric"]["version"] == __version__
            assert series["metric"]["job_name"] == "itest"
            hist = get_json(
                f"{api}/query?" + urllib.parse.urlencode({"query": "stepscope_step_duration_seconds_count"})
            )
            assert [float(s["value"][1]) for s in hist["data"]["result"]] == [7]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
