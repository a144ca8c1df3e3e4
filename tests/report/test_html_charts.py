"""The HTML report's charts in headless Chromium: the timeline, the rank x step heatmap and the
roofline draw, a hover shows a kernel's full name, no script error; the file stays offline and
under 3 MB; trace strings cannot escape the chart data."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import stepscope
from stepscope.analysis.api import analyze
from stepscope.analysis.config import AnalyzeConfig
from stepscope.cli import main
from stepscope.report import html_report

from .. import synth

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/traces/a100_nccl_rank0.json.gz"
QWEN = ROOT / "tests/fixtures/traces/TraceLens/tests/traces/h100/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
EVIL = "</script><script>alert(1)</script>"


def test_timeline_data_by_hand(tmp_path: Path) -> None:
    """One step: a GEMM [100, 300) us on stream 7 and an all-reduce [250, 450) us on stream 20;
    the window runs from the first start (100) to the last end (450): idle nowhere in between."""
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch("sm90_xmma_gemm_bf16bf16_bf16f32", 10, 100, 200, stream=7)
    ev += synth.launch("ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 20, 250, 200, stream=20)
    t = analyze(stepscope.load(synth.write(tmp_path / "t.json", ev))).ranks[0].extras["timeline"]
    assert t.window_ns == 350_000 and t.start_ns == (0, 150_000) and t.dur_ns == (200_000, 200_000)
    assert t.streams == (7, 20) and t.group == ("compute", "comm") and t.idle_start_ns == ()


def test_trace_strings_stay_inside_the_chart_data(tmp_path: Path) -> None:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch(EVIL, 10, 100, 200, stream=7)
    html = html_report.render(analyze(stepscope.load(synth.write(tmp_path / "t.json", ev))), {})
    assert EVIL not in html and "\\u003c/script\\u003e\\u003cscript\\u003ealert(1)" in html


def test_the_bundled_traces_make_files_under_3_mb(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["analyze", str(EXAMPLE), str(QWEN), "-o", str(out), "-q"]) == 0
    assert out.stat().st_size < 3_000_000
    text = out.read_text()
    assert not re.search(r"""(src=['"]?|url\()\s*(https?:)?//""", text)  # loads nothing from the network
    assert "default-src 'none'" in text  # and the browser would refuse to


def _tooltip(page: Any, chart_id: str, index: int) -> str:
    """Hover the ``index``-th item of the chart (ECharts' showTip, as a mouse hover does) and read
    the tooltip."""
    page.evaluate(
        "([id, i]) => echarts.getInstanceByDom(document.getElementById(id))"
        ".dispatchAction({type: 'showTip', seriesIndex: 0, dataIndex: i})",
        [chart_id, index],
    )
    page.wait_for_timeout(200)
    return page.evaluate(
        "() => Array.from(document.querySelectorAll('div')).filter(d => d.style.zIndex === '9999999' "
        "|| (d.getAttribute('style') || '').includes('pointer-events: none')).map(d => d.innerText).join('\\n')"
    )


@pytest.mark.browser
def test_charts_draw_and_hover_shows_the_full_name(tmp_path: Path, browser_page: tuple[Any, list[str]]) -> None:
    page, errors = browser_page
    out = tmp_path / "r.html"
    js = tmp_path / "r.json"
    assert (
        main(["analyze", str(EXAMPLE), str(QWEN), "--hardware", "H100-SXM", "-o", str(out), "--json", str(js), "-q"])
        == 0
    )
    doc = json.loads(js.read_text())
    page.goto(out.as_uri())
    page.wait_for_timeout(500)
    for ident in ("heatmap", "timeline-0", "timeline-1", "roofline-1"):
        assert page.locator(f"#{ident}[data-drawn='1'] canvas").count() >= 1, ident
    tl = doc["ranks"][0]["extras"]["timeline"]
    first = tl["names"][tl["name"][0]]
    assert first in _tooltip(page, "timeline-0", 0)
    assert errors == []


@pytest.mark.browser
def test_tables_sort_on_a_header_click(tmp_path: Path, browser_page: tuple[Any, list[str]]) -> None:
    page, errors = browser_page
    out = tmp_path / "r.html"
    out.write_text(html_report.render(analyze(stepscope.load(str(EXAMPLE)), AnalyzeConfig()), {}))
    page.goto(out.as_uri())
    table = page.locator("section.rank table").first
    col = 1  # step ms
    table.locator("tr").first.locator("th").nth(col).click()
    values = [float(v.replace(",", "")) for v in table.locator(f"tr td:nth-child({col + 1})").all_inner_texts()]
    assert values == sorted(values)
    table.locator("tr").first.locator("th").nth(col).click()
    values = [float(v.replace(",", "")) for v in table.locator(f"tr td:nth-child({col + 1})").all_inner_texts()]
    assert values == sorted(values, reverse=True)
    assert errors == []
