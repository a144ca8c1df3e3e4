"""A device alias is resolved in one place (the catalog): ``network --device h100`` stores the
catalog name, and ``plan --hardware h100`` accepts a profile naming the device by alias or name."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from stepscope.catalog.hardware import canonical_name, same_device
from stepscope.cli import main
from tests.planner.test_nccl_tests import _write_set

COUNTS = {
    1: {"all_reduce": 436.0, "all_gather": 249.8, "reduce_scatter": 249.7},
    2: {"all_reduce": 361.7, "all_gather": 184.6, "reduce_scatter": 181.6},
}
PLAN = ["plan", "--model", "llama3-8b", "--devices", "16", "--global-batch", "32", "--seq-len", "4096"]


def test_aliases_resolve_to_the_catalog_name() -> None:
    """data/hardware.yaml names the H100 SXM part ``H100-SXM``; ``h100`` is its alias."""
    assert canonical_name("h100") == "H100-SXM"
    assert canonical_name("H100-SXM") == "H100-SXM"
    assert canonical_name("my-own-gpu") == "my-own-gpu"
    assert same_device("h100", "H100-SXM") and same_device("H100-sxm", "h100")
    assert not same_device("h100", "a100")


@pytest.mark.parametrize("given", ["h100", "H100-SXM"])
def test_network_alias_then_plan_alias(tmp_path: Path, capsys: pytest.CaptureFixture[str], given: str) -> None:
    out = tmp_path / "net.yaml"
    assert main(["network", *_write_set(tmp_path, COUNTS), "--name", "lab", "--device", given, "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["networks"][0]["device"] == "H100-SXM"
    capsys.readouterr()
    assert main([*PLAN, "--hardware", "h100", "--evaluate", "dp=16", "--network", str(out), "--json"]) == 0


def test_profile_written_with_an_alias_is_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A profile written by hand (or by an older stepscope) with ``device: h100``."""
    out = tmp_path / "net.yaml"
    assert main(["network", *_write_set(tmp_path, COUNTS), "--name", "lab", "-o", str(out)]) == 0
    doc = yaml.safe_load(out.read_text())
    doc["networks"][0]["device"] = "h100"
    out.write_text(yaml.safe_dump(doc))
    capsys.readouterr()
    assert main([*PLAN, "--hardware", "H100-SXM", "--evaluate", "dp=16", "--network", str(out), "--json"]) == 0
    capsys.readouterr()
    assert main([*PLAN, "--hardware", "a100", "--evaluate", "dp=16", "--network", str(out), "--json"]) == 2
    assert "pass --hardware h100" in capsys.readouterr().err
