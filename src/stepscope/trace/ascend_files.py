"""Where an Ascend profile's files are: a torch_npu / MindSpore profiling directory per rank.

Layout (Ascend PyTorch Profiler documentation; msprof-analyze ``cluster_data_preprocess``): each
rank writes ``{worker}_{timestamp}_ascend_pt`` (MindSpore: ``_ascend_ms``) holding
``profiler_info_{rank}.json`` (``profiler_info.json`` on a single card) and the parsed output
``ASCEND_PROFILER_OUTPUT/`` (``trace_view.json``, ``kernel_details.csv``, ...). Several such
directories side by side are several ranks. The rank is the number in ``profiler_info_{rank}.json``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import msgspec

from ..errors import InputError

OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
TIMELINE = "trace_view.json"
_PROFILE_DIR = re.compile(r"_ascend_(pt|ms)$")
_RANK_FILE = re.compile(r"^profiler_info_(\d{1,9})\.json$")


def ascend_timelines(d: Path) -> list[Path]:
    """The ``trace_view.json`` files of ``d`` when it is an Ascend profiling directory, its output
    folder, or a folder of profiling directories (one per rank); [] when it is none of these.
    A profiling directory without a timeline is refused with what to do."""
    if d.name == OUTPUT_DIR:
        return [d / TIMELINE] if (d / TIMELINE).is_file() else _refuse(d.parent)
    if _PROFILE_DIR.search(d.name) or (d / OUTPUT_DIR).is_dir():
        return [_timeline_of(d)]
    subdirs = sorted(q for q in d.iterdir() if q.is_dir() and _PROFILE_DIR.search(q.name))
    return [_timeline_of(q) for q in subdirs]


def _timeline_of(profile_dir: Path) -> Path:
    tv = profile_dir / OUTPUT_DIR / TIMELINE
    return tv if tv.is_file() else _refuse(profile_dir)


def _refuse(profile_dir: Path) -> Any:
    out = profile_dir / OUTPUT_DIR
    if out.is_dir() and any(q.suffix == ".db" for q in out.iterdir()):
        raise InputError(
            "an Ascend profile exported as a database only (export_type=Db): stepscope reads its text "
            f"export ({OUTPUT_DIR}/{TIMELINE})",
            path=str(profile_dir),
            fix="profile with experimental_config export_type=[torch_npu.profiler.ExportType.Text]",
        )
    raise InputError(
        f"an Ascend profiling directory without {OUTPUT_DIR}/{TIMELINE} (not parsed yet, or parsed elsewhere)",
        path=str(profile_dir),
        fix=f"parse it first: python -c \"from torch_npu.profiler.profiler import analyse; analyse('{profile_dir}')\"",
    )


def file_beside(timeline: str, name: str, max_bytes: int, what: str) -> tuple[Path | None, str | None]:
    """The file ``name`` of a timeline's output folder: (its path, None); (None, None) when there
    is none; (None, a warning that ``what`` is left out) when it is too large or unreadable."""
    p = profile_dir_of(Path(timeline)) / OUTPUT_DIR / name
    if not p.is_file():
        return None, None
    try:
        size = p.stat().st_size
    except OSError as exc:
        return None, unreadable(p, exc, what)
    if size > max_bytes:
        return None, f"{p.name} is over {max_bytes >> 20:,} MB; {what} left out"
    return p, None


def unreadable(p: Path, exc: BaseException, what: str) -> str:
    return f"{p.name} cannot be read ({exc.__class__.__name__}); {what} left out"


def read_json_beside(timeline: str, name: str, max_bytes: int, what: str) -> tuple[Any, str | None]:
    """The JSON document ``name`` of a timeline's output folder (``file_beside``), decoded."""
    p, warning = file_beside(timeline, name, max_bytes, what)
    if p is None:
        return None, warning
    try:
        return msgspec.json.decode(p.read_bytes()), None
    except (OSError, msgspec.DecodeError, RecursionError) as exc:
        return None, unreadable(p, exc, what)


def profile_dir_of(timeline: Path) -> Path:
    """The profiling directory a timeline belongs to (its own folder when not in the usual layout)."""
    here = timeline.parent
    return here.parent if here.name == OUTPUT_DIR else here


def rank_header(timeline: str) -> dict[str, Any]:
    """``distributedInfo.rank`` from the one ``profiler_info_{rank}.json`` of the timeline's
    profiling directory; nothing when there is none (or several: the directory is ambiguous)."""
    d = profile_dir_of(Path(timeline))
    try:
        ranks = sorted({int(m.group(1)) for q in d.iterdir() if (m := _RANK_FILE.match(q.name))})
    except OSError:
        return {}
    return {"distributedInfo": {"rank": ranks[0]}} if len(ranks) == 1 else {}
