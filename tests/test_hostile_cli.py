"""The command line on hostile surroundings: a closed standard output, outputs that collide or
cannot be made, URLs whose protocol is not installed, a Dask address that is not one. Each is one
error line and exit 2, never a traceback."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from stepscope.cli import main

ROOT = Path(__file__).resolve().parents[1]
A = str(ROOT / "examples" / "traces" / "a100_nccl_rank0.json.gz")


def _one_error(rc: int, err: str) -> str:
    lines = err.strip().splitlines()
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("stepscope: error:"), (rc, lines[-3:])
    return lines[0]


def test_a_closed_standard_output_is_one_line() -> None:
    code = f"import sys; from stepscope.cli import main; sys.exit(main(['analyze', {A!r}, '--json', '-', '-q']))"
    p = subprocess.run(
        [sys.executable, "-c", code],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        close_fds=True,
        preexec_fn=lambda: os.close(1),
    )  # noqa: PLW1509 - the child starts with fd 1 closed
    assert "standard output is closed" in _one_error(p.returncode, p.stderr)


def test_convert_refuses_two_inputs_for_one_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = tmp_path / "a" / "rank0.json.gz", tmp_path / "b" / "rank0.json.gz"
    first.write_bytes(Path(A).read_bytes())
    second.write_bytes(Path(A).read_bytes())
    rc = main(["convert", str(first), str(second), "-o", str(tmp_path / "out")])
    assert "would both be written to" in _one_error(rc, capsys.readouterr().err)
    assert not list((tmp_path / "out").glob("*.parquet"))  # nothing written


def test_convert_onto_a_file_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "afile"
    f.write_text("x")
    rc = main(["convert", A, "-o", str(f)])
    assert "cannot make the output directory" in _one_error(rc, capsys.readouterr().err)


@pytest.mark.parametrize("url", ["nosuch://bucket/rank0.json", "gs://bucket/rank0.json"])
def test_a_url_whose_protocol_is_missing_is_one_line(url: str, capsys: pytest.CaptureFixture[str]) -> None:
    if url.startswith("gs://") and importlib.util.find_spec("gcsfs") is not None:
        pytest.skip("gcsfs installed")
    rc = main(["analyze", url, "-q", "--json", "-"])
    _one_error(rc, capsys.readouterr().err)


def test_a_dask_address_that_is_not_one_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["analyze", A, A, "--dask", "garbage", "-q", "--json", "-"])
    assert "Dask scheduler" in _one_error(rc, capsys.readouterr().err)


def test_a_server_that_is_not_a_dask_scheduler_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """It accepts the connection and answers a frame header claiming 2^61 bytes."""
    import socket
    import threading

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]

    def answer() -> None:
        while True:
            try:
                c, _ = srv.accept()
                c.sendall((8).to_bytes(8, "little") + (2**61).to_bytes(8, "little") + b"x" * 64)
            except OSError:
                return

    threading.Thread(target=answer, daemon=True).start()
    try:
        rc = main(["analyze", A, A, "--dask", f"tcp://127.0.0.1:{port}", "-q", "--json", "-"])
    finally:
        srv.close()
    assert "Dask scheduler" in _one_error(rc, capsys.readouterr().err)


def test_a_trace_that_cannot_be_opened_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No permission to read (simulated: the tests may run as root, whom file modes do not stop)."""
    import builtins

    from stepscope.trace import jsonstream

    p = tmp_path / "t.json.gz"
    p.write_bytes(Path(A).read_bytes())

    def refuse(file: object, *args: object, **kw: object) -> object:
        if str(file) == str(p):
            raise PermissionError(13, "Permission denied", str(file))
        return builtins.open(file, *args, **kw)  # type: ignore[call-overload]

    monkeypatch.setattr(jsonstream, "open", refuse, raising=False)
    rc = main(["analyze", str(p), "-q", "--json", "-"])
    assert "Permission denied" in _one_error(rc, capsys.readouterr().err)


def test_a_pipe_or_device_is_refused_without_reading_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "t.json"
    os.mkfifo(fifo)  # opening it to read would block until a writer came
    for path in (str(fifo), "/dev/zero"):
        rc = main(["analyze", path, "-q", "--json", "-"])
        assert "not a regular file" in _one_error(rc, capsys.readouterr().err)
