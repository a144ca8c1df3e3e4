"""The monitor report's HTML page: built from a hand-made run (2 ranks x 60 steps, rank 1 a
straggler from step 40), run strings escaped in the page and in the chart data, the anomaly
listed and shaded, long series thinned, the CLI writes it, and it draws in headless Chromium."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from stepscope.cli import main
from stepscope.monitor.detect.series import PHASE_COLUMNS, RankSeries
from stepscope.monitor.record import STEP_COLUMNS
from stepscope.monitor.sinks import open_sink
from stepscope.monitor.summary import MonitorReport, report
from stepscope.report import charts_html, monitor_html
from stepscope.report.registry import by_name, for_path

EVIL = "</script><img src=x onerror=alert(1)>"
MS = 1_000_000


def _row(rank: int, step: int) -> tuple[object, ...]:
    """A 100 ms step (+ a little jitter) with 30 ms in collectives; from step 40 rank 1 waits 2 ms
    (its own time 98 ms: the straggler) and rank 0 waits 58 ms for it."""
    dur = 100 * MS + (step % 7) * 300_000
    comm = 30 * MS if step < 40 else (2 * MS if rank == 1 else 58 * MS)
    rec = {
        "rank": rank,
        "step": step,
        "start_unix_ns": step * dur,
        "dur_ns": dur,
        "data_ns": 5 * MS,
        "forward_ns": 20 * MS,
        "backward_ns": 40 * MS,
        "optimizer_ns": 5 * MS,
        "comm_ns": comm,
        "comm_calls": 3,
        "gc_ns": 0,
        "gc_count": 0,
        "tokens": 4096,
        "peak_mem_bytes": None,
        "tags": EVIL if step == 5 else "",
    }
    return tuple(rec[c] for c in STEP_COLUMNS)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    d = tmp_path / "run"
    d.mkdir()
    for r in range(2):
        sink = open_sink("sqlite", d, r)
        sink.write(steps=[_row(r, s) for s in range(60)], meta={"rank": r, "world_size": 2, "level": 2})
        sink.close()
    cap = d / "captures" / "c1"
    cap.mkdir(parents=True)
    plan = {"id": "c1" + EVIL, "start_step": 45, "steps": 3, "ranks": [0, 1], "reason": EVIL}
    (cap / "plan.json").write_text(json.dumps(plan), encoding="utf-8")
    (cap / "findings.txt").write_text("findings\n", encoding="utf-8")
    return d


@pytest.fixture
def rep(run_dir: Path) -> MonitorReport:
    return report(run_dir)


def _payloads(html: str, kind: str) -> dict[str, Any]:
    pat = rf"<script type='application/json' data-chart='{kind}' data-target='([^']+)'>(.*?)</script>"
    return {m.group(1): json.loads(m.group(2)) for m in re.finditer(pat, html)}


def test_the_renderer_is_registered() -> None:
    assert by_name("monitor", "html") is monitor_html.RENDERER
    assert for_path("monitor", "out.html") is monitor_html.RENDERER


def test_run_strings_are_escaped_in_the_page_and_the_chart_data(rep: MonitorReport) -> None:
    a = dataclasses.replace(rep.anomalies[0], message="slow " + EVIL, cause=EVIL)
    html = monitor_html.render(dataclasses.replace(rep, anomalies=(a,)), {})
    html = html.replace(charts_html._echarts(), "")  # the library itself holds an "<img"
    assert EVIL not in html and "<img" not in html
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in html  # the capture's reason and the message
    assert "\\u003c/script\\u003e\\u003cimg src=x onerror=alert(1)\\u003e" in html  # inside the chart data
    marks = _payloads(html, "monitor-lines")["step-time"]["marks"]
    assert marks[0][3].endswith("slow " + EVIL)  # the data still reads as written
    assert html.count("</script>") == html.count("<script")


def test_the_anomaly_is_listed_and_shaded(rep: MonitorReport) -> None:
    assert [(a.kind, a.rank, a.first_step) for a in rep.anomalies] == [("straggler", 1, 40)]
    html = monitor_html.render(rep, {})
    table = html.split("<table id='anomalies'>")[1].split("</table>")[0]
    assert "straggler" in table and "40-59" in table and "backward" in table
    assert "rank 1&#x27;s own time" in table
    lines = _payloads(html, "monitor-lines")
    assert set(lines) == {"step-time", "own-time"}
    for p in lines.values():
        assert [s["name"] for s in p["series"]] == ["rank 0", "rank 1"]
        assert p["marks"][0][:3] == [39.5, 59.5, "straggler, rank 1"]
    own = dict(lines["own-time"]["series"][1]["data"])
    assert own[45] == pytest.approx(98, abs=2) and own[20] == pytest.approx(70, abs=2)
    heat = _payloads(html, "heatmap")["own-heatmap"]
    assert heat["ranks"] == ["rank 0", "rank 1"] and len(heat["cells"]) == 2 * len(heat["steps"])
    assert "downsampled" not in html


def test_the_header_tables_and_capture_links(rep: MonitorReport, run_dir: Path) -> None:
    html = monitor_html.render(rep, {"output_dir": str(run_dir)})
    assert f"<code class='run-dir'>{run_dir}</code>" in html
    assert "steps recorded<b>120</b>" in html and "2 / 2" in html and "kpi bad'>dropped" not in html
    ranks = html.split("<table id='ranks'>")[1].split("</table>")[0]
    assert ranks.count("<tr>") == 3 and "<td>100.900</td>" in ranks
    assert "href='captures/c1/findings.txt'" in html and "45-47" in html
    dropped = monitor_html.render(dataclasses.replace(rep, dropped_records=7), {})
    assert "kpi bad'>dropped records<b>7</b>" in dropped


def test_long_series_are_thinned_and_the_page_says_so(rep: MonitorReport) -> None:
    n = 5000
    step = np.arange(n, dtype=np.int64)
    dur = np.full(n, 100.0 * MS)
    phases = {c: np.full(n, np.nan) for c in PHASE_COLUMNS}
    series = tuple(
        RankSeries(
            rank=r, step=step, dur_ns=dur, own_ns=dur, gc_ns=dur * 0, phases=phases, excluded=0, warmup=0, tagged={}
        )
        for r in range(2)
    )
    html = monitor_html.render(dataclasses.replace(rep, series=series), {})
    for p in _payloads(html, "monitor-lines").values():
        assert all(len(s["data"]) <= 2000 for s in p["series"])
        assert p["series"][0]["data"][1][0] == 3  # every 3rd step
    assert "One step in 3 drawn (at most 2,000 points per rank)" in html
    assert len(_payloads(html, "heatmap")["own-heatmap"]["steps"]) <= 2000


def test_the_cli_writes_the_page(run_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, out2 = tmp_path / "m.html", tmp_path / "o.html"
    assert main(["monitor", "report", str(run_dir), "--html", str(out), "-o", str(out2)]) == 0
    assert "wrote HTML report" in capsys.readouterr().out
    for p in (out, out2):
        text = p.read_text(encoding="utf-8")
        assert text.startswith("<!DOCTYPE html>") and "default-src 'none'" in text
        assert not re.search(r"""(src=['"]?|url\()\s*(https?:)?//""", text)  # loads nothing from the network


@pytest.mark.browser
def test_the_page_draws_in_headless_chromium(
    rep: MonitorReport, tmp_path: Path, browser_page: tuple[Any, list[str]]
) -> None:
    page, errors = browser_page
    out = tmp_path / "m.html"
    out.write_text(monitor_html.render(rep, {}), encoding="utf-8")
    page.goto(out.as_uri())
    page.wait_for_timeout(500)
    for ident in ("step-time", "own-time", "own-heatmap"):
        assert page.locator(f"#{ident}[data-drawn='1'] canvas, #{ident}[data-drawn='1'] svg").count() >= 1, ident
    areas = page.evaluate(
        "() => echarts.getInstanceByDom(document.getElementById('own-time')).getOption()"
        ".series.map(s => (s.markArea && s.markArea.data || []).length)"
    )
    assert sum(areas) == 1
    page.locator("#own-time").scroll_into_view_if_needed()
    x, y = page.evaluate(  # inside the shaded steps, between the two lines
        "() => { var el = document.getElementById('own-time'), r = el.getBoundingClientRect();"
        " var p = echarts.getInstanceByDom(el).convertToPixel({gridIndex: 0}, [50, 70]);"
        " return [r.left + p[0], r.top + p[1]]; }"
    )
    page.mouse.move(x, y)
    page.wait_for_timeout(300)
    tips = page.evaluate(
        "() => Array.from(document.querySelectorAll('div'))"
        ".filter(d => (d.getAttribute('style') || '').includes('pointer-events: none')).map(d => d.innerText).join()"
    )
    assert "rank 1's own time is" in tips
    assert page.locator("#anomalies tr").count() == 2
    assert errors == []
