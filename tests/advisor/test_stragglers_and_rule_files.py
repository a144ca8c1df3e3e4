"""Straggler findings name the slow rank and the cause on it; users' rule files add and replace
rules; a bad rule file is one error line with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from stepscope.advisor.engine import advise
from stepscope.advisor.rules import load_rules
from stepscope.analysis.cluster.view import build
from stepscope.analysis.results import Analysis
from stepscope.cli import main
from stepscope.errors import ConfigError

from .. import synth
from ..analysis.test_cluster import _rank, _step


def test_straggler_finding_names_the_slow_rank_and_its_cause() -> None:
    """The 8-rank case of test_cluster: rank 5 computes 30 ms more per step (what-if saving about
    10.1 ms per step: the next slowest rank bounds the step then), rank 2's loader is 20 ms slower
    (what-if 0: rank 5 still bounds the step). Only rank 5 gets a card with a saving; rank 2 gets one
    too (it is a straggler) with saving 0."""
    ranks = []
    for r in range(8):
        comp = 100_000_000 + (30_000_000 if r == 5 else 0) + 100_000 * (r % 3)
        loader = 1_000_000 + (20_000_000 if r == 2 else 0)
        busy = comp + loader
        slowest = 131_000_000 + 200_000
        starts = [busy, 1_000_000_000 + busy]
        durs = [slowest - busy + 5_000_000] * 2
        ranks.append(_rank(r, starts, durs, 64 << 20, [_step(slowest + 5_000_000, comp, loader)] * 2))
    a = Analysis(ranks=tuple(ranks), notices=(), inputs=(), cluster=build(tuple(ranks)))
    cards = {f.ranks: f for f in advise(a) if f.id.startswith("straggler.")}
    five, two = cards[(5,)], cards[(2,)]
    assert five.id == "straggler.compute" and five.category == "compute" and five.saving_method == "critical_path"
    assert five.saving.high_ns == pytest.approx(10_100_000, abs=200_000)
    assert five.saving.mid_ns == int(0.9 * five.saving.high_ns)
    assert two.id == "straggler.io" and two.category == "io" and two.saving.high_ns == 0
    assert "Rank 5" in five.title


def test_a_user_rule_replaces_a_bundled_one_and_adds_its_own(tmp_path: Path) -> None:
    f = tmp_path / "mine.yaml"
    f.write_text(
        """
rules:
  - id: io.input_wait
    category: io
    title: "input wait {idle_input_wait_ratio:.0%}"
    when: [{signal: idle_input_wait_ratio, at_least: 0.5}]
    saving: {basis: idle_input_wait_ns, method: measured, low: 0.1, mid: 0.2, high: 1.0}
    cause: mine
  - id: team.too_many_kernels
    category: cpu
    title: "{kernels:.0f} kernels per step"
    when: [{signal: kernels, at_least: 1}]
    saving: {basis: step_ns, method: none, low: 0, mid: 0, high: 0}
    cause: ours
""",
        encoding="utf-8",
    )
    rules = {r.id: r for r in load_rules((str(f),)).rules}
    assert rules["io.input_wait"].cause == "mine" and rules["io.input_wait"].when[0].at_least == 0.5
    assert "team.too_many_kernels" in rules and "cpu.host_bound" in rules


@pytest.mark.parametrize(
    "body",
    [
        "rules: [{id: x, category: nope, title: t, when: [], saving: {basis: step_ns, method: none, low: 0, mid: 0, high: 0}, cause: c}]",
        "rules: [{id: x, category: io, title: '{step_ns.__class__}', when: [], saving: {basis: step_ns, method: none, low: 0, mid: 0, high: 0}, cause: c}]",
        "rules: [{id: x, category: io, title: t, when: [], saving: {basis: step_ns, method: measured, low: 0.9, mid: 0.5, high: 1}, cause: c}]",
        "rules: [",
        "rules: [{id: x, category: io, title: 'open {', when: [], saving: {basis: step_ns, method: none, low: 0, mid: 0, high: 0}, cause: c}]",
        "rules: [{id: x, category: io, title: '{sync_calls:d}', when: [], saving: {basis: step_ns, method: none, low: 0, mid: 0, high: 0}, cause: c}]",
        "rules: [{id: x, category: io, title: t, when: [{signal: s, at_least: lots}], saving: {basis: step_ns, method: none, low: 0, mid: 0, high: 0}, cause: c}]",
        "rules: [{id: x, category: io, title: t, when: [], saving: {basis: step_ns, method: none, low: 0, mid: 0, high: 0}, cause: c, actions: [3]}]",
    ],
)
def test_bad_rule_files_are_refused(tmp_path: Path, body: str, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text(body, encoding="utf-8")
    with pytest.raises(ConfigError):
        load_rules((str(f),))
    trace = synth.write(tmp_path / "t.json", synth.basic_events())
    assert main(["analyze", str(trace), "--advisor-rules", str(f), "-q", "--json", str(tmp_path / "o.json")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "bad.yaml" in err[0]


def test_low_bandwidth_collectives_get_their_transfer_time_above_the_link_as_ceiling() -> None:
    """The cluster test's two ranks: 4 all-reduces of 100 MB in 1 ms each (bus bandwidth 150 GB/s)
    on a 450 GB/s link, all in step 0. Each would take 1 ms x 150/450 at the link's figure: 0.667 ms
    of each is above it, 2.667 ms in the step; mid 0.5 of that (heuristic)."""
    ranks = tuple(
        _rank(r, [0, 5_000_000, 10_000_000, 15_000_000], [1_000_000] * 4, 100_000_000, [_step(20_000_000, 1_000_000)])
        for r in range(2)
    )
    a = Analysis(ranks=ranks, notices=(), inputs=(), cluster=build(ranks, gpus_per_node=8, peak_intra_gbps=450.0))
    f = {x.id: x for x in advise(a)}["communication.low_bandwidth"]
    ceiling = 4 * 1_000_000 * (1 - 150 / 450)
    assert f.saving.high_ns == pytest.approx(ceiling, abs=2) and f.saving.mid_ns == pytest.approx(ceiling / 2, abs=2)
    assert f.category == "communication" and f.ranks == (0, 1) and f.saving_method == "heuristic"


def test_small_messages_get_a_card_without_a_saving() -> None:
    """Two ranks, 8 all-reduces of 4 KiB each: all under 1 MiB."""
    starts = [1_000_000 * i for i in range(8)]
    ranks = tuple(_rank(r, starts, [10_000] * 8, 4096, [_step(20_000_000, 1_000_000)]) for r in range(2))
    a = Analysis(ranks=ranks, notices=(), inputs=(), cluster=build(ranks))
    f = {x.id: x for x in advise(a)}["communication.small_messages"]
    assert f.evidence["small"] == 8 and f.evidence["total"] == 8
    assert f.saving_method == "none" and f.saving.high_ns == 0
