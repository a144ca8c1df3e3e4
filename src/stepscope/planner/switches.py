"""A plan's row as the switches of the framework that runs it: Megatron-LM's command-line
arguments, MaxText's config keys, torchtitan's TOML options (as command-line overrides), a
DeepSpeed config with Megatron-DeepSpeed's degrees, nanotron's YAML. Names from each framework's
own argument parser or config (Megatron-LM megatron/training/arguments.py; MaxText configs/base.yml;
torchtitan config/job_config.py; DeepSpeed's config JSON; nanotron config/parallelism_config.py),
for the strategy as run: degrees, micro-batch, recompute, schedule, ZeRO stage, overlap.

A row is rendered only for the framework it was planned under (frameworks.yaml restricts each
search to what that framework has), so every switch printed exists there."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .megatron_layout import counts_run, layout
from .stages import end_split

Row = dict[str, Any]  # records.records' "strategy": the strategy as run, policies by name


def _overlap(s: Row) -> str:
    """The row's TP overlap mechanism by name (only ``full`` is a switch; the others are how the
    framework runs without one)."""
    return str(s["tp_overlap"])


def _megatron_recompute(policy: str) -> list[str]:
    if policy == "selective":
        return ["--recompute-granularity selective"]
    if policy == "full":
        return ["--recompute-granularity full", "--recompute-method uniform", "--recompute-num-layers 1"]
    modules = {
        "layernorm": "layernorm",
        "layernorm_moe_act": "layernorm moe_act",
        "mla_up_proj": "mla_up_proj",
        "layernorm_mla_up_proj_moe_act": "layernorm mla_up_proj moe_act",
    }.get(policy)
    return [f"--recompute-granularity selective --recompute-modules {modules}"] if modules else []


def _megatron_split(s: Row, layers: int, split_embedding: bool, mtp: int, layouts: bool) -> list[str]:
    """The pipeline split's switches: virtual stages and the count switches, or one layout."""
    pp, vpp = s["pp"], s["vpp"]
    if layouts and not counts_run(layers, pp, vpp, split_embedding):
        return [f"--pipeline-model-parallel-layout '{layout(layers, pp, vpp, split_embedding, mtp)}'"]
    out = [f"--num-virtual-stages-per-pipeline-rank {vpp}"] if vpp > 1 else []
    if pp > 1 and split_embedding:
        out.append("--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split")
    elif pp > 1 and layers % pp:
        _, first, last = end_split(float(layers), np.array([pp]))
        out.append(
            f"--decoder-first-pipeline-num-layers {int(first[0])} --decoder-last-pipeline-num-layers {int(last[0])}"
        )
    return out


def megatron(
    s: Row,
    *,
    layers: int,
    global_batch: int,
    seq_len: int,
    experts: int,
    cores: int = 1,
    split_embedding: bool = False,
    mtp: int = 0,
    layouts: bool = True,
) -> str:
    """Megatron-LM (pretrain_gpt.py) arguments; the pipeline split as an explicit layout where the
    count switches cannot give it (megatron_layout.py; not with ``layouts`` false)."""
    out = [f"--tensor-model-parallel-size {s['tp']}", f"--pipeline-model-parallel-size {s['pp']}"]
    out += _megatron_split(s, layers, split_embedding, mtp, layouts)
    if s["cp"] > 1:
        out.append(f"--context-parallel-size {s['cp']}")
    if experts:
        out.append(f"--expert-model-parallel-size {s['ep']}")
        if s["etp"] != s["tp"]:
            out.append(f"--expert-tensor-parallel-size {s['etp']}")
    if s["tp"] > 1 and s.get("sp", 1):
        out.append("--sequence-parallel")
    if _overlap(s) == "full" and s["tp"] > 1:
        out.append("--tp-comm-overlap")
    # the overlapped gradient reduction and parameter gather are off with activation offloading
    # (NVIDIA's Megatron launch scripts: "Disable --overlap-grad-reduce and --overlap-param-gather
    # when cpu offloading is on")
    overlap = not s["offload"]
    if s["zero"] == 1:
        out.append("--use-distributed-optimizer" + (" --overlap-grad-reduce --overlap-param-gather" if overlap else ""))
    elif s["zero"] == 3:
        out.append("--use-megatron-fsdp --data-parallel-sharding-strategy optim_grads_params")
    elif s["dp"] > 1 and overlap:
        out.append("--overlap-grad-reduce")
    out += _megatron_recompute(str(s["recompute"]))
    if s["offload"]:
        out.append("--cpu-offloading --cpu-offloading-num-layers " + str(s.get("offload_layers") or layers))
    out += [f"--micro-batch-size {s['mb']}", f"--global-batch-size {global_batch}", f"--seq-length {seq_len}"]
    return " ".join(out)


def maxtext(s: Row, *, layers: int, global_batch: int, seq_len: int, experts: int, cores: int = 1) -> str:
    """MaxText config overrides (key=value, as train.py takes them). A chip of ``cores`` TensorCores
    is that many JAX devices: the innermost data axis (fsdp, else data) holds them, and
    per_device_batch_size is per TensorCore."""
    dp, ep = int(s["dp"]), int(s["ep"])
    shard = int(s["hsdp"] or dp) if s["zero"] == 3 else 1
    fsdp = max(shard // ep, 1) if shard % ep == 0 else shard
    data = max(dp // (ep * fsdp), 1)
    if cores > 1:
        fsdp, data = (fsdp * cores, data) if s["zero"] == 3 or data == 1 else (fsdp, data * cores)
    out = [f"ici_data_parallelism={data}", f"ici_fsdp_parallelism={fsdp}"]
    for key, value in (("tensor", s["tp"]), ("expert", ep), ("context", s["cp"]), ("pipeline", s["pp"])):
        if int(value) > 1:
            out.append(f"ici_{key}_parallelism={value}")
    per_device = s["mb"] / cores
    out.append(f"per_device_batch_size={int(per_device) if float(per_device).is_integer() else per_device}")
    if s["ga"] > 1:
        out.append(f"gradient_accumulation_steps={s['ga']}")
    out.append(f"remat_policy={s['recompute']}")
    out.append(f"max_target_length={seq_len}")
    return " ".join(out)


_TITAN_SCHEDULES = {"1f1b": "1F1B", "zb-h1": "InterleavedZeroBubble", "zb-v": "ZBVZeroBubble", "afab": "GPipe"}


def torchtitan(s: Row, *, layers: int, global_batch: int, seq_len: int, experts: int, cores: int = 1) -> str:
    """torchtitan command-line overrides of its TOML job config."""
    dp = int(s["dp"])
    shard = int(s["hsdp"] or dp) if s["zero"] == 3 else 1
    out = [
        f"--parallelism.data_parallel_replicate_degree {dp // shard}",
        f"--parallelism.data_parallel_shard_degree {shard}",
        f"--parallelism.tensor_parallel_degree {s['tp']}",
    ]
    if s["pp"] > 1:
        sched = _TITAN_SCHEDULES.get(str(s["sched"]), str(s["sched"]))
        sched = "Interleaved1F1B" if sched == "1F1B" and s["vpp"] > 1 else sched
        out += [
            f"--parallelism.pipeline_parallel_degree {s['pp']}",
            f"--parallelism.pipeline_parallel_schedule {sched}",
        ]
        out.append(f"--parallelism.pipeline_parallel_microbatch_size {s['mb']}")
    if s["cp"] > 1:
        out.append(f"--parallelism.context_parallel_degree {s['cp']}")
    if experts and s["ep"] > 1:
        out.append(f"--parallelism.expert_parallel_degree {s['ep']}")
    if _overlap(s) == "full" and s["tp"] > 1:
        out.append("--parallelism.enable_async_tensor_parallel")
    if s["zero"] == 3 and s["keep_params"]:
        out.append("--parallelism.fsdp_reshard_after_forward never")
    mode = {"op": "selective --activation_checkpoint.selective_ac_option op"}.get(str(s["recompute"]), s["recompute"])
    out.append(f"--activation_checkpoint.mode {mode}")
    out += [f"--training.local_batch_size {global_batch // dp}", f"--training.seq_len {seq_len}"]
    return " ".join(out)


def deepspeed(s: Row, *, layers: int, global_batch: int, seq_len: int, experts: int, cores: int = 1) -> str:
    """A DeepSpeed config (JSON) with Megatron-DeepSpeed's model-parallel degrees."""
    config = (
        f'{{"train_micro_batch_size_per_gpu": {s["mb"]}, "gradient_accumulation_steps": {s["ga"]}, '
        f'"zero_optimization": {{"stage": {s["zero"]}}}, "bf16": {{"enabled": true}}}}'
    )
    out = [f"--tensor-model-parallel-size {s['tp']}", f"--pipeline-model-parallel-size {s['pp']}"]
    out += _megatron_recompute(str(s["recompute"]))
    if s["recompute"] == "full":
        out = [*out[:2], "--checkpoint-activations"]
    return " ".join(out) + f" --deepspeed_config ds.json with {config}"


def nanotron(s: Row, *, layers: int, global_batch: int, seq_len: int, experts: int, cores: int = 1) -> str:
    """nanotron's YAML config (parallelism, optimizer and tokens sections)."""
    mode = "REDUCE_SCATTER" if s["tp"] > 1 and s.get("sp", 1) else "ALL_REDUCE"
    return (
        f"parallelism: {{dp: {s['dp']}, tp: {s['tp']}, pp: {s['pp']}, pp_engine: {s['sched']}, tp_mode: {mode}, "
        f"recompute_layer: {str(s['recompute'] == 'full').lower()}}}; optimizer: {{zero_stage: {s['zero']}}}; "
        f"tokens: {{micro_batch_size: {s['mb']}, batch_accumulation_per_replica: {s['ga']}, "
        f"sequence_length: {seq_len}}}"
    )


def mindspeed(
    s: Row, *, layers: int, global_batch: int, seq_len: int, experts: int, cores: int = 1, split_embedding: bool = False
) -> str:
    """MindSpeed-LLM: Megatron-LM's arguments, DualPipeV as its own schedule (two chunks a stage,
    not Megatron's virtual stages)."""
    common = {"layers": layers, "global_batch": global_batch, "seq_len": seq_len, "experts": experts}
    if s["sched"] != "dualpipev":
        return megatron(s, **common, split_embedding=split_embedding, layouts=False)
    text = megatron({**s, "vpp": 1}, **common, split_embedding=split_embedding, layouts=False)
    # DualPipeV excludes the overlapped gradient reduction (dualpipev_feature.py's checks)
    text = text.replace(" --overlap-grad-reduce --overlap-param-gather", "").replace(" --overlap-grad-reduce", "")
    return text + " --schedules-method dualpipev --moe-fb-overlap"


RENDERERS: dict[str, Callable[..., str]] = {
    "megatron": megatron,
    "mindspeed": mindspeed,
    "maxtext": maxtext,
    "torchtitan": torchtitan,
    "deepspeed": deepspeed,
    "nanotron": nanotron,
}


def switches(
    framework: str,
    s: Row,
    *,
    layers: int,
    global_batch: int,
    seq_len: int,
    experts: int,
    cores: int,
    split_embedding: bool = False,
    mtp: int = 0,
) -> str:
    """The row's switches in ``framework``'s own terms ("" for a framework without a renderer);
    ``split_embedding``: the job counts the embedding and the loss as pipeline layers; ``mtp``:
    the model's multi-token-prediction layers (in a Megatron layout)."""
    render = RENDERERS.get(framework)
    if render is None:
        return ""
    extra: dict[str, Any] = {}
    if render is megatron:
        extra = {"split_embedding": split_embedding, "mtp": mtp}
    elif render is mindspeed:
        extra = {"split_embedding": split_embedding}
    return render(s, layers=layers, global_batch=global_batch, seq_len=seq_len, experts=experts, cores=cores, **extra)
