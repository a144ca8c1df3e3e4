"""Command line: thin subcommands over the library. Errors map to exit codes here, in one place."""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
from pathlib import Path
from typing import Any

from .analysis.results import Analysis
from .cli_args import parser
from .errors import ConfigError, StepscopeError
from .outfile import write_output
from .textsafe import printable
from .trace.heap import return_large_blocks


def _analyze(ns: argparse.Namespace) -> int:
    from .report import outputs
    from .report.registry import by_name

    aliases = (
        ("--json", "json", ns.json),
        ("--html", "html", ns.html),
        ("--roofline-png", "png", ns.roofline_png),
        ("--critical-path-trace", "perfetto", ns.critical_path_trace),
    )
    outs = outputs.resolve("analysis", aliases=aliases, paths=ns.output, fmt=ns.format)
    # standard output carries the report: no terminal report, warnings on stderr
    quiet = ns.quiet or any(o.path == "-" for o in outs)
    result = _run_analysis(ns, show_progress=not quiet)
    outputs.write_all(outs, result)
    if quiet:
        for w in result.warnings:
            print(f"warning: {printable(w)}", file=sys.stderr)
        return 0
    from rich.console import Console  # only for the terminal report (a quiet run never loads rich)

    by_name("analysis", "terminal").render(result, {"console": Console()})
    for o in outs:
        print(f"wrote {o.renderer.name.upper()} report: {o.path}")
    return 0


def _run_analysis(ns: argparse.Namespace, show_progress: bool) -> Analysis:
    """Read and analyze the traces, with a progress bar on a terminal's stderr."""
    from .analysis.api import analyze
    from .analysis.config import AnalyzeConfig

    cfg = AnalyzeConfig(
        step_marker=ns.step_marker,
        rules_file=ns.rules,
        top_k=ns.top,
        hardware=ns.hardware,
        hardware_file=ns.hardware_file,
        model_flops_per_step=_model_flops(ns),
        mfu_dtype=ns.mfu_dtype,
        hlo_files=tuple(ns.hlo),
        straggler_threshold=ns.straggler_z,
        gpus_per_node=ns.gpus_per_node,
        skip_steps=ns.skip_steps,
        advisor_rules=tuple(ns.advisor_rules),
    )
    run = functools.partial(
        analyze,
        ns.traces,
        cfg,
        include_python=ns.include_python,
        workers=ns.workers,
        cache_dir=ns.cache_dir,
        dask=ns.dask,
    )
    if not show_progress:
        return run()
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    err = Console(stderr=True)
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, disable=not err.is_terminal) as bar:
        task = bar.add_task("reading + analyzing trace files", total=None)
        return run(progress=lambda done, total: bar.update(task, completed=done, total=total))


def _model_flops(ns: argparse.Namespace) -> float | None:
    if ns.model_flops is not None:
        return float(ns.model_flops)
    if not ns.hf_config:
        return None
    if not ns.tokens_per_step or not ns.seq_len:
        raise ConfigError(
            "--model needs --tokens-per-step and --seq-len", fix="e.g. --tokens-per-step 16384 --seq-len 4096"
        )
    from .catalog.models import resolve

    return resolve(ns.hf_config).flops_per_token(ns.seq_len) * ns.tokens_per_step


def _convert(ns: argparse.Namespace) -> int:
    from .trace.loader import expand_inputs, jobs_for, read_one
    from .trace.parquet import write_parquet

    out_dir = Path(ns.out_dir)
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file of that name, no permission, ...
        raise ConfigError(
            f"cannot make the output directory ({exc.strerror})", path=str(out_dir), fix="give -o a directory"
        ) from None
    paths, not_traces = expand_inputs(ns.traces)
    for w in not_traces:
        print(f"warning: {printable(str(w))}", file=sys.stderr)
    jobs = jobs_for(paths, ns.include_python, None)  # an Nsight export of several processes: one file per rank
    dests = _convert_destinations(jobs, out_dir)
    for job, dest in zip(jobs, dests):
        p = Path(job.path)
        fr = read_one(job)
        try:
            write_parquet(fr, dest)
        except OSError as exc:
            raise ConfigError(
                f"cannot write ({exc.strerror or exc.__class__.__name__})", path=str(dest), fix="check -o is writable"
            ) from None
        msg = f"{p} -> {dest} ({fr.table.num_rows:,} events)"
        if fr.truncated:
            msg += f" [truncated input: recovered {fr.table.num_rows:,} complete events]"
        print(msg)
    return 0


def _convert_destinations(jobs: list[Any], out_dir: Path) -> list[Path]:
    """``<name>.parquet`` per job (``<name>.rank<k>.parquet`` per rank of an Nsight export);
    two inputs that would write the same file are refused before anything is written."""
    dests: list[Path] = []
    seen: dict[Path, str] = {}
    for job in jobs:
        name = Path(job.path).name
        for suffix in (".gz", ".json", ".sqlite", ".xplane.pb", ".zip"):
            name = name.removesuffix(suffix)
        if job.part is not None:
            name = f"{name}.rank{job.part.ordinal}"
        dest = out_dir / f"{name}.parquet"
        if dest in seen:
            raise ConfigError(
                f"{seen[dest]} and {job.path} would both be written to {dest}",
                fix="convert them into different directories (-o)",
            )
        seen[dest] = job.path
        dests.append(dest)
    return dests


def _hlo(ns: argparse.Namespace) -> int:
    from .analysis.xla.instructions import module_costs
    from .report import registry
    from .trace.hlo import read_hlo

    parsed = read_hlo(ns.file)
    for m in parsed:
        if m.truncated:
            print(
                f"warning: {printable(ns.file)}: module {printable(m.name)} ends inside a computation "
                "(the file is cut short?); its figures count only what was read",
                file=sys.stderr,
            )
    modules = tuple(module_costs(m) for m in parsed)
    if ns.json:
        print(registry.by_name("hlo", "json").render(modules, {}))
        return 0
    from rich.console import Console

    con = Console(width=max(Console().width, 180)) if not sys.stdout.isatty() else Console()
    registry.by_name("hlo", "terminal").render(modules, {"console": con, "top": ns.top})
    return 0


def _network(ns: argparse.Namespace) -> int:
    import yaml

    from .planner import nccl_tests

    m = re.fullmatch(r"(\d+)([KMG]?)", str(ns.size).strip().upper())
    if not m:
        raise ConfigError(f"size {ns.size!r} is not a byte count", fix="e.g. --size 256M or --size 268435456")
    size = int(m.group(1)) << {"": 0, "K": 10, "M": 20, "G": 30}[m.group(2)]
    entry = nccl_tests.profile_from_logs(ns.logs, name=ns.name, size=size, device=ns.device)
    text = yaml.safe_dump({"version": 1, "networks": [entry]}, sort_keys=False)
    if ns.out:
        write_output(ns.out, text)
        print(
            f"wrote {ns.out}: {entry['name']}, {len(entry['nodes'])} node counts; use plan --network {ns.out}",
            file=sys.stderr,
        )
    else:
        print(text, end="")
    return 0


#: exit status when the reader of standard output went away (128 + SIGPIPE, as a shell reports it)
EXIT_BROKEN_PIPE = 141


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand. A closed standard output (``stepscope ... | head``) ends the command
    quietly with ``EXIT_BROKEN_PIPE``: the recipe of the Python docs (signal module, "Note on
    SIGPIPE") points stdout at devnull so the interpreter's final flush cannot fail again."""
    try:
        try:
            return _run(argv)
        finally:  # on return and on SystemExit (``--help``) alike
            if sys.stdout is not None:  # None: started with standard output closed
                sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_BROKEN_PIPE


def _diff(ns: argparse.Namespace) -> int:
    """Exit 1 when ``--fail-if-slower`` is given, the verdict is ``slower`` and the median step grew
    by more than the percentage; else 0 (2 for bad input, from the errors)."""
    from rich.console import Console

    from .analysis.config import AnalyzeConfig
    from .diff.compare import compare
    from .diff.load import load_side
    from .report.registry import by_name

    cfg = AnalyzeConfig(step_marker=ns.step_marker, skip_steps=ns.skip_steps)
    d = compare(load_side(ns.before, cfg, ns.workers), load_side(ns.after, cfg, ns.workers))
    if ns.json:
        write_output(ns.json, str(by_name("diff", "json").render(d, {})))
    if ns.json != "-":
        by_name("diff", "terminal").render(d, {"console": Console()})
    pct = ns.fail_if_slower
    if pct is not None and d.verdict == "inconclusive":
        print(f"stepscope: gate: not applied, the diff is inconclusive: {d.reason}", file=sys.stderr)
    if pct is not None and d.verdict == "slower" and d.delta_ratio * 100 > pct:
        print(
            f"stepscope: gate: AFTER is {d.delta_ratio:.1%} slower than BEFORE (limit {pct}%): {d.reason}",
            file=sys.stderr,
        )
        return 1
    return 0


def _run(argv: list[str] | None) -> int:
    ns = parser().parse_args(argv)
    return_large_blocks()
    if getattr(ns, "max_inflated_gb", None):  # read by every reader, here and in worker processes
        from .trace.limits import MAX_INFLATED_ENV

        os.environ[MAX_INFLATED_ENV] = str(ns.max_inflated_gb)
    try:
        if ns.cmd == "analyze":
            return _analyze(ns)
        if ns.cmd == "convert":
            return _convert(ns)
        if ns.cmd == "plan":
            from .planner.cli import run

            return run(ns)
        if ns.cmd == "hlo":
            return _hlo(ns)
        if ns.cmd == "network":
            return _network(ns)
        if ns.cmd == "diff":
            return _diff(ns)
        if ns.cmd == "monitor":
            from .monitor.cli import run as run_monitor

            return run_monitor(ns)
        return 2
    except StepscopeError as exc:
        print(f"stepscope: error: {printable(exc.one_line())}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("stepscope: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
