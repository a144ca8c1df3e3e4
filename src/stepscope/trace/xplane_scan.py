"""Vectorized XPlane rows from the C scanner's flat columns (``_fastxplane.scan``).

Same mapping and the same table as the portable path in ``xplane.py`` (tested equal): stats are
matched to their wanted key by (plane, stat-metadata id) with ``searchsorted``; an event's stats
override its metadata's; every string decision (kind by name, control ops, fusion kind from
``long_name``...) runs once per distinct string, never per event.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from . import schema
from .xplane import (
    _CONTROL,
    _DEVICE_PLANE,
    _FUSION_KIND,
    _HLO_OPCODE,
    _INT_STATS,
    _RUNTIME,
    _STRING_STATS,
    _kernel_kind,
    _line_kind,
)

_K = schema.Kind
_STR_KEYS = ("op", "module", "tf_op", "name_stack", "long_name", "op_class")
_INT_KEYS = ("flops", "bytes_accessed", "correlation", "device_ordinal", "step_num")
_NA = np.iinfo(np.int64).min
PLANE_OWNER = -(1 << 40)  # stats with owner <= this are the plane's own (device properties)


def _arr(raw: dict[str, Any], key: str, dtype: Any = np.int64) -> np.ndarray:
    return np.frombuffer(raw[key], dtype=dtype)


class _Strings:
    """A string table: ids for the (offset, length) slices of the input and for literals."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.values: list[str] = []
        self.index: dict[str, int] = {}

    def add(self, s: str) -> int:
        i = self.index.get(s)
        if i is None:
            i = self.index[s] = len(self.values)
            self.values.append(s)
        return i

    def slices(self, pairs: np.ndarray) -> np.ndarray:
        """(n, 2) offset/length pairs -> ids (-1 for absent: offset -1)."""
        out = np.full(len(pairs), -1, np.int64)
        if not len(pairs):
            return out
        key = np.where(pairs[:, 0] >= 0, (pairs[:, 0] << 24) | np.minimum(pairs[:, 1], (1 << 24) - 1), -1)
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
        ids = np.array(
            [self.add(self.data[o : o + n].decode("utf-8", "replace")) if o >= 0 else -1 for o, n in pairs[first]],
            dtype=np.int64,
        )
        return ids[inv.ravel()]


def _lookup(keys_sorted: np.ndarray, order: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Index (into the unsorted array) of each query key, -1 when absent."""
    if keys_sorted.size == 0:
        return np.full(q.size, -1, np.int64)
    pos = np.clip(np.searchsorted(keys_sorted, q), 0, keys_sorted.size - 1)
    return np.where(keys_sorted[pos] == q, order[pos], -1)


def _combine(plane: np.ndarray, ident: np.ndarray) -> np.ndarray:
    return plane.astype(np.int64) * (1 << 40) + (ident.astype(np.int64) & ((1 << 40) - 1))


def device_properties(data: bytes, raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Kineto-style ``deviceProperties`` of the device planes, from their own stats."""
    owner, plane, mid = _arr(raw, "st_owner"), _arr(raw, "st_plane"), _arr(raw, "st_mid")
    kind, ival, sstr = _arr(raw, "st_kind"), _arr(raw, "st_ival"), _arr(raw, "st_str").reshape(-1, 2)
    sm_plane, sm_id, sm_name = _arr(raw, "sm_plane"), _arr(raw, "sm_id"), _arr(raw, "sm_name").reshape(-1, 2)
    names = {
        (int(pp), int(i)): data[o : o + n].decode("utf-8", "replace")
        for pp, i, (o, n) in zip(sm_plane, sm_id, sm_name)
        if o >= 0
    }
    stats: dict[int, dict[str, Any]] = {}
    for j in np.flatnonzero(owner <= PLANE_OWNER):
        key = names.get((int(plane[j]), int(mid[j])))
        if key:
            o, n = sstr[j]
            stats.setdefault(int(plane[j]), {})[key] = (
                data[o : o + n].decode("utf-8", "replace") if kind[j] == 4 else int(ival[j])
            )
    pl = _arr(raw, "pl_name").reshape(-1, 2)
    return [
        props
        for p_i, (o, n) in enumerate(pl)
        if (props := plane_properties(data[o : o + n].decode("utf-8", "replace") if o >= 0 else "", stats.get(p_i, {})))
    ]


def plane_properties(plane_name: str, stats: dict[str, Any]) -> dict[str, Any] | None:
    """A device plane's stats as Kineto-style device properties (None for other planes)."""
    m = _DEVICE_PLANE.match(plane_name)
    if m is None or m.group(1) == "CUSTOM" or not stats:
        return None
    return {
        "id": int(m.group(2)),
        "name": "",
        "vendor": stats.get("device_vendor"),
        "computeMajor": stats.get("compute_cap_major"),
        "computeMinor": stats.get("compute_cap_minor"),
        "numSms": stats.get("core_count"),
        "totalGlobalMem": stats.get("memory_size"),
        "clockRateKHz": stats.get("clock_rate"),
        "memoryBandwidthBytesPerS": stats.get("memory_bandwidth"),
    }


def columns(data: bytes, raw: dict[str, Any], include_python: bool) -> dict[str, Any]:
    st = _Strings(data)
    pl_name = st.slices(_arr(raw, "pl_name").reshape(-1, 2))
    n_planes = pl_name.size
    plane_dev = np.full(n_planes, -2, np.int64)  # -2 skip, -1 host, >= 0 device id
    for p in range(n_planes):
        name = st.values[pl_name[p]] if pl_name[p] >= 0 else ""
        m = _DEVICE_PLANE.match(name)
        if m is not None and m.group(1) != "CUSTOM":
            plane_dev[p] = int(m.group(2))
        elif name.startswith("/host:CPU"):
            plane_dev[p] = -1
    # ---- stat metadata: (plane, id) -> name and wanted key ---------------------------------------
    sm_plane, sm_id = _arr(raw, "sm_plane"), _arr(raw, "sm_id")
    sm_name = st.slices(_arr(raw, "sm_name").reshape(-1, 2))
    keys = _STR_KEYS + _INT_KEYS
    name_to_key = {n: keys.index(k) for n, k in {**_STRING_STATS, **_INT_STATS}.items()}
    key_of_name = {i: name_to_key.get(v, -1) for i, v in enumerate(st.values)}
    sm_key = np.array([key_of_name.get(int(i), -1) if i >= 0 else -1 for i in sm_name], dtype=np.int64)
    sm_comb = _combine(sm_plane, sm_id)
    sm_order = np.argsort(sm_comb, kind="stable")
    sm_sorted = sm_comb[sm_order]
    # ---- stats -> wanted values per owner ------------------------------------------------------
    s_owner, s_plane, s_mid = _arr(raw, "st_owner"), _arr(raw, "st_plane"), _arr(raw, "st_mid")
    s_kind, s_ival, s_dval = _arr(raw, "st_kind"), _arr(raw, "st_ival"), _arr(raw, "st_dval", np.float64)
    s_str = _arr(raw, "st_str").reshape(-1, 2)
    sm_row = _lookup(sm_sorted, sm_order, _combine(s_plane, s_mid))
    s_key = np.where(sm_row >= 0, sm_key[np.clip(sm_row, 0, None)], -1)
    want = np.flatnonzero(s_key >= 0)
    s_key, s_owner, s_plane = s_key[want], s_owner[want], s_plane[want]
    s_kind, s_ival, s_dval, s_str = s_kind[want], s_ival[want], s_dval[want], s_str[want]
    is_str_key = s_key < len(_STR_KEYS)
    # strings: a ref names a stat-metadata entry (missing -> None); else the str value (or "")
    ref_row = _lookup(sm_sorted, sm_order, _combine(s_plane, s_ival))
    direct = st.slices(np.where((s_kind == 4)[:, None], s_str, np.array([[-1, 0]])))
    empty = st.add("")
    str_val = np.where(
        (s_kind == 6) & (s_ival != 0),
        np.where(ref_row >= 0, sm_name[np.clip(ref_row, 0, None)], -1),
        np.where(direct >= 0, direct, empty),
    )
    num_val = np.where(s_ival != 0, s_ival, s_dval.astype(np.int64))
    value = np.where(is_str_key, str_val, num_val)
    n_events, n_em = _arr(raw, "ev_mid").size, _arr(raw, "em_id").size

    def by_owner(owner_index: np.ndarray, n: int, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(present, value) per (owner, key): the last stat of each wins."""
        present = np.zeros((n, len(keys)), bool)
        val = np.full((n, len(keys)), -1, np.int64)
        o, k, v = owner_index[sel][::-1], s_key[sel][::-1], value[sel][::-1]
        if o.size:
            _, first = np.unique(o * len(keys) + k, return_index=True)
            present[o[first], k[first]] = True
            val[o[first], k[first]] = v[first]
        return present, val

    ev_present, ev_val = by_owner(s_owner, n_events, s_owner >= 0)
    md_present, md_val = by_owner(-1 - s_owner, n_em, (s_owner < 0) & (s_owner > PLANE_OWNER))
    # ---- events -> metadata, line, plane -------------------------------------------------------
    ev_line, ev_mid = _arr(raw, "ev_line"), _arr(raw, "ev_mid")
    ev_off, ev_dur = _arr(raw, "ev_off"), _arr(raw, "ev_dur")
    ln_plane, ln_id, ln_ts = _arr(raw, "ln_plane"), _arr(raw, "ln_id"), _arr(raw, "ln_ts")
    ln_name = st.slices(_arr(raw, "ln_name").reshape(-1, 2))
    ln_dname = st.slices(_arr(raw, "ln_dname").reshape(-1, 2))
    ln_label = np.where((ln_dname >= 0) & (ln_dname != empty), ln_dname, np.where(ln_name >= 0, ln_name, empty))
    em_plane, em_id = _arr(raw, "em_plane"), _arr(raw, "em_id")
    em_name = st.slices(_arr(raw, "em_name").reshape(-1, 2))
    em_dname = st.slices(_arr(raw, "em_dname").reshape(-1, 2))
    em_label = np.where((em_name >= 0) & (em_name != empty), em_name, np.where(em_dname >= 0, em_dname, empty))
    em_comb = _combine(em_plane, em_id)
    em_order = np.argsort(em_comb, kind="stable")
    e_plane = ln_plane[ev_line]
    meta = _lookup(em_comb[em_order], em_order, _combine(e_plane, ev_mid))
    has_meta = meta >= 0
    mi = np.clip(meta, 0, None)
    present = np.where(has_meta[:, None], md_present[mi] | ev_present, ev_present) if n_em else ev_present
    val = np.where(ev_present, ev_val, md_val[mi] if n_em else -1)
    kcol = {k: i for i, k in enumerate(keys)}

    def sval(k: str) -> np.ndarray:
        return np.where(present[:, kcol[k]], val[:, kcol[k]], -1)

    name = np.where(has_meta, em_label[mi] if n_em else empty, -1)
    missing = np.flatnonzero(name < 0)
    for i in missing:
        name[i] = st.add(f"<metadata {int(ev_mid[i])}>")
    # ---- scope and op class (once per distinct string) ---------------------------------------------
    tf_op, stack, long_name = sval("tf_op"), sval("name_stack"), sval("long_name")
    good_tf = np.array([bool(v) and not v.endswith(":") for v in st.values] + [False], dtype=bool)
    scope = np.where(good_tf[np.where(tf_op >= 0, tf_op, -1)], tf_op, stack)
    scope = np.where(scope == empty, -1, scope)
    op_class = sval("op_class")
    derived = np.full(len(st.values) + 1, -1, np.int64)
    for u in np.unique(long_name[(long_name >= 0)]):
        m = _HLO_OPCODE.search(st.values[u])
        if m:
            fk = _FUSION_KIND.search(st.values[u])
            derived[u] = st.add(f"{m.group(1)}:k{fk.group(1)}" if (m.group(1) == "fusion" and fk) else m.group(1))
    no_class = (op_class < 0) | (op_class == empty)
    op_class = np.where(no_class & (long_name >= 0), derived[np.where(long_name >= 0, long_name, -1)], op_class)
    op = sval("op")
    # ---- kinds ---------------------------------------------------------------------------------
    pdev = plane_dev[e_plane]
    lkind = np.array(
        [_line_kind(plane_dev[p] >= 0, st.values[ln_label[i]]) for i, p in enumerate(ln_plane)] or ["host"],
        dtype=object,
    )
    lk = lkind[ev_line] if n_events else np.empty(0, object)
    is_host = (lk == "host") & (pdev == -1)
    host_step = is_host & present[:, kcol["step_num"]]
    op_truthy = (op >= 0) & (op != empty)
    host_op = is_host & ~host_step & op_truthy & present[:, kcol["device_ordinal"]]
    host_other = is_host & ~host_step & ~host_op
    steps_line = (lk == "steps") & (pdev >= 0)
    dev_line = ~is_host & ~steps_line & (pdev >= 0)
    n_str = len(st.values)
    code = schema.KIND_CODE
    lut_kernel = np.array([code[_kernel_kind(v)] for v in st.values] + [code[_K.KERNEL.value]], dtype=np.int32)
    lut_control = np.array([bool(_CONTROL.match(v)) for v in st.values] + [False], dtype=bool)
    lut_dollar = np.array([v.startswith("$") for v in st.values] + [False], dtype=bool)
    lut_runtime = np.array([bool(_RUNTIME.match(v)) for v in st.values] + [False], dtype=bool)
    nm = np.where(name >= 0, name, n_str)
    opi = np.where(op >= 0, op, n_str)
    ann, user = code[_K.GPU_ANNOTATION.value], code[_K.USER_ANNOTATION.value]
    kind = np.full(n_events, ann, dtype=np.int32)
    kind[host_step | steps_line] = user
    kind[host_op] = np.where(lut_control[opi[host_op]], ann, lut_kernel[nm[host_op]])
    kind[host_other] = np.where(
        lut_dollar[nm[host_other]],
        code[_K.PYTHON_FUNCTION.value],
        np.where(lut_runtime[nm[host_other]], code[_K.RUNTIME.value], code[_K.CPU_OP.value]),
    )
    is_ops = dev_line & (lk == "ops")
    kind[is_ops] = np.where(lut_control[opi[is_ops]] & op_truthy[is_ops], ann, lut_kernel[nm[is_ops]])
    keep = (pdev != -2) & ~(host_other & lut_dollar[nm] & (not include_python))
    # names of step rows
    step_val = val[:, kcol["step_num"]]
    for i in np.flatnonzero(host_step):
        scope[i] = name[i]
        name[i] = st.add(f"XLAStep#{int(step_val[i])}")
    if steps_line.any():
        first_of_line = np.r_[0, np.flatnonzero(np.diff(ev_line)) + 1] if n_events else np.empty(0, np.int64)
        start = np.zeros(n_events, np.int64)
        start[first_of_line] = first_of_line
        start = np.maximum.accumulate(start)
        pos_in_line = np.arange(n_events) - start
        for i in np.flatnonzero(steps_line):
            text = st.values[name[i]]
            name[i] = st.add(f"XLAStep#{text}" if text.isdigit() else f"XLAStep#{int(pos_in_line[i])}")
    line_id = ln_id[ev_line]
    pid = np.where(steps_line, 1 + pdev, 0)
    tid = np.where(host_step | host_other, line_id, np.where(steps_line, -1 - line_id, -1))
    device = np.where(host_op, val[:, kcol["device_ordinal"]], np.where(dev_line, pdev, -1))
    stream = np.where(host_op | dev_line, line_id, -1)
    ts = (ln_ts[ev_line] * 1000 + ev_off) // 1000
    dur = ev_dur // 1000
    corr = np.where(ev_present[:, kcol["correlation"]], ev_val[:, kcol["correlation"]], -1)
    flops = np.where(present[:, kcol["flops"]], val[:, kcol["flops"]], -1)
    nbytes = np.where(present[:, kcol["bytes_accessed"]], val[:, kcol["bytes_accessed"]], -1)
    sel = np.flatnonzero(keep)
    dictionary = pa.array(st.values, pa.string())

    def strings(ids: np.ndarray, plain: bool = True) -> pa.Array:
        ids = ids[sel]
        arr = pa.DictionaryArray.from_arrays(
            pa.array(np.where(ids >= 0, ids, 0).astype(np.int32), mask=ids < 0), dictionary
        )
        return arr.cast(pa.string()) if plain else arr

    return {
        "kind": pa.DictionaryArray.from_arrays(pa.array(kind[sel]), pa.array(list(code), pa.string())),
        "name": strings(name, plain=False),
        "cat": strings(ln_label[ev_line], plain=False),
        "pid": pid[sel],
        "tid": tid[sel],
        "device": device[sel],
        "stream": stream[sel],
        "ts": ts[sel],
        "dur": dur[sel],
        "op": strings(op),
        "module": strings(sval("module")),
        "scope": strings(scope),
        "op_class": strings(np.where((op_class >= 0), op_class, -1)),
        "flops": flops[sel],
        "bytes_accessed": nbytes[sel],
        "correlation": corr[sel],
    }
