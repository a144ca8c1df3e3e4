"""The ``stepscope`` command's entry point: the same report as ``cli.main``, without importing
pandas (pyarrow would import it only to probe its inputs); library use still converts to pandas."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

TRACE = Path(__file__).resolve().parents[1] / "examples" / "traces" / "a100_nccl_rank0.json.gz"


def _run(code: str) -> str:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    return r.stdout


def test_the_command_does_not_import_pandas_and_reports_the_same(tmp_path: Path) -> None:
    pytest.importorskip("pandas")  # without pandas installed there is nothing to avoid
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    argv = ["stepscope", "analyze", str(TRACE), "-q", "--workers", "1", "--json", str(a)]
    out = _run(
        f"import sys; sys.argv = {argv!r}\nfrom stepscope.console import main\nrc = main()\nprint(rc, 'pandas' in sys.modules)"
    )
    assert out.split() == ["0", "False"]
    _run(
        f"from stepscope.cli import main; main(['analyze', {str(TRACE)!r}, '-q', '--workers', '1', '--json', {str(b)!r}])"
    )
    assert json.loads(a.read_text())["ranks"] == json.loads(b.read_text())["ranks"]


def test_cli_main_leaves_pandas_alone(tmp_path: Path) -> None:
    """``cli.main`` (the library's and the tests' way in) installs no hook: pandas still imports."""
    pytest.importorskip("pandas")
    args = ["analyze", str(TRACE), "-q", "--workers", "1", "--json", str(tmp_path / "c.json")]
    out = _run(f"from stepscope.cli import main\nmain({args!r})\nimport pandas\nprint(pandas.DataFrame.__name__)")
    assert out.strip() == "DataFrame"
