"""Every repository path written in README.md, BENCHMARKS.md and docs/*.md exists.

Paths are ``src/...``, ``tests/...``, ``benchmarks/...`` from the repository root, and the short
module forms ``analysis/...``, ``planner/...``, ``trace/...``, ``report/...``, ``catalog/...`` under
``src/stepscope/``. A ``::test`` suffix is dropped; globs (``*``) and placeholders (``<name>``) are not paths.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", ROOT / "BENCHMARKS.md", *(ROOT / "docs").glob("*.md")])
_PATH = re.compile(
    r"(?<![\w/.<-])((?:src|tests|benchmarks|analysis|planner|trace|report|catalog)/[\w./-]*[\w/])(?![\w*<])"
)
_SHORT = ("analysis/", "planner/", "trace/", "report/", "catalog/")


def _missing(doc: Path) -> list[str]:
    out = []
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        for m in _PATH.finditer(line):
            path = m.group(1).rstrip(".")
            candidates = [ROOT / path] + ([ROOT / "src" / "stepscope" / path] if path.startswith(_SHORT) else [])
            if not any(c.exists() for c in candidates):
                out.append(f"{doc.name}:{n}: {path}")
    return out


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: d.name)
def test_paths_written_in_the_docs_exist(doc: Path) -> None:
    assert _missing(doc) == []


def test_the_pattern_finds_short_and_full_paths() -> None:
    found = [
        m.group(1) for m in _PATH.finditer("see `analysis/xla/hlo_cost.py` and tests/trace/x.py::t, not a/trace/y")
    ]
    assert found == ["analysis/xla/hlo_cost.py", "tests/trace/x.py"]
