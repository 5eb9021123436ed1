"""Broadcasting binary operators with numpy's rules: add, multiply, maximum, where, ...

Shapes align from the right; a dimension of 1 stretches. A symbolic dimension against a
constant other than 1 is taken to equal it (checked when the kernel is called); two
different symbolic dimensions, or two different constants, are an error.

    >>> import tensor_expr as te
    >>> from tensor_expr import ops
    >>> a = te.placeholder((4, 1, 3), name="a"); b = te.placeholder((5, 1), name="b")
    >>> [int(d.value) for d in ops.add(a, b).shape]
    [4, 5, 3]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tensor_expr import intrin
from tensor_expr.arith.structural import structural_equal
from tensor_expr.dtype import bits, is_float, is_integral
from tensor_expr.expr import (
    IntImm,
    IterVar,
    PrimExpr,
    as_expr,
    const,
    floordiv,
    floormod,
    if_then_else,
    logical_and,
    logical_or,
    select,
)
from tensor_expr.expr import max as emax
from tensor_expr.expr import min as emin
from tensor_expr.tensor import Tensor, compute
from tessel_errors import TensorExprError

BROADCAST = "broadcast"

Operand = Tensor | PrimExpr | IterVar | int | float | bool


def _shape_text(shape: Sequence[PrimExpr]) -> str:
    return "(" + ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def broadcast_shape(a: Sequence[PrimExpr], b: Sequence[PrimExpr], op: str = "broadcast"
                    ) -> tuple[PrimExpr, ...]:
    """The numpy broadcast of two shapes: `broadcast_shape(A.shape, B.shape)`."""
    out: list[PrimExpr] = []
    n = max(len(a), len(b))
    for d in range(1, n + 1):
        x = a[-d] if d <= len(a) else None
        y = b[-d] if d <= len(b) else None
        if x is None or y is None:
            out.append(y if x is None else x)
            continue
        if structural_equal(x, y):
            out.append(x)
        elif _is_one(x):
            out.append(y)
        elif _is_one(y):
            out.append(x)
        elif isinstance(x, IntImm) and isinstance(y, IntImm) or not (
                isinstance(x, IntImm) or isinstance(y, IntImm)):
            raise TensorExprError(
                f"{op}: cannot broadcast shapes {_shape_text(a)} and {_shape_text(b)}: "
                f"dimension {-d} is {x} vs {y}; dimensions must be equal or 1")
        else:
            out.append(x if isinstance(x, IntImm) else y)
    return tuple(reversed(out))


def _is_one(d: PrimExpr) -> bool:
    return isinstance(d, IntImm) and d.value == 1


def _reader(x: Operand, out_ndim: int, out_shape: Sequence[PrimExpr]
            ) -> Callable[[tuple[PrimExpr, ...]], PrimExpr]:
    """A function from output indices to the broadcast element of `x`."""
    if not isinstance(x, Tensor):
        # a Python number stays one, so that it takes the dtype of the other operand
        e = x if isinstance(x, (int, float, bool)) else as_expr(x)
        return lambda idx: e
    off = out_ndim - x.ndim

    def read(idx: tuple[PrimExpr, ...]) -> PrimExpr:
        sub = []
        for d, dim in enumerate(x.shape):
            stretched = _is_one(dim) and not _is_one(out_shape[off + d])
            sub.append(IntImm(0, dim.dtype) if stretched else idx[off + d])
        return x[tuple(sub)]

    return read


def _shape_of(x: Operand) -> tuple[PrimExpr, ...]:
    return x.shape if isinstance(x, Tensor) else ()


def broadcast_map(operands: Sequence[Operand], f: Callable[..., Any], name: str,
                  tag: str = BROADCAST) -> Tensor:
    """`out = f(*broadcast elements)` over the broadcast shape of the operands."""
    if not any(isinstance(x, Tensor) for x in operands):
        raise TensorExprError(f"{name}: needs at least one Tensor operand")
    shape: tuple[PrimExpr, ...] = ()
    for x in operands:
        shape = broadcast_shape(shape, _shape_of(x), name)
    readers = [_reader(x, len(shape), shape) for x in operands]
    return compute(shape, lambda *i: f(*[r(i) for r in readers]), name=name, tag=tag)


def _binary(name: str, f: Callable[[PrimExpr, PrimExpr], Any], doc: str
            ) -> Callable[[Operand, Operand], Tensor]:
    def op(x: Operand, y: Operand) -> Tensor:
        return broadcast_map([x, y], f, name)

    op.__name__ = name
    op.__doc__ = doc
    return op


add = _binary("add", lambda a, b: a + b, "x + y with broadcasting: `ops.add(a, b)`.")
subtract = _binary("subtract", lambda a, b: a - b, "x - y with broadcasting.")
multiply = _binary("multiply", lambda a, b: a * b, "x * y with broadcasting.")
maximum = _binary("maximum", emax, "Elementwise max with broadcasting.")
minimum = _binary("minimum", emin, "Elementwise min with broadcasting.")
floor_divide = _binary("floor_divide", floordiv, "x // y (floor) with broadcasting.")
floor_mod = _binary("floor_mod", floormod, "x % y (sign of y) with broadcasting.")
equal = _binary("equal", lambda a, b: a == b, "x == y (bool) with broadcasting.")
not_equal = _binary("not_equal", lambda a, b: a != b, "x != y (bool) with broadcasting.")
less = _binary("less", lambda a, b: a < b, "x < y (bool) with broadcasting.")
less_equal = _binary("less_equal", lambda a, b: a <= b, "x <= y (bool) with broadcasting.")
greater = _binary("greater", lambda a, b: a > b, "x > y (bool) with broadcasting.")
greater_equal = _binary("greater_equal", lambda a, b: a >= b, "x >= y with broadcasting.")
logical_and_ = _binary("logical_and", logical_and, "x && y of bool tensors.")
logical_or_ = _binary("logical_or", logical_or, "x || y of bool tensors.")


def divide(x: Operand, y: Operand) -> Tensor:
    """x / y of float tensors with broadcasting (use floor_divide for integers)."""
    for v in (x, y):
        if isinstance(v, Tensor) and is_integral(v.dtype):
            raise TensorExprError(
                f"divide: '{v.name}' has integer dtype {v.dtype}; use ops.floor_divide, "
                "or ops.cast to a float type first")
    return broadcast_map([x, y], lambda a, b: a / b, "divide")


def power(x: Operand, y: Operand) -> Tensor:
    """x ** y of float tensors with broadcasting: `ops.power(a, 2.0)`."""
    for v in (x, y):
        if isinstance(v, Tensor) and not is_float(v.dtype):
            raise TensorExprError(f"power: '{v.name}' has dtype {v.dtype}; needs floats")
    return broadcast_map([x, y], intrin.pow, "power")


def where(cond: Operand, x: Operand, y: Operand) -> Tensor:
    """cond ? x : y elementwise with broadcasting (both sides are valid reads)."""
    if isinstance(cond, Tensor) and cond.dtype != "bool":
        raise TensorExprError(f"where: condition '{cond.name}' has dtype {cond.dtype}; "
                              "expected bool (compare it, e.g. ops.not_equal(c, 0))")
    return broadcast_map([cond, x, y], select, "where")


def broadcast_to(x: Tensor, shape: Sequence[Any]) -> Tensor:
    """x stretched to `shape` by numpy's rules: `ops.broadcast_to(b, (4, 5))`."""
    target = tuple(as_expr(d) for d in shape)
    got = broadcast_shape(x.shape, target, "broadcast_to")
    if len(got) != len(target) or not all(structural_equal(g, t) for g, t in zip(got, target)):
        raise TensorExprError(
            f"broadcast_to: cannot broadcast {_shape_text(x.shape)} to {_shape_text(target)}")
    read = _reader(x, len(target), target)
    return compute(target, lambda *i: read(i), name="broadcast_to", tag=BROADCAST)


def where_lazy(cond: Operand, x: Operand, y: Operand) -> Tensor:
    """Like where, but only the taken side is read (if_then_else)."""
    return broadcast_map([cond, x, y], if_then_else, "where_lazy")


def _shift_operands(name: str, x: Operand, y: Operand) -> None:
    for v in (x, y):
        dt = v.dtype if isinstance(v, (Tensor, PrimExpr)) else None
        if dt is not None and (not is_integral(dt) or dt == "bool"):
            raise TensorExprError(f"{name}: needs integer tensors, got dtype {dt}; the "
                                  "quantized graph shifts int32 accumulators")


def right_shift(x: Operand, y: Operand) -> Tensor:
    """x >> y of integer tensors with broadcasting, arithmetic on signed types; an amount
    below 0 shifts by 0, one of the bit width or more by width - 1 (all sign bits, as
    numpy): `ops.right_shift(acc, 4)`."""
    _shift_operands("right_shift", x, y)

    def f(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        top = bits(a.dtype) - 1
        return intrin.shift_right(a, emin(emax(b, 0), top))

    return broadcast_map([x, y], f, "right_shift")


def left_shift(x: Operand, y: Operand) -> Tensor:
    """x << y of integer tensors with broadcasting, wrapping; an amount below 0 shifts by
    0, one of the bit width or more gives 0 (as numpy): `ops.left_shift(q, 2)`."""
    _shift_operands("left_shift", x, y)

    def f(a: PrimExpr, b: PrimExpr) -> PrimExpr:
        width = bits(a.dtype)
        shifted = intrin.shift_left(a, emin(emax(b, 0), width - 1))
        return select(b >= width, const(0, a.dtype), shifted)

    return broadcast_map([x, y], f, "left_shift")
