"""An empty argument (a shell variable that was not set) is a usage error, never standard output,
the current directory or an empty name."""

from __future__ import annotations

import pytest

from stepscope.cli import main

A = "examples/traces/a100_nccl_rank0.json.gz"


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["analyze", A, "--json", "", "-q"], "--json"),
        (["analyze", A, "-o", ""], "--output"),
        (["analyze", ""], "traces"),
        (["analyze", A, "", "-q"], "traces"),
        (["convert", A, "-o", ""], "--out-dir"),
        (["plan", "--model", ""], "--model"),
    ],
)
def test_an_empty_value_is_one_usage_line(
    args: list[str], named: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(__file__.rsplit("/tests/", 1)[0])
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"an empty value for {named}" in err[0]
