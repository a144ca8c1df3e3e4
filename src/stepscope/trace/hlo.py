"""HLO text reader (``compiled.as_text()``, ``--xla_dump_to`` ``*.txt``): modules, computations and
instructions with their shapes, layouts, operands and attributes. Costs are in
``analysis/xla/hlo_cost.py``.

Grammar handled (one instruction per line)::

    [ROOT] %name = SHAPE opcode(OPERANDS), attr=value, attr={...}, metadata={op_name="..." ...}

SHAPE is ``dtype[d0,d1]{layout}`` or a tuple ``(SHAPE, SHAPE, ...)``; a layout is
``{minor_to_major[:T(a,b)(c,d)...][S(n)]}`` (tiles and memory space, as printed for TPU).
OPERANDS are ``%x`` or ``SHAPE %x`` (newer printers repeat the operand shapes). Computations
start with ``[ENTRY] %name (params) -> shape {`` and end with ``}``. Lines the grammar does not
know (file/stack tables of newer dumps, comments) are skipped.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError

DTYPE_BYTES = {
    "pred": 1,
    "s4": 0.5,
    "u4": 0.5,
    "s8": 1,
    "u8": 1,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
    "f8e4m3": 1,
    "f8e5m2fnuz": 1,
    "f8e4m3fnuz": 1,
    "f8e4m3b11fnuz": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "c64": 8,
    "c128": 16,
    "token": 0,
}


@dataclass(frozen=True)
class Shape:
    """One array shape; ``tiles`` and ``memory_space`` only when the layout prints them."""

    dtype: str
    dims: tuple[int, ...]
    minor_to_major: tuple[int, ...] | None = None
    tiles: tuple[tuple[int, ...], ...] = ()
    memory_space: int | None = None

    @property
    def elements(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def bytes(self) -> float:
        return self.elements * DTYPE_BYTES.get(self.dtype, 4)

    def __str__(self) -> str:
        return f"{self.dtype}[{','.join(map(str, self.dims))}]"


@dataclass(frozen=True)
class Instruction:
    name: str
    opcode: str
    shapes: tuple[Shape, ...]  # one per output (tuple outputs have several)
    operands: tuple[str, ...]
    operand_shapes: tuple[Shape | None, ...]  # printed inline, else filled from the computation
    attrs: dict[str, str] = field(default_factory=dict, hash=False)
    is_root: bool = False
    computation: str = ""

    @property
    def op_name(self) -> str | None:
        m = re.search(r'op_name="((?:[^"\\]|\\.)*)"', self.attrs.get("metadata", ""))
        return m.group(1) if m else None

    @property
    def source(self) -> str | None:
        md = self.attrs.get("metadata", "")
        f, ln = re.search(r'source_file="([^"]*)"', md), re.search(r"source_line=(\d+)", md)
        return f"{f.group(1)}:{ln.group(1) if ln else '?'}" if f else None


@dataclass(frozen=True)
class Computation:
    name: str
    instructions: tuple[Instruction, ...]
    is_entry: bool


@dataclass(frozen=True)
class HloModule:
    name: str
    computations: dict[str, Computation]
    attrs: str = ""
    truncated: bool = False  # the text ends inside a computation (what was read is kept)

    @property
    def entry(self) -> Computation | None:
        return next((c for c in self.computations.values() if c.is_entry), None)

    def instructions(self) -> dict[str, Instruction]:
        return {i.name: i for c in self.computations.values() for i in c.instructions}


_ARRAY = re.compile(r"([a-z][a-z0-9]*)\[([0-9,\s]*)\](\{[^{}]*\})?")
_COMP_HEAD = re.compile(r"^\s*(ENTRY\s+)?%?([\w.\-]+)\s*(\(.*\))?\s*->\s*.*\{\s*$")
_INSTR = re.compile(r"^\s*(ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*)$")


def _depths(s: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, char, bracket depth after it) for every char from ``start`` outside quoted
    strings (backslash escapes inside quotes honoured); quoted text is skipped."""
    depth, quote, i = 0, False, start
    while i < len(s):
        ch = s[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = False
        elif ch == '"':
            quote = True
        else:
            if ch in "([{":
                depth += 1
            elif ch in ")]}":
                depth -= 1
            yield i, ch, depth
        i += 1


def _split_top(s: str, sep: str = ",") -> list[str]:
    """Split at ``sep`` outside (), [], {} and quotes."""
    cuts = [i for i, ch, depth in _depths(s) if ch == sep and depth == 0]
    parts = [s[a + 1 : b].strip() for a, b in zip([-1, *cuts], [*cuts, len(s)])]
    return parts if parts[-1] else parts[:-1]  # a trailing separator leaves no empty last item


def _matching(s: str, start: int) -> int:
    """Index just past the bracket closing the one at ``start``."""
    return next((i + 1 for i, ch, depth in _depths(s, start) if ch in ")]}" and depth == 0), -1)


def parse_layout(text: str | None) -> tuple[tuple[int, ...] | None, tuple[tuple[int, ...], ...], int | None]:
    """``{1,0:T(8,128)(2,1)S(1)}`` -> ((1, 0), ((8, 128), (2, 1)), 1)."""
    if not text:
        return None, (), None
    body = text.strip("{}")
    m2m_text, _, rest = body.partition(":")
    try:
        m2m = tuple(int(x) for x in m2m_text.split(",") if x.strip())
    except ValueError:
        m2m = None
    tm = re.search(r"T((?:\([^)]*\))+)", rest)
    tiles = (
        tuple(
            tuple(int(v) if v.strip() not in ("*", "") else 1 for v in g.split(","))
            for g in re.findall(r"\(([^)]*)\)", tm.group(1))
        )
        if tm
        else ()
    )
    ms = re.search(r"S\((\d+)\)", rest)
    return m2m, tiles, int(ms.group(1)) if ms else None


#: no real array has more elements: a shape beyond it is damaged text and is left out
MAX_ELEMENTS = 2**62


def parse_shapes(text: str) -> tuple[Shape, ...]:
    """The array shapes in ``text``; one with a dimension of more than 18 digits or more than
    ``MAX_ELEMENTS`` elements is left out (damaged or hostile text)."""
    out = []
    for m in _ARRAY.finditer(text):
        raw = [x for x in m.group(2).replace(" ", "").split(",") if x]
        if any(len(x) > 18 for x in raw):
            continue
        dims = tuple(int(x) for x in raw)
        if math.prod(dims) > MAX_ELEMENTS:
            continue
        m2m, tiles, ms = parse_layout(m.group(3))
        out.append(Shape(m.group(1), dims, m2m, tiles, ms))
    return tuple(out)


def _parse_instruction(line: str, comp: str) -> Instruction | None:
    m = _INSTR.match(line)
    if not m:
        return None
    is_root, name, rest = bool(m.group(1)), m.group(2), m.group(3).strip()
    # the output shape: a tuple "( ... )" or one array token
    if rest.startswith("("):
        end = _matching(rest, 0)
        if end < 0:
            return None
        shape_text, rest = rest[:end], rest[end:].strip()
    else:
        sm = re.match(r"([a-z][a-z0-9]*\[[^\]]*\](\{[^{}]*\})?|token\[\]|[a-z][a-z0-9]*\[\])\s*", rest)
        if not sm:
            return None
        shape_text, rest = sm.group(1), rest[sm.end() :]
    om = re.match(r"([\w\-]+)\(", rest)
    if not om:
        return None
    opcode = om.group(1)
    close = _matching(rest, om.end() - 1)
    if close < 0:
        return None
    operand_text, attr_text = rest[om.end() : close - 1], rest[close:].lstrip(", ")
    operands, op_shapes = [], []
    for tok in _split_top(operand_text):
        nm = re.search(r"%?([\w.\-]+)\s*$", tok)
        if not nm:
            continue
        operands.append(nm.group(1))
        shp = parse_shapes(tok[: nm.start()]) if "[" in tok[: nm.start()] else ()
        op_shapes.append(shp[0] if len(shp) == 1 else None)
    attrs: dict[str, str] = {}
    for a in _split_top(attr_text):
        k, eq, v = a.partition("=")
        if eq:
            attrs[k.strip()] = v.strip()
    return Instruction(name, opcode, parse_shapes(shape_text), tuple(operands), tuple(op_shapes), attrs, is_root, comp)


def parse_hlo_text(text: str, path: str = "HLO") -> HloModule:
    """Parse one module. Raises :class:`InputError` when the text has no ``HloModule`` header and
    no instruction."""
    name, mattrs = "", ""
    comps: dict[str, Computation] = {}
    cur_name: str | None = None
    cur_entry = False
    cur: list[Instruction] = []
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("HloModule "):
            head = s[len("HloModule ") :]
            name, _, mattrs = head.partition(",")
            name = name.strip()
            continue
        if cur_name is None:
            m = _COMP_HEAD.match(line)
            if m and "=" not in line.split("(")[0]:
                cur_name, cur_entry, cur = m.group(2), bool(m.group(1)), []
            continue
        if s == "}":
            comps[cur_name] = Computation(cur_name, _fill_operand_shapes(cur), cur_entry)
            cur_name = None
            continue
        ins = _parse_instruction(line, cur_name)
        if ins is not None:
            cur.append(ins)
    truncated = cur_name is not None
    if cur_name is not None and cur:  # text cut inside a computation: keep what was read
        comps[cur_name] = Computation(cur_name, _fill_operand_shapes(cur), cur_entry)
    if not comps:
        raise InputError(
            "no HLO computations found", path=path, fix="pass HLO text (compiled.as_text() or an XLA dump *.txt)"
        )
    return HloModule(name or Path(path).stem, comps, mattrs.strip(), truncated)


def _fill_operand_shapes(instrs: list[Instruction]) -> tuple[Instruction, ...]:
    by_name = {i.name: i for i in instrs}
    out = []
    for i in instrs:
        if any(s is None for s in i.operand_shapes) or len(i.operand_shapes) < len(i.operands):
            shapes = []
            for k, op in enumerate(i.operands):
                given = i.operand_shapes[k] if k < len(i.operand_shapes) else None
                src = by_name.get(op)
                shapes.append(given or (src.shapes[0] if src is not None and len(src.shapes) == 1 else None))
            i = Instruction(i.name, i.opcode, i.shapes, i.operands, tuple(shapes), i.attrs, i.is_root, i.computation)
        out.append(i)
    return tuple(out)


def read_hlo(path: str | Path) -> list[HloModule]:
    """All modules of an HLO text file (a dump may hold several, each after ``HloModule``)."""
    p = Path(path)
    try:
        text = p.read_bytes().decode("utf-8", "replace")
    except OSError as exc:
        raise InputError(f"cannot read ({exc.strerror})", path=str(p), fix="check the path") from None
    parts = re.split(r"(?m)^(?=HloModule )", text)
    mods = [parse_hlo_text(part, str(p)) for part in parts if part.strip() and "HloModule " in part[:20]]
    if not mods:
        mods = [parse_hlo_text(text, str(p))]
    return mods
