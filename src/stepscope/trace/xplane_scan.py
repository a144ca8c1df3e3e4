"""Vectorized XPlane rows from the C scanner's flat columns (``_fastxplane.scan``).

Same mapping (``xplane_rules``) and the same table as the portable path (``xplane_portable``,
tested equal): stats are matched to their wanted key by (plane, stat-metadata id) with
``searchsorted``; an event's stats override its metadata's; every string decision (kind by name,
control ops, fusion kind from ``long_name``...) runs once per distinct string, never per event.

String ids index one table (``_Strings``) that becomes the ``name`` and ``cat`` dictionaries, in
the order strings are first met: the steps of ``columns`` run in a fixed order for that reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from . import schema
from .dictcol import lookup_table
from .xplane_rules import (
    CONTROL,
    HOST_PLANE,
    INT_KEYS,
    INT_STATS,
    MAX_INT_STAT,
    RUNTIME,
    SKIP_PLANE,
    STRING_KEYS,
    STRING_STATS,
    good_tf_op,
    kernel_kind,
    line_kind,
    op_class_from_hlo,
    plane_device,
    plane_properties,
)

_K = schema.Kind
_KEYS = STRING_KEYS + INT_KEYS
_COL = {k: i for i, k in enumerate(_KEYS)}
PLANE_OWNER = -(1 << 40)  # stats with owner <= this are the plane's own (device properties)


def _arr(raw: dict[str, Any], key: str, dtype: Any = np.int64) -> np.ndarray:
    return np.frombuffer(raw[key], dtype=dtype)


def _pairs(raw: dict[str, Any], key: str) -> np.ndarray:
    """An (n, 2) column of (offset, length) slices of the input."""
    return _arr(raw, key).reshape(-1, 2)


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

    def table(self, fn: Any, dtype: Any, null: Any) -> np.ndarray:
        """``fn`` of every string so far, then ``null`` (at id -1 and at ``len(values)``)."""
        return lookup_table(self.values, fn, null=null, dtype=dtype)


def _combine(plane: np.ndarray, ident: np.ndarray) -> np.ndarray:
    return plane.astype(np.int64) * (1 << 40) + (ident.astype(np.int64) & ((1 << 40) - 1))


class _Index:
    """Rows of an unsorted key array, found by binary search."""

    def __init__(self, keys: np.ndarray) -> None:
        self.order = np.argsort(keys, kind="stable")
        self.sorted = keys[self.order]

    def find(self, q: np.ndarray) -> np.ndarray:
        """Index (into the unsorted array) of each query key, -1 when absent."""
        if self.sorted.size == 0:
            return np.full(q.size, -1, np.int64)
        pos = np.clip(np.searchsorted(self.sorted, q), 0, self.sorted.size - 1)
        return np.where(self.sorted[pos] == q, self.order[pos], -1)


def device_properties(data: bytes, raw: dict[str, Any]) -> list[dict[str, Any]]:
    """Kineto-style ``deviceProperties`` of the device planes, from their own stats."""
    owner, plane, mid = _arr(raw, "st_owner"), _arr(raw, "st_plane"), _arr(raw, "st_mid")
    kind, ival, sstr = _arr(raw, "st_kind"), _arr(raw, "st_ival"), _pairs(raw, "st_str")
    sm_plane, sm_id, sm_name = _arr(raw, "sm_plane"), _arr(raw, "sm_id"), _pairs(raw, "sm_name")
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
    return [
        props
        for p_i, (o, n) in enumerate(_pairs(raw, "pl_name"))
        if (props := plane_properties(data[o : o + n].decode("utf-8", "replace") if o >= 0 else "", stats.get(p_i, {})))
    ]


@dataclass(frozen=True)
class _Stats:
    """The stats of a wanted key: key index (into ``_KEYS``), owner (an event's index when >= 0,
    ``-1 - i`` for event metadata ``i``, <= ``PLANE_OWNER`` for the plane's own) and value (a
    string id for the string keys, else the integer)."""

    key: np.ndarray
    owner: np.ndarray
    value: np.ndarray

    def by_owner(self, owner_index: np.ndarray, n: int, sel: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(present, value), each (n, keys), of the stats ``sel``: the last stat of a key wins."""
        present = np.zeros((n, len(_KEYS)), bool)
        val = np.full((n, len(_KEYS)), -1, np.int64)
        o, k, v = owner_index[sel][::-1], self.key[sel][::-1], self.value[sel][::-1]
        if o.size:
            _, first = np.unique(o * len(_KEYS) + k, return_index=True)
            present[o[first], k[first]] = True
            val[o[first], k[first]] = v[first]
        return present, val


def _at(values: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """``values[rows]`` where ``rows >= 0``, else -1 (also when ``values`` is empty: a plane
    without stat metadata)."""
    if values.size == 0:
        return np.full(rows.shape, -1, dtype=np.int64)
    return np.where(rows >= 0, values[np.clip(rows, 0, values.size - 1)], -1)


def _wanted_stats(st: _Strings, raw: dict[str, Any]) -> _Stats:
    """The stats whose name maps to a key (``STRING_STATS``, ``INT_STATS``), with their values: a
    ``ref_value`` names a stat-metadata entry (None when absent), else the string value (or "");
    an integer is the ``int64``/``uint64`` value when nonzero, else the double truncated."""
    sm_name = st.slices(_pairs(raw, "sm_name"))
    name_to_key = {n: _KEYS.index(k) for n, k in {**STRING_STATS, **INT_STATS}.items()}
    key_of_name = {i: name_to_key.get(v, -1) for i, v in enumerate(st.values)}
    sm_key = np.array([key_of_name.get(int(i), -1) if i >= 0 else -1 for i in sm_name], dtype=np.int64)
    sm = _Index(_combine(_arr(raw, "sm_plane"), _arr(raw, "sm_id")))
    s_plane = _arr(raw, "st_plane")
    sm_row = sm.find(_combine(s_plane, _arr(raw, "st_mid")))
    s_key = _at(sm_key, sm_row)
    want = np.flatnonzero(s_key >= 0)
    s_key, s_plane, s_kind = s_key[want], s_plane[want], _arr(raw, "st_kind")[want]
    s_ival, s_dval = _arr(raw, "st_ival")[want], _arr(raw, "st_dval", np.float64)[want]
    ref_row = sm.find(_combine(s_plane, s_ival))
    direct = st.slices(np.where((s_kind == 4)[:, None], _pairs(raw, "st_str")[want], np.array([[-1, 0]])))
    empty = st.add("")
    str_val = np.where(
        (s_kind == 6) & (s_ival != 0),
        _at(sm_name, ref_row),
        np.where(direct >= 0, direct, empty),
    )
    # as ``xplane_rules.int_stat``: outside [0, MAX_INT_STAT] (uint64 max reads as -1 here), NaN, inf: -1
    d_ok = np.isfinite(s_dval) & (s_dval >= 0) & (s_dval <= MAX_INT_STAT)
    d_int = np.where(d_ok, s_dval, -1).astype(np.int64)
    i_ok = (s_ival >= 0) & (s_ival <= MAX_INT_STAT)
    num_val = np.where(s_ival != 0, np.where(i_ok, s_ival, -1), d_int)
    value = np.where(s_key < len(STRING_KEYS), str_val, num_val)
    return _Stats(key=s_key, owner=_arr(raw, "st_owner")[want], value=value)


def _lines(st: _Strings, raw: dict[str, Any], plane_dev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per line: its label's id (display name, else name, else "") and its ``line_kind``."""
    empty = st.add("")
    name = st.slices(_pairs(raw, "ln_name"))
    dname = st.slices(_pairs(raw, "ln_dname"))
    label = np.where((dname >= 0) & (dname != empty), dname, np.where(name >= 0, name, empty))
    kinds = [line_kind(plane_dev[p] >= 0, st.values[label[i]]) for i, p in enumerate(_arr(raw, "ln_plane"))]
    return label, np.array(kinds or ["host"], dtype=object)


@dataclass(frozen=True)
class _Events:
    """Per event: its line and plane, its name's id, and its stats as (present, value) per key,
    both merged with its metadata's (``present``, ``val``) and its own only (``own_*``)."""

    line: np.ndarray
    plane: np.ndarray
    name: np.ndarray
    present: np.ndarray
    val: np.ndarray
    own_present: np.ndarray
    own_val: np.ndarray

    def stat(self, key: str) -> np.ndarray:
        """The merged value of ``key`` per event, -1 when absent."""
        k = _COL[key]
        return np.where(self.present[:, k], self.val[:, k], -1)


def _events(st: _Strings, raw: dict[str, Any], stats: _Stats) -> _Events:
    """Each event joined to its metadata by (plane, id): the name (the metadata's name, else its
    display name, else ""; ``<metadata N>`` without metadata) and the stats (the event's own
    override its metadata's)."""
    ev_line, ev_mid = _arr(raw, "ev_line"), _arr(raw, "ev_mid")
    n_events, n_em = ev_mid.size, _arr(raw, "em_id").size
    own_present, own_val = stats.by_owner(stats.owner, n_events, stats.owner >= 0)
    md_present, md_val = stats.by_owner(-1 - stats.owner, n_em, (stats.owner < 0) & (stats.owner > PLANE_OWNER))
    empty = st.add("")
    em_name = st.slices(_pairs(raw, "em_name"))
    em_dname = st.slices(_pairs(raw, "em_dname"))
    em_label = np.where((em_name >= 0) & (em_name != empty), em_name, np.where(em_dname >= 0, em_dname, empty))
    plane = _arr(raw, "ln_plane")[ev_line]
    meta = _Index(_combine(_arr(raw, "em_plane"), _arr(raw, "em_id"))).find(_combine(plane, ev_mid))
    has_meta = meta >= 0
    mi = np.clip(meta, 0, None)
    present = np.where(has_meta[:, None], md_present[mi] | own_present, own_present) if n_em else own_present
    val = np.where(own_present, own_val, md_val[mi] if n_em else -1)
    name = np.where(has_meta, em_label[mi] if n_em else empty, -1)
    for i in np.flatnonzero(name < 0):
        name[i] = st.add(f"<metadata {int(ev_mid[i])}>")
    return _Events(ev_line, plane, name, present, val, own_present, own_val)


def _scope_and_op_class(st: _Strings, ev: _Events) -> tuple[np.ndarray, np.ndarray]:
    """Per event: the scope (``tf_op`` when it is a name stack, else ``name``; "" is none) and the
    op class (``hlo_category``, else ``op_class_from_hlo`` of ``long_name``), as string ids."""
    tf_op, stack, long_name = ev.stat("tf_op"), ev.stat("name_stack"), ev.stat("long_name")
    empty = st.add("")
    good_tf = st.table(good_tf_op, bool, False)
    scope = np.where(good_tf[tf_op], tf_op, stack)
    scope = np.where(scope == empty, -1, scope)
    op_class = ev.stat("op_class")
    derived = np.full(len(st.values) + 1, -1, np.int64)
    for u in np.unique(long_name[long_name >= 0]):
        oc = op_class_from_hlo(st.values[u])
        if oc is not None:
            derived[u] = st.add(oc)
    no_class = (op_class < 0) | (op_class == empty)
    return scope, np.where(no_class & (long_name >= 0), derived[long_name], op_class)


@dataclass(frozen=True)
class _Roles:
    """Which rule of the mapping (``xplane.py``) each event falls under, and its plane's device."""

    host_step: np.ndarray  # a host event with a ``step_num`` stat
    host_op: np.ndarray  # a host event with an ``hlo_op`` and a ``device_ordinal`` (CPU backend op)
    host_other: np.ndarray  # any other host event
    steps_line: np.ndarray  # an event of a device's ``Steps`` line
    dev_line: np.ndarray  # an event of any other device line
    ops_line: np.ndarray  # ... that is a line of XLA ops
    device: np.ndarray  # the plane's device (or HOST_PLANE, SKIP_PLANE)


def _roles(st: _Strings, ev: _Events, plane_dev: np.ndarray, line_kinds: np.ndarray) -> _Roles:
    pdev = plane_dev[ev.plane]
    lk = line_kinds[ev.line] if ev.line.size else np.empty(0, object)
    is_host = (lk == "host") & (pdev == HOST_PLANE)
    host_step = is_host & ev.present[:, _COL["step_num"]]
    op = ev.stat("op")
    host_op = is_host & ~host_step & (op >= 0) & (op != st.add("")) & ev.present[:, _COL["device_ordinal"]]
    steps_line = (lk == "steps") & (pdev >= 0)
    dev_line = ~is_host & ~steps_line & (pdev >= 0)
    return _Roles(
        host_step, host_op, is_host & ~host_step & ~host_op, steps_line, dev_line, dev_line & (lk == "ops"), pdev
    )


def _kinds(st: _Strings, ev: _Events, r: _Roles, include_python: bool) -> tuple[np.ndarray, np.ndarray]:
    """(kind code, kept) per event; ``$``-prefixed Python frames are kept only when asked for."""
    code = schema.KIND_CODE
    lut_kernel = st.table(lambda v: code[kernel_kind(v)], np.int32, code[_K.KERNEL.value])
    lut_control = st.table(lambda v: bool(CONTROL.match(v)), bool, False)
    lut_dollar = st.table(lambda v: v.startswith("$"), bool, False)
    lut_runtime = st.table(lambda v: bool(RUNTIME.match(v)), bool, False)
    nm, op = ev.name, ev.stat("op")
    ann, user = code[_K.GPU_ANNOTATION.value], code[_K.USER_ANNOTATION.value]
    kind = np.full(nm.size, ann, dtype=np.int32)
    kind[r.host_step | r.steps_line] = user
    kind[r.host_op] = np.where(lut_control[op[r.host_op]], ann, lut_kernel[nm[r.host_op]])
    kind[r.host_other] = np.where(
        lut_dollar[nm[r.host_other]],
        code[_K.PYTHON_FUNCTION.value],
        np.where(lut_runtime[nm[r.host_other]], code[_K.RUNTIME.value], code[_K.CPU_OP.value]),
    )
    ops = r.ops_line
    kind[ops] = np.where(lut_control[op[ops]] & (op[ops] >= 0) & (op[ops] != st.add("")), ann, lut_kernel[nm[ops]])
    keep = (r.device != SKIP_PLANE) & ~(r.host_other & lut_dollar[nm] & (not include_python))
    return kind, keep


def _step_names(st: _Strings, ev: _Events, r: _Roles, scope: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(name, scope) with the step rows renamed ``XLAStep#<n>``: a host step by its ``step_num``
    (its own name becomes the scope), a ``Steps`` line event by its name when that is a number,
    else by its position in the line."""
    name, scope = ev.name.copy(), scope.copy()
    step_val = ev.val[:, _COL["step_num"]]
    for i in np.flatnonzero(r.host_step):
        scope[i] = name[i]
        name[i] = st.add(f"XLAStep#{int(step_val[i])}")
    if r.steps_line.any():
        n = name.size
        first_of_line = np.r_[0, np.flatnonzero(np.diff(ev.line)) + 1]
        start = np.zeros(n, np.int64)
        start[first_of_line] = first_of_line
        pos_in_line = np.arange(n) - np.maximum.accumulate(start)
        for i in np.flatnonzero(r.steps_line):
            text = st.values[name[i]]
            name[i] = st.add(f"XLAStep#{text}" if text.isdigit() else f"XLAStep#{int(pos_in_line[i])}")
    return name, scope


def _int_columns(raw: dict[str, Any], ev: _Events, r: _Roles) -> dict[str, np.ndarray]:
    """The integer columns per event (times: ``line.timestamp_ns + offset_ps // 1000``)."""
    line_id = _arr(raw, "ln_id")[ev.line]
    corr = _COL["correlation"]
    return {
        "pid": np.where(r.steps_line, 1 + r.device, 0),
        "tid": np.where(r.host_step | r.host_other, line_id, np.where(r.steps_line, -1 - line_id, -1)),
        "device": np.where(r.host_op, ev.val[:, _COL["device_ordinal"]], np.where(r.dev_line, r.device, -1)),
        "stream": np.where(r.host_op | r.dev_line, line_id, -1),
        "ts": (_arr(raw, "ln_ts")[ev.line] * 1000 + _arr(raw, "ev_off")) // 1000,
        "dur": _arr(raw, "ev_dur") // 1000,
        "correlation": np.where(ev.own_present[:, corr], ev.own_val[:, corr], -1),
        "flops": ev.stat("flops"),
        "bytes_accessed": ev.stat("bytes_accessed"),
    }


def columns(data: bytes, raw: dict[str, Any], include_python: bool) -> dict[str, Any]:
    """The reader columns (``columns.assemble_table``'s input) of the scanned file ``data``."""
    st = _Strings(data)
    pl_name = st.slices(_pairs(raw, "pl_name"))
    plane_dev = np.array([plane_device(st.values[i] if i >= 0 else "") for i in pl_name], dtype=np.int64)
    stats = _wanted_stats(st, raw)
    ln_label, line_kinds = _lines(st, raw, plane_dev)
    ev = _events(st, raw, stats)
    scope, op_class = _scope_and_op_class(st, ev)
    roles = _roles(st, ev, plane_dev, line_kinds)
    kind, keep = _kinds(st, ev, roles, include_python)
    name, scope = _step_names(st, ev, roles, scope)
    sel = np.flatnonzero(keep)
    dictionary = pa.array(st.values, pa.string())

    def strings(ids: np.ndarray, plain: bool = True) -> pa.Array:
        ids = ids[sel]
        arr = pa.DictionaryArray.from_arrays(
            pa.array(np.where(ids >= 0, ids, 0).astype(np.int32), mask=ids < 0), dictionary
        )
        return arr.cast(pa.string()) if plain else arr

    return {
        "kind": pa.DictionaryArray.from_arrays(pa.array(kind[sel]), pa.array(list(schema.KIND_CODE), pa.string())),
        "name": strings(name, plain=False),
        "cat": strings(ln_label[ev.line], plain=False),
        **{k: v[sel] for k, v in _int_columns(raw, ev, roles).items()},
        "op": strings(ev.stat("op")),
        "module": strings(ev.stat("module")),
        "scope": strings(scope),
        "op_class": strings(op_class),
    }
