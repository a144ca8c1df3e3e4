"""A gated MLP run as separate eager ops (nanotron's GLUActivation) stores act(gate) too and moves
10 B per element instead of 6; computed by hand on a tiny model (h 1024, f 4096, 8 layers)."""

from __future__ import annotations

import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.rates import stored_per_token
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy
from stepscope.planner.work import memory_bound_bytes

TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}
H, F, L, SEQ = 1024, 4096, 8, 2048


def job_from_record(**kw: object) -> Job:
    return make_job(from_config_dict(TINY), hardware("h100"), 8, 8, 16, SEQ, **kw)  # type: ignore[arg-type]


def test_eager_swiglu_stores_one_more_f_wide_tensor() -> None:
    m = from_config_dict(TINY)
    fused, eager = stored_per_token(m), stored_per_token(m, eager_swiglu=True)
    # bytes per token and layer / h: + 2 B x f / h = 8 for no recompute and for selective
    assert eager[0] - fused[0] == pytest.approx(2 * F / H)
    assert eager[1] - fused[1] == pytest.approx(2 * F / H)
    # a plain (non-gated) MLP has no multiply to feed
    plain = from_config_dict({**TINY, "hidden_act": "gelu", "model_type": "gpt2"})
    assert stored_per_token(plain, eager_swiglu=True) == stored_per_token(plain)


def test_activations_and_bytes_by_hand() -> None:
    s = parse_strategy("dp=8,mb=2,recompute=none")
    base, eager = evaluate(job_from_record(), s), evaluate(job_from_record(eager_swiglu=True), s)
    # 8 layers x (2048 x 2 tokens) x 2 B x f, one micro-batch in flight, tp 1
    assert float(eager["activations_gb"][0] - base["activations_gb"][0]) == pytest.approx(L * SEQ * 2 * 2 * F / 1e9)
    tokens = 16 * SEQ  # the step's tokens, summed over the devices
    tp, sp = s["tp"].astype(float), s["sp"].astype(float)
    extra = memory_bound_bytes(job_from_record(eager_swiglu=True), tokens, tp, sp, 0.0) - memory_bound_bytes(
        job_from_record(), tokens, tp, sp, 0.0
    )
    assert float(extra[0]) == pytest.approx(3 * 4 * F * L * tokens)  # 4 B more per element, forward + ~2x backward
    assert float(eager["step_s"][0]) > float(base["step_s"][0])


def test_every_eager_elementwise_op_implies_it() -> None:
    assert job_from_record(fused_elementwise=False).swiglu_eager and not job_from_record().swiglu_eager
    m = from_config_dict(TINY)
    s = parse_strategy("dp=8,mb=2,recompute=none")
    a = evaluate(job_from_record(fused_elementwise=False), s)["activations_gb"][0]
    b = evaluate(job_from_record(fused_elementwise=False).replaced(eager_swiglu=True), s)["activations_gb"][0]
    assert float(a) == float(b) and m.gated_mlp


def test_the_flag_reaches_the_plan(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from stepscope.cli import main

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
        "4096",
        "--evaluate",
        "dp=8,mb=2",
        "--json",
    ]
    assert main(args) == 0
    fused = json.loads(capsys.readouterr().out)
    assert main([*args, "--set", "eager_swiglu=true"]) == 0
    eager = json.loads(capsys.readouterr().out)
    # Llama 3 8B: 32 layers, f 14336, 2 x 4096 tokens per micro-batch, 2 B
    extra = 32 * 2 * 4096 * 2 * 14336 / 1e9
    assert eager["memory_gb"]["activations"] - fused["memory_gb"]["activations"] == pytest.approx(extra)
