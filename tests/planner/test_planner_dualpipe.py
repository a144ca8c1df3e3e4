"""DeepSeek's DualPipe and DualPipeV schedules: memory, bubble and pace by hand (the DualPipe
README's table: 2x parameters and pp + 1 micro-batches in flight for DualPipe; bubbles
(pp/2 - 1)(F&B + B - 3W) with F = W = B/2)."""

from __future__ import annotations

import numpy as np
import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.errors import ConfigError
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.search import hardware, model
from stepscope.planner.strategy import parse_strategy

TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}
H = 1024


def _job(devices: int = 8, batch: int = 16) -> Job:
    return make_job(from_config_dict(TINY), hardware("h100"), devices, 8, batch, 2048)


def test_dualpipe_memory_by_hand() -> None:
    """pp = 2: each rank holds both stages (all 8 layers), the embedding and the output layer.
    Activations: min(pp + 1, 4 micro-batches) = 3 in flight, each of max(4, (4 + 4) / 2) = 4 layers
    of 2048 x 2 tokens x 40 B x h / tp (test_planner's count without recompute), plus the loss's
    6 B per logit, which the first rank holds too (it runs the last stage)."""
    r = evaluate(_job(), parse_strategy("tp=2,pp=2,dp=2,zero=1,mb=2,sched=dualpipe"))
    dense = 4 * H * H + 3 * H * 4096
    p_dev = 8 * dense / 2 + 2 * 32000 * H / 2
    assert r["weights_gb"][0] == pytest.approx(2 * p_dev / 1e9)
    assert r["optimizer_gb"][0] == pytest.approx(12 * p_dev / 2 / 1e9)  # ZeRO-1 over dp = 2
    layer = 2048 * 2 * H * 40 / 2
    logits = 2048 * 2 * 32000 * 6 / 2
    assert r["activations_gb"][0] == pytest.approx((3 * 4 * layer + logits) / 1e9)


def test_bubbles_and_the_pace_by_hand() -> None:
    """pp = 4, 8 micro-batches. DualPipe: (pp - 2) F with a micro-batch's work 3F: (4 - 2) / 3 of
    it. DualPipeV: (pp - 1) x 2 F_chunk = 3 x (1/3) of it, as ZB-H1. DualPipe's first rank runs
    the last stage for every other micro-batch, so the output layer's pipeline imbalance,
    (pp - 1) x its share out of the 1F1B pace (compute at pp = 4 less compute without a pipeline),
    becomes (pp/2 - 1) x out."""
    job = _job()
    dual = evaluate(job, parse_strategy("pp=4,dp=2,mb=1,sched=dualpipe"))
    per_micro = (dual["compute_s"][0] + dual["tp_s"][0] + dual["ep_s"][0] + dual["cp_s"][0]) / 8
    assert dual["bubble_s"][0] == pytest.approx(2 / 3 * per_micro)
    dualv = evaluate(job, parse_strategy("pp=4,vpp=2,dp=2,mb=1,sched=dualpipev"))
    zb = evaluate(job, parse_strategy("pp=4,dp=2,mb=1,sched=zb-h1"))
    per_micro_v = (dualv["compute_s"][0] + dualv["tp_s"][0] + dualv["ep_s"][0] + dualv["cp_s"][0]) / 8
    assert dualv["bubble_s"][0] == pytest.approx(per_micro_v)
    assert dualv["bubble_s"][0] == pytest.approx(zb["bubble_s"][0])
    plain = evaluate(job, parse_strategy("pp=4,dp=2,mb=1"))["compute_s"][0]
    flat = evaluate(job, parse_strategy("pp=1,dp=8,mb=1"))["compute_s"][0]
    out = (plain - flat) / 3
    assert dual["compute_s"][0] == pytest.approx(flat + out)


def test_dualpipe_hides_the_all_to_all_without_being_told() -> None:
    job = make_job(model("mixtral-8x7b"), hardware("h100"), 64, 8, 256, 4096)
    plain = evaluate(job, parse_strategy("pp=4,dp=16,ep=8,mb=1,zero=1"))
    told = evaluate(job, parse_strategy("pp=4,dp=16,ep=8,mb=1,zero=1,ep_overlap=1"))
    dual = evaluate(job, parse_strategy("pp=4,dp=16,ep=8,mb=1,zero=1,sched=dualpipe"))
    assert plain["hidden_ep_s"][0] == 0 and told["hidden_ep_s"][0] > 0
    assert dual["hidden_ep_s"][0] == pytest.approx(told["hidden_ep_s"][0], rel=0.2)


@pytest.mark.parametrize(
    "strategy, words",
    [
        ("pp=3,dp=2,sched=dualpipe", "even number of ranks"),
        ("pp=4,vpp=2,dp=2,sched=dualpipe", "even number of ranks"),
        ("pp=4,dp=2,sched=dualpipev", "two model chunks"),
        ("pp=4,vpp=2,cp=2,sched=dualpipev", "without context parallelism"),
    ],
)
def test_layouts_the_schedules_cannot_run(strategy: str, words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        parse_strategy(strategy)


def test_too_few_micro_batches_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """16 sequences over dp = 2 at mb = 2: 4 micro-batches, DualPipe needs 2 x pp = 8."""
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "2048",
        "--evaluate",
        "pp=4,dp=2,mb=2,sched=dualpipe",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "at least 2 x pp = 8 (here 4)" in err[0]


def test_v_shapes_put_both_ends_on_the_first_rank() -> None:
    """ZB-V and DualPipeV fold the pipeline: the first rank runs chunk 0 (with the embedding) and
    the last chunk (with the output layer). pp = 4, vpp = 2 on 8 layers: 2 layers a rank, so the
    first rank holds 2 layers + 2 x 32000 x h parameters, and both its in-flight activations and
    the loss's logits."""
    job = _job()
    dense = 4 * H * H + 3 * H * 4096
    for sched in ("zb-v", "dualpipev"):
        r = evaluate(job, parse_strategy(f"pp=4,vpp=2,dp=2,mb=1,sched={sched}"))
        assert r["weights_gb"][0] == pytest.approx(2 * (2 * dense + 2 * 32000 * H) / 1e9), sched
    plain = evaluate(job, parse_strategy("pp=4,dp=2,mb=1"))
    assert plain["weights_gb"][0] == pytest.approx(2 * (2 * dense + 32000 * H) / 1e9)


def test_dualpipe_rows_carry_their_caveat(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "mixtral-8x7b",
        "--hardware",
        "h100",
        "--devices",
        "64",
        "--global-batch",
        "256",
        "--seq-len",
        "4096",
    ]
    assert main([*args, "--evaluate", "pp=4,dp=16,ep=8,mb=1,zero=1,sched=dualpipe"]) == 0
    assert "note: DualPipe rows" in capsys.readouterr().out
    assert main([*args, "--evaluate", "pp=4,dp=16,ep=8,mb=1,zero=1"]) == 0
    assert "DualPipe" not in capsys.readouterr().out


def test_the_search_tries_the_dualpipes_when_named() -> None:
    """16 devices, 64 sequences: every row DualPipe (an even pp, no vpp) or DualPipeV (vpp 2), with
    an even number of micro-batches, at least 2 x pp; the default search has neither."""
    from stepscope.planner.search import search

    job = make_job(model("llama3-8b"), hardware("h100"), 16, 8, 64, 4096)
    plain = search(job, top=10**9)
    assert not np.isin(plain.strategies["sched"], (4, 5)).any()
    got = search(job, top=10**9, where="sched=dualpipe|dualpipev")
    st = got.strategies
    assert got.evaluated > 0 and set(np.unique(st["sched"]).tolist()) == {4, 5}
    n_micro = 64 // (st["dp"] * st["mb"])
    assert ((n_micro % 2 == 0) & (n_micro >= 2 * st["pp"])).all()
    assert (st["vpp"][st["sched"] == 4] == 1).all() and (st["pp"][st["sched"] == 4] % 2 == 0).all()
    assert (st["vpp"][st["sched"] == 5] == 2).all() and (st["cp"][st["sched"] == 5] == 1).all()
    assert (st["cp"][st["sched"] == 4] > 1).any()  # DualPipe itself is searched with context parallelism
