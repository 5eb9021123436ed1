"""Injective transforms: transpose, reshape, pad, concatenate, take, strided_slice, cast,
expand_dims, squeeze, flatten. Each is one compute with tag "injective" (pad reads are
guarded with if_then_else, so no read ever leaves the input).

    >>> import tensor_expr as te
    >>> from tensor_expr import ops
    >>> x = te.placeholder((2, 3, 4), name="x")
    >>> [int(d.value) for d in ops.transpose(x, (2, 0, 1)).shape]
    [4, 2, 3]
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from typing import Any

from tensor_expr.arith.structural import structural_equal
from tensor_expr.expr import (
    IntImm,
    PrimExpr,
    all,
    as_expr,
    cast,
    const,
    floordiv,
    floormod,
    if_then_else,
)
from tensor_expr.expr import max as emax
from tensor_expr.expr import min as emin
from tensor_expr.ops.reduction import normalize_axes
from tensor_expr.tensor import Tensor, compute
from tessel_errors import TensorExprError

INJECTIVE = "injective"


def transpose(x: Tensor, axes: Sequence[int] | None = None) -> Tensor:
    """Permute dimensions like numpy.transpose (reverse when axes is None)."""
    nd = x.ndim
    perm = list(range(nd))[::-1] if axes is None else [a % nd if -nd <= a < nd else a
                                                       for a in axes]
    if sorted(perm) != list(range(nd)):
        raise TensorExprError(
            f"transpose: axes {list(axes or [])} are not a permutation of 0..{nd - 1} "
            f"for '{x.name}'")
    shape = [x.shape[p] for p in perm]

    def body(*idx: PrimExpr) -> PrimExpr:
        src: list[Any] = [None] * nd
        for d, p in enumerate(perm):
            src[p] = idx[d]
        return x[tuple(src)]

    return compute(shape, body, name="transpose", tag=INJECTIVE)


def reshape(x: Tensor, newshape: Sequence[Any]) -> Tensor:
    """Same elements in row-major order, new shape; one dimension may be -1."""
    dims = [as_expr(d) for d in ([newshape] if isinstance(newshape, int) else newshape)]
    unknown = [d for d, e in enumerate(dims) if isinstance(e, IntImm) and e.value == -1]
    total = _numel(x.shape)
    if len(unknown) > 1:
        raise TensorExprError("reshape: at most one dimension may be -1")
    if unknown:
        known = _numel([e for d, e in enumerate(dims) if d not in unknown])
        if not (isinstance(total, IntImm) and isinstance(known, IntImm)) or known.value == 0 \
                or total.value % known.value:
            raise TensorExprError(
                f"reshape: cannot infer -1 reshaping '{x.name}' of {total} elements to "
                f"{[str(d) for d in dims]}")
        dims[unknown[0]] = IntImm(total.value // known.value, "int32")
    new_total = _numel(dims)
    if isinstance(total, IntImm) and isinstance(new_total, IntImm) and \
            total.value != new_total.value:
        raise TensorExprError(
            f"reshape: '{x.name}' has {total.value} elements, the shape "
            f"{[str(d) for d in dims]} has {new_total.value}")

    def body(*idx: PrimExpr) -> PrimExpr:
        flat: PrimExpr = const(0)
        for i, dim in zip(idx, dims):
            flat = flat * dim + i
        return x[unravel(flat, x.shape)]

    return compute(dims, body, name="reshape", tag=INJECTIVE)


def _numel(shape: Sequence[PrimExpr]) -> PrimExpr:
    out: PrimExpr = const(1)
    for d in shape:
        out = out * d
    return out


def unravel(flat: PrimExpr, shape: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
    """Row-major indices of the flat position `flat` in `shape`."""
    out: list[PrimExpr] = []
    stride: PrimExpr = const(1)
    for dim in reversed(shape):
        q = floordiv(flat, stride)
        out.append(q if len(out) == len(shape) - 1 else floormod(q, dim))
        stride = stride * dim
    return tuple(reversed(out))


def pad(x: Tensor, pad_width: Any, value: Any = 0.0, name: str = "pad") -> Tensor:
    """Constant padding like numpy.pad: `ops.pad(x, ((0, 0), (1, 2)), value=0.0)`.

    pad_width is an int (all sides), one (before, after) pair for every dim, or a sequence
    of pairs (one per dim)."""
    nd = x.ndim
    if isinstance(pad_width, int):
        pairs = [(pad_width, pad_width)] * nd
    else:
        pw = list(pad_width)
        if len(pw) == 2 and builtins.all(isinstance(e, int) for e in pw):
            pairs = [(pw[0], pw[1])] * nd
        else:
            pairs = [tuple(p) for p in pw]
    if len(pairs) != nd or any(len(p) != 2 for p in pairs):
        raise TensorExprError(
            f"pad: pad_width {pad_width!r} does not give (before, after) for each of the "
            f"{nd} dimensions of '{x.name}'")
    return pad_nd(x, [p[0] for p in pairs], [p[1] for p in pairs], value, name)


def pad_nd(x: Tensor, before: Sequence[Any], after: Sequence[Any], value: Any = 0.0,
           name: str = "pad") -> Tensor:
    """Pad `before[d]` and `after[d]` elements of `value` on each dim d (if_then_else reads)."""
    bef = [as_expr(b) for b in before]
    aft = [as_expr(a) for a in after]
    for b in bef + aft:
        if isinstance(b, IntImm) and b.value < 0:
            raise TensorExprError(f"{name}: padding must be non-negative, got {b.value}")
    shape = [d + b + a for d, b, a in zip(x.shape, bef, aft)]
    fill = cast(as_expr(value, x.dtype), x.dtype)

    def body(*idx: PrimExpr) -> PrimExpr:
        conds, src = [], []
        for i, dim, b, a in zip(idx, x.shape, bef, aft):
            src.append(i - b)
            if not (isinstance(b, IntImm) and b.value == 0):
                conds.append(i >= b)
            if not (isinstance(a, IntImm) and a.value == 0):
                conds.append(i < b + dim)
        if not conds:
            return x[tuple(src)]
        return if_then_else(all(*conds), x[tuple(src)], fill)

    return compute(shape, body, name=name, tag=INJECTIVE + ",pad")


def concatenate(tensors: Sequence[Tensor], axis: int = 0) -> Tensor:
    """Join tensors along `axis` like numpy.concatenate (reads guarded by if_then_else)."""
    ts = list(tensors)
    if not ts:
        raise TensorExprError("concatenate: needs at least one tensor")
    nd, first = ts[0].ndim, ts[0]
    ax = normalize_axes(nd, axis, "concatenate", first.name)[0] if nd else 0
    for t in ts[1:]:
        if t.ndim != nd or t.dtype != first.dtype:
            raise TensorExprError(
                f"concatenate: '{t.name}' ({t.ndim} dims, {t.dtype}) does not match "
                f"'{first.name}' ({nd} dims, {first.dtype})")
        for d in range(nd):
            if d != ax and not structural_equal(t.shape[d], first.shape[d]):
                raise TensorExprError(
                    f"concatenate: dimension {d} of '{t.name}' is {t.shape[d]}, of "
                    f"'{first.name}' {first.shape[d]}; only axis {ax} may differ")
    offsets: list[PrimExpr] = [const(0)]
    for t in ts:
        offsets.append(offsets[-1] + t.shape[ax])
    shape = list(first.shape)
    shape[ax] = offsets[-1]

    def body(*idx: PrimExpr) -> PrimExpr:
        def read(k: int) -> PrimExpr:
            sub = list(idx)
            sub[ax] = idx[ax] - offsets[k]
            return ts[k][tuple(sub)]

        out = read(len(ts) - 1)
        for k in range(len(ts) - 2, -1, -1):
            out = if_then_else(idx[ax] < offsets[k + 1], read(k), out)
        return out

    return compute(shape, body, name="concatenate", tag=INJECTIVE)


def take(a: Tensor, indices: Any, axis: int | None = None, mode: str = "clip") -> Tensor:
    """Gather along `axis` (flattened when None) like numpy.take; mode "clip" clamps the
    index into range, "wrap" takes it modulo the extent, "fast" trusts it."""
    if mode not in ("clip", "wrap", "fast"):
        raise TensorExprError(f"take: mode must be 'clip', 'wrap' or 'fast', got {mode!r}")
    if isinstance(indices, Tensor):
        if indices.dtype not in ("int8", "int16", "int32", "int64", "uint8", "uint16",
                                 "uint32", "uint64"):
            raise TensorExprError(
                f"take: indices '{indices.name}' have dtype {indices.dtype}; need integers")
        ishape = list(indices.shape)

        def index_at(idx: Sequence[PrimExpr]) -> PrimExpr:
            return indices[tuple(idx)]
    else:
        fixed = as_expr(indices, "int32")
        ishape = []

        def index_at(idx: Sequence[PrimExpr]) -> PrimExpr:
            return fixed

    if axis is None:
        extent = _numel(a.shape)
        lead: list[PrimExpr] = []
        trail: list[PrimExpr] = []
    else:
        ax = normalize_axes(a.ndim, axis, "take", a.name)[0]
        extent = a.shape[ax]
        lead, trail = list(a.shape[:ax]), list(a.shape[ax + 1:])
    ni = len(ishape)

    def body(*idx: PrimExpr) -> PrimExpr:
        raw = index_at(idx[len(lead):len(lead) + ni])
        n = cast(extent, raw.dtype)
        if mode == "clip":
            j = emin(emax(raw, const(0, raw.dtype)), n - 1)
        elif mode == "wrap":
            j = floormod(raw, n)
        else:
            j = raw
        if axis is None:
            return a[unravel(j, a.shape)]
        return a[tuple(idx[:len(lead)]) + (j,) + tuple(idx[len(lead) + ni:])]

    return compute(lead + ishape + trail, body, name="take", tag=INJECTIVE)


def strided_slice(x: Tensor, begin: Sequence[Any], end: Sequence[Any],
                  strides: Sequence[Any] | None = None, axes: Sequence[int] | None = None
                  ) -> Tensor:
    """x[begin:end:strides] per axis with numpy's rules (negative indices and strides,
    clamping, None for open ends): `ops.strided_slice(x, [0, -1], [4, None], [1, -2])`."""
    nd = x.ndim
    ax_list = list(range(len(begin))) if axes is None else [a % nd for a in axes]
    strides = [1] * len(ax_list) if strides is None else list(strides)
    if not (len(begin) == len(end) == len(strides) == len(ax_list)) or len(ax_list) > nd:
        raise TensorExprError(
            f"strided_slice: begin {list(begin)}, end {list(end)}, strides {strides} and axes "
            f"{ax_list} must have one entry per sliced axis of '{x.name}' ({nd} dims)")
    starts: list[PrimExpr] = [const(0)] * nd
    steps = [1] * nd
    shape = list(x.shape)
    for b, e, s, ax in zip(begin, end, strides, ax_list):
        if s == 0:
            raise TensorExprError("strided_slice: a stride of 0 is not allowed")
        dim = x.shape[ax]
        if not isinstance(dim, IntImm):
            if (b in (None, 0)) and e is None and s == 1:
                continue  # the whole symbolic axis
            raise TensorExprError(
                f"strided_slice: axis {ax} of '{x.name}' is symbolic ({dim}); only the full "
                "slice is supported on symbolic axes")
        start, stop, step = slice(b, e, s).indices(dim.value)
        shape[ax] = IntImm(len(range(start, stop, step)), "int32")
        starts[ax], steps[ax] = const(start), step

    def body(*idx: PrimExpr) -> PrimExpr:
        return x[tuple(st + i * sp if sp != 1 else st + i
                       for i, st, sp in zip(idx, starts, steps))]

    return compute(shape, body, name="strided_slice", tag=INJECTIVE)


def cast_op(x: Tensor, dtype: str) -> Tensor:
    """Convert elements to `dtype` (float to int truncates toward 0): `ops.cast(x, "int8")`."""
    return compute(x.shape, lambda *i: cast(x[i], dtype), name="cast", tag="elemwise")


def expand_dims(x: Tensor, axis: int, num_newaxis: int = 1) -> Tensor:
    """Insert `num_newaxis` dimensions of 1 at `axis` (-ndim-1 <= axis <= ndim)."""
    nd = x.ndim
    if not -nd - 1 <= axis <= nd:
        raise TensorExprError(f"expand_dims: axis {axis} is out of range for {nd} dims")
    ax = axis % (nd + 1)
    shape = list(x.shape[:ax]) + [IntImm(1, "int32")] * num_newaxis + list(x.shape[ax:])

    def body(*idx: PrimExpr) -> PrimExpr:
        return x[tuple(idx[:ax]) + tuple(idx[ax + num_newaxis:])]

    return compute(shape, body, name="expand_dims", tag=INJECTIVE)


def squeeze(x: Tensor, axis: Any = None) -> Tensor:
    """Remove dimensions of extent 1 (all of them, or those in `axis`, which must be 1)."""
    ones = [d for d, s in enumerate(x.shape) if isinstance(s, IntImm) and s.value == 1]
    if axis is None:
        drop = ones
    else:
        drop = normalize_axes(x.ndim, axis, "squeeze", x.name)
        for d in drop:
            if d not in ones:
                raise TensorExprError(
                    f"squeeze: dimension {d} of '{x.name}' is {x.shape[d]}, not 1")
    shape = [s for d, s in enumerate(x.shape) if d not in drop]

    def body(*idx: PrimExpr) -> PrimExpr:
        it = iter(idx)
        return x[tuple(IntImm(0, s.dtype) if d in drop else next(it)
                       for d, s in enumerate(x.shape))]

    return compute(shape, body, name="squeeze", tag=INJECTIVE)


def flatten(x: Tensor) -> Tensor:
    """(d0, d1*d2*...): keep the batch dimension, flatten the rest (topi's nn.flatten)."""
    if x.ndim == 0:
        raise TensorExprError("flatten: needs at least one dimension")
    rest = x.shape[1:]
    inner = _numel(rest)
    shape = [x.shape[0], inner]

    def body(b: PrimExpr, j: PrimExpr) -> PrimExpr:
        return x[(b,) + unravel(j, rest)] if rest else x[b]

    return compute(shape, body, name="flatten", tag=INJECTIVE)
