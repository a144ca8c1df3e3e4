"""The process names and labels (and thread names) of a Chrome trace-event file (``ph: "M"``
rows), which the event readers drop: a second, cheap pass that looks only at the metadata objects.

The file is read in blocks; each occurrence of ``"process_name"``, ``"process_labels"`` or
``"thread_name"`` is parsed as the JSON object around it (found by trying the nearest ``{`` before it, then the one before
that: the ``args`` object may come first). Everything else is skipped at ``bytes.find`` speed.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .jsonstream import is_gzip

_NEEDLES = (b'"process_name"', b'"process_labels"', b'"thread_name"')
_BLOCK = 1 << 22
_OVERLAP = 4096  # a metadata object is far shorter: one cut by a block boundary is whole in the next
_BACK = 1024  # how far before its name key an object's opening brace may be
_DECODER = json.JSONDecoder()


@dataclass(frozen=True, kw_only=True)
class ProcessMeta:
    """What the metadata rows say about one ``pid``: its name and its labels (None when unsaid),
    and its threads' names by ``tid``."""

    name: str | None = None
    labels: str | None = None
    threads: dict[int, str] = field(default_factory=dict)


def process_metadata(path: str | Path) -> dict[int, ProcessMeta]:
    """``pid`` -> :class:`ProcessMeta` for every process the file names. A damaged object is
    skipped; an unreadable or truncated file gives what was read before the damage."""
    names: dict[int, str] = {}
    labels: dict[int, str] = {}
    threads: dict[int, dict[int, str]] = {}
    for buf in overlapping_blocks(path, _OVERLAP, _BLOCK):
        _scan(buf, names, labels, threads)
    return {
        pid: ProcessMeta(name=names.get(pid), labels=labels.get(pid), threads=threads.get(pid, {}))
        for pid in names.keys() | labels.keys() | threads.keys()
    }


def _scan(buf: bytes, names: dict[int, str], labels: dict[int, str], threads: dict[int, dict[int, str]]) -> None:
    for needle in _NEEDLES:
        pos = buf.find(needle)
        while pos >= 0:
            obj = object_around(buf, pos, "M")
            if obj is not None:
                _record(obj, names, labels, threads)
            pos = buf.find(needle, pos + len(needle))


def object_around(buf: bytes, pos: int, ph: str, back: int = _BACK) -> dict[str, Any] | None:
    """The event object of phase ``ph`` holding the key at ``pos`` (its own brace is the nearest
    ``{`` before the key, or one or two further back when an ``args`` object opens between), or
    None; the object is read from at most ``_OVERLAP`` bytes."""
    start = pos
    for _ in range(3):
        start = buf.rfind(b"{", max(0, pos - back), start)
        if start < 0:
            return None
        text = buf[start : start + _OVERLAP].decode("utf-8", "replace")
        try:
            obj, _ = _DECODER.raw_decode(text)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("ph") == ph:
            return obj
    return None


def _int(v: object) -> int | None:
    if isinstance(v, str) and v.lstrip("-").isdigit() and len(v) < 20:
        return int(v)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _record(
    obj: dict[str, object], names: dict[int, str], labels: dict[int, str], threads: dict[int, dict[int, str]]
) -> None:
    pid, tid, args = _int(obj.get("pid")), _int(obj.get("tid")), obj.get("args")
    if pid is None or not isinstance(args, dict):
        return
    if obj.get("name") == "thread_name" and tid is not None and isinstance(args.get("name"), str):
        threads.setdefault(pid, {}).setdefault(tid, args["name"][:256])
    if obj.get("name") == "process_name" and isinstance(args.get("name"), str):
        names.setdefault(pid, args["name"][:256])
    elif obj.get("name") == "process_labels" and isinstance(args.get("labels"), str):
        labels.setdefault(pid, args["labels"][:256])


def overlapping_blocks(path: str | Path, keep: int, block: int = 1 << 22) -> Iterator[bytes]:
    """The (possibly gzipped) file's bytes in blocks, each beginning with the last ``keep`` bytes of
    the one before, so that nothing shorter than ``keep`` is cut by a boundary. A truncated or
    unreadable file ends the blocks: what was read has been given."""
    tail = b""
    try:
        with gzip.open(path, "rb") if is_gzip(Path(path)) else open(path, "rb") as fh:
            while chunk := fh.read(block):
                buf = tail + chunk
                yield buf
                tail = buf[-keep:]
    except (OSError, EOFError, zlib.error):
        return
