"""Attribute values read from Relay text, checked against the op's attrs class field types.

Text can spell any value anywhere (`newshape=[(8,), 2]`, `axis=1.5`); the type relations
trust their attrs, so the parser checks each value against the field's annotation first.

    >>> from relay_ir.op.transform import ReshapeAttrs
    >>> attr_type_problem(ReshapeAttrs, "newshape", (2, 3)) is None
    True
    >>> attr_type_problem(ReshapeAttrs, "newshape", ((8,), 2))
    'newshape takes tuple[int, ...], got ((8,), 2)'
"""

from __future__ import annotations

import functools
import types
import typing
from typing import Any


@functools.cache
def _hints(attrs_type: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(attrs_type)
    except (NameError, TypeError):  # an annotation we cannot resolve: nothing to check
        return {}


def attr_type_problem(attrs_type: type, name: str, value: Any) -> str | None:
    """Why `value` does not fit field `name` of `attrs_type`, or None when it does."""
    hint = _hints(attrs_type).get(name)
    if hint is None or _fits(value, hint):
        return None
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    return f"{name} takes {_show(hint)}, got {shown}"


def _fits(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, h) for h in typing.get_args(hint))
    if origin is typing.Literal:
        return value in typing.get_args(hint)
    if origin in (tuple, list):
        args = typing.get_args(hint)
        if not isinstance(value, tuple):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return len(args) == len(value) and all(_fits(v, h) for v, h in zip(value, args))
    return True  # a field type this check does not know: the attrs class decides


def _show(hint: Any) -> str:
    return getattr(hint, "__name__", None) if isinstance(hint, type) else \
        str(hint).replace("typing.", "")
