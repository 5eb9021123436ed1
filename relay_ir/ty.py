"""Relay types: tensor types with gradual shapes, tuples, functions, ADTs and refs.

Types are small values compared structurally (frozen dataclasses with eq and hash).
A tensor dimension is an int, a named ShapeVar, or ANY (`?`, unknown until run time).

    >>> TensorType((1, "n", None), "float32")
    TensorType(shape=(1, ShapeVar(name='n'), ?), dtype='float32')
    >>> is_dynamic(TensorType((1, 3)))
    False
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tessel_errors import RelayError

if TYPE_CHECKING:  # pragma: no cover - only for annotations
    from relay_ir.expr import Constructor


@dataclass(frozen=True, slots=True)
class AnyDim:
    """An unknown dimension, written `?`; use the singleton ANY."""

    def __repr__(self) -> str:
        return "?"

    def __str__(self) -> str:
        return "?"


ANY = AnyDim()


@dataclass(frozen=True, slots=True)
class ShapeVar:
    """A named symbolic dimension such as `n` in `Tensor[(n, 3), float32]`."""

    name: str

    def __str__(self) -> str:
        return self.name


Dim = int | ShapeVar | AnyDim


def as_dim(d: Any) -> Dim:
    """Normalise a user-given dimension: None or "?" -> ANY, str -> ShapeVar, ints stay.

    >>> as_dim(None), as_dim("n"), as_dim(3)
    (?, ShapeVar(name='n'), 3)
    """
    if d is None or (isinstance(d, str) and d == "?"):
        return ANY
    if isinstance(d, (AnyDim, ShapeVar)):
        return d
    if isinstance(d, str):
        if not d.isidentifier():
            raise RelayError(f"bad shape dimension {d!r}: use an int, '?' or an identifier")
        return ShapeVar(d)
    if isinstance(d, bool):
        raise RelayError(f"bad shape dimension {d!r}: use an int, '?' or an identifier")
    try:
        import operator

        value = operator.index(d)
    except TypeError:
        raise RelayError(
            f"bad shape dimension {d!r}: use an int, None/'?' for unknown, or a name"
        ) from None
    if value < 0:
        raise RelayError(f"bad shape dimension {value}: dimensions are non-negative")
    return int(value)


class Type:
    """Base class of every Relay type."""

    __slots__ = ()

    def __str__(self) -> str:
        from relay_ir.printer import type_text

        return type_text(self)


@dataclass(frozen=True, slots=True)
class TensorType(Type):
    """A tensor of `dtype` with `shape`; a scalar has shape ()."""

    shape: tuple[Dim, ...]
    dtype: str = "float32"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(as_dim(d) for d in self.shape))
        object.__setattr__(self, "dtype", str(self.dtype))

    @property
    def ndim(self) -> int:
        """The rank: number of dimensions."""
        return len(self.shape)

    def __repr__(self) -> str:
        return f"TensorType(shape={self.shape!r}, dtype={self.dtype!r})"


def scalar_type(dtype: str) -> TensorType:
    """The type of a scalar of `dtype`.

    >>> scalar_type("int32")
    TensorType(shape=(), dtype='int32')
    """
    return TensorType((), dtype)


def is_dynamic(tensor_type: Type) -> bool:
    """Whether any dimension of a tensor type is not a concrete int.

    >>> is_dynamic(TensorType((None, 3)))
    True
    """
    if not isinstance(tensor_type, TensorType):
        return False
    return any(not isinstance(d, int) for d in tensor_type.shape)


@dataclass(frozen=True, slots=True)
class TupleType(Type):
    """The type of a tuple: one type per field."""

    fields: tuple[Type, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))


@dataclass(frozen=True, slots=True)
class TypeVar(Type):
    """A type parameter such as `A` in `fn [A](%x: A) -> A`."""

    name: str
    kind: str = "type"


@dataclass(frozen=True, slots=True)
class GlobalTypeVar(Type):
    """The name of an ADT definition, such as `List`."""

    name: str


@dataclass(frozen=True, slots=True)
class TypeCall(Type):
    """An ADT applied to type arguments: `List[Tensor[(3,), float32]]`."""

    func: GlobalTypeVar
    args: tuple[Type, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))


@dataclass(frozen=True, slots=True)
class FuncType(Type):
    """A function type `fn [type_params](arg_types) -> ret_type`."""

    arg_types: tuple[Type, ...]
    ret_type: Type
    type_params: tuple[TypeVar, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "arg_types", tuple(self.arg_types))
        object.__setattr__(self, "type_params", tuple(self.type_params))


@dataclass(frozen=True, slots=True)
class RefType(Type):
    """The type of a mutable reference cell holding a `value`."""

    value: Type


@dataclass(frozen=True, slots=True)
class IncompleteType(Type):
    """A type not yet known; only exists while type inference runs."""

    id: int


@dataclass(frozen=True, slots=True)
class TypeData(Type):
    """An ADT definition: `type List[A] { Cons(A, List[A]), Nil }`."""

    header: GlobalTypeVar
    type_vars: tuple[TypeVar, ...]
    constructors: tuple[Constructor, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "type_vars", tuple(self.type_vars))
        object.__setattr__(self, "constructors", tuple(self.constructors))

    def constructor(self, name: str) -> Constructor:
        """The constructor called `name`."""
        for c in self.constructors:
            if c.name_hint == name:
                return c
        raise RelayError(
            f"type {self.header.name} has no constructor {name!r}; "
            f"it has {[c.name_hint for c in self.constructors]}"
        )


__all__ = [
    "ANY",
    "AnyDim",
    "Dim",
    "FuncType",
    "GlobalTypeVar",
    "IncompleteType",
    "RefType",
    "ShapeVar",
    "TensorType",
    "TupleType",
    "Type",
    "TypeCall",
    "TypeData",
    "TypeVar",
    "as_dim",
    "is_dynamic",
    "scalar_type",
]
