"""x86 grouped conv2d (ResNeXt, ShuffleNet: 1 < groups < channels) in the blocked layout.

Each group is a conv2d of C/G input and CO/G output channels. Channel blocks never
straddle two groups (ic_bn divides C/G, oc_bn divides CO/G), so the data packs to
NCHW[ic_bn]c exactly as for conv2d_NCHWc.x86, the kernel [CO, C/G, KH, KW] to
[CO/oc_bn, C/G/ic_bn, KH, KW, ic_bn, oc_bn], and output block `oc` reads the input blocks
of its own group only: `g * (C/G/ic_bn) + ico`. The loop nest is then conv2d_NCHWc's (its
schedule is reused as it is): parallel (n, oc block, oh), a reg_n x oc_bn register tile,
the oc block vectorized. Before this template a grouped conv got a generic loop nest.

Layouts: attrs `data_layout` "NCHW" (default) or "NCHWxc" (data blocked by any x, as the
conv before it wrote it in a model: the padding stage, which a grouped conv has anyway,
re-blocks it to tile_ic as it copies), `out_layout` "NCHW" (default: unpacked) or "NCHWc"
(the conv's blocks of tile_oc, which the next conv reads as they are). Version 2: a model
runs it blocked (relay_ir.backend.lower_group.GROUP_CONV_BLOCKED) and tuning times it so;
version 1's records were timed with NCHW in and out.

A constant kernel comes packed (attrs kernel_layout="OIHWio", what build asks for): the
packers pack the numpy weight once at build.

    >>> from schedule.templates import instantiate
    >>> args = [((1, 32, 8, 8), "float32"), ((64, 8, 3, 3), "float32")]
    >>> s, ts = instantiate("group_conv2d_NCHWc.x86", args, {"padding": 1, "groups": 4})
    >>> [t.name for t in ts]
    ['data', 'kernel', 'group_conv2d_unpack']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from schedule.templates.common import fallback_split, shape_of
from schedule.templates.conv_common import conv_attrs, conv_layouts, pad_hw
from schedule.templates.registry import expect_args, placeholders, register_template
from schedule.templates.x86_conv2d_nchwc import (
    CONV,
    PACK_KERNEL,
    UNPACK,
    _block_knob,
    conv_partition,
    pack_oihw,
    pick_blocks,
    register_rows,
    schedule_conv2d_nchwc,
    two_row_tile,
)
from tensor_expr import tensor as T
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError

# a register tile of two output rows where one row's has fewer than 8 accumulators (FMA
# latency x ports) because the registers cap it, as conv2d's ROWS_FOR_ACCUMULATORS: only
# AVX2's 16 registers meet it at ResNeXt-26's shapes (512@14 -> 14 and 512@28 -> 14 stride
# 2, 16 channels a group: 7 columns x 1 vector -> 2 x 7; AVX-512 has 14 x 1 there).
# AVX2 code, one Emerald Rapids core, CPU time, the kernel alone as the model runs it
# (NCHW in and out, packed weight), medians of 15 interleaved rounds of 20 calls (load
# 1.9-2.0), one row -> two: 512@14 574 -> 474 us, 512@28 -> 14 stride 2 756 -> 675 (one row
# of 14 columns: 473, 662). The 7x7 outputs (1024@14 stride 2, 1024@7: 32 channels a
# group) have no even row count; their plane of 7 x 1 tiles stays (tile_oc 16: 1.03-1.04x,
# tile scope 1.01-1.02x, tile_ic 4 0.96-0.97x, ic 16 0.96-1.03x: not worth a rule)
GROUP_ROWS_FOR_ACCUMULATORS = True


def _compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
             ) -> tuple[list[Tensor], list[Tensor]]:
    dl, kl, ol = conv_layouts("group_conv2d_NCHWc.x86", attrs, ("NCHW", "NCHWxc"),
                              ("OIHW", "OIHWio"))
    expect_args("group_conv2d_NCHWc.x86", args, 2, [4 if dl == "NCHW" else 5, 4])
    data, kernel = placeholders(args, ["data", "kernel"])
    ds, (CO, Cg, KH, KW) = shape_of(data), shape_of(kernel)
    xb = ds[4] if dl == "NCHWxc" else 0  # the block the data arrives in
    N, C, H, W = (ds[0], ds[1] * xb, ds[2], ds[3]) if xb else ds
    a = conv_attrs(attrs)
    G = a.groups
    if G < 2 or C % G or CO % G or C // G != Cg:
        raise ScheduleError(f"group_conv2d_NCHWc.x86: groups={G} does not fit data channels "
                            f"{C}, kernel {CO}x{Cg} (needs C = groups x kernel's input "
                            f"channels, CO divisible by groups, groups > 1)")
    COg = CO // G
    OH, OW = a.out_hw(H, W, KH, KW)
    ic0, oc0, reg0 = pick_blocks(Cg, COg, OW, None, cfg.target)
    ic_bn = _block_knob(cfg, "tile_ic", Cg, None, ic0)
    oc_bn = _block_knob(cfg, "tile_oc", COg, None, oc0, max_block=4 * cfg.target.fp32_lanes)
    cfg.define_split("tile_ow", OW, num_outputs=2, max_factor=32)
    fallback_split(cfg, "tile_ow", [reg0])
    register_rows(cfg, OH)
    if GROUP_ROWS_FOR_ACCUMULATORS and two_row_tile(OH, OW, oc_bn, reg0, cfg.target):
        fallback_split(cfg, "tile_oh", [2])  # see GROUP_ROWS_FOR_ACCUMULATORS
    icb, ocb = Cg // ic_bn, COg // oc_bn  # blocks per group

    def channel(n: Any, ch: Any, h: Any, w: Any) -> Any:
        # blocked data is re-blocked from the producer's block as the pad stage copies
        return data[n, ch // xb, h, w, ch % xb] if xb else data[n, ch, h, w]

    dpad = pad_hw(data, 2, a.padding, shape=(N, C // ic_bn, H, W, ic_bn), name="data_vec",
                  read=lambda n, c, h, w, b: channel(n, c * ic_bn + b, h, w))
    kshape = (CO // oc_bn, icb, KH, KW, ic_bn, oc_bn)
    if kl == "OIHW":
        kvec = T.compute(kshape, lambda o, i, y, x, bi, bo:
                         kernel[o * oc_bn + bo, i * ic_bn + bi, y, x],
                         name="kernel_vec", tag=PACK_KERNEL)
    else:  # packed once at build from the logical OIHW constant (see _packers)
        kernel = kvec = T.placeholder(kshape, kernel.dtype, name="kernel")
    ico = T.reduce_axis((0, icb), name="ic_outer")
    ici = T.reduce_axis((0, ic_bn), name="ic_inner")
    ry = T.reduce_axis((0, KH), name="kh")
    rx = T.reduce_axis((0, KW), name="kw")
    (sh, sw), (dh, dw) = a.strides, a.dilation
    conv = T.compute(
        (N, CO // oc_bn, OH, OW, oc_bn),
        lambda n, oc, h, w, ob: T.sum(
            dpad[n, (oc // ocb) * icb + ico, h * sh + ry * dh, w * sw + rx * dw, ici]
            * kvec[oc, ico, ry, rx, ici, ob], axis=[ico, ry, rx, ici]),
        name="group_conv2d_NCHWc", tag=CONV)
    cfg.add_flop(2.0 * N * CO * OH * OW * Cg * KH * KW)
    if ol == "NCHWc":
        return [data, kernel], [conv]
    out = T.compute((N, CO, OH, OW), lambda n, c, h, w: conv[n, c // oc_bn, h, w, c % oc_bn],
                    name="group_conv2d_unpack", tag=UNPACK)
    return [data, kernel], [out]


def _packers(ins: Sequence[Tensor], args: Sequence[Any], attrs: dict[str, Any]
             ) -> dict[int, Callable[[np.ndarray], np.ndarray]]:
    """A logical OIHW kernel instantiated packed: the packing of its blocks (a grouped
    kernel's OIHW is [CO, C/G, KH, KW], so conv2d's packing applies as it is)."""
    kshape = shape_of(ins[1])
    if len(args[1][0]) == 4 and len(kshape) == 6:
        return {1: pack_oihw(kshape[4], kshape[5])}
    return {}


register_template("group_conv2d_NCHWc.x86", "llvm", compute=_compute, packers=_packers,
                  constant_weight_attrs={"kernel_layout": "OIHWio"},
                  output_block="tile_oc", version=2,
                  partition=conv_partition)(schedule_conv2d_nchwc)
