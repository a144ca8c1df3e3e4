"""plan --where: constraints on the search, checked against the unconstrained search's rows."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stepscope.cli import main
from stepscope.errors import ConfigError
from stepscope.planner.job import make_job
from stepscope.planner.recompute import RECOMPUTE
from stepscope.planner.search import hardware, model, search, space
from stepscope.planner.where import Condition, mask, parse_where


def test_conditions_parse_names_aliases_and_bounds() -> None:
    got = parse_where("tp=8, pp<=4, remat=selective|full, fsdp>=1, reshard_after_forward=false")
    assert got == [
        Condition("tp", "in", (8,)),
        Condition("pp", "<=", (4,)),
        Condition("recompute", "in", (RECOMPUTE.index("selective"), RECOMPUTE.index("full"))),
        Condition("zero", ">=", (1,)),
        Condition("keep_params", "in", (1,)),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("tp", "bad --where item"),
        ("foo=1", "unknown strategy key"),
        ("recompute<=2", "only a numeric field"),
        ("pp<=2|4", "only a numeric field"),
        ("recompute=most", "recompute must be one of"),
    ],
)
def test_bad_conditions_are_one_line_errors(text: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        parse_where(text)


def test_mask_by_hand() -> None:
    s = {"tp": np.array([1, 2, 4, 8]), "pp": np.array([8, 4, 2, 1]), "etp": np.array([0, 0, 1, 0])}
    assert mask(s, parse_where("tp>=2,pp<=4")).tolist() == [False, True, True, True]
    assert mask(s, parse_where("tp=1|8")).tolist() == [True, False, False, True]
    assert mask(s, parse_where("etp=2")).tolist() == [False, True, False, False]  # etp 0 = tp
    assert mask(s, parse_where("cp=1")).all()  # a field the strategies lack reads as its default


def test_the_constrained_search_is_the_unconstrained_one_filtered() -> None:
    job = make_job(model("llama3-8b"), hardware("h100"), 16, 8, 64, 4096)
    full = search(job, top=10**9)
    part = search(job, top=10**9, where="tp=2|4,recompute=full")
    keep = np.isin(full.strategies["tp"], (2, 4)) & (full.strategies["recompute"] == RECOMPUTE.index("full"))
    grid = space(job)  # counted without the code under test
    assert part.evaluated == int(
        np.count_nonzero(np.isin(grid["tp"], (2, 4)) & (grid["recompute"] == RECOMPUTE.index("full")))
    )
    # the same rows in the same order as the unconstrained ranking, filtered
    assert part.results["step_s"].tolist() == full.results["step_s"][keep].tolist()


def test_plan_prints_what_it_searched(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "16",
        "--global-batch",
        "64",
        "--seq-len",
        "4096",
    ]
    assert main([*args, "--top", "2", "--where", "tp=2"]) == 0
    out = capsys.readouterr().out
    assert "meeting --where tp=2 evaluated" in out
    assert "framework: megatron, only its recompute policies" in out  # the default on GPUs
    assert main([*args, "--where", "cp=3"]) == 2
    assert "no valid configuration meets --where 'cp=3'" in capsys.readouterr().err
    # a condition nothing meets on its own is named with the values the search tries
    assert main([*args, "--where", "tp=16"]) == 2
    assert "the search tries tp = 1, 2, 4, 8" in capsys.readouterr().err  # 16 devices on nodes of 8: TP stays in a node
    assert main([*args, "--where", "sched=afab,pp=1"]) == 2  # AFAB is a pipeline schedule
    assert "no valid configuration meets --where 'sched=afab,pp=1'" in capsys.readouterr().err
    # schedules the search leaves out are searched when named
    assert main([*args, "--top", "3", "--where", "sched=afab", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert rows and all(r["strategy"]["sched"] == "afab" and r["strategy"]["pp"] > 1 for r in rows)


def test_distinct_keeps_the_first_row_of_each_layout_in_ranking_order(capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.planner.search import LAYOUT

    job = make_job(model("llama3-8b"), hardware("h100"), 16, 8, 64, 4096)
    full = search(job, top=10**9)
    seen: set[tuple[int, ...]] = set()
    expected = []  # by hand: walk the full ranking, keep a row when its layout is new
    for i in range(len(full.strategies["tp"])):
        lay = tuple(int(full.strategies[k][i]) for k in LAYOUT)
        if lay not in seen:
            seen.add(lay)
            expected.append(float(full.results["step_s"][i]))
    got = search(job, top=10**9, distinct=True)
    assert got.results["step_s"].tolist() == expected and len(expected) < len(full.strategies["tp"])
    assert search(job, top=5, distinct=True).results["step_s"].tolist() == expected[:5]
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-8b",
                "--hardware",
                "h100",
                "--devices",
                "16",
                "--global-batch",
                "64",
                "--seq-len",
                "4096",
                "--top",
                "3",
                "--distinct",
            ]
        )
        == 0
    )
    assert "one row per layout" in capsys.readouterr().out


def test_layout_keys_are_equal_exactly_when_the_layouts_are() -> None:
    from stepscope.planner.search import _layout_key

    rows = [(1, 2, 3), (1, 2, 3), (2, 1, 3), (1, 3, 2)]
    small = {k: np.array([r[i] for r in rows]) for i, k in enumerate(("tp", "pp", "dp"))}
    # values large enough that a mixed radix over them would overflow int64: dense codes instead
    big = {k: v * 2**30 for k, v in small.items()}
    for cols in (small, big):
        key = _layout_key(cols)
        assert [key[i] == key[j] for i in range(4) for j in range(4)] == [
            rows[i] == rows[j] for i in range(4) for j in range(4)
        ]


def test_the_html_title_says_what_was_searched(tmp_path: object, capsys: pytest.CaptureFixture[str]) -> None:
    from pathlib import Path

    out = Path(str(tmp_path)) / "plan.html"
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-8b",
                "--hardware",
                "h100",
                "--devices",
                "16",
                "--global-batch",
                "64",
                "--seq-len",
                "4096",
                "--top",
                "3",
                "--distinct",
                "--where",
                "tp=2|4",
                "--html",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    html = out.read_text(encoding="utf-8")
    assert "meeting --where tp=2|4" in html and "one row per layout" in html
