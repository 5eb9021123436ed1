"""x86 conv2d for a model's stem: few input channels (C <= 4, an image), NCHW in, NCHW[x]c out.

conv2d_NCHWc.x86 blocks its input channels; with 3 of them the block is 3 wide and the
padded, re-blocked copy of the image costs as much as the conv. Here the image is read as
it is: per input channel and tap, the micro-kernel loads oc_bn / lanes kernel vectors and
broadcasts reg_n input pixels (one output column each, a stride apart), reg_n x oc_bn /
lanes FMAs into accumulators held in registers. The vector runs over a block of oc_bn
output channels, which is the block the output is written in (out_layout "NCHWc") for the
next conv to read as it is, or unpacked (out_layout "NCHW").

Padding is no copy either: the reduction carries the guard "this tap lies inside the
image" and the output stage is x86_depthwise_nchwc's (parallel over row chunks or channel
blocks, never fused with the rows), so lowering's loop_partition peels the border rows and
column tiles off a guard-free interior. Knobs: tile_oc (oc_bn), tile_ow (reg_n), tile_oh
(rows per parallel chunk), parallel ("rows" / "channels"), unroll_kw; the defaults from the
target's vector width and registers (`stem_blocks`). The template takes any number of
input channels; the strategy gives it those of at most 4.

Measured against conv2d_NCHWc.x86 on the same layer (NCHW image in, NCHWc out, packed
constant kernel, AVX-512 host, 1 thread, interleaved runs, load 2-3): MobileNetV2's
3x3/2 (3 -> 32 at 224) 132 us against 266, ResNet-18's 7x7/2 (3 -> 64) 1035 us against
1213.

Layouts: data_layout "NCHW" (the image) or "NCHWxc" (blocked by any x, as a conv before it
wrote it: read through the block's index); kernel_layout "OIHW" (packed by a stage) or
"OIHWo" ([CO/oc_bn, C, KH, KW, oc_bn]: a constant weight, packed once by the packer; the
spec stays OIHW so that the config picks oc_bn); out_layout "NCHW" or "NCHWc".

    >>> from schedule.templates import instantiate
    >>> args = [((1, 3, 16, 16), "float32"), ((32, 3, 3, 3), "float32")]
    >>> s, ts = instantiate("conv2d_stem.x86", args, {"padding": 1, "strides": 2})
    >>> [t.name for t in ts], [int(d.value) for d in ts[-1].shape]
    (['data', 'kernel', 'conv2d_stem_unpack'], [1, 32, 8, 8])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from schedule.schedule import Schedule
from schedule.templates.common import (
    accumulator,
    best_divisor,
    divisor_at_most,
    fallback_split,
    fallback_value,
    parallel_knob_split,
    schedule_copy_stage,
    shape_of,
)
from schedule.templates.conv_common import conv_attrs, conv_layouts
from schedule.templates.registry import expect_args, placeholders, register_template
from schedule.templates.x86_depthwise_nchwc import guarded_conv_schedule, rows_default
from tensor_expr import tensor as T
from tensor_expr.expr import all as te_all
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError
from tessel_target import Target

NAME = "conv2d_stem.x86"
STEM, UNPACK = "conv2d_stem", "unpack"


def _compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
             ) -> tuple[list[Tensor], list[Tensor]]:
    dl, kl, ol = conv_layouts(NAME, attrs, ("NCHW", "NCHWxc"), ("OIHW", "OIHWo"))
    expect_args(NAME, args, 2, [4 if dl == "NCHW" else 5, 4])
    data, kernel = placeholders(args, ["data", "kernel"])
    ds, (CO, CI, KH, KW) = shape_of(data), shape_of(kernel)
    x = ds[4] if dl == "NCHWxc" else 1
    N, C, H, W = ds[0], ds[1] * x, ds[2], ds[3]
    a = conv_attrs(attrs)
    if a.groups != 1 or CI != C:
        raise ScheduleError(f"{NAME} handles groups=1 with the kernel's {CI} input channels "
                            f"equal to the data's {C}, got groups={a.groups}")
    OH, OW = a.out_hw(H, W, KH, KW)

    t = cfg.target
    oc0, reg0 = stem_blocks(CO, OW, t)
    cfg.define_split("tile_oc", CO, num_outputs=2,
                     filter=lambda f: f[-1] <= 4 * t.fp32_lanes or f[-1] == oc0)
    fallback_split(cfg, "tile_oc", [oc0])
    oc_bn = int(cfg["tile_oc"].size[-1])
    cfg.define_split("tile_ow", OW, num_outputs=2, max_factor=32)
    fallback_split(cfg, "tile_ow", [reg0])
    cfg.define_split("tile_oh", OH, num_outputs=2)
    fallback_split(cfg, "tile_oh", [rows_default(OH)])
    cfg.define_knob("parallel", ["rows", "channels"])
    fallback_value(cfg, "parallel", "channels" if N * CO // oc_bn >= 8 else "rows")
    cfg.define_knob("unroll_kw", [True, False])
    fallback_value(cfg, "unroll_kw", True)

    def pixel(n: Any, c: Any, y: Any, xx: Any) -> Any:
        return data[n, c, y, xx] if dl == "NCHW" else data[n, c // x, y, xx, c % x]

    if kl == "OIHWo":
        kernel = T.placeholder((CO // oc_bn, C, KH, KW, oc_bn), kernel.dtype, name="kernel")
        kvec = kernel
    else:
        kvec = T.compute((CO // oc_bn, C, KH, KW, oc_bn),
                         lambda o, c, y, xx, b: kernel[o * oc_bn + b, c, y, xx],
                         name="kernel_vec", tag="pack_kernel")
    rc = T.reduce_axis((0, C), name="rc")
    ry = T.reduce_axis((0, KH), name="kh")
    rx = T.reduce_axis((0, KW), name="kw")
    (sh, sw), (dh, dw) = a.strides, a.dilation
    pt, pl, pb, pr = a.padding

    def body(n: Any, o: Any, h: Any, w: Any, b: Any) -> Any:
        y, xx = h * sh + ry * dh - pt, w * sw + rx * dw - pl
        inside = [c for c, pad in ((y >= 0, pt), (y < H, pb), (xx >= 0, pl), (xx < W, pr))
                  if pad]
        return T.sum(accumulator(attrs, pixel(n, rc, y, xx))
                     * accumulator(attrs, kvec[o, rc, ry, rx, b]), axis=[rc, ry, rx],
                     where=te_all(*inside) if inside else None)

    conv = T.compute((N, CO // oc_bn, OH, OW, oc_bn), body, name="conv2d_stem", tag=STEM)
    cfg.add_flop(2.0 * N * CO * OH * OW * C * KH * KW)
    if ol == "NCHWc":
        return [data, kernel], [conv]
    out = T.compute((N, CO, OH, OW), lambda n, c, h, w: conv[n, c // oc_bn, h, w, c % oc_bn],
                    name="conv2d_stem_unpack", tag=UNPACK)
    return [data, kernel], [out]


def stem_blocks(CO: int, OW: int, target: Any, oc_fixed: int | None = None
                ) -> tuple[int, int]:
    """(oc_bn, reg_n) by default: accumulators fill at most half the vector registers (the
    other half holds the kernel vectors and the pixels neighbouring taps share), at least 8
    of them (FMA latency x ports) where the shape allows, then the fewest loads per FMA.
    `oc_fixed`: reg_n for that block alone (as pick_blocks' oc_fixed; benchmarks.block_probe
    asks so for other blocks).

        >>> stem_blocks(64, 112, "llvm -mcpu=skylake-avx512"), stem_blocks(64, 112,
        ...                                                             "llvm -mcpu=haswell")
        ((32, 8), (16, 4))

    Measured on MobileNetV2's 3x3/2 and ResNet-18's 7x7/2 stems, 1 thread, AVX-512: reg_n
    14 (pick_blocks' 28 accumulators) 230 and 3110 us, reg_n 8 141 and 1622 us.
    """
    t = Target.parse(target)
    lanes, budget = t.fp32_lanes, t.vector_registers // 2
    cands = []
    for oc_bn in ((oc_fixed,) if oc_fixed else (2 * lanes, lanes)):
        if CO % oc_bn:
            continue
        vecs = max(1, oc_bn // lanes)
        reg_n = divisor_at_most(OW, max(1, budget // vecs))
        acc = reg_n * vecs
        cands.append((acc >= 8, -(reg_n + vecs) / acc, oc_bn, reg_n))
    if not cands:  # output channels not a multiple of the vector width
        return oc_fixed or divisor_at_most(CO, lanes), divisor_at_most(OW, budget)
    _, _, oc_bn, reg_n = max(cands)
    return oc_bn, reg_n


# ---------------------------------------------------------------------------------------
# The schedule


def schedule_conv2d_stem(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """The stem: per (channel, tap) oc_bn / lanes kernel vectors x reg_n broadcast pixels."""
    s, CC, keep = guarded_conv_schedule(cfg, outs, STEM)
    oc_bn = shape_of(CC)[4]
    lanes = cfg.target.fp32_lanes
    cn, co, ch, cw, cb = s[CC].op.axis
    rc, ry, rx = s[CC].op.reduce_axis
    cwo, cwi = s[CC].split(cw, factor=int(cfg["tile_ow"].size[-1]))
    vec = best_divisor(oc_bn, [lanes, lanes // 2 or 1])
    cbo, cbi = s[CC].split(cb, factor=vec)
    s[CC].reorder(cn, co, ch, cwo, rc, ry, rx, cwi, cbo, cbi)
    if cfg["unroll_kw"].val:
        s[CC].unroll(rx)
    s[CC].unroll(cwi)
    s[CC].unroll(cbo)
    if vec > 1:
        s[CC].vectorize(cbi)
    for t in keep:  # the kernel's packing, when it is not a constant packed at build
        schedule_copy_stage(s, t)
    return s


def pack_oihwo(oc_bn: int) -> Callable[[np.ndarray], np.ndarray]:
    """The numpy packing OIHW -> [O/oc_bn, I, KH, KW, oc_bn]: `pack_oihwo(32)(w)`."""
    def pack(w: np.ndarray) -> np.ndarray:
        co, c, kh, kw = w.shape
        return np.ascontiguousarray(w.reshape(co // oc_bn, oc_bn, c, kh, kw)
                                    .transpose(0, 2, 3, 4, 1))
    return pack


def _packers(ins: Sequence[Tensor], args: Sequence[Any], attrs: dict[str, Any]
             ) -> dict[int, Callable[[np.ndarray], np.ndarray]]:
    """A logical OIHW kernel spec instantiated packed: the packing of its blocks."""
    kshape = shape_of(ins[1])
    if len(args[1][0]) == 4 and len(kshape) == 5:
        return {1: pack_oihwo(kshape[4])}
    return {}


register_template(NAME, "llvm", compute=_compute, packers=_packers,
                  constant_weight_attrs={"kernel_layout": "OIHWo"},
                  output_block="tile_oc", partition=parallel_knob_split)(schedule_conv2d_stem)
