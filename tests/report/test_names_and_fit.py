"""Readable kernel names (report/names.py) and tables that never cut a number (report/fit.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

import stepscope
from stepscope.analysis.api import analyze
from stepscope.report import terminal
from stepscope.report.fit import Col, middle, print_table
from stepscope.report.fmt import ms, pct
from stepscope.report.names import demangled, readable

ROOT = Path(__file__).resolve().parents[2]
MUL = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, "
    "at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor<float, "
    "float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)"
)
CK = (  # AMD's ck_tile RMSNorm kernel, mangled, from the TraceLens MI300 trace
    "_ZN7ck_tile6kentryILi1ENS_12Rmsnorm2dFwdINS_27Rmsnorm2dFwdPipelineOnePassINS_27Rmsnorm2dFwdPipelineProblemIDF16bDF16b"
    "fDF16bDF16bDF16bffNS_19Generic2dBlockShapeINS_8sequenceIJLi1ELi3072EEEENS5_IJLi1ELi128EEEENS5_IJLi1ELi8EEEEEENS_18"
    "Rmsnorm2dFwdTraitsILb1ELb0ELb0ELb0ELNS_21Rmsnorm2dFusedAddEnumE0ELNS_23Rmsnorm2dFusedQuantEnumE0ELNS_22Rmsnorm2dSen"
    "sitiveEnumE0EEEEENS_33Rmsnorm2dFwdPipelineDefaultPolicyEEENS_17Default2DEpilogueINS_24Default2DEpilogueProblemIfDF16b"
    "Lb0ELb1ELb0EEEvEEEEJNSM_5KargsEEEEvDpT1_"
)


@pytest.mark.parametrize(
    ("name", "want"),
    [
        (MUL, "vectorized_elementwise_kernel<MulFunctor>"),
        (
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4>(cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4::Params)",
            "cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align4",
        ),
        (
            "void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, ...)",
            "unrolled_elementwise_kernel<direct_copy_kernel_cuda>",
        ),
        (
            "void at::native::(anonymous namespace)::CatArrayBatchedCopy<float, unsigned int, 1, 128, 1>(float*, unsigned int)",
            "CatArrayBatchedCopy",
        ),
        (
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            "ncclKernel_AllReduce_RING_LL_Sum_float",
        ),
        (CK, "Rmsnorm2dFwd"),
        ("attn_fwd", "attn_fwd"),
        ("aten::mm", "aten::mm"),
        ("<b>relu*</b>", "<b>relu*</b>"),
    ],
)
def test_readable_names_by_hand(name: str, want: str) -> None:
    assert readable(name) == want


def test_a_mangled_name_is_demangled() -> None:
    assert demangled(CK).startswith("void ck_tile::kentry<1, ck_tile::Rmsnorm2dFwd<")
    assert demangled("_Znot a symbol") == "_Znot a symbol"


def test_middle_keeps_both_ends() -> None:
    assert middle("abcdefghij", 5) == "ab…ij" and middle("abc", 5) == "abc"


def _report(width: int) -> str:
    a = analyze(stepscope.load(str(ROOT / "examples/traces/a100_nccl_rank0.json.gz")), workers=1)
    con = Console(width=width, record=True, force_terminal=True, color_system=None)
    terminal.render(a, {"console": con})
    return con.export_text(styles=False), a


@pytest.mark.parametrize("width", [80, 120, 200])
def test_no_number_is_cut_at_any_width(width: int) -> None:
    """Every step's time and compute cell (formatted independently here) appear whole; no figure
    ends in an ellipsis (a name may: shortened in the middle); no line is wider than the terminal."""
    text, a = _report(width)
    for s in a.ranks[0].steps:
        assert f" {ms(s.step_time_ns)} " in text
        assert f"{ms(s.compute_ns)} ({pct(s.compute_ns, s.step_time_ns)})" in text
    for k in a.ranks[0].top_kernels[:5]:
        assert f" {ms(k.total_ns)} " in text
    assert not re.search(r"(?<![A-Za-z_])[0-9][0-9.,%]*…", text)  # a figure cut short (names may be)
    assert max(len(line) for line in text.splitlines()) <= width


def test_columns_drop_by_priority_and_then_rows_become_lines() -> None:
    cols = (Col("name", name=True), Col("keep"), Col("extra", drop=1))
    rows = [("a-long-name-of-a-kernel", "12,345.67", "99.9%")]
    con = Console(width=34, record=True, color_system=None)
    print_table(con, "t", cols, rows)
    text = con.export_text()
    assert "12,345.67" in text and "99.9%" not in text and "left out extra" in text
    con = Console(width=12, record=True, color_system=None)
    print_table(con, "t", cols, rows)  # even the essential columns do not fit: a line per row,
    text = con.export_text()  # wrapped at its spaces, the figures whole
    assert "12,345.67" in text and "99.9%" in text and "┃" not in text


def test_mfu_checks_read_in_words_and_ms() -> None:
    from stepscope.analysis.roofline.mfu_diagnosis import Check
    from stepscope.report.fmt import check_text

    c = Check("idle_causes.host_bound_ns / step_time_ns", 0.035, 0.10, True, "hint", "device idle", 7_700_000.0)
    assert check_text(c) == "device idle: 3.5% of the step (7.7 ms per step); over 10% calls for a look"
    low = Check("overlapped_comm_ns / comm_ns", 0.5, 0.7, False, "overlap more", "overlap", None, False)
    assert check_text(low) == "overlap: 50.0%; under 70% calls for a look: overlap more"
