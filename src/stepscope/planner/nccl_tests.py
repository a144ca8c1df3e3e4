"""A cluster's network profile (data/networks.yaml layout) from nccl-tests logs.

Run ``all_reduce_perf``, ``all_gather_perf`` and ``reduce_scatter_perf`` over every device of 1, 2,
4, ... nodes and keep each run's output (MPI's ``[1,0]<stdout>:`` prefixes are fine). Each log
gives its collective (the "Collective test starting" line, else the file name), its ranks and
their hosts (the "Rank ... on HOST device" lines: nodes = distinct hosts) and its rows
``size count type redop root time algbw busbw #wrong ...``; the out-of-place bus bandwidth at the
message size closest to the one asked for (in log size, within a factor of 2) is the profile's
figure for that collective and node count. Every node count needs all three collectives and the
same devices per node.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..catalog.hardware import canonical_name
from ..errors import ConfigError, InputError
from . import network
from .network import KINDS

_PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
_RANK = re.compile(r"^#\s*Rank\s+\d+\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device")
_TEST = re.compile(r"Collective test starting:\s*(\w+)")
_FIX = "pass the output of nccl-tests' all_reduce_perf, all_gather_perf or reduce_scatter_perf"


def _kind(text: str, name: str) -> str:
    m = _TEST.search(text)
    for candidate in ((m.group(1),) if m else ()) + (name,):
        for kind in KINDS:
            if kind in candidate.lower().replace("-", "_"):
                return kind
    raise InputError(
        "cannot tell which collective this nccl-tests log measured (no 'Collective test starting' line, "
        "and the file name names none)",
        path=name,
        fix="name the file after the test, e.g. all_gather_2nodes.log",
    )


def parse_log(path: str) -> tuple[str, int, int, dict[int, float]]:
    """(collective kind, nodes, ranks per node, {message bytes: out-of-place bus bandwidth GB/s})."""
    try:
        lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read the nccl-tests log ({exc.strerror})", path=path, fix=_FIX) from None
    lines = [_PREFIX.sub("", ln).strip() for ln in lines]
    hosts = [m.group(1) for ln in lines if (m := _RANK.match(ln))]
    rows: dict[int, float] = {}
    for ln in lines:
        tok = ln.split()
        if len(tok) >= 8 and tok[0].isdigit() and tok[1].isdigit():
            try:
                rows[int(tok[0])] = float(tok[7])
            except ValueError:
                continue
    if not hosts or not rows:
        raise InputError(
            "not an nccl-tests log (no 'Rank ... on HOST device' lines or no result rows)", path=path, fix=_FIX
        )
    nodes = len(set(hosts))
    if len(hosts) % nodes:
        raise InputError(
            f"{len(hosts)} ranks over {nodes} hosts: not the same number on every node",
            path=path,
            fix="run on whole nodes, every device of each",
        )
    return _kind("\n".join(lines), Path(path).name), nodes, len(hosts) // nodes, rows


def _at(rows: dict[int, float], size: int, path: str) -> tuple[int, float]:
    best = min(rows, key=lambda s: abs(math.log(max(s, 1) / size)))
    if abs(math.log(max(best, 1) / size)) > math.log(2) + 1e-9:
        raise InputError(
            f"no result within a factor of 2 of {size} bytes (sizes {min(rows)}-{max(rows)})",
            path=path,
            fix="rerun nccl-tests with -b/-e spanning that size, or pass --size",
        )
    return best, rows[best]


def profile_from_logs(paths: Sequence[str], *, name: str, size: int = 256 << 20, device: str = "") -> dict[str, Any]:
    """One network entry (a dict in the data/networks.yaml layout) from nccl-tests logs; ``device``
    is stored under its catalog name (an alias resolved)."""
    table: dict[tuple[str, int], tuple[int, float, str]] = {}
    per_node: set[int] = set()
    for path in paths:
        kind, nodes, dpn, rows = parse_log(path)
        per_node.add(dpn)
        got, busbw = _at(rows, size, path)
        table[(kind, nodes)] = (got, busbw, path)
    if len(per_node) != 1:
        raise ConfigError(
            f"the logs ran {sorted(per_node)} devices per node",
            fix="measure every node count with all devices of each node",
        )
    counts = sorted({n for _, n in table})
    missing = [f"{k} at {n} node(s)" for n in counts for k in KINDS if (k, n) not in table]
    if missing:
        raise ConfigError(
            f"missing {', '.join(missing)}",
            fix="run all_reduce_perf, all_gather_perf and reduce_scatter_perf at every node count",
        )
    sizes = sorted({got for got, _, _ in table.values()})
    entry = {
        "name": name,
        **({"device": canonical_name(device)} if device else {}),
        "devices_per_node": per_node.pop(),
        "message_bytes": sizes[0] if len(sizes) == 1 else size,
        "nodes": counts,
        "busbw_gbps": {k: [table[(k, n)][1] for n in counts] for k in KINDS},
        "source": "nccl-tests logs: " + ", ".join(Path(p).name for p in paths),
        "note": "out-of-place bus bandwidth at " + ", ".join(f"{s} B" for s in sizes),
    }
    network.parse_entries({"networks": [entry]}, "the profile")  # the checks plan --network makes
    return entry
