"""Markdown summary (`-o summary.md`): figures by hand from a synthetic trace, and trace strings
that cannot break the tables."""

from __future__ import annotations

from pathlib import Path

from stepscope.cli import main
from stepscope.report.markdown import code, text

from .. import synth

K1 = "gemm|`x`"  # a pipe would end the cell, a backtick the code span
K2 = "elementwise\nrow|2"  # a line break would end the row
K3 = "<b>relu*</b>"  # HTML, emphasis


def _trace(tmp_path: Path) -> Path:
    """Two steps (times in us). Step 1: K1 [100, 400), K2 [400, 500): window [100, 1100) (to step 2's
    first work) = 1000, compute 400, idle 600. Step 2: K1 [1100, 1300), K3 [1450, 1600): window
    [1100, 1600) = 500, compute 200 + 150 = 350, idle [1300, 1450) = 150. Totals: step 1500, compute
    750, idle 750; median step (1000 + 500) / 2 = 750."""
    ev = [synth.step("ProfilerStep#1", 0, 1000), synth.step("ProfilerStep#2", 1000, 1000)]
    ev += synth.launch(K1, 10, 100, 300)
    ev += synth.launch(K2, 20, 400, 100)
    ev += synth.launch(K1, 1010, 1100, 200)
    ev += synth.launch(K3, 1020, 1450, 150)
    return synth.write(tmp_path / "t.json", ev)


def test_markdown_summary_by_hand(tmp_path: Path) -> None:
    trace = _trace(tmp_path)
    out = tmp_path / "summary.md"
    assert main(["analyze", str(trace), "-q", "-o", str(out)]) == 0
    expected = f"""# stepscope: step breakdown

Inputs: `{trace}`

## Rank 0 (NVIDIA H100 80GB HBM3)

Median step 0.75 ms over 2 steps (steps from ProfilerStep).

Step breakdown (ms; compute + exposed comm + exposed memcpy + idle = step):

| step | step ms | compute | exposed comm | exposed memcpy | idle |
| --- | ---: | ---: | ---: | ---: | ---: |
| ProfilerStep#1 | 1.00 | 0.40 (40.0%) | 0.00 (0.0%) | 0.00 (0.0%) | 0.60 (60.0%) |
| ProfilerStep#2 | 0.50 | 0.35 (70.0%) | 0.00 (0.0%) | 0.00 (0.0%) | 0.15 (30.0%) |
| **all steps** | 1.50 | 0.75 (50.0%) | 0.00 (0.0%) | 0.00 (0.0%) | 0.75 (50.0%) |

Top kernels (of 2 steps):

| kernel | category | count | total ms | mean us | share of step |
| --- | --- | ---: | ---: | ---: | ---: |
| `` gemm\\|`x` `` | gemm | 2 | 0.50 | 250.0 | 33.3% |
| `<b>relu*</b>` | elementwise | 1 | 0.15 | 150.0 | 10.0% |
| `elementwise row\\|2` | elementwise | 1 | 0.10 | 100.0 | 6.7% |
"""
    assert out.read_text(encoding="utf-8") == expected


def test_escaped_strings_render_as_themselves() -> None:
    """Through a GFM table parser (markdown-it, a dependency of rich): each cell is the original
    string (line breaks as spaces), and no HTML from the string reaches the output."""
    from markdown_it import MarkdownIt

    names = [K1, K2, K3, "``a``", "a\\|b", "[x](http://e.com) *y* _z_ ~~w~~ &amp; $m$"]
    rows = "".join(f"| {code(n)} | {text(n)} |\n" for n in names)
    html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(f"| c | t |\n| --- | --- |\n{rows}")
    assert "<b>" not in html and "<a " not in html and "<em>" not in html and "<s>" not in html
    import html as h

    cells = [h.unescape(c.split("</td>")[0]) for c in html.split("<td>")[1:]]
    want = [n.replace("\n", " ") for n in names]
    assert [c.removeprefix("<code>").removesuffix("</code>") for c in cells[0::2]] == want
    assert cells[1::2] == want
