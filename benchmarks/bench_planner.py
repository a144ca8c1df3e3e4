"""Planner benchmark: evaluation throughput, and accuracy on published measured runs.

    python benchmarks/bench_planner.py [--csv benchmarks/data/published_runs.csv]

1. Throughput: ``cost.evaluate`` on >= 1,000,000 configurations (the Llama-3-70B x 1024 H100 space
   tiled), one core: configurations per second.
2. Accuracy, uncalibrated: every row of the CSV evaluated with its own strategy; the predicted value
   of the row's metric (tokens/s/device, TFLOP/s/device or MFU) against the measured one: MAPE per
   source and overall, and Spearman rank correlation within each source; beside the naive baseline
   "6 x active params x tokens at 40% MFU". No constant is fitted on these rows. Every metric is a
   throughput, so ``mape`` is the tokens/s error; ``mape_step_time`` is the step time's (measured /
   predicted - 1), which counts a prediction 2x too fast as 50% where the throughput counts 100%.
3. Calibrated: leave-one-source-out (each source predicted by multipliers fitted on the others),
   the same restricted to other sources of the held-out source's framework, and leave-one-row-out
   within each source (what calibrating on one's own runs gives). A row is never in its own fit.
4. Choosing (predicted-best vs measured-best among rows that differ only in strategy) and memory
   against the peaks recorded in the rows' notes; ``FITS``: the measured runs the memory model
   says would not fit on their devices (every one ran, so the right count is 0).
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np
from compare_rows import clustered_se

from stepscope.catalog.model_flops import ModelShape
from stepscope.errors import ConfigError
from stepscope.planner import frameworks
from stepscope.planner.calibrate import Fit, Run, cross_validate, errors, predict_one
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.network import by_name as network_by_name
from stepscope.planner.recompute import RECOMPUTE
from stepscope.planner.search import hardware, model, search, space
from stepscope.planner.vocab import DP_OVERLAP, TP_OVERLAP

# host microseconds per (parameter tensor, DP rank) of nanotron's ZeRO-1 all-gather, as its preset has it
# (data/frameworks.yaml; measured by benchmarks/zero_gather_host.py)
ZERO_GATHER_COPY_US = float(frameworks.by_name("nanotron").settings["zero_gather_copy_us"])

ROOT = Path(__file__).resolve().parents[1]


def throughput() -> dict:
    job = make_job(model("llama3-70b"), hardware("h100"), 1024, 8, 2048, 8192)
    s = space(job)
    reps = int(np.ceil(1_000_000 / s["tp"].size))
    big = {k: np.tile(v, reps) for k, v in s.items()}
    n = big["tp"].size
    evaluate(job, {k: v[:1000] for k, v in big.items()})  # warm-up
    times = []
    for _ in range(5):
        t = time.perf_counter()
        evaluate(job, big)
        times.append(time.perf_counter() - t)
    med = float(np.median(times))
    return {
        "configs": n,
        "median_s": round(med, 3),
        "min_s": round(min(times), 3),
        "configs_per_s_median": round(n / med),
        "configs_per_s_best": round(n / min(times)),
    }


def _num(x: str, default: float | None = None) -> float | None:
    try:
        return float(x)
    except (TypeError, ValueError):
        return default


_HW = [
    (r"H200", "h200"),
    (r"H100-96GB", "h100-96gb"),
    (r"H100", "h100"),
    (r"A100", "a100"),
    (r"910B", "ascend-910b"),
    (r"v5e", "tpu-v5e"),
    (r"v5p", "tpu-v5p"),
    (r"TPU v4", "tpu-v4"),
]


def _row_job(r: dict) -> tuple[Job, dict] | None:
    hw = next((alias for pat, alias in _HW if re.search(pat, r["hardware"])), None)
    L, h, heads = _num(r["n_layers"]), _num(r["d_model"]), _num(r["n_heads"])
    if hw is None or not (L and h and heads):
        return None
    experts = int(_num(r["moe_experts"], 0) or 0)
    m = ModelShape(
        d_model=int(h),
        n_layers=int(L),
        n_heads=int(heads),
        n_kv_heads=int(_num(r["n_kv_heads"], heads) or heads),
        head_dim=int(_num(r["head_dim"], h / heads) or h / heads),
        d_ff=int(_num(r["ffn_hidden"], 4 * h) or 4 * h),
        vocab=int(_num(r["vocab"], 50000) or 50000),
        gated_mlp="GPT" not in r["model_name"],
        n_experts=experts,
        experts_per_token=int(_num(r["moe_topk"], 0) or 0),
        d_ff_expert=int(_num(r["moe_ffn_hidden"], _num(r["ffn_hidden"], 4 * h)) or 4 * h),
        n_shared_experts=int(_num(r["moe_shared_experts"], 0) or 0),
    )
    n = int(_num(r["n_devices"], 0) or 0)
    gb, seq = int(_num(r["global_batch"], 0) or 0), int(_num(r["seq_len"], 0) or 0)
    if not (n and gb and seq):
        return None
    prec = "fp8" if re.search(r"fp8|float8", r["precision"], re.I) else ("fp16" if "fp16" in r["precision"] else "bf16")
    # SC21 (2021) predates FlashAttention: Megatron materialized the attention scores.
    # SC21 Table 1 (examples/sc21/run_table_1.sh) ran its four PP=1 sizes (1.7B-18B) with
    # DDP=torch, PyTorch's DDP: gradients all-reduced in 25 MB buckets during the last
    # micro-batch's backward (Megatron ran the others under model.no_sync); the PP>1 sizes, and
    # the Table 2 PTD-P runs, with DDP=local
    torch_ddp = "Table 1" in r["source"] and "Narayanan" in r["source"] and _num(r["pp"], 1) == 1
    deepspeed = (
        "Narayanan" in r["source"] and "zero3" in r["zero_or_fsdp"].lower()
    )  # SC21's ZeRO-3 baselines ran DeepSpeed
    sc21_local_ddp = "Narayanan" in r["source"] and not deepspeed and not torch_ddp
    # TPU multislice rows: FSDP within each slice (ICI), data parallel across slices (DCN)
    dev = hardware(hw)
    ms = re.search(r"fsdp(\d+) within slice x DCN DP (\d+) slice", r["zero_or_fsdp"])
    slices = int(ms.group(2)) if ms else 1
    per_node = n // slices if ms else (dev.node_devices or 8)
    pods = re.search(r"(\d+) pods? x (\d+) chips", r["hardware"])  # PaLM: 2 pods x 3072 chips, the pods over DCN
    if pods:
        per_node = int(pods.group(2))
    # torchtitan rows without torch.compile run the block's elementwise ops eagerly
    eager = "torchtitan" in r["source"] and not re.search(r"compile", r["notes"], re.IGNORECASE)
    # torchtitan's Llama and MaxText (fused_qkv/fused_mlp false by default) run separate q, k, v
    # (and gate, up) GEMMs; Megatron, MindSpeed and nanotron fuse them. "rowwise" names torchao's recipe
    separate = bool(re.search(r"torchtitan|maxtext", r["source"], re.IGNORECASE))
    # torchtitan's loss is F.cross_entropy(pred.flatten(0, 1).float(), labels) (train.py's loss_fn),
    # not a fused vocab-parallel one, left eager in 2024 ("TODO: compiling loss function causes CUDA
    # errors") and compiled with the model since April 2025 (components/loss.py, PR #1033): the
    # 2025-06 benchmarks ran torch.compile; nanotron's is sharded_cross_entropy(..., dtype=torch.float),
    # the max subtracted out of place
    titan_2025 = bool(re.search(r"2025-?06", r["source"]))
    loss = (
        ("compiled" if titan_2025 else "unfused")
        if "torchtitan" in r["source"]
        else "copy"
        if "nanotron" in r["source"]
        else "fused"
    )
    # the SC21 runs (Megatron 2021) had --hidden-dropout 0.1, its default then: its masks are stored
    preset = _preset(r["source"])  # the source's framework preset (data/frameworks.yaml)
    job = make_job(
        m,
        dev,
        n,
        per_node,
        gb,
        seq,
        precision=prec,
        flash_attention="Narayanan" not in r["source"],
        fused_elementwise=not eager,
        hidden_dropout="Narayanan" in r["source"],
        param_gather_overlap=bool(re.search(r"overlap-param-gather", r["notes"])),
        fused_projections=not separate,
        loss=loss,
        # nanotron's MLP: down_proj(GLUActivation(gate_up_proj(x))), the activation eager (models/llama.py)
        eager_swiglu="nanotron" in r["source"],
        zero_sync_after_backward="nanotron" in r["source"] and "fp32 grad" in r["precision"],
        # nanotron's ZeRO-1 all-gather puts every (tensor, rank) shard back one op at a time, from Python
        zero_gather_copy_us=ZERO_GATHER_COPY_US if "nanotron" in r["source"] else 0.0,
        # nanotron's fp32 gradient accumulator adds every gradient into its fp32 buffer after each backward
        grad_accum_bytes=float(preset.get("grad_accum_bytes", 0.0)) if "fp32 grad" in r["precision"] else 0.0,
        fp8_recipe="rowwise" if re.search(r"rowwise", r["precision"], re.IGNORECASE) else "tensorwise",
        # torchao's float8 (torchtitan) casts the weights in every forward; TE caches them per step
        fp8_weight_cache="torchtitan" not in r["source"],
        # torchao's float8 keeps the bf16 inputs for backward; TE the fp8 copies
        fp8_saved_inputs="bf16" if "torchtitan" in r["source"] else "fp8",
        # torchao's FSDP float8 all-gather where the row says so (the Trainy H200 runs)
        fp8_all_gather=bool(re.search(r"fsdp float8 all-gather", r["precision"], re.IGNORECASE)),
        # torchao converts narrow TP shards too, which its own thresholds say gain nothing (its preset)
        fp8_gain_thresholds=bool(preset.get("fp8_gain_thresholds", False)),
        # the attention kernel the source's framework runs, from its preset (data/frameworks.yaml);
        # kept at the prior where it is not measured (Ascend, TPU) or without flash attention (SC21)
        attention_kernel=preset.get("attention_kernel", ""),
        # torchtitan's Llama repeats K and V to n_heads before SDPA (its preset)
        kv_repeated=bool(preset.get("kv_repeated", False)),
        # FSDP2 prefetches the next block's collectives (torchtitan's preset)
        zero3_prefetch=bool(preset.get("zero3_prefetch", False)),
        # torchtitan's TP plan keeps the all-gathered linear inputs (its preset)
        sp_saves_gathered=bool(preset.get("sp_saves_gathered", False)),
        # Megatron's and nanotron's sequence parallelism re-gathers in backward (their presets).
        # Megatron of 2021 (SC21) had no sequence parallelism; its rows still run with the
        # planner's default (sp=0 made every figure worse: BENCHMARKS.md session 23, item 7),
        # but are not charged the re-gathers it did not have
        sp_regather=bool(preset.get("sp_regather", False)) and "Narayanan" not in r["source"],
        # nanotron places pipeline blocks by their cost, the output layer's too (its preset)
        pipeline_split_cost=bool(preset.get("pipeline_split_cost", False)),
        # how ZeRO-3 gathers, from the framework's preset: MaxText's (XLA) and, for SC21's
        # ZeRO-3 rows, DeepSpeed's (each submodule's parameters fetched before its forward)
        zero3_gather=(frameworks.by_name("deepspeed").settings if deepspeed else preset).get("zero3_gather", "layer"),
        # the cluster's measured collective bandwidth where published (data/networks.yaml)
        network=network_by_name("hf-h100") if re.search(r"HF cluster", r["hardware"]) else None,
        dp_bucket_mb=25.0 if "nanotron" in r["source"] or torch_ddp else 0.0,
        # Megatron-LM of 2021 (SC21's PTD-P runs) with --DDP-impl local all-reduced the
        # gradients after the whole forward-backward pass (training.py train_step: "All-reduce
        # if needed", model.allreduce_gradients()): nothing hidden. Table 1's PP=1 runs used
        # --DDP-impl torch (below), DeepSpeed's ZeRO-3 rows keep the prior
        dp_overlap=0.0 if sc21_local_ddp else DP_OVERLAP,
    )
    # TP/GEMM overlap by the framework's mechanism (cost.TP_OVERLAP): full chunked overlap where the
    # row says so (Megatron --tp-comm-overlap, torchtitan "AsyncTP"/"async TP"; not "vanilla TP");
    # nanotron's "async TP comm" is its own scheme (bwd+shard, from nanotron's
    # tensor_parallel/functional.py); Megatron-core otherwise (the README's runs, MindSpeed) overlaps
    # the backward reduce-scatter with the weight-gradient GEMM (bwd); SC21's 2021 Megatron did not
    notes = r["notes"]
    if "nanotron" in r["source"] and re.search(r"async TP", notes, re.IGNORECASE):
        mode = "bwd+shard"
    elif re.search(r"tp-comm-overlap|async ?TP", notes, re.IGNORECASE) and not re.search(
        r"vanilla TP", notes, re.IGNORECASE
    ):
        mode = "full"
    elif re.match(r"\W*(NVIDIA/Megatron-LM|Ascend/MindSpeed)", r["source"]):
        mode = "bwd"
    else:
        mode = "none"
    tp_overlap = TP_OVERLAP.index(mode)
    tp, pp, cp = (int(_num(r[k], 1) or 1) for k in ("tp", "pp", "cp"))
    dp = int(_num(r["dp"], 0) or 0) or max(n // (tp * pp * cp), 1)
    z = r["zero_or_fsdp"].lower()
    zero = (
        3 if ("fsdp" in z or "zero3" in z) else 2 if "zero2" in z else 1 if ("zero1" in z or "distributed" in z) else 0
    )
    rc = r["recompute"].lower()
    # torchtitan's "selective (op)" / "per-op SAC" is its op-level policy (cost.RECOMPUTE "op")
    policy = (
        "full"
        if "full" in rc
        else "minimal"
        if "minimal" in rc
        else "qkv_proj_offloaded"
        if "qkv_proj_offloaded" in rc
        else "save_qkv_proj"
        if "qkv" in rc
        else "op"
        if re.search(r"\(op\)|per-op", rc)
        else "selective"
        if any(x in rc for x in ("selective", "sac"))
        else "none"
    )
    rci = RECOMPUTE.index(policy)
    if not (r["tp"] or r["dp"]):
        # the source gives no (or only a partial) parallel configuration: the run was tuned, so
        # predict the planner's own best strategy for it, keeping what the source does state (pp)
        # and the framework's overlap flags from the notes (when the space has no valid strategy,
        # the row keeps its stated fields with the defaults below)
        try:
            plan = search(job.with_settings(tp_overlap=mode), 500).strategies
            ok = np.nonzero(plan["pp"] == pp)[0] if r["pp"] else np.arange(len(plan["pp"]))
            if ok.size:
                return job, {k: int(v[int(ok[0])]) for k, v in plan.items()}
        except ConfigError:
            pass
    hsdp = int(ms.group(1)) if ms and slices > 1 and zero == 3 else 0
    # torchtitan's default FSDP policy does not reshard after forward under pipeline parallelism
    keep = int("torchtitan" in r["source"] and zero == 3 and pp > 1)
    # "Interleaved 1F1B" in the notes means 2+ model chunks per stage even when no vpp is given
    vpp = int(_num(r["vpp"], 1) or 1)
    if vpp == 1 and pp > 1 and re.search(r"interleaved", notes, re.IGNORECASE):
        vpp = 2
    strat = {
        "tp": tp,
        "pp": pp,
        "vpp": vpp,
        "dp": dp,
        "cp": cp,
        "ep": int(_num(r["ep"], 1) or 1),
        "zero": zero,
        "mb": int(_num(r["micro_batch"], 1) or 1),
        "recompute": rci,
        "tp_overlap": tp_overlap,
        "hsdp": hsdp,
        "keep_params": keep,
    }
    # a stated gradient accumulation (nanotron's "GAS=N") is run as stated, even below pp
    gas = re.search(r"\bGAS=(\d+)", notes)
    if gas:
        strat["ga"] = int(gas.group(1))
    if "maxtext" in r["source"]:
        # MaxText's per_device_batch_size counts every device, the tensor-parallel ones too, and
        # there is no gradient accumulation: one micro-batch of gb/dp sequences per replica
        strat["mb"] = max(gb // dp, 1)
        return job, strat
    # the source states the parallel layout but not the micro-batch, or not the recompute policy
    # ("unknown", "not stated"): like an unconfigured row, the planner's best choice (that fits)
    # for the stated layout. A measured run fit in memory: SC21 Table 2's DeepSpeed ZeRO-3 175B
    # and 530B rows need 276-1,729 GB of activations per GPU without recompute. The policies the
    # source's framework had: selective recompute came with Korthikanti et al. 2022, after SC21
    mbs = ([b for b in (1, 2, 4, 8) if (gb // dp) % b == 0] or [1]) if not r["micro_batch"].strip() else [strat["mb"]]
    stated = not re.fullmatch(r"\s*(unknown|not stated)\s*", rc)
    policies = (
        [rci]
        if stated
        else [
            RECOMPUTE.index(p)
            for p in (("none", "full") if "Narayanan" in r["source"] else ("none", "selective", "full"))
        ]
    )
    pairs = [(b, p) for p in policies for b in mbs]
    if len(pairs) > 1:
        res = evaluate(
            job,
            {
                k: np.array([b if k == "mb" else p if k == "recompute" else v for b, p in pairs])
                for k, v in strat.items()
            },
        )
        step = np.where(res["fits"], res["step_s"], np.inf)
        strat["mb"], strat["recompute"] = pairs[int(np.argmin(step))]
    return job, strat


def _row_run(r: dict) -> tuple[Job, dict, float, Callable[[Job, dict], np.ndarray]] | None:
    """A row's job, strategy, measured value (MFU as a fraction) and predictor of its metric; None
    when the row lacks what the planner needs."""
    jr = _row_job(r)
    measured = _num(r["measured_value"])
    if jr is None or not measured:
        return None
    job, st = jr
    if r["measured_metric"] not in ("tokens_per_s_per_device", "tflops_per_device") and measured > 1:
        measured /= 100
    return job, st, float(measured), _predictor(r, job)


def validation_runs(csv_path: Path) -> list[Run]:
    """Every usable row of the validation CSV as a calibration run (grouped by source)."""
    with open(csv_path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    runs = []
    for r in rows:
        rr = _row_run(r)
        if rr is not None:
            job, st, measured, predict = rr
            runs.append(
                Run(job, st, measured, predict, r["source"].split(" (")[0][:60], family=_framework(r["source"]))
            )
    return runs


def _ranks(x: np.ndarray) -> np.ndarray:
    """Ranks from 0, tied values sharing the mean of their ranks (Spearman's definition)."""
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=np.float64)
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, weights=ranks)
    return (sums / counts)[inverse]


def _spearman(a: list[float] | np.ndarray, b: list[float] | np.ndarray) -> float | None:
    if len(a) < 3:
        return None
    ra, rb = _ranks(np.asarray(a, dtype=np.float64)), _ranks(np.asarray(b, dtype=np.float64))
    if ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def _spearman_interval(a: np.ndarray, b: np.ndarray, draws: int = 2000) -> list[float] | None:
    """A 90% bootstrap interval of the Spearman correlation (rows resampled with replacement, fixed
    seed; resamples whose ranks are all tied are skipped): how far a source's few rows pin it."""
    if len(a) < 4:
        return None
    rng = np.random.default_rng(0)
    vals = [x for x in (_spearman(a[k], b[k]) for k in rng.integers(0, len(a), size=(draws, len(a)))) if x is not None]
    return [round(float(np.percentile(vals, 5)), 2), round(float(np.percentile(vals, 95)), 2)] if vals else None


def _name(key: str, value: int) -> str | int:
    return RECOMPUTE[value] if key == "recompute" else TP_OVERLAP[value] if key == "tp_overlap" else value


def accuracy(csv_path: Path, rows_out: Path | None = None) -> dict:
    with open(csv_path, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    per_row: list[dict] = []
    per: dict[str, dict[str, list]] = defaultdict(lambda: defaultdict(list))
    runs: list[Run] = []
    same_job: dict[tuple, list[tuple[float, float]]] = defaultdict(list)
    mem_pairs: dict[str, list[tuple[float, float]]] = defaultdict(list)
    unfit: dict[str, list[str]] = defaultdict(list)
    skipped = 0
    for row_no, r in enumerate(rows, 1):
        rr = _row_run(r)
        if rr is None:
            skipped += 1
            continue
        job, st, measured, predict = rr
        metric = r["measured_metric"]
        peak = job.hw.peak_flops(job.precision)
        n_active = 6 * job.model.matmul_params_per_token()
        if metric == "tokens_per_s_per_device":
            naive = 0.4 * peak / n_active
        elif metric == "tflops_per_device":
            naive = 0.4 * peak / 1e12
        else:
            naive = 0.4
        pred = predict(job, {k: np.array([v]) for k, v in st.items()})[0]
        src = r["source"].split(" (")[0][:60]
        per_row.append(
            {
                "row": row_no,
                "source": src,
                "model": r["model_name"],
                "devices": job.devices,
                "strategy": ",".join(f"{k}={_name(k, v)}" for k, v in st.items()),
                "metric": metric,
                "measured": float(measured),
                "predicted": round(float(pred), 4),
                "error": round(float(pred) / float(measured) - 1, 4),
            }
        )
        runs.append(Run(job, st, float(measured), predict, src, family=_framework(r["source"])))
        res = evaluate(job, {k: np.array([v]) for k, v in st.items()})
        if not res["fits"][0]:  # every run here was measured, so it fit: the memory model says otherwise
            unfit[src].append(f"{r['model_name']} on {job.devices}: {float(res['total_gb'][0]):.1f} GB")
        mem = re.search(r"peak[ _]mem(?:ory)?(?:_gib)?\s*=\s*([0-9.]+)\s*(GiB|GB)?", r["notes"], re.I)
        if mem:
            gb = float(mem.group(1)) * (1.073741824 if ("gib" in mem.group(0).lower()) else 1.0)
            mem_pairs[src].append((float(res["total_gb"][0]), gb))
        key = (r["model_name"], r["hardware"], r["n_devices"], r["global_batch"], r["seq_len"], r["precision"], metric)
        same_job[key].append((float(pred), float(measured)))
        per[src]["pred"].append(float(pred))
        per[src]["naive"].append(float(naive))
        per[src]["meas"].append(float(measured))
        per[src]["metric"].append(metric)
    out = {}
    allp, alln, allt, allnt = [], [], [], []
    for src, d in per.items():
        p, nv, m = np.array(d["pred"]), np.array(d["naive"]), np.array(d["meas"])
        ep, en = np.abs(p - m) / m, np.abs(nv - m) / m
        et = np.abs(m / p - 1)  # every metric is a throughput: the step time's error is measured / predicted - 1
        allnt += list(np.abs(m / nv - 1))
        allp += list(ep)
        alln += list(en)
        allt += list(et)
        # ranks only compare like with like: within a source, over the rows of its most common
        # metric (the Megatron-LM README mixes 9 TFLOP/s rows with 2 MFU rows, whose small numbers
        # would rank last in both lists and count as agreement)
        metric_main = max(set(d["metric"]), key=d["metric"].count)
        same = np.array([x == metric_main for x in d["metric"]])
        out[src] = {
            "rows": len(m),
            "mape": round(float(ep.mean()), 3),
            "naive_mape": round(float(en.mean()), 3),
            "mape_step_time": round(float(et.mean()), 3),
            "spearman": _spearman(list(p[same]), list(m[same])),
            "spearman_interval90": _spearman_interval(p[same], m[same]),
            "naive_spearman": _spearman(list(nv[same]), list(m[same])),
            "spearman_rows": int(same.sum()),
        }
    out["ALL"] = {
        "rows": len(allp),
        "mape": round(float(np.mean(allp)), 3),
        "naive_mape": round(float(np.mean(alln)), 3),
        "mape_step_time": round(float(np.mean(allt)), 3),
        "naive_mape_step_time": round(float(np.mean(allnt)), 3),
        "skipped": skipped,
    }
    # calibrated, leave-one-source-out: each source is predicted with scales fitted on the others
    errs = errors(runs)  # every run's calibration grid, evaluated once for the three cross-validations
    cv = cross_validate(runs, errs=errs)
    cal_ape, cal_time = [], []
    for src, v in cv.items():
        out[src]["calibrated_mape"] = round(float(v["mape"]), 3)
        out[src]["calibrated_mape_step_time"] = round(float(v["mape_step_time"]), 3)
        cal_time += [float(v["mape_step_time"])] * int(v["rows"])
        out[src]["fit_on_others"] = {
            k: round(float(v[k]), 3) for k in ("gemm_scale", "attn_scale", "comm_scale", "inter_scale")
        }
        out[src]["fit_on_others"]["layer_overhead_us"] = round(float(v["layer_overhead_s"]) * 1e6, 1)
        out[src]["fit_on_others"]["prior_pull"] = float(v["prior_pull"])
        cal_ape += [float(v["mape"])] * int(v["rows"])
    out["ALL"]["calibrated_mape_loso"] = round(float(np.mean(cal_ape)), 3)
    # per-row predictions, for inspection and paired comparisons (compare_rows.py); signed errors,
    # + = predicted faster/higher; loso_*: fitted on the other sources (the fit in cv)
    for row, run in zip(per_row, runs, strict=True):
        v = cv[run.group]
        f = Fit(
            **{k: float(v[k]) for k in ("gemm_scale", "attn_scale", "comm_scale", "inter_scale", "layer_overhead_s")}
        )
        pred = predict_one(run, f)
        row["loso_predicted"] = round(pred, 4)
        row["loso_error"] = round(pred / run.measured - 1, 4)
    # how precise the two headline figures are: standard errors clustered by source (compare_rows.py)
    groups = [run.group for run in runs]
    out["ALL"]["mape_se_sources"] = round(clustered_se(np.abs([float(x["error"]) for x in per_row]), groups), 3)
    loso = np.array([float(x["loso_error"]) for x in per_row])
    out["ALL"]["calibrated_mape_loso_se_sources"] = round(clustered_se(np.abs(loso), groups), 3)
    out["ALL"]["calibrated_mape_loso_step_time_se_sources"] = round(clustered_se(np.abs(1 / (1 + loso) - 1), groups), 3)
    if rows_out is not None:
        with open(rows_out, "w", encoding="utf-8", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(per_row[0]))
            w.writeheader()
            w.writerows(per_row)
    out["ALL"]["calibrated_mape_loso_step_time"] = round(float(np.mean(cal_time)), 3)
    # the same, fitted only on other publications of the held-out source's framework where there
    # are any (what a user calibrating on their own framework's runs gets on a new set of runs)
    fam_ape = []
    for src, v in cross_validate(runs, by_family=True, errs=errs).items():
        out[src]["calibrated_mape_framework"] = round(float(v["mape"]), 3)
        out[src]["framework_fit_on"] = v["fit_on"]
        fam_ape += [float(v["mape"])] * int(v["rows"])
    out["ALL"]["calibrated_mape_loso_framework"] = round(float(np.mean(fam_ape)), 3)
    # what `--calibrate runs.csv` on one's own runs gives: within each source of 3+ rows, each row
    # predicted by a fit on the source's other rows (leave-one-row-out; never the row itself)
    own_ape = []
    for src in out:
        idx = [i for i, r in enumerate(runs) if r.group == src]
        mine = [dataclasses.replace(runs[i], group=str(i)) for i in idx]
        if len(mine) >= 3:
            v = cross_validate(mine, errs=errs[idx])
            out[src]["calibrated_mape_own_runs"] = round(float(np.mean([float(x["mape"]) for x in v.values()])), 3)
            own_ape += [float(x["mape"]) for x in v.values()]
    out["ALL"]["calibrated_mape_own_runs"] = round(float(np.mean(own_ape)), 3)
    out["ALL"]["rows_own_runs"] = len(own_ape)
    # choosing: runs of one model, device count, batch and precision that differ only in strategy
    groups = [v for v in same_job.values() if len({m for _, m in v}) > 1]
    rhos = [
        x for x in (_spearman([p for p, _ in v], [m for _, m in v]) for v in groups if len(v) >= 3) if x is not None
    ]
    gaps = []
    for v in groups:
        best_pred = max(v, key=lambda t: t[0])[1]
        gaps.append(1 - best_pred / max(m for _, m in v))
    out["MEMORY"] = {
        src: {
            "rows": len(v),
            "mape": round(float(np.mean([abs(p - m) / m for p, m in v])), 3),
            "mean_signed": round(float(np.mean([(p - m) / m for p, m in v])), 3),
        }
        for src, v in mem_pairs.items()
    }
    every = [(p, m) for v in mem_pairs.values() for p, m in v]
    if every:
        out["MEMORY"]["ALL"] = {
            "rows": len(every),
            "mape": round(float(np.mean([abs(p - m) / m for p, m in every])), 3),
            "mean_signed": round(float(np.mean([(p - m) / m for p, m in every])), 3),
        }
    # measured runs the memory model says do not fit on their devices (each one ran, so 0 is right)
    out["FITS"] = {"rows": len(per_row), "predicted_not_to_fit": sum(len(v) for v in unfit.values()), **unfit}
    # every pair of runs within a group whose measured values differ: is the faster one predicted faster?
    pairs = [(a, b) for v in groups for i, a in enumerate(v) for b in v[i + 1 :] if a[1] != b[1]]
    concordant = sum((pa - pb) * (ma - mb) > 0 for (pa, ma), (pb, mb) in pairs)
    out["STRATEGY_CHOICE"] = {
        "groups": len(groups),
        "groups_with_3plus": len(rhos),
        "pairs": len(pairs),
        "pairs_ordered_right": concordant,
        "mean_spearman": round(float(np.mean(rhos)), 3) if rhos else None,
        "picked_best_within_10pct": sum(g <= 0.10 for g in gaps),
        "mean_gap_to_best": round(float(np.mean(gaps)), 3) if gaps else None,
    }
    return out


def _framework(source: str) -> str:
    """The training framework behind a source (for framework-wise calibration): Megatron-LM and its
    Ascend fork MindSpeed; torchtitan; MaxText; the others stand alone."""
    for key, fw in (
        ("Narayanan", "megatron"),
        ("Megatron-LM", "megatron"),
        ("MindSpeed", "megatron"),
        ("torchtitan", "torchtitan"),
        ("maxtext", "maxtext"),
        ("nanotron", "nanotron"),
    ):
        if key.lower() in source.lower():
            return fw
    return ""


def _preset(source: str) -> dict:
    """The job settings of the source's framework preset (none for the sources without one)."""
    fw = _framework(source)
    return dict(frameworks.by_name(fw).settings) if fw in frameworks.catalog() else {}


def _predictor(r: dict, job: Job):  # noqa: ANN202
    """The row's metric as the model predicts it, under the row's source's FLOP definition. Every
    FLOP-based metric here counts attention without causal halving: Megatron (SC21 eq. 3 and
    training.py num_floating_point_operations of 2024, which also count the recomputed forward),
    nanotron (models/llama.py get_flops), PaLM (6N + 12LHQT, appendix B) and MaxText before its
    2025-07 change (SOURCES.md); MFU (PaLM, nanotron, Megatron's strong scaling) excludes recompute."""
    metric = r["measured_metric"]

    def predict(j: Job, s: dict) -> np.ndarray:
        res = evaluate(j, s)
        if metric == "tokens_per_s_per_device":
            return res["tokens_per_s_per_device"]
        noncausal = j.model.flops_per_token(j.seq_len, causal=False) / j.model.flops_per_token(j.seq_len)
        if metric == "mfu":
            return res["mfu"] * noncausal
        if "Megatron" in r["source"] or "Narayanan" in r["source"]:
            return res["hfu_tflops_per_device"] * noncausal
        return res["tflops_per_device"] * noncausal

    return predict


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--csv", default=str(ROOT / "benchmarks" / "data" / "published_runs.csv"))
    ap.add_argument(
        "--rows", metavar="OUT.csv", help="also write each row's measured and predicted value and signed error"
    )
    a = ap.parse_args()
    print(json.dumps({"throughput": throughput()}))
    for src, v in accuracy(Path(a.csv), Path(a.rows) if a.rows else None).items():
        print(json.dumps({"source": src, **v}))


if __name__ == "__main__":
    main()
