"""Planner: measured cluster networks, gradient buckets and nanotron's after-backward ZeRO-1 sync,
each against values computed by hand."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from stepscope.catalog.model_flops import from_config_dict
from stepscope.cli import main
from stepscope.errors import ConfigError
from stepscope.planner import network
from stepscope.planner.cost import evaluate
from stepscope.planner.job import Job, make_job
from stepscope.planner.network import NetworkProfile
from stepscope.planner.search import hardware
from stepscope.planner.strategy import parse_strategy

TINY = {
    "hidden_size": 1024,
    "num_hidden_layers": 8,
    "num_attention_heads": 16,
    "intermediate_size": 4096,
    "vocab_size": 32000,
    "hidden_act": "silu",
}
P_DEV = 8 * (4 * 1024 * 1024 + 3 * 1024 * 4096) + 32000 * 1024  # tp = pp = 1: every layer + the embedding

# two-device nodes; at 2 nodes the all-gather reaches 50 GB/s of bus bandwidth, at 4 nodes 25
TOY = NetworkProfile(
    name="toy",
    devices_per_node=2,
    nodes=(1.0, 2.0, 4.0),
    message_bytes=10**9,
    busbw_gbps={
        "all_reduce": (100.0, 50.0, 40.0),
        "all_gather": (80.0, 50.0, 25.0),
        "reduce_scatter": (80.0, 50.0, 25.0),
    },
)


def test_bandwidth_is_interpolated_in_log_nodes_and_clamped() -> None:
    # 2 nodes sit halfway between 1 and 4 in log(nodes): (80 + 25) / 2
    prof = dataclasses.replace(TOY, nodes=(1.0, 4.0), busbw_gbps={k: (80.0, 25.0) for k in network.KINDS})
    assert prof.busbw("all_gather", np.array([2.0]))[0] == pytest.approx(52.5e9)
    assert prof.busbw("all_gather", np.array([16.0]))[0] == pytest.approx(25e9)  # beyond the largest: its value
    assert prof.busbw("all_gather", np.array([1.0]))[0] == pytest.approx(80e9)


def test_step_latency_is_what_the_nominal_bandwidth_leaves_of_the_measured_time() -> None:
    """At 2 nodes of 2 devices (n = 4), 1 GB: an all-gather moves 3/4 GB per rank in 3 steps;
    at 50 GB/s that takes 15 ms, at the nominal 100 GB/s 7.5 ms, so 2.5 ms per step. An
    all-reduce moves 6/4 GB in 6 steps: 30 ms measured (50 GB/s), 15 ms nominal, 2.5 ms per step.
    At 4 nodes (n = 8): all-gather 7/8 GB at 25 GB/s = 35 ms, nominal 8.75 ms, / 7 = 3.75 ms."""
    ag = TOY.step_latency_s("all_gather", np.array([2.0, 4.0, 3.0]), 100e9)
    assert ag[0] == pytest.approx(2.5e-3)
    assert ag[1] == pytest.approx(3.75e-3)
    w = math.log(3 / 2) / math.log(2)  # 3 nodes: interpolated in log(nodes) between 2 and 4
    assert ag[2] == pytest.approx(2.5e-3 + w * 1.25e-3)
    ar = TOY.step_latency_s("all_reduce", np.array([2.0]), 100e9)
    assert ar[0] == pytest.approx(2.5e-3)
    # a measurement faster than the nominal bandwidth leaves no latency (never negative)
    assert TOY.step_latency_s("all_gather", np.array([2.0]), 10e9)[0] == 0.0


def test_group_nodes_counts_the_nodes_a_strided_group_touches() -> None:
    nodes, per_node = TOY.group_nodes(np.array([4.0, 4.0, 2.0]), np.array([8.0, 16.0, 2.0]))
    # 4 ranks over 8 consecutive ranks of 2-device nodes: 4 nodes, 1 each; over 16 (stride 4): 4 nodes,
    # 1 each (not 8 nodes); 2 ranks inside one node
    assert list(nodes) == [4.0, 4.0, 1.0]
    assert list(per_node) == [1.0, 1.0, 2.0]


def job_from_record(devices: int, **kw: object) -> Job:
    return make_job(from_config_dict(TINY), hardware("h100"), devices, 8, 64, 2048, **kw)  # type: ignore[arg-type]


def test_a_network_profile_sets_the_dp_bandwidth_and_latency_across_nodes() -> None:
    """dp = 16 over 2 nodes of 8 (tp = pp = 1): 8 ranks per node, one group, so the node's nominal
    8 x 50 GB/s = 400 GB/s whole; the profile's 2-node all-reduce step latency: 256 MB over
    n = 16 moves 2 x 15/16 x 256 MiB in 30 steps, at 361.7 GB/s measured vs 400 nominal."""
    prof = network.by_name("hf-h100")
    job = job_from_record(16, network=prof)
    r = evaluate(job, parse_strategy("dp=16,mb=1"))
    moved = 2 * 15 / 16 * 268435456
    alpha = (moved / 361.7e9 - moved / 400e9) / 30
    raw = 2 * 15 / 16 * 4 * P_DEV / 400e9 + 30 * alpha
    # 64 sequences over 16 replicas, mb 1: 4 micro-batches; the all-reduce hides 70% under the
    # last one's backward (2/3 of a quarter of the compute)
    assert r["dp_s"][0] == pytest.approx(raw - 0.7 * min(raw, r["compute_s"][0] / 4 * 2 / 3))
    # without the profile: the per-GPU 50 GB/s and 20 us per step
    base = evaluate(job_from_record(16), parse_strategy("dp=16,mb=1"))
    raw0 = 2 * 15 / 16 * 4 * P_DEV / 50e9 + 30 * 20e-6
    assert base["dp_s"][0] == pytest.approx(raw0 - 0.7 * min(raw0, base["compute_s"][0] / 4 * 2 / 3))


def test_groups_sharing_a_node_share_its_network_and_one_node_gets_the_measured_figure() -> None:
    """tp = 4, dp = 4 over 2 nodes: each DP group has 2 ranks per node, and the node runs 4 such
    groups, so each gets 400 x 2/8 = 100 GB/s; TP inside a node gets the one-node all-gather
    figure, 249.8 GB/s, with 10 us steps."""
    prof = network.by_name("hf-h100")
    r = evaluate(job_from_record(16, network=prof), parse_strategy("tp=4,dp=4,mb=1"))
    n = 16  # the measurement's group at 2 nodes: its all-reduce step latency
    moved = 2 * (n - 1) / n * 268435456
    step = (moved / 361.7e9 - moved / 400e9) / (2 * (n - 1))
    p_dev = P_DEV / 4
    raw = 2 * 3 / 4 * 4 * p_dev / 100e9 + 2 * 3 * step
    # 64 sequences over 4 replicas: 16 micro-batches, the last one's backward is the window
    assert r["dp_s"][0] == pytest.approx(raw - 0.7 * min(raw, r["compute_s"][0] / 16 * 2 / 3))
    # TP per layer and micro-batch: attention and MLP each an all-gather + reduce-scatter pair
    # forward and backward, 2 x (3/4 x 2 x s*b*h*2 B / 249.8 GB/s + 2 x 3 x 10 us); 8 layers,
    # 16 micro-batches, no TP overlap
    tp_msg = 2048 * 1 * 1024 * 2
    per_layer = 2 * (2 * 3 / 4 * tp_msg / 249.8e9 + 2 * 3 * 10e-6)
    assert r["tp_s"][0] == pytest.approx(2 * per_layer * 8 * 16)


def test_gradient_buckets_each_pay_the_ring_latency() -> None:
    """dp = 16 over 2 nodes, no profile: the fp32 all-reduce's 2 x 15 steps of 20 us are paid once
    per 25 MB bucket of bf16 gradients: ceil(2 B x P_DEV / 25e6) buckets."""
    s = parse_strategy("dp=16,mb=1")
    one = evaluate(job_from_record(16), s)
    bucketed = evaluate(job_from_record(16, dp_bucket_mb=25.0), s)
    buckets = math.ceil(2 * P_DEV / 25e6)
    raw = 2 * 15 / 16 * 4 * P_DEV / 50e9 + buckets * 30 * 20e-6
    window = bucketed["compute_s"][0] / 4 * 2 / 3
    assert bucketed["dp_s"][0] == pytest.approx(raw - 0.7 * min(raw, window))
    assert bucketed["dp_s"][0] > one["dp_s"][0]


def test_zero1_synced_after_the_backward_is_an_exposed_all_reduce() -> None:
    """nanotron's ZeRO-1 with fp32 accumulation: the gradients are all-reduced (2 x (n-1)/n x 4 B
    per parameter, 2 x 7 steps) after the backward, nothing hidden; the bf16 weights' all-gather
    after the optimizer step stays as it was (exposed). One node of 8: the H100 node's measured
    all-reduce and all-gather bus bandwidths (436 and 249.8 GB/s), 10 us steps."""
    s = parse_strategy("dp=8,zero=1,mb=1")
    base = make_job(from_config_dict(TINY), hardware("h100"), 8, 8, 64, 2048)
    r = evaluate(base.replaced(zero_sync_after_backward=True), s)
    ar = 2 * 7 / 8 * 4 * P_DEV / 436e9 + 2 * 7 * 10e-6
    ag = 7 / 8 * 2 * P_DEV / 249.8e9 + 7 * 10e-6
    assert r["dp_s"][0] == pytest.approx(ar + ag)
    # the default (reduce-scatter under the last backward) is cheaper
    assert evaluate(base, s)["dp_s"][0] < r["dp_s"][0]


def test_bad_network_files_and_names_are_one_line_errors(tmp_path: Path) -> None:
    good = yaml.safe_load(Path(network.__file__).parent.parent.joinpath("data", "networks.yaml").read_text())
    bad = dict(good["networks"][0], nodes=[1, 2])  # fewer counts than bandwidths
    with pytest.raises(ConfigError, match="one bandwidth per count"):
        network.parse_entries({"networks": [bad]}, "x.yaml")
    with pytest.raises(ConfigError, match="malformed"):
        network.parse_entries({"networks": [{"name": "x"}]}, "x.yaml")
    with pytest.raises(ConfigError, match="network hf-h100: unknown key devcie"):
        network.parse_entries({"networks": [dict(good["networks"][0], devcie="H100-SXM")]}, "x.yaml")
    kinds = good["networks"][0]["busbw_gbps"]
    for value in (float("nan"), float("inf"), 0.0):  # nan and inf passed the old min() > 0 check
        worse = dict(good["networks"][0], busbw_gbps={**kinds, "all_gather": [value, *kinds["all_gather"][1:]]})
        with pytest.raises(ConfigError, match="must be finite numbers > 0"):
            network.parse_entries({"networks": [worse]}, "x.yaml")
    with pytest.raises(ConfigError, match="unknown network"):
        network.by_name("nope")
    with pytest.raises(ConfigError, match="devices per node"):
        make_job(from_config_dict(TINY), hardware("h100"), 16, 4, 64, 2048, network=network.by_name("hf-h100"))


def test_the_bundled_profile_reads_as_alpha_beta_with_the_nominal_node_rate() -> None:
    """The Ultra-Scale Playbook's all-gather medians leave 33-50 us per ring step at every count
    from 2 to 64 nodes (module docstring): e.g. 64 nodes, n = 512, 11.0 GB/s: 511/512 x 256 MiB
    takes 24.36 ms, 0.67 ms of it at 400 GB/s, so (24.36 - 0.67) / 511 = 46.4 us."""
    prof = network.by_name("HF-H100")
    lat = prof.step_latency_s("all_gather", np.array([2.0, 4.0, 8.0, 16.0, 32.0, 64.0]), 400e9)
    assert np.all((lat > 30e-6) & (lat < 52e-6))
    assert lat[-1] == pytest.approx(46.4e-6, abs=0.1e-6)


def test_cli_flags_and_batch_keys_reach_the_model(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "256",
        "--global-batch",
        "256",
        "--seq-len",
        "4096",
        "--evaluate",
        "tp=4,dp=64,zero=1,mb=4",
        "--json",
    ]
    assert main(args) == 0
    plain = json.loads(capsys.readouterr().out)
    assert (
        main([*args, "--network", "hf-h100", "--set", "dp_bucket_mb=25", "--set", "zero_sync_after_backward=true"]) == 0
    )
    flagged = json.loads(capsys.readouterr().out)
    assert flagged["time_s"]["dp"] > plain["time_s"]["dp"]
    rec = {
        "model": "llama3-8b",
        "hardware": "h100",
        "devices": 256,
        "global_batch": 256,
        "seq_len": 4096,
        "strategy": "tp=4,dp=64,zero=1,mb=4",
        "network": "hf-h100",
        "dp_bucket_mb": 25,
        "zero_sync_after_backward": True,
    }
    f = tmp_path / "b.jsonl"
    f.write_text(json.dumps(rec) + "\n" + json.dumps({**rec, "network": "nope"}) + "\n")
    assert main(["plan", "--batch", str(f), "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert lines[0]["time_s"]["dp"] == pytest.approx(flagged["time_s"]["dp"])
    assert "unknown network" in lines[1]["error"]


def test_a_cluster_measures_its_own_network_in_a_yaml_file(tmp_path: Path) -> None:
    """A user's file (the bundled layout) is read by path; with several networks, FILE#NAME picks
    one. Two-node numbers of the toy profile: 4 devices, 2 per node, the 2-node all-gather 50 GB/s."""
    entry = {
        "name": "mine",
        "devices_per_node": 2,
        "message_bytes": 10**9,
        "nodes": [1, 2],
        "busbw_gbps": {"all_reduce": [100, 50], "all_gather": [80, 50], "reduce_scatter": [80, 50]},
    }
    one = tmp_path / "one.yaml"
    one.write_text(yaml.safe_dump({"networks": [entry]}))
    prof = network.by_name(str(one))
    assert prof.name == "mine" and prof.busbw("all_gather", np.array([2.0]))[0] == pytest.approx(50e9)
    assert prof.step_latency_s("all_gather", np.array([2.0]), 100e9)[0] == pytest.approx(2.5e-3)  # as TOY's
    two = tmp_path / "two.yaml"
    two.write_text(yaml.safe_dump({"networks": [entry, dict(entry, name="other")]}))
    assert network.by_name(f"{two}#other").name == "other"
    with pytest.raises(ConfigError, match="holds 2 networks"):
        network.by_name(str(two))
    with pytest.raises(ConfigError, match="no network 'x'"):
        network.by_name(f"{two}#x")
    with pytest.raises(ConfigError, match="cannot read"):
        network.by_name(str(tmp_path / "missing.yaml"))
    bad = tmp_path / "bad.yaml"
    bad.write_text("networks: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        network.by_name(str(bad))


def test_cli_reads_a_network_file_and_reports_a_bad_one_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "net.yaml"
    f.write_text("networks:\n  - name: x\n    nodes: [1]\n")
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "16",
        "--global-batch",
        "32",
        "--seq-len",
        "4096",
        "--evaluate",
        "dp=16",
        "--network",
        str(f),
    ]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(f) in err and "malformed" in err


def test_a_profile_measured_on_one_device_is_refused_for_another() -> None:
    with pytest.raises(ConfigError, match="measured on H100-SXM nodes, not A100"):
        make_job(from_config_dict(TINY), hardware("a100"), 16, 8, 64, 2048, network=network.by_name("hf-h100"))


def test_a_node_with_measured_collective_bandwidth_uses_it_by_kind() -> None:
    """H100 nodes carry the measured one-node bus bandwidths (all-reduce 436, all-gather 249.8,
    reduce-scatter 249.7 GB/s); point-to-point keeps the 450 GB/s link; an A100 (unmeasured) the
    nominal 300 GB/s for everything; across nodes the per-device 50 GB/s either way."""
    from stepscope.planner.links import Links

    h100 = Links.of(job_from_record(16))
    inside, eight = np.array([8.0]), np.array([8.0])
    assert h100.bandwidth(inside, eight, "all_reduce")[0] == pytest.approx(436e9)
    assert h100.bandwidth(inside, eight, "all_gather")[0] == pytest.approx(249.8e9)
    assert h100.bandwidth(inside, eight, "reduce_scatter")[0] == pytest.approx(249.7e9)
    assert h100.bandwidth(inside)[0] == pytest.approx(450e9)
    assert h100.bandwidth(np.array([16.0]), np.array([16.0]), "all_reduce")[0] == pytest.approx(50e9)
    a100 = Links.of(make_job(from_config_dict(TINY), hardware("a100"), 16, 8, 64, 2048))
    assert a100.bandwidth(inside, eight, "all_gather")[0] == pytest.approx(300e9)


def test_the_search_says_which_network_its_times_assume(capsys: pytest.CaptureFixture[str]) -> None:
    args = [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--devices",
        "16",
        "--global-batch",
        "32",
        "--seq-len",
        "4096",
        "--top",
        "2",
    ]
    assert main([*args, "--network", "hf-h100"]) == 0
    assert "network: hf-h100 (measured" in capsys.readouterr().out
    assert main(args) == 0
    assert "network:" not in capsys.readouterr().out
