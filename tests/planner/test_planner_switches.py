"""A search's rows name the framework that runs them and print its switches; without --framework
the search keeps to Megatron-LM on GPUs and MaxText on TPUs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from stepscope.planner.switches import switches

ROW = {
    "tp": 4, "sp": 1, "pp": 4, "vpp": 2, "dp": 8, "cp": 2, "ep": 1, "etp": 4, "zero": 1, "hsdp": 0,
    "mb": 1, "ga": 32, "offload": 0, "offload_layers": 0, "tp_overlap": "full", "ep_overlap": 0,
    "keep_params": 0, "recompute": "selective", "sched": "1f1b",
}  # fmt: skip


def test_megatron_arguments() -> None:
    text = switches("megatron", ROW, layers=32, global_batch=256, seq_len=8192, experts=0, cores=1)
    assert text == (
        "--tensor-model-parallel-size 4 --pipeline-model-parallel-size 4 "
        "--num-virtual-stages-per-pipeline-rank 2 --context-parallel-size 2 --sequence-parallel "
        "--tp-comm-overlap --use-distributed-optimizer --overlap-grad-reduce --overlap-param-gather "
        "--recompute-granularity selective --micro-batch-size 1 --global-batch-size 256 --seq-length 8192"
    )


def test_maxtext_on_two_core_chips() -> None:
    # the seed table's best run: 64 TPU v7x chips = 128 JAX devices, dp 4 x fsdp 32, batch 10 a device
    row = {**ROW, "tp": 1, "pp": 1, "vpp": 1, "cp": 1, "dp": 64, "zero": 3, "hsdp": 16, "mb": 20, "ga": 4}
    row["recompute"] = "save_out_proj"
    text = switches("maxtext", row, layers=24, global_batch=5120, seq_len=4096, experts=256, cores=2)
    assert text == (
        "ici_data_parallelism=4 ici_fsdp_parallelism=32 per_device_batch_size=10 "
        "gradient_accumulation_steps=4 remat_policy=save_out_proj max_target_length=4096"
    )


def test_torchtitan_hsdp_and_pipeline() -> None:
    row = {**ROW, "zero": 3, "hsdp": 4, "tp_overlap": "full", "keep_params": 1, "recompute": "op", "sched": "zb-v"}
    text = switches("torchtitan", row, layers=32, global_batch=256, seq_len=8192, experts=0, cores=1)
    assert "--parallelism.data_parallel_replicate_degree 2 --parallelism.data_parallel_shard_degree 4" in text
    assert "--parallelism.pipeline_parallel_schedule ZBVZeroBubble" in text
    assert "--parallelism.enable_async_tensor_parallel" in text
    assert "--parallelism.fsdp_reshard_after_forward never" in text
    assert "--activation_checkpoint.mode selective --activation_checkpoint.selective_ac_option op" in text
    assert text.endswith("--training.local_batch_size 32 --training.seq_len 8192")


JOB = ["plan", "--devices", "64", "--global-batch", "256", "--seq-len", "4096", "--top", "5", "--json"]


def test_search_defaults_to_one_framework(run_json: Callable[..., Any]) -> None:
    gpu = run_json(*JOB, "--model", "llama3-8b", "--hardware", "h100")["rows"]
    assert {r["framework"] for r in gpu} == {"megatron"}
    assert all(r["switches"].startswith("--tensor-model-parallel-size") for r in gpu)
    assert all(r["strategy"]["zero"] in (0, 1, 3) and r["strategy"]["sched"] == "1f1b" for r in gpu)
    tpu = run_json(*JOB, "--model", "llama3-8b", "--hardware", "tpu-v5p")["rows"]
    assert {r["framework"] for r in tpu} == {"maxtext"}
    assert all(r["strategy"]["zero"] in (0, 3) and "remat_policy=" in r["switches"] for r in tpu)


def test_mindspeed_dualpipev() -> None:
    row = {**ROW, "pp": 2, "vpp": 2, "cp": 1, "ep": 8, "etp": 1, "sched": "dualpipev", "recompute": "none"}
    text = switches("mindspeed", row, layers=32, global_batch=512, seq_len=4096, experts=8, cores=1)
    assert "--num-virtual-stages-per-pipeline-rank" not in text  # DualPipeV's two chunks are its own
    assert "--overlap-grad-reduce" not in text and "--use-distributed-optimizer" in text
    assert text.endswith("--schedules-method dualpipev --moe-fb-overlap")
    assert "--expert-model-parallel-size 8 --expert-tensor-parallel-size 1" in text


def test_ascend_defaults_to_mindspeed(run_json: Callable[..., Any]) -> None:
    rows = run_json(*JOB, "--model", "mixtral-8x7b", "--hardware", "ascend-910b", "--where", "sched=dualpipev")["rows"]
    assert rows and {r["framework"] for r in rows} == {"mindspeed"}
    assert all(r["strategy"]["sched"] == "dualpipev" and "dualpipev" in r["switches"] for r in rows)


def test_the_python_api_searches_under_the_default_framework_too() -> None:
    import stepscope

    rows = stepscope.plan(model="llama3-8b", hardware="tpu-v5p", devices=8, global_batch=64, seq_len=4096, top=2)
    assert [r["framework"] for r in rows.records] == ["maxtext", "maxtext"]
    assert all("remat_policy=" in r["switches"] for r in rows.records)


def test_megatron_offload_turns_the_overlaps_off() -> None:
    row = {**ROW, "offload": 1, "offload_layers": 0}
    text = switches("megatron", row, layers=32, global_batch=256, seq_len=8192, experts=0, cores=1)
    assert "--use-distributed-optimizer --recompute-granularity selective" in text
    assert "--overlap-grad-reduce" not in text and "--cpu-offloading --cpu-offloading-num-layers 32" in text
