"""Hostile nsys-jax archives: corrupt deflate data, the encrypted flag, a compression method
zipfile lacks, a member that inflates to hundreds of MB. One line each, and no member is read
past the inflation limits."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from stepscope.cli import main

ROOT = Path(__file__).resolve().parents[2]
ARCHIVE = ROOT / "tests/fixtures/traces/JAX-Toolbox/.github/workflows/nsys-jax/test_data/pax_fsdp4_4proc_proc0.zip"
MEMBER = "nvtx_gpu_proj_trace/trace.parquet"


def _deflated(path: Path) -> bytearray:
    with zipfile.ZipFile(ARCHIVE) as z:
        payload = z.read(MEMBER)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as w:
        w.writestr(MEMBER, payload)
    return bytearray(path.read_bytes())


def damaged(path: Path, how: str) -> Path:
    """The real archive's member, deflated, then damaged ``how``."""
    data = _deflated(path)
    central = data.rfind(b"PK\x01\x02")
    if how == "corrupt deflate":
        start = 30 + len(MEMBER) + 50
        data[start : start + 200] = bytes(b ^ 0x55 for b in data[start : start + 200])
    elif how == "encrypted":
        data[6] |= 1  # general-purpose flag bit 0, local header and central directory
        data[central + 8] |= 1
    elif how == "method 99":
        data[8] = data[central + 10] = 99
    elif how == "bomb":
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as w, w.open(MEMBER, "w", force_zip64=True) as f:
            for _ in range(100):
                f.write(b"\0" * (1 << 20))
        return path
    path.write_bytes(bytes(data))
    return path


@pytest.mark.parametrize("how", ["corrupt deflate", "encrypted", "method 99", "bomb"])
def test_a_damaged_archive_is_one_line(tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]) -> None:
    p = damaged(tmp_path / "t.zip", how)
    assert main(["analyze", str(p), "-q", "--json", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"stepscope: error: {p}:")
    if how == "bomb":
        assert "inflates past" in err[0]


def test_the_deflated_archive_itself_reads(tmp_path: Path) -> None:
    p = tmp_path / "t.zip"
    _deflated(p)
    assert main(["analyze", str(p), "-q", "--json", str(tmp_path / "o.json")]) == 0
