"""shape_of: a tensor's shape as a 1-D integer tensor, for programs that compute with the
extent of a `?` dim (a batch size, a trip count).

Its type needs only the input's rank: `shape_of(x: Tensor[(?, 3)])` is `Tensor[(2,),
int64]` whatever the batch. Where the input's shape is static, FoldConstant replaces the
call by a constant (so relay_ir.build never runs it); the VM runs what remains as its
ShapeOf instruction. The op computes nothing a kernel would, so FuseOps leaves it outside
every group (as TVM's shape_of).

    >>> from relay_ir.op.registry import REFERENCES, TYPE_RELATIONS, get_op
    >>> from relay_ir.ty import TensorType
    >>> op = get_op("shape_of")
    >>> print(TYPE_RELATIONS[op]([TensorType((None, 3))], op.make_attrs()))
    Tensor[(2,), int64]
    >>> REFERENCES[op](np.zeros((4, 3)), attrs=op.make_attrs({"dtype": "int32"}))
    array([4, 3], dtype=int32)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.expr import Call, Expr
from relay_ir.op._common import ARG_NAMES, RelationError, make_call, tensor_arg
from relay_ir.op.registry import PATTERNS, REFERENCES, TYPE_RELATIONS, OpPattern, register_op
from relay_ir.ty import TensorType, Type

INT_DTYPES = ("int32", "int64")


@dataclass(frozen=True, slots=True)
class ShapeOfAttrs:
    """Attributes of shape_of: the dtype of the result (int64, as ONNX Shape gives)."""

    dtype: str = "int64"


def _shape_of_rel(types: list[Type], attrs: ShapeOfAttrs) -> Type:
    t = tensor_arg(types, 0)
    if attrs.dtype not in INT_DTYPES:
        raise RelationError(f"shape_of gives {' or '.join(INT_DTYPES)}, not {attrs.dtype}; "
                            "give dtype=\"int64\" or \"int32\"", arg=0, got=t)
    return TensorType((t.ndim,), attrs.dtype)


def _shape_of_ref(x: Any, attrs: ShapeOfAttrs) -> np.ndarray:
    return np.asarray(np.shape(x), dtype=attrs.dtype)


shape_of_op = register_op("shape_of", ShapeOfAttrs, 1, "the shape of a tensor, as a 1-D tensor")
ARG_NAMES[shape_of_op] = ("data",)
TYPE_RELATIONS[shape_of_op] = _shape_of_rel
REFERENCES[shape_of_op] = _shape_of_ref
PATTERNS[shape_of_op] = OpPattern.OPAQUE


def shape_of(data: Expr, dtype: str = "int64") -> Call:
    """The shape of `data` as a 1-D tensor of `dtype`: shape_of(x), shape_of(x, "int32").

        >>> from relay_ir.builder import var
        >>> shape_of(var("x", shape=(None, 3))).attrs.dtype
        'int64'
    """
    return make_call(shape_of_op, [data], dtype=str(dtype))


def static_shape_of(call: Call, arg_type: Type) -> np.ndarray | None:
    """The value of a shape_of call whose argument type has no `?` dim, else None (what
    FoldConstant puts in its place).

        >>> from relay_ir.builder import var
        >>> static_shape_of(shape_of(var("x", shape=(2, 3))), TensorType((2, 3)))
        array([2, 3])
    """
    if not isinstance(arg_type, TensorType) or not all(isinstance(d, int) for d in arg_type.shape):
        return None
    return np.asarray(arg_type.shape, dtype=call.attrs.dtype)


__all__ = ["INT_DTYPES", "ShapeOfAttrs", "shape_of", "shape_of_op", "static_shape_of"]
