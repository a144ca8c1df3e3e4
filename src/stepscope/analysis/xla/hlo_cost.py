"""FLOPs, bytes, tiling padding and global shapes of HLO instructions (see ``trace/hlo.py``).

FLOPs (one execution, multiply-add = 2):
- ``dot``: 2 x output elements x product of the lhs contracting dims;
- ``convolution``: 2 x output elements x (kernel elements / output features) (kernel dims from
  ``dim_labels``, e.g. ``b01f_01io->b01f``; the ``o`` dim is the output feature; for grouped
  convolutions the kernel's ``i`` dim is already input features / groups);
- ``fusion`` / ``call``: the sum over the called computation; ``while``: body x the
  ``known_trip_count`` when the backend config gives it (else x 1);
- elementwise and other compute ops: 1 per output element; ``reduce``: 1 per input element;
  data movement (parameter, constant, tuple, get-tuple-element, bitcast, copy, transpose, reshape,
  broadcast, slice, concatenate, pad, gather, scatter, collectives...): 0.
Bytes accessed: operand bytes + output bytes for top-level ops; a fusion counts only its own
operands and outputs (what stays in registers inside does not touch memory); bitcast, tuple,
get-tuple-element, parameter and constant: 0.

Tiling padding (TPU layouts): a layout ``{1,0:T(8,128)(2,1)}`` pads the two minor-most dims (in
minor_to_major order) up to the first tile (8 x 128); later tiles subdivide that tile and add no
padding here. ``padding_waste = 1 - logical bytes / padded bytes``.

Global shape: for ``sharding={devices=[a,b,...]...}`` each dim is multiplied by its tile count
(``last_tile_dim_replicate`` / ``last_tile_dims={...}`` tiles are replication, not dims); for
``all-gather`` the output is already global; ``reduce-scatter`` multiplies its ``dimensions`` by
the replica-group size. Replica groups: ``{{0,1},{2,3}}`` or the iota form ``[G,S]<=[N]``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...trace.hlo import Computation, HloModule, Instruction, Shape

_NO_FLOPS = {
    "parameter",
    "constant",
    "tuple",
    "get-tuple-element",
    "bitcast",
    "copy",
    "copy-start",
    "copy-done",
    "transpose",
    "reshape",
    "broadcast",
    "slice",
    "dynamic-slice",
    "dynamic-update-slice",
    "concatenate",
    "pad",
    "gather",
    "scatter",
    "iota",
    "all-reduce",
    "all-gather",
    "reduce-scatter",
    "all-to-all",
    "collective-permute",
    "all-reduce-start",
    "all-reduce-done",
    "all-gather-start",
    "all-gather-done",
    "collective-permute-start",
    "collective-permute-done",
    "send",
    "recv",
    "send-done",
    "recv-done",
    "infeed",
    "outfeed",
    "after-all",
    "partition-id",
    "replica-id",
    "custom-call",
    "rng-get-and-update-state",
    "opt-barrier",
    "bitcast-convert",
    "async-start",
    "async-done",
    "async-update",
    "domain",
    "add-dependency",
    "get-dimension-size",
}
_NO_BYTES = {
    "parameter",
    "constant",
    "tuple",
    "get-tuple-element",
    "bitcast",
    "after-all",
    "partition-id",
    "replica-id",
    "opt-barrier",
    "domain",
    "add-dependency",
}
_CALLS = {"fusion", "call", "async-start"}


@dataclass(frozen=True)
class InstrCost:
    name: str
    opcode: str
    flops: float
    bytes_accessed: float
    padding_waste: float  # 0-1, from the output's tiled layout
    global_shape: str | None
    op_class: str  # XLA-style class: "convolution fusion", "loop fusion", "data formatting", opcode...


def _ints(text: str | None) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"-?\d+", text or ""))


def _dot_flops(ins: Instruction) -> float:
    lhs = ins.operand_shapes[0] if ins.operand_shapes else None
    if lhs is None or not ins.shapes:
        return 0.0
    k = 1
    for d in _ints(ins.attrs.get("lhs_contracting_dims")):
        if 0 <= d < len(lhs.dims):
            k *= lhs.dims[d]
    return 2.0 * ins.shapes[0].elements * k


def _conv_flops(ins: Instruction) -> float:
    if len(ins.operand_shapes) < 2 or ins.operand_shapes[1] is None or not ins.shapes:
        return 0.0
    kernel = ins.operand_shapes[1]
    labels = ins.attrs.get("dim_labels", "")
    m = re.match(r"[^_]*_([^-]*)->", labels)
    kl = m.group(1) if m else ""
    per_out = kernel.elements
    if len(kl) == len(kernel.dims) and "o" in kl:
        per_out //= max(kernel.dims[kl.index("o")], 1)
    # a grouped convolution's kernel already has in_features / groups as its "i" dim
    return 2.0 * ins.shapes[0].elements * per_out


def _trip_count(ins: Instruction) -> int:
    cfg = ins.attrs.get("backend_config", "")
    m = re.search(r'"known_trip_count"\s*:\s*\{\s*"n"\s*:\s*"?(\d+)', cfg)
    return int(m.group(1)) if m else 1


def padding_waste(shape: Shape) -> float:
    if not shape.tiles or not shape.dims or shape.minor_to_major is None:
        return 0.0
    tile = shape.tiles[0]
    order = list(shape.minor_to_major)  # minor first
    padded = list(shape.dims)
    for j, t in enumerate(reversed(tile)):  # last tile entry applies to the minor-most dim
        if j < len(order) and t > 1:
            d = order[j]
            padded[d] = -(-padded[d] // t) * t
    total = 1
    for d in padded:
        total *= d
    return 1.0 - shape.elements / total if total else 0.0


def group_size(replica_groups: str | None) -> int | None:
    if not replica_groups:
        return None
    m = re.match(r"\s*\[(\d+),(\d+)\]<=", replica_groups)
    if m:
        return int(m.group(2))
    first = re.search(r"\{([0-9,\s]+)\}", replica_groups)
    return len(_ints(first.group(1))) if first else None


def global_shape(ins: Instruction) -> str | None:
    if not ins.shapes or len(ins.shapes) != 1:
        return None
    s = ins.shapes[0]
    sharding = ins.attrs.get("sharding", "")
    m = re.search(r"devices=\[([0-9,]+)\]", sharding)
    if m:
        tiles = _ints(m.group(1))
        ltd = re.search(r"last_tile_dims=\{([^}]*)\}", sharding)
        n_rep = len(_ints(ltd.group(1))) if ltd else 0
        if "last_tile_dim_replicate" in sharding:
            n_rep = max(n_rep, 1)
        shard = tiles[: len(tiles) - n_rep] if n_rep else tiles
        if len(shard) == len(s.dims):
            return str(Shape(s.dtype, tuple(d * t for d, t in zip(s.dims, shard))))
        return str(s)
    if ins.opcode in ("reduce-scatter", "reduce-scatter-start"):
        g = group_size(ins.attrs.get("replica_groups")) or 1
        dims = list(s.dims)
        for d in _ints(ins.attrs.get("dimensions")):
            if 0 <= d < len(dims):
                dims[d] *= g
        return str(Shape(s.dtype, tuple(dims)))
    return str(s)


class CostModel:
    """Costs of every instruction of a module, computations summed once (memoized)."""

    def __init__(self, module: HloModule) -> None:
        self.module = module
        self._comp_flops: dict[str, float] = {}
        self._open: set[str] = set()  # computations being summed: a call back into one counts 0

    def computation_flops(self, name: str) -> float:
        """FLOPs of one execution of computation ``name``. The call graph is walked with an explicit
        stack (callees first), so a chain of thousands of nested calls costs no Python recursion."""
        name = name.lstrip("%")
        stack = [name]
        while stack:
            cur = stack[-1]
            if cur in self._comp_flops:
                stack.pop()
                continue
            comp = self.module.computations.get(cur)
            todo = [c for c in self._callees(comp) if c not in self._comp_flops and c not in self._open]
            if todo and cur not in self._open:
                self._open.add(cur)
                stack.extend(todo)
                continue
            self._comp_flops[cur] = sum(self.flops(i) for i in comp.instructions) if comp else 0.0
            self._open.discard(cur)
            stack.pop()
        return self._comp_flops[name]

    @staticmethod
    def _callees(comp: Computation | None) -> list[str]:
        if comp is None:
            return []
        out = []
        for ins in comp.instructions:
            for key in ("calls", "to_apply", "body"):
                if ins.attrs.get(key):
                    out.append(ins.attrs[key].lstrip("%"))
            if ins.opcode == "conditional":
                out += re.findall(r"%?([\w.\-]+)", ins.attrs.get("branch_computations", ""))
        return out

    def _called(self, name: str) -> float:
        """A callee's FLOPs; 0 for one still being summed (a cycle, which real HLO never has)."""
        return 0.0 if name.lstrip("%") in self._open else self.computation_flops(name)

    def flops(self, ins: Instruction) -> float:
        op = ins.opcode
        if op == "dot":
            return _dot_flops(ins)
        if op == "convolution":
            return _conv_flops(ins)
        if op in _CALLS:
            callee = ins.attrs.get("calls") or ins.attrs.get("to_apply")
            return self._called(callee) if callee else 0.0
        if op == "while":
            body = ins.attrs.get("body")
            return self._called(body) * _trip_count(ins) if body else 0.0
        if op == "conditional":
            branches = re.findall(r"%?([\w.\-]+)", ins.attrs.get("branch_computations", ""))
            return max((self._called(b) for b in branches), default=0.0)
        if op in _NO_FLOPS:
            return 0.0
        if op in ("reduce", "reduce-window"):
            return float(sum(s.elements for s in ins.operand_shapes[: max(len(ins.operand_shapes) // 2, 1)] if s))
        return float(sum(s.elements for s in ins.shapes))

    def bytes_accessed(self, ins: Instruction) -> float:
        if ins.opcode in _NO_BYTES:
            return 0.0
        if ins.opcode == "while":
            return 0.0  # the body's own ops are profiled
        return float(sum(s.bytes for s in ins.operand_shapes if s) + sum(s.bytes for s in ins.shapes))

    def op_class(self, ins: Instruction) -> str:
        """XLA-profiler-like class: fusions by what they contain and their kind."""
        if ins.opcode != "fusion":
            return ins.opcode
        callee = self.module.computations.get((ins.attrs.get("calls") or "").lstrip("%"))
        kind = ins.attrs.get("kind", "")
        ops = {i.opcode for i in callee.instructions} if callee else set()
        if ops & {"dot", "convolution"}:
            return f"convolution fusion:{kind}" if kind else "convolution fusion"
        if "custom-call" in ops:
            return f"custom-call fusion:{kind}"
        moving = {
            "parameter",
            "bitcast",
            "copy",
            "transpose",
            "reshape",
            "slice",
            "dynamic-slice",
            "dynamic-update-slice",
            "concatenate",
            "pad",
            "broadcast",
            "tuple",
            "get-tuple-element",
            "gather",
            "scatter",
        }
        if ops and ops <= moving:
            return f"data formatting:{kind}"
        return f"fusion:{kind}" if kind else "fusion"

    def cost(self, ins: Instruction) -> InstrCost:
        waste = max((padding_waste(s) for s in ins.shapes), default=0.0)
        return InstrCost(
            ins.name,
            ins.opcode,
            self.flops(ins),
            self.bytes_accessed(ins),
            waste,
            global_shape(ins),
            self.op_class(ins),
        )
