"""Unification of Relay types with gradual dims, for type inference.

Two kinds of unknowns are solved here:
- `IncompleteType(id)`: a whole type not known yet (an unannotated parameter, a call's
  result before its relation ran). Bound once, with an occurs check.
- `DimHole`: one `?` dim. Every `?` of an annotation (and every `?` a relation produces)
  becomes a fresh hole that remembers its *origin* (the parameter or call it came from).
  Unifying a hole with a number binds it: that is a refinement, recorded with its cause
  ("nn.dense at line 3"), and the origin later gets a run-time check (see checks.py).
  Two holes unify by union. A plain `?` (ANY) left in a type is consistent with anything
  and binds nothing.

Dims: ints and named ShapeVars are rigid (n unifies only with n).

    >>> u = Unifier()
    >>> a = u.fresh_type()
    >>> print(u.resolve(u.unify(a, TensorType((3,)), "example")))
    Tensor[(3,), float32]
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from relay_ir.op._common import DimHole, dim_str, is_gradual
from relay_ir.ty import (
    ANY,
    AnyDim,
    Dim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeVar,
)


class UnifyError(Exception):
    """Two types (or dims) cannot be made equal; `detail` says where inside them."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass(slots=True)
class Origin:
    """Where a `?` dim came from: a parameter or a call result (the node), and its axis."""

    kind: str  # "param" or "call"
    node: Any
    axis: int
    what: str  # how a message names it: "%x", "the result of reshape"


@dataclass(slots=True)
class Refinement:
    """A `?` that inference turned into a known dim, and what forced it."""

    origin: Origin
    value: Dim
    cause: str

    def __str__(self) -> str:
        return (f"{self.origin.what}: dim {self.origin.axis} refined from ? to "
                f"{dim_str(self.value)} by {self.cause}")


@dataclass
class Unifier:
    """Bindings of IncompleteTypes and DimHoles, with refinement records."""

    types: dict[int, Type] = field(default_factory=dict)
    dims: dict[str, Dim] = field(default_factory=dict)
    origins: dict[str, list[Origin]] = field(default_factory=dict)
    refinements: list[Refinement] = field(default_factory=list)
    version: int = 0  # bumped on every binding: the solver's fixpoint test
    _ids: Any = field(default_factory=lambda: itertools.count())

    # --- fresh unknowns ------------------------------------------------------------------

    def fresh_type(self) -> IncompleteType:
        """A new unknown type."""
        return IncompleteType(next(self._ids))

    def fresh_hole(self, origin: Origin | None = None) -> DimHole:
        """A new unknown dim, optionally remembering where it came from."""
        hole = DimHole(f"?{next(self._ids)}")
        self.origins[hole.name] = [origin] if origin is not None else []
        return hole

    def holeify(self, t: Type, origin: Any = None) -> Type:
        """`t` with every ANY dim replaced by a fresh hole.

        `origin(axis)` (a callable) gives the Origin of the dims of a top-level tensor type.
        """
        if isinstance(t, TensorType):
            shape = tuple(
                self.fresh_hole(origin(i) if origin else None) if isinstance(d, AnyDim) else d
                for i, d in enumerate(t.shape)
            )
            return TensorType(shape, t.dtype) if shape != t.shape else t
        return map_type(t, lambda x: self.holeify(x))

    # --- resolution ----------------------------------------------------------------------

    def find_dim(self, d: Dim) -> Dim:
        """The representative of a dim: its binding, followed to the end."""
        while isinstance(d, DimHole) and d.name in self.dims:
            d = self.dims[d.name]
        return d

    def shallow(self, t: Type) -> Type:
        """`t` with a bound IncompleteType at the top replaced by its binding."""
        while isinstance(t, IncompleteType) and t.id in self.types:
            t = self.types[t.id]
        return t

    def resolve(self, t: Type) -> Type:
        """`t` with every binding substituted (unbound holes stay holes)."""
        t = self.shallow(t)
        if isinstance(t, TensorType):
            shape = tuple(self.find_dim(d) for d in t.shape)
            return TensorType(shape, t.dtype) if shape != t.shape else t
        return map_type(t, self.resolve)

    def resolve_final(self, t: Type) -> Type:
        """`t` fully substituted with unbound holes printed as `?` (for results, messages)."""
        t = self.resolve(t)
        return _strip_holes(t)

    # --- unification ---------------------------------------------------------------------

    def unify(self, a: Type, b: Type, cause: str) -> Type:
        """Make a and b equal, binding unknowns; UnifyError if they clash."""
        a, b = self.shallow(a), self.shallow(b)
        if a is b:
            return a
        if isinstance(a, IncompleteType):
            return self._bind(a, b)
        if isinstance(b, IncompleteType):
            return self._bind(b, a)
        if isinstance(a, TensorType) and isinstance(b, TensorType):
            if a.dtype != b.dtype:
                raise UnifyError(f"dtype {a.dtype} vs {b.dtype}")
            if a.ndim != b.ndim:
                raise UnifyError(f"rank {a.ndim} vs {b.ndim}")
            for i, (x, y) in enumerate(zip(a.shape, b.shape)):
                try:
                    self.unify_dim(x, y, cause)
                except UnifyError as e:
                    raise UnifyError(f"dim {i}: {e.detail}") from None
            return self.resolve(a)
        if isinstance(a, TupleType) and isinstance(b, TupleType):
            if len(a.fields) != len(b.fields):
                raise UnifyError(f"a tuple of {len(a.fields)} vs a tuple of {len(b.fields)}")
            for i, (x, y) in enumerate(zip(a.fields, b.fields)):
                self._unify_part(x, y, cause, f"field {i}")
            return a
        if isinstance(a, FuncType) and isinstance(b, FuncType):
            return self._unify_func(a, b, cause)
        if isinstance(a, TypeCall) and isinstance(b, TypeCall):
            if a.func != b.func or len(a.args) != len(b.args):
                raise UnifyError(f"{a.func.name} vs {b.func.name}")
            for i, (x, y) in enumerate(zip(a.args, b.args)):
                self._unify_part(x, y, cause, f"type argument {i}")
            return a
        if isinstance(a, RefType) and isinstance(b, RefType):
            self._unify_part(a.value, b.value, cause, "the referenced value")
            return a
        if isinstance(a, TypeVar | GlobalTypeVar) and a == b:
            return a
        if isinstance(a, GlobalTypeVar) and isinstance(b, TypeCall) and not b.args:
            if a == b.func:
                return b
        if isinstance(b, GlobalTypeVar) and isinstance(a, TypeCall) and not a.args:
            if b == a.func:
                return a
        raise UnifyError(f"{_kind(a)} vs {_kind(b)}")

    def _unify_part(self, x: Type, y: Type, cause: str, where: str) -> None:
        try:
            self.unify(x, y, cause)
        except UnifyError as e:
            raise UnifyError(f"{where}: {e.detail}") from None

    def _unify_func(self, a: FuncType, b: FuncType, cause: str) -> Type:
        if len(a.arg_types) != len(b.arg_types):
            raise UnifyError(f"a function of {len(a.arg_types)} arguments vs one of "
                             f"{len(b.arg_types)}")
        if len(a.type_params) != len(b.type_params):
            raise UnifyError("functions with different numbers of type parameters")
        if a.type_params:  # alpha-rename b's type parameters to a's
            sub = dict(zip(b.type_params, a.type_params))
            b = substitute(b, sub)  # type: ignore[assignment]
        for i, (x, y) in enumerate(zip(a.arg_types, b.arg_types)):
            self._unify_part(x, y, cause, f"argument {i}")
        self._unify_part(a.ret_type, b.ret_type, cause, "the result")
        return a

    def _bind(self, var: IncompleteType, t: Type) -> Type:
        if occurs(var, self.resolve(t)):
            raise UnifyError(f"a type that contains itself ({var} in {t})")
        self.types[var.id] = t
        self.version += 1
        return t

    def unify_dim(self, a: Dim, b: Dim, cause: str) -> Dim:
        """Make two dims equal: holes bind (recording refinements), ANY matches anything."""
        a, b = self.find_dim(a), self.find_dim(b)
        if a == b:
            return a
        if isinstance(a, AnyDim):
            return b
        if isinstance(b, AnyDim):
            return a
        if isinstance(a, DimHole) and isinstance(b, DimHole):
            self.dims[a.name] = b
            self.origins.setdefault(b.name, []).extend(self.origins.pop(a.name, []))
            self.version += 1
            return b
        if isinstance(b, DimHole):
            a, b = b, a
        if isinstance(a, DimHole):
            self.dims[a.name] = b
            self.version += 1
            for origin in self.origins.pop(a.name, []):
                self.refinements.append(Refinement(origin, b, cause))
            return b
        raise UnifyError(f"{dim_str(a)} vs {dim_str(b)}")


# --- type utilities ----------------------------------------------------------------------


def map_type(t: Type, fn: Any) -> Type:
    """Rebuild a type applying `fn` to its immediate sub-types (fn returns None: keep)."""

    def f(x: Type) -> Type:
        y = fn(x)
        return x if y is None else y

    if isinstance(t, TupleType):
        return TupleType(tuple(f(x) for x in t.fields))
    if isinstance(t, FuncType):
        return FuncType(tuple(f(x) for x in t.arg_types), f(t.ret_type), t.type_params)
    if isinstance(t, TypeCall):
        return TypeCall(t.func, tuple(f(x) for x in t.args))
    if isinstance(t, RefType):
        return RefType(f(t.value))
    return t


def substitute(t: Type, sub: dict[TypeVar, Type]) -> Type:
    """`t` with type variables replaced per `sub` (inner binders shadow)."""
    if isinstance(t, TypeVar):
        return sub.get(t, t)
    if isinstance(t, FuncType) and t.type_params:
        sub = {k: v for k, v in sub.items() if k not in t.type_params}
    if isinstance(t, TensorType):
        return t
    return map_type(t, lambda x: substitute(x, sub))


def occurs(var: IncompleteType, t: Type) -> bool:
    """Whether `var` occurs inside `t` (an already resolved type)."""
    if t == var:
        return True
    found = False

    def visit(x: Type) -> None:
        nonlocal found
        found = found or occurs(var, x)

    map_type(t, visit)
    return found


def _strip_holes(t: Type) -> Type:
    if isinstance(t, TensorType):
        if any(is_gradual(d) for d in t.shape):
            return TensorType(tuple(ANY if is_gradual(d) else d for d in t.shape), t.dtype)
        return t
    return map_type(t, _strip_holes)


def has_incomplete(t: Type) -> bool:
    """Whether a resolved type still holds an IncompleteType."""
    if isinstance(t, IncompleteType):
        return True
    found = False

    def visit(x: Type) -> None:
        nonlocal found
        found = found or has_incomplete(x)

    map_type(t, visit)
    return found


def _kind(t: Type) -> str:
    if isinstance(t, TensorType):
        return "a tensor"
    if isinstance(t, TupleType):
        return f"a tuple of {len(t.fields)}"
    if isinstance(t, FuncType):
        return "a function"
    if isinstance(t, TypeCall | GlobalTypeVar):
        return f"an ADT {t.func.name if isinstance(t, TypeCall) else t.name}"
    if isinstance(t, RefType):
        return "a reference"
    if isinstance(t, TypeVar):
        return f"the type parameter {t.name}"
    return type(t).__name__
