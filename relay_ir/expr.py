"""Relay expressions: immutable nodes with identity hash (models are DAGs; memo by identity).

Every expression carries two trailing keyword fields that structural equality ignores:
`span` (where it came from) and `checked_type` (filled in by InferType). Change a node
with `dataclasses.replace`.

    >>> x = Var("x", TensorType((3,), "float32"))
    >>> f = Function((x,), x)
    >>> f.params[0] is x
    True
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from relay_ir.span import Span
from relay_ir.ty import GlobalTypeVar, TensorType, Type, TypeVar

_NODE = {"frozen": True, "slots": True, "eq": False}


@dataclass(**_NODE)
class Expr:
    """Base class of every Relay expression."""

    span: Span | None = field(default=None, kw_only=True, repr=False)
    checked_type: Type | None = field(default=None, kw_only=True, repr=False)

    def __str__(self) -> str:
        from relay_ir.printer import astext

        return astext(self)


@dataclass(**_NODE)
class Var(Expr):
    """A local variable, `%x`; compared by identity, `name_hint` is only for printing."""

    name_hint: str
    type_annotation: Type | None = None

    def __repr__(self) -> str:
        return f"Var(%{self.name_hint})"


@dataclass(**_NODE)
class GlobalVar(Expr):
    """A global function name, `@f`; one GlobalVar per name within a module."""

    name_hint: str

    def __repr__(self) -> str:
        return f"GlobalVar(@{self.name_hint})"


@dataclass(**_NODE)
class Constant(Expr):
    """A constant tensor (a numpy array; scalars are 0-d arrays)."""

    data: np.ndarray

    def __post_init__(self) -> None:
        if not isinstance(self.data, np.ndarray):
            object.__setattr__(self, "data", np.asarray(self.data))

    @property
    def dtype(self) -> str:
        """The numpy dtype name of the data, e.g. 'float32'."""
        return str(self.data.dtype)

    @property
    def tensor_type(self) -> TensorType:
        """The exact type of this constant."""
        return TensorType(tuple(int(d) for d in self.data.shape), self.dtype)

    def __repr__(self) -> str:
        return f"Constant({self.data.dtype}{list(self.data.shape)})"


@dataclass(**_NODE)
class Tuple(Expr):
    """A tuple `(a, b, ...)`."""

    fields: tuple[Expr, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "fields", tuple(self.fields))


@dataclass(**_NODE)
class TupleGetItem(Expr):
    """Field `index` of a tuple, `%t.0`."""

    tuple_value: Expr
    index: int


@dataclass(**_NODE)
class Constructor(Expr):
    """An ADT constructor such as `Cons`; `tag` is its position in the TypeData."""

    name_hint: str
    inputs: tuple[Type, ...]
    belong_to: GlobalTypeVar
    tag: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "inputs", tuple(self.inputs))

    def __repr__(self) -> str:
        return f"Constructor({self.name_hint})"


@dataclass(**_NODE)
class Call(Expr):
    """A call of an Op, a Constructor, or a function-valued expression."""

    op: Any  # Expr | Op | Constructor
    args: tuple[Expr, ...]
    attrs: Any = None
    type_args: tuple[Type, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "type_args", tuple(self.type_args))


@dataclass(**_NODE)
class Function(Expr):
    """A function `fn [type_params](params) -> ret_type { body }` with attrs."""

    params: tuple[Var, ...]
    body: Expr
    ret_type: Type | None = None
    type_params: tuple[TypeVar, ...] = ()
    attrs: tuple[tuple[str, Any], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "type_params", tuple(self.type_params))
        attrs = self.attrs.items() if isinstance(self.attrs, dict) else self.attrs
        object.__setattr__(self, "attrs", tuple((str(k), v) for k, v in attrs))

    def attr(self, name: str, default: Any = None) -> Any:
        """The value of attribute `name` (e.g. "Primitive"), or `default`.

        >>> Function((), Tuple(()), attrs=(("Primitive", 1),)).attr("Primitive")
        1
        """
        for k, v in self.attrs:
            if k == name:
                return v
        return default

    def with_attr(self, name: str, value: Any) -> Function:
        """A copy with attribute `name` set to `value`."""
        from dataclasses import replace

        rest = tuple((k, v) for k, v in self.attrs if k != name)
        return replace(self, attrs=rest + ((name, value),))


@dataclass(**_NODE)
class Let(Expr):
    """`let %var = value; body`."""

    var: Var
    value: Expr
    body: Expr


@dataclass(**_NODE)
class If(Expr):
    """`if (cond) { true_branch } else { false_branch }`; cond is a bool scalar."""

    cond: Expr
    true_branch: Expr
    false_branch: Expr


class Pattern:
    """Base class of match patterns."""

    __slots__ = ()


@dataclass(**_NODE)
class PatternWildcard(Pattern):
    """`_`: matches anything, binds nothing."""


@dataclass(**_NODE)
class PatternVar(Pattern):
    """`%x`: matches anything and binds it."""

    var: Var


@dataclass(**_NODE)
class PatternConstructor(Pattern):
    """`Cons(p1, p2)`: matches values built by `constructor`."""

    constructor: Constructor
    patterns: tuple[Pattern, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(self.patterns))


@dataclass(**_NODE)
class PatternTuple(Pattern):
    """`(p1, p2)`: matches a tuple field by field."""

    patterns: tuple[Pattern, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "patterns", tuple(self.patterns))


@dataclass(**_NODE)
class Clause:
    """One arm `lhs => rhs` of a match."""

    lhs: Pattern
    rhs: Expr


@dataclass(**_NODE)
class Match(Expr):
    """`match (data) { clauses }`; `match?` (complete=False) may be non-exhaustive."""

    data: Expr
    clauses: tuple[Clause, ...]
    complete: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "clauses", tuple(self.clauses))


@dataclass(**_NODE)
class RefCreate(Expr):
    """`ref(value)`: a new mutable cell."""

    value: Expr


@dataclass(**_NODE)
class RefRead(Expr):
    """`ref_read(ref)` (Relay's `!ref`): the cell's current value."""

    ref: Expr


@dataclass(**_NODE)
class RefWrite(Expr):
    """`ref_write(ref, value)` (Relay's `ref := value`): store, evaluates to ()."""

    ref: Expr
    value: Expr


def pattern_vars(pattern: Pattern) -> list[Var]:
    """The variables a pattern binds, left to right.

    >>> pattern_vars(PatternTuple((PatternVar(Var("a")), PatternWildcard())))
    [Var(%a)]
    """
    out: list[Var] = []
    stack = [pattern]
    while stack:
        p = stack.pop()
        if isinstance(p, PatternVar):
            out.append(p.var)
        elif isinstance(p, (PatternConstructor, PatternTuple)):
            stack.extend(reversed(p.patterns))
    return out


__all__ = [
    "Call",
    "Clause",
    "Constant",
    "Constructor",
    "Expr",
    "Function",
    "GlobalVar",
    "If",
    "Let",
    "Match",
    "Pattern",
    "PatternConstructor",
    "PatternTuple",
    "PatternVar",
    "PatternWildcard",
    "RefCreate",
    "RefRead",
    "RefWrite",
    "Tuple",
    "TupleGetItem",
    "Var",
    "pattern_vars",
]
