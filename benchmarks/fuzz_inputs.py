"""Damaged input through the CLI: every variant must end in exit 0, or exit 2 with one line on
stderr; a traceback, another exit code or a multi-line error is a failure.

    python benchmarks/fuzz_inputs.py [TARGET ...] [--n N]

Targets (deterministic seeds): kineto (events and header of the bundled Kineto trace), xplane
(truncations and byte flips of the bundled XPlane), nsys (the same of the real Nsight SQLite
export in tests/fixtures), parquet (the same of its `stepscope convert`
output), report (fields of an analyze report read by
plan --from-analysis), hardware (--hardware-file for plan and analyze), rules (--rules), network
(--network files), calibrate (cells, rows and truncations of the example --calibrate CSV). Run on purpose, not in the test suite: each variant is a CLI process.
"""

from __future__ import annotations

import argparse
import copy
import csv
import gzip
import io
import json
import random
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
KINETO = ROOT / "examples" / "traces" / "a100_nccl_rank0.json.gz"
XPLANE = ROOT / "examples" / "traces" / "jax_gpu_te_fused_attn.xplane.pb"
NSYS = ROOT / "tests" / "fixtures" / "nsys_concurrent_profile4.sqlite"
EXE = [sys.executable, "-c", "import sys; from stepscope.cli import main; sys.exit(main())"]
WEIRD: list[Any] = [None, "abc", -1, 1e308, [], {}, True, "", 2**70, 0, [1, "a"], {"x": 1}, "(", float("nan")]
PLAN = ["plan", "--model", "llama3-8b", "--devices", "8", "--global-batch", "16", "--seq-len", "4096"]


def _run(args: list[str]) -> str | None:
    """None when the CLI behaved, else what went wrong."""
    r = subprocess.run([*EXE, *args], capture_output=True, text=True, timeout=600, check=False)
    lines = r.stderr.strip().splitlines()
    if "Traceback" in r.stderr or r.returncode not in (0, 2) or (r.returncode == 2 and len(lines) != 1):
        return f"exit {r.returncode}: {r.stderr.strip()[-400:]}"
    return None


def _paths(o: Any, path: tuple = ()) -> Iterator[tuple]:
    if isinstance(o, dict):
        for k, v in o.items():
            yield (*path, k)
            yield from _paths(v, (*path, k))
    elif isinstance(o, list):
        for i, v in enumerate(o[:3]):
            yield (*path, i)
            yield from _paths(v, (*path, i))


def _set(doc: Any, path: tuple, value: Any) -> None:
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def kineto(rng: random.Random, tmp: Path) -> list[str]:
    with gzip.open(KINETO) as f:
        doc = json.loads(f.read())
    events = doc["traceEvents"]
    for _ in range(rng.randrange(1, 30)):
        ev = events[rng.randrange(len(events))]
        if isinstance(ev, dict):
            ev[rng.choice(["ts", "dur", "pid", "tid", "name", "cat", "ph", "args", "id"])] = rng.choice(WEIRD)
    what = rng.randrange(4)
    if what == 0:
        doc["deviceProperties"] = rng.choice([*WEIRD, [5, "y"], {"name": "H100"}])
    elif what == 1:
        props = doc["deviceProperties"][0]
        props[rng.choice(list(props))] = rng.choice(WEIRD)
    elif what == 2:
        doc["distributedInfo"] = rng.choice([*WEIRD, {"rank": "a", "world_size": True, "backend": 7}])
    p = tmp / "t.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    return ["analyze", str(p), "-q", "--json", str(tmp / "o.json"), "--html", str(tmp / "o.html")]


def _damaged(rng: random.Random, data: bytes, path: Path) -> list[str]:
    """``data`` truncated (2 in 5) or with up to 50 bytes flipped, written to ``path``; the analyze command."""
    b = bytearray(data)
    if rng.random() < 0.4:
        b = b[: rng.randrange(1, len(b))]
    else:
        for _ in range(rng.randrange(1, 50)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    path.write_bytes(bytes(b))
    return ["analyze", str(path), "-q", "--json", str(path.parent / "o.json")]


def xplane(rng: random.Random, tmp: Path) -> list[str]:
    return _damaged(rng, XPLANE.read_bytes(), tmp / "t.xplane.pb")


def nsys(rng: random.Random, tmp: Path) -> list[str]:
    return _damaged(rng, NSYS.read_bytes(), tmp / "t.sqlite")


_PARQUET: list[bytes] = []


def parquet(rng: random.Random, tmp: Path) -> list[str]:
    if not _PARQUET:
        out = tmp / "pq"
        subprocess.run([*EXE, "convert", str(KINETO), "-o", str(out)], check=True, capture_output=True)
        _PARQUET.append(next(out.glob("*.parquet")).read_bytes())
    return _damaged(rng, _PARQUET[0], tmp / "t.parquet")


_REPORT: dict[str, Any] = {}


def report(rng: random.Random, tmp: Path) -> list[str]:
    if not _REPORT:
        out = tmp / "base.json"
        subprocess.run([*EXE, "analyze", str(KINETO), "-q", "--json", str(out)], check=True)
        _REPORT.update(json.loads(out.read_text(encoding="utf-8")))
    doc = copy.deepcopy(_REPORT)
    paths = list(_paths(doc))
    for _ in range(rng.randrange(1, 4)):
        try:
            _set(doc, rng.choice(paths), rng.choice(WEIRD))
        except (KeyError, IndexError, TypeError):
            pass
    p = tmp / "r.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    return [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "a100-40gb",
        "--devices",
        "8",
        "--global-batch",
        "8",
        "--seq-len",
        "2048",
        "--evaluate",
        "tp=8,mb=1",
        "--baseline",
        "dp=8,mb=1",
        "--from-analysis",
        str(p),
        "--json",
    ]


def _yaml_variant(rng: random.Random, base: dict, entry_key: str) -> dict:
    doc = copy.deepcopy(base)
    paths = [p for p in _paths(doc) if p[:1] == (entry_key,)] or list(_paths(doc))
    for _ in range(rng.randrange(1, 3)):
        try:
            _set(doc, rng.choice(paths), rng.choice(WEIRD))
        except (KeyError, IndexError, TypeError):
            pass
    return doc


def hardware(rng: random.Random, tmp: Path) -> list[str]:
    base = {
        "version": 1,
        "devices": [
            {
                "name": "MyGPU",
                "match": "MyGPU",
                "peak_tflops": {"bf16": 500, "fp8": 1000},
                "hbm_gb": 80,
                "hbm_gbps": 3000,
                "intra_node_gbps": 400,
                "inter_node_gbps": 50,
                "host_gbps": 64,
                "matmul_eff": {"bf16": 0.8},
                "intra_node_busbw_gbps": {"all_reduce": 400},
                "node_devices": 8,
                "source": "fuzz",
            }
        ],
    }
    p = tmp / "hw.yaml"
    p.write_text(yaml.safe_dump(_yaml_variant(rng, base, "devices")), encoding="utf-8")
    if rng.random() < 0.5:
        return [*PLAN, "--hardware", "MyGPU", "--hardware-file", str(p), "--evaluate", "dp=8"]
    return [
        "analyze",
        str(KINETO),
        "-q",
        "--hardware",
        "MyGPU",
        "--hardware-file",
        str(p),
        "--json",
        str(tmp / "o.json"),
    ]


def rules(rng: random.Random, tmp: Path) -> list[str]:
    base = {
        "version": 1,
        "collectives": [{"type": "all_reduce", "pattern": "myar"}],
        "comm_kernels": "mycomm",
        "comm_ops": "^myop",
        "categories": [{"category": "gemm", "pattern": "mygemm"}],
    }
    p = tmp / "rules.yaml"
    p.write_text(yaml.safe_dump(_yaml_variant(rng, base, rng.choice(list(base)))), encoding="utf-8")
    return ["analyze", str(KINETO), "-q", "--rules", str(p), "--json", str(tmp / "o.json")]


def network(rng: random.Random, tmp: Path) -> list[str]:
    base = yaml.safe_load((ROOT / "src" / "stepscope" / "data" / "networks.yaml").read_text(encoding="utf-8"))
    p = tmp / "net.yaml"
    p.write_text(yaml.safe_dump(_yaml_variant(rng, base, "networks")), encoding="utf-8")
    return [
        "plan",
        "--model",
        "llama3-8b",
        "--hardware",
        "h100",
        "--network",
        str(p),
        "--devices",
        "64",
        "--global-batch",
        "128",
        "--seq-len",
        "4096",
        "--top",
        "2",
    ]


CALIB_CSV = ROOT / "examples" / "plan" / "nvidia_h100_runs.csv"
CELLS = [
    "",
    "abc",
    "-1",
    "0",
    "1e308",
    "nan",
    "inf",
    "2**70",
    "tp=0",
    "tp=3,pp=7",
    "zero=9",
    "mb=-1",
    '"',
    "h100x",
    "llama9",
]


def calibrate(rng: random.Random, tmp: Path) -> list[str]:
    """The example calibration CSV with cells replaced by odd values, rows dropped or repeated, or
    the file cut short."""
    lines = CALIB_CSV.read_text(encoding="utf-8").splitlines()
    head, rows = lines[0], [list(csv.reader([line]))[0] for line in lines[1:]]
    for _ in range(rng.randrange(1, 4)):
        kind = rng.random()
        if kind < 0.6 and rows:
            row = rng.choice(rows)
            row[rng.randrange(len(row))] = rng.choice(CELLS)
        elif kind < 0.8 and rows:
            rows.pop(rng.randrange(len(rows)))
        elif rows:
            rows.append(list(rng.choice(rows)))
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    text = head + "\n" + out.getvalue()
    if rng.random() < 0.2:
        text = text[: rng.randrange(len(text))]
    p = tmp / "runs.csv"
    p.write_text(text, encoding="utf-8")
    return [*PLAN, "--hardware", "h100", "--calibrate", str(p), "--evaluate", "tp=2,dp=4,mb=1", "--json"]


TARGETS: dict[str, Callable[[random.Random, Path], list[str]]] = {
    "kineto": kineto,
    "xplane": xplane,
    "nsys": nsys,
    "parquet": parquet,
    "report": report,
    "hardware": hardware,
    "rules": rules,
    "network": network,
    "calibrate": calibrate,
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("targets", nargs="*", default=list(TARGETS), help=f"any of {', '.join(TARGETS)} (default: all)")
    ap.add_argument("--n", type=int, default=50, help="variants per target (default 50)")
    ns = ap.parse_args()
    unknown = [t for t in ns.targets if t not in TARGETS]
    if unknown:
        ap.error(f"unknown target {unknown[0]!r}; use any of {', '.join(TARGETS)}")
    failed = 0
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name in ns.targets:
            rng = random.Random(name)
            bad = 0
            for i in range(ns.n):
                why = _run(TARGETS[name](rng, tmp))
                if why:
                    bad += 1
                    print(f"{name} #{i}: {why}", file=sys.stderr)
            print(json.dumps({"target": name, "variants": ns.n, "failures": bad}))
            failed += bad
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
