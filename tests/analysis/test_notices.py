"""``Analysis.notices`` are data (rank, file, text); ``Analysis.warnings`` is their collapsed text."""

from __future__ import annotations

from pathlib import Path

from stepscope.analysis.api import analyze
from stepscope.notices import Notice
from tests import synth


def test_analysis_notices_are_data_and_warnings_their_text(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    synth.write(run / "rank0.json", synth.basic_events(), rank=0)
    (run / "config.json").write_text('{"hidden_size": 4096}', encoding="utf-8")
    a = analyze([str(run)], workers=1)
    cfg = str(run / "config.json")
    assert a.notices[0] == Notice("not a Chrome trace (no traceEvents near its start); skipped", path=cfg)
    assert a.warnings[0] == f"{cfg}: not a Chrome trace (no traceEvents near its start); skipped"
    assert len(a.warnings) == len(a.notices)  # one rank: nothing to collapse
