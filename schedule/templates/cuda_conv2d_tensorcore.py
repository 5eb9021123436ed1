"""conv2d_nchw_tensorcore.cuda: float16 conv2d (NCHW, OIHW, groups=1) as an implicit GEMM
on tensor cores: the kernel as a [CO, CI*KH*KW] matrix times the image's columns, both
read into shared tiles by index arithmetic (as conv2d_nchw_gemm.cuda does), multiplied by
dense_tensorcore.cuda's warp matrix schedule (16x16x16, float32 accumulators, rounded to
float16 once, epilogue in the output stage).

The columns are held transposed, [N*OH*OW, CI*KH*KW], so that the GEMM is a dense's
(the B tile is a matrix_b fragment in column-major order). Any size: the GEMM is padded to
tiles of 16 as dense_tensorcore.cuda pads (zeros past CO, N*OH*OW and CI*KH*KW where the
shared tiles are loaded, e.g. ResNet's 3-channel stem, whose reduction 27 becomes 32; the
output written only inside its bounds). Needs sm_70 or later.

Knobs: dense_tensorcore.cuda's (tile_m over output channels, tile_n over positions,
tile_k over the channel-window reduction, offset).

    >>> from schedule.templates import instantiate
    >>> s, args = instantiate("conv2d_nchw_tensorcore.cuda", [((1, 16, 8, 8), "float16"),
    ...                       ((16, 16, 3, 3), "float16")], {"padding": 1}, target="cuda")
    >>> [t.name for t in args]
    ['data', 'kernel', 'conv2d_nchw']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schedule.schedule import Schedule, create_schedule
from schedule.templates.common import find_anchor
from schedule.templates.conv_common import nchw_conv_operands
from schedule.templates.cuda_conv2d_gemm import gemm_views
from schedule.templates.cuda_dense_tensorcore import pad_to_tiles, round_up, tile_tensorcore
from schedule.templates.cuda_wmma import has_tensor_cores
from schedule.templates.registry import register_template
from tensor_expr import tensor as T
from tensor_expr.expr import cast
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError

TC_CONV = "conv2d_tensorcore"
CONV = "conv2d_nchw"


def _compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
             ) -> tuple[list[Tensor], list[Tensor]]:
    name = "conv2d_nchw_tensorcore.cuda"
    op = nchw_conv_operands(name, args, attrs)
    dtypes = [dt for _, dt in args]
    if dtypes != ["float16", "float16"]:
        raise ScheduleError(f"template {name}: tensor cores take float16 operands, got "
                            f"{' x '.join(dtypes)}; use conv2d_nchw_gemm.cuda")
    data, kernel = op.data, op.kernel
    N, C, _, _ = op.data_shape
    CO, _, KH, KW = op.kernel_shape
    OH, OW = op.out_hw
    window, plane = KH * KW, OH * OW
    kmat, cols = gemm_views(op, transposed=True)
    # the GEMM in whole 16x16 tiles: zero rows, columns and reduction past the conv's own
    kmat, cols = pad_to_tiles(kmat), pad_to_tiles(cols)
    rk = T.reduce_axis((0, round_up(C * window)), name="rk")
    gemm = T.compute((round_up(CO), round_up(N * plane)), lambda co, p: T.sum(
        cast(kmat[co, rk], "float32") * cast(cols[p, rk], "float32"), axis=rk),
        name="conv_gemm", tag=TC_CONV)
    out = T.compute((N, CO, OH, OW), lambda n, co, h, w: cast(
        gemm[co, n * plane + h * OW + w], "float16"), name=CONV, tag=CONV)
    cfg.add_flop(2.0 * N * CO * plane * C * window)
    return [data, kernel], [out]


def schedule_conv2d_tensorcore(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Implicit-GEMM conv2d on tensor cores (see the module doc)."""
    outs = list(outs)
    s = create_schedule(outs)
    acc = find_anchor(outs, TC_CONV)

    def gemm_axes(sch: Schedule, O: Tensor) -> tuple[Any, Any]:
        n, co, oh, ow = sch[O].op.axis
        sch[O].reorder(co, n, oh, ow)
        return co, sch[O].fuse(n, oh, ow)

    tile_tensorcore(cfg, s, outs, acc, gemm_axes)
    return s


register_template("conv2d_nchw_tensorcore.cuda", "cuda", compute=_compute,
                  available=has_tensor_cores)(
    schedule_conv2d_tensorcore)

__all__ = ["schedule_conv2d_tensorcore"]
