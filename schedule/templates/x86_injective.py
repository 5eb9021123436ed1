"""Fixed x86 schedules for injective groups (elementwise, broadcast, layout), reductions
(sum / mean / max ..., pooling, global pooling) and softmax: parallel outer loops,
vectorized inner loops, injective producers inlined.

    >>> from schedule.templates import instantiate
    >>> s, ts = instantiate("injective.x86", [((4, 64), "float32")], {"op": "relu"})
    >>> [t.name for t in ts]
    ['x0', 'relu']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schedule.schedule import Schedule, create_schedule
from schedule.templates.common import (
    best_divisor,
    divisor_at_most,
    inline_injective,
    is_injective,
    output_and_accumulator,
    parallel_fuse,
    shape_of,
    walk_ops,
)
from schedule.templates.registry import placeholders, register_template
from tensor_expr import ops
from tensor_expr.expr import ProducerLoad, Reduce, Var
from tensor_expr.tensor import ComputeOp, Tensor
from tensor_expr.visitor import collect_vars, post_order_visit
from tessel_errors import ScheduleError

# below this many output elements a parallel region costs more than it saves
PARALLEL_MIN_ELEMS = 1 << 14

# ---------------------------------------------------------------------------------------
# Computations (from tensor_expr.ops)


def _op(name: str, attrs: dict[str, Any], table: dict[str, Any]) -> Any:
    op = attrs.get("op")
    if op not in table:
        raise ScheduleError(f"{name}: attrs['op'] must be one of {sorted(table)}, got {op!r}")
    return table[op]


_INJECTIVE = {n: getattr(ops, n) for n in (
    "relu", "sigmoid", "tanh", "exp", "negative", "sqrt", "add", "subtract", "multiply",
    "divide", "maximum", "minimum", "bias_add", "clip", "identity", "gelu")}


def _injective_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                       ) -> tuple[list[Tensor], list[Tensor]]:
    fn = _op("injective.x86", attrs, _INJECTIVE)
    xs = placeholders(args, [f"x{n}" for n in range(len(args))])
    return xs, [fn(*xs, **dict(attrs.get("op_attrs", {})))]


_REDUCE = {"sum": ops.sum, "mean": ops.mean, "max": ops.max, "min": ops.min, "prod": ops.prod}


def _reduce_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                    ) -> tuple[list[Tensor], list[Tensor]]:
    fn = _op("reduce.x86", attrs, _REDUCE)
    (x,) = placeholders(args, ["x"])
    return [x], [fn(x, axis=attrs.get("axis"), keepdims=bool(attrs.get("keepdims", False)))]


def _softmax_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                     ) -> tuple[list[Tensor], list[Tensor]]:
    (x,) = placeholders(args, ["x"])
    return [x], [ops.softmax(x, axis=int(attrs.get("axis", -1)))]


def _pool_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                  ) -> tuple[list[Tensor], list[Tensor]]:
    fn = _op("pool2d.x86", attrs, {"max": ops.max_pool2d, "avg": ops.avg_pool2d})
    (x,) = placeholders(args, ["data"])
    return [x], [fn(x, attrs.get("pool_size", 2), attrs.get("strides"),
                    attrs.get("padding", 0))]


def _global_pool_compute(cfg: Any, args: Sequence[Any], attrs: dict[str, Any]
                         ) -> tuple[list[Tensor], list[Tensor]]:
    fn = _op("global_pool2d.x86", attrs, {"max": ops.global_max_pool2d,
                                          "avg": ops.global_avg_pool2d})
    (x,) = placeholders(args, ["data"])
    return [x], [fn(x)]


# ---------------------------------------------------------------------------------------
# Schedules


def _numel(t: Tensor) -> int:
    n = 1
    for d in shape_of(t):
        n *= d
    return n


def schedule_injective_stage(s: Schedule, t: Tensor, lanes: int) -> None:
    """Vectorize the last axis (split by lanes when long), parallelize the fused others."""
    axes = list(s[t].op.axis)
    shape = shape_of(t)
    outer = axes[:-1]
    if shape and shape[-1] > 1:
        last = shape[-1]
        if last <= 4 * lanes:
            s[t].vectorize(axes[-1])
        else:
            v = best_divisor(last, [4 * lanes, 2 * lanes, lanes])
            if v >= lanes // 2 and v > 1:
                lo, li = s[t].split(axes[-1], factor=v)
                s[t].vectorize(li)
                outer = axes[:-1] + [lo]
    if outer and _numel(t) >= PARALLEL_MIN_ELEMS:
        parallel_fuse(s, t, outer)


def schedule_injective(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Elementwise / broadcast / layout groups: one fused, vectorized, parallel loop nest."""
    outs = list(outs)
    s = create_schedule(outs)
    inline_injective(s, outs)
    for o in outs:
        schedule_injective_stage(s, o, cfg.target.fp32_lanes)
    return s


def _loads(e: Any) -> list[ProducerLoad]:
    out: list[ProducerLoad] = []
    post_order_visit(e, lambda n: out.append(n) if isinstance(n, ProducerLoad) else None)
    return out


def _reduces_last_input_dim(op: ComputeOp) -> bool:
    """True when the innermost index of the reduction's main input holds no data axis of
    the op's last dim (a vector along the last data axis would not be contiguous)."""
    red = op.body[0]
    assert isinstance(red, Reduce)
    last = op.axis[-1].var if op.axis else None
    loads = _loads(red.source[0])
    if last is None or not loads:
        return True
    main = max(loads, key=lambda ld: len(ld.indices))
    used = {id(v) for v in collect_vars(main.indices[-1])} if main.indices else set()
    return id(last) not in used


def schedule_reduce_stage(s: Schedule, t: Tensor, lanes: int) -> None:
    """A reduction at root: data axes outer (parallel), reductions, then the vector axis."""
    op = t.op
    assert isinstance(op, ComputeOp)
    data, red = list(s[t].op.axis), list(s[t].op.reduce_axis)
    shape = shape_of(t)
    if data and shape[-1] > 1 and not _reduces_last_input_dim(op):
        # the last data axis is contiguous in the input: reduce loops outside, vector inside
        vec = data[-1]
        outer = data[:-1]
        if shape[-1] > 4 * lanes:
            v = best_divisor(shape[-1], [4 * lanes, 2 * lanes, lanes])
            if v > 1:
                vo, vec = s[t].split(vec, factor=v)
                outer = outer + [vo]
        s[t].reorder(*outer, *red, vec)
        s[t].vectorize(vec)
    else:
        outer = data
    if outer and _numel(t) * max(1, _red_size(op)) >= PARALLEL_MIN_ELEMS and \
            _numel(t) >= 2:
        parallel_fuse(s, t, outer)


def _red_size(op: ComputeOp) -> int:
    n = 1
    for r in op.reduce_axis:
        n *= int(r.dom.extent.value)  # type: ignore[union-attr]
    return n


def _blocked_window(op: ComputeOp) -> bool:
    """Whether `op` is a pooling window over the blocked layout NCHW[x]c: a 5-D result
    whose last (channel block) axis is contiguous in the input, and a small window."""
    return len(op.axis) == 5 and _red_size(op) <= 64 and not _reduces_last_input_dim(op)


def schedule_blocked_pool(s: Schedule, outs: Sequence[Tensor], pool: Tensor, lanes: int
                          ) -> None:
    """A pool over NCHW[x]c: parallel (n, c block, oh); per tile of reg_n output columns the
    window is unrolled into reg_n x block/lanes vector accumulators held in registers, then
    stored once (an epilogue such as avg-pool's scale is applied at the store). Each input
    vector is loaded once per window that covers it, each output written once: ResNet-18's
    3x3 stride-2 max pool reads its input about as fast as a copy reads it."""
    from schedule.templates.x86_conv2d_nchwc import schedule_output_tiles

    O, CC = output_and_accumulator(s, outs, pool)
    _, _, _, OW, block = shape_of(pool)
    vec = best_divisor(block, [lanes, lanes // 2 or 1])
    # 8 accumulators: enough independent max/add chains, and room left for the loads
    reg_n = divisor_at_most(OW, max(1, 8 // max(1, block // vec)))
    schedule_output_tiles(s, O, CC, block, reg_n)
    _, _, _, cw, ck = s[CC].op.axis
    ry, rx = s[CC].op.reduce_axis
    cwo, cwi = s[CC].split(cw, factor=reg_n)
    cko, cki = s[CC].split(ck, factor=vec)
    s[CC].reorder(cwo, ry, rx, cwi, cko, cki)
    for ax in (ry, rx, cwi, cko):
        s[CC].unroll(ax)
    s[CC].vectorize(cki)


def schedule_reduce(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Reductions and pooling: each reduction at root, vectorized where contiguous; the
    injective epilogue (mean's divide, avg-pool's scale) as its own vectorized stage. A
    group that is one pool over the blocked layout gets schedule_blocked_pool."""
    outs = list(outs)
    s = create_schedule(outs)
    inline_injective(s, outs)
    reds = [op for op in walk_ops(outs) if isinstance(op, ComputeOp) and op.reduce_axis]
    if len(outs) == 1 and len(reds) == 1 and len(reds[0].reduce_axis) == 2 and \
            _blocked_window(reds[0]) and shape_of(outs[0]) == shape_of(reds[0].output(0)):
        schedule_blocked_pool(s, outs, reds[0].output(0), cfg.target.fp32_lanes)
        return s
    for op in walk_ops(outs):
        if isinstance(op, ComputeOp) and op.reduce_axis:
            schedule_reduce_stage(s, op.output(0), cfg.target.fp32_lanes)
    for o in outs:
        if is_injective(o.op):
            schedule_injective_stage(s, o, cfg.target.fp32_lanes)
    return s


def schedule_softmax(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Softmax over trailing axes: one parallel loop over rows; per row the max, the exps
    (a row buffer), their sum and the vectorized normalisation."""
    outs = list(outs)
    s = create_schedule(outs)
    out = outs[0]
    stages = [op for op in walk_ops(outs) if isinstance(op, ComputeOp) and op is not out.op]
    reds = [op for op in stages if op.reduce_axis]
    nkept = len(reds[0].axis) if reds else 0
    trailing = all(len(r.axis) == nkept for r in reds) and nkept < len(out.shape) and \
        _kept_are_leading(out, reds)
    if not trailing:
        return schedule_reduce(cfg, outs)
    axes = list(s[out].op.axis)
    row = axes[:nkept]
    par = parallel_fuse(s, out, row) if row else None
    if len(axes) - nkept == 1:
        s[out].vectorize(axes[-1]) if shape_of(out)[-1] <= 4 * cfg.target.fp32_lanes else \
            _split_vec(s, out, axes[-1], cfg.target.fp32_lanes)
    for op in stages:
        st = s[op.output(0)]
        if par is None:
            continue
        if is_injective(op) and any(c is op for c in _readers_of(op, reds)):
            st.compute_at(s[out], par)
            st.set_scope("local")  # one row: on the stack, not malloc'd per row
            if len(op.axis) - nkept == 1:
                st.vectorize(list(st.op.axis)[-1])
        elif op.reduce_axis:
            st.compute_at(s[out], par)
            st.set_scope("local")
        else:
            st.compute_inline()
    return s


def _split_vec(s: Schedule, t: Tensor, ax: Any, lanes: int) -> None:
    v = best_divisor(shape_of(t)[-1], [4 * lanes, 2 * lanes, lanes])
    if v > 1:
        _, vi = s[t].split(ax, factor=v)
        s[t].vectorize(vi)


def _readers_of(op: ComputeOp, reds: list[ComputeOp]) -> list[ComputeOp]:
    """`op` itself when a reduction reads it (so it needs a buffer), else nothing."""
    return [op] if any(op.output(0) in r.input_tensors for r in reds) else []


def _kept_are_leading(out: Tensor, reds: list[ComputeOp]) -> bool:
    """True when every reduction's axes are the output's leading axes (softmax axis=-1)."""
    for r in reds:
        red = r.body[0]
        assert isinstance(red, Reduce)
        loads = _loads(red.source[0])
        rv = {id(a.var) for a in red.axis}
        for ld in loads:
            n = len(r.axis)
            for i, ix in enumerate(ld.indices):
                is_red = isinstance(ix, Var) and id(ix) in rv
                if (i < n) == is_red:
                    return False
    return True


register_template("injective.x86", "llvm", compute=_injective_compute,
                  tunable=False)(schedule_injective)
register_template("reduce.x86", "llvm", compute=_reduce_compute, tunable=False)(schedule_reduce)
register_template("softmax.x86", "llvm", compute=_softmax_compute,
                  tunable=False)(schedule_softmax)
register_template("pool2d.x86", "llvm", compute=_pool_compute, tunable=False)(schedule_reduce)
register_template("global_pool2d.x86", "llvm", compute=_global_pool_compute,
                  tunable=False)(schedule_reduce)
