"""Structural keys of expressions: equal keys mean equal trees (vars compare by identity).

The simplifier collects like terms by these keys, since nodes themselves hash by identity.

    >>> import tensor_expr as te
    >>> from tensor_expr.arith.structural import structural_equal
    >>> i = te.var("i")
    >>> structural_equal(i * 4 + 1, i * 4 + 1), structural_equal(i * 4, i * 3)
    (True, False)
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Hashable
from typing import Any

from tensor_expr.expr import FloatImm, IntImm, IterVar, PrimExpr, Var

_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls))
        _FIELDS[cls] = names
    return names


def struct_key(e: Any, memo: dict[int, tuple[Any, Hashable]] | None = None) -> Hashable:
    """A hashable key equal for structurally equal expressions: `struct_key(i + 1)`."""
    t = type(e)
    if t is Var:  # the most frequent atoms: no memo entry (whoever keys a var holds it)
        return ("Var", id(e))
    if t is IntImm:
        return ("Int", e.dtype, e.value)
    if memo is None:
        memo = {}
    hit = memo.get(id(e))
    if hit is not None:
        return hit[1]
    key = _key(e, memo)
    memo[id(e)] = (e, key)  # holding `e` keeps its id from being reused
    return key


def _key(e: Any, memo: dict[int, tuple[Any, Hashable]]) -> Hashable:
    if isinstance(e, Var):
        return ("Var", id(e))
    if isinstance(e, IntImm):
        return ("Int", e.dtype, e.value)
    if isinstance(e, FloatImm):
        return ("Float", e.dtype, repr(e.value))
    if isinstance(e, IterVar):
        return ("Var", id(e.var))
    if isinstance(e, PrimExpr) and hasattr(type(e), "__dataclass_fields__"):
        parts: list[Hashable] = [type(e).__name__]
        for name in _fields(type(e)):
            parts.append(struct_key(getattr(e, name), memo))
        return tuple(parts)
    if isinstance(e, tuple):
        return ("tuple",) + tuple(struct_key(x, memo) for x in e)
    if isinstance(e, (str, int, float, bool, enum.Enum)) or e is None:
        return ("lit", e)
    # buffers, tensors, reducers: the same object, not an equal-looking one
    return ("obj", id(e))


def structural_equal(a: Any, b: Any) -> bool:
    """True when `a` and `b` are the same expression tree (vars by identity)."""
    if a is b:
        return True
    memo: dict[int, tuple[Any, Hashable]] = {}
    return struct_key(a, memo) == struct_key(b, memo)
