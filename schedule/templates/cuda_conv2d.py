"""CUDA templates for conv2d (NCHW, direct) and depthwise conv2d.

conv2d_nchw.cuda: each thread computes one output element; a block covers tile_co output
channels x tile_oh rows x tile_ow columns (threadIdx.z / y / x), the grid the batch and
channel blocks (blockIdx.z), the row blocks (y) and the column blocks (x). The input
channels step by tile_rc: at each step the block's threads load the padded input window
and the kernel slice it needs into shared memory together, then accumulate over the
channel step and the kernel window. Knobs: tile_co, tile_oh, tile_ow, tile_rc.

depthwise_conv2d_nchw.cuda: one thread per output, channels x rows x columns per block
(no data is shared between channels). Knobs: tile_c, tile_oh, tile_ow.

An epilogue (bias, batch-norm, relu, residual add) becomes its own elementwise kernel.

    >>> from schedule.templates import instantiate
    >>> s, args = instantiate("conv2d_nchw.cuda", [((1, 4, 8, 8), "float32"),
    ...                       ((8, 4, 3, 3), "float32")], {"padding": 1}, target="cuda")
    >>> [t.name for t in args]
    ['data', 'kernel', 'conv2d_nchw']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensor_expr as te
from schedule.schedule import Schedule, create_schedule
from schedule.templates.common import best_divisor, fallback_split, find_anchor, shape_of
from schedule.templates.cuda_generic import bind_elementwise
from schedule.templates.registry import register_template
from schedule.templates.x86_conv2d import CONV, DEPTHWISE, _conv_compute, _depthwise_compute
from tensor_expr.tensor import ComputeOp, Tensor


def _bind(s: Schedule, t: Tensor, axis: Any, tag: str) -> None:
    s[t].bind(axis, te.thread_axis(tag))


def _split3(cfg: Any, outs: list[Tensor], tag: str) -> tuple[Schedule, Tensor, Any]:
    s = create_schedule(outs)
    conv = find_anchor(outs, tag)
    for op in s.stages:  # everything but the conv and the outputs is inlined
        if isinstance(op.op, ComputeOp) and op.op is not conv.op and \
                all(op.op is not o.op for o in outs) and not op.op.reduce_axis:
            op.compute_inline()
    return s, conv, conv.op.input_tensors


def _thread_knobs(cfg: Any, channel_knob: str, CO: int, OH: int, OW: int) -> None:
    """The channel, row and column splits whose inner parts are a block's threads (z, y, x)
    and their defaults."""
    cfg.define_split(channel_knob, CO, num_outputs=2, filter=lambda f: f[-1] <= 16)
    cfg.define_split("tile_oh", OH, num_outputs=2, filter=lambda f: f[-1] <= 16)
    cfg.define_split("tile_ow", OW, num_outputs=2, filter=lambda f: f[-1] <= 32)
    fallback_split(cfg, channel_knob, [best_divisor(CO, [4, 8, 2])])
    fallback_split(cfg, "tile_oh", [best_divisor(OH, [4, 7, 8, 2])])
    fallback_split(cfg, "tile_ow", [best_divisor(OW, [8, 7, 14, 16, 4, 2])])


def _epilogue(s: Schedule, outs: list[Tensor], conv: Tensor) -> None:
    for o in outs:
        if o.op is not conv.op:
            bind_elementwise(s[o])


def schedule_conv2d_cuda(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Direct conv2d with shared-memory input and kernel tiles (see the module doc)."""
    outs = list(outs)
    s, conv, (pad, kernel) = _split3(cfg, outs, CONV)
    _, CO, OH, OW = shape_of(conv)
    C = int(conv.op.reduce_axis[0].dom.extent.value)
    _thread_knobs(cfg, "tile_co", CO, OH, OW)
    cfg.define_split("tile_rc", C, num_outputs=2, filter=lambda f: f[-1] <= 16)
    fallback_split(cfg, "tile_rc", [best_divisor(C, [4, 8, 2, 3])])
    data_tile = s.cache_read(pad, "shared", [conv])
    kernel_tile = s.cache_read(kernel, "shared", [conv])
    n, co, oh, ow = s[conv].op.axis
    rc, ry, rx = s[conv].op.reduce_axis
    coo, coi = cfg["tile_co"].apply(s, conv, co)
    oho, ohi = cfg["tile_oh"].apply(s, conv, oh)
    owo, owi = cfg["tile_ow"].apply(s, conv, ow)
    rco, rci = cfg["tile_rc"].apply(s, conv, rc)
    bz = s[conv].fuse(n, coo)
    s[conv].reorder(bz, oho, owo, coi, ohi, owi, rco, rci, ry, rx)
    for ax, tag in ((bz, "blockIdx.z"), (oho, "blockIdx.y"), (owo, "blockIdx.x"),
                    (coi, "threadIdx.z"), (ohi, "threadIdx.y"), (owi, "threadIdx.x")):
        _bind(s, conv, ax, tag)
    tz, ty, tx = (int(cfg[k].size[-1]) for k in ("tile_co", "tile_oh", "tile_ow"))
    for load in (data_tile, kernel_tile):
        s[load].compute_at(s[conv], rco)
        fused = s[load].fuse(*s[load].op.axis)
        _, inner = s[load].split(fused, factor=tz * ty * tx)
        lz, inner = s[load].split(inner, nparts=tz)
        ly, lx = s[load].split(inner, factor=tx)
        _bind(s, load, lz, "threadIdx.z")
        _bind(s, load, ly, "threadIdx.y")
        _bind(s, load, lx, "threadIdx.x")
    _epilogue(s, outs, conv)
    return s


def schedule_depthwise_cuda(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Depthwise conv2d, one thread per output element (see the module doc)."""
    outs = list(outs)
    s, conv, _ = _split3(cfg, outs, DEPTHWISE)
    _, CO, OH, OW = shape_of(conv)
    _thread_knobs(cfg, "tile_c", CO, OH, OW)
    n, c, oh, ow = s[conv].op.axis
    co, ci = cfg["tile_c"].apply(s, conv, c)
    oho, ohi = cfg["tile_oh"].apply(s, conv, oh)
    owo, owi = cfg["tile_ow"].apply(s, conv, ow)
    bz = s[conv].fuse(n, co)
    s[conv].reorder(bz, oho, owo, ci, ohi, owi, *s[conv].op.reduce_axis)
    for ax, tag in ((bz, "blockIdx.z"), (oho, "blockIdx.y"), (owo, "blockIdx.x"),
                    (ci, "threadIdx.z"), (ohi, "threadIdx.y"), (owi, "threadIdx.x")):
        _bind(s, conv, ax, tag)
    _epilogue(s, outs, conv)
    return s


register_template("conv2d_nchw.cuda", "cuda", compute=_conv_compute)(schedule_conv2d_cuda)
register_template("depthwise_conv2d_nchw.cuda", "cuda",
                  compute=_depthwise_compute)(schedule_depthwise_cuda)
