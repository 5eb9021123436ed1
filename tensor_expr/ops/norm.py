"""Normalisations: softmax and log_softmax (numerically stable: subtract the max first),
layer_norm (mean, then variance of the centred values).

    >>> import tensor_expr as te
    >>> from tensor_expr import ops
    >>> y = ops.softmax(te.placeholder((4, 10), name="x"))
    >>> y.op.name, y.op.tag
    ('softmax', 'softmax_output')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensor_expr import intrin
from tensor_expr.dtype import is_float
from tensor_expr.expr import PrimExpr, cast, const
from tensor_expr.ops.nn import _same_dim
from tensor_expr.ops.reduction import normalize_axes
from tensor_expr.tensor import Tensor, compute, reduce_axis
from tensor_expr.tensor import max as te_max
from tensor_expr.tensor import sum as te_sum
from tessel_errors import TensorExprError


def _check_float(x: Tensor, op: str) -> None:
    if not is_float(x.dtype):
        raise TensorExprError(f"{op}: needs a float tensor, got '{x.name}' of {x.dtype}")


def _reduce_over(x: Tensor, axes: Sequence[int], fn: Any, src: Any, name: str) -> Tensor:
    """Reduce `src(full_index)` over `axes`, giving a tensor of the kept dims."""
    kept = [d for d in range(x.ndim) if d not in axes]
    raxes = [reduce_axis((0, x.shape[d]), name=f"k{d}") for d in axes]

    def body(*idx: PrimExpr) -> PrimExpr:
        full: list[Any] = [None] * x.ndim
        for d, i in zip(kept, idx):
            full[d] = i
        for d, r in zip(axes, raxes):
            full[d] = r.var
        return fn(src(tuple(full)), axis=raxes)

    return compute([x.shape[d] for d in kept], body, name=name, tag="comm_reduce")


def _kept(x: Tensor, axes: Sequence[int], idx: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
    return tuple(i for d, i in enumerate(idx) if d not in axes)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `axis`: four stages, the last 'softmax'."""
    _check_float(x, "softmax")
    axes = normalize_axes(x.ndim, axis, "softmax", x.name)
    mx = _reduce_over(x, axes, te_max, lambda i: x[i], "softmax_maxelem")
    ex = compute(x.shape, lambda *i: intrin.exp(x[i] - mx[_kept(x, axes, i)]),
                 name="softmax_exp", tag="elemwise")
    sm = _reduce_over(x, axes, te_sum, lambda i: ex[i], "softmax_expsum")
    return compute(x.shape, lambda *i: ex[i] / sm[_kept(x, axes, i)], name="softmax",
                   tag="softmax_output")


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """x - max - log(sum(exp(x - max))) along `axis`."""
    _check_float(x, "log_softmax")
    axes = normalize_axes(x.ndim, axis, "log_softmax", x.name)
    mx = _reduce_over(x, axes, te_max, lambda i: x[i], "log_softmax_maxelem")
    sm = _reduce_over(x, axes, te_sum, lambda i: intrin.exp(x[i] - mx[_kept(x, axes, i)]),
                      "log_softmax_expsum")

    def body(*i: PrimExpr) -> PrimExpr:
        k = _kept(x, axes, i)
        return x[i] - mx[k] - intrin.log(sm[k])

    return compute(x.shape, body, name="log_softmax", tag="log_softmax_output")


def layer_norm(x: Tensor, gamma: Tensor | None = None, beta: Tensor | None = None,
               axis: Any = -1, epsilon: float = 1e-5) -> Tensor:
    """(x - mean) / sqrt(var + eps) * gamma + beta over `axis` (int or tuple of the trailing
    normalised dims); gamma and beta have the shape of those dims."""
    _check_float(x, "layer_norm")
    axes = normalize_axes(x.ndim, axis, "layer_norm", x.name)
    norm_shape = [x.shape[d] for d in axes]
    for name, p in (("gamma", gamma), ("beta", beta)):
        if p is None:
            continue
        if p.ndim != len(axes):
            raise TensorExprError(
                f"layer_norm: {name} '{p.name}' has {p.ndim} dims, the normalised axes "
                f"{axes} have {len(axes)}")
        for a, b in zip(p.shape, norm_shape):
            _same_dim(a, b, f"{name} shape and normalised dims", "layer_norm")
    count: PrimExpr = const(1)
    for d in norm_shape:
        count = count * d
    n = cast(count, x.dtype)
    total = _reduce_over(x, axes, te_sum, lambda i: x[i], "layer_norm_sum")

    def centred(i: tuple[PrimExpr, ...]) -> PrimExpr:
        return x[i] - total[_kept(x, axes, i)] / n

    sq = _reduce_over(x, axes, te_sum, lambda i: centred(i) * centred(i), "layer_norm_sqsum")
    eps = const(epsilon, x.dtype)

    def body(*i: PrimExpr) -> PrimExpr:
        k = _kept(x, axes, i)
        out = centred(i) * intrin.rsqrt(sq[k] / n + eps)
        p = tuple(i[d] for d in axes)
        if gamma is not None:
            out = out * gamma[p]
        if beta is not None:
            out = out + beta[p]
        return out

    return compute(x.shape, body, name="layer_norm", tag="layer_norm_output")
