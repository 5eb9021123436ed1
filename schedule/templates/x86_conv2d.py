"""x86 conv2d NCHW (direct, blocked) and depthwise conv2d NCHW.

The direct NCHW schedule blocks the output over channels (cb), rows (hb) and columns (wb)
and vectorizes along the output width: per input channel and kernel tap the register tile
loads hb input rows of wb columns and broadcasts cb weights. It needs no layout change,
but widths that are not a multiple of the vector width (56, 28, 14 in ResNet) leave lanes
idle; conv2d_NCHWc.x86 vectorizes over channels instead and is the faster choice there.

    >>> from schedule.templates import instantiate
    >>> args = [((1, 8, 16, 16), "float32"), ((8, 8, 3, 3), "float32")]
    >>> s, ts = instantiate("conv2d_nchw.x86", args, {"padding": 1})
    >>> [t.name for t in ts]
    ['data', 'kernel', 'conv2d_nchw']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schedule.schedule import Schedule, create_schedule
from schedule.space import FallbackConfig
from schedule.templates.common import (
    accumulator,
    const_extent,
    divisor_at_most,
    fallback_split,
    fallback_value,
    find_anchor,
    injective_inputs,
    inline_injective,
    output_and_accumulator,
    parallel_fuse,
    schedule_copy_stage,
    shape_of,
)
from schedule.templates.conv_common import conv_attrs, nchw_conv_operands, pad_hw
from schedule.templates.registry import expect_args, placeholders, register_template
from tensor_expr import tensor as T
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError

CONV, DEPTHWISE = "conv2d_nchw", "depthwise_conv2d_nchw"

# ---------------------------------------------------------------------------------------
# The computations


def _conv_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                  ) -> tuple[list[Tensor], list[Tensor]]:
    op = nchw_conv_operands("conv2d_nchw.x86", args, attrs,
                            "; use depthwise_conv2d_nchw.x86")
    data, kernel, dpad, a = op.data, op.kernel, op.padded, op.attrs
    N, C, H, W = op.data_shape
    CO, _, KH, KW = op.kernel_shape
    OH, OW = op.out_hw
    rc = T.reduce_axis((0, C), name="rc")
    ry = T.reduce_axis((0, KH), name="ry")
    rx = T.reduce_axis((0, KW), name="rx")
    (sh, sw), (dh, dw) = a.strides, a.dilation
    out = T.compute((N, CO, OH, OW), lambda n, co, h, w: T.sum(
        accumulator(attrs, dpad[n, rc, h * sh + ry * dh, w * sw + rx * dw])
        * accumulator(attrs, kernel[co, rc, ry, rx]),
        axis=[rc, ry, rx]), name="conv2d_nchw", tag=CONV)
    cfg.add_flop(2.0 * N * CO * OH * OW * C * KH * KW)
    return [data, kernel], [out]


def _depthwise_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                       ) -> tuple[list[Tensor], list[Tensor]]:
    expect_args("depthwise_conv2d_nchw.x86", args, 2, [4, 4])
    data, kernel = placeholders(args, ["data", "kernel"])
    N, C, H, W = shape_of(data)
    CO, one, KH, KW = shape_of(kernel)
    if one != 1 or CO % C:
        raise ScheduleError(f"depthwise_conv2d_nchw.x86: kernel must be [C*m, 1, KH, KW] for "
                            f"data with C={C} channels, got {(CO, one, KH, KW)}")
    mult = CO // C
    a = conv_attrs(attrs)
    OH, OW = a.out_hw(H, W, KH, KW)
    dpad = pad_hw(data, 2, a.padding)
    ry = T.reduce_axis((0, KH), name="ry")
    rx = T.reduce_axis((0, KW), name="rx")
    (sh, sw), (dh, dw) = a.strides, a.dilation
    out = T.compute((N, CO, OH, OW), lambda n, c, h, w: T.sum(
        accumulator(attrs, dpad[n, c // mult, h * sh + ry * dh, w * sw + rx * dw])
        * accumulator(attrs, kernel[c, 0, ry, rx]),
        axis=[ry, rx]), name="depthwise_conv2d_nchw", tag=DEPTHWISE)
    cfg.add_flop(2.0 * N * CO * OH * OW * KH * KW)
    return [data, kernel], [out]


# ---------------------------------------------------------------------------------------
# The schedules


def _width_block(OW: int, lanes: int) -> int:
    """Whole vectors when the width allows, else one partial vector: a <14 x float> tile
    measured 4x slower than <7 x float> (128@28: 4.7 against 17-44 GFLOP/s, 1 thread)."""
    for p in (2 * lanes, lanes):
        if OW % p == 0:
            return p
    return divisor_at_most(OW, lanes)


def _expect_nchw_output(s: Schedule, O: Tensor, conv: Tensor) -> None:
    """These schedules tile an NCHW output; a group that stores its output blocked (a 5-D
    NCHW[x]c tensor, relay_ir.backend.layout_plan) needs the NCHWc template: say so as a
    ScheduleError, which lets the caller try its next schedule and report the first one's
    failure, instead of failing to unpack the axes."""
    got = len(s[O].op.axis)
    if got != 4:
        raise ScheduleError(
            f"the NCHW schedule of {conv.op.name} tiles a 4-D output, but its group stores "
            f"{O.op.name} as a {got}-D tensor (a blocked layout): use the NCHWc template "
            "(conv2d_NCHWc.x86), or build with disabled_pass=['AlterOpLayout']")


# Fallback, measured (python -m tests.schedule.templates.bench_templates) on the 2-core EPYC
# (Zen 3, AVX2, 8 fp32 lanes) build machine, shared with other jobs (load average 3-5):
# figures swing 2x between runs, so compare with numpy's GEMM from the same run.
# ResNet-18 3x3 layers, batch 1, 1 thread: 64@56 41.1 GFLOP/s, 128@28 53.0, 256@14 52.5
# (numpy GEMM 74.2, load 3.3); 2 threads (load 3.2): 47.4, 27.2, 57.0 (numpy GEMM 29.7).
def schedule_conv2d_nchw(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Direct NCHW conv: parallel (n, co-block, oh-block), cb x hb x wb register tile."""
    outs = list(outs)
    s = create_schedule(outs)
    conv = find_anchor(outs, CONV)
    pads = injective_inputs(conv)
    inline_injective(s, outs, keep=pads)
    O, CC = output_and_accumulator(s, outs, conv)
    _expect_nchw_output(s, O, conv)
    _, CO, OH, OW = shape_of(conv)
    C = const_extent(CC.op.reduce_axis[0].dom.extent)
    L = cfg.target.fp32_lanes

    cfg.define_split("tile_co", CO, num_outputs=2, max_factor=16)
    cfg.define_split("tile_oh", OH, num_outputs=2, max_factor=8)
    cfg.define_split("tile_ow", OW, num_outputs=2, max_factor=64)
    cfg.define_split("tile_rc", C, num_outputs=2)
    cfg.define_reorder("reduce_order", [0, 1, 2], policy="candidate",
                       candidates=[[0, 1, 2], [1, 2, 0], [1, 0, 2]])
    # unroll the kernel rows and / or columns around the register tile
    cfg.define_annotate("unroll_k", ["kh", "kw"], policy="try_unroll")
    if isinstance(cfg, FallbackConfig):
        wb = _width_block(OW, L)
        vecs = -(-wb // L)
        hb = 2 if OH % 2 == 0 and vecs <= 2 else 1
        cb = divisor_at_most(CO, max(1, (cfg.target.vector_registers - 4) // (vecs * hb)))
        fallback_split(cfg, "tile_co", [cb])
        fallback_split(cfg, "tile_oh", [hb])
        fallback_split(cfg, "tile_ow", [wb])
        fallback_split(cfg, "tile_rc", [divisor_at_most(C, 64)])
        fallback_value(cfg, "unroll_k", ["none", "unroll"])

    n, co, oh, ow = s[O].op.axis
    coo, coi = cfg["tile_co"].apply(s, O, co)
    oho, ohi = cfg["tile_oh"].apply(s, O, oh)
    owo, owi = cfg["tile_ow"].apply(s, O, ow)
    s[O].reorder(n, coo, oho, owo, coi, ohi, owi)
    s[CC].compute_at(s[O], owo)
    s[O].vectorize(owi)
    parallel_fuse(s, O, [n, coo])  # fusing oho too makes bound inference add guards

    cn, cco, coh, cow = s[CC].op.axis
    rc, ry, rx = s[CC].op.reduce_axis
    rco, rci = cfg["tile_rc"].apply(s, CC, rc)
    inner = [[rci, ry, rx][i] for i in cfg["reduce_order"].perm]
    s[CC].reorder(cn, rco, *inner, cco, coh, cow)
    cfg["unroll_k"].apply(s, CC, [ry, rx])
    s[CC].unroll(cco)
    s[CC].unroll(coh)
    s[CC].vectorize(cow)
    for p in pads:
        schedule_copy_stage(s, p)
    return s


# Fallback, measured (python -m tests.schedule.templates.bench_templates) on the 2-core EPYC
# (Zen 3, AVX2, 8 fp32 lanes) build machine, shared with other jobs (load average 3-5):
# figures swing 2x between runs, so compare with numpy's GEMM from the same run.
# 128@56 3x3: 29.4-35.2 GFLOP/s (0.21-0.25 ms) on 1 thread, 34.0 on 2 threads.
def schedule_depthwise_nchw(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Depthwise NCHW: parallel (n, c), rows in blocks, the width vectorized."""
    outs = list(outs)
    s = create_schedule(outs)
    conv = find_anchor(outs, DEPTHWISE)
    pads = injective_inputs(conv)
    inline_injective(s, outs, keep=pads)
    O, CC = output_and_accumulator(s, outs, conv)
    _expect_nchw_output(s, O, conv)
    _, CO, OH, OW = shape_of(conv)
    L = cfg.target.fp32_lanes

    cfg.define_split("tile_oh", OH, num_outputs=2, max_factor=8)
    cfg.define_split("tile_ow", OW, num_outputs=2, max_factor=64)
    cfg.define_knob("unroll_kw", [True, False])
    if isinstance(cfg, FallbackConfig):
        wb = _width_block(OW, L)
        fallback_split(cfg, "tile_ow", [wb])
        fallback_split(cfg, "tile_oh", [divisor_at_most(OH, max(1, 8 // -(-wb // L)))])
        fallback_value(cfg, "unroll_kw", True)

    n, c, oh, ow = s[O].op.axis
    oho, ohi = cfg["tile_oh"].apply(s, O, oh)
    owo, owi = cfg["tile_ow"].apply(s, O, ow)
    s[O].reorder(n, c, oho, owo, ohi, owi)
    s[CC].compute_at(s[O], owo)
    s[O].vectorize(owi)
    parallel_fuse(s, O, [n, c])

    cn, cc, coh, cow = s[CC].op.axis
    ry, rx = s[CC].op.reduce_axis
    s[CC].reorder(cn, cc, ry, rx, coh, cow)
    if cfg["unroll_kw"].val:
        s[CC].unroll(rx)
    s[CC].unroll(coh)
    s[CC].vectorize(cow)
    for p in pads:
        schedule_copy_stage(s, p)
    return s


register_template("conv2d_nchw.x86", "llvm", compute=_conv_compute)(schedule_conv2d_nchw)
register_template("depthwise_conv2d_nchw.x86", "llvm",
                  compute=_depthwise_compute)(schedule_depthwise_nchw)
