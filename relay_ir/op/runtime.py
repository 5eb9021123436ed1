"""Run-time checks of gradual shapes: `runtime.check_shape`.

Type inference inserts `runtime.check_shape(x, shape=(-1, 3), message=...)` where the static
type of x had a `?` that the program later relied on being a number (see
relay_ir/typing/checks.py). The check passes the value through unchanged when its shape
fits (-1 marks a free dim) and raises RelayRuntimeError with the message otherwise, so a
program fails with an explanation instead of computing garbage.

    >>> import numpy as np
    >>> from relay_ir.op.registry import REFERENCES, get_op
    >>> op = get_op("runtime.check_shape")
    >>> REFERENCES[op](np.zeros((4, 3)), attrs=op.make_attrs({"shape": (-1, 3)})).shape
    (4, 3)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.expr import Call, Expr
from relay_ir.op._common import (
    ARG_NAMES,
    Refined,
    RelationError,
    dim_str,
    freeze_fields,
    make_call,
    merge_dim,
    tensor_arg,
)
from relay_ir.op.registry import PATTERNS, REFERENCES, TYPE_RELATIONS, OpPattern, register_op
from relay_ir.ty import ANY, TensorType, Type
from tessel_errors import RelayRuntimeError


@dataclass(frozen=True, slots=True)
class CheckShapeAttrs:
    """Attributes of runtime.check_shape: the expected shape (-1: any) and the message."""

    shape: tuple[int, ...]
    message: str = ""

    def __post_init__(self) -> None:
        freeze_fields(self, "shape")


def _check_shape_rel(types: list[Type], attrs: CheckShapeAttrs) -> Type:
    t = tensor_arg(types, 0)
    if len(attrs.shape) != t.ndim:
        raise RelationError(f"check_shape expects rank {len(attrs.shape)}, got rank {t.ndim}",
                            arg=0, got=t)
    shape = []
    for i, (have, want) in enumerate(zip(t.shape, attrs.shape)):
        merged = merge_dim(have, ANY if want == -1 else want)
        if merged is None:
            raise RelationError(f"dim {i} is statically {dim_str(have)}, the check wants "
                                f"{want}", arg=0, got=t)
        shape.append(merged)
    out = TensorType(tuple(shape), t.dtype)
    # the input is refined too: after the check passes, the value has this shape (so a
    # second inference of a checked program gives the same types and no new checks)
    return Refined(out, (out,)) if out != t else out


def shape_fits(shape: Sequence[int], expected: Sequence[int]) -> bool:
    """Whether a concrete shape matches an expected one (-1 matches any extent).

    >>> shape_fits((4, 3), (-1, 3)), shape_fits((4, 2), (-1, 3))
    (True, False)
    """
    return len(shape) == len(expected) and all(
        w == -1 or int(h) == w for h, w in zip(shape, expected)
    )


def _check_shape_ref(x: Any, attrs: CheckShapeAttrs) -> np.ndarray:
    x = np.asarray(x)
    if not shape_fits(x.shape, attrs.shape):
        want = "(" + ", ".join("?" if w == -1 else str(w) for w in attrs.shape) + ")"
        got = "(" + ", ".join(str(d) for d in x.shape) + ")"
        raise RelayRuntimeError(
            f"{attrs.message or 'run-time shape check failed'}: expected shape {want}, "
            f"got a value of shape {got}"
        )
    return x


check_shape_op = register_op("runtime.check_shape", CheckShapeAttrs, 1,
                             "fail at run time unless the shape fits")
ARG_NAMES[check_shape_op] = ("data",)
TYPE_RELATIONS[check_shape_op] = _check_shape_rel
REFERENCES[check_shape_op] = _check_shape_ref
PATTERNS[check_shape_op] = OpPattern.OPAQUE  # a check must run as written: never fused away


def check_shape(data: Expr, shape: Sequence[int], message: str = "") -> Call:
    """A run-time shape check that returns data: check_shape(x, (-1, 3), "dense: ...")."""
    return make_call(check_shape_op, [data], shape=tuple(int(s) for s in shape),
                     message=message)


def _value_type(v: Any) -> Type:
    from relay_ir.ty import TupleType

    if isinstance(v, tuple | list):
        return TupleType(tuple(_value_type(x) for x in v))
    a = np.asarray(v)
    return TensorType(tuple(int(d) for d in a.shape), str(a.dtype))


def check_op_arguments(op: Any, values: Sequence[Any], attrs: Any) -> None:
    """Run `op`'s type relation on the exact types of run-time values; RelayRuntimeError
    naming the op and argument if they do not fit (the dynamic half of gradual typing,
    for what check_shape cannot express: `?` vs `?`, broadcasting of a `?`).

    >>> import numpy as np
    >>> from relay_ir.op.registry import get_op
    >>> check_op_arguments(get_op("add"), [np.zeros(2), np.zeros(2)], None)
    """
    from relay_ir.op._common import NotReady, RelationError, arg_name
    from relay_ir.op.registry import TYPE_RELATIONS

    rel = TYPE_RELATIONS.get(op)
    if rel is None:
        return
    types = [_value_type(v) for v in values]
    try:
        rel(types, attrs)
    except NotReady:
        return
    except RelationError as e:
        where = f"argument {e.arg} ({arg_name(op, e.arg)}) " if e.arg is not None else ""
        shown = ", ".join(str(t) for t in types)
        raise RelayRuntimeError(
            f"{op.name}: {where}{e.message} (at run time, with arguments {shown})"
        ) from None


@dataclass(frozen=True, slots=True)
class RelaxShapeAttrs:
    """Attributes of runtime.relax_shape: the dims typed `?` from here on."""

    axes: tuple[int, ...]

    def __post_init__(self) -> None:
        freeze_fields(self, "axes")


def _relax_shape_rel(types: list[Type], attrs: RelaxShapeAttrs) -> Type:
    t = tensor_arg(types, 0)
    if any(not 0 <= a < t.ndim for a in attrs.axes):
        raise RelationError(f"relax_shape axes {list(attrs.axes)} are out of range for rank "
                            f"{t.ndim}", arg=0, got=t)
    return TensorType(tuple(ANY if i in attrs.axes else d for i, d in enumerate(t.shape)),
                      t.dtype)


relax_shape_op = register_op("runtime.relax_shape", RelaxShapeAttrs, 1,
                             "the value unchanged, typed with some dims `?`")
ARG_NAMES[relax_shape_op] = ("data",)
TYPE_RELATIONS[relax_shape_op] = _relax_shape_rel
REFERENCES[relax_shape_op] = lambda x, attrs: np.asarray(x)
PATTERNS[relax_shape_op] = OpPattern.OPAQUE


def relax_shape(data: Expr, axes: Sequence[int]) -> Call:
    """`data` typed with dims `axes` as `?` (the gradual upcast): the start of a value whose
    extent changes from one recursive call to the next, such as an ONNX Loop's scan output
    growing by one row an iteration. Type inference never binds those dims to the value's
    own extents, and FoldConstant leaves the call in place.

        >>> from relay_ir.builder import const
        >>> relax_shape(const(np.zeros((0, 3), "float32")), [0]).attrs.axes
        (0,)
    """
    return make_call(relax_shape_op, [data], axes=tuple(int(a) for a in axes))
