"""Damaged and hostile input through the CLI (in process): every variant ends in exit 0, or exit 2
with one ``stepscope: error:`` line on stderr (exit 1 with one line for an output the system
refuses); any other exception, exit code or a multi-line error fails, and so does a control
character reaching the terminal.

Targets, each variant from a fixed seed (``random.Random("<target>-<i>")``): kineto (events and
header of the bundled Kineto trace), ascend (tasks, flows and process names of the real Ascend
timeline, in a profiling directory), rocprof (records, symbols, agents and strings of the real
rocprofv3 file, cuts and byte damage), kineto_text (text-level damage), depth (nesting up to 6,000),
both also through the msgspec reader (``_portable``), framing (gzip members, padding, bombs),
names (long names with terminal controls and markup, shown on the terminal), counters (CUPTI
range events), zip (nsys-jax archive internals), permissions (reads and writes the system refuses
even to root), concurrency (a second process on the same cache), xplane (truncations and byte
flips of the bundled XPlane), nsys (the same of the real Nsight SQLite export in tests/fixtures),
parquet (the same of its ``stepscope convert`` output), report (fields of an analyze report read by
``plan --from-analysis``), hardware (``--hardware-file`` for plan and analyze), rules
(``--rules``), network (``--network`` files), calibrate (cells, rows and truncations of the
example ``--calibrate`` CSV). ``FAST`` variants per target run by default, up to ``SLOW`` with the
``slow`` marker (``pytest -m slow tests/trace/test_fuzz_inputs.py``). The limits the inputs meet
are in docs/limits.md; ``test_both_readers_agree_on_damaged_text`` compares the two readers.
"""

from __future__ import annotations

import copy
import csv
import gzip
import io
import json
import random
import re
import subprocess
import sys
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from stepscope.cli import main
from stepscope.errors import StepscopeError

ROOT = Path(__file__).resolve().parents[2]
KINETO = ROOT / "examples" / "traces" / "a100_nccl_rank0.json.gz"
XPLANE = ROOT / "examples" / "traces" / "jax_gpu_te_fused_attn.xplane.pb"
NSYS = ROOT / "tests" / "fixtures" / "nsys_concurrent_profile4.sqlite"
ASCEND = ROOT / "tests/fixtures/traces/msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json"
ASCEND_DETAILS = ROOT / "tests/fixtures/ascend/kernel_details.csv"
ROCPROF = ROOT / "tests/fixtures/rocprof/908_results_trimmed.json"
CALIB_CSV = ROOT / "examples" / "plan" / "nvidia_h100_runs.csv"
WEIRD: list[Any] = [None, "abc", -1, 1e308, [], {}, True, "", 2**70, 0, [1, "a"], {"x": 1}, "(", float("nan")]
PLAN = ["plan", "--model", "llama3-8b", "--devices", "8", "--global-batch", "16", "--seq-len", "4096"]
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
FAST, SLOW = 3, 30  # variants per target: by default, and with the slow ones


def _paths(o: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every key path of a JSON-like document (the first 3 items of a list)."""
    if isinstance(o, dict):
        for k, v in o.items():
            yield (*path, k)
            yield from _paths(v, (*path, k))
    elif isinstance(o, list):
        for i, v in enumerate(o[:3]):
            yield (*path, i)
            yield from _paths(v, (*path, i))


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for k in path[:-1]:
        doc = doc[k]
    doc[path[-1]] = value


def _spoil(rng: random.Random, doc: Any, paths: list[tuple[Any, ...]], most: int) -> None:
    """Up to ``most`` fields of ``doc`` (of ``paths``) set to odd values."""
    for _ in range(rng.randrange(1, most + 1)):
        try:
            _set(doc, rng.choice(paths), rng.choice(WEIRD))
        except (KeyError, IndexError, TypeError):
            pass


def _damaged(rng: random.Random, data: bytes, path: Path) -> list[str]:
    """``data`` truncated (2 in 5) or with up to 50 bytes flipped, written to ``path``; the analyze command."""
    b = bytearray(data)
    if rng.random() < 0.4:
        b = b[: rng.randrange(1, len(b))]
    else:
        for _ in range(rng.randrange(1, 50)):
            b[rng.randrange(len(b))] = rng.randrange(256)
    path.write_bytes(bytes(b))
    return ["analyze", str(path), "-q", "--workers", "1", "--json", str(path.parent / "o.json")]


def kineto(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
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
    return ["analyze", str(p), "-q", "--workers", "1", "--json", str(tmp / "o.json"), "--html", str(tmp / "o.html")]


def ascend(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    """The real Ascend timeline with fields of its tasks, flows and process metadata spoilt, in an
    Ascend profiling directory, sometimes cut short."""
    events = json.loads(ASCEND.read_text())
    special = [e for e in events if e.get("ph") in ("M", "s", "f") or e.get("pid") == 800]
    for _ in range(rng.randrange(1, 30)):
        ev = rng.choice(special if rng.random() < 0.6 else events)
        key = rng.choice(["ts", "dur", "pid", "tid", "name", "cat", "ph", "args", "id", "bp"])
        ev[key] = rng.choice(WEIRD)
        if isinstance(ev.get("args"), dict) and rng.random() < 0.3:
            ev["args"][rng.choice(["name", "labels", "Task Type"])] = rng.choice(WEIRD)
    text = json.dumps(events)
    if rng.random() < 0.3:
        text = text[: rng.randrange(1, len(text))]
    out = tmp / "w_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out / "trace_view.json").write_text(text, encoding="utf-8")
    if rng.random() < 0.5:
        (out / "kernel_details.csv").write_bytes(_spoilt_details(rng))
    if rng.random() < 0.3:
        link = {"Transport Type": rng.choice(WEIRD), "Transit Size(MB)": rng.choice(WEIRD), "Transit Time(ms)": 1}
        links = {rng.choice(["0-1", "1-1", "x-1", "-1-2", "99999999999-0"]): rng.choice([link, *WEIRD])}
        matrix = {rng.choice(["step1", "step", "stepx"]): {"collective": {rng.choice(["a-total@g", "b@g"]): links}}}
        (out / "communication_matrix.json").write_text(json.dumps(rng.choice([matrix, *WEIRD])))
    if rng.random() < 0.3:
        cells = ",".join(str(rng.choice(CELLS)) for _ in range(9))
        (out / "step_trace_time.csv").write_text(
            f"Step,Computing,Communication(Not Overlapped),Overlapped,"
            f"Communication,Free,Stage,Bubble,Preparing\n{cells}\n"
        )
    (out.parent / f"profiler_info_{rng.choice(['1', '-1', 'x', '99999999999'])}.json").write_text("{}")
    return [
        "analyze",
        str(out.parent.parent),
        "-q",
        "--workers",
        "1",
        "--json",
        str(tmp / "o.json"),
        "--html",
        str(tmp / "o.html"),
    ]


def _spoilt_details(rng: random.Random) -> bytes:
    """The real kernel_details.csv with cells replaced by odd values, a column renamed, bytes that
    are not UTF-8, or cut short."""
    lines = ASCEND_DETAILS.read_text(encoding="utf-8").splitlines()
    rows = [list(csv.reader([line]))[0] for line in lines]
    for _ in range(rng.randrange(1, 20)):
        row = rng.choice(rows)
        row[rng.randrange(len(row))] = rng.choice(CELLS)
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    data = out.getvalue().encode()
    if rng.random() < 0.2:
        data = data[: rng.randrange(len(data))]
    if rng.random() < 0.2:
        i = rng.randrange(len(data))
        data = data[:i] + b"\xff\xfe\x00" + data[i:]
    return data


def rocprof(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    """The trimmed real rocprofv3 file with fields of its records, symbols, agents and strings
    spoilt, sometimes cut short or with text damage."""
    doc = json.loads(ROCPROF.read_text())
    proc = doc["rocprofiler-sdk-tool"][0]
    targets = [
        *proc["buffer_records"]["kernel_dispatch"][:20],
        *proc["kernel_symbols"][:12],
        *proc["agents"],
        proc["metadata"],
        proc["strings"],
        proc["buffer_records"],
        proc,
    ]
    for _ in range(rng.randrange(1, 20)):
        t = rng.choice(targets)
        if t:
            t[rng.choice(list(t))] = rng.choice(WEIRD)
    text = json.dumps(doc)
    if rng.random() < 0.3:
        text = text[: rng.randrange(1, len(text))]
    elif rng.random() < 0.3:
        b = bytearray(text.encode())
        for _ in range(rng.randrange(1, 20)):
            b[rng.randrange(len(b))] = rng.randrange(32, 127)
        text = b.decode("ascii", "replace")
    p = tmp / "908_results.json"
    p.write_text(text, encoding="utf-8")
    return ["analyze", str(p), "-q", "--workers", "1", "--json", str(tmp / "o.json"), "--html", str(tmp / "o.html")]


def _kineto_text() -> str:
    with gzip.open(KINETO) as f:
        return f.read().decode("utf-8")


_TEXT_PIECES = ["[", "]", "{", "}", ",", ":", '"', "\\", "null", "1e999", "-", "\u0000", "\x00", "\xff", "}]", "},{"]


def kineto_text(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    """Text-level damage: ranges deleted or repeated, structural characters inserted (both readers:
    the ``_portable`` target runs the same inputs through the msgspec reader)."""
    t = _kineto_text()
    for _ in range(rng.randrange(1, 8)):
        i = rng.randrange(len(t))
        op = rng.randrange(3)
        if op == 0:
            t = t[:i] + t[i + rng.randrange(1, 400) :]
        elif op == 1:
            j = min(len(t), i + rng.randrange(1, 400))
            t = t[:j] + t[i:j] + t[j:]
        else:
            t = t[:i] + rng.choice(_TEXT_PIECES) + t[i:]
    p = tmp / "t.json"
    p.write_bytes(t.encode("utf-8", "surrogateescape"))
    return ["analyze", str(p), "-q", "--workers", "1", "--json", str(tmp / "o.json")]


def depth(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    """Nesting from 60 to 6,000 deep in a header key (before or after the events), an event's args
    or its Input Dims."""
    n = rng.choice([60, 70, 900, 1500, 6000])
    deep = "[" * n + "]" * n if rng.random() < 0.5 else '{"a": ' * n + "1" + "}" * n
    t = _kineto_text()
    where = rng.randrange(4)
    if where == 0:
        t = '{"x": ' + deep + ", " + t.lstrip()[1:]
    elif where == 1:
        t = t.rstrip()[:-1] + ', "x": ' + deep + "}"
    else:
        key = '"args": {' if where == 2 else '"Input Dims": '
        hits = [m for m in range(len(t)) if t.startswith(key, m)][:200] or [0]
        i = rng.choice(hits) + len(key)
        t = t[:i] + ('"deep": ' + deep + ", " if where == 2 else deep + ", ") + t[i:]
    p = tmp / "t.json"
    p.write_text(t, encoding="utf-8")
    return ["analyze", str(p), "-q", "--workers", "1", "--json", str(tmp / "o.json")]


def framing(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    """Compression framing: members split, zero padding, garbage after the end, a cut stream, a
    bomb (tens of MB of spaces at about 1000:1), flipped deflate bytes."""
    text = _kineto_text().encode()
    what = rng.randrange(6)
    if what == 0:
        cut = rng.randrange(1, len(text))
        data = gzip.compress(text[:cut]) + gzip.compress(text[cut:])
    elif what == 1:
        data = gzip.compress(text) + b"\0" * rng.randrange(1, 70000)
    elif what == 2:
        data = gzip.compress(text) + bytes(rng.randrange(256) for _ in range(rng.randrange(1, 64)))
    elif what == 3:
        z = gzip.compress(text)
        data = z[: rng.randrange(10, len(z))]
    elif what == 4:
        i = text.rindex(b"]")
        z = zlib.compressobj(9, zlib.DEFLATED, 31)
        spaces = b" " * (1 << 20)
        data = z.compress(text[:i]) + b"".join(z.compress(spaces) for _ in range(rng.randrange(70, 90)))
        data += z.compress(text[i:]) + z.flush()
    else:
        z = bytearray(gzip.compress(text))
        for _ in range(rng.randrange(1, 20)):
            z[rng.randrange(10, len(z))] = rng.randrange(256)
        data = bytes(z)
    p = tmp / "t.json.gz"
    p.write_bytes(data)
    return ["analyze", str(p), "-q", "--workers", "1", "--json", str(tmp / "o.json")]


_HOSTILE = ["\x1b]52;c;aGk=\x07", "\x1b[2J", "\r", "\x9b", "[red]", "[/]", "<script>", "\u202e", "\x00", "é"]


def names(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    """Names up to 300 KB and with terminal controls, markup and odd Unicode, shown on the
    terminal (the test checks that no control character reaches it)."""
    with gzip.open(KINETO) as f:
        doc = json.loads(f.read())
    events = [e for e in doc["traceEvents"] if isinstance(e, dict) and "name" in e]
    for _ in range(rng.randrange(1, 40)):
        ev = rng.choice(events)
        ev["name"] = (
            "".join(rng.choice(_HOSTILE) for _ in range(rng.randrange(1, 6)))
            + (str(ev["name"]) * rng.choice([1, 2, 1000]))[:300_000]
        )
    doc["deviceProperties"][0]["name"] = rng.choice(_HOSTILE) + "H100"
    p = tmp / rng.choice(["t.json", "t\x1b[2J.json"])
    p.write_text(json.dumps(doc), encoding="utf-8")
    return ["analyze", str(p), "--workers", "1", "--top", "40"]


def counters(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    """CUPTI range-profiler events with counter values of every type, many ``}]`` around them."""
    with gzip.open(KINETO) as f:
        doc = json.loads(f.read())
    key = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
    for _ in range(rng.randrange(1, 20)):
        args = {key.format(rng.choice(["ffma", "hadd", "dmul"])): rng.choice(WEIRD) for _ in range(3)}
        args["dram__bytes_read.sum"] = rng.choice(WEIRD)
        args["shapes"] = [{"d": 1}] * rng.randrange(5)
        ev = {"ph": "X", "cat": "cuda_profiler_range", "name": rng.choice(WEIRD), "pid": 0, "tid": 1}
        ev.update(ts=rng.choice([5, "5", None, 1e308]), dur=rng.choice([1, -1, "x"]), args=args)
        doc["traceEvents"].insert(rng.randrange(len(doc["traceEvents"])), ev)
    p = tmp / "t.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    return ["analyze", str(p), "-q", "--workers", "1", "--json", str(tmp / "o.json")]


def zip_internals(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    """nsys-jax archives damaged inside: corrupt deflate data, the encrypted flag, an unknown
    compression method, a bomb member, or bytes flipped in the local and central headers."""
    from .test_zip_hostile import damaged

    p = tmp / "t.zip"
    how = rng.choice(["corrupt deflate", "encrypted", "method 99", "bomb", "headers"])
    damaged(p, "corrupt deflate" if how == "headers" else how)
    if how == "headers":
        b = bytearray(damaged(p, "none").read_bytes())
        central = b.rfind(b"PK\x01\x02")
        for _ in range(rng.randrange(1, 8)):
            at = rng.choice([rng.randrange(0, 30), central + rng.randrange(0, 46)])
            b[at] = rng.randrange(256)
        p.write_bytes(bytes(b))
    return ["analyze", str(p), "-q", "--workers", "1", "--json", str(tmp / "o.json")]


def permissions(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    """Reads and writes the system refuses even to root (the tests may run as root, whom file
    modes do not stop): /proc/self/mem reads fail, /proc and /sys take no new files."""
    out = tmp / "o.json"
    return rng.choice(
        [
            ["analyze", "/proc/self/mem", "-q", "--json", str(out)],
            ["analyze", str(KINETO), "-q", "--json", f"/proc/{rng.randrange(10**6)}.json"],
            ["analyze", str(KINETO), "-q", "--workers", "1", "--json", str(out), "--cache-dir", "/proc/stepscope"],
            ["analyze", str(KINETO), "-q", "-o", "/sys/stepscope.html"],
            ["convert", str(KINETO), "-o", "/proc/stepscope-out"],
            ["convert", str(XPLANE), "-o", "/sys/stepscope-out"],
        ]
    )


#: processes a target started beside the one the test runs (concurrency); the test waits for them
BESIDE: list[subprocess.Popen[str]] = []


def concurrency(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    """Two processes reading the same traces into one --cache-dir at the same time (each writes
    the entry; a reader may see the other's)."""
    cache = tmp / "cache"
    inputs = [str(KINETO)] + ([str(XPLANE)] if rng.random() < 0.5 else [])
    args = ["analyze", *inputs, "-q", "--workers", "1", "--cache-dir", str(cache)]
    code = f"import sys; from stepscope.cli import main; sys.exit(main({args + ['--json', str(tmp / 'other.json')]!r}))"
    BESIDE.append(subprocess.Popen([sys.executable, "-c", code], stderr=subprocess.PIPE, text=True))
    return [*args, "--json", str(tmp / "o.json")]


def xplane(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    return _damaged(rng, XPLANE.read_bytes(), tmp / "t.xplane.pb")


def nsys(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    return _damaged(rng, NSYS.read_bytes(), tmp / "t.sqlite")


def parquet(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    return _damaged(rng, base["parquet"], tmp / "t.parquet")


def report(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    doc = copy.deepcopy(base["report"])
    _spoil(rng, doc, list(_paths(doc)), 3)
    p = tmp / "r.json"
    p.write_text(json.dumps(doc), encoding="utf-8")
    args = ["--hardware", "a100-40gb", "--devices", "8", "--global-batch", "8", "--seq-len", "2048"]
    return ["plan", "--model", "llama3-8b", *args, "--evaluate", "tp=8,mb=1", "--baseline", "dp=8,mb=1"] + [
        "--from-analysis",
        str(p),
        "--json",
    ]


def _yaml_variant(rng: random.Random, base: dict[str, Any], entry_key: str) -> dict[str, Any]:
    doc = copy.deepcopy(base)
    _spoil(rng, doc, [p for p in _paths(doc) if p[:1] == (entry_key,)] or list(_paths(doc)), 2)
    return doc


HARDWARE = {
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


def hardware(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    p = tmp / "hw.yaml"
    p.write_text(yaml.safe_dump(_yaml_variant(rng, HARDWARE, "devices")), encoding="utf-8")
    if rng.random() < 0.5:
        return [*PLAN, "--hardware", "MyGPU", "--hardware-file", str(p), "--evaluate", "dp=8"]
    return ["analyze", str(KINETO), "-q", "--workers", "1", "--hardware", "MyGPU", "--hardware-file", str(p)] + [
        "--json",
        str(tmp / "o.json"),
    ]


RULES = {
    "version": 1,
    "collectives": [{"type": "all_reduce", "pattern": "myar"}],
    "comm_kernels": "mycomm",
    "comm_ops": "^myop",
    "categories": [{"category": "gemm", "pattern": "mygemm"}],
}


def rules(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    p = tmp / "rules.yaml"
    p.write_text(yaml.safe_dump(_yaml_variant(rng, RULES, rng.choice(list(RULES)))), encoding="utf-8")
    return ["analyze", str(KINETO), "-q", "--workers", "1", "--rules", str(p), "--json", str(tmp / "o.json")]


def network(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
    networks = yaml.safe_load((ROOT / "src" / "stepscope" / "data" / "networks.yaml").read_text(encoding="utf-8"))
    p = tmp / "net.yaml"
    p.write_text(yaml.safe_dump(_yaml_variant(rng, networks, "networks")), encoding="utf-8")
    args = ["--devices", "64", "--global-batch", "128", "--seq-len", "4096", "--top", "2"]
    return ["plan", "--model", "llama3-8b", "--hardware", "h100", "--network", str(p), *args]


def calibrate(rng: random.Random, tmp: Path, base: dict[str, Any]) -> list[str]:
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


TARGETS: dict[str, Callable[[random.Random, Path, dict[str, Any]], list[str]]] = {
    "kineto": kineto,
    "ascend": ascend,
    "rocprof": rocprof,
    "kineto_text": kineto_text,
    "kineto_text_portable": kineto_text,
    "depth": depth,
    "depth_portable": depth,
    "framing": framing,
    "names": names,
    "counters": counters,
    "zip": zip_internals,
    "permissions": permissions,
    "concurrency": concurrency,
    "xplane": xplane,
    "nsys": nsys,
    "parquet": parquet,
    "report": report,
    "hardware": hardware,
    "rules": rules,
    "network": network,
    "calibrate": calibrate,
}


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # any control character but tab and newline


def _cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    """(exit code, stderr lines, stdout) of the CLI run in this process."""
    try:
        rc = main(args)
    except SystemExit as exc:  # argparse's own exits
        rc = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return rc, captured.err.strip().splitlines(), captured.out


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the report and parquet targets spoil: an analyze report and a converted trace."""
    d = tmp_path_factory.mktemp("fuzz-base")
    assert main(["analyze", str(KINETO), "-q", "--workers", "1", "--json", str(d / "r.json")]) == 0
    assert main(["convert", str(KINETO), "-o", str(d / "pq")]) == 0
    return {
        "report": json.loads((d / "r.json").read_text(encoding="utf-8")),
        "parquet": next((d / "pq").glob("*.parquet")).read_bytes(),
    }


CASES = [
    pytest.param(name, i, id=f"{name}-{i}", marks=[pytest.mark.slow] if i >= FAST else [])
    for name in TARGETS
    for i in range(SLOW)
]


@pytest.mark.parametrize(("target", "variant"), CASES)
def test_damaged_input_is_a_result_or_one_error_line(
    target: str,
    variant: int,
    base: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if target.endswith("_portable"):  # the same inputs through the msgspec reader
        from stepscope.trace import kineto as kineto_reader

        monkeypatch.setattr(kineto_reader, "_fast", None)
    seed = target.removesuffix("_portable")
    args = TARGETS[target](random.Random(f"{seed}-{variant}"), tmp_path, base)
    rc, err, out = _cli(args, capsys)
    # an output the system refuses is exit 1 (the environment failed, not the input; outfile.py)
    assert rc in ((0, 1, 2) if target == "permissions" else (0, 2)), (rc, err[-5:])
    if rc:
        assert len(err) == 1 and err[0].startswith("stepscope: error:"), err[-5:]
    assert not _CONTROL.search(out + "\n".join(err)), "a control character reached the terminal"
    while BESIDE:
        other = BESIDE.pop()
        _, other_err = other.communicate(timeout=600)
        lines = other_err.strip().splitlines()
        assert other.returncode == 0 or (other.returncode == 2 and len(lines) == 1), (other.returncode, lines[-5:])


AGREE = [
    pytest.param(name, i, id=f"{name}-{i}", marks=[pytest.mark.slow] if i >= FAST else [])
    for name in ("kineto_text", "depth")
    for i in range(SLOW)
]


@pytest.mark.parametrize(("target", "variant"), AGREE)
def test_both_readers_agree_on_damaged_text(target: str, variant: int, tmp_path: Path) -> None:
    """The C scanner and the msgspec reader keep the same events from damaged text, in the same
    order, and count the same damage (the C scanner hands damaged regions to the same salvage)."""
    from stepscope.trace.kineto import read_kineto

    p = Path(TARGETS[target](random.Random(f"{target}-{variant}"), tmp_path, {})[1])
    reads = []
    for portable in (False, True):
        try:
            fr = read_kineto(p, workers=1, force_portable=portable)
        except StepscopeError as exc:
            reads.append(("error", exc.__class__.__name__))
            continue
        t = fr.table
        reads.append((t["ts_ns"].to_pylist(), t["name"].to_pylist(), fr.skipped_events, fr.truncated))
    assert reads[0] == reads[1]
