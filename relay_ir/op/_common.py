"""Shared helpers of the op library: the relation protocol, gradual dims, broadcasting.

A type relation is `rel(arg_types: list[Type], attrs) -> Type | Refined`:
- it returns the output type, or `Refined(ret, args)` when it also learned something about
  its inputs (a `?` dim that the op forces to a value: `nn.dense` knows data's last dim
  equals weight's); the solver unifies `args[i]` (when not None) with argument i;
- it raises `NotReady` while an argument type is still unknown (an IncompleteType), so the
  solver retries it later, and `RelationError` for a real type error; the solver turns
  that into a RelayTypeError naming the op, the argument and the source line.

Dims are gradual: `?` (ANY) is consistent with every dim. `merge_dim` is the one rule:

    >>> merge_dim(ANY, 3), merge_dim(3, 3), merge_dim(3, 4)
    (3, 3, None)
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from relay_ir.expr import Call
from relay_ir.op.registry import Op
from relay_ir.ty import ANY, AnyDim, Dim, IncompleteType, ShapeVar, TensorType, TupleType, Type


class NotReady(Exception):
    """An argument type is not known yet; the solver retries the relation later."""


class RelationError(Exception):
    """A type error found by a relation: which argument, what was expected, what came."""

    def __init__(
        self, message: str, arg: int | None = None, expected: Any = None, got: Any = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.arg = arg
        self.expected = expected
        self.got = got


@dataclass(frozen=True, slots=True)
class Refined:
    """A relation's result when it also refines argument types (None: no news)."""

    ret: Type
    args: tuple[Type | None, ...]


@dataclass(frozen=True, slots=True)
class DimHole(ShapeVar):
    """A `?` dim being solved by type inference (name "?<n>", unique per hole).

    Relations treat a hole like `?` (consistent with anything) but keep it in their outputs,
    so that when inference later learns the dim, every type that holds the hole learns it.
    """

    def __str__(self) -> str:
        return "?"


def is_gradual(d: Dim) -> bool:
    """Whether a dim is unknown: `?` or a hole of type inference."""
    return isinstance(d, AnyDim | DimHole)


# op -> names of its arguments, for error messages ("argument 1 (weight)")
ARG_NAMES: dict[Op, tuple[str, ...]] = {}


def arg_name(op: Op, index: int) -> str:
    """The name of argument `index` of `op` (e.g. 'weight'), or 'arg{index}'."""
    names = ARG_NAMES.get(op, ())
    return names[index] if index < len(names) else f"arg{index}"


def make_call(op: Op, args: Sequence[Any], **attrs: Any) -> Call:
    """A Call of `op` on `args` with attrs built by `op.make_attrs` (None when op has none)."""
    from relay_ir.expr import Constant, Expr

    exprs = tuple(a if isinstance(a, Expr) else Constant(a) for a in args)
    return Call(op, exprs, op.make_attrs(attrs))


# --- argument access -----------------------------------------------------------------------


def tensor_arg(types: Sequence[Type], i: int, what: str = "a tensor") -> TensorType:
    """Argument i as a TensorType; NotReady while unknown, RelationError if not a tensor."""
    t = types[i]
    if isinstance(t, IncompleteType):
        raise NotReady
    if not isinstance(t, TensorType):
        raise RelationError(f"expected {what}, got {t}", arg=i, expected=what, got=t)
    return t


def tuple_of_tensors(types: Sequence[Type], i: int) -> list[TensorType]:
    """Argument i as a tuple of tensors (for concatenate and friends)."""
    t = types[i]
    if isinstance(t, IncompleteType):
        raise NotReady
    if not isinstance(t, TupleType):
        raise RelationError(
            f"expected a tuple of tensors, got {t}", arg=i, expected="a tuple", got=t
        )
    out = []
    for f in t.fields:
        if isinstance(f, IncompleteType):
            raise NotReady
        if not isinstance(f, TensorType):
            raise RelationError(
                f"expected a tuple of tensors, got a field {f}", arg=i, got=t
            )
        out.append(f)
    return out


def same_dtype(types: Sequence[TensorType], op_what: str = "") -> str:
    """The common dtype of tensors; RelationError naming the first that differs."""
    dtype = types[0].dtype
    for i, t in enumerate(types[1:], start=1):
        if t.dtype != dtype:
            raise RelationError(
                f"dtype mismatch: argument 0 has dtype {dtype}, argument {i} has {t.dtype}"
                + (f" ({op_what})" if op_what else ""),
                arg=i,
                expected=TensorType(t.shape, dtype),
                got=t,
            )
    return dtype


# --- dims -----------------------------------------------------------------------------------


def merge_dim(a: Dim, b: Dim) -> Dim | None:
    """The dim consistent with both, or None when they contradict (? matches anything)."""
    if a == b or isinstance(b, AnyDim):
        return a
    if is_gradual(a):
        return b
    if isinstance(b, DimHole):
        return a
    return None


def dim_str(d: Dim) -> str:
    """A dim as it prints: 3, n or ?."""
    if is_gradual(d):
        return "?"
    return d.name if isinstance(d, ShapeVar) else str(d)


def shape_str(shape: Sequence[Dim]) -> str:
    """A shape as it prints: (1, ?, 3)."""
    inner = ", ".join(dim_str(d) for d in shape)
    return f"({inner},)" if len(shape) == 1 else f"({inner})"


def require_dim(
    types: Sequence[Type], i: int, axis: int, want: Dim, why: str
) -> tuple[Dim, TensorType | None]:
    """Check dim `axis` of tensor argument i against `want`; returns (dim, refined arg or None).

    A `?` argument dim becomes `want` (the solver then refines the argument and inserts a
    run-time check); a contradiction is a RelationError with the expected type.
    """
    t = types[i]
    assert isinstance(t, TensorType)
    have = t.shape[axis]
    merged = merge_dim(have, want)
    if merged is None:
        expected = list(t.shape)
        expected[axis] = want
        raise RelationError(
            f"dim {axis} is {dim_str(have)}, but {why} needs {dim_str(want)}",
            arg=i,
            expected=TensorType(tuple(expected), t.dtype),
            got=t,
        )
    if merged != have:
        shape = list(t.shape)
        shape[axis] = merged
        return merged, TensorType(tuple(shape), t.dtype)
    return merged, None


def product(dims: Sequence[Dim]) -> Dim:
    """The product of dims: an int when all are known, else ?."""
    out = 1
    for d in dims:
        if not isinstance(d, int):
            return ANY
        out *= d
    return out


def normalize_axis(axis: int, ndim: int, arg: int = 0, t: Type | None = None) -> int:
    """`axis` in [0, ndim) (negative counts from the end); RelationError if out of range."""
    try:
        axis = operator.index(axis)
    except TypeError:  # e.g. axis=1.5 written in Relay text
        raise RelationError(f"an axis is an integer, got {axis!r}", arg=arg, got=t) from None
    if not -ndim <= axis < ndim:
        raise RelationError(
            f"axis {axis} is out of range for a tensor of rank {ndim} "
            f"(legal: {-ndim} .. {ndim - 1})",
            arg=arg,
            got=t,
        )
    return axis % ndim


def broadcast_dim(a: Dim, b: Dim) -> Dim | None:
    """numpy broadcasting of one dim pair with gradual dims; None when incompatible.

    `?` with n (n != 1) gives n: the `?` must be 1 or n, and either way the result is n.

    >>> broadcast_dim(1, 4), broadcast_dim(ANY, 4), broadcast_dim(ANY, 1), broadcast_dim(2, 3)
    (4, 4, ?, None)
    """
    if a == b:
        return a
    if a == 1:
        return b
    if b == 1:
        return a
    if is_gradual(a) and is_gradual(b):
        return ANY  # either could be 1
    if is_gradual(a):
        return b
    if is_gradual(b):
        return a
    if isinstance(a, ShapeVar) or isinstance(b, ShapeVar):
        # a symbol could be 1 or equal the other at run time: keep the known one
        return b if isinstance(a, ShapeVar) else a
    return None


def broadcast_shapes(shapes: Sequence[Sequence[Dim]]) -> tuple[Dim, ...]:
    """numpy broadcasting of several shapes; RelationError(arg=i) for the first misfit."""
    ndim = max(len(s) for s in shapes)
    out: list[Dim] = [1] * ndim
    for i, s in enumerate(shapes):
        padded = [1] * (ndim - len(s)) + list(s)
        for k in range(ndim):
            d = broadcast_dim(out[k], padded[k])
            if d is None:
                raise RelationError(
                    f"shapes {', '.join(shape_str(x) for x in shapes[: i + 1])} do not "
                    f"broadcast: dim {k - (ndim - len(s))} of argument {i} is "
                    f"{dim_str(padded[k])}, the others give {dim_str(out[k])}",
                    arg=i,
                    got=None,
                )
            out[k] = d
    return tuple(out)


def as_tuple(value: Any, n: int, name: str) -> tuple[int, ...]:
    """An int or sequence attr as an n-tuple of ints (an int is repeated)."""
    if isinstance(value, int):
        return (value,) * n
    value = tuple(value)
    if len(value) == 1:
        return value * n
    if len(value) != n:
        raise RelationError(f"{name} must have 1 or {n} values, got {list(value)}")
    return tuple(int(v) for v in value)


def pad4(padding: Any) -> tuple[int, int, int, int]:
    """2-D padding as (top, left, bottom, right) from 1, 2 or 4 values, as in Relay."""
    p = (padding,) if isinstance(padding, int) else tuple(padding)
    if len(p) == 1:
        return (p[0],) * 4
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    if len(p) == 4:
        return (p[0], p[1], p[2], p[3])
    raise RelationError(f"padding must have 1, 2 or 4 values, got {list(p)}")


def tuplify(value: Any) -> Any:
    """Lists (also nested) as tuples, so attrs stay hashable and compare structurally."""
    if isinstance(value, list | tuple):
        return tuple(tuplify(v) for v in value)
    return value


def freeze_fields(obj: Any, *names: str) -> None:
    """In a frozen dataclass's __post_init__: turn list-valued fields into tuples."""
    for n in names:
        object.__setattr__(obj, n, tuplify(getattr(obj, n)))
