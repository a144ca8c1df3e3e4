"""Renderers: the JSON contract, HTML escaping, and the HTML in a real headless browser."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from stepscope.cli import main

from .. import synth

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "a100_nccl_rank0.json.gz"
STEP_KEYS = {
    "name",
    "step_time_ns",
    "window_start_ns",
    "window_end_ns",
    "compute_ns",
    "comm_ns",
    "overlapped_comm_ns",
    "exposed_comm_ns",
    "exposed_memcpy_ns",
    "idle_ns",
    "by_category_ns",
    "cpu_step_ns",
}


def test_json_contract(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["analyze", str(EXAMPLE), "--json", str(out), "-q"]) == 0
    doc = json.loads(out.read_text())
    assert doc["schema_version"] == "2.1" and isinstance(doc["warnings"], list)
    # the quick-start trace is host-bound (most of its idle ends with a launch made after the gap
    # began): the advisor's first finding says so, with the fields of docs/json-schema.md
    first = doc["findings"][0]
    assert first["id"] == "cpu.host_bound" and first["category"] == "cpu" and first["ranks"] == [0]
    assert {"low", "mid", "high"} == set(first["saving_ns"]) and first["saving_method"] == "measured"
    assert first["saving_ns"]["mid"] > 0 and first["actions"] and first["evidence"]["idle_host_bound_ns"] > 0
    (r,) = doc["ranks"]
    assert r["rank"] == 0 and r["device"] == "NVIDIA A100-PG509-200"
    assert len(r["steps"]) == 3
    for s in r["steps"]:
        assert STEP_KEYS <= set(s)
        assert all(isinstance(s[k], int) for k in STEP_KEYS - {"name", "by_category_ns"})
        assert s["step_time_ns"] == s["window_end_ns"] - s["window_start_ns"]
        assert s["compute_ns"] + s["exposed_comm_ns"] + s["exposed_memcpy_ns"] + s["idle_ns"] == s["step_time_ns"]


EVIL = "<script>alert('x')</script><img src=x onerror=alert(1)>"


def _evil_trace(tmp_path: Path) -> Path:
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch(EVIL, 10, 100, 200)
    ev += synth.launch("ncclDevKernel_AllReduce_Sum", 20, 250, 200, stream=20)
    return synth.write(tmp_path / "evil.json", ev)


def test_html_escapes_trace_strings(tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    assert main(["analyze", str(_evil_trace(tmp_path)), "--html", str(out), "-q"]) == 0
    text = out.read_text()
    assert EVIL not in text and "<img src=x" not in text
    assert text.count("<script>") == 2  # the report's own: the charting library and the drawing script
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in text
    assert not re.search(r"""(src=['"]?|url\()\s*(https?:)?//""", text)  # nothing fetched from a network


@pytest.mark.browser
def test_html_renders_in_headless_chromium(tmp_path: Path, browser_page: tuple[Any, list[str]]) -> None:
    page, errors = browser_page
    out = tmp_path / "r.html"
    js = tmp_path / "r.json"
    assert main(["analyze", str(EXAMPLE), str(_evil_trace(tmp_path)), "--html", str(out), "--json", str(js), "-q"]) == 0
    doc = json.loads(js.read_text())
    med_ms = doc["ranks"][0]["step_stats"]["median_ns"] / 1e6
    page.goto(out.as_uri())
    assert page.title() == "stepscope report"
    assert page.locator("section.rank").count() == 2
    assert page.locator("#ranks tr").count() == 3  # header + 2 ranks
    assert page.locator("#rank-0 .median-step").inner_text() == f"{med_ms:,.2f} ms"
    assert page.locator("#rank-0 svg rect").count() > 5
    assert EVIL in page.locator("#rank-1").inner_text()  # shown as text, not executed
    assert page.locator("#cluster").count() == 1  # 2 ranks: the cluster section
    page.screenshot(path=str(tmp_path / "report.png"), full_page=False)
    assert errors == []


def test_html_details_only_slowest_ranks_when_many(tmp_path: Path) -> None:
    d = tmp_path / "many"
    d.mkdir()
    for r in range(10):
        ev = [synth.step("ProfilerStep#1", 0, 5000)]
        ev += synth.launch("gemm", 10, 100, 100 + 10 * r)  # rank r's step: (100 + 10 r) us
        synth.write(d / f"rank{r}.json", ev, rank=r)
    out = tmp_path / "r.html"
    assert main(["analyze", str(d), "--html", str(out), "-q"]) == 0
    text = out.read_text()
    assert text.count("<section class='rank'") == 8
    assert "id='rank-9'" in text and "id='rank-2'" in text and "id='rank-1'" not in text and "id='rank-0'" not in text
    assert text.count("<tr><td>") >= 10  # every rank is still in the rank table


def test_roofline_png(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from ..analysis.test_roofline import _mm_trace

    out = tmp_path / "roof.png"
    assert main(["analyze", str(_mm_trace(tmp_path)), "--roofline-png", str(out), "-q"]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    # a trace whose device is unknown has no roofline to draw: one clear error
    (tmp_path / "x").mkdir()
    bad = _mm_trace(tmp_path / "x", device="Mystery Accelerator")
    assert main(["analyze", str(bad), "--roofline-png", str(tmp_path / "no.png"), "-q"]) == 2


def test_json_to_standard_output_is_the_file_and_warnings_go_to_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--json -`` prints the report alone on stdout (a pipe into jq works): the same document as
    the file, no terminal report, the warnings on stderr; two outputs on stdout are refused."""
    import gzip

    out = tmp_path / "r.json"
    assert main(["analyze", str(EXAMPLE), "--json", str(out), "-q"]) == 0
    capsys.readouterr()
    assert main(["analyze", str(EXAMPLE), "--json", "-"]) == 0
    std = capsys.readouterr()
    assert json.loads(std.out) == json.loads(out.read_text(encoding="utf-8"))
    cut = tmp_path / "cut.json"
    cut.write_bytes(gzip.decompress(EXAMPLE.read_bytes())[:3_000_000])  # truncated: a warning
    assert main(["analyze", str(cut), "--json", "-"]) == 0
    std = capsys.readouterr()
    assert json.loads(std.out)["schema_version"] and "truncated" in std.err  # stdout is the JSON alone
    assert main(["analyze", str(EXAMPLE), "--json", "-", "--html", "-"]) == 2
    assert "only one output can go to standard output" in capsys.readouterr().err


def test_analyze_takes_the_same_hardware_aliases_as_plan(tmp_path: Path) -> None:
    """`analyze --hardware a100-40gb` names the catalog's A100-SXM-40GB, as `plan --hardware` does."""
    out = tmp_path / "r.json"
    assert main(["analyze", str(EXAMPLE), "--hardware", "a100-40gb", "--json", str(out), "-q"]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["ranks"][0]["hardware"]["name"] == "A100-SXM-40GB"


def test_terminal_prints_trace_strings_as_they_are(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Kernel names that look like rich markup are printed, not taken as tags ([/x] closed nothing
    and stopped the report)."""
    ev = [synth.step("ProfilerStep#1", 0, 1000)]
    ev += synth.launch("gemm[red]k[/]", 10, 100, 200)
    ev += synth.launch("elementwise[/oops]", 20, 300, 100)
    assert main(["analyze", str(synth.write(tmp_path / "t.json", ev))]) == 0
    out = capsys.readouterr().out
    assert "gemm[red]k[/]" in out and "elementwise[/oops]" in out
