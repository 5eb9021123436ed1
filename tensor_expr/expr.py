"""Scalar expressions (PrimExpr) with operator overloading, as TVM users know them.

Nodes are immutable and compared by identity (`is`); `structural_equal` compares shape.
`a == b` on expressions builds an `EQ` node (as in TVM), whose truth value is identity, so
nodes still work as dict keys.

    >>> import tensor_expr as te
    >>> i = te.var("i")
    >>> print((i * 4 + 2) // 4)
    floordiv(((i * 4) + 2), 4)
"""

from __future__ import annotations

import builtins
import enum
from dataclasses import dataclass
from typing import Any

from tensor_expr.dtype import check_dtype, is_float, is_integral, promote
from tessel_errors import TensorExprError


class ExprOp:
    """Operator overloading shared by PrimExpr and IterVar (which stands for its var)."""

    __slots__ = ()

    def __add__(self, other: Any) -> PrimExpr:
        return _binary(Add, self, other)

    def __radd__(self, other: Any) -> PrimExpr:
        return _binary(Add, other, self)

    def __sub__(self, other: Any) -> PrimExpr:
        return _binary(Sub, self, other)

    def __rsub__(self, other: Any) -> PrimExpr:
        return _binary(Sub, other, self)

    def __mul__(self, other: Any) -> PrimExpr:
        return _binary(Mul, self, other)

    def __rmul__(self, other: Any) -> PrimExpr:
        return _binary(Mul, other, self)

    def __truediv__(self, other: Any) -> PrimExpr:
        return _div(self, other)

    def __rtruediv__(self, other: Any) -> PrimExpr:
        return _div(other, self)

    def __floordiv__(self, other: Any) -> PrimExpr:
        return _binary(FloorDiv, self, other)

    def __rfloordiv__(self, other: Any) -> PrimExpr:
        return _binary(FloorDiv, other, self)

    def __mod__(self, other: Any) -> PrimExpr:
        return _binary(FloorMod, self, other)

    def __rmod__(self, other: Any) -> PrimExpr:
        return _binary(FloorMod, other, self)

    def __neg__(self) -> PrimExpr:
        e = as_expr(self)
        return _binary(Sub, const(0, e.dtype), e)

    def __lt__(self, other: Any) -> PrimExpr:
        return _binary(LT, self, other)

    def __le__(self, other: Any) -> PrimExpr:
        return _binary(LE, self, other)

    def __gt__(self, other: Any) -> PrimExpr:
        return _binary(GT, self, other)

    def __ge__(self, other: Any) -> PrimExpr:
        return _binary(GE, self, other)

    def __eq__(self, other: Any) -> PrimExpr:  # type: ignore[override]
        return _binary(EQ, self, other)

    def __ne__(self, other: Any) -> PrimExpr:  # type: ignore[override]
        return _binary(NE, self, other)

    def __and__(self, other: Any) -> PrimExpr:
        return logical_and(self, other)

    def __rand__(self, other: Any) -> PrimExpr:
        return logical_and(other, self)

    def __or__(self, other: Any) -> PrimExpr:
        return logical_or(self, other)

    def __ror__(self, other: Any) -> PrimExpr:
        return logical_or(other, self)

    def __invert__(self) -> PrimExpr:
        return logical_not(self)

    def __hash__(self) -> int:
        return id(self)

    def __bool__(self) -> bool:
        raise TensorExprError(
            f"cannot use the symbolic expression '{self}' as a Python bool; "
            "use te.if_then_else / te.select for a data-dependent choice"
        )

    def astype(self, dtype: str) -> PrimExpr:
        """Cast to `dtype`: `x.astype("float16")`."""
        return cast(self, dtype)


class PrimExpr(ExprOp):
    """Base class of scalar expressions. Every node has a `dtype`."""

    __slots__ = ()
    dtype: str

    def __str__(self) -> str:
        from tensor_expr.printer import expr_to_str

        return expr_to_str(self)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self}>"


_node = dataclass(frozen=True, slots=True, eq=False, repr=False)


@_node
class Var(PrimExpr):
    """A scalar variable: a loop index, a symbolic shape dimension, a parameter."""

    name: str
    dtype: str = "int32"

    def __post_init__(self) -> None:
        check_dtype(self.dtype)


@_node
class IntImm(PrimExpr):
    """An integer (or bool) constant."""

    value: int
    dtype: str = "int32"


@_node
class FloatImm(PrimExpr):
    """A floating-point constant."""

    value: float
    dtype: str = "float32"


@_node
class StringImm(PrimExpr):
    """A string constant (pragma values, assert messages)."""

    value: str
    dtype: str = "handle"


class BinaryOp(PrimExpr):
    """Base of two-operand arithmetic; `dtype` is the operands' (equal) dtype."""

    __slots__ = ()
    a: PrimExpr
    b: PrimExpr
    symbol = "?"

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.a.dtype


@_node
class Add(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "+"


@_node
class Sub(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "-"


@_node
class Mul(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "*"


@_node
class Div(BinaryOp):
    """Floating-point division (integer division is FloorDiv)."""

    a: PrimExpr
    b: PrimExpr
    symbol = "/"


@_node
class FloorDiv(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "floordiv"


@_node
class FloorMod(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "floormod"


@_node
class Min(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "min"


@_node
class Max(BinaryOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "max"


class CmpOp(BinaryOp):
    """Base of comparisons; the result is bool."""

    __slots__ = ()

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return "bool"


@_node
class EQ(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "=="

    def __bool__(self) -> bool:
        # `a == b` between nodes is used by dicts and `in`: identity, as in TVM.
        return self.a is self.b


@_node
class NE(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "!="

    def __bool__(self) -> bool:
        return self.a is not self.b


@_node
class LT(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "<"


@_node
class LE(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "<="


@_node
class GT(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = ">"


@_node
class GE(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = ">="


@_node
class And(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "&&"


@_node
class Or(CmpOp):
    a: PrimExpr
    b: PrimExpr
    symbol = "||"


@_node
class Not(PrimExpr):
    a: PrimExpr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return "bool"


@_node
class Select(PrimExpr):
    """`condition ? true_value : false_value`; both sides may be evaluated (speculated),
    so use `if_then_else` when one side is only safe under the condition (padding reads)."""

    condition: PrimExpr
    true_value: PrimExpr
    false_value: PrimExpr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.true_value.dtype


@_node
class Cast(PrimExpr):
    dtype: str
    value: PrimExpr


# Intrinsic functions by name; "if_then_else" is the lazy select (only the taken side runs).
INTRINSICS = frozenset(
    {
        "exp", "log", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "pow", "fabs", "floor",
        "ceil", "round", "trunc", "fma", "if_then_else", "exp2", "log2", "log10", "sin",
        "cos", "isnan", "popcount", "round_half_away", "shift_right", "shift_left",
    }
)


@_node
class Call(PrimExpr):
    """An intrinsic call such as exp(x) or fma(a, b, c); `name` is one of INTRINSICS."""

    dtype: str
    name: str
    args: tuple[PrimExpr, ...]


class IterType(enum.Enum):
    DATA_PAR = "data_par"
    REDUCE = "reduce"
    THREAD = "thread"  # bound to a GPU block/thread index
    ORDERED = "ordered"
    OPAQUE = "opaque"


@dataclass(frozen=True, slots=True)
class Range:
    """The half-open interval [min, min + extent)."""

    min: PrimExpr
    extent: PrimExpr

    @staticmethod
    def make(begin: Any, end: Any) -> Range:
        """Range.make(0, n) is [0, n)."""
        b, e = as_expr(begin), as_expr(end)
        return Range(b, e if _is_zero(b) else e - b)

    def __str__(self) -> str:
        return f"range(min={self.min}, ext={self.extent})"


@_node
class IterVar(ExprOp):
    """An iteration variable: a var with its domain and kind. Used as its var in exprs."""

    dom: Range | None
    var: Var
    iter_type: IterType = IterType.DATA_PAR
    thread_tag: str = ""

    def __str__(self) -> str:
        return self.var.name

    def __repr__(self) -> str:
        return f"IterVar({self.var.name}, {self.dom}, {self.iter_type.value})"

    @property
    def dtype(self) -> str:
        return self.var.dtype


@dataclass(frozen=True, slots=True, eq=False)
class CommReducer:
    """A commutative reducer: result(lhs, rhs) with identity elements, over tuples."""

    lhs: tuple[Var, ...]
    rhs: tuple[Var, ...]
    result: tuple[PrimExpr, ...]
    identity_element: tuple[PrimExpr, ...]
    name: str = "reduce"


@_node
class Reduce(PrimExpr):
    """A reduction of `source` over `axis` with `combiner`; `value_index` picks the output
    of a tuple reduction (argmax)."""

    combiner: CommReducer
    source: tuple[PrimExpr, ...]
    axis: tuple[IterVar, ...]
    condition: PrimExpr
    value_index: int = 0
    init: tuple[PrimExpr, ...] = ()

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.source[self.value_index].dtype


@_node
class ProducerLoad(PrimExpr):
    """`T[i, j]`: a read of a tensor produced by an operation (placeholder or compute)."""

    producer: Any  # tensor_expr.tensor.Tensor (kept as Any: tensor.py imports this module)
    indices: tuple[PrimExpr, ...]

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.producer.dtype


@_node
class Let(PrimExpr):
    """`let var = value in body` inside an expression."""

    var: Var
    value: PrimExpr
    body: PrimExpr

    @property
    def dtype(self) -> str:  # type: ignore[override]
        return self.body.dtype


ExprLike = PrimExpr | IterVar | int | float | bool


# ---------------------------------------------------------------------------------------
# Construction helpers


def var(name: str = "v", dtype: str = "int32") -> Var:
    """A fresh variable: `n = te.var("n")` is also a symbolic shape dimension."""
    return Var(name, dtype)


def const(value: int | float | bool, dtype: str | None = None) -> PrimExpr:
    """A constant; the dtype defaults to int32 for ints, float32 for floats, bool for bools."""
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32"
        else:
            dtype = "float32"
    check_dtype(dtype)
    if is_float(dtype):
        return FloatImm(float(value), dtype)
    if dtype == "bool":
        return IntImm(int(bool(value)), "bool")
    if isinstance(value, float) and not float(value).is_integer():
        raise TensorExprError(f"constant {value} cannot be represented as {dtype}")
    return IntImm(int(value), dtype)


def as_expr(value: Any, dtype: str | None = None) -> PrimExpr:
    """Convert an IterVar, Python number or PrimExpr into a PrimExpr."""
    if isinstance(value, PrimExpr):
        return value
    if isinstance(value, IterVar):
        return value.var
    if isinstance(value, (bool, int, float)):
        return const(value, dtype)
    try:
        import numpy as np

        if isinstance(value, np.generic):
            return const(value.item(), dtype or str(value.dtype))
    except ImportError:  # pragma: no cover
        pass
    raise TensorExprError(
        f"cannot use {type(value).__name__} {value!r} in a tensor expression; "
        "expected a PrimExpr, an IterVar or a Python number"
    )


def _is_zero(e: PrimExpr) -> bool:
    return isinstance(e, (IntImm, FloatImm)) and e.value == 0


def _coerce_pair(a: Any, b: Any) -> tuple[PrimExpr, PrimExpr]:
    """Python numbers take the dtype of the other side; mixed dtypes are promoted by Cast."""
    a_is_py = not isinstance(a, (PrimExpr, IterVar))
    b_is_py = not isinstance(b, (PrimExpr, IterVar))
    if a_is_py and not b_is_py:
        b = as_expr(b)
        a = as_expr(a, _py_const_dtype(a, b.dtype))
    elif b_is_py and not a_is_py:
        a = as_expr(a)
        b = as_expr(b, _py_const_dtype(b, a.dtype))
    else:
        a, b = as_expr(a), as_expr(b)
    if a.dtype != b.dtype:
        target = promote(a.dtype, b.dtype)
        a = a if a.dtype == target else Cast(target, a)
        b = b if b.dtype == target else Cast(target, b)
    return a, b


def _py_const_dtype(value: Any, other: str) -> str:
    if isinstance(value, bool):
        return "bool" if other == "bool" else other
    if isinstance(value, float) and not is_float(other) and not float(value).is_integer():
        return "float32"
    if other == "bool":
        return "int32" if isinstance(value, int) else "float32"
    return other


_FOLD = {
    "Add": lambda x, y: x + y,
    "Sub": lambda x, y: x - y,
    "Mul": lambda x, y: x * y,
    "Min": builtins.min,
    "Max": builtins.max,
}


def _binary(cls: type, a: Any, b: Any) -> PrimExpr:
    a, b = _coerce_pair(a, b)
    if cls in (FloorDiv, FloorMod) and is_integral(a.dtype):
        if isinstance(b, IntImm) and b.value == 0:
            raise TensorExprError(f"integer division by zero in '{a} {cls.symbol} 0'")
    # Fold integer constants now: shapes and index arithmetic stay readable.
    if isinstance(a, IntImm) and isinstance(b, IntImm) and a.dtype != "bool":
        name = cls.__name__
        if name in _FOLD:
            return IntImm(_FOLD[name](a.value, b.value), a.dtype)
        if cls is FloorDiv:
            return IntImm(a.value // b.value, a.dtype)
        if cls is FloorMod:
            return IntImm(a.value % b.value, a.dtype)
    return cls(a, b)


def _div(a: Any, b: Any) -> PrimExpr:
    a, b = _coerce_pair(a, b)
    if is_integral(a.dtype) or a.dtype == "bool":
        raise TensorExprError(
            f"'/' of integer expressions ({a} / {b}) is ambiguous; "
            "use '//' (floordiv) or '%' (floormod), or cast to a float type first"
        )
    return Div(a, b)


def cast(value: Any, dtype: str) -> PrimExpr:
    """Convert `value` to `dtype` (no-op when it already has it)."""
    check_dtype(dtype)
    e = as_expr(value)
    if e.dtype == dtype:
        return e
    if isinstance(e, IntImm) and is_integral(dtype):
        return IntImm(e.value, dtype)
    if isinstance(e, (IntImm, FloatImm)) and is_float(dtype):
        return FloatImm(float(e.value), dtype)
    return Cast(dtype, e)


def min_value(dtype: str) -> PrimExpr:
    """The smallest value of `dtype` (-inf for floats): the identity of max."""
    import numpy as np

    if is_float(dtype):
        return FloatImm(float("-inf"), dtype)
    if dtype == "bool":
        return IntImm(0, "bool")
    return IntImm(int(np.iinfo(dtype).min), dtype)


def max_value(dtype: str) -> PrimExpr:
    """The largest value of `dtype` (+inf for floats): the identity of min."""
    import numpy as np

    if is_float(dtype):
        return FloatImm(float("inf"), dtype)
    if dtype == "bool":
        return IntImm(1, "bool")
    return IntImm(int(np.iinfo(dtype).max), dtype)


def min(a: Any, b: Any) -> PrimExpr:  # noqa: A001 - the TE name users expect
    """Elementwise minimum of two expressions."""
    return _binary(Min, a, b)


def max(a: Any, b: Any) -> PrimExpr:  # noqa: A001
    """Elementwise maximum of two expressions."""
    return _binary(Max, a, b)


def floordiv(a: Any, b: Any) -> PrimExpr:
    """Division rounding toward minus infinity (`a // b`)."""
    return _binary(FloorDiv, a, b)


def floormod(a: Any, b: Any) -> PrimExpr:
    """The remainder matching floordiv (`a % b`), same sign as b."""
    return _binary(FloorMod, a, b)


def _as_bool(value: Any) -> PrimExpr:
    e = as_expr(value, "bool" if isinstance(value, bool) else None)
    if e.dtype != "bool":
        raise TensorExprError(f"expected a boolean condition, got '{e}' of dtype {e.dtype}")
    return e


def logical_and(a: Any, b: Any) -> PrimExpr:
    """`a && b` of two boolean expressions."""
    return And(_as_bool(a), _as_bool(b))


def logical_or(a: Any, b: Any) -> PrimExpr:
    """`a || b` of two boolean expressions."""
    return Or(_as_bool(a), _as_bool(b))


def logical_not(a: Any) -> PrimExpr:
    """`!a` of a boolean expression."""
    return Not(_as_bool(a))


def all(*conds: Any) -> PrimExpr:  # noqa: A001
    """Conjunction of conditions: `te.all(i >= 0, i < n)`."""
    if not conds:
        return const(True)
    out = _as_bool(conds[0])
    for c in conds[1:]:
        out = And(out, _as_bool(c))
    return out


def any(*conds: Any) -> PrimExpr:  # noqa: A001
    """Disjunction of conditions."""
    if not conds:
        return const(False)
    out = _as_bool(conds[0])
    for c in conds[1:]:
        out = Or(out, _as_bool(c))
    return out


def select(cond: Any, t: Any, f: Any) -> PrimExpr:
    """`cond ? t : f` where both sides are safe to evaluate."""
    t, f = _coerce_pair(t, f)
    return Select(_as_bool(cond), t, f)


def if_then_else(cond: Any, t: Any, f: Any) -> PrimExpr:
    """`cond ? t : f` where only the taken side is evaluated (guards padding reads).

    >>> import tensor_expr as te
    >>> A = te.placeholder((8,), name="A")
    >>> P = te.compute((10,), lambda i: te.if_then_else(te.all(i >= 1, i < 9), A[i - 1], 0.0))
    """
    t, f = _coerce_pair(t, f)
    return Call(t.dtype, "if_then_else", (_as_bool(cond), t, f))
