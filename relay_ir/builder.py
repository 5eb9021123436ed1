"""The Python builder API for the non-op constructs of the IR (ops build through relay_ir.op).

    >>> import relay_ir
    >>> x = relay_ir.var("x", shape=(1, "n", None))
    >>> print(x.type_annotation)
    Tensor[(1, n, ?), float32]
    >>> sb = relay_ir.ScopeBuilder()
    >>> y = sb.let("y", relay_ir.tuple_(x, x))
    >>> sb.ret(relay_ir.tuple_get_item(y, 0))
    >>> print(relay_ir.astext(sb.get()))
    let %y = (%x: Tensor[(1, n, ?), float32], %x);
    %y.0
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np

from relay_ir.expr import (
    Clause,
    Constant,
    Expr,
    Function,
    GlobalVar,
    If,
    Let,
    Match,
    Pattern,
    PatternConstructor,
    PatternTuple,
    PatternVar,
    PatternWildcard,
    RefCreate,
    RefRead,
    RefWrite,
    Tuple,
    TupleGetItem,
    Var,
)
from relay_ir.ty import TensorType, Type, TypeVar
from tessel_errors import RelayError


def tensor_type(shape: Sequence[Any], dtype: str = "float32") -> TensorType:
    """A tensor type; a dim may be an int, None or "?" (unknown) or a name (symbolic).

    >>> print(tensor_type((None, 3)))
    Tensor[(?, 3), float32]
    """
    return TensorType(tuple(shape), dtype)


def var(
    name: str,
    type_annotation: Type | str | None = None,
    shape: Sequence[Any] | None = None,
    dtype: str | None = None,
) -> Var:
    """A new variable; give a type, a type in text, or shape (and dtype, default float32).

    >>> var("n", dtype="int32").type_annotation
    TensorType(shape=(), dtype='int32')
    """
    if type_annotation is not None and (shape is not None or dtype is not None):
        raise RelayError(f"var {name!r}: give either type_annotation or shape/dtype, not both")
    if isinstance(type_annotation, str):
        from relay_ir.parser import parse_type

        type_annotation = parse_type(type_annotation)
    if shape is not None:
        type_annotation = TensorType(tuple(shape), dtype or "float32")
    elif dtype is not None:
        type_annotation = TensorType((), dtype)
    if type_annotation is not None and not isinstance(type_annotation, Type):
        raise RelayError(
            f"var {name!r}: type_annotation must be a Type, got {type(type_annotation).__name__}"
        )
    return Var(name, type_annotation)


def const(value: Any, dtype: str | None = None) -> Constant:
    """A constant from a numpy value or Python scalar/list (Python floats become float32,
    Python ints int32, as in Relay).

    >>> const(1.5).dtype, const([1, 2]).dtype, const(np.ones(2, "float64")).dtype
    ('float32', 'int32', 'float64')
    """
    if isinstance(value, Constant):
        return value if dtype is None else Constant(value.data.astype(dtype))
    if isinstance(value, (np.ndarray, np.generic)):
        arr = np.array(value, dtype=dtype)
    else:
        arr = np.array(value)
        if dtype is not None:
            arr = arr.astype(dtype)
        elif arr.dtype == np.float64:
            arr = arr.astype("float32")
        elif arr.dtype == np.int64:
            info = np.iinfo("int32")
            if arr.size and (arr.max() > info.max or arr.min() < info.min):
                raise RelayError(f"const({value!r}) does not fit int32; pass dtype='int64'")
            arr = arr.astype("int32")
    if arr.dtype.kind not in "biufc":
        raise RelayError(f"const: values must be numeric or bool, got dtype {arr.dtype}")
    return Constant(arr)


def let(v: Var, value: Expr, body: Expr) -> Let:
    """`let %v = value; body`."""
    return Let(v, value, body)


def if_(cond: Expr, true_branch: Expr, false_branch: Expr) -> If:
    """`if (cond) { true_branch } else { false_branch }`."""
    return If(cond, true_branch, false_branch)


def function(
    params: Sequence[Var],
    body: Expr,
    ret_type: Type | None = None,
    type_params: Sequence[TypeVar] = (),
    attrs: dict[str, Any] | Sequence[tuple[str, Any]] | None = None,
) -> Function:
    """`fn [type_params](params) -> ret_type { body }`.

    >>> x = var("x"); function([x], x).params[0] is x
    True
    """
    for p in params:
        if not isinstance(p, Var):
            raise RelayError(f"function parameters must be Vars, got {type(p).__name__}")
    items = attrs.items() if isinstance(attrs, dict) else (attrs or ())
    return Function(tuple(params), body, ret_type, tuple(type_params), tuple(items))


func = function  # the name RELAY_SPEC uses


def tuple_(*fields: Expr) -> Tuple:
    """A tuple; `tuple_(a, b)` or `tuple_([a, b])`.

    >>> len(tuple_(const(1), const(2)).fields)
    2
    """
    if len(fields) == 1 and isinstance(fields[0], (list, tuple)):
        fields = tuple(fields[0])
    return Tuple(tuple(fields))


def tuple_get_item(tup: Expr, index: int) -> TupleGetItem:
    """Field `index` of a tuple (`%t.0`)."""
    if not isinstance(index, (int, np.integer)) or index < 0:
        raise RelayError(f"tuple_get_item: index must be a non-negative int, got {index!r}")
    return TupleGetItem(tup, int(index))


def ref(value: Expr) -> RefCreate:
    """A new mutable cell holding `value`."""
    return RefCreate(value)


def ref_read(r: Expr) -> RefRead:
    """The current value of the cell `r`."""
    return RefRead(r)


def ref_write(r: Expr, value: Expr) -> RefWrite:
    """Store `value` into the cell `r` (evaluates to ())."""
    return RefWrite(r, value)


def global_var(name: str) -> GlobalVar:
    """A global function name (`@name`)."""
    return GlobalVar(name)


def pvar(v: Var | str) -> PatternVar:
    """A pattern that binds a variable (a str makes a new untyped Var)."""
    return PatternVar(Var(v) if isinstance(v, str) else v)


def pwild() -> PatternWildcard:
    """The wildcard pattern `_`."""
    return PatternWildcard()


def pctor(constructor: Any, *patterns: Pattern) -> PatternConstructor:
    """A constructor pattern such as `Cons(%h, %t)`."""
    return PatternConstructor(constructor, tuple(patterns))


def ptuple(*patterns: Pattern) -> PatternTuple:
    """A tuple pattern `(p1, p2)`."""
    return PatternTuple(tuple(patterns))


def match(
    data: Expr, clauses: Sequence[Clause | tuple[Pattern, Expr]], complete: bool = True
) -> Match:
    """`match (data) { ... }` from Clauses or (pattern, rhs) pairs; complete=False is `match?`."""
    out = []
    for c in clauses:
        if isinstance(c, Clause):
            out.append(c)
        else:
            lhs, rhs = c
            if not isinstance(lhs, Pattern):
                raise RelayError(f"match clause: expected a Pattern, got {type(lhs).__name__}")
            out.append(Clause(lhs, rhs))
    return Match(data, tuple(out), complete)


class ScopeBuilder:
    """Build a let chain statement by statement, with if/else scopes, like TVM's.

    >>> sb = ScopeBuilder()
    >>> c = var("c", dtype="bool")
    >>> with sb.if_scope(c):
    ...     sb.ret(const(1))
    >>> with sb.else_scope():
    ...     sb.ret(const(2))
    >>> type(sb.get()).__name__
    'If'
    """

    def __init__(self) -> None:
        self._frames: list[list[Any]] = [[]]  # each frame: bindings, then maybe ("ret", e)
        self._pending_if: tuple[Expr, Expr] | None = None

    def let(self, name_or_var: str | Var, value: Expr, type_annotation: Type | None = None) -> Var:
        """Bind `value` to a new (or the given) var and return the var."""
        self._flush_if()
        v = name_or_var if isinstance(name_or_var, Var) else Var(name_or_var, type_annotation)
        frame = self._frames[-1]
        if frame and frame[-1][0] == "ret":
            raise RelayError("ScopeBuilder: no let after ret() in the same scope")
        frame.append(("let", v, value))
        return v

    def ret(self, value: Expr) -> None:
        """Set the result of the current scope."""
        self._flush_if()
        frame = self._frames[-1]
        if frame and frame[-1][0] == "ret":
            raise RelayError("ScopeBuilder: ret() called twice in one scope")
        frame.append(("ret", value))

    @contextmanager
    def if_scope(self, cond: Expr) -> Iterator[None]:
        """Statements in this block form the true branch; follow it with else_scope()."""
        self._flush_if()
        self._frames.append([])
        yield
        branch = self._close_frame()
        self._pending_if = (cond, branch)

    @contextmanager
    def else_scope(self) -> Iterator[None]:
        """The false branch of the preceding if_scope; the If becomes this scope's result."""
        if self._pending_if is None:
            raise RelayError("ScopeBuilder: else_scope() must follow an if_scope()")
        cond, then = self._pending_if
        self._pending_if = None
        self._frames.append([])
        yield
        other = self._close_frame()
        self.ret(If(cond, then, other))

    def _flush_if(self) -> None:
        if self._pending_if is not None:
            raise RelayError("ScopeBuilder: an if_scope() needs an else_scope() next")

    def _close_frame(self) -> Expr:
        frame = self._frames.pop()
        return self._build(frame)

    @staticmethod
    def _build(frame: list[Any]) -> Expr:
        if not frame or frame[-1][0] != "ret":
            raise RelayError("ScopeBuilder: the scope has no ret() value")
        body = frame[-1][1]
        for _, v, value in reversed(frame[:-1]):
            body = Let(v, value, body)
        return body

    def get(self) -> Expr:
        """The finished expression (a let chain ending in the ret() value)."""
        self._flush_if()
        if len(self._frames) != 1:
            raise RelayError("ScopeBuilder: get() inside an open scope")
        return self._build(self._frames[0])


__all__ = [
    "ScopeBuilder",
    "const",
    "func",
    "function",
    "global_var",
    "if_",
    "let",
    "match",
    "pctor",
    "ptuple",
    "pvar",
    "pwild",
    "ref",
    "ref_read",
    "ref_write",
    "tensor_type",
    "tuple_",
    "tuple_get_item",
    "var",
]
