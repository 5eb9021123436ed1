"""Elementwise ops: unary math, binary arithmetic/comparison with numpy broadcasting, the
integer shifts right_shift (arithmetic) / left_shift, where, clip, cast, copy, and the
constant makers full/zeros/ones (+ _like).

References compute in float64 (or the exact integer/bool dtype) and cast to the output
dtype, so they are exact oracles. `round` rounds half away from zero (as C and TVM do,
unlike numpy's half-to-even).

    >>> from relay_ir.op.registry import REFERENCES, get_op
    >>> import numpy as np
    >>> REFERENCES[get_op("add")](np.ones(2, "float32"), np.ones(2, "float32"), attrs=None)
    array([2., 2.], dtype=float32)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.expr import Call, Expr
from relay_ir.op._common import (
    ARG_NAMES,
    RelationError,
    broadcast_shapes,
    freeze_fields,
    make_call,
    same_dtype,
    tensor_arg,
)
from relay_ir.op.registry import PATTERNS, REFERENCES, TYPE_RELATIONS, OpPattern, register_op
from relay_ir.ty import TensorType, Type

_FLOATS = ("float16", "float32", "float64", "bfloat16")


def _exact(x: np.ndarray) -> np.ndarray:
    """A float64 (or unchanged integer/bool) copy for exact computation."""
    return x.astype(np.float64) if x.dtype.kind == "f" else x


# --- unary ------------------------------------------------------------------------------


def _unary_rel(float_only: bool, out_dtype: str | None = None) -> Callable[..., Type]:
    def rel(types: list[Type], attrs: Any) -> Type:
        t = tensor_arg(types, 0)
        if float_only and t.dtype not in _FLOATS:
            raise RelationError(
                f"needs a floating-point tensor, got dtype {t.dtype}",
                arg=0, expected=TensorType(t.shape, "float32"), got=t,
            )
        return TensorType(t.shape, out_dtype or t.dtype)

    return rel


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _round(x: np.ndarray) -> np.ndarray:
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


_UNARY: dict[str, tuple[Callable[[np.ndarray], np.ndarray], bool]] = {
    "negative": (np.negative, False),
    "abs": (np.abs, False),
    "exp": (np.exp, True),
    "log": (np.log, True),
    "sqrt": (np.sqrt, True),
    "rsqrt": (lambda x: 1.0 / np.sqrt(x), True),
    "tanh": (np.tanh, True),
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), True),
    "erf": (_erf, True),
    "floor": (np.floor, True),
    "ceil": (np.ceil, True),
    "round": (_round, True),
    "copy": (np.copy, False),
}


def _unary_ref(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: Any = None) -> np.ndarray:
        x = np.asarray(x)
        with np.errstate(all="ignore"):  # log(-1) is nan, as in every backend
            return np.asarray(fn(_exact(x))).astype(x.dtype)

    return ref


UNARY_OPS = {}
for _name, (_fn, _float_only) in _UNARY.items():
    _op = register_op(_name, None, 1, f"elementwise {_name}")
    TYPE_RELATIONS[_op] = _unary_rel(_float_only)
    REFERENCES[_op] = _unary_ref(_fn)
    PATTERNS[_op] = OpPattern.ELEMWISE
    ARG_NAMES[_op] = ("data",)
    UNARY_OPS[_name] = _op

logical_not_op = register_op("logical_not", None, 1, "elementwise boolean not")
ARG_NAMES[logical_not_op] = ("data",)
PATTERNS[logical_not_op] = OpPattern.ELEMWISE


def _logical_not_rel(types: list[Type], attrs: Any) -> Type:
    t = tensor_arg(types, 0)
    if t.dtype != "bool":
        raise RelationError(
            f"needs a bool tensor, got dtype {t.dtype}",
            arg=0, expected=TensorType(t.shape, "bool"), got=t,
        )
    return t


TYPE_RELATIONS[logical_not_op] = _logical_not_rel
REFERENCES[logical_not_op] = lambda x, attrs=None: np.logical_not(x)


# --- binary -----------------------------------------------------------------------------


def _binary_rel(kind: str) -> Callable[..., Type]:
    def rel(types: list[Type], attrs: Any) -> Type:
        a, b = tensor_arg(types, 0), tensor_arg(types, 1)
        dtype = same_dtype([a, b])
        if kind == "logical" and dtype != "bool":
            raise RelationError(
                f"needs bool tensors, got dtype {dtype}",
                arg=0, expected=TensorType(a.shape, "bool"), got=a,
            )
        if kind == "shift" and not (dtype.startswith("int") or dtype.startswith("uint")):
            raise RelationError(
                f"shifts integer tensors, got dtype {dtype}",
                arg=0, expected=TensorType(a.shape, "int32"), got=a,
            )
        shape = broadcast_shapes([a.shape, b.shape])
        return TensorType(shape, "bool" if kind in ("compare", "logical") else dtype)

    return rel


def _int_divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # integer division truncates toward zero, as in C (and TVM's truncdiv)
    q = np.abs(a) // np.where(b == 0, 1, np.abs(b))
    return np.where((a < 0) != (b < 0), -q, q)


def _right_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # an amount outside [0, bits) is clamped into it: bits or more leaves only sign bits
    top = a.dtype.itemsize * 8 - 1
    return np.right_shift(a, np.clip(b, 0, top).astype(a.dtype))


def _left_shift(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # wraps; an amount below 0 shifts by 0, one of bits or more gives 0
    width = a.dtype.itemsize * 8
    shifted = np.left_shift(a, np.clip(b, 0, width - 1).astype(a.dtype))
    return np.where(b >= width, np.zeros((), a.dtype), shifted)


_BINARY: dict[str, tuple[Callable[..., np.ndarray], str]] = {
    "add": (np.add, "arith"),
    "subtract": (np.subtract, "arith"),
    "multiply": (np.multiply, "arith"),
    "divide": (np.divide, "arith"),
    "power": (np.power, "arith"),
    "maximum": (np.maximum, "arith"),
    "minimum": (np.minimum, "arith"),
    "equal": (np.equal, "compare"),
    "not_equal": (np.not_equal, "compare"),
    "less": (np.less, "compare"),
    "greater": (np.greater, "compare"),
    "less_equal": (np.less_equal, "compare"),
    "greater_equal": (np.greater_equal, "compare"),
    "logical_and": (np.logical_and, "logical"),
    "logical_or": (np.logical_or, "logical"),
    "right_shift": (_right_shift, "shift"),
    "left_shift": (_left_shift, "shift"),
}


def _binary_ref(name: str, fn: Callable[..., np.ndarray], kind: str) -> Callable[..., Any]:
    def ref(a: np.ndarray, b: np.ndarray, attrs: Any = None) -> np.ndarray:
        a, b = np.asarray(a), np.asarray(b)
        if name == "divide" and a.dtype.kind in "iu":
            return _int_divide(a, b).astype(a.dtype)
        if kind == "shift":
            return np.asarray(fn(*np.broadcast_arrays(a, b))).astype(a.dtype)
        with np.errstate(all="ignore"):
            out = np.asarray(fn(_exact(a), _exact(b)))
        return out if kind != "arith" else out.astype(a.dtype)

    return ref


BINARY_OPS = {}
for _name, (_fn, _kind) in _BINARY.items():
    _op = register_op(_name, None, 2, f"broadcasting {_name}")
    TYPE_RELATIONS[_op] = _binary_rel(_kind)
    REFERENCES[_op] = _binary_ref(_name, _fn, _kind)
    PATTERNS[_op] = OpPattern.BROADCAST
    ARG_NAMES[_op] = ("lhs", "rhs")
    BINARY_OPS[_name] = _op


# --- where, clip, cast ------------------------------------------------------------------

where_op = register_op("where", None, 3, "select x where cond else y, broadcasting")
ARG_NAMES[where_op] = ("condition", "x", "y")
PATTERNS[where_op] = OpPattern.BROADCAST


def _where_rel(types: list[Type], attrs: Any) -> Type:
    c, x, y = (tensor_arg(types, i) for i in range(3))
    if c.dtype != "bool":
        raise RelationError(
            f"the condition must be bool, got dtype {c.dtype}",
            arg=0, expected=TensorType(c.shape, "bool"), got=c,
        )
    dtype = same_dtype([x, y])
    return TensorType(broadcast_shapes([c.shape, x.shape, y.shape]), dtype)


TYPE_RELATIONS[where_op] = _where_rel
REFERENCES[where_op] = lambda c, x, y, attrs=None: np.where(c, x, y).astype(np.asarray(x).dtype)


@dataclass(frozen=True, slots=True)
class ClipAttrs:
    """Attributes of clip: the closed range [a_min, a_max]."""

    a_min: float
    a_max: float


clip_op = register_op("clip", ClipAttrs, 1, "clamp into [a_min, a_max]")
ARG_NAMES[clip_op] = ("data",)
PATTERNS[clip_op] = OpPattern.ELEMWISE


def _clip_rel(types: list[Type], attrs: ClipAttrs) -> Type:
    t = tensor_arg(types, 0)
    if attrs.a_min > attrs.a_max:
        raise RelationError(f"a_min {attrs.a_min} is greater than a_max {attrs.a_max}")
    return t


TYPE_RELATIONS[clip_op] = _clip_rel
REFERENCES[clip_op] = lambda x, attrs: np.clip(
    _exact(np.asarray(x)), attrs.a_min, attrs.a_max
).astype(np.asarray(x).dtype)


@dataclass(frozen=True, slots=True)
class CastAttrs:
    """Attributes of cast: the target dtype."""

    dtype: str


cast_op = register_op("cast", CastAttrs, 1, "convert to another dtype")
ARG_NAMES[cast_op] = ("data",)
PATTERNS[cast_op] = OpPattern.ELEMWISE
TYPE_RELATIONS[cast_op] = lambda types, attrs: TensorType(tensor_arg(types, 0).shape, attrs.dtype)
REFERENCES[cast_op] = lambda x, attrs: np.asarray(x).astype(attrs.dtype)


# --- constant makers ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class InitOpAttrs:
    """Attributes of full/zeros/ones: the shape and dtype to make."""

    shape: tuple[int, ...]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        freeze_fields(self, "shape")


@dataclass(frozen=True, slots=True)
class LikeAttrs:
    """Attributes of the _like makers: an optional dtype ('' keeps the input's)."""

    dtype: str = ""


full_op = register_op("full", InitOpAttrs, 1, "a tensor of `shape` filled with a scalar")
zeros_op = register_op("zeros", InitOpAttrs, 0, "a tensor of zeros")
ones_op = register_op("ones", InitOpAttrs, 0, "a tensor of ones")
full_like_op = register_op("full_like", LikeAttrs, 2, "like data, filled with a scalar")
zeros_like_op = register_op("zeros_like", LikeAttrs, 1, "zeros shaped like data")
ones_like_op = register_op("ones_like", LikeAttrs, 1, "ones shaped like data")
ARG_NAMES[full_op] = ("fill_value",)
ARG_NAMES[full_like_op] = ("data", "fill_value")
ARG_NAMES[zeros_like_op] = ARG_NAMES[ones_like_op] = ("data",)
for _op in (full_op, zeros_op, ones_op, full_like_op, zeros_like_op, ones_like_op):
    PATTERNS[_op] = OpPattern.ELEMWISE


def _scalar_arg(types: list[Type], i: int) -> TensorType:
    t = tensor_arg(types, i)
    if t.shape != ():
        raise RelationError(
            f"the fill value must be a scalar, got shape {t.shape}",
            arg=i, expected=TensorType((), t.dtype), got=t,
        )
    return t


def _full_rel(types: list[Type], attrs: InitOpAttrs) -> Type:
    _scalar_arg(types, 0)
    return TensorType(attrs.shape, attrs.dtype)


def _full_like_rel(types: list[Type], attrs: LikeAttrs) -> Type:
    t = tensor_arg(types, 0)
    _scalar_arg(types, 1)
    return TensorType(t.shape, attrs.dtype or t.dtype)


def _like_rel(types: list[Type], attrs: LikeAttrs) -> Type:
    t = tensor_arg(types, 0)
    return TensorType(t.shape, attrs.dtype or t.dtype)


TYPE_RELATIONS[full_op] = _full_rel
TYPE_RELATIONS[zeros_op] = TYPE_RELATIONS[ones_op] = lambda types, attrs: TensorType(
    attrs.shape, attrs.dtype
)
TYPE_RELATIONS[full_like_op] = _full_like_rel
TYPE_RELATIONS[zeros_like_op] = TYPE_RELATIONS[ones_like_op] = _like_rel
REFERENCES[full_op] = lambda v, attrs: np.full(attrs.shape, np.asarray(v), dtype=attrs.dtype)
REFERENCES[zeros_op] = lambda attrs: np.zeros(attrs.shape, dtype=attrs.dtype)
REFERENCES[ones_op] = lambda attrs: np.ones(attrs.shape, dtype=attrs.dtype)
REFERENCES[full_like_op] = lambda x, v, attrs: np.full(
    np.shape(x), np.asarray(v), dtype=attrs.dtype or np.asarray(x).dtype
)
REFERENCES[zeros_like_op] = lambda x, attrs: np.zeros(
    np.shape(x), dtype=attrs.dtype or np.asarray(x).dtype
)
REFERENCES[ones_like_op] = lambda x, attrs: np.ones(
    np.shape(x), dtype=attrs.dtype or np.asarray(x).dtype
)


# --- builders ----------------------------------------------------------------------------
# One function per op, named as the op; they return Call nodes.


def _unary_builder(name: str) -> Callable[[Expr], Call]:
    op = UNARY_OPS.get(name) or logical_not_op

    def build(data: Expr) -> Call:
        return make_call(op, [data])

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"Elementwise {name}(data), e.g. {name}(x) -> Call."
    return build


def _binary_builder(name: str) -> Callable[[Expr, Expr], Call]:
    op = BINARY_OPS[name]

    def build(lhs: Expr, rhs: Expr) -> Call:
        return make_call(op, [lhs, rhs])

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"Broadcasting {name}(lhs, rhs), e.g. {name}(x, y) -> Call."
    return build


negative = _unary_builder("negative")
abs = _unary_builder("abs")  # noqa: A001 - the op is called abs in Relay
exp = _unary_builder("exp")
log = _unary_builder("log")
sqrt = _unary_builder("sqrt")
rsqrt = _unary_builder("rsqrt")
tanh = _unary_builder("tanh")
sigmoid = _unary_builder("sigmoid")
erf = _unary_builder("erf")
floor = _unary_builder("floor")
ceil = _unary_builder("ceil")
round = _unary_builder("round")  # noqa: A001
copy = _unary_builder("copy")
logical_not = _unary_builder("logical_not")
add = _binary_builder("add")
subtract = _binary_builder("subtract")
multiply = _binary_builder("multiply")
divide = _binary_builder("divide")
power = _binary_builder("power")
maximum = _binary_builder("maximum")
minimum = _binary_builder("minimum")
equal = _binary_builder("equal")
not_equal = _binary_builder("not_equal")
less = _binary_builder("less")
greater = _binary_builder("greater")
less_equal = _binary_builder("less_equal")
greater_equal = _binary_builder("greater_equal")
logical_and = _binary_builder("logical_and")
logical_or = _binary_builder("logical_or")
right_shift = _binary_builder("right_shift")
left_shift = _binary_builder("left_shift")


def where(condition: Expr, x: Expr, y: Expr) -> Call:
    """Select x where condition else y, broadcasting all three: where(c, x, y)."""
    return make_call(where_op, [condition, x, y])


def clip(data: Expr, a_min: float, a_max: float) -> Call:
    """Clamp into [a_min, a_max]: clip(x, 0.0, 6.0)."""
    return make_call(clip_op, [data], a_min=float(a_min), a_max=float(a_max))


def cast(data: Expr, dtype: str) -> Call:
    """Convert to `dtype`: cast(x, "int32")."""
    return make_call(cast_op, [data], dtype=str(dtype))


def full(fill_value: Any, shape: tuple[int, ...], dtype: str = "float32") -> Call:
    """A tensor of `shape` filled with the scalar `fill_value`: full(const(1.0), (2, 3))."""
    return make_call(full_op, [fill_value], shape=tuple(shape), dtype=dtype)


def zeros(shape: tuple[int, ...], dtype: str = "float32") -> Call:
    """A tensor of zeros: zeros((2, 3))."""
    return make_call(zeros_op, [], shape=tuple(shape), dtype=dtype)


def ones(shape: tuple[int, ...], dtype: str = "float32") -> Call:
    """A tensor of ones: ones((2, 3), "int32")."""
    return make_call(ones_op, [], shape=tuple(shape), dtype=dtype)


def full_like(data: Expr, fill_value: Any, dtype: str = "") -> Call:
    """A tensor shaped like `data` filled with a scalar: full_like(x, const(2.0))."""
    return make_call(full_like_op, [data, fill_value], dtype=dtype)


def zeros_like(data: Expr, dtype: str = "") -> Call:
    """Zeros shaped like `data`: zeros_like(x)."""
    return make_call(zeros_like_op, [data], dtype=dtype)


def ones_like(data: Expr, dtype: str = "") -> Call:
    """Ones shaped like `data`: ones_like(x)."""
    return make_call(ones_like_op, [data], dtype=dtype)


__all__ = [
    "abs", "add", "cast", "ceil", "clip", "copy", "divide", "equal", "erf", "exp", "floor",
    "full", "full_like", "greater", "greater_equal", "left_shift", "less", "less_equal", "log",
    "logical_and", "logical_not", "logical_or", "maximum", "minimum", "multiply", "negative",
    "not_equal", "ones", "ones_like", "power", "right_shift", "round", "rsqrt", "sigmoid",
    "sqrt", "subtract", "tanh", "where", "zeros", "zeros_like",
]
