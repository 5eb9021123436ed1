"""What every x86 template shares: the host's vector width, finding the anchor op of a
fused group, inlining its injective stages, and picking good default tile factors.

    >>> from schedule.templates.common import best_divisor
    >>> best_divisor(56, [16, 8, 14, 7])
    8
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from schedule.schedule import Schedule
from schedule.space import FallbackConfig, SplitEntity
from tensor_expr.expr import IntImm, PrimExpr, cast
from tensor_expr.tensor import ComputeOp, Operation, Tensor
from tessel_errors import ScheduleError

# ---------------------------------------------------------------------------------------
# Fused groups: anchor, epilogue, injective stages


def walk_ops(outs: Sequence[Tensor]) -> list[Operation]:
    """Every op reachable from `outs`, producers before consumers."""
    order: list[Operation] = []
    seen: set[int] = set()
    stack: list[tuple[Operation, bool]] = [(t.op, False) for t in reversed(outs)]
    while stack:
        op, done = stack.pop()
        if done:
            order.append(op)
            continue
        if id(op) in seen:
            continue
        seen.add(id(op))
        stack.append((op, True))
        for t in reversed(op.input_tensors):
            if id(t.op) not in seen:
                stack.append((t.op, False))
    return order


def find_anchor(outs: Sequence[Tensor], tag: str | Sequence[str]) -> Tensor:
    """The output tensor of the (last) op tagged `tag` (or one of several tags) that `outs`
    are computed from: `find_anchor(outs, ("dense", "gemm"))`."""
    tags = (tag,) if isinstance(tag, str) else tuple(tag)
    found = [op for op in walk_ops(outs) if isinstance(op, ComputeOp) and op.tag in tags]
    if not found:
        names = ", ".join(t.op.name for t in outs)
        raise ScheduleError(f"no op tagged {' or '.join(repr(g) for g in tags)} feeds the "
                            f"outputs {names}; this template schedules such groups")
    return found[-1].output(0)


def injective_inputs(anchor: Tensor) -> list[Tensor]:
    """The anchor's inputs computed by injective stages (padding, packing): kept at root."""
    out: list[Tensor] = []
    for t in anchor.op.input_tensors:
        if is_injective(t.op) and all(t.op is not o.op for o in out):
            out.append(t)
    return out


def is_injective(op: Operation) -> bool:
    """A compute op without reduction: each output element from a few input elements."""
    return isinstance(op, ComputeOp) and not op.reduce_axis


def inline_injective(s: Schedule, outs: Sequence[Tensor], keep: Sequence[Tensor] = ()) -> None:
    """Inline every injective stage that is not an output and not in `keep`."""
    keep_ops = {id(t.op) for t in keep} | {id(t.op) for t in outs}
    for op in walk_ops(outs):
        if id(op) in keep_ops or not is_injective(op):
            continue
        st = s[op.output(0)]
        if st.attach_type != "inline":
            st.compute_inline()


def output_and_accumulator(s: Schedule, outs: Sequence[Tensor], anchor: Tensor
                           ) -> tuple[Tensor, Tensor]:
    """(O, CC): the stage that writes the group's output and the accumulator in "local".

    Without an epilogue the anchor is the output: CC = cache_write(anchor). With one, the
    anchor itself becomes the local accumulator computed at the output's tile, and every
    injective stage in between is inlined into the output stage.
    """
    out = outs[0]
    if out.op is anchor.op:
        return anchor, s.cache_write(anchor, "local")
    s[anchor].set_scope("local")
    return out, anchor


# ---------------------------------------------------------------------------------------
# Picking factors


def accumulator(attrs: dict[str, Any], e: PrimExpr) -> PrimExpr:
    """An operand of a product widened to the attrs' out_dtype (int8 x int8 summed in int32
    must multiply in int32), unchanged when out_dtype is absent or the same."""
    dt = attrs.get("out_dtype") or e.dtype
    return e if dt == e.dtype else cast(e, dt)


def const_extent(t: Any) -> int:
    """The int value of a constant extent / shape dimension."""
    if isinstance(t, int):
        return t
    if isinstance(t, IntImm):
        return t.value
    raise ScheduleError(f"x86 templates need constant shapes, got a symbolic extent {t}")


def shape_of(t: Tensor) -> list[int]:
    """The constant shape of a tensor, as ints."""
    return [const_extent(d) for d in t.shape]


def best_divisor(n: int, prefs: Sequence[int]) -> int:
    """The first of `prefs` that divides n, else the largest divisor of n below max(prefs)."""
    for p in prefs:
        if p > 0 and n % p == 0:
            return p
    top = max(prefs) if prefs else n
    return max(d for d in range(1, min(n, top) + 1) if n % d == 0)


def divisor_at_most(n: int, cap: int) -> int:
    """The largest divisor of n that is <= cap (at least 1)."""
    return max(d for d in range(1, max(1, min(n, cap)) + 1) if n % d == 0)


def fallback_split(cfg: Any, name: str, inner: Sequence[int]) -> None:
    """Set the default of split knob `name` to [-1, *inner] when cfg is a FallbackConfig."""
    if isinstance(cfg, FallbackConfig):
        cfg.fallback(name, SplitEntity([-1] + [int(f) for f in inner]))


def fallback_value(cfg: Any, name: str, value: Any) -> None:
    """Set the default of an other/reorder/annotate knob when cfg is a FallbackConfig."""
    if not isinstance(cfg, FallbackConfig):
        return
    knob = cfg.knobs[name]
    for ent in knob.entities:
        if ent.to_json() == value:
            cfg.fallback(name, ent)
            return
    raise ScheduleError(f"fallback value {value!r} is not a choice of knob '{name}'")


def parallel_knob_split(cfg: Any) -> str:
    """How a config splits its output among threads where its knob `parallel` says it
    outright ("rows", "channels", "rows_cols"): a template's `partition`
    (schedule.templates.partition_of).

        >>> from schedule.space import FallbackConfig
        >>> cfg = FallbackConfig("llvm")
        >>> cfg.define_knob("parallel", ["rows", "channels"])
        >>> parallel_knob_split(cfg)
        'rows'
    """
    return str(cfg["parallel"].val)


def parallel_fuse(s: Schedule, t: Tensor, axes: Sequence[Any]) -> Any:
    """Fuse the given adjacent outer axes into one parallel loop; returns it."""
    ax = s[t].fuse(*axes) if len(axes) > 1 else axes[0]
    s[t].parallel(ax)
    return ax


# a copy / layout stage this big is worth a parallel loop on the runtime's pool (a launch
# costs 1-4 us; a 16K-element copy about as much serially): parallel padding and layout
# stages from 16K elements, over (n, c, h) fused, made ResNet-18 4.6%, MobileNetV2 9% and
# ResNet-50 2.7% faster than serial ones below 1M elements over (n, c) (2 threads, Sapphire
# Rapids, load 0.7-1.0, interleaved A/B builds in one process)
PARALLEL_COPY_ELEMS = 1 << 14
COPY_FUSE = 3  # leading axes fused into the parallel loop (all but the last if fewer)


def schedule_copy_stage(s: Schedule, t: Tensor, vector_ok: bool = True) -> None:
    """A layout/padding stage at root: vectorized last axis, parallel only when large."""
    ax = list(s[t].op.axis)
    shape = shape_of(t)
    if vector_ok and shape[-1] > 1:
        s[t].vectorize(ax[-1])
    total = 1
    for d in shape:
        total *= d
    if total >= PARALLEL_COPY_ELEMS and len(ax) > 1:
        parallel_fuse(s, t, ax[:COPY_FUSE] if len(ax) > COPY_FUSE else ax[:len(ax) - 1])
