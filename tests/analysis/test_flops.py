"""FLOPs/bytes formulas by hand on small shapes, and against torch.utils.flop_counter."""

from __future__ import annotations

import json

import pytest

from stepscope.analysis.roofline.flops import op_cost


def c(name: str, dims: list, types: list[str]):  # noqa: ANN201
    return op_cost(name, json.dumps(dims), json.dumps(types))


F, B = "float", "c10::BFloat16"


def test_gemms_by_hand() -> None:
    # mm: 2*m*k*n; bytes = (m*k + k*n + m*n) * 4
    x = c("aten::mm", [[2, 3], [3, 4]], [F, F])
    assert (x.flops, x.bytes, x.dtype) == (2 * 2 * 3 * 4, (6 + 12 + 8) * 4, "fp32")
    x = c("aten::addmm", [[4], [2, 3], [3, 4], [], []], [F, F, F, "Scalar", "Scalar"])
    assert x.flops == 48 and x.bytes == (4 + 6 + 12 + 8) * 4
    x = c("aten::bmm", [[5, 2, 3], [5, 3, 4]], [B, B])
    assert (x.flops, x.bytes, x.dtype) == (5 * 48, (30 + 60 + 40) * 2, "bf16")
    x = c("aten::baddbmm", [[5, 2, 4], [5, 2, 3], [5, 3, 4], [], []], [B, B, B, "Scalar", "Scalar"])
    assert x.flops == 240
    x = c("aten::linear", [[7, 2, 3], [4, 3], [4]], [B, B, B])  # 14 rows, k=3, n=4
    assert x.flops == 2 * 14 * 3 * 4 and x.bytes == (42 + 12 + 4 + 14 * 4) * 2
    x = c("aten::matmul", [[6, 1, 2, 3], [5, 3, 4]], [F, F])  # batch broadcast 6x5
    assert x.flops == 2 * 30 * 2 * 3 * 4
    x = c("aten::matmul", [[3], [3, 4]], [F, F])  # vector @ matrix
    assert x.flops == 2 * 1 * 3 * 4
    x = c("aten::_scaled_mm", [[16, 32], [32, 8], [], []], ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", F, F])
    assert (x.flops, x.dtype) == (2 * 16 * 32 * 8, "fp8")
    x = c("aten::_grouped_mm", [[10, 4], [3, 4, 6], [3]], [B, B, "int"])  # 10 tokens, k=4, n=6
    assert x.flops == 2 * 10 * 4 * 6


def test_conv_attention_and_memory_ops_by_hand() -> None:
    # conv: N=2, Cin=3, 5x5 image, Cout=4, 3x3 kernel (stride 1, same): 2 * (2*4*25) * 3*9
    x = c("aten::convolution", [[2, 3, 5, 5], [4, 3, 3, 3], [4]], [F, F, F])
    assert x.flops == 2 * 200 * 27
    # SDPA with GQA: q[b=1,h=4,sq=8,d=16], k/v[1,2,sk=6,16]: 2*b*h*sq*sk*(d + dv)
    x = c("aten::_scaled_dot_product_flash_attention", [[1, 4, 8, 16], [1, 2, 6, 16], [1, 2, 6, 16]], [B, B, B])
    assert x.flops == 2 * 1 * 4 * 8 * 6 * 32
    bwd = c(
        "aten::_scaled_dot_product_flash_attention_backward",
        [[1, 4, 8, 16], [1, 4, 8, 16], [1, 2, 6, 16], [1, 2, 6, 16]],
        [B, B, B, B],
    )
    assert bwd.flops == 2.5 * x.flops  # 4 gradient matmuls + the recomputed QK^T
    # flash-attn layout q[b, s, h, d]
    y = c("aten::_flash_attention_forward", [[1, 8, 4, 16], [1, 6, 2, 16], [1, 6, 2, 16]], [B, B, B])
    assert y.flops == x.flops
    assert c("aten::layer_norm", [[4, 10], [10], [10]], [F, F, F]).flops == 5 * 40
    assert c("aten::_softmax", [[4, 10], [], []], [F, "Scalar", "Scalar"]).flops == 5 * 40
    x = c("aten::add", [[4, 1, 3], [2, 3], []], [F, F, "Scalar"])  # broadcast to [4, 2, 3]
    assert x.flops == 24 and x.bytes == (12 + 6 + 24) * 4
    x = c("aten::embedding", [[100, 8], [2, 5]], [B, "long int"])  # 10 rows of 8
    assert x.flops == 0 and x.bytes == 10 * 8 * 2 * 2 + 10 * 8
    assert c("aten::copy_", [[3, 4], [3, 4], []], [B, B, "Scalar"]).bytes == 2 * 12 * 2


def test_no_formula_or_bad_shapes() -> None:
    assert c("aten::unknown_op", [[2, 2]], [F]) is None
    assert c("aten::mm", [[2, 3, 4], [3, 4]], [F, F]) is None
    assert op_cost("aten::mm", None, None) is None
    assert op_cost("aten::mm", "not json", "[]") is None


# ------------------------------------------------------------ independent check with torch --
@pytest.mark.torch
def test_against_torch_flop_counter() -> None:
    torch = pytest.importorskip("torch")  # here, not at module level: the tests above need no torch
    from torch.utils.flop_counter import FlopCounterMode

    def counted(fn) -> int:  # noqa: ANN001
        with FlopCounterMode(display=False) as m:
            fn()
        return int(m.get_total_flops())

    a, b = torch.randn(8, 16), torch.randn(16, 4)
    assert c("aten::mm", [[8, 16], [16, 4]], [F, F]).flops == counted(lambda: torch.mm(a, b))
    bias = torch.randn(4)
    assert c("aten::addmm", [[4], [8, 16], [16, 4], [], []], [F] * 5).flops == counted(lambda: torch.addmm(bias, a, b))
    x, y = torch.randn(3, 8, 16), torch.randn(3, 16, 5)
    assert c("aten::bmm", [[3, 8, 16], [3, 16, 5]], [F, F]).flops == counted(lambda: torch.bmm(x, y))
    img, w = torch.randn(2, 3, 9, 9), torch.randn(6, 3, 3, 3)
    conv = counted(lambda: torch.nn.functional.conv2d(img, w, padding=1))
    assert c("aten::convolution", [[2, 3, 9, 9], [6, 3, 3, 3]], [F, F]).flops == conv
    # CPU SDPA runs a kernel the counter does not hook; compare with its registered formulas
    from torch.utils.flop_counter import sdpa_backward_flop_count, sdpa_flop_count

    q, kk = [2, 4, 10, 8], [2, 4, 12, 8]
    assert c("aten::_scaled_dot_product_flash_attention", [q, kk, kk], [F] * 3).flops == sdpa_flop_count(q, kk, kk)
    assert c(
        "aten::_scaled_dot_product_flash_attention_backward", [q, q, kk, kk], [F] * 4
    ).flops == sdpa_backward_flop_count(q, q, kk, kk)
    lin_x, lin_w = torch.randn(5, 7, 16), torch.randn(4, 16)
    assert c("aten::linear", [[5, 7, 16], [4, 16]], [F, F]).flops == counted(
        lambda: torch.nn.functional.linear(lin_x, lin_w)
    )
