"""Helpers of the op tests: run an op's relation and reference by name."""

from __future__ import annotations

from typing import Any

import numpy as np

from relay_ir.op._common import Refined
from relay_ir.op.registry import REFERENCES, TYPE_RELATIONS, get_op
from relay_ir.ty import TensorType, TupleType, Type


def T(shape: tuple, dtype: str = "float32") -> TensorType:  # noqa: N802 - reads like the type
    """A tensor type; None in the shape is `?`."""
    return TensorType(shape, dtype)


def rel(name: str, *types: Type, **attrs: Any) -> Type:
    """The output type of op `name` on argument types (Refined unwrapped)."""
    op = get_op(name)
    out = TYPE_RELATIONS[op](list(types), op.make_attrs(attrs))
    return out.ret if isinstance(out, Refined) else out


def rel_full(name: str, *types: Type, **attrs: Any) -> Any:
    """The raw relation result (a Type or a Refined)."""
    op = get_op(name)
    return TYPE_RELATIONS[op](list(types), op.make_attrs(attrs))


def ref(name: str, *values: Any, **attrs: Any) -> Any:
    """The reference result of op `name` on numpy values."""
    op = get_op(name)
    return REFERENCES[op](*values, attrs=op.make_attrs(attrs))


def type_of_value(v: Any) -> Type:
    """The exact type of a reference result (a tensor or a tuple of them)."""
    if isinstance(v, tuple):
        return TupleType(tuple(type_of_value(x) for x in v))
    v = np.asarray(v)
    return TensorType(v.shape, str(v.dtype))


def rand(rng: np.random.Generator, *shape: int, dtype: str = "float32") -> np.ndarray:
    """Standard-normal values of `dtype`."""
    return rng.standard_normal(shape).astype(dtype)
