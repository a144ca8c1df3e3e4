"""Measured cluster networks: collective bus bandwidth by the number of nodes a group spans.

A device catalog gives nominal link rates; real clusters fall short of them, and more so as a
collective spans more nodes. A profile (``data/networks.yaml``) holds a cluster's measured bus
bandwidth per collective kind for groups of every device of k nodes, at one message size M. One
size cannot separate bandwidth from latency, so the measurement is read through the alpha-beta
model the planner uses everywhere, with the nominal node bandwidth as beta (devices_per_node x the
catalog's per-device network rate):

- per ring step latency at k nodes = (measured time - time at the nominal node bandwidth) / ring
  steps, where a ring collective over n = devices_per_node x k ranks takes n - 1 steps (an
  all-reduce 2(n - 1)) and measured time = bytes moved / measured bus bandwidth; interpolated in
  log(nodes) between measured counts, clamped outside. On Hugging Face's cluster this gives 33-50 us
  per all-gather / reduce-scatter step at every count from 2 to 64 nodes: the fall of bus bandwidth
  with node count there is ring latency, not a thinner network;
- a group inside one node gets the one-node figure as its bandwidth (NVLink/NVSwitch: each device
  has its own ports, so the node's other groups do not share them) and the catalog's latency;
- a group spanning k nodes with r ranks on each gets beta x r / devices_per_node: a ring moves about
  one rank's worth of data through each node's network ports whatever r is, and the node runs
  devices_per_node / r such groups at once (the other TP/PP/CP ranks' copies of the collective),
  which share the ports.
Collectives without their own curve (the context-parallel ring exchange, the expert all-to-all)
take the all-gather curve; pipeline point-to-point transfers keep the nominal link.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from ..errors import ConfigError, refuse_unknown_keys
from ..yamlio import safe_load

KINDS = ("all_reduce", "all_gather", "reduce_scatter")


@dataclass(frozen=True)
class NetworkProfile:
    name: str
    devices_per_node: int
    nodes: tuple[float, ...]
    busbw_gbps: dict[str, tuple[float, ...]]
    message_bytes: int = 0
    device: str = ""  # the catalog device the nodes hold ("" = not stated)
    source: str = ""
    note: str = ""

    def busbw(self, kind: str, nodes: np.ndarray | float) -> np.ndarray:
        """Measured bus bandwidth (bytes/s) of a ``kind`` collective over ``nodes`` whole nodes."""
        x = np.log(np.clip(np.asarray(nodes, dtype=np.float64), self.nodes[0], self.nodes[-1]))
        return np.asarray(np.interp(x, np.log(self.nodes), self.busbw_gbps[kind]) * 1e9)

    def step_latency_s(self, kind: str, nodes: np.ndarray, node_bytes_per_s: float) -> np.ndarray:
        """Latency per ring step of a collective spanning ``nodes`` nodes (module docstring): at each
        measured multi-node count, (measured time - the time at the nominal node bandwidth) /
        ring steps; interpolated in log(nodes), clamped to the measured range."""
        pts = [k for k in self.nodes if k >= 2]
        if not pts:
            return np.full(np.shape(nodes), 20e-6)
        alphas = []
        for k in pts:
            n = self.devices_per_node * k
            steps = (2.0 if kind == "all_reduce" else 1.0) * (n - 1)
            moved = steps / n * self.message_bytes  # bytes each rank sends
            t_meas = moved / float(self.busbw(kind, k))
            alphas.append(max(t_meas - moved / node_bytes_per_s, 0.0) / steps)
        x = np.log(np.clip(np.asarray(nodes, dtype=np.float64), pts[0], pts[-1]))
        return np.asarray(np.interp(x, np.log(pts), alphas))

    def group_nodes(self, ranks: np.ndarray, span: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(nodes a group of ``ranks`` ranks over ``span`` consecutive ranks touches, its ranks per node)."""
        r = np.asarray(ranks, dtype=np.float64)
        nodes = np.maximum(np.minimum(np.ceil(np.asarray(span, dtype=np.float64) / self.devices_per_node), r), 1.0)
        return nodes, r / nodes


_ENTRY_KEYS = sorted({"name", "device", "devices_per_node", "message_bytes", "nodes", "busbw_gbps", "source", "note"})


def parse_entries(doc: Any, where: str) -> dict[str, NetworkProfile]:
    if not isinstance(doc, dict) or not isinstance(doc.get("networks"), list):
        raise ConfigError(
            "network file needs a 'networks' list", path=where, fix="see src/stepscope/data/networks.yaml"
        )
    out = {}
    for d in doc["networks"]:
        if isinstance(d, dict):  # a misspelt optional key (devcie), ignored, would drop the device check
            refuse_unknown_keys(d, _ENTRY_KEYS, path=where, owner=f"network {d.get('name', '?')}: ")
        try:
            nodes = tuple(float(x) for x in d["nodes"])
            bw = {k: tuple(float(x) for x in d["busbw_gbps"][k]) for k in KINDS}
            prof = NetworkProfile(
                name=str(d["name"]),
                devices_per_node=int(d["devices_per_node"]),
                nodes=nodes,
                busbw_gbps=bw,
                message_bytes=int(d.get("message_bytes") or 0),
                device=str(d.get("device") or ""),
                source=str(d.get("source", "")),
                note=str(d.get("note", "")),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise ConfigError(
                f"network entry {d.get('name', '?') if isinstance(d, dict) else d!r} is malformed ({e})",
                path=where,
                fix="give name, devices_per_node, nodes and busbw_gbps with all_reduce, all_gather, reduce_scatter",
            ) from None
        if (
            len(nodes) < 1
            or any(len(v) != len(nodes) for v in bw.values())
            or list(nodes) != sorted(set(nodes))
            or nodes[0] < 1
        ):
            raise ConfigError(
                f"network {prof.name}: nodes must be increasing counts >= 1 with one bandwidth per count and kind",
                path=where,
                fix="see src/stepscope/data/networks.yaml",
            )
        if (
            not all(0 < x < math.inf for v in (*bw.values(), nodes) for x in v) or prof.message_bytes <= 0
        ):  # nan fails too
            raise ConfigError(
                f"network {prof.name}: node counts, bandwidths and message_bytes must be finite numbers > 0",
                path=where,
                fix="see src/stepscope/data/networks.yaml",
            )
        out[prof.name.lower()] = prof
    return out


@lru_cache(maxsize=1)
def catalog() -> dict[str, NetworkProfile]:
    text = resources.files("stepscope.data").joinpath("networks.yaml").read_text(encoding="utf-8")
    return parse_entries(safe_load(text), "stepscope/data/networks.yaml")


def by_name(name: str) -> NetworkProfile:
    """A bundled network by name, or ``FILE.yaml`` (``FILE.yaml#NAME`` when it holds several): a
    cluster's own measurement, in the layout of ``data/networks.yaml``."""
    path, _, pick = name.strip().partition("#")
    if path.lower().endswith((".yaml", ".yml")):
        try:
            doc = safe_load(Path(path).read_text(encoding="utf-8"))
        except OSError as e:
            raise ConfigError(
                f"cannot read the network file ({e.strerror})", path=path, fix="pass an existing YAML file"
            ) from None
        except yaml.YAMLError as e:
            raise ConfigError(
                f"the network file is not valid YAML ({str(e).splitlines()[0]})",
                path=path,
                fix="see src/stepscope/data/networks.yaml for the layout",
            ) from None
        found = parse_entries(doc, path)
        if pick:
            if pick.lower() not in found:
                raise ConfigError(
                    f"no network {pick!r} in the file", path=path, fix=f"use one of: {', '.join(sorted(found))}"
                )
            return found[pick.lower()]
        if len(found) != 1:
            raise ConfigError(
                f"the file holds {len(found)} networks",
                path=path,
                fix=f"pick one: {path}#NAME ({', '.join(sorted(found))})",
            )
        return next(iter(found.values()))
    prof = catalog().get(name.strip().lower())
    if prof is None:
        raise ConfigError(
            f"unknown network {name!r}",
            fix=f"use one of: {', '.join(sorted(catalog()))}, or a YAML file of your cluster's",
        )
    return prof
