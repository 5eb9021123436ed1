"""x86 int8 conv2d (int8 data and kernel, int32 accumulation) in blocked layouts, its inner
reduction the 4-wide int8 dot of schedule.templates.x86_int8_dot: VNNI's vpdpbusd where the
target has it, exact vpmaddwd pairs where it does not (TVM's conv2d_NCHWc_int8).

The vector runs over a block of oc_bn output channels, the register tile over reg_n output
columns: per input-channel block, kernel tap and group of 4 input channels the micro-kernel
broadcasts 4 input bytes per column and does one dot per column and vector of oc_bn.

Layouts: the data is shifted (x + 128; uint8, or uint16 pairs where the dot is vpmaddwd:
x86_int8_dot.Activations) and zero-padded by one injective stage into NCHW[ic_bn]c, ic_bn
a multiple of 4 (input channels padded to a multiple of 4 with the shifted zero); attrs
`data_layout` "NCHW" (default) or "NCHWxc" (int8 blocked by any x, as another conv wrote
it). `kernel_layout` "OIHW" (default: packed into words and summed into
the compensation by stages at every call) or "packed": the kernel argument, spec'd OIHW
int8, arrives as int32 [CO/oc_bn, ICB*KH*KW + 1, ic_bn/4, oc_bn] (row r = (icb, kh, kw),
each word 4 input channels' weights, the last row 128 * sum(w) per output channel in its
first ic_bn/4 slot), packed once by `input_packers`; output channels are padded to a
multiple of the vector. `out_layout` "NCHW" (default) or "NCHWc" (int32 [N, CO/oc_bn, OH,
OW, oc_bn]; output channels past CO, where CO is not a multiple of oc_bn, hold zeros).

    >>> from schedule.templates import instantiate
    >>> args = [((1, 16, 8, 8), "int8"), ((32, 16, 3, 3), "int8")]
    >>> s, ts = instantiate("conv2d_int8.x86", args, {"padding": 1, "out_dtype": "int32"},
    ...                     target="llvm -mcpu=cascadelake")
    >>> [(t.name, t.dtype) for t in ts]
    [('data', 'int8'), ('kernel', 'int8'), ('conv2d_int8_unpack', 'int32')]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from schedule.schedule import Schedule, create_schedule
from schedule.space import FallbackConfig
from schedule.templates.common import (
    best_divisor,
    fallback_split,
    fallback_value,
    schedule_copy_stage,
    shape_of,
)
from schedule.templates.conv_common import PAD, conv_attrs, conv_layouts
from schedule.templates.registry import expect_args, placeholders, register_template
from schedule.templates.x86_conv2d_nchwc import schedule_output_tiles
from schedule.templates.x86_int8_dot import (
    COMP_SHIFT,
    Activations,
    check_int8,
    dot4_intrin,
    dot4_term,
    guarded,
    int8_stages,
    int32_lanes,
    pack_words,
    word_of,
)
from tensor_expr import tensor as T
from tensor_expr.expr import cast, const
from tensor_expr.tensor import Tensor
from tessel_errors import ScheduleError
from tessel_target import Target

CONV, OUT, PADDED = "conv2d_NCHWc_int8", "conv2d_int8_out", "conv2d_int8_padded"
NAME = "conv2d_int8.x86"

# ---------------------------------------------------------------------------------------
# Choosing the blocks


def pick_blocks(C4: int, COV: int, OW: int, target: Target) -> tuple[int, int, int]:
    """(ic_bn / 4, oc_bn / lanes, reg_n) for C4 groups of 4 input channels, COV vectors of
    output channels and OW columns: at least 8 accumulators (dot latency x ports) when OW
    allows, no spills (the vpmaddwd path holds two int16 halves per weight vector and two
    broadcasts per column besides), then the fewest loads per dot."""
    spare = 4 if target.vector_registers == 32 else 6
    budget = target.vector_registers - spare
    cands = []
    for vecs in (2, 1, 4):
        if COV % vecs:
            continue
        for reg_n in range(1, min(OW, 28) + 1):
            acc = reg_n * vecs
            if OW % reg_n == 0 and acc + 2 * vecs <= budget:
                cands.append((min(acc, 8), -(reg_n + vecs) / acc, vecs, reg_n))
    _, _, vecs, reg_n = max(cands) if cands else (0, 0, 1, 1)
    return best_divisor(C4, [4, 2, 8, 1]), vecs, reg_n


# ---------------------------------------------------------------------------------------
# The computation


def _check_attrs(attrs: dict[str, Any], args: Sequence[Any]) -> tuple[str, str, str]:
    layouts = conv_layouts(NAME, attrs, ("NCHW", "NCHWxc"), ("OIHW", "packed"))
    expect_args(NAME, args, 2, [4 if layouts[0] == "NCHW" else 5, 4])
    check_int8(NAME, args, attrs, "kernel")
    return layouts  # type: ignore[return-value]


def _compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
             ) -> tuple[list[Tensor], list[Tensor]]:
    dl, kl, ol = _check_attrs(attrs, args)
    data, kernel = placeholders(args, ["data", "kernel"])
    ds, (CO, KC, KH, KW) = shape_of(data), shape_of(kernel)
    a = conv_attrs(attrs)
    if a.groups != 1:
        raise ScheduleError(f"{NAME} handles groups=1, got groups={a.groups}")
    N, C, H, W = ds if dl == "NCHW" else (ds[0], ds[1] * ds[4], ds[2], ds[3])
    if KC != C:
        raise ScheduleError(f"{NAME}: the kernel has {KC} input channels, the data {C}")
    OH, OW = a.out_hw(H, W, KH, KW)
    lanes = int32_lanes(cfg.target)
    C4, COV = -(-C // 4), -(-CO // lanes)

    ib0, vecs0, reg0 = pick_blocks(C4, COV, OW, cfg.target)
    cfg.define_split("tile_ic", C4, num_outputs=2, filter=lambda f: f[-1] <= 16)
    fallback_split(cfg, "tile_ic", [ib0])
    # oc_bn / lanes vectors per column are unrolled in the micro-kernel: keep it in registers
    cfg.define_split("tile_oc", COV, num_outputs=2, filter=lambda f: f[-1] <= 4)
    fallback_split(cfg, "tile_oc", [vecs0])
    cfg.define_split("tile_ow", OW, num_outputs=2, max_factor=28)
    fallback_split(cfg, "tile_ow", [reg0])
    ib4 = int(cfg["tile_ic"].size[-1])
    ic_bn, ICB = 4 * ib4, C4 // ib4
    oc_bn = lanes * int(cfg["tile_oc"].size[-1])
    OCB = COV * lanes // oc_bn

    # a 1x1 kernel without padding reads only every stride-th pixel: the packing stage
    # takes just those (a quarter of ResNet's stride-2 shortcut inputs), the conv steps by 1
    sub = (KH, KW, a.padding) == (1, 1, (0, 0, 0, 0)) and a.strides != (1, 1)
    step = a.strides if sub else (1, 1)
    acts = Activations.for_target(cfg.target, lanes)
    dpad = _shifted_data(data, dl, (N, C, H, W), ic_bn, a.padding, acts, step, (OH, OW))
    kernel_in, words, comp = _kernel_words(kernel, kl, ic_bn, oc_bn, ICB, (CO, C, KH, KW))
    ico = T.reduce_axis((0, ICB), name="ic_outer")
    ry = T.reduce_axis((0, KH), name="kh")
    rx = T.reduce_axis((0, KW), name="kw")
    ici = T.reduce_axis((0, ib4), name="ic_inner")
    k = T.reduce_axis((0, 4), name="ic_four")
    (sh, sw), (dh, dw) = (1, 1) if sub else a.strides, a.dilation
    conv = T.compute(
        (N, OCB, OH, OW, oc_bn),
        lambda n, oc, h, w, ob: T.sum(dot4_term(
            dpad[n, ico, h * sh + ry * dh, w * sw + rx * dw, ici * 4 + acts.slot(k)],
            words(oc, ico, ry, rx, ici, ob), k), axis=[ico, ry, rx, ici, k]),
        name=CONV, tag=CONV)
    cfg.add_flop(2.0 * N * CO * OH * OW * C * KH * KW)
    if ol == "NCHWc" or CO % oc_bn:
        out = T.compute((N, OCB, OH, OW, oc_bn),
                        lambda n, o, h, w, b: conv[n, o, h, w, b] - comp(o, b),
                        name=OUT, tag=OUT if ol == "NCHWc" else PADDED)
    if CO % oc_bn and ol == "NCHW":
        # the dot writes whole vectors: with padded channels the accumulators are kept
        # whole by a blocked result, which the output stage crops
        blocked = out
        out = T.compute((N, CO, OH, OW), lambda n, c, h, w: blocked[
            n, c // oc_bn, h, w, c % oc_bn], name="conv2d_int8_unpack", tag=OUT)
    elif ol == "NCHW":
        out = T.compute((N, CO, OH, OW), lambda n, c, h, w: conv[
            n, c // oc_bn, h, w, c % oc_bn] - comp(c // oc_bn, c % oc_bn),
            name="conv2d_int8_unpack", tag=OUT)
    return [data, kernel_in], [out]


def _shifted_data(data: Tensor, layout: str, nchw: tuple[int, int, int, int], ic_bn: int,
                  pads: tuple[int, int, int, int], acts: Activations,
                  step: tuple[int, int] = (1, 1), out_hw: tuple[int, int] = (0, 0)
                  ) -> Tensor:
    """data + 128 in NCHW[ic_bn]c as `acts` stores it, zero-padded (128 in the shifted
    domain) in H, W and in channels up to a multiple of ic_bn; with a `step` other than
    (1, 1) (a 1x1 kernel, no padding) only the out_hw pixels at multiples of the step."""
    N, C, H, W = nchw
    if step != (1, 1):
        C_p = -(-C // ic_bn) * ic_bn

        def strided(n: Any, co: Any, h: Any, w: Any, b: Any) -> Any:
            c = co * ic_bn + acts.channel(b)
            return guarded([c < C] if C_p > C else [], acts.shifted(
                _read(data, layout, n, c, h * step[0], w * step[1])), acts.pad)

        return T.compute((N, C_p // ic_bn, *out_hw, ic_bn), strided, name="data_u8", tag=PAD)
    pt, pl, pb, pr = pads
    C_p = -(-C // ic_bn) * ic_bn

    def f(n: Any, co: Any, hh: Any, ww: Any, b: Any) -> Any:
        c, h, w = co * ic_bn + acts.channel(b), hh - pt, ww - pl
        conds = ([h >= 0] if pt else []) + ([h < H] if pb else []) + \
            ([w >= 0] if pl else []) + ([w < W] if pr else []) + ([c < C] if C_p > C else [])
        return guarded(conds, acts.shifted(_read(data, layout, n, c, h, w)), acts.pad)

    return T.compute((N, C_p // ic_bn, H + pt + pb, W + pl + pr, ic_bn), f, name="data_u8",
                     tag=PAD)


def _read(data: Tensor, layout: str, n: Any, c: Any, h: Any, w: Any) -> Any:
    """data at logical (n, c, h, w), held NCHW or blocked NCHW[x]c."""
    if layout == "NCHW":
        return data[n, c, h, w]
    x = shape_of(data)[4]
    return data[n, c // x, h, w, c % x]


def _kernel_words(kernel: Tensor, layout: str, ic_bn: int, oc_bn: int, ICB: int,
                  oihw: tuple[int, int, int, int]
                  ) -> tuple[Tensor, Callable[..., Any], Callable[..., Any]]:
    """(the kernel input, word(oc, icb, kh, kw, ic4, ob), comp(oc, ob)): the packed
    argument, or stages that build the words and the compensation from an OIHW kernel."""
    CO, C, KH, KW = oihw
    ib4 = ic_bn // 4
    OCB = -(-CO // oc_bn)
    if layout == "packed":
        kp = T.placeholder((OCB, ICB * KH * KW + 1, ib4, oc_bn), "int32", name="kernel")
        rows = ICB * KH * KW
        return (kp, lambda oc, ico, ry, rx, ici, ob: kp[oc, (ico * KH + ry) * KW + rx, ici, ob],
                lambda o, b: kp[o, rows, 0, b])

    def w_at(o: Any, c: Any, y: Any, x: Any) -> Any:
        conds = ([o < CO] if OCB * oc_bn > CO else []) + ([c < C] if ICB * ic_bn > C else [])
        return guarded(conds, kernel[o, c, y, x], const(0, "int8"))

    kvec = T.compute(
        (OCB, ICB, KH, KW, ib4, oc_bn),
        lambda o, i, y, x, q, b: word_of([w_at(o * oc_bn + b, i * ic_bn + q * 4 + j, y, x)
                                          for j in range(4)]),
        name="kernel_words", tag="kernel_words")
    rc = T.reduce_axis((0, C), name="rc")
    kh = T.reduce_axis((0, KH), name="rkh")
    kw = T.reduce_axis((0, KW), name="rkw")
    comp = T.compute((OCB, oc_bn), lambda o, b: T.sum(
        cast(w_at(o * oc_bn + b, rc, kh, kw), "int32") * COMP_SHIFT, axis=[rc, kh, kw]),
        name="kernel_comp", tag="kernel_comp")
    return kernel, lambda oc, ico, ry, rx, ici, ob: kvec[oc, ico, ry, rx, ici, ob], \
        lambda o, b: comp[o, b]


# ---------------------------------------------------------------------------------------
# The schedule


def schedule_conv2d_int8(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Blocked int8 conv: parallel (n, oc-chunk, oh), reg_n x oc_bn accumulators, the
    4-wide dot tensorized over each vector of them."""
    outs = list(outs)
    s = create_schedule(outs)
    O, CC, keep, cropped = int8_stages(s, outs, CONV, PADDED)
    conv = CC
    oc_bn = shape_of(conv)[4]
    lanes = int32_lanes(cfg.target)

    cfg.define_knob("unroll_kw", [True, False])
    cfg.define_reorder("reduce_order", [0, 1, 2, 3], policy="candidate",
                       candidates=[[0, 1, 2, 3], [1, 2, 0, 3], [1, 0, 2, 3]])
    acts = Activations.for_target(cfg.target, lanes)
    if isinstance(cfg, FallbackConfig):
        # unrolled taps let LLVM keep the paired activations of neighbouring columns,
        # which spills them on 16-register AVX2 (measured 95 against 123 GOP/s, 1 thread)
        fallback_value(cfg, "unroll_kw", int(CC.op.reduce_axis[2].dom.extent.value) <= 3
                       and acts.dtype == "uint8")
    reg_n = int(cfg["tile_ow"].size[-1])

    schedule_output_tiles(s, O, CC, oc_bn, reg_n)

    # the micro-kernel: the dot over each vector of each column's accumulators
    cn, cco, ch, cw, ccb = s[CC].op.axis
    red = list(s[CC].op.reduce_axis)  # ic_outer, kh, kw, ic_inner, ic_four
    cwo, cwi = s[CC].split(cw, factor=reg_n)
    cbo, cbi = s[CC].split(ccb, factor=lanes)
    rord = [red[i] for i in cfg["reduce_order"].perm]
    s[CC].reorder(cn, cco, ch, cwo, *rord, cwi, cbo, cbi, red[4])
    if cfg["unroll_kw"].val:
        s[CC].unroll(red[2])
    s[CC].unroll(cwi)
    s[CC].unroll(cbo)
    s[CC].tensorize(cbi, dot4_intrin(lanes, acts))

    if cropped:  # the cropping output stage
        schedule_copy_stage(s, outs[0])
    # the layout / padding stages: parallel from 16K elements (see schedule_copy_stage)
    for t in keep:
        schedule_copy_stage(s, t, vector_ok=t.op.tag == PAD)
    return s


def pack_kernel(ic_bn: int, oc_bn: int) -> Callable[[np.ndarray], np.ndarray]:
    """The numpy packing of an int8 OIHW kernel into the template's "packed" layout for
    these blocks: `pack_kernel(16, 32)(w)`."""
    def pack(w: np.ndarray) -> np.ndarray:
        co, c, kh, kw = w.shape
        ib4, c_p = ic_bn // 4, -(-c // ic_bn) * ic_bn
        w = np.pad(np.asarray(w, "int8"), ((0, 0), (0, c_p - c), (0, 0), (0, 0)))
        # [CO, ICB, ib4, 4, KH, KW] -> [CO, ICB, KH, KW, ib4, 4]: the conv's dot order
        dots = w.reshape(co, c_p // ic_bn, ib4, 4, kh, kw).transpose(0, 1, 4, 5, 2, 3)
        words, comp = pack_words(dots.reshape(co, -1, 4), oc_bn)
        rows = words.reshape(words.shape[0], -1, ib4, oc_bn)
        last = np.zeros((words.shape[0], 1, ib4, oc_bn), np.int32)
        last[:, 0, 0, :] = comp
        return np.ascontiguousarray(np.concatenate([rows, last], axis=1))
    return pack


def _packers(ins: Sequence[Tensor], args: Sequence[Any], attrs: dict[str, Any]
             ) -> dict[int, Callable[[np.ndarray], np.ndarray]]:
    """A kernel instantiated "packed": the packing of its blocks."""
    if attrs.get("kernel_layout") != "packed":
        return {}
    kshape = shape_of(ins[1])
    return {1: pack_kernel(4 * kshape[2], kshape[3])}


register_template(NAME, "llvm", compute=_compute, packers=_packers,
                  constant_weight_attrs={"kernel_layout": "packed"})(schedule_conv2d_int8)
