"""x86 depthwise conv2d (channel multiplier 1) in the blocked layout NCHW[x]c.

Each channel convolves alone, so a block of x channels is x independent lanes: the vector
runs over the block (contiguous in the blocked data, kernel and output), the register tile
over reg_n output columns of one vector of the block (reg_n accumulators; the vectors of
a wider block follow one another), and the window's taps are the reduction, kw unrolled
(the loads a neighbouring column's tap shares are one load after LLVM's GVN). The block
is the data's when it arrives blocked (data_layout "NCHWxc", as a conv before it wrote
it), else the target's vector width (the data then packs in one injective stage); the
output keeps the block (out_layout "NCHWc") or unpacks to NCHW. The block is never a
knob, so the space is the same whichever layout the data arrives in, and a config tuned
for the NCHW task applies to the blocked one.

Padding is no copy: the reduction carries the guard "this tap lies inside the data"
(`where=`), and the parallel loop runs over row chunks or channel blocks (knob
`parallel`), never fused with the rows, so lowering's loop_partition peels the border
rows and column tiles, the only places the guard can fail, and the interior runs
guard-free (where a kh row of taps is 16 or more statements, lowering's hoist_guards
makes the rows' guard the bounds of kh instead, and only the columns are peeled). A
stride reads every stride-th column and row directly: no output computed and thrown
away, no input copied. Knobs: tile_ow (columns in registers; default the
target's vector registers less the taps' inputs), tile_oh (rows per parallel chunk),
parallel ("rows" / "channels"), unroll_kw.

Inside MobileNetV2 (224x224, blocked in and out, AVX-512 host, 2 threads, load 0.8), the
model went from 1.81x ONNX Runtime's latency to 1.00x with this template and the stem's
(python -m benchmarks.models --models mobilenet_v2 --rounds 3 --repeat 5); the 14x14 and
7x7 layers run in 20 us against ORT's 25-30, the 112x112 and 56x56 ones, which move
megabytes, at 1.1-1.9x ORT's time.

A constant kernel comes packed (attrs kernel_layout="packed", what build asks for): the
spec stays [C, 1, KH, KW], the argument is [C/x, KH, KW, x], and the packer packs the
numpy weight once at build.

    >>> from schedule.templates import instantiate
    >>> args = [((1, 32, 8, 8), "float32"), ((32, 1, 3, 3), "float32")]
    >>> s, ts = instantiate("depthwise_conv2d_NCHWc.x86", args, {"padding": 1})
    >>> [t.name for t in ts]
    ['data', 'kernel', 'depthwise_unpack']
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from schedule.schedule import Schedule, create_schedule
from schedule.templates.common import (
    accumulator,
    best_divisor,
    divisor_at_most,
    fallback_split,
    fallback_value,
    find_anchor,
    injective_inputs,
    inline_injective,
    output_and_accumulator,
    parallel_fuse,
    parallel_knob_split,
    schedule_copy_stage,
    shape_of,
)
from schedule.templates.conv_common import conv_attrs, conv_layouts
from schedule.templates.registry import expect_args, placeholders, register_template
from tensor_expr import tensor as T
from tensor_expr.expr import all as te_all
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError
from tessel_target import Target

NAME = "depthwise_conv2d_NCHWc.x86"
DEPTHWISE, PACK_DATA, UNPACK = "depthwise_conv2d_NCHWc", "pack_data", "unpack"


def _compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
             ) -> tuple[list[Tensor], list[Tensor]]:
    dl, kl, ol = conv_layouts(NAME, attrs, ("NCHW", "NCHWxc"), ("OIHW", "packed"))
    expect_args(NAME, args, 2, [4 if dl == "NCHW" else 5, 4])
    data, kernel = placeholders(args, ["data", "kernel"])
    ds = shape_of(data)
    C = ds[1] if dl == "NCHW" else ds[1] * ds[4]
    N, H, W = ds[0], ds[2], ds[3]
    CO, one, KH, KW = shape_of(kernel)
    if one != 1 or CO != C:
        raise ScheduleError(f"{NAME}: needs a [C, 1, KH, KW] kernel (multiplier 1) for data "
                            f"of {C} channels, got {(CO, one, KH, KW)}")
    a = conv_attrs(attrs)
    if a.groups not in (1, C):
        raise ScheduleError(f"{NAME}: groups must equal the channels {C}, got {a.groups}")
    OH, OW = a.out_hw(H, W, KH, KW)
    t = cfg.target
    b = ds[4] if dl == "NCHWxc" else divisor_at_most(C, t.fp32_lanes)
    _define_knobs(cfg, t, N * C // b, OH, OW, KW)

    if dl == "NCHW":  # blocked by a copy; the padding is the reduction's guard, not a copy
        dvec = T.compute((N, C // b, H, W, b), lambda n, c, h, w, k: data[n, c * b + k, h, w],
                         name="data_vec", tag=PACK_DATA)
    else:
        dvec = data
    if kl == "packed":
        kernel = T.placeholder((C // b, KH, KW, b), kernel.dtype, name="kernel")
        kvec = kernel
    else:
        kvec = T.compute((C // b, KH, KW, b), lambda c, y, x, k: kernel[c * b + k, 0, y, x],
                         name="kernel_vec", tag="pack_kernel")
    ry = T.reduce_axis((0, KH), name="kh")
    rx = T.reduce_axis((0, KW), name="kw")
    (sh, sw), (dh, dw) = a.strides, a.dilation
    pt, pl, _, _ = a.padding

    def tap(h: Any, w: Any) -> tuple[Any, Any, Any]:
        """The input row and column a tap reads, and where they lie inside the data."""
        y, x = h * sh + ry * dh - pt, w * sw + rx * dw - pl
        inside = [c for c, pad in ((y >= 0, pt), (y < H, a.padding[2]),
                                   (x >= 0, pl), (x < W, a.padding[3])) if pad]
        return y, x, te_all(*inside) if inside else None

    def body(n: Any, c: Any, h: Any, w: Any, k: Any) -> Any:
        y, x, inside = tap(h, w)
        return T.sum(accumulator(attrs, dvec[n, c, y, x, k])
                     * accumulator(attrs, kvec[c, ry, rx, k]), axis=[ry, rx], where=inside)

    conv = T.compute((N, C // b, OH, OW, b), body, name="depthwise_conv2d_NCHWc",
                     tag=DEPTHWISE)
    cfg.add_flop(2.0 * N * C * OH * OW * KH * KW)
    if ol == "NCHWc":
        return [data, kernel], [conv]
    out = T.compute((N, C, OH, OW), lambda n, c, h, w: conv[n, c // b, h, w, c % b],
                    name="depthwise_unpack", tag=UNPACK)
    return [data, kernel], [out]


def _define_knobs(cfg: Any, target: Any, blocks: int, OH: int, OW: int, KW: int) -> None:
    """tile_ow (columns held in registers), tile_oh (rows per parallel chunk), parallel
    ("rows" or "channels"), unroll_kw; the defaults from the target's registers."""
    cfg.define_split("tile_ow", OW, num_outputs=2, max_factor=32)
    fallback_split(cfg, "tile_ow", [columns_default(OW, KW, target)])
    cfg.define_split("tile_oh", OH, num_outputs=2)
    fallback_split(cfg, "tile_oh", [rows_default(OH)])
    cfg.define_knob("parallel", ["rows", "channels"])
    # measured (AVX-512, 2 threads, us, rows vs channels): 576@14 27 vs 17, 960@7 11 vs 6.5,
    # 192@28 (6 blocks) 22 vs 22; one block (32@112) has nothing to share but rows
    fallback_value(cfg, "parallel", "channels" if blocks >= 4 else "rows")
    cfg.define_knob("unroll_kw", [True, False])
    fallback_value(cfg, "unroll_kw", True)


def columns_default(OW: int, KW: int, target: Any) -> int:
    """Output columns per register tile by default: 4 where they divide the row, else the
    most up to 8, within the registers (reg_n accumulators, the taps' inputs, a kernel
    vector). A depthwise conv moves more bytes than it computes: measured on MobileNetV2's
    layers (AVX-512, 1 thread, us): 32@112 s1 tile 16 126, 8 107, 4 104; 192@28 tile 14 32,
    7 34, 4 22; 576@14 tile 14 21, 7 19; and a wide tile only multiplies the code that
    loop_partition's border pieces repeat (build 1.5 s at 16 against 0.9 s at 4).

        >>> columns_default(112, 3, "llvm -mcpu=haswell"), columns_default(7, 3, "llvm")
        (4, 7)
    """
    cap = max(1, min(8, Target.parse(target).vector_registers - KW - 3))
    return 4 if OW % 4 == 0 and cap >= 4 else divisor_at_most(OW, cap)


def schedule_depthwise_nchwc(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Blocked depthwise: parallel over row chunks or channel blocks, reg_n columns x one
    vector of the block per register tile, the taps unrolled (see the module doc)."""
    s, CC, keep = guarded_conv_schedule(cfg, outs, DEPTHWISE)
    b = shape_of(CC)[4]
    lanes = cfg.target.fp32_lanes
    cn, cc, ch, cw, ck = s[CC].op.axis
    ry, rx = s[CC].op.reduce_axis
    cwo, cwi = s[CC].split(cw, factor=int(cfg["tile_ow"].size[-1]))
    vec = best_divisor(b, [lanes, lanes // 2 or 1])
    cko, cki = s[CC].split(ck, factor=vec)
    # channels are independent: one vector of the block at a time keeps reg_n accumulators
    s[CC].reorder(cn, cc, ch, cwo, cko, ry, rx, cwi, cki)
    if cfg["unroll_kw"].val:
        s[CC].unroll(rx)
    s[CC].unroll(cwi)
    if vec > 1:
        s[CC].vectorize(cki)
    for t in keep:
        if t.op.tag == PACK_DATA:
            _schedule_pack(s, t)
        else:  # the kernel's packing (a weight that is not a constant): a gather, small
            schedule_copy_stage(s, t, vector_ok=False)
    return s


def _schedule_pack(s: Schedule, t: Tensor) -> None:
    """NCHW data into blocks, a transpose of (channels x columns) tiles: parallel over the
    (n, c block, row) planes, 8 columns unrolled, each a vector of the block's channels.
    Measured against the plain serial copy stage (MobileNetV2's layers, NCHW in, AVX-512,
    2 threads, whole kernel, us): 32@112 281 -> 226, 144@56 314 -> 246, 576@14 57 -> 33."""
    n, c, h, w, k = s[t].op.axis
    wo, wi = s[t].split(w, factor=divisor_at_most(shape_of(t)[3], 8))
    s[t].reorder(n, c, h, wo, wi, k)
    parallel_fuse(s, t, [n, c, h])
    s[t].unroll(wi)
    s[t].vectorize(k)


def rows_default(oh: int) -> int:
    """Rows per parallel chunk by default: about 8 chunks (2 to 16 threads balance), or 1."""
    return divisor_at_most(oh, max(1, oh // 8))


def guarded_conv_schedule(cfg: Any, outs: Sequence[Tensor], tag: str
                          ) -> tuple[Schedule, Tensor, list[Tensor]]:
    """The schedule of a blocked conv group whose padding is a guard of its reduction, up
    to the micro-kernel: (schedule, the accumulator CC in "local", the injective inputs kept
    at root). Its output stage runs (row chunk, [n, c block], rows, column tiles of
    tile_ow) with CC at the column tile and vector stores along the channel block. The
    parallel loop (knob `parallel`) is the row chunks of tile_oh rows ("rows") or the
    (n, c block) pairs ("channels"), never a fusion with the rows: loop_partition then peels
    the border rows and column tiles (where the guard can fail) off the guard-free
    interior. Shared by the depthwise and the stem templates."""
    outs = list(outs)
    s = create_schedule(outs)
    conv = find_anchor(outs, tag)
    keep = injective_inputs(conv)
    inline_injective(s, outs, keep=keep)
    O = outs[0]
    if len(O.shape) == 4:  # unpacked to NCHW: the output stage reads the accumulator
        s[conv].set_scope("local")
        CC = conv
        n, c, h, w = s[O].op.axis
        co, cb = s[O].split(c, factor=shape_of(conv)[4])
    else:
        O, CC = output_and_accumulator(s, outs, conv)
        n, co, h, w, cb = s[O].op.axis
    ho, hi = s[O].split(h, factor=int(cfg["tile_oh"].size[-1]))
    wo, wi = s[O].split(w, factor=int(cfg["tile_ow"].size[-1]))
    if cfg["parallel"].val == "rows":
        s[O].reorder(ho, n, co, hi, wo, wi, cb)
        s[O].parallel(ho)
    else:
        s[O].reorder(n, co, ho, hi, wo, wi, cb)
        parallel_fuse(s, O, [n, co])
    s[CC].compute_at(s[O], wo)
    s[O].vectorize(cb if shape_of(conv)[4] > 1 else wi)
    return s, CC, keep


def pack_depthwise(block: int) -> Callable[[np.ndarray], np.ndarray]:
    """The numpy packing [C, 1, KH, KW] -> [C/block, KH, KW, block]."""
    def pack(w: np.ndarray) -> np.ndarray:
        c, _, kh, kw = w.shape
        return np.ascontiguousarray(w.reshape(c // block, block, kh, kw).transpose(0, 2, 3, 1))
    return pack


def _packers(ins: Sequence[Tensor], args: Sequence[Any], attrs: dict[str, Any]
             ) -> dict[int, Callable[[np.ndarray], np.ndarray]]:
    """A logical [C, 1, KH, KW] kernel spec instantiated packed: the packing of its blocks."""
    if (attrs or {}).get("kernel_layout") == "packed":
        return {1: pack_depthwise(shape_of(ins[1])[3])}
    return {}


register_template(NAME, "llvm", compute=_compute, packers=_packers,
                  constant_weight_attrs={"kernel_layout": "packed"},
                  partition=parallel_knob_split)(schedule_depthwise_nchwc)
