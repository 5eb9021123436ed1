"""injective.cuda: the tunable GPU schedule of an injective group (elementwise, broadcast,
layout ops fused together), which otherwise takes the fixed generic schedule.

Injective stages that are not outputs are inlined; each output's axes are fused into one
flat index and split as

    flat = ((block * ept + e) * threads + thread) * vector + lane

`block` bound to blockIdx.x, `thread` to threadIdx.x, the `ept` elements-per-thread steps
unrolled between them (so that the threads of a warp touch neighbouring addresses at each
step: coalesced), and `lane` a vectorized loop that lowering.cuda.codegen emits as one
float4 / float2 / half2 / char4 access where the accesses are contiguous and aligned
(scalar code where they are not: a broadcast or transposed read). Extents that do not
divide get guards. A 0-d output is one thread's work.

Knobs, from the largest output's element count and dtype: threads (32 .. 1024), ept
(1, 2, 4, 8), vector (1, 2, 4 where the dtype has vector accesses and the count divides).
The fallback is the generic schedule's choice: 128 threads, one element each, 4-wide
vectors when 512 divides the count.

A tuning task describes a group by its input specs and its outputs (attrs["outputs"]:
[[shape, dtype], ...]), not by its ops: the knobs depend on the outputs' shapes only, and
the time of an injective kernel on the bytes it moves. The compute builder therefore
measures a stand-in with the group's traffic: each output element reads every input once
(broadcast where the input broadcasts to the output, else at the same flat position
modulo the input's size) and sums them in the output's dtype. Groups of the same shapes
share one task and one tuned record.

    >>> from schedule.templates import instantiate
    >>> s, args = instantiate("injective.cuda", [((4, 64), "float32"), ((64,), "float32")],
    ...                       {"outputs": [[(4, 64), "float32"]]}, target="cuda")
    >>> [t.name for t in args]
    ['x0', 'x1', 'out0']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensor_expr as te
from schedule.schedule import Schedule, create_schedule
from schedule.templates.common import fallback_value, inline_injective, shape_of
from schedule.templates.registry import ArgSpec, placeholders, register_template
from tensor_expr.expr import cast, const
from tensor_expr.tensor import ComputeOp, Tensor
from tessel_errors import ScheduleError

THREADS = (32, 64, 128, 256, 512, 1024)
EPT = (1, 2, 4, 8)
# the widths lowering.cuda.codegen emits as one vector access, per dtype
VECTOR_WIDTHS = {"float32": (2, 4), "int32": (2, 4), "float16": (2, 4), "int8": (4,)}
DEFAULT_THREADS = 128


def _numel(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def _broadcasts(src: Sequence[int], dst: Sequence[int]) -> bool:
    """numpy's rule: `src` (right-aligned) broadcasts to `dst`."""
    if len(src) > len(dst):
        return False
    return all(s in (1, d) for s, d in zip(reversed(src), reversed(dst)))


def _read(x: Tensor, out_shape: Sequence[int], ix: Sequence[Any]) -> Any:
    """x read at output index `ix`: broadcast, or at the flat position modulo its size."""
    xs = shape_of(x)
    if _broadcasts(xs, out_shape):
        lead = len(out_shape) - len(xs)
        return x[tuple(const(0) if n == 1 else ix[lead + k] for k, n in enumerate(xs))]
    flat: Any = const(0)
    for i, n in zip(ix, out_shape):
        flat = flat * int(n) + i
    flat = te.floormod(flat, max(1, _numel(xs)))
    idx = []
    for n in reversed(xs):
        idx.append(te.floormod(flat, int(n)))
        flat = te.floordiv(flat, int(n))
    return x[tuple(reversed(idx))]


def _outputs(attrs: dict[str, Any]) -> list[tuple[tuple[int, ...], str]]:
    outs = attrs.get("outputs")
    try:
        parsed = [(tuple(int(d) for d in shape), str(dtype)) for shape, dtype in outs]
    except (TypeError, ValueError):
        raise ScheduleError("template injective.cuda: attrs['outputs'] must be a list of "
                            f"[shape, dtype], got {outs!r}") from None
    if not parsed:
        raise ScheduleError("template injective.cuda: attrs['outputs'] is empty; a group "
                            "has at least one output")
    return parsed


def _injective_compute(cfg: Any, args: Sequence[ArgSpec], attrs: dict[str, Any]
                       ) -> tuple[list[Tensor], list[Tensor]]:
    """The stand-in with the group's memory traffic (see the module doc)."""
    xs = placeholders(args, [f"x{n}" for n in range(len(args))])
    outs = []
    for k, (shape, dtype) in enumerate(_outputs(attrs)):
        acc = "float32" if dtype.startswith("float") else "int32"

        def body(*ix: Any, _shape: tuple[int, ...] = shape, _acc: str = acc,
                 _dtype: str = dtype) -> Any:
            total: Any = const(0, _acc)
            for x in xs:
                total = total + cast(_read(x, _shape, ix), _acc)
            return cast(total, _dtype)

        outs.append(te.compute(shape, body, name=f"out{k}"))
    return xs, outs


def _vector_choices(numel: int, dtype: str) -> list[int]:
    return [1] + [v for v in VECTOR_WIDTHS.get(dtype, ()) if numel % v == 0]


def _knobs(cfg: Any, outs: Sequence[Tensor]) -> None:
    big = max(outs, key=lambda t: _numel(shape_of(t)))
    numel, dtype = max(1, _numel(shape_of(big))), big.dtype
    threads = [t for t in THREADS if t <= max(32, numel)]
    cfg.define_knob("threads", threads)
    cfg.define_knob("ept", [e for e in EPT if e == 1 or e * 32 <= numel])
    cfg.define_knob("vector", _vector_choices(numel, dtype))
    # the generic schedule's choice (schedule.templates.cuda_generic.bind_elementwise)
    fallback_value(cfg, "threads", min(DEFAULT_THREADS, threads[-1]))
    fallback_value(cfg, "ept", 1)
    vec = 4 if 4 in _vector_choices(numel, dtype) and \
        numel % (4 * DEFAULT_THREADS) == 0 else 1
    fallback_value(cfg, "vector", vec)


def bind_flat(s: Schedule, t: Tensor, threads: int, ept: int, vector: int) -> None:
    """Fuse the axes of root stage `t` and split them as the module doc says."""
    st = s[t]
    axes = list(st.op.axis)
    if not axes:
        return  # a 0-d result: one thread's work
    numel = _numel(shape_of(t))
    flat = st.fuse(*axes) if len(axes) > 1 else axes[0]
    if vector > 1 and numel % vector == 0:
        flat, lane = st.split(flat, factor=vector)
        st.vectorize(lane)
    groups = -(-numel // max(1, vector))
    threads = max(1, min(threads, groups))
    rest, tx = st.split(flat, factor=threads)
    if ept > 1 and groups > threads:
        bx, e = st.split(rest, factor=ept)
        st.reorder(bx, e, tx)
        st.unroll(e)
    else:
        bx = rest
    st.bind(bx, te.thread_axis("blockIdx.x"))
    st.bind(tx, te.thread_axis("threadIdx.x"))


def schedule_injective_cuda(cfg: Any, outs: Sequence[Tensor]) -> Schedule:
    """Elementwise groups: flat, coalesced, vectorized threads (see the module doc)."""
    outs = list(outs)
    s = create_schedule(outs)
    for op in s.stages:
        if isinstance(op.op, ComputeOp) and op.op.reduce_axis:
            raise ScheduleError("template injective.cuda: the group has a reduction "
                                f"('{op.op.name}'); it schedules injective groups only")
    _knobs(cfg, outs)
    inline_injective(s, outs)
    for o in outs:
        bind_flat(s, o, cfg["threads"].val, cfg["ept"].val, cfg["vector"].val)
    return s


register_template("injective.cuda", "cuda", compute=_injective_compute)(
    schedule_injective_cuda)

__all__ = ["bind_flat", "schedule_injective_cuda"]
