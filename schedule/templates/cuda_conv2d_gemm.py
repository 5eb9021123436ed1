"""CUDA conv2d as an implicit GEMM (NCHW data, OIHW kernel, groups=1).

The convolution is the product of the kernel as a [CO, CI*KH*KW] matrix and the image's
columns (im2col) as a [CI*KH*KW, N*OH*OW] matrix. Neither matrix is stored: the shared
memory tiles of the GEMM read them straight from the kernel and the (zero-padded) data by
index arithmetic, so the conv gets the GEMM's register blocking and shared tiles (see
schedule.templates.cuda_dense: a 4-way split of each output axis into blocks, virtual
threads, threads and a thread's registers) where the direct template computes one output
per thread. Output channels are the GEMM's rows (tile_y), the image positions n, oh, ow
fused its columns (tile_x), the reduction over channels and the window its k (tile_k).
An elementwise epilogue (bias, batch norm, relu, residual add) is computed as the
accumulators are written out.

    >>> from schedule.templates import instantiate
    >>> s, args = instantiate("conv2d_nchw_gemm.cuda", [((1, 4, 8, 8), "float32"),
    ...                       ((8, 4, 3, 3), "float32")], {"padding": 1}, target="cuda")
    >>> [t.name for t in args]
    ['data', 'kernel', 'conv2d_nchw']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schedule.schedule import Schedule, create_schedule
from schedule.templates.common import (
    accumulator,
    find_anchor,
    inline_injective,
    output_and_accumulator,
)
from schedule.templates.conv_common import NchwConv, nchw_conv_operands
from schedule.templates.cuda_dense import tile_gemm
from schedule.templates.registry import register_template
from tensor_expr import tensor as T
from tensor_expr.tensor import Tensor

GEMM_CONV = "conv2d_gemm"
CONV = "conv2d_nchw"


def _gemm_conv_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                       ) -> tuple[list[Tensor], list[Tensor]]:
    op = nchw_conv_operands("conv2d_nchw_gemm.cuda", args, attrs)
    data, kernel = op.data, op.kernel
    N, C, _, _ = op.data_shape
    CO, _, KH, KW = op.kernel_shape
    OH, OW = op.out_hw
    window, plane = KH * KW, OH * OW
    kmat, cols = gemm_views(op, transposed=False)
    rk = T.reduce_axis((0, C * window), name="rk")
    gemm = T.compute((CO, N * plane), lambda co, p: T.sum(
        accumulator(attrs, kmat[co, rk]) * accumulator(attrs, cols[rk, p]), axis=rk),
        name="conv_gemm", tag=GEMM_CONV)
    out = T.compute((N, CO, OH, OW), lambda n, co, h, w: gemm[co, n * plane + h * OW + w],
                    name=CONV, tag=CONV)
    cfg.add_flop(2.0 * N * CO * OH * OW * C * window)
    return [data, kernel], [out]


def gemm_views(op: NchwConv, transposed: bool) -> tuple[Tensor, Tensor]:
    """The conv's GEMM operands as views (injective stages, inlined into whatever reads
    them): the kernel as a [CO, C*KH*KW] matrix and the image's columns as
    [C*KH*KW, N*OH*OW] (`transposed`: [N*OH*OW, C*KH*KW])."""
    kernel, dpad = op.kernel, op.padded
    N, C, _, _ = op.data_shape
    CO, _, KH, KW = op.kernel_shape
    OH, OW = op.out_hw
    (sh, sw), (dh, dw) = op.attrs.strides, op.attrs.dilation
    window, plane = KH * KW, OH * OW
    kmat = T.compute((CO, C * window), lambda co, k: kernel[co, k // window, k // KW % KH,
                                                           k % KW], name="kernel_mat")

    def col(k: Any, p: Any) -> Any:
        return dpad[p // plane, k // window, p // OW % OH * sh + k // KW % KH * dh,
                    p % OW * sw + k % KW * dw]

    if transposed:
        return kmat, T.compute((N * plane, C * window), lambda p, k: col(k, p),
                               name="im2col_t")
    return kmat, T.compute((C * window, N * plane), col, name="im2col")


def schedule_conv2d_gemm_cuda(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Implicit-GEMM conv2d with shared tiles and register blocking (see the module doc)."""
    outs = list(outs)
    s = create_schedule(outs)
    C = find_anchor(outs, GEMM_CONV)
    kmat, cols = C.op.input_tensors[:2]
    O, CL = output_and_accumulator(s, outs, C)
    AA = s.cache_read(kmat, "shared", [CL])
    BB = s.cache_read(cols, "shared", [CL])
    # the matrices are views: their index arithmetic moves into the shared-tile loads
    inline_injective(s, outs, keep=[AA, BB])
    n, co, oh, ow = s[O].op.axis
    s[O].reorder(co, n, oh, ow)
    tile_gemm(cfg, s, O, CL, (co, s[O].fuse(n, oh, ow)), (AA, BB))
    return s


register_template("conv2d_nchw_gemm.cuda", "cuda",
                  compute=_gemm_conv_compute)(schedule_conv2d_gemm_cuda)

__all__ = ["gemm_views", "schedule_conv2d_gemm_cuda"]
