"""Output piped to a reader that stops early (``| head``): no traceback, exit 141 (128 + SIGPIPE).

Each command runs in a subprocess whose standard output is a pipe with no reader left: every
write to it fails with EPIPE, which Python raises as BrokenPipeError.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HLO = """HloModule m, entry_computation_layout={(f32[8,128]{1,0}, f32[128,256]{1,0})->f32[8,256]{1,0}}

ENTRY %main (p0: f32[8,128], p1: f32[128,256]) -> f32[8,256] {
  %p0 = f32[8,128]{1,0} parameter(0)
  %p1 = f32[128,256]{1,0} parameter(1)
  ROOT %dot.1 = f32[8,256]{1,0} dot(f32[8,128]{1,0} %p0, f32[128,256]{1,0} %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
"""


def _run_into_closed_pipe(args: list[str]) -> subprocess.CompletedProcess[bytes]:
    script = (
        "import os, sys\n"
        "r, w = os.pipe()\n"
        "os.close(r)\n"
        "os.dup2(w, sys.stdout.fileno())\n"
        "from stepscope.cli import main\n"
        f"sys.exit(main({args!r}))\n"
    )
    return subprocess.run([sys.executable, "-c", script], capture_output=True, timeout=600)


def test_hlo_json_into_closed_pipe_exits_141_quietly(tmp_path: Path) -> None:
    hlo = tmp_path / "m.hlo.txt"
    hlo.write_text(HLO)
    r = _run_into_closed_pipe(["hlo", str(hlo), "--json"])
    assert r.stderr == b"", r.stderr.decode()
    assert r.returncode == 141


def test_plan_report_into_closed_pipe_exits_141_quietly() -> None:
    r = _run_into_closed_pipe(
        [
            "plan",
            "--model",
            "llama3-8b",
            "--hardware",
            "h100",
            "--devices",
            "8",
            "--global-batch",
            "64",
            "--seq-len",
            "2048",
        ]
    )
    assert b"Traceback" not in r.stderr, r.stderr.decode()
    assert r.stderr == b"", r.stderr.decode()
    # rich's Console ends a broken pipe itself (stdout to devnull, SystemExit(1)); plain prints give 141
    assert r.returncode in (1, 141)


def test_shell_pipe_to_head_prints_no_traceback(tmp_path: Path) -> None:
    """``stepscope hlo FILE --json | head -c 10``: head reads 10 bytes and leaves."""
    hlo = tmp_path / "m.hlo.txt"
    hlo.write_text(HLO)
    cmd = f"{sys.executable} -c 'import sys; from stepscope.cli import main; sys.exit(main())' hlo {hlo} --json"
    r = subprocess.run(["sh", "-c", f"{cmd} | head -c 10"], capture_output=True, timeout=600)
    assert b"Traceback" not in r.stderr, r.stderr.decode()
    assert len(r.stdout) == 10
