"""Reductions over any axes: sum, mean, max, min, prod, argmax, argmin (numpy's axis and
keepdims conventions; argmax/argmin with axis=None index the flattened tensor).

    >>> import tensor_expr as te
    >>> from tensor_expr import ops
    >>> x = te.placeholder((2, 3, 4), name="x")
    >>> s = ops.sum(x, axis=(0, 2), keepdims=True)
    >>> [int(d.value) for d in s.shape], s.op.tag
    ([1, 3, 1], 'comm_reduce')
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensor_expr import tensor as T
from tensor_expr.dtype import is_float
from tensor_expr.expr import IntImm, IterVar, PrimExpr, cast, const
from tensor_expr.tensor import Tensor, compute, reduce_axis
from tessel_errors import TensorExprError

COMM_REDUCE = "comm_reduce"
COMM_REDUCE_IDX = "comm_reduce_idx"


def normalize_axes(ndim: int, axis: Any, op: str, tensor_name: str = "x") -> list[int]:
    """Sorted non-negative axes from None / int / sequence, with range and duplicate checks."""
    if axis is None:
        return list(range(ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    out: list[int] = []
    for a in axes:
        if not isinstance(a, int) or not -ndim <= a < ndim:
            raise TensorExprError(
                f"{op}: axis {a} is out of range for '{tensor_name}' with {ndim} dimensions; "
                f"legal axes are {-ndim}..{ndim - 1}")
        a %= ndim
        if a in out:
            raise TensorExprError(f"{op}: axis {a} is repeated in {axis}")
        out.append(a)
    return sorted(out)


def _reduced_shape(x: Tensor, axes: Sequence[int], keepdims: bool) -> list[PrimExpr]:
    out: list[PrimExpr] = []
    for d, dim in enumerate(x.shape):
        if d in axes:
            if keepdims:
                out.append(IntImm(1, dim.dtype))
        else:
            out.append(dim)
    return out


def _source_index(x: Tensor, axes: Sequence[int], keepdims: bool, idx: Sequence[PrimExpr],
                  raxes: Sequence[IterVar]) -> tuple[Any, ...]:
    it, rit = iter(idx), iter(raxes)
    src: list[Any] = []
    for d in range(x.ndim):
        if d in axes:
            src.append(next(rit))
            if keepdims:
                next(it)
        else:
            src.append(next(it))
    return tuple(src)


def reduce_op(x: Tensor, axis: Any, keepdims: bool, reducer: Callable[..., Any], name: str
              ) -> Tensor:
    """`reducer(x[...], axis=...)` over the given axes: the shared shape of every reduction."""
    if not isinstance(x, Tensor):
        raise TensorExprError(f"{name}: expected a Tensor, got {type(x).__name__}")
    axes = normalize_axes(x.ndim, axis, name, x.name)
    shape = _reduced_shape(x, axes, keepdims)
    if not axes:
        return compute(shape, lambda *i: x[i], name=name, tag="injective")
    raxes = [reduce_axis((0, x.shape[d]), name=f"k{d}") for d in axes]

    def body(*idx: PrimExpr) -> PrimExpr:
        return reducer(x[_source_index(x, axes, keepdims, idx, raxes)], axis=raxes)

    return compute(shape, body, name=name, tag=COMM_REDUCE)


def sum(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Sum over `axis` (all when None), in x's dtype: `ops.sum(x, axis=1)`."""
    return reduce_op(x, axis, keepdims, T.sum, "sum")


def prod(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Product over `axis`: `ops.prod(x, axis=(0, 1))`."""
    return reduce_op(x, axis, keepdims, T.prod, "prod")


def max(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Maximum over `axis`: `ops.max(x, axis=-1, keepdims=True)`."""
    return reduce_op(x, axis, keepdims, T.max, "max")


def min(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Minimum over `axis`: `ops.min(x)`."""
    return reduce_op(x, axis, keepdims, T.min, "min")


def mean(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Mean over `axis` of a float tensor: a sum stage, then a divide stage."""
    if not is_float(x.dtype):
        raise TensorExprError(
            f"mean: '{x.name}' has dtype {x.dtype}; cast it to a float type first")
    axes = normalize_axes(x.ndim, axis, "mean", x.name)
    s = reduce_op(x, axes, keepdims, T.sum, "mean_sum")
    count: PrimExpr = const(1)
    for d in axes:
        count = count * x.shape[d]
    inv = cast(count, x.dtype)
    return compute(s.shape, lambda *i: s[i] / inv, name="mean", tag="elemwise")


def _arg_reduce(x: Tensor, axis: int | None, keepdims: bool, reducer: Callable[..., Any],
                name: str) -> Tensor:
    if axis is not None and not isinstance(axis, int):
        raise TensorExprError(f"{name}: axis must be an int or None, got {axis!r}")
    axes = normalize_axes(x.ndim, axis, name, x.name)
    shape = _reduced_shape(x, axes, keepdims)
    raxes = [reduce_axis((0, x.shape[d]), name=f"k{d}") for d in axes]

    def body(*idx: PrimExpr) -> Any:
        flat: PrimExpr = const(0)
        for d, r in zip(axes, raxes):  # row-major index over the reduced dims
            flat = flat * x.shape[d] + r.var
        return reducer((flat, x[_source_index(x, axes, keepdims, idx, raxes)]), axis=raxes)

    index, _value = compute(shape, body, name=name, tag=COMM_REDUCE_IDX)
    return index


def argmax(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """int32 index of the first maximum along `axis` (flattened when None), like numpy."""
    return _arg_reduce(x, axis, keepdims, T.argmax, "argmax")


def argmin(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """int32 index of the first minimum along `axis` (flattened when None), like numpy."""
    return _arg_reduce(x, axis, keepdims, T.argmin, "argmin")
