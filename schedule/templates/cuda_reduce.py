"""CUDA templates for the reduction family: pooling, softmax and reductions, with knobs.

pool2d.cuda (max / avg, NCHW): one thread per output element, `threads` of them a block
(the output's axes fused, split, bound to blockIdx.x / threadIdx.x); the window loops
unrolled or not (`unroll_window`). An average pool's sum is a register of the thread that
divides it. Knobs: threads, unroll_window.

softmax.cuda (softmax / log_softmax over one axis): one block per row; the block's
`threads` threads share the row: the row's max and its sum of exponentials are
cross-thread reductions (warp shuffles or a shared-memory tree,
lowering.passes.thread_allreduce) kept in shared memory, then each thread writes its share
of the row's outputs. One kernel instead of three. Knob: threads.

reduce.cuda (sum / mean / max / min / prod over some axes): `mode` "serial" gives each
thread whole outputs (the reduce axes a loop in the thread, the group's tail computed in the
same thread), "cross" gives each output a block whose threads split the reduce axes (the
tail, such as mean's divide, is then a kernel of its own). Knobs: mode, threads.

An injective prologue is inlined into the reduction and an injective epilogue into the
output stage, as everywhere.

    >>> from schedule.templates import instantiate
    >>> s, args = instantiate("softmax.cuda", [((4, 100), "float32")], {"axis": -1},
    ...                       target="cuda")
    >>> [t.name for t in args]
    ['data', 'softmax']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensor_expr as te
from schedule.schedule import Schedule, create_schedule
from schedule.templates.common import fallback_value, inline_injective, shape_of, walk_ops
from schedule.templates.registry import ArgSpec, register_template
from tensor_expr import ops
from tensor_expr.tensor import ComputeOp, Tensor
from tessel_errors import ScheduleError

MAX_THREADS = 1024
POOL_TAGS = ("pool_max", "pool_sum")
REDUCERS = {"sum": ops.sum, "mean": ops.mean, "max": ops.max, "min": ops.min,
            "prod": ops.prod}


def _one_input(args: Sequence[ArgSpec], name: str) -> Tensor:
    if len(args) != 1:
        raise ScheduleError(f"template {name}: takes one input, got {len(args)}")
    shape, dtype = args[0]
    return te.placeholder(tuple(shape), dtype, name="data")


def _powers_of_two(upto: int, low: int = 32) -> list[int]:
    """32, 64, ... up to the power of two at or above `upto` (at most MAX_THREADS)."""
    out, t = [], low
    while True:
        out.append(t)
        if t >= upto or t >= MAX_THREADS:
            return out
        t *= 2


def _default_threads(cfg: Any, want: int) -> None:
    """The fallback of knob "threads": the largest choice at or below `want`."""
    choices = cfg.knobs["threads"].entities
    fits = [c.val for c in choices if c.val <= want]
    fallback_value(cfg, "threads", max(fits) if fits else choices[0].val)


def _numel(t: Tensor) -> int:
    n = 1
    for d in shape_of(t):
        n *= d
    return n


def _reductions(outs: Sequence[Tensor]) -> list[Tensor]:
    """The reduce stages of the group, producers first."""
    return [op.output(0) for op in walk_ops(outs)
            if isinstance(op, ComputeOp) and op.reduce_axis]


def _bind(s: Schedule, t: Tensor, axis: Any, tag: str) -> None:
    s[t].bind(axis, te.thread_axis(tag))


def _per_thread(s: Schedule, out: Tensor, threads: int) -> Any:
    """The output's axes fused and split into blocks of `threads`; the thread axis."""
    axes = list(s[out].op.axis)
    fused = s[out].fuse(*axes) if len(axes) > 1 else axes[0]
    bx, tx = s[out].split(fused, factor=max(1, min(threads, _numel(out))))
    _bind(s, out, bx, "blockIdx.x")
    _bind(s, out, tx, "threadIdx.x")
    return tx


# --- pool2d ---------------------------------------------------------------------------

def _pool_compute(cfg: Any, args: Sequence[ArgSpec], attrs: dict[str, Any]
                  ) -> tuple[list[Tensor], list[Tensor]]:
    data = _one_input(args, "pool2d.cuda")
    kind = attrs.get("op", "max")
    size = attrs.get("pool_size", 2)
    common = dict(pool_size=size, strides=attrs.get("strides") or size,
                  padding=attrs.get("padding", 0),
                  ceil_mode=bool(attrs.get("ceil_mode", False)), layout="NCHW")
    if attrs.get("layout", "NCHW") != "NCHW":
        raise ScheduleError("template pool2d.cuda: takes NCHW data")
    if kind == "max":
        out = ops.max_pool2d(data, **common)
    elif kind == "avg":
        out = ops.avg_pool2d(data, count_include_pad=bool(attrs.get("count_include_pad",
                                                                    True)), **common)
    else:
        raise ScheduleError(f"template pool2d.cuda: op must be 'max' or 'avg', got {kind!r}")
    return [data], [out]


def schedule_pool_cuda(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """One thread per pooled element (see the module doc)."""
    outs = list(outs)
    s = create_schedule(outs)
    pool = next((t for t in _reductions(outs) if t.op.tag in POOL_TAGS), None)
    if pool is None:
        raise ScheduleError("template pool2d.cuda: the group has no pooling stage")
    out = outs[0]
    inline_injective(s, outs)
    cfg.define_knob("threads", _powers_of_two(min(_numel(out), 512)))
    cfg.define_knob("unroll_window", [True, False])
    _default_threads(cfg, 256)
    tx = _per_thread(s, out, cfg["threads"].val)
    if pool.op is not out.op:  # the tail (avg's divide, an epilogue) divides the register
        s[pool].set_scope("local")
        s[pool].compute_at(s[out], tx)
    if cfg["unroll_window"].val:
        for r in s[pool].op.reduce_axis:
            s[pool].unroll(r)
    return s


# --- softmax --------------------------------------------------------------------------

def _softmax_compute(cfg: Any, args: Sequence[ArgSpec], attrs: dict[str, Any]
                     ) -> tuple[list[Tensor], list[Tensor]]:
    data = _one_input(args, "softmax.cuda")
    fn = ops.log_softmax if attrs.get("log", False) else ops.softmax
    return [data], [fn(data, axis=int(attrs.get("axis", -1)))]


def _row_axis(out: Tensor, reductions: Sequence[Tensor]) -> int:
    """The output axis the row reductions reduce over: ops.norm names a reduction's axis
    k<d> after the data axis d it runs along."""
    if len(shape_of(reductions[0])) != len(shape_of(out)) - 1:
        raise ScheduleError("template softmax.cuda: the group's reductions are not over "
                            "one axis of its output")
    red = reductions[0]
    name = red.op.reduce_axis[0].var.name
    if not name.startswith("k") or not name[1:].isdigit():
        raise ScheduleError("template softmax.cuda: cannot tell the reduced axis of "
                            f"'{red.op.name}'")
    return int(name[1:])


def schedule_softmax_cuda(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """One block per softmax row, its threads sharing the row (see the module doc)."""
    outs = list(outs)
    s = create_schedule(outs)
    reductions = _reductions(outs)
    out = outs[0]
    if not reductions or any(len(r.op.reduce_axis) != 1 for r in reductions):
        raise ScheduleError("template softmax.cuda: expects row reductions over one axis")
    axis = _row_axis(out, reductions)
    row_len = shape_of(out)[axis]
    cfg.define_knob("threads", _powers_of_two(row_len))
    _default_threads(cfg, 256)
    threads = cfg["threads"].val
    inline_injective(s, outs)
    axes = list(s[out].op.axis)
    rows = [a for d, a in enumerate(axes) if d != axis]
    row = s[out].fuse(*rows) if len(rows) > 1 else (rows[0] if rows else None)
    col_o, col_i = s[out].split(axes[axis], factor=threads)
    if row is None:  # a 1-d softmax: one block
        row, col_o = s[out].split(col_o, nparts=1)
    s[out].reorder(row, col_o, col_i)
    _bind(s, out, row, "blockIdx.x")
    _bind(s, out, col_i, "threadIdx.x")
    for red in reductions:
        _, ki = s[red].split(red.op.reduce_axis[0], factor=threads)
        s[red].set_scope("shared")
        s[red].compute_at(s[out], row)
        _bind(s, red, ki, "threadIdx.x")
    return s


# --- reduce ---------------------------------------------------------------------------

def _reduce_compute(cfg: Any, args: Sequence[ArgSpec], attrs: dict[str, Any]
                    ) -> tuple[list[Tensor], list[Tensor]]:
    data = _one_input(args, "reduce.cuda")
    op = attrs.get("op", "sum")
    if op not in REDUCERS:
        raise ScheduleError(f"template reduce.cuda: op must be one of "
                            f"{', '.join(REDUCERS)}, got {op!r}")
    axis = attrs.get("axis")
    axis = tuple(axis) if isinstance(axis, (list, tuple)) else axis
    return [data], [REDUCERS[op](data, axis=axis, keepdims=bool(attrs.get("keepdims",
                                                                          False)))]


def schedule_reduce_cuda(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Serial or cross-thread reduction (see the module doc)."""
    outs = list(outs)
    s = create_schedule(outs)
    reductions = _reductions(outs)
    if len(reductions) != 1:
        raise ScheduleError("template reduce.cuda: expects one reduction in the group, got "
                            f"{len(reductions)}")
    red, out = reductions[0], outs[0]
    red_len = 1
    for r in red.op.reduce_axis:
        red_len *= int(r.dom.extent.value)
    cfg.define_knob("mode", ["serial", "cross"])
    cfg.define_knob("threads", _powers_of_two(max(red_len, _numel(red))))
    fallback_value(cfg, "mode", "cross" if red_len >= 64 else "serial")
    _default_threads(cfg, 128 if red_len >= 256 or red_len < 64 else 32)
    threads = cfg["threads"].val
    inline_injective(s, outs)
    if cfg["mode"].val == "serial":
        if not shape_of(out):  # a 0-d result: one thread runs the whole reduction
            return s
        tx = _per_thread(s, out, threads)
        if red.op is not out.op:
            s[red].set_scope("local")
            s[red].compute_at(s[out], tx)
        return s
    raxes = list(s[red].op.reduce_axis)
    k = s[red].fuse(*raxes) if len(raxes) > 1 else raxes[0]
    ko, ki = s[red].split(k, factor=threads)
    kept = list(s[red].op.axis)
    if kept:
        o = s[red].fuse(*kept) if len(kept) > 1 else kept[0]
        _bind(s, red, o, "blockIdx.x")
    else:  # a 0-d result: the thread loop outermost, so that the nest is one kernel
        s[red].reorder(ki, ko)
    _bind(s, red, ki, "threadIdx.x")
    if red.op is not out.op:
        _per_thread(s, out, min(threads, 256))
    return s


register_template("pool2d.cuda", "cuda", compute=_pool_compute)(schedule_pool_cuda)
register_template("softmax.cuda", "cuda", compute=_softmax_compute)(schedule_softmax_cuda)
register_template("reduce.cuda", "cuda", compute=_reduce_compute)(schedule_reduce_cuda)

__all__ = ["schedule_pool_cuda", "schedule_reduce_cuda", "schedule_softmax_cuda"]
