"""The Relay text printer (work in progress: types first)."""

from __future__ import annotations

from relay_ir.ty import (
    AnyDim,
    FuncType,
    GlobalTypeVar,
    IncompleteType,
    RefType,
    ShapeVar,
    TensorType,
    TupleType,
    Type,
    TypeCall,
    TypeData,
    TypeVar,
)


def dim_text(d: object) -> str:
    """A dimension as text: `3`, `n` or `?`."""
    if isinstance(d, AnyDim):
        return "?"
    if isinstance(d, ShapeVar):
        return d.name
    return str(d)


def type_text(t: Type) -> str:
    """A type in Relay syntax.

    >>> type_text(TensorType((1, None), "float32"))
    'Tensor[(1, ?), float32]'
    """
    if isinstance(t, TensorType):
        if not t.shape:
            return t.dtype
        dims = ", ".join(dim_text(d) for d in t.shape)
        if len(t.shape) == 1:
            dims += ","
        return f"Tensor[({dims}), {t.dtype}]"
    if isinstance(t, TupleType):
        inner = ", ".join(type_text(f) for f in t.fields)
        return f"({inner},)" if len(t.fields) == 1 else f"({inner})"
    if isinstance(t, TypeVar):
        return t.name
    if isinstance(t, GlobalTypeVar):
        return t.name
    if isinstance(t, TypeCall):
        if not t.args:
            return t.func.name
        return f"{t.func.name}[{', '.join(type_text(a) for a in t.args)}]"
    if isinstance(t, FuncType):
        tp = f"[{', '.join(v.name for v in t.type_params)}]" if t.type_params else ""
        args = ", ".join(type_text(a) for a in t.arg_types)
        return f"fn {tp}({args}) -> {type_text(t.ret_type)}"
    if isinstance(t, RefType):
        return f"Ref[{type_text(t.value)}]"
    if isinstance(t, IncompleteType):
        return f"?t{t.id}"
    if isinstance(t, TypeData):
        return f"type {t.header.name}"
    return repr(t)
