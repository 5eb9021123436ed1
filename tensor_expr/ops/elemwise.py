"""Elementwise operators: one output element from the same element of each input.

Every op is one compute with tag "elemwise", named after the op, so fusion can inline it.

    >>> import tensor_expr as te
    >>> from tensor_expr import ops
    >>> x = te.placeholder((4, 8), name="x")
    >>> y = ops.sigmoid(x)
    >>> y.op.tag, y.op.name
    ('elemwise', 'sigmoid')
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from tensor_expr import intrin
from tensor_expr.dtype import is_float
from tensor_expr.expr import PrimExpr, as_expr, cast, const, if_then_else, select
from tensor_expr.expr import max as emax
from tensor_expr.expr import min as emin
from tensor_expr.tensor import Tensor, compute
from tessel_errors import TensorExprError

ELEMWISE = "elemwise"


def elemwise(x: Tensor, f: Callable[[PrimExpr], Any], name: str) -> Tensor:
    """`out[i...] = f(x[i...])` with tag "elemwise": `elemwise(x, lambda v: v * 2, "dbl")`."""
    if not isinstance(x, Tensor):
        raise TensorExprError(f"{name}: expected a Tensor, got {type(x).__name__}")
    return compute(x.shape, lambda *i: f(x[i]), name=name, tag=ELEMWISE)


def _float_op(name: str, fn: Callable[[Any], PrimExpr]) -> Callable[[Tensor], Tensor]:
    def op(x: Tensor) -> Tensor:
        if not is_float(x.dtype):
            raise TensorExprError(
                f"{name}: needs a float tensor, got '{x.name}' of dtype {x.dtype}; "
                f"cast it first with ops.cast(x, 'float32')")
        return elemwise(x, fn, name)

    op.__name__ = name
    op.__doc__ = f"Elementwise {name} of a float tensor: `ops.{name}(x)`."
    return op


exp = _float_op("exp", intrin.exp)
exp2 = _float_op("exp2", intrin.exp2)
log = _float_op("log", intrin.log)
log2 = _float_op("log2", intrin.log2)
log10 = _float_op("log10", intrin.log10)
sqrt = _float_op("sqrt", intrin.sqrt)
rsqrt = _float_op("rsqrt", intrin.rsqrt)
tanh = _float_op("tanh", intrin.tanh)
sigmoid = _float_op("sigmoid", intrin.sigmoid)
erf = _float_op("erf", intrin.erf)
sin = _float_op("sin", intrin.sin)
cos = _float_op("cos", intrin.cos)


def abs(x: Tensor) -> Tensor:  # noqa: A001
    """Elementwise absolute value (floats and signed ints): `ops.abs(x)`."""
    return elemwise(x, intrin.abs, "abs")


def floor(x: Tensor) -> Tensor:
    """Round toward minus infinity: `ops.floor(x)`."""
    return elemwise(x, intrin.floor, "floor")


def ceil(x: Tensor) -> Tensor:
    """Round toward plus infinity: `ops.ceil(x)`."""
    return elemwise(x, intrin.ceil, "ceil")


def round(x: Tensor) -> Tensor:  # noqa: A001
    """Round half to even, like numpy.round: `ops.round(x)`."""
    return elemwise(x, intrin.round, "round")


def round_half_away(x: Tensor) -> Tensor:
    """Round half away from zero, as C's round() and Relay's round: `ops.round_half_away(x)`."""
    return elemwise(x, intrin.round_half_away, "round_half_away")


def trunc(x: Tensor) -> Tensor:
    """Round toward zero: `ops.trunc(x)`."""
    return elemwise(x, intrin.trunc, "trunc")


def isnan(x: Tensor) -> Tensor:
    """True where x is NaN: `ops.isnan(x)`."""
    return elemwise(x, intrin.isnan, "isnan")


def negative(x: Tensor) -> Tensor:
    """-x: `ops.negative(x)`."""
    return elemwise(x, lambda v: -v, "negative")


def sign(x: Tensor) -> Tensor:
    """-1, 0 or 1 with the sign of x (0 for NaN-free zero): `ops.sign(x)`."""
    def f(v: PrimExpr) -> PrimExpr:
        one, zero = const(1, x.dtype), const(0, x.dtype)
        return select(v > zero, one, select(v < zero, -one, zero))

    return elemwise(x, f, "sign")


def square(x: Tensor) -> Tensor:
    """x * x: `ops.square(x)`."""
    return elemwise(x, lambda v: v * v, "square")


def reciprocal(x: Tensor) -> Tensor:
    """1 / x for floats: `ops.reciprocal(x)`."""
    if not is_float(x.dtype):
        raise TensorExprError(f"reciprocal: needs a float tensor, got {x.dtype}")
    return elemwise(x, lambda v: const(1.0, x.dtype) / v, "reciprocal")


def pow_scalar(x: Tensor, exponent: float) -> Tensor:
    """x ** exponent with a constant exponent: `ops.pow_scalar(x, 2.0)`."""
    return elemwise(x, lambda v: intrin.pow(v, const(float(exponent), x.dtype)), "pow_scalar")


def clip(x: Tensor, a_min: Any, a_max: Any) -> Tensor:
    """Clamp into [a_min, a_max], like numpy.clip: `ops.clip(x, 0.0, 6.0)`."""
    lo, hi = as_expr(a_min, x.dtype), as_expr(a_max, x.dtype)
    lo, hi = cast(lo, x.dtype), cast(hi, x.dtype)
    return elemwise(x, lambda v: emin(emax(v, lo), hi), "clip")


def identity(x: Tensor) -> Tensor:
    """A copy of x: `ops.identity(x)`."""
    return elemwise(x, lambda v: v, "identity")


def gelu(x: Tensor) -> Tensor:
    """x * 0.5 * (1 + erf(x / sqrt 2)): `ops.gelu(x)`."""
    if not is_float(x.dtype):
        raise TensorExprError(f"gelu: needs a float tensor, got {x.dtype}")
    k = 1.0 / math.sqrt(2.0)
    return elemwise(x, lambda v: v * 0.5 * (1.0 + intrin.erf(v * k)), "gelu")


def nan_to_num(x: Tensor, value: float = 0.0) -> Tensor:
    """NaN replaced by `value`: `ops.nan_to_num(x)`."""
    return elemwise(x, lambda v: if_then_else(intrin.isnan(v), value, v), "nan_to_num")
