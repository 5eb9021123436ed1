"""Reductions: sum, mean, max, min, prod, argmax, argmin (axis, keepdims, exclude as in Relay).

`axis=None` reduces every dim; `exclude=True` reduces every dim *not* listed. argmax and
argmin return int32 indices and take one axis (or None: the flat index).

    >>> from relay_ir.op.registry import TYPE_RELATIONS, get_op
    >>> from relay_ir.ty import TensorType
    >>> op = get_op("sum")
    >>> print(TYPE_RELATIONS[op]([TensorType((2, 3, 4))], op.make_attrs({"axis": (1,)})))
    Tensor[(2, 4), float32]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.expr import Call, Expr
from relay_ir.op._common import (
    ARG_NAMES,
    RelationError,
    make_call,
    normalize_axis,
    tensor_arg,
)
from relay_ir.op.registry import PATTERNS, REFERENCES, TYPE_RELATIONS, OpPattern, register_op
from relay_ir.ty import TensorType, Type


@dataclass(frozen=True, slots=True)
class ReduceAttrs:
    """Attributes of a reduction: axes (None: all), keepdims, exclude."""

    axis: tuple[int, ...] | None = None
    keepdims: bool = False
    exclude: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.axis, int):
            object.__setattr__(self, "axis", (self.axis,))
        elif self.axis is not None:
            object.__setattr__(self, "axis", tuple(int(a) for a in self.axis))


def reduced_axes(attrs: ReduceAttrs, ndim: int, t: Type | None = None) -> tuple[int, ...]:
    """The sorted axes a reduction removes, after negative axes and exclude.

    >>> reduced_axes(ReduceAttrs(axis=(-1,)), 3), reduced_axes(ReduceAttrs((0,), exclude=True), 3)
    ((2,), (1, 2))
    """
    if attrs.axis is None:
        axes = tuple(range(ndim))
        return () if attrs.exclude else axes
    axes = tuple(normalize_axis(a, ndim, 0, t) for a in attrs.axis)
    if len(set(axes)) != len(axes):
        raise RelationError(f"axis {list(attrs.axis)} names a dim twice", arg=0, got=t)
    if attrs.exclude:
        return tuple(a for a in range(ndim) if a not in axes)
    return tuple(sorted(axes))


def _reduce_shape(t: TensorType, attrs: ReduceAttrs) -> tuple:
    axes = reduced_axes(attrs, t.ndim, t)
    if attrs.keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(t.shape))
    return tuple(d for i, d in enumerate(t.shape) if i not in axes)


def _reduce_rel(types: list[Type], attrs: ReduceAttrs) -> Type:
    t = tensor_arg(types, 0)
    return TensorType(_reduce_shape(t, attrs), t.dtype)


def _arg_rel(types: list[Type], attrs: ReduceAttrs) -> Type:
    t = tensor_arg(types, 0)
    axes = reduced_axes(attrs, t.ndim, t)
    if attrs.axis is not None and len(axes) > 1:
        raise RelationError(
            f"argmax/argmin take one axis (or none), got {list(attrs.axis)}", arg=0, got=t
        )
    return TensorType(_reduce_shape(t, attrs), "int32")


def _needs_elements(rel: Callable[[list[Type], ReduceAttrs], Type], name: str
                    ) -> Callable[[list[Type], ReduceAttrs], Type]:
    """`rel`, refusing an empty reduction: max/min/argmax/argmin have no identity, so
    their value over zero elements is undefined (numpy raises; a kernel would invent one)."""
    def checked(types: list[Type], attrs: ReduceAttrs) -> Type:
        out = rel(types, attrs)
        t = tensor_arg(types, 0)
        axes = tuple(range(t.ndim)) if attrs.axis is None and not attrs.exclude \
            else reduced_axes(attrs, t.ndim, t)
        empty = [a for a in axes if isinstance(t.shape[a], int) and t.shape[a] == 0]
        if empty:
            raise RelationError(
                f"{name} over axis {empty[0]}, which has extent 0: {name} of no elements is "
                "undefined (it has no identity); reduce a non-empty axis, or use sum",
                arg=0, got=t)
        return out

    return checked


def _reduce_ref(fn: Callable[..., np.ndarray], exact: bool) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: ReduceAttrs) -> np.ndarray:
        axes = reduced_axes(attrs, x.ndim)
        src = x.astype(np.float64) if exact and x.dtype.kind == "f" else x
        out = fn(src, axis=axes, keepdims=attrs.keepdims) if axes else src.copy()
        return np.asarray(out).astype(x.dtype)

    return ref


def _arg_ref(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    def ref(x: np.ndarray, attrs: ReduceAttrs) -> np.ndarray:
        axes = reduced_axes(attrs, x.ndim)
        if attrs.axis is None and not attrs.exclude:
            flat = fn(x.reshape(-1))
            shape = (1,) * x.ndim if attrs.keepdims else ()
            return np.asarray(flat, dtype=np.int32).reshape(shape)
        if not axes:
            return np.zeros(x.shape, np.int32)
        out = fn(x, axis=axes[0])
        if attrs.keepdims:
            out = np.expand_dims(out, axes[0])
        return np.asarray(out, dtype=np.int32)

    return ref


_REDUCTIONS = {
    "sum": (_reduce_rel, _reduce_ref(np.sum, True)),
    "mean": (_reduce_rel, _reduce_ref(np.mean, True)),
    "max": (_needs_elements(_reduce_rel, "max"), _reduce_ref(np.max, False)),
    "min": (_needs_elements(_reduce_rel, "min"), _reduce_ref(np.min, False)),
    "prod": (_reduce_rel, _reduce_ref(np.prod, True)),
    "argmax": (_needs_elements(_arg_rel, "argmax"), _arg_ref(np.argmax)),
    "argmin": (_needs_elements(_arg_rel, "argmin"), _arg_ref(np.argmin)),
}
REDUCE_OPS = {}
for _name, (_rel, _ref) in _REDUCTIONS.items():
    _op = register_op(_name, ReduceAttrs, 1, f"reduction {_name}")
    ARG_NAMES[_op] = ("data",)
    TYPE_RELATIONS[_op] = _rel
    REFERENCES[_op] = _ref
    PATTERNS[_op] = OpPattern.COMM_REDUCE
    REDUCE_OPS[_name] = _op


def _builder(name: str) -> Callable[..., Call]:
    op = REDUCE_OPS[name]

    def build(data: Expr, axis: Any = None, keepdims: bool = False,
              exclude: bool = False) -> Call:
        return make_call(op, [data], axis=axis, keepdims=keepdims, exclude=exclude)

    build.__name__ = build.__qualname__ = name
    build.__doc__ = f"Reduction {name} over `axis` (None: all): {name}(x, axis=1)."
    return build


sum = _builder("sum")  # noqa: A001 - Relay's op names
mean = _builder("mean")
max = _builder("max")  # noqa: A001
min = _builder("min")  # noqa: A001
prod = _builder("prod")
argmax = _builder("argmax")
argmin = _builder("argmin")

__all__ = ["argmax", "argmin", "max", "mean", "min", "prod", "sum"]
