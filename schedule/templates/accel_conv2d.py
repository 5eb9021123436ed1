"""The accelerator's int8 conv2d and dense templates: VTA's conv2d schedule, with knobs.

Both take the logical operands (conv2d: data NCHW and kernel OIHW; dense: data [M, K] and
weight [N, K]; all int8) and compute in VTA's packed layouts (schedule.templates.
accel_layout: NCHW1n16c data, OIHW16o16i kernel; a dense layer is the 1x1 conv of a 1x1
image), so a tuning task is the logical layer and its packers pack each candidate's
operands. The output is the packed int8 result: the int32 accumulators narrowed by the
STORE (requantize with an epilogue first); a caller's epilogue may also keep the int32
result (`store_wide`), which the STORE writes as four byte planes.

The schedule is VTA's: the output is tiled into tile_b batch blocks x tile_co channel
blocks x tile_h rows x tile_w columns, each tile's accumulators (env.acc_scope) reset,
then per reduction step of tile_ci input channel blocks the zero-padded input window
(env.inp_scope: the LOAD's pad fields write the padding) and the weights are copied in
and the GEMM core runs (tensorize env.gemm) over the window; the epilogue (bias, residual
add, shifts, ReLU, clip) runs on the ALU in place (pragma alu, its tensor operands copied
into env.acc_scope), and one DMA stores the tile (pragma dma_copy). Knobs:

- tile_b, tile_co, tile_h, tile_w, tile_ci: the tile (what fits the buffers is the
  tuner's to find: a config whose buffers overflow an SRAM scope fails to build and is
  an error record);
- oc_nthread, h_nthread: two virtual threads (cthread) over the channel or row tiles, so
  one tile's loads overlap the other's GEMM (VTA's latency hiding);
- order: "spatial" (rows, then channel tiles; weights loaded at each reduction step, as
  VTA does) or "channel" (channel tiles outermost; a tile's weights for every input
  channel loaded once and kept for all its rows).

    >>> from schedule.templates import instantiate
    >>> s, args = instantiate("conv2d_packed.accel", [((1, 16, 8, 8), "int8"),
    ...                       ((16, 16, 3, 3), "int8")], {"padding": 1}, target="accel")
    >>> [(t.name, tuple(int(d.value) for d in t.shape)) for t in args]
    [('data', (1, 1, 8, 8, 1, 16)), ('kernel', (1, 1, 3, 3, 16, 16)), ('out', (1, 1, 8, 8, 1, 16))]
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from math import prod
from typing import Any

import tensor_expr as te
from schedule.schedule import Schedule, create_schedule
from schedule.space import FallbackConfig, SplitEntity
from schedule.templates.accel_env import Env
from schedule.templates.accel_layout import pack_data, pack_kernel
from schedule.templates.common import fallback_value, find_anchor, shape_of, walk_ops
from schedule.templates.registry import expect_args, register_template
from tensor_expr.ops.nn import pad4
from tensor_expr.ops.transform import pad_nd
from tensor_expr.tensor import ComputeOp, Tensor
from tessel_errors import ScheduleError

TAG = "conv2d_packed"
PAD_MAX = 15  # the LOAD's pad fields are 4 bits


def _pair(v: Any, name: str, template: str) -> tuple[int, int]:
    t = (v, v) if isinstance(v, int) else tuple(v)
    if len(t) != 2 or not all(isinstance(x, int) and x >= 1 for x in t):
        raise ScheduleError(f"template '{template}': {name} must be a positive int or a "
                            f"pair of them, got {v!r}")
    return int(t[0]), int(t[1])


def _check_int8(template: str, args: Sequence[Any]) -> None:
    for n, (_, dtype) in enumerate(args):
        if dtype != "int8":
            raise ScheduleError(f"template '{template}': argument {n} is {dtype}; the "
                                "accelerator multiplies int8 data by int8 weights (quantize "
                                "the model first: relay_ir.quantize)")


def packed_conv(env: Env, cfg: Any, n: int, c: int, h: int, w: int, o: int,
                kernel: tuple[int, int], strides: tuple[int, int],
                padding: tuple[int, int, int, int], flop: float
                ) -> tuple[list[Tensor], Tensor]:
    """([data, kernel] packed placeholders, the int32 packed conv) of one layer."""
    b, bi, bo = env.BATCH, env.BLOCK_IN, env.BLOCK_OUT
    nb, cb, ob = -(-n // b), -(-c // bi), -(-o // bo)
    kh, kw = kernel
    sh, sw = strides
    top, left, bottom, right = padding
    data = te.placeholder((nb, cb, h, w, b, bi), env.inp_dtype, name="data")
    kern = te.placeholder((ob, cb, kh, kw, bo, bi), env.wgt_dtype, name="kernel")
    pad = pad_nd(data, [0, 0, top, left, 0, 0], [0, 0, bottom, right, 0, 0], 0,
                 name="data_pad")
    oh = (h + top + bottom - kh) // sh + 1
    ow = (w + left + right - kw) // sw + 1
    ic = te.reduce_axis((0, cb), name="ic")
    dy = te.reduce_axis((0, kh), name="dy")
    dx = te.reduce_axis((0, kw), name="dx")
    it = te.reduce_axis((0, bi), name="ic_tns")
    acc = env.acc_dtype
    res = te.compute((nb, ob, oh, ow, b, bo), lambda bo_, co, y, x, bi_, ci: te.sum(
        pad[bo_, ic, y * sh + dy, x * sw + dx, bi_, it].astype(acc)
        * kern[co, ic, dy, dx, ci, it].astype(acc), axis=[ic, dy, dx, it]),
        name="conv2d_packed", tag=TAG, attrs={"strides": (sh, sw)})
    cfg.add_flop(flop)
    return [data, kern], res


def _conv_layer(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                ) -> tuple[list[Tensor], Tensor]:
    name = "conv2d_packed.accel"
    expect_args(name, args, 2, [4, 4])
    _check_int8(name, args)
    env = Env(cfg.target)
    (n, c, h, w), _ = args[0]
    (o, c2, kh, kw), _ = args[1]
    if c2 != c:
        raise ScheduleError(f"template '{name}': the kernel has {c2} input channels, the "
                            f"data {c} (groups are not supported on the accelerator)")
    if _pair(attrs.get("dilation", 1), "dilation", name) != (1, 1):
        raise ScheduleError(f"template '{name}': dilation must be 1 on the accelerator")
    strides = _pair(attrs.get("strides", 1), "strides", name)
    padding = pad4(attrs.get("padding", 0), name)
    if max(padding) > PAD_MAX:
        raise ScheduleError(f"template '{name}': padding {padding} exceeds the {PAD_MAX} "
                            "rows/columns the LOAD's pad fields hold")
    oh = (h + padding[0] + padding[2] - kh) // strides[0] + 1
    ow = (w + padding[1] + padding[3] - kw) // strides[1] + 1
    return packed_conv(env, cfg, n, c, h, w, o, (kh, kw), strides, padding,
                       2.0 * n * o * oh * ow * c * kh * kw)


def _dense_layer(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                 ) -> tuple[list[Tensor], Tensor]:
    name = "dense_packed.accel"
    expect_args(name, args, 2, [2, 2])
    _check_int8(name, args)
    env = Env(cfg.target)
    (m, k), _ = args[0]
    (n, k2), _ = args[1]
    if k2 != k:
        raise ScheduleError(f"template '{name}': the weight has {k2} columns, the data {k}")
    return packed_conv(env, cfg, m, k, 1, 1, n, (1, 1), (1, 1), (0, 0, 0, 0),
                       2.0 * m * n * k)


_LAYERS = {"conv2d_packed.accel": _conv_layer, "dense_packed.accel": _dense_layer}


def packed_layer(template: str, cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                 ) -> tuple[list[Tensor], Tensor]:
    """([data, kernel] packed placeholders, the packed int32 result) of a template's layer,
    for a caller that computes its own epilogue on the accumulators and then schedules
    `[narrowed output]` with `schedule_packed` (relay_ir's accelerator groups do).

        >>> from schedule.space import FallbackConfig
        >>> cfg = FallbackConfig("accel")
        >>> ins, acc = packed_layer("dense_packed.accel", cfg, [((2, 40), "int8"),
        ...                         ((10, 40), "int8")], {})
        >>> [t.name for t in ins], shape_of(acc), acc.dtype
        (['data', 'kernel'], [2, 1, 1, 1, 1, 16], 'int32')
        >>> s = schedule_packed(cfg, [narrow(Env("accel"), acc)])
    """
    return _LAYERS[template](cfg, args, attrs)


def narrow(env: Env, t: Tensor) -> Tensor:
    """`t` as the accelerator's int8 output (the STORE keeps the low 8 bits)."""
    return te.compute(t.shape, lambda *i: t[i].astype(env.out_dtype), name="out")


def store_wide(t: Tensor) -> Tensor:
    """`t`'s int32 accumulators as the output (stored as four byte planes, see
    lowering.accel.codegen), for a group whose result stays int32."""
    return te.compute(t.shape, lambda *i: t[i], name="out")


def _conv_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                  ) -> tuple[list[Tensor], list[Tensor]]:
    ins, res = _conv_layer(cfg, args, attrs)
    return ins, [narrow(Env(cfg.target), res)]


def _dense_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                   ) -> tuple[list[Tensor], list[Tensor]]:
    ins, res = _dense_layer(cfg, args, attrs)
    return ins, [narrow(Env(cfg.target), res)]


def _env_of(ins: Sequence[Tensor]) -> Env:
    """The core shape the packed placeholders were made for (what packing needs)."""
    d, k = shape_of(ins[0]), shape_of(ins[1])
    return Env(f"accel -batch={d[4]} -block={k[4]}")


def _packers(ins: Sequence[Tensor], args: Sequence[Any], attrs: dict[str, Any]
             ) -> dict[int, Any]:
    """Logical data and kernel -> the packed layouts the instantiated template takes."""
    env = _env_of(ins)
    return {0: lambda x: pack_data(env, x), 1: lambda k: pack_kernel(env, k)}


# -- the schedule ------------------------------------------------------------------------

def _operands(epilogue: list[ComputeOp], anchor: Tensor | None
              ) -> list[tuple[Tensor, ComputeOp]]:
    """(tensor, reader) of every input the epilogue reads besides the anchor and the
    stages it computes itself: a bias, a residual."""
    mine = {id(op) for op in epilogue} | ({id(anchor.op)} if anchor is not None else set())
    out = []
    for op in epilogue:
        for t in op.input_tensors:
            if id(t.op) not in mine and all(t.op is not u.op for u, _ in out):
                out.append((t, op))
    return out


def tile_needs(env: Env, shape: dict[str, int], tile: dict[str, int], order: str,
               threads: int, acc_operands: Sequence[Sequence[int]] = ()
               ) -> dict[str, int]:
    """Elements of each on-chip buffer a config takes, and its GEMM micro-ops (for the
    fallback's choice; the build checks for itself). `shape`: ob, cb, kh, kw, sh, sw;
    `tile`: b, co, h, w, ci; `acc_operands`: the packed shapes of the epilogue's tensors.

        >>> tile_needs(Env(), dict(ob=4, cb=4, kh=3, kw=3, sh=1, sw=1),
        ...            dict(b=1, co=2, h=4, w=56, ci=1), "channel", threads=2)
        {'INP': 696, 'WGT': 144, 'ACC': 896, 'UOP': 18}
    """
    wh = (tile["h"] - 1) * shape["sh"] + shape["kh"]
    ww = (tile["w"] - 1) * shape["sw"] + shape["kw"]
    inp = tile["b"] * tile["ci"] * wh * ww
    wgt_ci = shape["cb"] if order == "channel" else tile["ci"]
    wgt = tile["co"] * wgt_ci * shape["kh"] * shape["kw"]
    out = tile["b"] * tile["co"] * tile["h"] * tile["w"]
    acc = out
    for dims in acc_operands:  # batch blocks, channel blocks, rows, cols (1: broadcast)
        acc += prod(t if d > 1 else 1 for d, t in
                    zip(dims[:4], (tile["b"], tile["co"], tile["h"], tile["w"])))
    loops = sorted([tile["ci"], tile["w"], shape["kw"], shape["kh"], tile["co"], tile["h"],
                    tile["b"]])
    return {"INP": inp * threads, "WGT": wgt * threads, "ACC": acc * threads,
            "UOP": prod(loops[:-2])}


def _divisors(n: int) -> list[int]:
    return [d for d in range(n, 0, -1) if n % d == 0]


def _fallback(cfg: FallbackConfig, env: Env, shape: dict[str, int], dims: dict[str, int],
              acc_operands: list[list[int]]) -> None:
    """The largest tile that fits the buffers: whole rows, as many channel blocks as fit,
    then rows, input channel steps; weights kept per channel tile when they fit, two
    virtual threads over the channel tiles when there are two."""
    have = {b: env.depth(b) for b in ("INP", "WGT", "ACC", "UOP")}

    def candidates() -> Iterator[tuple[str, int, dict[str, int]]]:
        for order, threads, w, co, h, ci in itertools.product(
                ("channel", "spatial"), (2, 1), _divisors(dims["w"]), _divisors(dims["co"]),
                _divisors(dims["h"]), _divisors(dims["ci"])):
            if threads == 1 or (dims["co"] // co) % 2 == 0:
                yield order, threads, {"b": 1, "co": co, "h": h, "w": w, "ci": ci}

    best = next((c for c in candidates() if all(
        n <= have[k] for k, n in tile_needs(env, shape, c[2], c[0], c[1],
                                            acc_operands).items())), None)
    if best is None:
        return  # nothing fits: the first config, and its build says why
    order, threads, tile = best
    for knob, key in (("tile_b", "b"), ("tile_co", "co"), ("tile_h", "h"), ("tile_w", "w"),
                      ("tile_ci", "ci")):
        cfg.fallback(knob, SplitEntity([-1, tile[key]]))
    fallback_value(cfg, "order", order)
    fallback_value(cfg, "oc_nthread", threads)


def schedule_packed(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """VTA's conv2d schedule on a packed conv (or dense) and its ALU epilogue."""
    env = Env(cfg.target)
    outs = list(outs)
    if len(outs) != 1:
        raise ScheduleError("the accelerator's templates write one output")
    out = outs[0]
    s = create_schedule(outs)
    conv = find_anchor(outs, TAG)
    pad, kernel = conv.op.input_tensors[:2]
    between = [op for op in walk_ops(outs) if isinstance(op, ComputeOp)
               and op is not out.op and op is not conv.op and op is not pad.op]
    for op in between:
        if not op.axis:  # a scalar constant: an ALU immediate once inlined
            s[op.output(0)].compute_inline()
    epilogue = [op for op in between if op.axis]
    if out.op is conv.op:
        raise ScheduleError("the accelerator stores int8: the packed conv's output must be "
                            "narrowed by a last stage")
    if out.dtype not in (env.out_dtype, env.acc_dtype):
        raise ScheduleError(f"the accelerator stores {env.out_dtype} (or {env.acc_dtype}, "
                            f"as four byte planes) outputs; this group writes {out.dtype}")
    # the whole epilogue is one ALU stage, updating the accumulators in place
    for op in epilogue[:-1]:
        s[op.output(0)].compute_inline()
    alu = epilogue[-1].output(0) if epilogue else None
    operands = _operands(epilogue, conv)

    nb, ob, oh, ow, _, _ = shape_of(conv)
    _, cb, kh, kw, _, _ = shape_of(kernel)
    cfg.define_split("tile_b", nb, num_outputs=2)
    cfg.define_split("tile_co", ob, num_outputs=2)
    cfg.define_split("tile_h", oh, num_outputs=2)
    cfg.define_split("tile_w", ow, num_outputs=2)
    cfg.define_split("tile_ci", cb, num_outputs=2)
    cfg.define_knob("oc_nthread", [1, 2])
    cfg.define_knob("h_nthread", [1, 2])
    cfg.define_knob("order", ["spatial", "channel"])
    if isinstance(cfg, FallbackConfig):
        stride = dict(conv.op.attrs)["strides"]
        shape = {"ob": ob, "cb": cb, "kh": kh, "kw": kw, "sh": stride[0], "sw": stride[1]}
        dims = {"b": nb, "co": ob, "h": oh, "w": ow, "ci": cb}
        _fallback(cfg, env, shape, dims, [shape_of(t) for t, _ in operands])

    # -- the output tile ------------------------------------------------------------------
    b_o, c_o, y, x, b_i, c_i = s[out].op.axis
    b0, b1 = cfg["tile_b"].apply(s, out, b_o)
    co0, co1 = cfg["tile_co"].apply(s, out, c_o)
    y0, y1 = cfg["tile_h"].apply(s, out, y)
    x0, x1 = cfg["tile_w"].apply(s, out, x)
    order = cfg["order"].val
    outer = [co0, b0, y0] if order == "channel" else [b0, y0, co0]
    s[out].reorder(*outer, x0, b1, co1, y1, x1, b_i, c_i)
    stages = [conv] + ([alu] if alu is not None else [])
    for t in stages:
        s[t].set_scope(env.acc_scope)
        s[t].compute_at(s[out], x0)
    if alu is not None:
        s[alu].pragma(s[alu].op.axis[0], env.alu)
    for t, reader in operands:
        cached = s.cache_read(t, env.acc_scope, [reader.output(0)])
        s[cached].compute_at(s[out], x0)
        s[cached].pragma(s[cached].op.axis[0], env.dma_copy)
    # virtual threads over channel tiles and rows: one copy of each buffer per thread
    weight_at = co0
    threads = []
    for knob, axis, tile, extent in (("oc_nthread", co0, "tile_co", ob),
                                     ("h_nthread", y0, "tile_h", oh)):
        n = cfg[knob].val
        if n == 1:
            continue
        tiles = extent // cfg[tile].size[-1]
        if tiles % n:
            raise ScheduleError(f"{knob}={n} needs a multiple of {n} tiles along its axis, "
                                f"{tile}={cfg[tile].size[-1]} makes {tiles}; choose another "
                                f"{tile} or {knob}=1")
        rest, vt = s[out].split(axis, factor=n)
        outer = [rest if a is axis else a for a in outer]
        threads.append(vt)
        if axis is co0:
            weight_at = rest
    if threads:
        s[out].reorder(*threads, *outer)
        vt = s[out].fuse(*threads) if len(threads) > 1 else threads[0]
        s[out].bind(vt, te.thread_axis("cthread"))
    # -- the reduction --------------------------------------------------------------------
    cb_o, cc, cy, cx, cb_i, cc_i = s[conv].op.axis
    k_o, d_y, d_x, k_i = s[conv].op.reduce_axis
    s[conv].reorder(cb_o, k_o, cx, d_x, d_y, cc, cy, cb_i, cc_i, k_i)
    k0, _ = cfg["tile_ci"].apply(s, conv, k_o)
    cpad = pad
    s[cpad].set_scope(env.inp_scope)
    s[cpad].compute_at(s[conv], k0)
    ckernel = s.cache_read(kernel, env.wgt_scope, [conv])
    if order == "channel":
        s[ckernel].compute_at(s[out], weight_at)
    else:
        s[ckernel].compute_at(s[conv], k0)
    s[cpad].pragma(s[cpad].op.axis[0], env.dma_copy)
    s[ckernel].pragma(s[ckernel].op.axis[0], env.dma_copy)
    s[conv].tensorize(cb_i, env.gemm)
    s[out].pragma(b1, env.dma_copy)
    return s


def schedule_alu_packed(env: Env, outs: Sequence[Tensor]) -> Schedule:
    """An ALU-only group on packed tensors: each output tile's input loaded into the
    accumulators (with its tensor operands), the chain run in place, the tile stored;
    tiles of whole rows of as many channel blocks as fit half the accumulator buffer,
    two virtual threads over the channel tiles where there is an even number of them.

    Not a template (there is nothing to tune: the ALU runs one cycle per element
    whatever the tiling); relay_ir's accelerator groups use it for requantizations."""
    outs = list(outs)
    out = outs[0]
    s = create_schedule(outs)
    ops = [op for op in walk_ops(outs) if isinstance(op, ComputeOp) and op is not out.op]
    for op in ops:
        if not op.axis:
            s[op.output(0)].compute_inline()
    chain = [op for op in ops if op.axis]
    if not chain:
        raise ScheduleError("an ALU group needs an operation before its store")
    for op in chain[:-1]:
        s[op.output(0)].compute_inline()
    alu = chain[-1].output(0)
    operands = _operands(chain, None)
    nb, ob, h, w, _, _ = shape_of(out)
    full = sum(1 for t, _ in operands if shape_of(t)[2:4] == [h, w])
    half = env.depth("ACC") // 2
    co_t, h_t = 1, 1
    for co in sorted(d for d in range(1, ob + 1) if ob % d == 0):
        for rows in sorted(d for d in range(1, h + 1) if h % d == 0):
            if co * rows * w * full + co * (len(operands) - full) <= half:
                if co * rows >= co_t * h_t:
                    co_t, h_t = co, rows
    b_o, c_o, y, x, b_i, c_i = s[out].op.axis
    co0, co1 = s[out].split(c_o, factor=co_t)
    y0, y1 = s[out].split(y, factor=h_t)
    s[out].reorder(b_o, co0, y0, co1, y1, x, b_i, c_i)
    at = y0
    if (ob // co_t) % 2 == 0:
        rest, vt = s[out].split(co0, factor=2)
        s[out].reorder(vt, b_o, rest)
        s[out].bind(vt, te.thread_axis("cthread"))
    s[alu].set_scope(env.acc_scope)
    s[alu].compute_at(s[out], at)
    s[alu].pragma(s[alu].op.axis[0], env.alu)
    for t, reader in operands:
        cached = s.cache_read(t, env.acc_scope, [reader.output(0)])
        s[cached].compute_at(s[out], at)
        s[cached].pragma(s[cached].op.axis[0], env.dma_copy)
    s[out].pragma(co1, env.dma_copy)
    return s


register_template("conv2d_packed.accel", "accel", compute=_conv_compute,
                  packers=_packers)(schedule_packed)
register_template("dense_packed.accel", "accel", compute=_dense_compute,
                  packers=_packers)(schedule_packed)
