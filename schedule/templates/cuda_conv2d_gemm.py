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
from schedule.space import FallbackConfig
from schedule.templates.common import (
    accumulator,
    best_divisor,
    fallback_split,
    find_anchor,
    inline_injective,
    output_and_accumulator,
    shape_of,
)
from schedule.templates.conv_common import conv_attrs, pad_hw
from schedule.templates.cuda_dense import MAX_TILE, _bind, _cooperative_fetch
from schedule.templates.registry import expect_args, placeholders, register_template
from tensor_expr import tensor as T
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError

GEMM_CONV = "conv2d_gemm"
CONV = "conv2d_nchw"


def _gemm_conv_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                       ) -> tuple[list[Tensor], list[Tensor]]:
    expect_args("conv2d_nchw_gemm.cuda", args, 2, [4, 4])
    data, kernel = placeholders(args, ["data", "kernel"])
    N, C, H, W = shape_of(data)
    CO, CI, KH, KW = shape_of(kernel)
    a = conv_attrs(attrs)
    if a.groups != 1 or CI != C:
        raise ScheduleError(f"conv2d_nchw_gemm.cuda handles groups=1 (kernel in-channels {CI}"
                            f" must equal data channels {C})")
    OH, OW = a.out_hw(H, W, KH, KW)
    (sh, sw), (dh, dw) = a.strides, a.dilation
    dpad = pad_hw(data, 2, a.padding)
    window, plane = KH * KW, OH * OW
    kmat = T.compute((CO, C * window), lambda co, k: kernel[co, k // window, k // KW % KH,
                                                           k % KW], name="kernel_mat")
    cols = T.compute((C * window, N * plane), lambda k, p: dpad[
        p // plane, k // window, p // OW % OH * sh + k // KW % KH * dh,
        p % OW * sw + k % KW * dw], name="im2col")
    rk = T.reduce_axis((0, C * window), name="rk")
    gemm = T.compute((CO, N * plane), lambda co, p: T.sum(
        accumulator(attrs, kmat[co, rk]) * accumulator(attrs, cols[rk, p]), axis=rk),
        name="conv_gemm", tag=GEMM_CONV)
    out = T.compute((N, CO, OH, OW), lambda n, co, h, w: gemm[co, n * plane + h * OW + w],
                    name=CONV, tag=CONV)
    cfg.add_flop(2.0 * N * CO * OH * OW * C * window)
    return [data, kernel], [out]


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
    CO, P = shape_of(C)
    K = int(C.op.reduce_axis[0].dom.extent.value)
    cfg.define_split("tile_y", CO, num_outputs=4,
                     filter=lambda f: f[-2] <= MAX_TILE and f[-1] <= 8 and f[-3] <= 4)
    cfg.define_split("tile_x", P, num_outputs=4,
                     filter=lambda f: f[-2] <= MAX_TILE and f[-1] <= 8 and f[-3] <= 4)
    cfg.define_split("tile_k", K, num_outputs=2, filter=lambda f: f[-1] <= MAX_TILE)
    if isinstance(cfg, FallbackConfig):
        ry = best_divisor(CO, [4, 2])
        rx = best_divisor(P, [4, 2])
        fallback_split(cfg, "tile_y", [1, best_divisor(CO // ry, [8, 16, 4, 2]), ry])
        fallback_split(cfg, "tile_x", [1, best_divisor(P // rx, [16, 8, 32, 4, 2]), rx])
        fallback_split(cfg, "tile_k", [best_divisor(K, [8, 16, 9, 4, 2])])
    n, co, oh, ow = s[O].op.axis
    s[O].reorder(co, n, oh, ow)
    pos = s[O].fuse(n, oh, ow)
    by, vy, ty, yi = cfg["tile_y"].apply(s, O, co)
    bx, vx, tx, xi = cfg["tile_x"].apply(s, O, pos)
    s[O].reorder(by, bx, vy, vx, ty, tx, yi, xi)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (vy, "vthread"), (vx, "vthread"),
                    (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        _bind(s, O, ax, tag)
    s[CL].compute_at(s[O], tx)
    ci, cj = s[CL].op.axis
    ko, ki = cfg["tile_k"].apply(s, CL, s[CL].op.reduce_axis[0])
    s[CL].reorder(ko, ki, ci, cj)
    s[CL].unroll(ci)
    s[CL].unroll(cj)
    threads_y, threads_x = int(cfg["tile_y"].size[-2]), int(cfg["tile_x"].size[-2])
    for load in (AA, BB):
        s[load].compute_at(s[CL], ko)
        _cooperative_fetch(s, load, threads_y, threads_x)
    return s


register_template("conv2d_nchw_gemm.cuda", "cuda",
                  compute=_gemm_conv_compute)(schedule_conv2d_gemm_cuda)

__all__ = ["schedule_conv2d_gemm_cuda"]
