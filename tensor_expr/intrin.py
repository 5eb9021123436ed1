"""Intrinsic math functions on expressions: exp, log, sqrt, tanh, erf, pow, fma, ...

    >>> import tensor_expr as te
    >>> x = te.var("x", "float32")
    >>> print(te.exp(x) + te.sqrt(x))
    (exp(x) + sqrt(x))
"""

from __future__ import annotations

from typing import Any

from tensor_expr.dtype import is_float
from tensor_expr.expr import Call, PrimExpr, _coerce_pair, as_expr, cast, const
from tessel_errors import TensorExprError


def _float_unary(name: str, x: Any) -> PrimExpr:
    e = as_expr(x, "float32")
    if not is_float(e.dtype):
        raise TensorExprError(
            f"{name}() needs a float operand, got '{e}' of dtype {e.dtype}; cast it first"
        )
    return Call(e.dtype, name, (e,))


def exp(x: Any) -> PrimExpr:
    """e**x."""
    return _float_unary("exp", x)


def exp2(x: Any) -> PrimExpr:
    """2**x."""
    return _float_unary("exp2", x)


def log(x: Any) -> PrimExpr:
    """Natural logarithm."""
    return _float_unary("log", x)


def log2(x: Any) -> PrimExpr:
    """Base-2 logarithm."""
    return _float_unary("log2", x)


def log10(x: Any) -> PrimExpr:
    """Base-10 logarithm."""
    return _float_unary("log10", x)


def sqrt(x: Any) -> PrimExpr:
    """Square root."""
    return _float_unary("sqrt", x)


def rsqrt(x: Any) -> PrimExpr:
    """1 / sqrt(x)."""
    return _float_unary("rsqrt", x)


def tanh(x: Any) -> PrimExpr:
    """Hyperbolic tangent."""
    return _float_unary("tanh", x)


def sigmoid(x: Any) -> PrimExpr:
    """1 / (1 + exp(-x))."""
    return _float_unary("sigmoid", x)


def erf(x: Any) -> PrimExpr:
    """The Gauss error function."""
    return _float_unary("erf", x)


def sin(x: Any) -> PrimExpr:
    """Sine."""
    return _float_unary("sin", x)


def cos(x: Any) -> PrimExpr:
    """Cosine."""
    return _float_unary("cos", x)


def floor(x: Any) -> PrimExpr:
    """Round toward minus infinity (identity on integers)."""
    e = as_expr(x)
    return e if not is_float(e.dtype) else Call(e.dtype, "floor", (e,))


def ceil(x: Any) -> PrimExpr:
    """Round toward plus infinity (identity on integers)."""
    e = as_expr(x)
    return e if not is_float(e.dtype) else Call(e.dtype, "ceil", (e,))


def round(x: Any) -> PrimExpr:  # noqa: A001
    """Round half to even, like numpy.round."""
    e = as_expr(x)
    return e if not is_float(e.dtype) else Call(e.dtype, "round", (e,))


def round_half_away(x: Any) -> PrimExpr:
    """Round half away from zero, as C's round() and Relay's round (identity on integers)."""
    e = as_expr(x)
    return e if not is_float(e.dtype) else Call(e.dtype, "round_half_away", (e,))


def _shift(name: str, x: Any, amount: Any) -> PrimExpr:
    a, b = _coerce_pair(x, amount)
    if is_float(a.dtype) or a.dtype == "bool":
        raise TensorExprError(f"{name}() needs integer operands, got '{a}' of dtype {a.dtype}")
    return Call(a.dtype, name, (a, b))


def shift_right(x: Any, amount: Any) -> PrimExpr:
    """x >> amount: arithmetic on signed, logical on unsigned integers; the amount must lie
    in [0, bits) (as in C and LLVM; relay's right_shift clamps it first)."""
    return _shift("shift_right", x, amount)


def shift_left(x: Any, amount: Any) -> PrimExpr:
    """x << amount, wrapping; the amount must lie in [0, bits) (as in C and LLVM)."""
    return _shift("shift_left", x, amount)


def trunc(x: Any) -> PrimExpr:
    """Round toward zero."""
    e = as_expr(x)
    return e if not is_float(e.dtype) else Call(e.dtype, "trunc", (e,))


def abs(x: Any) -> PrimExpr:  # noqa: A001
    """Absolute value (floats and signed integers)."""
    e = as_expr(x)
    if is_float(e.dtype):
        return Call(e.dtype, "fabs", (e,))
    from tensor_expr.expr import select

    return select(e < 0, -e, e)


def isnan(x: Any) -> PrimExpr:
    """True where x is NaN."""
    e = as_expr(x)
    return Call("bool", "isnan", (e,)) if is_float(e.dtype) else const(False)


def pow(x: Any, y: Any) -> PrimExpr:  # noqa: A001
    """x ** y for floats."""
    a, b = _coerce_pair(x, y)
    if not is_float(a.dtype):
        a, b = cast(a, "float32"), cast(b, "float32")
    return Call(a.dtype, "pow", (a, b))


def fma(a: Any, b: Any, c: Any) -> PrimExpr:
    """a * b + c in one rounding."""
    x, y = _coerce_pair(a, b)
    x, z = _coerce_pair(x, c)
    y, z = _coerce_pair(y, z)
    return Call(x.dtype, "fma", (x, y, z))
