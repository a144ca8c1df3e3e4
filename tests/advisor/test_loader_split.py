"""The data loader's time split into tensor operators (collate, transforms) and the rest (Python,
reading, decoding), as evidence of the input findings (times in us)."""

from __future__ import annotations

from pathlib import Path

import pytest

import stepscope
from stepscope.analysis.api import analyze

from .. import synth
from .test_rules import LOADER, _input_bound

US = 1000


def test_collate_inside_the_loader_is_its_tensor_work(tmp_path: Path) -> None:
    """The loader range (a record_function range, as PyTorch writes it) runs [100k, 100k+30) in
    each step; an aten::stack of 8 us at 100k+20 inside it (the collate): 8 us of tensor work, 22 us
    of the rest."""
    ev = _input_bound(30, LOADER)
    for e in ev:
        if e["name"] == LOADER:
            e["cat"] = "user_annotation"
    ev += [synth.cpu("aten::stack", 100 * k + 20, 8) for k in range(6)]
    a = analyze(stepscope.load(synth.write(tmp_path / "t.json", ev)))
    assert [s.dataloader_op_ns for s in a.ranks[0].extras["dispatch"].steps] == [8 * US] * 6
    f = {x.id: x for x in a.findings}["io.loader_in_process"]
    assert f.evidence["dataloader_op_ns"] == pytest.approx(8 * US)
    assert f.evidence["dataloader_other_ns"] == pytest.approx(22 * US)
