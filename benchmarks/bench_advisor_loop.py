"""The advisor's closed loop on real runs: profile a run with a known problem, take the advisor's
finding and its estimated saving, fix the problem, profile again, and compare the estimate with the
saving ``stepscope diff`` measures between the two runs (needs torch 2.13.0).

    python benchmarks/bench_advisor_loop.py [--workdir bench-advisor] [--steps 10] [--cases loader gc item straggler]

Per case (``scripts/advisor_cases.py``): the finding the problem should produce (none for ``item``:
on CPU an ``.item()`` waits for nothing), where it ranks among the findings, its estimated saving per
step (mid, and the low-high range), the measured saving (mean step of the broken run minus that of
the fixed run, all ranks' steady steps), and the estimate's error relative to the measurement.
One JSON line per case, then a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from stepscope.analysis.api import analyze  # noqa: E402
from stepscope.diff.compare import compare  # noqa: E402
from stepscope.diff.profile import from_analysis  # noqa: E402

EXPECTED = {
    "loader": "io.loader_in_process",
    "gc": "cpu.silent_host",
    "item": None,
    "tiny": "cpu.optimizer_per_tensor",
    "straggler": "straggler.compute",
}


def _run(case: str, variant: str, out: Path, steps: int, port: int) -> None:
    cmd = [sys.executable, str(ROOT / "scripts" / "advisor_cases.py"), case, variant, str(out), "--steps", str(steps)]
    subprocess.run([*cmd, "--port", str(port)], check=True, timeout=900, capture_output=True)


def one(case: str, workdir: Path, steps: int, port: int) -> dict[str, object]:
    broken, fixed = workdir / case / "broken", workdir / case / "fixed"
    _run(case, "broken", broken, steps, port)
    _run(case, "fixed", fixed, steps, port + 1)
    a, b = analyze([str(broken)], workers=1), analyze([str(fixed)], workers=1)
    d = compare(from_analysis(a, str(broken)), from_analysis(b, str(fixed)))
    measured = d.a_mean_ns - d.b_mean_ns
    want = EXPECTED[case]
    ids = [f.id for f in a.findings]
    f = next((x for x in a.findings if x.id == want), None)
    row: dict[str, object] = {
        "case": case,
        "expected": want,
        "findings": ids,
        "position": ids.index(want) + 1 if want in ids else None,
        "step_ms": round(d.a_mean_ns / 1e6, 2),
        "measured_saving_ms": round(measured / 1e6, 2),
        "verdict": d.verdict,
    }
    if f is not None:
        row.update(
            estimated_mid_ms=round(f.saving.mid_ns / 1e6, 2),
            estimated_range_ms=[round(f.saving.low_ns / 1e6, 2), round(f.saving.high_ns / 1e6, 2)],
            error_ratio=round((f.saving.mid_ns - measured) / measured, 3) if measured > 0 else None,
        )
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workdir", default="bench-advisor")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--cases", nargs="+", default=list(EXPECTED), choices=list(EXPECTED))
    p.add_argument("--port", type=int, default=29611)
    a = p.parse_args()
    rows = []
    for i, case in enumerate(a.cases):
        row = one(case, Path(a.workdir), a.steps, a.port + 10 * i)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print("\n| case | expected finding | position | estimated saving, mid (range) ms/step | measured ms/step | error |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        est = (
            f"{r['estimated_mid_ms']} ({r['estimated_range_ms'][0]}-{r['estimated_range_ms'][1]})"
            if "estimated_mid_ms" in r
            else "none"
        )  # type: ignore[index]
        err = f"{r['error_ratio']:+.0%}" if r.get("error_ratio") is not None else "-"
        print(
            f"| {r['case']} | {r['expected'] or 'none'} | {r['position'] or '-'} | {est} | {r['measured_saving_ms']} | {err} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
