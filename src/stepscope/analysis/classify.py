"""Classify device work into categories (gemm, attention, comm:<collective>, memcpy_h2d, ...).

Rules come from ``data/kernel_rules.yaml`` plus optional user rules (tried first). Regexes run
once per *distinct* kernel name (dictionary entries), never per event.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import yaml

from ..errors import ConfigError, refuse_unknown_keys
from ..trace.dictcol import per_value
from ..trace.schema import KIND_CODE as KIND
from ..yamlio import safe_load

COMM_PREFIX = "comm:"
MEMORY_CATEGORIES = ("memcpy_h2d", "memcpy_d2h", "memcpy_d2d", "memcpy_p2p", "memcpy_other", "memset")


#: name-based categories a kernel launched by a collective-named annotation gives up (its name
#: says nothing more specific than "some elementwise work")
ANNOTATION_CLAIMS = ("other", "elementwise")


@dataclass(frozen=True, kw_only=True)
class CommFamily:
    """A communication library recognized by kernel name; ``collective`` fixes the collective
    type (None: the type comes from ``Rules.collectives`` on the name)."""

    family: str
    collective: str | None
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Rules:
    categories: tuple[tuple[str, re.Pattern[str]], ...]
    collectives: tuple[tuple[str, re.Pattern[str]], ...]
    comm_kernels: re.Pattern[str]
    comm_ops: re.Pattern[str]
    comm_families: tuple[CommFamily, ...] = ()
    comm_annotations: re.Pattern[str] | None = None

    def collective_of(self, text: str) -> str:
        for ctype, pat in self.collectives:
            if pat.search(text):
                return ctype
        return "other"

    def family_of_kernel(self, name: str) -> CommFamily | None:
        """The first communication family whose pattern matches the kernel name."""
        for fam in self.comm_families:
            if fam.pattern.search(name):
                return fam
        return None

    def is_collective_annotation(self, name: str) -> bool:
        """A host op or annotation named after a collective (``comm_annotations``); ``aten::``
        ops are local tensor ops even when named like one (aten::broadcast_tensors)."""
        pat = self.comm_annotations
        return pat is not None and not name.startswith("aten::") and bool(pat.search(name))

    def category_of_kernel(self, name: str) -> str:
        fam = self.family_of_kernel(name)
        if fam is not None:
            return COMM_PREFIX + (fam.collective or self.collective_of(name))
        if self.comm_kernels.search(name):
            return COMM_PREFIX + self.collective_of(name)
        for cat, pat in self.categories:
            if pat.search(name):
                return cat
        return "other"


def _compile(pattern: Any, where: str) -> re.Pattern[str]:
    try:
        return re.compile(str(pattern), re.IGNORECASE)
    except re.error as exc:
        raise ConfigError(f"bad regular expression {pattern!r} ({exc})", path=where, fix="fix the pattern") from None


_KEYS = {
    "version": None,
    "collectives": "type",
    "comm_families": "family",
    "comm_kernels": None,
    "comm_ops": None,
    "comm_annotations": None,
    "categories": "category",
}


def _parse(doc: Any, where: str) -> dict[str, Any]:
    """The rules file as a mapping, its keys and entries checked: a misspelt key, or an entry without
    its name or pattern, is a ConfigError naming the file."""
    if not isinstance(doc, dict):
        raise ConfigError("rules file must be a mapping", path=where, fix="see src/stepscope/data/kernel_rules.yaml")
    refuse_unknown_keys(doc, _KEYS, path=where, see="src/stepscope/data/kernel_rules.yaml")
    for key, name in _KEYS.items():
        if name is None or doc.get(key) is None:
            if name is None and doc.get(key) is not None and key != "version":
                if not isinstance(doc[key], str):  # a list or a number became the regex of its repr
                    raise ConfigError(
                        f"{key} must be one regular expression (a string), not {type(doc[key]).__name__}",
                        path=where,
                        fix=f"e.g. {key}: 'my_kernel|other_kernel'",
                    )
                _compile(doc[key], where)  # the user's own pattern, named alone if it is bad
            continue
        entries = doc[key]
        if not isinstance(entries, list) or not all(
            isinstance(e, dict) and isinstance(e.get(name), str) and isinstance(e.get("pattern"), str) for e in entries
        ):
            raise ConfigError(
                f"{key} must be a list of {{{name}: ..., pattern: ...}} with text values",
                path=where,
                fix=f"e.g. {key}: [{{{name}: ..., pattern: 'my_kernel'}}]",
            )
    return doc


@lru_cache(maxsize=8)
def load_rules(user_file: str | None = None) -> Rules:
    base = _parse(
        safe_load(resources.files("stepscope.data").joinpath("kernel_rules.yaml").read_text()), "kernel_rules.yaml"
    )
    user: dict[str, Any] = {}
    if user_file:
        try:
            user = _parse(safe_load(Path(user_file).read_text()), user_file)
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(
                f"cannot read rules ({exc.__class__.__name__})",
                path=user_file,
                fix="pass a YAML file like kernel_rules.yaml",
            ) from None
    where = user_file or "kernel_rules.yaml"
    cats = [*(user.get("categories") or []), *base["categories"]]
    colls = [*(user.get("collectives") or []), *base["collectives"]]
    fams = [*(user.get("comm_families") or []), *base["comm_families"]]
    joined = {
        k: base[k] + ("|" + user[k] if user.get(k) else "") for k in ("comm_kernels", "comm_ops", "comm_annotations")
    }
    return Rules(
        categories=tuple((str(c["category"]), _compile(c["pattern"], where)) for c in cats),
        collectives=tuple((str(c["type"]), _compile(c["pattern"], where)) for c in colls),
        comm_kernels=_compile(joined["comm_kernels"], where),
        comm_ops=_compile(joined["comm_ops"], where),
        comm_families=tuple(
            CommFamily(
                family=str(f["family"]),
                collective=str(f["collective"]) if f.get("collective") else None,
                pattern=_compile(f["pattern"], where),
            )
            for f in fams
        ),
        comm_annotations=_compile(joined["comm_annotations"], where),
    )


def memcpy_category(name: str) -> str:
    n = name.lower().replace(" ", "")
    if "htod" in n or "hosttodevice" in n or "h2d" in n:
        return "memcpy_h2d"
    if "dtoh" in n or "devicetohost" in n or "d2h" in n:
        return "memcpy_d2h"
    if "dtod" in n or "devicetodevice" in n or "d2d" in n:
        return "memcpy_d2d"
    if "ptop" in n or "peer" in n or "p2p" in n:
        return "memcpy_p2p"
    return "memcpy_other"


def _of_text(col: pa.Array, fn: Any) -> np.ndarray:
    """``fn`` of each row's string ("" for nulls), once per distinct value (``dictcol.per_value``)."""
    return per_value(col, lambda v: fn(v or ""), null=fn(""))


class _Labels:
    """Category labels interned to small int codes as they are met; per-row work stays on codes."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}

    def code(self, label: str) -> int:
        return self.index.setdefault(label, len(self.index))

    def codes_of(self, col: pa.Array, fn: Any) -> np.ndarray:
        """Code of ``fn(row string)`` per row, ``fn`` called once per distinct value."""
        return per_value(col, lambda v: self.code(fn(v or "")), null=self.code(fn("")), dtype=np.int32)

    def lut(self, pred: Any) -> np.ndarray:
        """``pred(label)`` per code."""
        return np.array([bool(pred(lab)) for lab in self.index], dtype=bool)

    def sorted(self, codes: np.ndarray) -> Categories:
        """Codes renumbered so that the labels present are in sorted order (as ``np.unique`` gives them)."""
        labels = list(self.index)
        used = np.bincount(codes, minlength=len(labels)) > 0 if codes.size else np.zeros(len(labels), bool)
        order = sorted((i for i in range(len(labels)) if used[i]), key=labels.__getitem__)
        remap = np.zeros(max(len(labels), 1), np.int32)
        remap[order] = np.arange(len(order), dtype=np.int32)
        return Categories(
            codes=remap[codes].astype(np.int32) if codes.size else codes.astype(np.int32),
            labels=tuple(labels[i] for i in order),
        )


@dataclass(frozen=True)
class Categories:
    """One category per device row as codes into ``labels`` (sorted, distinct)."""

    codes: np.ndarray  # int32 per row
    labels: tuple[str, ...]

    def objects(self) -> np.ndarray:
        """The label per row as an object array."""
        return np.asarray(self.labels + ("",), dtype=object)[self.codes]

    @classmethod
    def of(cls, labels: np.ndarray) -> Categories:
        """From a label per row (object or str array)."""
        uniq, inv = np.unique(labels.astype(str), return_inverse=True)
        return cls(codes=inv.ravel().astype(np.int32), labels=tuple(str(u) for u in uniq))

    def group(self) -> np.ndarray:
        """0 = compute, 1 = communication, 2 = memory (memcpy/memset), per row."""
        lut = np.array([group_of_label(lab) for lab in self.labels] + [0], dtype=np.int8)
        return lut[self.codes]


def group_of_label(label: str) -> int:
    """0 = compute, 1 = communication, 2 = memory (memcpy/memset)."""
    return 1 if label.startswith(COMM_PREFIX) else 2 if label in MEMORY_CATEGORIES else 0


def classify_device_events(dev: pa.Table, kind_codes: np.ndarray, host: pa.Table, rules: Rules) -> Categories:
    """Category per row of ``dev`` (kernel/memcpy/memset rows of one rank).

    ``host`` holds (at least) the rank's host communication ops (``name``, ``collective``,
    ``external_id``): a kernel whose ``external_id`` matches one of them is communication too.
    Labels are computed once per distinct name and carried per row as codes.
    """
    n = dev.num_rows
    lab = _Labels()
    if n == 0:
        return lab.sorted(np.empty(0, np.int32))
    kind = kind_codes
    names = dev["name"].combine_chunks()
    by_name = lab.codes_of(names, rules.category_of_kernel)
    memcpy = lab.codes_of(names, memcpy_category)
    cat = np.where(kind == KIND["kernel"], by_name, np.where(kind == KIND["memset"], lab.code("memset"), memcpy))
    # 1) recorded collective args on the kernel itself (newer Kineto copies them onto NCCL kernels)
    coll = dev["collective"].combine_chunks()
    has_coll = pc.is_valid(coll).to_numpy(zero_copy_only=False) & (kind == KIND["kernel"])
    if has_coll.any():
        ctype = lab.codes_of(coll, lambda s: COMM_PREFIX + rules.collective_of(s))
        cat = np.where(has_coll, ctype, cat)
    # 2) the launching CPU op is a communication op (nccl:*, c10d::*, record_param_comms...), which
    # claims any kernel; or an annotation named after a collective, which claims unknown kernels
    is_kernel = kind == KIND["kernel"]
    if host.num_rows:
        strong, weak, label = _host_comm(host, rules)
        kext = dev["external_id"].to_numpy()
        claimable = (lambda c: not c.startswith(COMM_PREFIX), lambda c: c in ANNOTATION_CLAIMS)
        for sel, may_claim in zip((strong, weak), claimable):
            hit, hlab = _launched_by(host["external_id"].to_numpy(), sel, label, kext)
            claims = lab.lut(may_claim)
            hit &= is_kernel & claims[cat]
            if hit.any():
                uniq, inv = np.unique(hlab[hit].astype(str), return_inverse=True)
                types = np.array([lab.code(COMM_PREFIX + rules.collective_of(u)) for u in uniq], dtype=np.int32)
                cat[hit] = types[inv.ravel()]
    # 3) the stream: unclassified kernels on a stream that mostly runs communication
    is_comm = lab.lut(lambda c: c.startswith(COMM_PREFIX))[cat]
    if is_comm.any():
        _, sidx = np.unique(dev["stream"].to_numpy(), return_inverse=True)
        comm_share = np.bincount(sidx, weights=(is_comm & is_kernel)) / np.maximum(
            np.bincount(sidx, weights=is_kernel), 1
        )
        on_comm_stream = comm_share[sidx] > 0.5
        cat = np.where(on_comm_stream & is_kernel & (cat == lab.code("other")), lab.code(COMM_PREFIX + "other"), cat)
    return lab.sorted(cat)


def _host_comm(host: pa.Table, rules: Rules) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per host row: a communication op (``comm_ops`` or recorded collective args), a
    collective-named annotation (``comm_annotations``), and the text its collective type is read
    from (the recorded collective name, else the op name)."""
    hname = host["name"].combine_chunks()
    hcoll = host["collective"].combine_chunks()
    has_coll = pc.is_valid(hcoll).to_numpy(zero_copy_only=False)
    strong = _of_text(hname, lambda s: bool(rules.comm_ops.search(s))).astype(bool) | has_coll
    weak = _of_text(hname, rules.is_collective_annotation).astype(bool) & ~strong
    label = np.where(has_coll, _of_text(hcoll, lambda s: s), _of_text(hname, lambda s: s))
    return strong, weak, label


def _launched_by(
    ext: np.ndarray, sel: np.ndarray, label: np.ndarray, kext: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per kernel (External id ``kext``): whether a selected host row has its External id, and
    that row's label (the first such row in host order). One sort and one binary search."""
    ok = sel & (ext >= 0)
    ext_sel, lab_sel = ext[ok], label[ok]
    hit = np.zeros(kext.size, bool)
    lab = np.full(kext.size, "", dtype=object)
    if ext_sel.size == 0:
        return hit, lab
    o = np.argsort(ext_sel, kind="stable")
    ext_sorted, lab_sorted = ext_sel[o], lab_sel[o]
    pos = np.clip(np.searchsorted(ext_sorted, kext), 0, ext_sorted.size - 1)
    hit = (kext >= 0) & (ext_sorted[pos] == kext)
    lab[hit] = lab_sorted[pos[hit]]
    return hit, lab
