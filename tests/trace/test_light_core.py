"""The core (ingest, analyze, report) imports and runs without torch or jax."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "a100_nccl_rank0.json.gz"


def test_core_never_imports_torch_or_jax(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from stepscope.cli import main\n"
        f"rc = main(['analyze', {str(EXAMPLE)!r}, '--json', {str(tmp_path / 'r.json')!r}, '--html', {str(tmp_path / 'r.html')!r}, '-q'])\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'jax', 'jaxlib', 'tensorflow'))\n"
        "print(rc, heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "0 []"
