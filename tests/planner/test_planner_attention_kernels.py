"""Planner: the attention kernel a framework runs (FlashAttention-2, cuDNN, FlashAttention-3) priced
from the published kernel speeds in data/attention_kernels.yaml, against values computed by hand
from the figures' numbers."""

from __future__ import annotations

import json

import numpy as np
import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.errors import ConfigError
from stepscope.planner import frameworks
from stepscope.planner.attention import combined_tflops, kernel_share
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.rates import efficiencies
from stepscope.planner.search import hardware
from stepscope.planner.settings import job_settings, settings_line
from stepscope.planner.strategy import parse_strategy

TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}

# H100-SXM's measured matmul ceiling (hardware.yaml: 0.803 x 989 TFLOP/s), which the shares divide by
H100_CEILING = 794.5


def _job(hw: str = "h100", seq: int = 16384, **kw: object) -> Job:
    return make_job(from_config_dict(TINY), hardware(hw), 8, 8, 8, seq, **kw)


def test_forward_and_backward_speeds_combine_in_the_planners_flop_count() -> None:
    """FlashAttention-2 at 16k: forward 335, backward 322 TFLOP/s with the backward counted as 2.5
    forwards. Per forward FLOP: 1/335 + 2.5/322 = 0.0029851 + 0.0077640 = 0.0107491 us/MFLOP
    for 3 planner FLOPs: 3 / 0.0107491 = 279.09 TFLOP/s."""
    assert float(combined_tflops(335.0, 322.0)) == pytest.approx(279.09, abs=0.01)


def test_share_of_the_ceiling_interpolates_in_log_sequence_and_holds_at_the_ends() -> None:
    # 16k: 279.09 / 794.5 = 0.35128; beyond the last measurement the share is held
    assert float(kernel_share("fa2", "H100-SXM", 16384)) == pytest.approx(279.09 / H100_CEILING, rel=1e-4)
    assert float(kernel_share("fa2", "H100-SXM", 131072)) == pytest.approx(279.09 / H100_CEILING, rel=1e-4)
    # halfway between 2k (3 / (1/298 + 2.5/291) = 251.11) and 4k (3 / (1/319 + 2.5/310) = 267.87)
    # in log2: 2^11.5 tokens
    mid = (251.11 + 267.87) / 2 / H100_CEILING
    assert float(kernel_share("fa2", "H100-SXM", 2**11.5)) == pytest.approx(mid, rel=1e-4)
    # cuDNN at 4k: 3 / (1/518 + 2.5/499) = 3 / (0.0019305 + 0.0050100) = 432.24
    assert float(kernel_share("cudnn", "h100-sxm", 4096)) == pytest.approx(432.24 / H100_CEILING, rel=1e-4)
    # measured on Hopper only: other architectures have no measurements
    assert kernel_share("fa2", "A100-SXM-80GB", 4096) is None


def test_the_kernel_sets_the_attention_efficiency_by_tokens_per_rank() -> None:
    """attn_eff = share x the device's matmul ceiling share (0.803 on H100-SXM); with context
    parallelism the kernel sees seq / cp tokens: cp 2 at 32k is the 16k point, cp 8 at 32k the 4k one."""
    _, attn, _ = efficiencies(_job(seq=32768, attention_kernel="fa2"), np.array([1, 2, 8]))
    want = np.array([279.09, 279.09, 267.87]) / H100_CEILING * 0.803
    np.testing.assert_allclose(attn, want, rtol=1e-4)
    # without a kernel, the prior: 0.6 x 0.75 x 0.803
    _, prior, _ = efficiencies(_job(), 1)
    assert prior == pytest.approx(0.6 * 0.75 * 0.803)


def test_attention_time_follows_the_kernel_and_nothing_else_moves() -> None:
    """The same job under FlashAttention-2 and cuDNN differs only in the attention term: the step
    difference is the attention FLOPs x (1/fa2 - 1/cudnn) / (peak x devices) with the full
    recompute's 4/3 (an 8-layer tiny model at 16k tokens per sequence, so attention dominates)."""
    s = parse_strategy("tp=1,pp=1,dp=8,zero=3,mb=1,recompute=full")
    fa2, cudnn = (evaluate(_job(attention_kernel=k), s) for k in ("fa2", "cudnn"))
    job = _job()
    m = job.model
    tokens = job.global_batch * job.seq_len
    attn_flops = (m.flops_per_token(job.seq_len) - 6.0 * m.matmul_params_per_token()) * tokens
    peak = job.hw.peak_flops("bf16")
    # at 16k: FA2 279.09 TFLOP/s (above), cuDNN 3 / (1/539 + 2.5/516) = 3 / (0.0018553 + 0.0048450) = 447.74
    eff = {k: tflops / H100_CEILING * 0.803 for k, tflops in (("fa2", 279.09), ("cudnn", 447.74))}
    want = attn_flops * (1 / eff["fa2"] - 1 / eff["cudnn"]) / peak / job.devices * 4 / 3
    assert float(fa2["compute_s"][0] - cudnn["compute_s"][0]) == pytest.approx(want, rel=1e-4)
    assert float(fa2["dp_s"][0]) == pytest.approx(float(cudnn["dp_s"][0]))
    assert float(fa2["total_gb"][0]) == pytest.approx(float(cudnn["total_gb"][0]))


def test_unmeasured_device_and_materialized_scores_keep_the_prior() -> None:
    s = parse_strategy("tp=1,dp=8,zero=3,mb=1")
    a100 = evaluate(_job("a100", attention_kernel="fa2"), s)
    assert float(a100["step_s"][0]) == pytest.approx(float(evaluate(_job("a100"), s)["step_s"][0]))
    st = job_settings(_job("a100", attention_kernel="fa2"))
    assert "not measured on A100" in st["attention_kernel"]
    # without flash attention the scores are materialized: the kernel does not apply
    no_flash = evaluate(_job(attention_kernel="fa2", flash_attention=False), s)
    assert float(no_flash["step_s"][0]) == pytest.approx(float(evaluate(_job(flash_attention=False), s)["step_s"][0]))


def test_a_kernel_name_not_in_the_catalog_is_refused() -> None:
    with pytest.raises(ConfigError, match='attention_kernel must be one of "", fa2, cudnn, fa3'):
        _job(attention_kernel="fa9")


def test_framework_presets_name_the_kernel_they_run() -> None:
    got = {
        name: frameworks.apply({}, frameworks.by_name(name)).get("attention_kernel")
        for name in ("megatron", "torchtitan", "nanotron", "maxtext")
    }
    assert got == {"megatron": "cudnn", "torchtitan": "fa2", "nanotron": "fa2", "maxtext": None}
    # a kernel given explicitly wins over the preset
    assert frameworks.apply({"attention_kernel": "fa3"}, frameworks.by_name("torchtitan"))["attention_kernel"] == "fa3"


def test_cli_flag_reaches_the_json_settings_and_the_assumed_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "8",
        "--seq-len",
        "8192",
        "--evaluate",
        "tp=1,dp=8,zero=3,mb=1",
    ]
    assert main(args + ["--set", "attention_kernel=cudnn", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["settings"]["attention_kernel"] == "cudnn"
    assert "cuDNN's measured speed" in settings_line(out["settings"])
    assert main(args + ["--json"]) == 0
    assert "attention_kernel" not in json.loads(capsys.readouterr().out)["settings"]
