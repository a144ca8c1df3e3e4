#!/usr/bin/env bash
# Writes `analyze --json` and `plan --json` outputs for a fixed set of inputs into DIR, so that a
# refactor can be checked byte for byte: run it before and after, then `diff -r BEFORE AFTER`.
# Every input is in the repository (tests/fixtures, examples).
set -uo pipefail
out="${1:?usage: scripts/behaviour_snapshot.sh OUT_DIR}"
cd "$(dirname "$0")/.."
mkdir -p "$out"
S=tests/fixtures/traces
run() {  # name, then the stepscope arguments
  local name="$1"; shift
  stepscope "$@" > "$out/$name.json" 2> "$out/$name.stderr"; echo "$?" > "$out/$name.rc"
}
A() { run "analyze_$1" analyze "${@:2}" --json - --workers 1 -q; }
A a100 examples/traces/a100_nccl_rank0.json.gz
A jax_te examples/traces/jax_gpu_te_fused_attn.xplane.pb
H=$S/HolisticTraceAnalysis/tests/data
A hta_2rank "$H/trace_filter/sampled_rank-0.json.gz" "$H/trace_filter/sampled_rank-1.json.gz"
A hta_negq "$H/negative_queue_length_values_check/rank0.json.gz"
A hta_ns "$H/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
A hta_cpu "$H/cpu_only/rank-34.Jul_15_10_52_41.1074.pt.trace.json.gz"
A hta_cupti "$H/cupti_profiler/benchmark_result_924719_1679055439_trace.json.gz"
A resnet "$S/kineto/tb_plugin/samples/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
A b200 "$S/TraceLens/tests/traces/b200/eager_trace.json.gz"
A mi300 "$S/TraceLens/tests/traces/mi300/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
A nsysjax "$S"/JAX-Toolbox/.github/workflows/nsys-jax/test_data/pax_fsdp4_4proc_proc*.zip
A nsys_sqlite tests/fixtures/nsys_concurrent_profile4.sqlite
A nsys_old tests/fixtures/nsys_con_kernel.sqlite
P="--model llama3-70b --hardware h100 --devices 512 --global-batch 1024 --seq-len 8192"
run plan_top plan $P --top 20 --json
run plan_eval plan $P --evaluate "tp=8,pp=8,dp=8,vpp=2,mb=1,recompute=selective" --json
run plan_where plan $P --where "tp=8,pp<=4,cp=1" --distinct --top 10 --json
run plan_titan plan $P --framework torchtitan --top 10 --json
run plan_batch plan --batch examples/plan/sweep.jsonl
run plan_calib plan $P --calibrate examples/plan/nvidia_h100_runs.csv --top 5 --json
