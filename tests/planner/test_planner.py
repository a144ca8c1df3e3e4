"""Planner: memory by hand, the strategy space's constraints, the CLI contract."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from stepscope.catalog.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.errors import ConfigError
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.rates import gemm_rate, params
from stepscope.planner.search import hardware, model, space
from stepscope.planner.strategy import parse_strategy

from ..gemm_by_hand import H100_KERNEL_S
from ..gemm_by_hand import linear_shape as _linear_shape

TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}


def job_from_record(devices: int = 8, batch: int = 16, seq: int = 2048) -> Job:
    return make_job(from_config_dict(TINY), hardware("h100"), devices, 8, batch, seq)


@pytest.mark.parametrize(
    ("b", "m", "n", "k", "tflops"),
    [
        (1, 4096, 4096, 4096, 783.3),
        (1, 4096, 1024, 1024, 488.1),
        (1, 2048, 2048, 2048, 632.0),
        (1, 1024, 4096, 4096, 738.5),
        (1, 4096, 512, 4096, 650.0),
        (1, 512, 2048, 1024, 232.6),
        (1, 512, 512, 512, 40.7),
        (1, 4096, 4096, 512, 543.1),
        (4, 256, 2048, 2048, 478.5),
        (2, 1024, 1024, 4096, 649.6),
        (4, 1024, 512, 1024, 371.8),
    ],
)
def test_gemm_rate_follows_the_measured_h100_table(b: int, m: int, n: int, k: int, tflops: float) -> None:
    """XLA's sm_90 matmul table (openxla matmul_interpolator_data.h, bf16, b GEMMs of m x n x k
    per kernel), read by hand: each GEMM's time is the 5.3 us kernel floor plus its FLOPs at the
    4096^3 rate (783.3 TFLOP/s, less the floor: 807.7) x gemm_rate; within 8% over the fitted
    range, and for batched kernels, whose b x m x n outputs count together."""
    flops = 2.0 * b * m * n * k
    ref = 2.0 * 4096**3 / (2.0 * 4096**3 / 783.3e12 - H100_KERNEL_S)
    predicted = H100_KERNEL_S + flops / (ref * float(gemm_rate(b * m * n, k)))
    assert predicted == pytest.approx(flops / (tflops * 1e12), rel=0.08)


def test_linear_shape_is_the_harmonic_mean_of_its_three_gemms() -> None:
    from stepscope.planner.rates import linear_shape

    # a 4096-token, 1024 x 512 linear: forward 4096 x 512 outputs deep 1024, input gradient
    # 4096 x 1024 deep 512, weight gradient 1024 x 512 deep 4096. By hand, ref = (1 + (642^2 /
    # 4096^2)^1.5) (1 + 202/4096) = 1.003851 x 1.049316 = 1.053357; forward: 642^2 / 2,097,152 =
    # 0.19654, ^1.5 = 0.08713, x (1 + 202/1024 = 1.19727): 1.30159, rate 0.80928; input gradient
    # (0.098268^1.5 = 0.030805) x 1.394531 = 1.437490: 0.73278; weight gradient (0.786140^1.5 =
    # 0.697026) x 1.049316 = 1.780716: 0.59154
    assert float(linear_shape(4096, 1024, 512)) == pytest.approx(
        3 / (1 / 0.80928 + 1 / 0.73278 + 1 / 0.59154), abs=2e-4
    )
    assert float(linear_shape(4096, 512, 1024)) == pytest.approx(float(linear_shape(4096, 1024, 512)))  # symmetric
    assert float(linear_shape(8192, 8192, 8192)) == 1.0  # large GEMMs at the measured ceiling


def test_memory_by_hand() -> None:
    job = job_from_record()
    s = parse_strategy("tp=2,pp=2,dp=2,zero=1,mb=2,recompute=none")
    r = evaluate(job, s)
    h, L = 1024, 8
    dense = 4 * h * h + 3 * h * 4096  # q,k,v,o (MHA) + SwiGLU
    p_dev = (L / 2) * dense / 2 + 32000 * h / 2  # layers per stage / tp + embedding / tp
    assert params(job.model)[0] == dense
    assert r["weights_gb"][0] == pytest.approx(2 * p_dev / 1e9)
    assert r["grads_gb"][0] == pytest.approx(4 * p_dev / 1e9)  # fp32 gradients (the default)
    assert r["optimizer_gb"][0] == pytest.approx(12 * p_dev / 2 / 1e9)  # ZeRO-1 over dp=2
    # activations: s*b*h*c/tp per layer, 4 layers per stage; c without recompute, tensor by tensor
    # in bf16: two norms' inputs and outputs (4 h), q, k, v (MHA: h each) and the attention output
    # (h), SwiGLU's gate, up and product (3 x 4096 = 12 h): 20 h x 2 B = 40; full recompute keeps
    # the block input, 2. The first stage holds min(pp=2, micro-batches=16/(2*2)=4) = 2 in flight,
    # the last one 1 plus the output layer's logits s*b*V*(2+4)/tp; the peak is the larger
    logits = 2048 * 2 * 32000 * 6 / 2
    c_none = 2 * (4 + 3 + 1 + 12)

    def act(c: int) -> float:
        # with recompute, the layer being regenerated holds its full (c_none) activations on top
        layer, work = 2048 * 2 * h * c / 2, 2048 * 2 * h * (c_none - c) / 2
        return max(layer * 4 * 2 + work, layer * 4 + work + logits) / 1e9

    assert r["activations_gb"][0] == pytest.approx(act(c_none))
    full = evaluate(job, parse_strategy("tp=2,pp=2,dp=2,zero=1,mb=2,recompute=full"))
    assert full["activations_gb"][0] == pytest.approx(act(2))
    single = evaluate(job, parse_strategy("tp=2,dp=4,mb=2"))  # no pipeline: one stage holds both
    assert single["activations_gb"][0] == pytest.approx((2048 * 2 * h * c_none / 2 * 8 + logits) / 1e9)
    # full recompute repeats the layers' forward (x 4/3), not the output layer: logits GEMM at
    # 0.75 x 0.803 of the H100 peak, 16000 wide with M = 2 x 2048 tokens, and the loss's
    # 24 B per token and vocabulary entry at HBM bandwidth, all on the last of pp = 2 stages
    tokens = 16 * 2048
    out = (
        6 * 32000 * h * tokens / _linear_shape(4096, 1024, 16000) / (0.75 * 0.803) / 989.4e12
        + 24 * 32000 * tokens / 3350e9
    ) / 8
    out += 3 * H100_KERNEL_S * 4 / 2  # its GEMMs' kernel floor: 3 per micro-batch, 16 / (2 x 2) = 4 of them, x pp below
    assert full["compute_s"][0] - 2 * out == pytest.approx((r["compute_s"][0] - 2 * out) * 4 / 3)
    # the last stage's extra: the same strategy without the pipeline's imbalance is out shorter
    assert r["compute_s"][0] - out == pytest.approx(
        evaluate(job, parse_strategy("tp=2,pp=1,dp=4,zero=1,mb=2"))["compute_s"][0]
    )
    z3 = evaluate(job, parse_strategy("tp=2,pp=2,dp=2,zero=3,mb=2"))
    assert z3["weights_gb"][0] == pytest.approx(r["weights_gb"][0] / 2)


def test_space_constraints() -> None:
    job = job_from_record(devices=16, batch=32)
    s = space(job)
    assert s["tp"].size > 100
    assert np.all(s["tp"] * s["pp"] * s["cp"] * s["dp"] == 16)
    assert np.all(16 % s["tp"] == 0) and np.all(s["tp"] <= 8)
    assert np.all(8 % (s["pp"] * s["vpp"]) == 0)
    assert np.all(32 % (s["dp"] * s["mb"]) == 0)
    assert np.all((s["vpp"] == 1) | (s["pp"] > 1))
    assert np.all((s["zero"] == 0) | (s["dp"] > 1))


def test_space_interleaves_every_even_split_of_a_stage() -> None:
    """GPT-3 175B has 96 layers: on 8 stages of 12 layers the chunk counts that split a stage evenly
    are 1, 2, 3, 4, 6 and 12 (NVIDIA's recipe runs 6), and 5 or 8 never appear; on 16 stages of 6,
    1, 2, 3 and 6."""
    s = space(make_job(model("gpt3-175b"), hardware("h100"), 1024, 8, 1536, 2048))
    assert set(np.unique(s["vpp"][s["pp"] == 8]).tolist()) == {1, 2, 3, 4, 6, 12}
    assert set(np.unique(s["vpp"][s["pp"] == 16]).tolist()) == {1, 2, 3, 6}


def test_moe_expert_parallel_space_and_memory() -> None:
    m = model("mixtral-8x7b")
    job = make_job(m, hardware("h100"), 64, 8, 256, 4096)
    s = space(job)
    assert set(np.unique(s["ep"])) <= {1, 2, 4, 8}
    # Megatron's expert data-parallel group, dp x cp x tp / (ep x etp) ranks, is whole (etp 0 = tp)
    etp = np.where(s["etp"] == 0, s["tp"], s["etp"])
    assert np.all((s["dp"] * s["cp"] * s["tp"]) % (s["ep"] * etp) == 0)
    assert np.any(s["ep"] > s["dp"])  # expert parallelism across the tensor ranks (expert TP 1)
    a = evaluate(job, parse_strategy("tp=2,pp=4,dp=8,ep=1,zero=1"))
    b = evaluate(job, parse_strategy("tp=2,pp=4,dp=8,ep=8,zero=1"))
    assert b["weights_gb"][0] < a["weights_gb"][0] and b["ep_s"][0] > 0 == a["ep_s"][0]


def test_plan_cli_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "H100",
        "--devices",
        "8",
        "--global-batch",
        "32",
        "--seq-len",
        "4096",
    ]
    assert main(args + ["--top", "3", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema_version"] == 3 and doc["kind"] == "search" and "valid configurations" in doc["notes"][0]
    recs = doc["rows"]
    assert len(recs) == 3 and [r["step_time_s"] for r in recs] == sorted(r["step_time_s"] for r in recs)
    for k in (
        "step_time_s",
        "tokens_per_s_per_device",
        "mfu",
        "tflops_per_device",
        "memory_gb",
        "fits",
        "bottleneck",
        "time_s",
    ):
        assert k in recs[0]
    assert "total" in recs[0]["memory_gb"]
    assert main(args + ["--evaluate", "tp=2,dp=4,zero=1,recompute=selective", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["strategy"]["tp"] == 2 and one["strategy"]["recompute"] == "selective"
    assert main(args + ["--evaluate", "tp=2,dp=2"]) == 2  # 4 devices != 8
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        json.dumps(
            {
                "model": "llama3-8b",
                "hardware": "a100",
                "devices": 8,
                "global_batch": 16,
                "seq_len": 2048,
                "strategy": "dp=8,zero=3",
            }
        )
        + "\n"
        + json.dumps({"model": "nope"})
        + "\n"
    )
    assert main(["plan", "--batch", str(batch)]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["strategy"]["dp"] == 8 and "error" in lines[1]
    assert (
        main(
            [
                "plan",
                "--model",
                "no-such-model",
                "--hardware",
                "h100",
                "--devices",
                "8",
                "--global-batch",
                "8",
                "--seq-len",
                "8",
            ]
        )
        == 2
    )


def test_calibration_recovers_known_scales_and_holds_out_groups() -> None:
    from stepscope.planner.calibrate import (
        ATTN_GRID,
        COMM_GRID,
        GEMM_GRID,
        INTER_GRID,
        Fit,
        Run,
        cross_validate,
        fit,
        predict_tokens,
    )

    # grid points: recoverable exactly; 16 devices on 2 nodes, so the inter-node tier is informed
    truth_fit = Fit(float(GEMM_GRID[20]), float(ATTN_GRID[5]), float(COMM_GRID[9]), float(INTER_GRID[6]))
    runs = []
    # short and long sequences separate attention from GEMM work; TP/FSDP runs expose the links
    for i, (strat, seq) in enumerate(
        [
            ("tp=8,dp=2", 2048),
            ("tp=2,pp=2,dp=4", 16384),
            ("dp=16,zero=3", 4096),
            ("tp=4,dp=4,recompute=full", 32768),
            ("tp=8,dp=2", 32768),
            ("dp=16", 1024),
        ]
    ):
        job = make_job(from_config_dict(TINY), hardware("a100"), 16, 8, 64, seq)
        st = {k: int(v[0]) for k, v in parse_strategy(strat).items()}
        truth = truth_fit.apply(job)
        measured = float(predict_tokens(truth, {k: np.array([v]) for k, v in st.items()})[0])
        runs.append(Run(job, st, measured, predict_tokens, group=f"g{i % 2}"))
    # the factors exactly (the pull: the strongest that still recovers them, one-standard-error rule)
    assert dataclasses.replace(fit(runs), prior_pull=0.0) == truth_fit
    cv = cross_validate(runs)
    assert set(cv) == {"g0", "g1"} and all(v["mape"] < 1e-9 for v in cv.values())


def test_runs_the_model_already_fits_leave_every_factor_at_exactly_one() -> None:
    """The grids hold the prior 1.0 itself: runs measured at what the model predicts give back
    Fit(1, 1, 1, 1), not a neighbouring grid point (the GEMM and attention grids once lacked 1)."""
    from stepscope.planner.calibrate import Fit, Run, fit, predict_tokens

    runs = []
    for strat, seq in (("tp=8,dp=2", 2048), ("dp=16,zero=3", 4096), ("tp=4,dp=4,recompute=full", 32768)):
        job = make_job(from_config_dict(TINY), hardware("a100"), 16, 8, 64, seq)
        st = {k: int(v[0]) for k, v in parse_strategy(strat).items()}
        measured = float(predict_tokens(job, {k: np.array([v]) for k, v in st.items()})[0])
        runs.append(Run(job, st, measured, predict_tokens, group="g"))
    # (the pull: any is as good on exact runs; the one-standard-error rule takes the strongest)
    assert dataclasses.replace(fit(runs), prior_pull=0.0) == Fit(1.0, 1.0, 1.0, 1.0)


def test_cross_validation_reports_the_step_times_error_beside_the_throughputs() -> None:
    """A held-out run measured at half the model's throughput: the throughput is predicted 2x too
    high (predicted / measured - 1 = +100%) and the step time half as long as measured
    (|measured / predicted - 1| = |1/2 - 1| = 50%)."""
    from stepscope.planner.calibrate import Run, cross_validate, predict_tokens

    runs = []
    for i, (strat, seq) in enumerate(
        (("tp=8,dp=2", 2048), ("dp=16,zero=3", 4096), ("tp=4,dp=4,recompute=full", 32768), ("tp=2,dp=8", 4096))
    ):
        job = make_job(from_config_dict(TINY), hardware("a100"), 16, 8, 64, seq)
        st = {k: int(v[0]) for k, v in parse_strategy(strat).items()}
        tokens = float(predict_tokens(job, {k: np.array([v]) for k, v in st.items()})[0])
        runs.append(Run(job, st, tokens / 2 if i == 3 else tokens, predict_tokens, group="slow" if i == 3 else "exact"))
    slow = cross_validate(runs)["slow"]  # fitted on the three exact runs: the priors
    assert slow["mape"] == pytest.approx(1.0) and slow["mean_signed"] == pytest.approx(1.0)
    assert slow["mape_step_time"] == pytest.approx(0.5)


def test_plan_html_and_what_if(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "32",
        "--seq-len",
        "4096",
    ]
    out = tmp_path / "plan.html"
    assert main(args + ["--top", "4", "--html", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text()
    assert text.count("<rect") >= 8 and "Memory per device" in text and "<script" not in text
    assert (
        main(args + ["--evaluate", "tp=2,dp=4", "--baseline", "dp=8,zero=3", "--measured-step-s", "3.0", "--json"]) == 0
    )
    rec = json.loads(capsys.readouterr().out)
    w = rec["what_if"]
    assert w["predicted_step_time_s"] == pytest.approx(3.0 * rec["step_time_s"] / w["predicted_baseline_step_time_s"])
    assert w["baseline_model_over_measured"] == pytest.approx(w["predicted_baseline_step_time_s"] / 3.0)
    assert w["speedup_vs_baseline"] == pytest.approx(3.0 / w["predicted_step_time_s"])
    # --html with --evaluate (it was ignored): the strategy and the what-if's baseline; the batch
    # given in tokens is named in sequences (131072 / 4096 = 32)
    tokens = [a if a != "--global-batch" else "--global-batch-tokens" for a in args]
    tokens[tokens.index("--global-batch-tokens") + 1] = "131072"
    one = tmp_path / "one.html"
    assert (
        main(
            tokens
            + ["--evaluate", "tp=2,dp=4", "--baseline", "dp=8,zero=3", "--measured-step-s", "3.0", "--html", str(one)]
        )
        == 0
    )
    capsys.readouterr()
    text = one.read_text()
    assert "global batch 32 x 4096" in text and "tp2 pp1x1 dp4" in text and "tp1 pp1x1 dp8 cp1 ep1 z3" in text
    assert "what-if: baseline tp=1,pp=1,dp=8,zero=3" in text  # the anchored prediction, not only the model's times
    # the transfers each strategy hid under compute, by transfer (FSDP's gathers under the baseline's micro-batches)
    assert main(tokens + ["--evaluate", "dp=8,zero=3", "--json"]) == 0
    base = json.loads(capsys.readouterr().out)
    assert base["hidden_s"]["dp"] > 0 and "Transfers hidden under compute" in text
    assert f"<title>dp: {base['hidden_s']['dp']:.2f} s</title>" in text
    from stepscope.report.plan_html import page as html_page

    page = html_page([rec], "t", 80.0, ["<script>alert(1)</script> from a trace path"])
    assert "<script>" not in page and "&lt;script&gt;" in page  # notes carry user paths: escaped
    assert (
        main(args + ["--evaluate", "tp=2,dp=4", "--html", str(tmp_path / "missing" / "x.html")]) == 1
    )  # as analyze: an output error
    assert main(args + ["--evaluate", "tp=2,dp=4", "--baseline", "dp=8"]) == 2  # needs the measured time too


@pytest.mark.parametrize("factor, warned", [(1.0, False), (1.9, False), (2.1, True), (0.4, True)])
def test_what_if_in_the_terminal_says_the_anchor_and_warns_on_a_mismatch(
    factor: float, warned: bool, capsys: pytest.CaptureFixture[str]
) -> None:
    """The terminal shows the what-if (it used to show only the table): the measured baseline, the
    model's baseline, the prediction anchored on the measurement; a warning when the model's
    baseline is more than 2x off the measured step (the job given is not the run measured)."""
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "32",
        "--seq-len",
        "4096",
    ]
    base = evaluate(make_job(model("llama3-8b"), hardware("h100"), 8, 8, 32, 4096), parse_strategy("dp=8,zero=3"))[
        "step_s"
    ][0]
    measured = base * factor
    assert (
        main(args + ["--evaluate", "tp=2,dp=4", "--baseline", "dp=8,zero=3", "--measured-step-s", str(measured)]) == 0
    )
    out = " ".join(capsys.readouterr().out.split())  # rich may wrap the long line
    assert (
        f"what-if: baseline tp=1,pp=1,dp=8,zero=3,mb=1,ga=4 measured {measured:.4g} s/step (model {base:.4g} s)" in out
    )
    assert ("warning: the model puts the baseline at" in out) is warned


def test_named_recompute_policies_order_memory_and_time() -> None:
    job = job_from_record()
    res = {}
    for pol in ("none", "minimal", "save_dot_except_mlp", "save_qkv_proj", "save_out_proj", "full"):
        r = evaluate(job, parse_strategy(f"tp=2,pp=2,dp=2,mb=2,recompute={pol}"))
        res[pol] = (r["activations_gb"][0], r["compute_s"][0])
    acts = [res[p][0] for p in ("none", "minimal", "save_dot_except_mlp", "save_qkv_proj", "save_out_proj", "full")]
    assert acts == sorted(acts, reverse=True)  # each keeps less than the one before
    assert res["minimal"][1] < res["save_dot_except_mlp"][1] < res["full"][1]
    layer, logits = 2048 * 2 * 1024 / 2 * 4, 2048 * 2 * 32000 * 6 / 2  # per unit of c, 4 layers; output layer
    c_none = 40  # the tiny model without recompute (test_memory_by_hand)
    work = 2048 * 2 * 1024 / 2 * (c_none - 4)  # one layer regenerated in full during backward
    assert res["none"][0] / res["save_out_proj"][0] == pytest.approx(
        (c_none * layer + logits) / (4 * layer + work + logits)
    )


def test_hsdp_memory_and_traffic_by_hand() -> None:
    """HSDP over 16 ranks with shard groups of 8: states sharded by 8; the all-gather/reduce-scatter
    stays inside a node and only 2 replicas all-reduce the sharded gradients across nodes."""
    job = job_from_record(devices=16, batch=32)
    dense, _, emb = params(job.model)
    p_dev = 8 * dense + emb
    fsdp = evaluate(job, parse_strategy("dp=16,zero=3"))
    hsdp = evaluate(job, parse_strategy("dp=16,zero=3,hsdp=8"))
    assert hsdp["weights_gb"][0] == pytest.approx(2 * p_dev / 8 / 1e9)
    assert fsdp["weights_gb"][0] == pytest.approx(2 * p_dev / 16 / 1e9)
    assert hsdp["optimizer_gb"][0] == pytest.approx(12 * p_dev / 8 / 1e9)
    hw = job.hw
    # in a node: the H100's measured all-gather bus bandwidth (catalog intra_node_busbw_gbps, 249.8 GB/s)
    intra, inter = 249.8e9, hw.inter_node_gbps * 1e9
    # per micro-batch (2 here: 32 sequences over 16 replicas, mb 1) two all-gathers of bf16 weights
    # (2 B) and a reduce-scatter of fp32 gradients (4 B) in the shard group, under all the compute;
    # the replicas all-reduce the sharded fp32 gradients once, under the last micro-batch's
    # backward (2/3 of one micro-batch's compute)
    # (each collective layer by layer: 8 layers, each paying the ring's step latencies)
    shard_h = 2 * (7 / 8 * (2 + 2 + 4) * p_dev / intra + 8 * 3 * 7 * 10e-6)
    repl_h = 2 * 1 / 2 * 4 * p_dev / 8 / inter + 8 * 2 * 1 * 20e-6
    c = hsdp["compute_s"][0]
    assert hsdp["dp_s"][0] == pytest.approx(shard_h - 0.7 * min(shard_h, c) + repl_h - 0.7 * min(repl_h, c / 2 * 2 / 3))
    raw_f = 2 * (15 / 16 * (2 + 2 + 4) * p_dev / inter + 8 * 3 * 15 * 20e-6)
    assert fsdp["dp_s"][0] == pytest.approx(raw_f - 0.7 * min(raw_f, fsdp["compute_s"][0]))
    assert hsdp["dp_s"][0] < fsdp["dp_s"][0]


def test_zero_bubble_schedules_cut_the_bubble() -> None:
    job = job_from_record(devices=8, batch=16)
    base = evaluate(job, parse_strategy("pp=4,dp=2,mb=1"))
    zb = evaluate(job, parse_strategy("pp=4,dp=2,mb=1,sched=zb-h1"))
    zbv = evaluate(job, parse_strategy("pp=4,dp=2,mb=1,vpp=2,sched=zb-v"))
    il = evaluate(job, parse_strategy("pp=4,dp=2,mb=1,vpp=2"))
    # 1F1B bubble (pp-1)/m of the work: m = 16/2 = 8 micro-batches
    per_micro = (base["compute_s"][0] + base["tp_s"][0] + base["ep_s"][0]) / 8
    assert base["bubble_s"][0] == pytest.approx(3 * per_micro)
    assert zb["bubble_s"][0] == pytest.approx(base["bubble_s"][0] / 3)
    assert il["bubble_s"][0] == pytest.approx(base["bubble_s"][0] / 2)
    assert zbv["bubble_s"][0] == pytest.approx(il["bubble_s"][0] * 0.1)
    assert zb["activations_gb"][0] == base["activations_gb"][0]
    with pytest.raises(Exception, match="ZB-V"):
        parse_strategy("pp=4,dp=2,sched=zb-v")


def test_expert_tp_and_offload() -> None:
    m = model("mixtral-8x7b")
    job = make_job(m, hardware("h100"), 64, 8, 256, 4096)
    _, experts, _ = params(m)
    same = evaluate(job, parse_strategy("tp=4,pp=2,dp=8,ep=8,zero=1"))
    etp1 = evaluate(job, parse_strategy("tp=4,pp=2,dp=8,ep=8,etp=1,zero=1"))
    # expert weights per device: (L/pp) * experts/(ep*etp) -> etp 1 holds 4x the tp=4 share
    diff_params = (32 / 2) * experts / 8 * (1 - 1 / 4)
    assert etp1["weights_gb"][0] - same["weights_gb"][0] == pytest.approx(2 * diff_params / 1e9)
    # etp = 1: MoE layers skip the MLP's TP collectives (2 all-reduce-equivalents per layer of the
    # k = 2 routed copies: 2 * 2 * (2*3/4 * s*b*h*2 bytes / 249.8 GB/s + 2*3*10 us) per layer), at the
    # H100 node's measured all-gather / reduce-scatter bus bandwidth
    s, b, h = 4096, 1, 4096
    ar = 2 * 3 / 4 * (2 * s * b * h * 2) / 249.8e9 + 2 * 3 * 10e-6
    micro = 256 / 8  # micro-batches per replica
    assert same["tp_s"][0] - etp1["tp_s"][0] == pytest.approx(2 * ar * 32 / 2 * micro)
    on = evaluate(job, parse_strategy("tp=4,pp=2,dp=8,ep=8,zero=1,offload=1"))
    off = evaluate(job, parse_strategy("tp=4,pp=2,dp=8,ep=8,zero=1"))
    assert on["activations_gb"][0] < off["activations_gb"][0] / 4
    # saved activations per layer, tensor by tensor: norms 4 h, q + k + v 4096 + 2 x 1024 = 1.5 h,
    # attention output h, the k = 2 routed copies of h with their experts' 3 x 14336 each (2 x 11.5 h):
    # 29.5 h x 2 B = 59 x s*b*h/tp; 16 layers per stage, 2 kept on device
    act_layer = s * b * h * 59 / 4
    logits = s * b * 32000 * 6 / 4  # last stage: bf16 + fp32 logits, vocab-parallel over tp=4
    assert on["activations_gb"][0] == pytest.approx((2 * act_layer + logits) / 1e9)
    traffic = 2 * act_layer * 16 * (256 / 8) / (64e9)  # out and back, 32 micro-batches, PCIe Gen5 64 GB/s
    # 80% of it can overlap, under what the transfers before it (offload goes last) left of the compute
    left = (
        on["compute_s"][0] + on["host_s"][0] - sum(on[f"hidden_{p}_s"][0] for p in ("tp", "ep", "cp", "pp_p2p", "dp"))
    )
    assert on["offload_s"][0] == pytest.approx(traffic - min(0.8 * traffic, left))


def test_space_has_new_dimensions_within_constraints() -> None:
    m = model("mixtral-8x7b")
    s = space(make_job(m, hardware("h100"), 64, 8, 256, 4096))
    assert set(np.unique(s["sched"])) == {0, 1, 2} and set(np.unique(s["offload"])) == {0, 1}
    assert np.all((s["sched"] == 0) | (s["pp"] > 1)) and np.all((s["sched"] != 2) | (s["vpp"] == 2))
    assert np.all((s["hsdp"] == 0) | ((s["zero"] == 3) & (s["hsdp"] < s["dp"])))
    assert np.all((s["etp"] == 0) | (s["tp"] > 1)) and np.any(s["etp"] == 1)


def test_hybrid_linear_attention_model_flops_by_hand() -> None:
    """A 4-layer hybrid: 3 linear-attention layers (GLA-style) + 1 full-attention layer."""
    cfg = {
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "intermediate_size": 512,
        "vocab_size": 1000,
        "hidden_act": "silu",
        "layer_types": ["linear_attention"] * 3 + ["full_attention"],
        "linear_num_key_heads": 2,
        "linear_key_head_dim": 32,
        "linear_num_value_heads": 4,
        "linear_value_head_dim": 32,
    }
    m = from_config_dict(cfg)
    assert m.linear_layers == 3 and m.linear_attn == (2, 32, 4, 32)
    lin = 256 * (2 * 2 * 32 + 3 * 4 * 32)  # q,k + v, gate, o
    full = 2 * 256 * 4 * 64 + 2 * 256 * 2 * 64
    mlp = 3 * 256 * 512
    n = 3 * lin + full + 4 * mlp + 256 * 1000
    assert m.matmul_params_per_token() == n
    seq = 4096
    attn_full = 6 * 1 * seq * 4 * (64 + 64) * 0.5
    attn_lin = 6 * 3 * 4 * (2 * 32 * 32 + 64 * (32 + 32))
    assert m.flops_per_token(seq) == 6 * n + attn_full + attn_lin
    job = make_job(m, hardware("h100"), 8, 8, 16, seq)
    dense, _, _ = params(m)
    assert dense == (3 * lin + full) / 4 + mlp
    assert evaluate(job, parse_strategy("dp=8"))["step_s"][0] > 0


def _report(tmp_path: Path) -> Path:
    """A hand-made analyze report: A100 40GB (312 TFLOP/s bf16), median step 100 ms."""
    doc = {
        "ranks": [
            {
                "rank": 0,
                "hardware": {"name": "A100-SXM-40GB", "peak_tflops": 312.0},
                "step_stats": {"median_ns": 100_000_000},
                "roofline_by_category": [
                    {"category": "gemm", "dur_ns": 20_000_000, "flops": 3.12e12},
                    {"category": "elementwise", "dur_ns": 5_000_000, "flops": 0.0},
                    {"category": "attention", "dur_ns": 25_000_000, "flops": 1.56e12},
                    {"category": "comm:all_reduce", "dur_ns": 10_000_000, "flops": 0.0},
                ],
                "collectives": {"all_reduce": {"comm_ns": 10_000_000, "overlapped_ns": 6_000_000}},
            }
        ],
        # two matched collectives of >= 1 MiB at 25% and 75% of the link (median 50%) and a small one (ignored)
        "cluster": {
            "collectives": [
                {"bytes": 64 << 20, "busbw_gbps": 25.0, "peak_gbps": 100.0},
                {"bytes": 8 << 20, "busbw_gbps": 75.0, "peak_gbps": 100.0},
                {"bytes": 4096, "busbw_gbps": 1.0, "peak_gbps": 100.0},
            ]
        },
    }
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    return path


def test_efficiencies_from_an_analysis_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.planner.from_trace import read

    te = read(str(_report(tmp_path)))
    assert te.step_s == pytest.approx(0.1)
    assert te.gemm_eff == pytest.approx(3.12e12 / (0.025 * 312e12))  # 0.4: elementwise time counts, comm does not
    assert te.attn_eff == pytest.approx(1.56e12 / (0.025 * 312e12))  # 0.2
    assert te.dp_overlap == pytest.approx(0.6)
    assert te.comm_scale == pytest.approx(1 / 0.5)
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "a100-40gb",
        "--devices",
        "8",
        "--global-batch",
        "32",
        "--seq-len",
        "4096",
    ]
    assert (
        main(
            args
            + [
                "--evaluate",
                "dp=8,zero=3",
                "--baseline",
                "tp=2,dp=4,zero=1",
                "--from-analysis",
                str(_report(tmp_path)),
                "--json",
            ]
        )
        == 0
    )
    rec = json.loads(capsys.readouterr().out)
    job = make_job(model("llama3-8b"), hardware("a100-40gb"), 8, 8, 32, 4096).replaced(
        gemm_eff=0.4,
        attn_eff=0.2,
        measured_dp_overlap=0.6,
        comm_scale=2.0,
    )
    new = evaluate(job, parse_strategy("dp=8,zero=3"))["step_s"][0]
    base = evaluate(job, parse_strategy("tp=2,dp=4,zero=1"))["step_s"][0]
    assert rec["what_if"]["predicted_step_time_s"] == pytest.approx(0.1 * new / base)
    assert rec["calibration"]["measured_gemm_eff"] == pytest.approx(0.4)
    assert "trace_hardware_differs" not in rec["calibration"]  # traced on the A100-40GB planned for
    other = [a if a != "a100-40gb" else "h100" for a in args]
    assert (
        main(
            other
            + ["--evaluate", "dp=8,zero=3", "--baseline", "tp=2,dp=4,zero=1", "--from-analysis", str(_report(tmp_path))]
        )
        == 0
    )
    assert "warning: the trace ran on A100-SXM-40GB, not on the --hardware given" in " ".join(
        capsys.readouterr().out.split()
    )
    (tmp_path / "bad.json").write_text("[1, 2]")
    assert main(args + ["--evaluate", "dp=8", "--baseline", "dp=8", "--from-analysis", str(tmp_path / "bad.json")]) == 2


def test_trace_link_tiers_give_the_intra_and_inter_node_scales() -> None:
    from stepscope.planner.from_trace import from_report

    def doc(collectives: list[dict]) -> dict:
        return {
            "ranks": [{"rank": 0, "step_stats": {"median_ns": 1e8}, "hardware": {"peak_tflops": 312}}],
            "cluster": {"collectives": collectives},
        }

    big = 64 << 20
    intra = [{"bytes": big, "busbw_gbps": 200.0, "peak_gbps": 300.0, "link": "intra"}]  # 2/3 of NVLink: scale 1.5
    inter = [
        {"bytes": big, "busbw_gbps": 5.0, "peak_gbps": 25.0, "link": "inter"},  # 1/5 and 3/5 of the NIC:
        {"bytes": big, "busbw_gbps": 15.0, "peak_gbps": 25.0, "link": "inter"},
    ]  # median 2/5, scale 2.5
    both = from_report(doc(intra + inter))
    assert both.comm_scale == pytest.approx(1.5) and both.inter_scale == pytest.approx(2.5 / 1.5)
    only_inter = from_report(doc(inter))
    assert only_inter.comm_scale is None and only_inter.inter_scale == pytest.approx(2.5)  # NVLink keeps its prior
    # the planner divides inter-node bandwidth by both: 2/5 of the catalog's; the slower transfer
    # is then overlapped as before (the scales are bandwidths; step latencies stay)
    job = make_job(from_config_dict(TINY), hardware("a100"), 16, 8, 32, 2048).replaced(
        comm_scale=both.comm_scale,
        inter_scale=both.inter_scale,
    )
    r = evaluate(job, parse_strategy("dp=16"))
    dense, _, emb = params(job.model)
    inter_bw = hardware("a100").inter_node_gbps * 1e9 * 2 / 5
    raw = 2 * 15 / 16 * 4 * (8 * dense + emb) / inter_bw + 2 * 15 * 20e-6  # fp32 all-reduce over 2 nodes
    window = r["compute_s"][0] / 2 * 2 / 3  # 2 micro-batches: the last one's backward
    assert r["dp_s"][0] == pytest.approx(raw - 0.7 * min(raw, window))


def test_real_report_without_shapes_keeps_priors(tmp_path: Path) -> None:
    """The bundled A100 trace has no input shapes: no FLOPs, so no efficiency, but its step time."""
    from stepscope.planner.from_trace import read

    out = tmp_path / "a.json"
    assert (
        main(
            [
                "analyze",
                str(Path(__file__).parents[2] / "examples/traces/a100_nccl_rank0.json.gz"),
                "--json",
                str(out),
                "-q",
            ]
        )
        == 0
    )
    steps = sorted(s["step_time_ns"] for s in json.loads(out.read_text())["ranks"][0]["steps"])
    te = read(str(out))
    assert te.gemm_eff is None and te.attn_eff is None
    assert te.step_s == pytest.approx(float(np.median(steps)) * 1e-9)


def test_calibrate_from_csv_recovers_known_efficiencies(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.planner.calibrate import ATTN_GRID, COMM_GRID, GEMM_GRID

    g, a, c = float(GEMM_GRID[18]), float(ATTN_GRID[9]), float(COMM_GRID[8])
    lines = ["model,hardware,devices,global_batch,seq_len,strategy,step_time_s"]
    for strat, seq in [
        ("tp=8", 2048),
        ("tp=2;dp=4;zero=1", 16384),
        ("dp=8;zero=3", 4096),
        ("tp=4;dp=2;recompute=full", 32768),
        ("dp=8", 1024),
    ]:
        st = strat.replace(";", ",")
        job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, seq).replaced(
            gemm_scale=g, attn_scale=a, comm_scale=c
        )
        lines.append(f'llama3-8b,h100,8,16,{seq},"{st}",{float(evaluate(job, parse_strategy(st))["step_s"][0])!r}')
    csv_path = tmp_path / "runs.csv"
    csv_path.write_text("\n".join(lines) + "\n")
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
    ]
    assert main(args + ["--evaluate", "tp=2,dp=4", "--calibrate", str(csv_path), "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    cal = rec["calibration"]
    assert (cal["gemm_scale"], cal["attn_scale"], cal["comm_scale"]) == (g, a, c)
    assert cal["inter_scale"] == 1.0  # one node: nothing informs the inter-node tier, it keeps the prior
    assert cal["mape_after_leave_one_out"] < 0.02 < cal["mape_before"]
    truth = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 4096).replaced(
        gemm_scale=g, attn_scale=a, comm_scale=c
    )
    assert rec["step_time_s"] == pytest.approx(evaluate(truth, parse_strategy("tp=2,dp=4"))["step_s"][0])
    csv_path.write_text(
        "model,hardware,devices,global_batch,seq_len,strategy,step_time_s\nllama3-8b,h100,8,16,4096,dp=8,abc\n"
    )
    assert main(args + ["--calibrate", str(csv_path)]) == 2
    assert "numeric step_time_s" in capsys.readouterr().err
    # a framework column of the wrong type names itself, not the step time
    csv_path.write_text(
        "model,hardware,devices,global_batch,seq_len,strategy,step_time_s,dp_bucket_mb\n"
        "llama3-8b,h100,8,16,4096,dp=8,2.0,abc\nllama3-8b,h100,8,16,4096,dp=8,2.0,\n"
    )
    assert main(args + ["--calibrate", str(csv_path)]) == 2
    err = capsys.readouterr().err
    assert (
        "line 2: dp_bucket_mb must be a finite number >= 0 (MB), not 'abc'" in err
        and len(err.strip().splitlines()) == 1
    )


def test_pipeline_p2p_by_hand() -> None:
    """pp=4, dp=2, mb=1, 16 sequences -> 8 micro-batches; hop = s*b*h*2/tp bytes over NVLink
    (tp*pp = 4 <= 8 ranks per node) + 10 us; exposed = 2 * (3 fill/drain + 8 * 0.2) hops."""
    job = job_from_record(devices=8, batch=16)
    r = evaluate(job, parse_strategy("pp=4,dp=2,mb=1"))
    hop = 2048 * 1 * 1024 * 2 / 450e9 + 10e-6
    assert r["pp_p2p_s"][0] == pytest.approx(2 * (3 + 8 * 0.2) * hop)
    assert evaluate(job, parse_strategy("dp=8"))["pp_p2p_s"][0] == 0.0
    assert r["hfu"][0] == pytest.approx(r["mfu"][0])  # no recompute
    # H100 "80 GB": CUDA reports 85,018,279,936 B (79.18 GiB) in a real H100 trace
    assert r["headroom_gb"][0] == pytest.approx(85.018279936 - r["total_gb"][0])


def test_compute_time_by_hand_with_the_device_matmul_ceiling_and_fp8_only_on_gemms() -> None:
    """compute = (GEMM FLOPs / shape x fp8 factor / gemm_eff + attention FLOPs / attn_eff) /
    (devices x bf16 peak), with gemm_eff = 0.75 x matmul_eff and attn_eff = 0.6 x that (priors).
    dp-only, 8 sequences of 4096 on 8 devices: one sequence (4096 tokens) per micro-batch; each
    linear at its shape efficiency (gemm_by_hand.linear_shape): the fused q/k/v 2048 x 6144, the
    output projection 2048 x 2048, the fused gate and up 2048 x 8192, the down projection 4096 x
    2048, the output layer 2048 x 32000; plus each GEMM kernel's 5.3 us (H100): per layer 4
    forward kernels (q/k/v, o, gate-and-up, down), x 3 with the backward's, and the output layer's 3."""
    from stepscope.planner.rates import efficiencies

    cfg = {**TINY, "hidden_size": 2048, "num_attention_heads": 16}
    m = from_config_dict(cfg)
    seq, batch = 4096, 8
    tokens = batch * seq
    n = m.matmul_params_per_token()
    attn_flops = (m.flops_per_token(seq) - 6 * n) * tokens
    mixer, logits = 6 * 4 * 2048 * 2048 * 8 * tokens, 6 * 32000 * 2048 * tokens
    mlp = 6 * n * tokens - mixer - logits
    assert mlp == 6 * 3 * 2048 * 4096 * 8 * tokens and attn_flops > 0
    dense_flops = (
        mixer * 3 / 4 / _linear_shape(4096, 2048, 6144)
        + mixer / 4 / _linear_shape(4096, 2048, 2048)
        + mlp * 2 / 3 / _linear_shape(4096, 2048, 8192)
        + mlp / 3 / _linear_shape(4096, 4096, 2048)
        + logits / _linear_shape(4096, 2048, 32000)
    )  # shape-weighted
    kernels_s = (3 * 4 * 8 + 3) * H100_KERNEL_S  # one micro-batch
    h100 = hardware("h100")
    g, a = 0.75 * 0.803, 0.6 * 0.75 * 0.803  # MAMF 794.5 / 989.4 TFLOP/s (catalog source)
    # elementwise bytes: 6 B x (10 h + 3 f) per token and layer (2 norms, 2 residual adds, SwiGLU)
    elem_s = 6 * (10 * 2048 + 3 * 4096) * 8 * tokens / 3350e9 / 8
    # and the loss: 24 B per token and vocabulary entry at HBM bandwidth
    loss_s = 24 * 32000 * tokens / 3350e9 / 8
    bf16 = evaluate(make_job(m, h100, 8, 8, batch, seq), parse_strategy("dp=8"))
    assert bf16["compute_s"][0] == pytest.approx(
        (dense_flops / g + attn_flops / a) / (8 * 989.4e12) + elem_s + loss_s + kernels_s
    )
    # fp8: the GEMM 75% of the dense work speeds up by the ratio of achievable rates, except the
    # output layer's; attention and the elementwise rest stay at the bf16 rate
    speedup = (1978.9 * 0.709) / (989.4 * 0.803)
    fp8 = evaluate(make_job(m, h100, 8, 8, batch, seq, precision="fp8"), parse_strategy("dp=8"))
    # plus the tensorwise dynamic-scaling casts (torchao's roofline, casts fused with the producer):
    # 4 B x (inputs: 2 normed h + attention output 2048 + MLP activation 4096; output gradients:
    # q, k, v 3 x 2048, gate and up 2 x 4096, o and down 2 x 2048) per token and layer, and 8 B
    # per weight element each micro-batch (one here: a sequence per device)
    cast_s = 4 * ((2 * 2048 + 2048 + 4096) + (3 * 2048 + 2 * 4096 + 2 * 2048)) * 8 * tokens / 3350e9 / 8
    weights_s = 8 * (4 * 2048 * 2048 + 3 * 2048 * 4096) * 8 / 3350e9
    # the output layer stays at the bf16 rate (torchtitan filters "output"; Megatron's is not a
    # Transformer Engine layer)
    out_gemm = logits / _linear_shape(4096, 2048, 32000)
    assert fp8["compute_s"][0] == pytest.approx(
        ((dense_flops - out_gemm) * (0.75 / speedup + 0.25) + out_gemm) / g / (8 * 989.4e12)
        + attn_flops / a / (8 * 989.4e12)
        + elem_s
        + loss_s
        + cast_s
        + weights_s
        + kernels_s
    )
    # a device without a measured ceiling takes 0.7; explicit efficiencies (from a trace) win
    # devices without a measured ceiling take the 0.7 prior: a GPU 0.75 of it, a TPU (vector work
    # issued beside the matrix units) all of it
    assert efficiencies(make_job(m, hardware("H100-SXM-96GB-500W"), 8, 8, batch, seq))[:2] == pytest.approx(
        (0.75 * 0.7, 0.6 * 0.75 * 0.7)
    )
    assert efficiencies(make_job(m, hardware("tpu-v5p"), 8, 8, batch, seq))[:2] == pytest.approx((0.7, 0.6 * 0.7))
    assert efficiencies(make_job(m, h100, 8, 8, batch, seq, gemm_eff=0.4, attn_eff=0.2)) == (0.4, 0.2, 1.0)
    # a measured (trace) efficiency already includes the elementwise kernels and the GEMM kernels'
    # fixed time: no separate terms
    measured = evaluate(
        make_job(m, h100, 8, 8, batch, seq, gemm_eff=g, attn_eff=a), parse_strategy("dp=8")
    )  # shape still applies
    assert measured["compute_s"][0] == pytest.approx((dense_flops / g + attn_flops / a) / (8 * 989.4e12))


def _nominal_links(job: Job) -> Job:
    """The job on a copy of its device without measured collective bandwidth (nominal NVLink) and
    with slow GEMMs (5% of peak), so every GEMM outlasts the collective fused with it and TP time
    stays below compute: an overlap test sees its mechanism's share unclipped."""
    return dataclasses.replace(job, hw=dataclasses.replace(job.hw, intra_node_busbw_gbps={})).calibrated(gemm_eff=0.05)


def test_tp_overlap_hides_all_but_one_chunk() -> None:
    job = _nominal_links(job_from_record(seq=4096))
    off = evaluate(job, parse_strategy("tp=4,dp=2"))
    on = evaluate(job, parse_strategy("tp=4,dp=2,async_tp=true"))
    assert off["tp_s"][0] > 0 and off["tp_s"][0] < off["compute_s"][0]
    assert on["tp_s"][0] == pytest.approx(off["tp_s"][0] / 4)  # (tp-1)/tp of it behind the GEMMs
    assert on["step_s"][0] == pytest.approx(off["step_s"][0] - off["tp_s"][0] * 3 / 4)
    s = space(job.with_settings(tp_overlap="full"))
    assert np.all(s["tp_overlap"] == 1) and np.all(space(job)["tp_overlap"] == 0)


@pytest.mark.parametrize(
    "mode,tp,hidden",
    [
        ("bwd", 4, 0.25),  # 2 of 8 collectives: the column-parallel backward reduce-scatters
        ("bwd+shard", 4, 0.25 + 2 / 8 * 2 / 4),  # + 2 all-gathers each under a 1/tp shard's GEMM
        ("bwd+shard", 2, 0.5),  # at tp=2 the same as full overlap, (tp-1)/tp
        ("full", 8, 7 / 8),
        ("none", 8, 0.0),
    ],
)
def test_tp_overlap_mechanisms_hide_their_share(mode: str, tp: int, hidden: float) -> None:
    job = _nominal_links(make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 4096))
    off = evaluate(job, parse_strategy(f"tp={tp}"))
    on = evaluate(job, parse_strategy(f"tp={tp},tp_overlap={mode}"))
    assert off["tp_s"][0] < off["compute_s"][0]  # nothing capped by the compute time
    assert on["tp_s"][0] == pytest.approx(off["tp_s"][0] * (1 - hidden))


def _plan_8b(capsys: pytest.CaptureFixture[str], strategy: str, *flags: str) -> dict:
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
        strategy,
        "--json",
        *flags,
    ]
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def test_tp_overlap_flag_on_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    off, on, bwd = (
        _plan_8b(capsys, "tp=8", *f)
        for f in (
            (),
            (
                "--set",
                "tp_overlap=full",
            ),
            ("--set", "tp_overlap=bwd"),
        )
    )
    assert (
        on["strategy"]["tp_overlap"] == "full"
        and off["strategy"]["tp_overlap"] == "none"
        and bwd["strategy"]["tp_overlap"] == "bwd"
    )
    # the flag reaches the model: the same as the strategy key (the amounts: tests of planner/tp_overlap.py)
    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 4096)
    for rec, mode in ((on, "full"), (bwd, "bwd"), (off, "none")):
        assert rec["time_s"]["tp"] == pytest.approx(evaluate(job, parse_strategy(f"tp=8,tp_overlap={mode}"))["tp_s"][0])
    assert on["time_s"]["tp"] < bwd["time_s"]["tp"] < off["time_s"]["tp"]


def test_context_parallel_ranks_share_the_zero_shards_and_the_gradient_reduction() -> None:
    """cp ranks hold the same weights: FSDP shards over dp x cp, gradients are reduced over dp x cp."""
    job = job_from_record(devices=8, batch=16, seq=4096)
    h, L = 1024, 8
    p_dev = L * (4 * h * h + 3 * h * 4096) + 32000 * h  # tp = pp = 1
    r = evaluate(job, parse_strategy("dp=4,cp=2,zero=3"))
    assert r["weights_gb"][0] == pytest.approx(2 * p_dev / 8 / 1e9)
    assert r["optimizer_gb"][0] == pytest.approx(12 * p_dev / 8 / 1e9)
    # plain DP: ring all-reduce of the fp32 gradients over the 8 ranks (one node: the H100 node's
    # measured all-reduce bus bandwidth, 436 GB/s; all-gather 249.8, reduce-scatter 249.7; 10 us
    # per step), 70% hidden
    r0 = evaluate(job, parse_strategy("dp=4,cp=2"))
    raw = 2 * 7 / 8 * 4 * p_dev / 436e9 + 2 * 7 * 10e-6
    # 16 sequences over 4 replicas, mb 1: 4 micro-batches; the all-reduce waits for the last one's
    # backward (2/3 of a quarter of the compute)
    assert r0["dp_s"][0] == pytest.approx(raw - 0.7 * min(raw, r0["compute_s"][0] / 4 * 2 / 3))
    # ZeRO-1 (distributed optimizer): reduce-scatter of the fp32 gradients under the last backward,
    # then the all-gather of the updated bf16 weights: exposed, or under the next step's first
    # forward (1/3 of a micro-batch) when the framework overlaps it
    r1 = evaluate(job, parse_strategy("dp=4,cp=2,zero=1"))
    rs, ag = 7 / 8 * 4 * p_dev / 249.7e9 + 7 * 10e-6, 7 / 8 * 2 * p_dev / 249.8e9 + 7 * 10e-6
    micro = r1["compute_s"][0] / 4
    assert r1["dp_s"][0] == pytest.approx(rs - 0.7 * min(rs, micro * 2 / 3) + ag)
    r2 = evaluate(job.replaced(param_gather_overlap=True), parse_strategy("dp=4,cp=2,zero=1"))
    assert r2["dp_s"][0] == pytest.approx(rs - 0.7 * min(rs, micro * 2 / 3) + ag - 0.7 * min(ag, micro / 3))


def test_the_torchtitan_h100_variant_is_its_own_catalog_device() -> None:
    hw = hardware("h100-96gb")
    assert (hw.name, hw.hbm_gb, hw.hbm_gbps) == ("H100-SXM-96GB-500W", 96, 2400)
    assert hw.matmul_eff == {}  # its 500 W ceiling is unmeasured: the planner's 0.7 applies


def test_recompute_replays_the_forward_collectives() -> None:
    job = job_from_record(seq=4096)
    none = evaluate(job, parse_strategy("tp=4,dp=2"))
    full = evaluate(job, parse_strategy("tp=4,dp=2,recompute=full"))
    assert full["tp_s"][0] == pytest.approx(none["tp_s"][0] * 1.5)  # forward half of fwd + bwd, replayed


def test_attention_without_flash_kernels_by_hand() -> None:
    """Materialized scores: attention FLOPs without causal skipping, and 32 B per score element
    at HBM bandwidth (recomputed like the rest under full recompute)."""
    m = from_config_dict(TINY)
    seq, batch = 2048, 8
    tokens = batch * seq
    flash = evaluate(make_job(m, hardware("a100"), 8, 8, batch, seq), parse_strategy("dp=8"))
    plain = evaluate(make_job(m, hardware("a100"), 8, 8, batch, seq, flash_attention=False), parse_strategy("dp=8"))
    attn_causal = m.flops_per_token(seq) - 6 * m.matmul_params_per_token()
    attn = 0.6 * 0.75 * 0.869 * 312e12  # achieved attention rate on an A100
    extra_flops_s = attn_causal * tokens / attn / 8  # the masked half is computed too
    scores_s = 32 * 16 * seq * tokens * 8 / 2039e9 / 8  # 16 heads x seq scores per token, 8 layers
    assert plain["compute_s"][0] - flash["compute_s"][0] == pytest.approx(extra_flops_s + scores_s)
    assert plain["mfu"][0] < flash["mfu"][0] and plain["tflops_per_device"][0] * plain["step_s"][0] == pytest.approx(
        flash["tflops_per_device"][0] * flash["step_s"][0]
    )  # model FLOPs are the same


def test_attention_without_flash_kernels_stores_the_softmax_output_by_hand() -> None:
    """Without flash attention the softmax output, the dropout mask and the dropout output (2 + 1 +
    2 B per score, Korthikanti et al.'s 5as/h) are saved for backward unless the policy recomputes
    the attention core: TINY (8 layers, 16 heads), tp 4, one micro-batch of 2 sequences of 2048:
    5 x 16 x 2048 x 2048 x 2 / 4 B = 167,772,160 B per layer. Selective and full store none, but
    the layer regenerated in backward holds them once."""
    m = from_config_dict(TINY)
    per_layer = 5 * 16 * 2048 * 2048 * 2 / 4
    for policy, layers in (("none", 8), ("selective", 1), ("full", 1)):
        st = parse_strategy(f"tp=4,dp=2,mb=2,recompute={policy}")
        flash = evaluate(make_job(m, hardware("a100"), 8, 8, 4, 2048), st)
        plain = evaluate(make_job(m, hardware("a100"), 8, 8, 4, 2048, flash_attention=False), st)
        assert (plain["activations_gb"][0] - flash["activations_gb"][0]) * 1e9 == pytest.approx(layers * per_layer), (
            policy
        )


def test_interleaved_1f1b_holds_more_in_flight_by_hand() -> None:
    """Megatron's interleaved 1F1B warms the first stage up with 2(pp-1) + (vpp-1) pp chunks and
    runs one more forward before its first backward: pp 4, vpp 2, 8 layers (2 per stage, 1 per
    chunk) -> 2x3 + 4 + 1 = 11 chunks = 11 layers of activations, against 1F1B's 4 micro-batches x
    2 layers = 8: x 11/8 = 1 + 3/8 (Korthikanti et al.'s 1 + (pp-1)/(pp vpp)). With only as many
    micro-batches as stages there is no room for more: all 4 x 2 layers either way."""
    m = from_config_dict(TINY)
    job = make_job(m, hardware("h100"), 8, 8, 16, 2048)
    plain = evaluate(job, parse_strategy("pp=4,dp=2,mb=1"))  # 8 micro-batches per replica
    inter = evaluate(job, parse_strategy("pp=4,vpp=2,dp=2,mb=1"))
    assert inter["activations_gb"][0] == pytest.approx(plain["activations_gb"][0] * 11 / 8)
    few = make_job(m, hardware("h100"), 8, 8, 8, 2048)  # 4 micro-batches per replica
    assert evaluate(few, parse_strategy("pp=4,vpp=2,dp=2,mb=1"))["activations_gb"][0] == pytest.approx(
        evaluate(few, parse_strategy("pp=4,dp=2,mb=1"))["activations_gb"][0]
    )


def test_selective_recompute_costs_the_attention_cores_forward_by_hand() -> None:
    """Selective recompute (Megatron's core attention) re-runs the attention core's forward in
    backward: a third of the attention FLOPs at the attention rate, and without flash attention the
    13 B per score its forward moves (QK^T write, softmax/dropout read and write with the mask),
    not a fixed share of the layer. TINY (8 layers, 16 heads), 8 A100s, 8 sequences of 2048."""
    m = from_config_dict(TINY)
    seq, batch = 2048, 8
    tokens = batch * seq
    rate = 0.6 * 0.75 * 0.869 * 312e12  # achieved attention rate on an A100
    for flash in (True, False):
        job = make_job(m, hardware("a100"), 8, 8, batch, seq, flash_attention=flash)
        none, sel = (evaluate(job, parse_strategy(f"dp=8,recompute={p}")) for p in ("none", "selective"))
        attn = (m.flops_per_token(seq, causal=flash) - 6 * m.matmul_params_per_token()) * tokens
        extra = attn / 3 / rate / 8 + (0.0 if flash else 13 * 16 * seq * tokens * 8 / 2039e9 / 8)
        assert sel["compute_s"][0] - none["compute_s"][0] == pytest.approx(extra), flash
        assert sel["hfu"][0] / sel["mfu"][0] == pytest.approx(1 + attn / 3 / (m.flops_per_token(seq) * tokens)), flash


def test_plan_inputs_batch_in_tokens_reserve_and_gradient_dtype(capsys: pytest.CaptureFixture[str]) -> None:
    base = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--seq-len",
        "4096",
        "--evaluate",
        "dp=8,zero=1",
        "--json",
    ]
    assert main(base + ["--global-batch", "16"]) == 0
    ref = json.loads(capsys.readouterr().out)
    assert main(base + ["--global-batch-tokens", str(16 * 4096)]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] == ref["step_time_s"]
    assert main(base + ["--global-batch", "16", "--set", "reserve_gb=5", "--set", "grad_dtype=bf16"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["memory_gb"]["reserve"] == pytest.approx(5.0)
    assert rec["memory_gb"]["grads"] == pytest.approx(ref["memory_gb"]["grads"] / 2)  # 2 B instead of 4
    assert main(base + ["--global-batch-tokens", "1000"]) == 2  # not whole sequences
    assert main(base + ["--global-batch", "16", "--precision", "fp4"]) == 2
    assert main(base + ["--global-batch", "16", "--global-batch-tokens", str(16 * 4096)]) == 2  # one or the other
    for bad in (["--global-batch", "0"], ["--global-batch", "16", "--set", "reserve_gb=-1"]):
        assert main(base + bad) == 2
    assert main([*base[:6], "0", *base[7:], "--global-batch", "16"]) == 2  # --devices 0
    err = capsys.readouterr().err
    assert "devices must be a whole number >= 1" in err and "Traceback" not in err


def test_evaluation_in_blocks_equals_one_pass() -> None:
    from stepscope.planner.cost import CHUNK, _evaluate

    job = job_from_record(devices=64, batch=256)
    s = space(job)
    reps = CHUNK // len(s["tp"]) + 2
    big = {k: np.tile(v, reps) for k, v in s.items()}
    n = len(big["tp"])
    assert n > CHUNK
    scaled = job.replaced(gemm_scale=np.linspace(0.5, 1.5, n))  # a per-configuration field is sliced too
    blocks, one = evaluate(scaled, big), _evaluate(scaled, big)
    for k in one:
        np.testing.assert_array_equal(blocks[k], one[k])


def test_terminal_table_leaves_out_columns_that_are_off_in_every_row() -> None:
    from rich.console import Console

    from stepscope.planner.records import records
    from stepscope.planner.search import search
    from stepscope.report.plan_terminal import table

    job = job_from_record(devices=16, batch=32)
    plan = search(job, 5)
    con = Console(record=True, width=250)
    con.print(table(records(plan.strategies, plan.results)))
    text = con.export_text()
    header = next(line for line in text.splitlines() if "TP" in line and "step s" in line)
    assert "EP s" not in header and "offl s" not in header  # a dense model, no offload in the top 5
    assert f"{plan.results['step_s'][0]:.2f}" in text  # the step time is printed whole
    off = evaluate(job, parse_strategy("dp=16,offload=1"))
    con = Console(record=True, width=250)
    con.print(table(records(parse_strategy("dp=16,offload=1"), off)))
    assert "offl s" in con.export_text()


def test_gpt_oss_config_with_sliding_window_layers_by_hand() -> None:
    """openai/gpt-oss-120b config.json (the keys that matter): 36 layers alternating sliding (window
    128) and full attention, 128 experts of width 2880, 4 per token, GQA 64/8 heads of 64."""
    cfg = {
        "hidden_size": 2880,
        "intermediate_size": 2880,
        "num_hidden_layers": 36,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "head_dim": 64,
        "num_local_experts": 128,
        "num_experts_per_tok": 4,
        "experts_per_token": 4,
        "vocab_size": 201088,
        "hidden_act": "silu",
        "model_type": "gpt_oss",
        "sliding_window": 128,
        "layer_types": ["sliding_attention", "full_attention"] * 18,
    }
    m = from_config_dict(cfg)
    d = 2880
    attn = 2 * d * 64 * 64 + 2 * d * 8 * 64
    expert = 3 * d * 2880
    dense, experts, emb = params(m)
    total = 36 * (attn + 128 * expert + d * 128) + 2 * 201088 * d  # untied embedding and head
    assert (dense + experts) * 36 + 2 * emb == pytest.approx(total)
    assert total == pytest.approx(116.8e9, rel=0.01)  # published: 116.8B total
    active = 36 * (attn + 4 * expert + d * 128) + 201088 * d
    assert m.matmul_params_per_token() == pytest.approx(active) and active == pytest.approx(
        5.13e9, rel=0.01
    )  # 5.1B active
    seq = 8192
    full = 6 * 18 * (seq / 2) * 64 * 128  # 18 full layers: s/2 keys per query on average
    window = 6 * 18 * ((128 * 129 / 2 + (seq - 128) * 128) / seq) * 64 * 128  # 18 sliding layers
    assert m.flops_per_token(seq) == pytest.approx(6 * active + full + window)
    # Qwen2-style configs carry a window they do not use; Mistral-style: every layer slides
    assert from_config_dict({**TINY, "sliding_window": 4096, "use_sliding_window": False}).sliding_layers == 0
    assert from_config_dict({**TINY, "sliding_window": 4096}).sliding_layers == 8


def test_tp_stays_in_a_node_unless_allowed() -> None:
    job = job_from_record(devices=16, batch=32)  # 16 heads, 8 devices per node
    assert space(job)["tp"].max() == 8
    wide = space(job.with_settings(tp_across_nodes=True))
    assert wide["tp"].max() == 16
    r = evaluate(job, {k: v[wide["tp"] == 16][:1] for k, v in wide.items()})
    assert r["tp_s"][0] > evaluate(job, parse_strategy("tp=8,dp=2"))["tp_s"][0]  # inter-node link


def test_tpu_slices_share_ici_and_talk_over_dcn(capsys: pytest.CaptureFixture[str]) -> None:
    """TPU v5e (catalog: 256-chip ICI slice at 200 GB/s, DCN 6.4 Tbps per pod = 3.125 GB/s per
    chip): plans default to one slice per 'node', so FSDP inside a slice prices ICI and the
    cross-slice replicas of HSDP price DCN."""
    hw = hardware("tpu-v5e")
    assert (hw.node_devices, hw.intra_node_gbps, hw.inter_node_gbps) == (256, 200, 3.125)
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "tpu-v5e",
        "--devices",
        "512",
        "--global-batch",
        "512",
        "--seq-len",
        "2048",
        "--evaluate",
        "dp=512,zero=3,hsdp=256",
        "--json",
    ]
    assert main(args) == 0
    rec = json.loads(capsys.readouterr().out)
    job = make_job(model("llama3-8b"), hw, 512, 256, 512, 2048)
    assert rec["step_time_s"] == pytest.approx(evaluate(job, parse_strategy("dp=512,zero=3,hsdp=256"))["step_s"][0])
    dense, _, emb = params(job.model)
    p_dev = 32 * dense + emb
    # one micro-batch: under all the compute; each collective layer by layer (32 layers)
    ici = 255 / 256 * (2 + 2 + 4) * p_dev / 200e9 + 32 * 3 * 255 * 10e-6
    dcn = 2 * 1 / 2 * 4 * p_dev / 256 / 3.125e9 + 32 * 2 * 1 * 20e-6  # under the backward, 2/3 of it
    r = evaluate(job, parse_strategy("dp=512,zero=3,hsdp=256"))
    c = r["compute_s"][0]
    assert r["dp_s"][0] == pytest.approx(ici - 0.7 * min(ici, c) + dcn - 0.7 * min(dcn, c * 2 / 3))
    assert hardware("h100").node_devices is None  # GPUs: 8 per node unless told


def test_uneven_pipeline_stages_by_hand() -> None:
    """8 layers on 3 stages: the middle stage holds ceil(8/3) = 3 layers, the ends the 5 left, 3
    first and 2 last (with the output layer); the most loaded stage sets the memory peak and, but
    for the output layer, the pace: its layers take 3 / (8/3) = 1.125 x the even share."""
    job = job_from_record(devices=6, batch=12)
    s = space(job)
    assert 3 in set(s["pp"].tolist()) and 6 in set(s["pp"].tolist())  # divisors, not only powers of two
    assert not np.any((s["pp"] == 3) & (s["vpp"] > 1))  # interleaving needs even stages
    r = evaluate(job, parse_strategy("pp=3,dp=2"))
    dense, _, emb = params(job.model)
    assert r["weights_gb"][0] == pytest.approx(2 * (3 * dense + emb) / 1e9)
    even = evaluate(
        dataclasses.replace(job, model=dataclasses.replace(job.model, n_layers=9)), parse_strategy("pp=3,dp=2")
    )
    assert even["weights_gb"][0] == pytest.approx(r["weights_gb"][0])  # 9 layers: the same 3 per stage
    # the pipeline goes at its slowest stage. With 9 layers A (their compute per device) and B
    # (the output layer's): pp = 1 takes A + B, pp = 3 (3 layers a stage) A + 3 B. 8 layers do
    # 8/9 A: the middle stage's 3 of them take A, the last stage's 2 (8/9 A) 2/(8/3) + 3 B
    nine = dataclasses.replace(job, model=dataclasses.replace(job.model, n_layers=9))
    one = float(evaluate(nine, parse_strategy("dp=6"))["compute_s"][0])
    a, b = (3 * one - float(even["compute_s"][0])) / 2, (float(even["compute_s"][0]) - one) / 2
    assert r["compute_s"][0] == pytest.approx(max(a, 2 * a / 3 + 3 * b), rel=1e-9)
    assert r["step_s"][0] < even["step_s"][0]


def test_fsdp_keeping_gathered_weights_trades_memory_for_one_all_gather() -> None:
    job = job_from_record(devices=16, batch=32)
    dense, _, emb = params(job.model)
    p_dev = 8 * dense + emb
    base = evaluate(job, parse_strategy("dp=16,zero=3"))
    kept = evaluate(job, parse_strategy("dp=16,zero=3,reshard_after_forward=false"))
    assert parse_strategy("dp=16,zero=3,keep_params=1")["keep_params"][0] == 1
    assert kept["weights_gb"][0] == pytest.approx(2 * p_dev / 1e9)  # gathered bf16 weights stay
    assert base["weights_gb"][0] == pytest.approx(2 * p_dev / 16 / 1e9)
    hw = job.hw
    # 2 micro-batches: resharding gathers twice per micro-batch and reduce-scatters each one's
    # gradients, under all the compute; kept weights (no pipeline: FSDP2 still reshards after each
    # backward and reduces each micro-batch's gradients) are gathered once per micro-batch
    # (layer by layer: 8 layers, each collective paying the ring's 15 steps of 20 us)
    raw_base = 2 * (15 / 16 * (2 + 2 + 4) * p_dev / (hw.inter_node_gbps * 1e9) + 8 * 3 * 15 * 20e-6)
    raw_kept = 2 * (15 / 16 * (2 + 4) * p_dev / (hw.inter_node_gbps * 1e9) + 8 * 2 * 15 * 20e-6)
    assert base["dp_s"][0] == pytest.approx(raw_base - 0.7 * min(raw_base, base["compute_s"][0]))
    assert kept["dp_s"][0] == pytest.approx(raw_kept - 0.7 * min(raw_kept, kept["compute_s"][0]))
    with pytest.raises(ConfigError):
        parse_strategy("dp=16,zero=1,keep_params=1")
    s = space(job)
    assert np.all((s["keep_params"] == 0) | (s["zero"] == 3)) and np.any(s["keep_params"] == 1)


def test_batch_records_carry_the_framework_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = {"model": "llama3-8b", "hardware": "a100", "devices": 8, "seq_len": 2048, "strategy": "dp=8,zero=1"}
    batch = tmp_path / "b.jsonl"
    batch.write_text(
        "\n".join(
            json.dumps(r)
            for r in (
                {**base, "global_batch": 16},
                {
                    **base,
                    "global_batch_tokens": 16 * 2048,
                    "flash_attention": False,
                    "grad_dtype": "bf16",
                    "reserve_gb": 6,
                },
                {**base, "global_batch": 16, "grad_dtype": "fp64"},
                {**base, "global_batch": 16, "fused_elementwise": "false", "param_gather_overlap": True},
                {**base, "global_batch": 16, "fused_elementwise": "no"},
            )
        )
        + "\n"
    )
    assert main(["plan", "--batch", str(batch)]) == 0
    ref, other, bad, eager, bad_flag = (json.loads(x) for x in capsys.readouterr().out.splitlines())
    assert other["step_time_s"] > ref["step_time_s"]  # materialized attention scores cost time
    assert (
        other["memory_gb"]["grads"] == pytest.approx(ref["memory_gb"]["grads"] / 2)
        and other["memory_gb"]["reserve"] == 6
    )
    assert "grad_dtype" in bad["error"]
    # the string "false" is false (not Python-truthy); eager ops cost time, the overlapped weight
    # all-gather saves some
    assert eager["time_s"]["compute"] > ref["time_s"]["compute"] and eager["time_s"]["dp"] < ref["time_s"]["dp"]
    assert "fused_elementwise" in bad_flag["error"]


def test_ep_overlap_hides_the_all_to_all_behind_another_micro_batch() -> None:
    m = model("mixtral-8x7b")
    job = make_job(m, hardware("h100"), 16, 8, 64, 4096)
    off = evaluate(job, parse_strategy("dp=16,ep=8,zero=1,mb=1"))  # 4 micro-batches per replica
    on = evaluate(job, parse_strategy("dp=16,ep=8,zero=1,mb=1,ep_overlap=1"))
    assert off["ep_s"][0] > 0
    assert on["ep_s"][0] == pytest.approx(max(off["ep_s"][0] - off["compute_s"][0], 0.0))
    one = make_job(m, hardware("h100"), 16, 8, 16, 4096)  # a single micro-batch: nothing to overlap with
    assert evaluate(one, parse_strategy("dp=16,ep=8,zero=1,mb=1,ep_overlap=1"))["ep_s"][0] == pytest.approx(
        evaluate(one, parse_strategy("dp=16,ep=8,zero=1,mb=1"))["ep_s"][0]
    )
    assert np.all(space(job.with_settings(ep_overlap=True))["ep_overlap"] == 1)


def test_strategy_on_off_values() -> None:
    assert parse_strategy("dp=8,offload=on,tp_overlap=1")["offload"][0] == 1
    assert parse_strategy("dp=8,zero=3,reshard_after_forward=true")["keep_params"][0] == 0
    with pytest.raises(ConfigError):
        parse_strategy("dp=8,offload=maybe")


@pytest.mark.parametrize(
    "policy,kept_h_bytes,factor",
    [
        # torchtitan's op-level SAC: wq 4096 + wv 1024 + w1 14336 + w2 4096 outputs, the attention
        # output 4096 and the block input 4096 = 31744 values = 2 * 31744 / 4096 = 15.5 h-bytes; it
        # recomputes wk, wo, w3: (1024 + 4096 + 14336) * 4096 MACs per token
        ("op", 15.5, 1 + 19456 / (3 * 61440)),
        # MaxText's "minimal" (JAX checkpoint_dots_with_no_batch_dims): q 4096 + k, v 2 x 1024 + o 4096
        # + gate, up 2 x 14336 + down 4096 + the block input 4096 = 47104 values = 23.0 h-bytes; it
        # recomputes attention, 8192 * 4096 MACs per token
        ("minimal", 23.0, 1 + 8192 / (3 * 61440)),
    ],
)
def test_shape_counted_recompute_policies_by_hand(policy: str, kept_h_bytes: float, factor: float) -> None:
    """Llama-3-8B (h 4096, 32 query heads and 8 KV heads of 128, MLP 14336), seq 8192: a layer's
    forward is (2*4096 + 2*1024 + 3*14336) * 4096 + 8192 * 4096 (causal QK^T + AV) = 61440 * 4096
    MACs per token."""
    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 8192)
    r = evaluate(job, parse_strategy(f"dp=8,mb=2,recompute={policy}"))
    none = evaluate(job, parse_strategy("dp=8,mb=2"))
    act = 8192 * 2 * 4096 * 32  # s * mb * h * layers (mb = 16 / 8)
    logits = 8192 * 2 * 128256 * 6.0
    assert r["activations_gb"][0] * 1e9 == pytest.approx(act * kept_h_bytes + act / 32 * (34 - kept_h_bytes) + logits)
    assert none["activations_gb"][0] * 1e9 == pytest.approx(act * 34 + logits)
    assert r["hfu"][0] / r["mfu"][0] == pytest.approx(factor)


def test_eager_elementwise_ops_cost_their_counted_bytes() -> None:
    """TINY (h 1024, 16 heads of 64, no GQA, MLP 4096, 8 layers): eager ops move per token and layer
    64 h (two RMSNorms at 36 B instead of 4 per element) + 20 (q + kv) (rotary embeddings in fp32
    complex) + 4 f (SiLU and product as two kernels) more bytes forward, x 3 with backward."""
    job = job_from_record()
    fused = evaluate(job, parse_strategy("dp=8,mb=2"))
    eager = evaluate(job.replaced(fused_elementwise=False), parse_strategy("dp=8,mb=2"))
    per_token = 8 * (64 * 1024 + 20 * (1024 + 1024) + 4 * 4096)
    tokens = 16 * 2048
    assert eager["compute_s"][0] - fused["compute_s"][0] == pytest.approx(
        3 * per_token * tokens / job.hw.hbm_bytes_per_s / 8
    )


def test_eager_flag_on_the_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        _plan_8b(capsys, "dp=8", "--set", "fused_elementwise=false")["step_time_s"]
        > _plan_8b(capsys, "dp=8")["step_time_s"]
    )


def test_gradient_bytes_follow_the_precision_unless_given() -> None:
    """fp16 training reduces fp16 gradients (Megatron without fp32 accumulation, DeepSpeed); bf16
    and fp8 keep and reduce them in fp32."""
    m = from_config_dict(TINY)
    assert make_job(m, hardware("a100"), 8, 8, 16, 2048, precision="fp16").grad_bytes == 2
    assert make_job(m, hardware("a100"), 8, 8, 16, 2048).grad_bytes == 4
    assert make_job(m, hardware("h100"), 8, 8, 16, 2048, precision="fp8").grad_bytes == 4
    assert make_job(m, hardware("a100"), 8, 8, 16, 2048, precision="fp16", grad_dtype="fp32").grad_bytes == 4
    fp16 = evaluate(make_job(m, hardware("a100"), 8, 8, 16, 2048, precision="fp16"), parse_strategy("dp=8,zero=2"))
    dense, _, emb = params(m)
    assert fp16["grads_gb"][0] == pytest.approx(2 * (8 * dense + emb) / 8 / 1e9)


def test_fp8_recipes_cast_bytes_by_hand() -> None:
    """torchao's float8 roofline byte counts for a toy shape (h 4, q 4, kv 2, gated MLP 8), tp 2.
    tensorwise: 4 B x (inputs 2*4 + 4 + 8 = 20, output gradients 4 + 2*2 + 2*8 + 2*4 = 32), on
    1/tp shards; rowwise: the h-wide inputs and gradients are whole on each TP rank (x 2): inputs
    28, gradients 40, 6 B each, plus 4 B per input-gradient element for the rescale: 6*68 + 4*28."""
    from stepscope.catalog.model_flops import ModelShape
    from stepscope.planner.rates import FP8_WEIGHT_BYTES, fp8_cast_bytes

    m = ModelShape(d_model=4, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=2, d_ff=8, vocab=16, gated_mlp=True)
    tensorwise, w_t = fp8_cast_bytes(m, "tensorwise", np.array([2.0])), FP8_WEIGHT_BYTES["tensorwise"]
    rowwise, w_r = fp8_cast_bytes(m, "rowwise", np.array([2.0])), FP8_WEIGHT_BYTES["rowwise"]
    assert tensorwise[0] == 4 * 52 and w_t == 8
    assert rowwise[0] == 6 * 68 + 4 * 28 and w_r == 14
    assert fp8_cast_bytes(m, "rowwise", np.array([1.0]))[0] == 6 * 52 + 4 * 20


def test_tensorwise_fp8_gathers_tp_activations_in_fp8() -> None:
    """The 4 all-gathers of a layer's 8 TP collectives move 1 B instead of 2 with tensorwise
    scaling (torchao's float8 TP plan); rowwise keeps the bf16 plan. Compute differs, TP bytes
    do not otherwise depend on the recipe."""
    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 4096, precision="fp8")
    tw = evaluate(job, parse_strategy("tp=8"))
    rw = evaluate(job.replaced(fp8_recipe="rowwise"), parse_strategy("tp=8"))
    assert tw["tp_s"][0] == pytest.approx(0.75 * rw["tp_s"][0])
    assert rw["compute_s"][0] > tw["compute_s"][0]
    with pytest.raises(ConfigError):
        job.replaced(fp8_recipe="blockwise")


def test_separate_projections_run_narrow_key_value_gemms() -> None:
    """Llama-3-8B (h 4096, q 4096, kv 1024) at tp 8 with a fixed GEMM efficiency (no elementwise
    terms): fused, q/k/v is one (4096 + 2048)/8 = 768-wide GEMM; separate, q is 512 wide and k, v
    128 wide, and the MLP's gate and up (14336/8 = 1792 wide each) are two GEMMs instead of one
    3584 wide. Only those GEMMs' time changes: per token, q and o have 2 x 4096^2 multiply-adds,
    k and v 2 x 4096 x 1024, gate and up 2 x 4096 x 14336; each linear of 4096 inputs and d outputs per device at its shape
    efficiency g(d) (gemm_by_hand.linear_shape, 16 x 4096 tokens); a set GEMM efficiency
    includes the kernels' fixed time."""

    def g(d: float) -> float:
        return _linear_shape(16 * 4096, 4096, d)

    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 4096, gemm_eff=0.5, attn_eff=0.3)
    fused = evaluate(job, parse_strategy("tp=8,mb=16"))
    separate = evaluate(job.replaced(fused_projections=False), parse_strategy("tp=8,mb=16"))
    tokens, layers = 16 * 4096, 32
    q_flops, kv_flops = 6 * 4096 * 4096 * layers * tokens, 6 * 2 * 4096 * 1024 * layers * tokens
    up_flops = 6 * 2 * 4096 * 14336 * layers * tokens
    fused_t = (q_flops + kv_flops) / g(768) + q_flops / g(512) + up_flops / g(3584)
    separate_t = 2 * q_flops / g(512) + kv_flops / g(128) + up_flops / g(1792)
    expected = (separate_t - fused_t) / 0.5 / (8 * 989.4e12)
    assert separate["compute_s"][0] - fused["compute_s"][0] == pytest.approx(expected)


def test_fp8_recipe_and_projection_flags_on_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tensorwise = _plan_8b(capsys, "tp=8", "--precision", "fp8")
    rowwise = _plan_8b(capsys, "tp=8", "--precision", "fp8", "--set", "fp8_recipe=rowwise")
    assert rowwise["step_time_s"] > tensorwise["step_time_s"]
    assert (
        _plan_8b(capsys, "tp=8", "--set", "fused_projections=false")["step_time_s"]
        > _plan_8b(capsys, "tp=8")["step_time_s"]
    )
    rec = {
        "model": "llama3-8b",
        "hardware": "h100",
        "devices": 8,
        "global_batch": 16,
        "seq_len": 4096,
        "precision": "fp8",
        "strategy": "tp=8",
    }
    path = tmp_path / "runs.jsonl"
    path.write_text(
        "\n".join(json.dumps(r) for r in (rec, {**rec, "fp8_recipe": "rowwise"}, {**rec, "fp8_recipe": "blockwise"}))
    )
    assert main(["plan", "--batch", str(path), "--json"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert out[0]["step_time_s"] == pytest.approx(tensorwise["step_time_s"])
    assert out[1]["step_time_s"] == pytest.approx(rowwise["step_time_s"])
    assert "fp8_recipe must be one of tensorwise, rowwise" in out[2]["error"]


@pytest.mark.parametrize(
    "policy,replayed",
    [
        ("selective", 1.0),  # Korthikanti's selective: only the attention core, between the collectives
        ("op", 1.25),  # torchtitan's op SAC saves reduce-scatter outputs: the 2 forward all-gathers of 8 again
        ("full", 1.5),  # the whole forward: its 4 collectives of 8
    ],
)
def test_recompute_policies_replay_the_tp_collectives_they_do_not_keep(policy: str, replayed: float) -> None:
    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 4096)
    none = evaluate(job, parse_strategy("tp=8"))
    r = evaluate(job, parse_strategy(f"tp=8,recompute={policy}"))
    assert r["tp_s"][0] == pytest.approx(none["tp_s"][0] * replayed)


@pytest.mark.parametrize(
    "policy,cp_replayed,ep_replayed",
    [
        ("selective", 1.5, 1.0),  # the attention core holds the ring exchange of K and V, not the all-to-all
        ("full", 1.5, 1.5),  # the whole forward: half of fwd + bwd, again
        ("layernorm_moe_act", 1.0, 1.0),  # norms and the experts' activation: no collective
    ],
)
def test_recompute_policies_replay_the_cp_and_ep_collectives_they_recompute(
    policy: str, cp_replayed: float, ep_replayed: float
) -> None:
    dense = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 8192)
    base = evaluate(dense, parse_strategy("cp=4,dp=2"))
    r = evaluate(dense, parse_strategy(f"cp=4,dp=2,recompute={policy}"))
    assert base["cp_s"][0] > 0
    assert r["cp_s"][0] == pytest.approx(base["cp_s"][0] * cp_replayed)
    moe = make_job(model("mixtral-8x7b"), hardware("h100"), 8, 8, 16, 4096)
    base = evaluate(moe, parse_strategy("ep=8,dp=8,zero=3"))
    r = evaluate(moe, parse_strategy(f"ep=8,dp=8,zero=3,recompute={policy}"))
    assert base["ep_s"][0] > 0
    assert r["ep_s"][0] == pytest.approx(base["ep_s"][0] * ep_replayed)


def test_pytorch_async_tp_leaves_the_summed_input_gradient_reduce_scatters_exposed() -> None:
    """With separate projections, 6 of a layer's 8 collectives fuse with their matmul: 6/8 x 7/8."""
    job = _nominal_links(make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 4096, fused_projections=False))
    off = evaluate(job, parse_strategy("tp=8"))
    on = evaluate(job, parse_strategy("tp=8,tp_overlap=full"))
    assert on["tp_s"][0] == pytest.approx(off["tp_s"][0] * (1 - 0.75 * 7 / 8))


def test_stated_gradient_accumulation_is_run_as_stated_even_below_the_pipeline_depth() -> None:
    """pp=2, one replica, 2 sequences per step. Derived: at least pp micro-batches, 2 of one
    sequence, bubble = (pp-1) x one micro-batch = compute / 2. Stated ga=1 (nanotron's GAS=1 with
    micro-batch 2): one micro-batch of 2, bubble = the whole compute time; same total compute."""
    job = make_job(model("llama3-8b"), hardware("h100"), 2, 8, 2, 4096)
    derived = evaluate(job, parse_strategy("pp=2,mb=2"))
    stated = evaluate(job, parse_strategy("pp=2,ga=1"))
    assert derived["grad_accum"][0] == 2 and stated["grad_accum"][0] == 1
    # the same work; only the output layer's GEMM is 8192 tokens tall instead of 4096 (shape effect)
    assert stated["compute_s"][0] == pytest.approx(derived["compute_s"][0], rel=0.01)
    assert derived["bubble_s"][0] == pytest.approx(derived["compute_s"][0] / 2)
    assert stated["bubble_s"][0] == pytest.approx(stated["compute_s"][0])
    assert parse_strategy("gas=4")["ga"][0] == 4


def _sc21_rows() -> list[dict[str, str]]:
    import csv

    with open(Path(__file__).parents[1] / "fixtures" / "sc21_table1.csv", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.mark.parametrize("row", _sc21_rows(), ids=lambda r: r["model"])
def test_published_sc21_step_times(row: dict[str, str]) -> None:
    """Measured step time from the paper's own FLOP count (SC21 eq. 3, which counts the recomputed
    forward and non-causal attention): F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) per step, step =
    F / (published TFLOP/s per GPU x GPUs). The planner, given each run's configuration (2021
    Megatron: fp16, full recompute, no flash attention, no TP overlap), predicts it within 15%
    (regression guard against a published measurement; the benchmark reports 3.7% MAPE)."""
    from stepscope.catalog.model_flops import ModelShape

    L, h, heads = int(row["layers"]), int(row["hidden"]), int(row["heads"])
    tp, pp, vpp, n = int(row["tp"]), int(row["pp"]), int(row["vpp"]), int(row["gpus"])
    B, s, V = int(row["global_batch"]), 2048, 51200
    flops = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h))
    measured_s = flops / (float(row["tflops_per_gpu"]) * 1e12 * n)
    m = ModelShape(
        d_model=h,
        n_layers=L,
        n_heads=heads,
        n_kv_heads=heads,
        head_dim=h // heads,
        d_ff=4 * h,
        vocab=V,
        gated_mlp=False,
    )
    job = make_job(m, hardware("a100"), n, 8, B, s, precision="fp16", flash_attention=False)
    strategy = f"tp={tp},pp={pp},vpp={vpp},dp={n // (tp * pp)},mb={row['micro_batch']},recompute=full"
    predicted_s = float(evaluate(job, parse_strategy(strategy))["step_s"][0])
    assert predicted_s == pytest.approx(measured_s, rel=0.15)


def test_fp8_needs_a_device_with_an_fp8_peak(capsys: pytest.CaptureFixture[str]) -> None:
    """An A100 or a TPU v5e has no fp8 matrix units: fp8 there is a user error (one line, exit 2),
    not a silent bf16 run with cast costs (or, via the peak fallback, the int8 peak)."""
    with pytest.raises(ConfigError, match="no fp8 peak"):
        make_job(model("llama3-8b"), hardware("tpu-v5e"), 8, 8, 16, 4096, precision="fp8")
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "a100",
        "--devices",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "4096",
        "--precision",
        "fp8",
        "--evaluate",
        "dp=8",
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "A100" in err[0] and "--precision bf16" in err[0]


@pytest.mark.parametrize(
    "strategy,message",
    [
        ("dp=8,mb=0", "mb=0 must be at least 1"),
        ("dp=8,ga=-1", "ga=-1 must be 0"),
        ("dp=8,zero=5", "not a ZeRO stage"),
        ("dp=8,mb=3", "not a multiple of dp x mb = 8 x 3"),  # 16 sequences do not fill 8 x 3
        ("tp=8,ga=3", "not a multiple of dp x ga = 1 x 3"),
    ],
)
def test_evaluate_rejects_impossible_strategies(
    strategy: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
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
        strategy,
    ]
    assert main(args) == 2
    assert message in capsys.readouterr().err


def test_records_report_the_micro_batch_as_run(capsys: pytest.CaptureFixture[str]) -> None:
    """16 sequences, one replica: ga=4 runs micro-batches of 4; pp=8 with mb=16 splits into 8 of 2."""
    stated = _plan_8b(capsys, "tp=8,ga=4")
    assert (stated["strategy"]["mb"], stated["strategy"]["ga"]) == (4, 4)
    split = _plan_8b(capsys, "pp=8,mb=16")
    assert (split["strategy"]["mb"], split["strategy"]["ga"]) == (2, 8)


def test_pipelines_never_run_fractional_micro_batches() -> None:
    """Search: a (dp, pp, mb) whose replica batch gives fewer micro-batches than stages is run as
    stated (ga = those micro-batches), so every configuration's micro-batch is whole sequences.
    --evaluate: a pipeline that would have to split 12 sequences into 8 is an error."""
    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 12, 4096)
    s = space(job)
    res = evaluate(job, s)
    assert np.all(res["micro_batch"] == np.round(res["micro_batch"]))
    few = (s["pp"] > 1) & (12 // (s["dp"] * s["mb"]) < s["pp"])
    assert few.any() and np.all(s["ga"][few] == 12 // (s["dp"][few] * s["mb"][few]))
    with pytest.raises(ConfigError, match="cannot fill evenly"):
        from stepscope.planner.plans import one_record as _one
        from stepscope.planner.strategy import Strategy

        _one(job, Strategy.parse("pp=8,mb=2"))


def test_calibration_rows_carry_framework_properties(tmp_path: Path) -> None:
    """A CSV row's framework columns build its job like a --batch record; a blank cell is the default."""
    from stepscope.planner.calib_csv import from_csv
    from stepscope.planner.record import job_from_record

    csv_path = tmp_path / "runs.csv"
    csv_path.write_text(
        "model,hardware,devices,global_batch,seq_len,strategy,step_time_s,precision,fp8_recipe,fused_projections\n"
        "llama3-8b,h100,8,16,4096,tp=8,3.0,fp8,rowwise,false\n"
        "llama3-8b,h100,8,16,4096,dp=8,2.0,bf16,,\n"
    )
    built: list[Job] = []

    def make_job(r: dict) -> Job:
        built.append(job_from_record(r))
        return built[-1]

    assert from_csv(str(csv_path), make_job).rows == 2
    assert (built[0].framework.fp8.recipe, built[0].framework.kernels.fused_projections) == ("rowwise", False)
    fw1 = built[1].framework
    assert (fw1.fp8.recipe, fw1.kernels.fused_projections, built[1].precision) == ("tensorwise", True, "bf16")


def test_html_labels_tell_the_top_strategies_apart(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import re

    out = tmp_path / "plan.html"
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-70b",
                "--hardware",
                "h100",
                "--devices",
                "64",
                "--global-batch",
                "256",
                "--seq-len",
                "8192",
                "--top",
                "8",
                "--html",
                str(out),
            ]
        )
        == 0
    )
    capsys.readouterr()
    labels = re.findall(r"<tr><td>([^<]+)</td>", out.read_text(encoding="utf-8"))
    assert len(labels) == 8 and len(set(labels)) == 8


def test_terminal_table_is_never_cut_to_ellipses(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An 80-column terminal gets the table at its natural width (lines may wrap) rather than
    cells cut to "…"."""
    monkeypatch.setenv("COLUMNS", "80")
    assert (
        main(
            [
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
                "tp=8",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "…" not in out and "bottleneck" in out and "total GB" in out


def test_a_config_missing_dimensions_names_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"hidden_size": 4096}))
    assert (
        main(
            [
                "plan",
                "--model",
                str(cfg),
                "--hardware",
                "h100",
                "--devices",
                "8",
                "--global-batch",
                "16",
                "--seq-len",
                "4096",
                "--evaluate",
                "dp=8",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err.strip()
    assert (
        "lacks num_hidden_layers / num_attention_heads" in err
        and "hidden_size" not in err.split("lacks")[1].split("(")[0]
    )


def test_trace_bandwidth_is_compared_with_the_rate_the_planner_assumes() -> None:
    """On an H100 (measured in-node all-gather 249.8 GB/s), an all-gather that achieved 200 GB/s is
    249.8 / 200 = 1.249 x the planner's time, not 450 / 200 = 2.25 x: the measured shortfall is
    not charged twice. A type without a measurement (send_recv) keeps the link peak: 450 / 225 = 2."""
    from stepscope.planner.from_trace import from_report

    def doc(collectives: list[dict]) -> dict:
        return {
            "ranks": [
                {"rank": 0, "step_stats": {"median_ns": 1e8}, "hardware": {"name": "H100-SXM", "peak_tflops": 989}}
            ],
            "cluster": {"collectives": collectives},
        }

    big = 64 << 20
    ag = {"bytes": big, "busbw_gbps": 200.0, "peak_gbps": 450.0, "link": "intra", "type": "all_gather"}
    assert from_report(doc([ag])).comm_scale == pytest.approx(249.8 / 200.0)
    p2p = dict(ag, type="send_recv", busbw_gbps=225.0)
    assert from_report(doc([p2p])).comm_scale == pytest.approx(2.0)


def test_a_model_directory_reads_its_config_and_a_missing_file_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Hugging Face model directory is read through its config.json (the same shape as the file);
    a path that does not exist is named as a missing file, not as an unknown catalog name."""
    cfg = {
        "hidden_size": 1024,
        "num_hidden_layers": 4,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "intermediate_size": 4096,
        "vocab_size": 32000,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    assert model(str(tmp_path)) == from_config_dict(cfg, str(tmp_path / "config.json"))
    assert (
        main(
            [
                "plan",
                "--model",
                str(tmp_path / "gone.json"),
                "--hardware",
                "h100",
                "--devices",
                "8",
                "--global-batch",
                "16",
                "--seq-len",
                "4096",
            ]
        )
        == 2
    )
    assert "no such model config file" in capsys.readouterr().err


NEMOTRON_H_8B_PATTERN = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-"  # nvidia/Nemotron-H-8B-Base-8K


def test_nemotron_h_block_pattern_with_mamba2_counted_by_hand() -> None:
    """Nemotron-H-8B (hybrid_override_pattern: 24 Mamba-2, 4 attention, 24 MLP blocks, each its own
    residual block). By hand from the architecture: a Mamba-2 block is in_proj d x (2 d_inner +
    2 groups x state + heads) and out_proj d_inner x d, d_inner = 128 heads x 64; attention q, o
    d x 4096 and k, v d x 1024; the MLP squared-ReLU, two d x 21504 matrices; embedding and
    untied head 131072 x 4096: 8.0992e9. The planner's count leaves out the dt columns (one per
    head, 24 x 4096 x 128), so it is that much lower; it used to pair an MLP with every one of the
    52 blocks (about twice the MLP weights)."""
    cfg = {
        "hidden_size": 4096,
        "num_hidden_layers": 52,
        "hybrid_override_pattern": NEMOTRON_H_8B_PATTERN,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 21504,
        "mamba_num_heads": 128,
        "mamba_head_dim": 64,
        "ssm_state_size": 128,
        "n_groups": 8,
        "expand": 2,
        "vocab_size": 131072,
        "mlp_hidden_act": "relu2",
    }
    m = from_config_dict(cfg)
    d, d_inner, gn = 4096, 128 * 64, 8 * 128
    mamba = d * (2 * d_inner + 2 * gn + 128) + d_inner * d
    attn = 2 * d * 4096 + 2 * d * 1024
    mlp = 2 * d * 21504
    by_hand = 24 * mamba + 4 * attn + 24 * mlp + 2 * 131072 * d
    assert by_hand == 8_099_201_024
    total = m.mixer_params_total() + m.n_layers * m.dense_mlp_params() + 2 * m.vocab * m.d_model
    assert total == by_hand - 24 * d * 128
    assert not m.gated_mlp and m.linear_layers == 24 and m.n_layers == 28
    # the state-space-dual sequence term: per Mamba block, head and token 2 x 2 x state x head_dim
    # plus the chunk products, x3 for forward and backward (no growth with the context)
    seq = 8192
    attn_term = 6 * 4 * seq * 32 * (128 + 128) * 0.5
    ssd = 6 * 24 * 128 * (2 * 128 * 64 + 64 * (128 + 64))
    assert m.flops_per_token(seq) == pytest.approx(6 * m.matmul_params_per_token() + attn_term + ssd)
    assert evaluate(make_job(m, hardware("h100"), 8, 8, 16, seq), parse_strategy("tp=2,dp=4"))["step_s"][0] > 0


def test_block_pattern_moe_and_wide_shared_experts_keep_the_weights() -> None:
    """A pattern of 2 Mamba, 1 attention, 2 MoE and 1 MLP block: the pairing keeps the total MoE and
    MLP weights (2 x 8 experts x 3 d f_e, 1 x 2 d f: squared-ReLU MLPs, not gated), and a shared
    expert twice a routed one's width counts as 2. Qwen2-MoE's shared_expert_intermediate_size
    (no n_shared_experts key) is counted the same way: 5632 / 1408 = 4 (Qwen1.5-MoE-A2.7B)."""
    cfg = {
        "hidden_size": 64,
        "num_hidden_layers": 6,
        "hybrid_override_pattern": "ME*E-M",
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "head_dim": 16,
        "intermediate_size": 96,
        "vocab_size": 100,
        "mlp_hidden_act": "relu2",
        "mamba_num_heads": 8,
        "mamba_head_dim": 16,
        "ssm_state_size": 16,
        "n_groups": 1,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 30,
        "n_shared_experts": 1,
        "moe_shared_expert_intermediate_size": 60,
    }
    m = from_config_dict(cfg)
    assert m.n_layers == 3 and m.linear_layers == 2 and m.n_shared_experts == 2
    moe_layers = m.n_layers - m.first_dense_layers
    # 3 mixers for 3 MLP blocks: the widths are scaled by 3/3, so the totals are exact
    assert moe_layers * m.d_ff_expert * m.n_experts == 2 * 30 * 8
    assert m.first_dense_layers * m.d_ff == 1 * 96
    qwen = {
        "hidden_size": 2048,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "intermediate_size": 5632,
        "vocab_size": 151936,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
    }
    assert from_config_dict(qwen).n_shared_experts == 4


def test_a_jamba_config_is_refused_rather_than_read_as_a_transformer(capsys: pytest.CaptureFixture[str]) -> None:
    """Jamba's Mamba-1 layers have no linear-attention form in the model: without this check its
    config read as 32 attention layers, each with a 16-expert MoE (it has 4 attention layers and a
    MoE every other layer)."""
    jamba = {
        "model_type": "jamba",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "intermediate_size": 14336,
        "vocab_size": 65536,
        "num_experts": 16,
        "num_experts_per_tok": 2,
        "attn_layer_period": 8,
        "attn_layer_offset": 4,
        "mamba_d_state": 16,
        "mamba_expand": 2,
        "mamba_dt_rank": 256,
    }
    with pytest.raises(ConfigError, match="Mamba-1 layers"):
        from_config_dict(jamba)


def test_llama4_maverick_interleaved_moe_and_shared_expert_by_hand() -> None:
    """Llama 4 Maverick (text config): MoE every 2nd of 48 layers, 128 routed experts 8192 wide plus
    one shared, dense layers 16384 wide (intermediate_size_mlp). By hand: attention 2 x 5120^2 +
    2 x 5120 x 1024 per layer; a gated MLP of width f is 3 x 5120 x f; router 5120 x 128; embedding
    and untied head 202048 x 5120: 400.7e9 in all (Meta: 400B), 16.15e9 multiplied per token (17B
    active with the embedding). It used to put a MoE in every layer, 8192-wide dense MLPs and no
    shared expert."""
    text = {
        "model_type": "llama4_text",
        "hidden_size": 5120,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "intermediate_size": 8192,
        "intermediate_size_mlp": 16384,
        "num_local_experts": 128,
        "num_experts_per_tok": 1,
        "vocab_size": 202048,
        "interleave_moe_layer_step": 2,
    }
    m = from_config_dict({"model_type": "llama4", "text_config": text})
    d = 5120
    attn = 2 * d * d + 2 * d * 1024

    def mlp(f: int) -> int:
        return 3 * d * f

    moe_total = 128 * mlp(8192) + mlp(8192) + d * 128
    total = 48 * attn + 24 * moe_total + 24 * mlp(16384) + 2 * 202048 * d
    active = 48 * attn + 24 * (2 * mlp(8192) + d * 128) + 24 * mlp(16384) + 202048 * d
    dense, experts, emb = params(m)
    assert m.n_layers * (dense + experts) + 2 * emb == pytest.approx(total)
    assert total == pytest.approx(400.7e9, rel=1e-3)
    assert m.matmul_params_per_token() == pytest.approx(active)


def test_falcon_and_chatglm_key_names() -> None:
    """Falcon-40B names its 8 key/value heads n_head_kv (a multi_query Falcon-7B has one); ChatGLM
    calls them multi_query_group_num and its MLP width ffn_hidden_size."""
    falcon = {"hidden_size": 8192, "num_hidden_layers": 60, "n_head": 128, "n_head_kv": 8, "vocab_size": 65024}
    assert from_config_dict(falcon).n_kv_heads == 8
    assert from_config_dict({**falcon, "n_head_kv": None, "multi_query": True}).n_kv_heads == 1
    glm = {
        "hidden_size": 4096,
        "num_layers": 28,
        "num_attention_heads": 32,
        "multi_query_group_num": 2,
        "ffn_hidden_size": 13696,
        "padded_vocab_size": 65024,
    }
    m = from_config_dict(glm)
    assert (m.n_kv_heads, m.d_ff, m.vocab) == (2, 13696, 65024)


@pytest.mark.parametrize(
    "kind, extra, sliding",
    [("gemma2", {}, 21), ("gemma3_text", {"sliding_window_pattern": 6}, 35), ("cohere2", {}, 32), ("mistral", {}, 42)],
)
def test_local_global_alternation_without_layer_types(kind: str, extra: dict, sliding: int) -> None:
    """42 layers with a 4096 window and no layer_types: Gemma 2 slides on every other layer (21);
    Gemma 3 has a global layer at i + 1 = 6, 12, ..., 42 (7 of them: 35 sliding); Cohere 2 at
    4, 8, ..., 40 (10: 32 sliding); Mistral slides on all 42."""
    cfg = {
        "model_type": kind,
        "hidden_size": 1024,
        "num_hidden_layers": 42,
        "num_attention_heads": 8,
        "intermediate_size": 4096,
        "vocab_size": 1000,
        "sliding_window": 4096,
        **extra,
    }
    assert from_config_dict(cfg).sliding_layers == sliding


def test_a_non_numeric_family_key_is_one_line() -> None:
    cfg = {
        "hidden_size": 64,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "hybrid_override_pattern": "M-",
        "mamba_num_heads": "lots",
        "ssm_state_size": 16,
        "intermediate_size": 128,
        "vocab_size": 100,
    }
    with pytest.raises(ConfigError, match="not a number"):
        from_config_dict(cfg)


def test_bad_dimension_values_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A non-numeric width was a ValueError traceback; a MoE config without experts per token was
    planned with no active expert."""
    base = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 100}
    for extra, message in (
        ({"intermediate_size": "big"}, "not a number"),
        ({"num_local_experts": 8}, "without experts per token"),
    ):
        cfg = tmp_path / "config.json"
        cfg.write_text(json.dumps({**base, **extra}))
        assert (
            main(
                [
                    "plan",
                    "--model",
                    str(cfg),
                    "--hardware",
                    "h100",
                    "--devices",
                    "8",
                    "--global-batch",
                    "8",
                    "--seq-len",
                    "2048",
                ]
            )
            == 2
        )
        assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [["plan", "--model", "llama3-8b", "--top", "0"], ["analyze"], ["bogus"], ["analyze", "x.json", "--workers", "-2"]],
)
def test_usage_errors_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1 and "error:" in err and "--help" in err


def test_a_trace_without_flops_says_why() -> None:
    """The analysis's reason (no recorded shapes) is carried to the what-if when no kernel had
    FLOPs, and dropped when some had."""
    from stepscope.planner.from_trace import from_report

    rank = {
        "rank": 0,
        "step_stats": {"median_ns": 1e8},
        "hardware": {"name": "A100-SXM-40GB", "peak_tflops": 312.0},
        "roofline_note": "the trace has no recorded shapes, so no FLOPs: profile with record_shapes=True",
        "roofline_by_category": [{"category": "gemm", "dur_ns": 5e7, "flops": 0.0}],
    }
    assert "record_shapes" in (from_report({"ranks": [rank]}).why_no_flops or "")
    rank["roofline_by_category"] = [{"category": "gemm", "dur_ns": 5e7, "flops": 1e13}]
    te = from_report({"ranks": [rank]})
    assert te.why_no_flops is None and te.gemm_eff == pytest.approx(1e13 / (0.05 * 312e12))


def test_a_fit_at_the_edge_of_its_grid_is_flagged() -> None:
    from stepscope.planner.calibrate import ATTN_GRID, COMM_GRID, GEMM_GRID, Fit, at_grid_edge

    assert at_grid_edge(Fit(1.0, 1.0, 1.0, 1.0)) == []
    assert at_grid_edge(Fit(float(GEMM_GRID[0]), 1.0, float(COMM_GRID[-1]), 1.0)) == ["gemm_scale", "comm_scale"]
    assert at_grid_edge(Fit(1.0, float(ATTN_GRID[-1]), 1.0, 1.0)) == ["attn_scale"]


def test_moe_imbalance_scales_the_expert_work_and_the_all_to_all() -> None:
    """With the most loaded EP rank at f x the mean tokens, the EP all-to-all takes f x as long
    (the hot rank's bytes) and the compute grows by (f - 1) x the expert GEMMs' time: linear in f,
    so the step from 1 to 2 is twice the step from 1 to 1.5. A dense model does not change."""
    s = parse_strategy("tp=1,ep=8,dp=8,mb=1")
    base = make_job(model("mixtral-8x7b"), hardware("h100"), 8, 8, 16, 4096)
    r = {f: evaluate(base.replaced(moe_imbalance=f), s) for f in (1.0, 1.5, 2.0)}
    assert r[1.5]["ep_s"][0] == pytest.approx(1.5 * r[1.0]["ep_s"][0])
    d15, d2 = r[1.5]["compute_s"][0] - r[1.0]["compute_s"][0], r[2.0]["compute_s"][0] - r[1.0]["compute_s"][0]
    assert d15 > 0 and d2 == pytest.approx(2 * d15)
    assert r[1.5]["activations_gb"][0] > r[1.0]["activations_gb"][0]
    dense = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 4096)
    st = parse_strategy("dp=8")
    assert evaluate(dense.replaced(moe_imbalance=1.5), st)["step_s"][0] == evaluate(dense, st)["step_s"][0]
    with pytest.raises(ConfigError, match="imbalance"):
        base.replaced(moe_imbalance=0.8)


def test_moe_imbalance_from_the_cli_and_a_batch_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "mixtral-8x7b",
        "--hardware",
        "h100",
        "--devices",
        "8",
        "--global-batch",
        "16",
        "--seq-len",
        "4096",
        "--evaluate",
        "ep=8,dp=8",
        "--json",
    ]
    assert main(args + ["--set", "moe_imbalance=1.5"]) == 0
    rec = json.loads(capsys.readouterr().out)
    job = make_job(model("mixtral-8x7b"), hardware("h100"), 8, 8, 16, 4096, moe_imbalance=1.5)
    assert rec["step_time_s"] == pytest.approx(evaluate(job, parse_strategy("ep=8,dp=8"))["step_s"][0])
    f = tmp_path / "b.jsonl"
    f.write_text(
        json.dumps(
            {
                "model": "mixtral-8x7b",
                "hardware": "h100",
                "devices": 8,
                "global_batch": 16,
                "seq_len": 4096,
                "strategy": "ep=8,dp=8",
                "moe_imbalance": 1.5,
            }
        )
        + "\n"
    )
    assert main(["plan", "--batch", str(f), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["step_time_s"] == pytest.approx(rec["step_time_s"])


def test_unfused_loss_holds_12_bytes_per_logit_and_moves_44() -> None:
    """PyTorch's F.cross_entropy on an fp32 upcast (torchtitan) against a fused vocab-parallel loss
    (Megatron): 12 - 6 = 6 more bytes per logit at the peak, 44 - 24 = 20 more moved. By hand for
    llama3-8b (vocab 128256) on 8 H100s, dp=8, mb=2 of 8192 tokens: 6 x 16384 x 128256 B more on
    every device; 20 x 128256 x 131072 tokens / 3.35 TB/s / 8 devices more time."""
    s = parse_strategy("dp=8,zero=3,mb=2")
    fused = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 16, 8192)
    a, b = evaluate(fused, s), evaluate(fused.replaced(loss="unfused"), s)
    assert b["activations_gb"][0] - a["activations_gb"][0] == pytest.approx(6 * 16384 * 128256 / 1e9)
    assert b["compute_s"][0] - a["compute_s"][0] == pytest.approx(20 * 128256 * 16 * 8192 / 3350e9 / 8)
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
        "8192",
        "--evaluate",
        "dp=8,zero=3,mb=2",
        "--json",
    ]
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(args + ["--set", "loss=unfused"]) == 0
    assert json.loads(out.getvalue())["step_time_s"] == pytest.approx(b["step_s"][0])


@pytest.mark.parametrize("recompute, rep_none, rep_policy", [("none", 8, 8), ("full", 8, 2), ("selective", 8, 8)])
def test_tp_without_sequence_parallelism_by_hand(recompute: str, rep_none: int, rep_policy: int) -> None:
    """sp=0 at tp=4 (llama3-8b, 32 layers, h 4096, one 4096-token micro-batch): the h-wide tensors
    outside the TP region (both norms' inputs and outputs, 8 bytes per token and h; full recompute
    keeps only the block input, 2) are whole on every rank, so each
    rank holds (1 - 1/4) of them more per stored layer, plus the same for the one layer
    regenerated in backward (no-recompute size minus the policy's). Every TP rank also repeats the
    norms and residual adds, 3 x 2 B x 10 h per token and layer: 3 more copies of that traffic
    (replayed by full recompute, x 4/3; selective recomputes only the attention core, x 1)."""
    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 8, 4096)
    on = evaluate(job, parse_strategy(f"tp=4,dp=2,recompute={recompute}"))
    off = evaluate(job, parse_strategy(f"tp=4,dp=2,sp=0,recompute={recompute}"))
    sbh = 4096 * 1 * 4096
    extra = (32 * rep_policy + (rep_none - rep_policy)) * sbh * (1 - 1 / 4)
    assert off["activations_gb"][0] - on["activations_gb"][0] == pytest.approx(extra / 1e9)
    rfactor = {"none": 1.0, "selective": 1.0, "full": 4 / 3}[recompute]
    elem = 3 * 2 * 10 * 4096 * 32 * (8 * 4096) * (4 - 1) / 3350e9 / 8 * rfactor
    assert off["compute_s"][0] - on["compute_s"][0] == pytest.approx(elem)
    assert off["tp_s"][0] == pytest.approx(on["tp_s"][0])  # all-reduce = reduce-scatter + all-gather in a ring


def test_sequence_parallelism_off_in_the_search_and_its_conflicts(capsys: pytest.CaptureFixture[str]) -> None:
    from stepscope.planner.search import search

    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 8, 4096)
    assert set(search(job, top=5).strategies["sp"]) == {1}
    assert set(search(job.with_settings(sequence_parallel=False), top=5).strategies["sp"]) == {0}
    with pytest.raises(ConfigError, match="sequence parallelism"):
        parse_strategy("tp=4,dp=2,sp=0,tp_overlap=full")
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
        "4096",
    ]
    assert (
        main(args + ["--set", "sequence_parallel=false", "--set", "tp_overlap=full"]) == 2
    )  # full: needs sequence parallelism
    assert (
        main(
            args + ["--set", "sequence_parallel=false", "--set", "tp_overlap=bwd", "--evaluate", "tp=4,dp=2", "--json"]
        )
        == 0
    )  # an all-reduce
    bwd = json.loads(capsys.readouterr().out)
    assert bwd["step_time_s"] == pytest.approx(
        evaluate(job, parse_strategy("tp=4,dp=2,sp=0,tp_overlap=bwd"))["step_s"][0]
    )
    assert main(args + ["--set", "sequence_parallel=false", "--evaluate", "tp=4,dp=2", "--json"]) == 0
    rec = json.loads(capsys.readouterr().out)
    assert rec["strategy"]["sp"] == 0
    assert rec["step_time_s"] == pytest.approx(evaluate(job, parse_strategy("tp=4,dp=2,sp=0"))["step_s"][0])


def test_afab_holds_every_micro_batch_and_keeps_1f1b_bubble() -> None:
    """All-forward-all-backward (GPipe; nanotron's default engine) against 1F1B, llama3-8b on 8
    H100s, pp=2, dp=4, 64 sequences of 4096 in micro-batches of 2: 8 micro-batches, of which 1F1B
    holds 2 on the first stage and AFAB all 8. A stored layer is 34 x s x b x h bytes (no
    recompute), 16 layers per stage: (8 - 2) x 16 x 34 x 4096 x 2 x 4096 bytes more; same bubble."""
    job = make_job(model("llama3-8b"), hardware("h100"), 8, 8, 64, 4096)
    one = evaluate(job, parse_strategy("pp=2,dp=4,mb=2"))
    afab = evaluate(job, parse_strategy("pp=2,dp=4,mb=2,sched=gpipe"))
    assert afab["activations_gb"][0] - one["activations_gb"][0] == pytest.approx(6 * 16 * 34 * 4096 * 2 * 4096 / 1e9)
    assert afab["step_s"][0] == pytest.approx(one["step_s"][0])
    with pytest.raises(ConfigError, match="AFAB"):
        parse_strategy("pp=2,vpp=2,dp=4,sched=afab")


def test_calibration_rows_can_name_analysis_reports(tmp_path: Path) -> None:
    """A CSV row may give its run's analyze report instead of a step time; its median step (100 ms
    in the hand-made report) is the measurement, and the fit is the one the same CSV with 0.1 s
    written in gives. A missing report is one line naming the CSV line."""
    from stepscope.planner.calib_csv import from_csv
    from stepscope.planner.record import job_from_record

    (tmp_path / "runs").mkdir()
    report = _report(tmp_path / "runs")
    head = "model,hardware,devices,global_batch,seq_len,strategy,"
    rows = ['llama3-8b,a100-40gb,8,32,4096,"dp=8,zero=3",', 'llama3-8b,a100-40gb,8,32,4096,"tp=2,dp=4",']
    by_report = tmp_path / "runs" / "a.csv"
    by_report.write_text(head + "analysis\n" + "\n".join(r + report.name for r in rows) + "\n")
    by_time = tmp_path / "b.csv"
    by_time.write_text(head + "step_time_s\n" + "\n".join(r + "0.1" for r in rows) + "\n")
    assert from_csv(str(by_report), job_from_record) == from_csv(str(by_time), job_from_record)
    missing = tmp_path / "c.csv"
    missing.write_text(head + "analysis\n" + rows[0] + "nope.json\n" + rows[1] + "nope.json\n")
    with pytest.raises(ConfigError, match="line 2"):
        from_csv(str(missing), job_from_record)


def test_when_nothing_fits_the_smallest_are_shown_and_said(capsys: pytest.CaptureFixture[str]) -> None:
    """llama3-405b on 8 H100s cannot fit (its bf16 weights alone are 810 GB): the rows are the
    configurations with the least memory per device, in that order, and a line says so."""
    from stepscope.planner.search import search

    job = make_job(model("llama3-405b"), hardware("h100"), 8, 8, 8, 8192)
    plan = search(job, top=3)
    assert plan.fitting == 0
    totals = list(plan.results["total_gb"])
    assert totals == sorted(totals)
    everything = evaluate(job, space(job))
    assert totals[0] == pytest.approx(float(everything["total_gb"].min()))
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-405b",
                "--hardware",
                "h100",
                "--devices",
                "8",
                "--global-batch",
                "8",
                "--seq-len",
                "8192",
                "--top",
                "3",
            ]
        )
        == 0
    )
    assert "no configuration fits in 85.0 GB per device" in " ".join(capsys.readouterr().out.split())


def test_divisors_match_trial_division_and_stay_cheap_for_huge_counts() -> None:
    """The search's divisors (found up to sqrt(n)) against trial division by every d <= n, which
    is what they replaced (24 s for 2^28 devices)."""
    from stepscope.planner.vocab import divisors

    for n in range(1, 1500):
        assert divisors(n) == [d for d in range(1, n + 1) if n % d == 0]
    assert divisors(2**40) == [2**k for k in range(41)]
    assert divisors(7919 * 7907) == [1, 7907, 7919, 7919 * 7907]  # two primes


def test_html_bars_end_at_the_step_time_and_memory_total(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each stacked bar is the sum of its drawn parts; with pipeline parallelism the p2p time is
    one of them (the bars used to leave it out and end short of the table's step time)."""
    import re

    out = tmp_path / "plan.html"
    assert (
        main(
            [
                "plan",
                "--model",
                "llama3-70b",
                "--hardware",
                "h100",
                "--devices",
                "64",
                "--global-batch",
                "64",
                "--seq-len",
                "4096",
                "--where",
                "pp=4|8",
                "--top",
                "5",
                "--html",
                str(out),
                "--json",
            ]
        )
        == 0
    )
    recs = json.loads(capsys.readouterr().out)["rows"]
    assert all(r["time_s"]["pp_p2p"] > 0 for r in recs)  # the case the old bars got wrong
    html = out.read_text(encoding="utf-8")
    step_svg, mem_svg = html.split("<h2>Step time (s)</h2>")[1].split("<h2>Memory per device")
    step_svg, hidden_svg = step_svg.split("<h2>Transfers hidden under compute")
    ends_s = [float(v) for v in re.findall(r">([0-9.]+) s</text>", step_svg)]
    # the hidden transfers' bars end at their sum, which is no part of the step
    assert [float(v) for v in re.findall(r">([0-9.]+) s</text>", hidden_svg)] == [
        round(sum(r["hidden_s"].values()), 2) for r in recs
    ]
    ends_gb = [float(v) for v in re.findall(r">([0-9.]+) GB</text>", mem_svg)]
    assert ends_s == [round(r["step_time_s"], 2) for r in recs]
    assert ends_gb == [round(r["memory_gb"]["total"], 2) for r in recs]


@pytest.mark.parametrize(
    ("written", "name"),
    [
        ("save out_proj", "save_out_proj"),
        ("Save-Dot-Except-MLP", "save_dot_except_mlp"),
        ("save  qkv_proj", "save_qkv_proj"),
        ("selective", "selective"),
    ],
)
def test_recompute_policy_written_as_the_issue_names_it(written: str, name: str) -> None:
    """Spaces and hyphens in a policy name read as its underscores (the names as users write them)."""
    from stepscope.planner.recompute import RECOMPUTE

    assert int(parse_strategy(f"tp=1,recompute={written}")["recompute"][0]) == RECOMPUTE.index(name)


def test_long_sequences_search_wider_context_parallelism() -> None:
    """CP up to 8, and beyond while a rank keeps 1,024+ tokens: 4,096 tokens stay at 1-8; 131,072
    tokens on 16,384 devices go to 128 (1,024 tokens a rank), as Llama 3 405B's CP 16 needs."""
    short = space(make_job(model("llama3-8b"), hardware("h100"), 64, 8, 64, 4096))
    assert sorted(set(short["cp"].tolist())) == [1, 2, 4, 8]
    long = space(make_job(model("llama3-405b"), hardware("h100"), 16384, 8, 128, 131072))
    assert sorted(set(long["cp"].tolist())) == [1, 2, 4, 8, 16, 32, 64, 128]
