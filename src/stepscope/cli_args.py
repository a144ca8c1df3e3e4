"""The command line's arguments: one parser for every subcommand (cli.py runs them). Types that
reject bad values as one usage line (exit 2)."""

from __future__ import annotations

import argparse
from typing import TypeAlias

from . import __version__
from .argtypes import OneLineParser, non_negative_float, positive, positive_float
from .monitor.cli import add_monitor_parser
from .planner.args import add_plan_parser
from .report.registry import extensions_help, file_renderers

Subparsers: TypeAlias = "argparse._SubParsersAction[OneLineParser]"


def parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="stepscope", description="Where every millisecond of a training step goes.")
    p.add_argument("--version", action="version", version=f"stepscope {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    _add_analyze_parser(sub)
    add_plan_parser(sub)
    _add_hlo_parser(sub)
    _add_network_parser(sub)
    _add_convert_parser(sub)
    _add_diff_parser(sub)
    add_monitor_parser(sub)
    return p


def _add_step_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--step-marker", metavar="NAME", help="annotation that marks a step when there is no ProfilerStep#N")
    p.add_argument(
        "--skip-steps",
        type=int,
        metavar="N",
        default=None,
        help="the first N steps are warm-up, kept out of statistics (default: detected, > 3x the median of the rest)",
    )


def _add_diff_parser(sub: Subparsers) -> None:
    d = sub.add_parser("diff", help="compare two runs: step time, breakdown, kernels, findings; a CI gate")
    d.add_argument("before", help="trace file, directory or glob (one run), or an `analyze --json` report")
    d.add_argument("after", help="the same for the run after the change")
    d.add_argument("--json", metavar="FILE", help="write the diff as JSON ('-' for standard output)")
    d.add_argument(
        "--fail-if-slower",
        type=non_negative_float,
        metavar="PCT",
        default=None,
        help="exit 1 when AFTER's median step is more than PCT%% slower and the difference is significant",
    )
    _add_step_args(d)
    d.add_argument("--workers", type=positive, default=None, help="worker processes for reading many rank files")


def _add_analyze_parser(sub: Subparsers) -> None:
    a = sub.add_parser(
        "analyze",
        help="step breakdown of PyTorch (Kineto), JAX/XLA (XPlane) or Nsight Systems (SQLite export) profiles (1..N ranks)",
    )
    a.add_argument(
        "traces",
        nargs="+",
        help="trace files (.json/.json.gz, .xplane.pb, nsys-jax .zip, Nsight .sqlite, .parquet), "
        "directories of per-rank files, or globs",
    )
    _add_outputs(a)
    _add_step_args(a)
    a.add_argument(
        "--rules", metavar="YAML", help="extra kernel classification rules (layout of data/kernel_rules.yaml)"
    )
    a.add_argument(
        "--advisor-rules",
        metavar="YAML",
        action="append",
        default=[],
        help="extra advisor rules (layout of data/advisor_rules.yaml; a rule with a bundled id replaces it)",
    )
    a.add_argument("--top", type=positive, default=20, help="how many top kernels / CPU ops to keep (default 20)")
    a.add_argument("--include-python", action="store_true", help="keep python_function events (skipped by default)")
    a.add_argument(
        "--workers", type=positive, default=None, help="processes for reading files (default: one per file, <= CPUs)"
    )
    a.add_argument("--cache-dir", metavar="DIR", help="cache parsed traces as Parquet here, keyed by file content")
    _add_inflate_cap(a)
    a.add_argument("--quiet", "-q", action="store_true", help="no terminal report")
    _add_roofline_options(a)
    _add_cluster_options(a)
    a.add_argument(
        "--hlo",
        nargs="+",
        metavar="HLO.txt",
        default=(),
        help="JAX/XLA: HLO text of the profiled program(s) "
        "(compiled.as_text() or an XLA dump), joined to the profiled ops by name for name scopes, FLOPs and bytes",
    )


def _add_outputs(a: argparse.ArgumentParser) -> None:
    o = a.add_argument_group("reports (besides the terminal report)")
    o.add_argument(
        "-o",
        "--output",
        action="append",
        default=[],
        metavar="OUT",
        help=f"write a report, its format chosen by the extension: {extensions_help('analysis')}; repeatable; "
        "- for standard output, with --format NAME",
    )
    names = ", ".join(r.name for r in file_renderers("analysis") if not r.binary)
    o.add_argument("--format", metavar="NAME", help=f"the format of -o -: {names}")
    o.add_argument(
        "--json",
        metavar="OUT",
        help="write the JSON report (schema: docs/json-schema.md), whatever the extension; - for standard output",
    )
    o.add_argument(
        "--html",
        metavar="OUT",
        help="write the self-contained HTML report, whatever the extension; - for standard output",
    )


def _add_roofline_options(a: argparse.ArgumentParser) -> None:
    r = a.add_argument_group("roofline and MFU")
    r.add_argument(
        "--hardware",
        metavar="NAME",
        help="device from the catalog, by name or alias as in plan (h100, a100-40gb, tpu-v5p, ...; default: detected from the trace)",
    )
    r.add_argument("--hardware-file", metavar="YAML", help="your own devices (layout of data/hardware.yaml)")
    r.add_argument("--model-flops", type=positive_float, metavar="N", help="model FLOPs per step per rank (for MFU)")
    r.add_argument(
        "--model",
        "--hf-config",
        dest="hf_config",
        metavar="MODEL",
        help="model FLOPs from the architecture: a catalog name as in plan (llama3-70b, ...), a Hugging Face "
        "config.json or a model directory",
    )
    r.add_argument(
        "--tokens-per-step", type=positive, metavar="N", help="tokens each rank processes per step (with --model)"
    )
    r.add_argument("--seq-len", type=positive, metavar="N", help="sequence length (with --model; attention FLOPs)")
    r.add_argument("--mfu-dtype", default="bf16", help="dtype whose peak MFU is measured against (default bf16)")
    r.add_argument(
        "--roofline-png", metavar="OUT", help="write the roofline chart as PNG (needs the [plot] extra; = -o OUT.png)"
    )


def _add_cluster_options(a: argparse.ArgumentParser) -> None:
    cl = a.add_argument_group("cluster view (2+ ranks)")
    cl.add_argument(
        "--straggler-z",
        type=positive_float,
        default=3.0,
        metavar="Z",
        help="robust z-score over which a rank is a straggler (default 3)",
    )
    cl.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="run the per-rank work on an existing Dask cluster: scheduler address "
        "(tcp://host:8786) or scheduler file; trace paths may be fsspec URLs (s3://...) the workers can read",
    )
    cl.add_argument(
        "--critical-path-trace",
        metavar="OUT.json",
        help="write a Perfetto/Chrome trace with the collectives of every rank and the cross-rank critical path "
        "marked (= -o OUT.perfetto.json)",
    )
    cl.add_argument(
        "--gpus-per-node",
        type=positive,
        metavar="N",
        help="ranks per node, for intra- vs inter-node links (default: the device's catalog figure, 8 for GPUs, the ICI slice for TPUs)",
    )


def _add_hlo_parser(sub: Subparsers) -> None:
    h = sub.add_parser(
        "hlo",
        help="HLO text (compiled.as_text(), XLA dumps): per-instruction FLOPs, bytes, tiling padding, global shapes",
    )
    h.add_argument("file", help="HLO text file")
    h.add_argument(
        "--json", action="store_true", help="print one JSON object: {modules: [{name, instructions: [...]}]}"
    )
    h.add_argument("--top", type=positive, default=25, help="rows in the terminal table (by FLOPs)")


def _add_network_parser(sub: Subparsers) -> None:
    n = sub.add_parser("network", help="a cluster's network profile for plan --network, from nccl-tests logs")
    n.add_argument(
        "logs",
        nargs="+",
        help="outputs of all_reduce_perf, all_gather_perf and reduce_scatter_perf at 1, 2, 4, ... nodes",
    )
    n.add_argument("--name", required=True, help="the profile's name")
    n.add_argument(
        "--size",
        default="256M",
        help="message size to read the bus bandwidth at (default 256M; K/M/G = 2^10/2^20/2^30)",
    )
    n.add_argument(
        "--device", default="", help="the catalog device of the nodes (plan refuses the profile for another)"
    )
    n.add_argument("-o", "--out", help="write the YAML here (default: print it)")


def _add_convert_parser(sub: Subparsers) -> None:
    c = sub.add_parser("convert", help="parse traces once and save them as Parquet event tables")
    c.add_argument("traces", nargs="+", help="trace files in any format analyze reads")
    c.add_argument("-o", "--out-dir", required=True, help="directory for <name>.parquet files")
    c.add_argument("--include-python", action="store_true")
    _add_inflate_cap(c)


def _add_inflate_cap(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--max-inflated-gb",
        type=positive_float,
        metavar="GB",
        help="read a compressed trace up to this many GiB once inflated (default 64; docs/limits.md)",
    )
