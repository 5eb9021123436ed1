"""dyn.reshape: a reshape whose new shape is a 1-D integer tensor computed at run time (as
TVM's relay.dyn.reshape), for models whose target shape comes from a `?` dim, e.g. the
flatten of exported ONNX models, `Reshape(x, Concat(Gather(Shape(x), 0), [-1]))`.

The new shape's values follow numpy and ONNX: -1 (at most one) is inferred from the
element count; 0 copies the data's dim at that position, or, with `allowzero=1` (ONNX's
attribute), is an extent of 0. The type needs only the new shape's static length: the
result has that rank and `?` dims, except where the values cannot change it (a rank-1
result holds every element; a rank-0 one needs exactly one). Wrong values are a
RelayRuntimeError when the op runs, naming the op and both shapes.

Where the new shape is a constant after folding, SimplifyExpr turns the call into the
static `reshape` (so relay_ir.build runs it); the VM runs what remains as ReshapeTensor,
a view of the same data, with the check of `resolve_newshape`.

    >>> from relay_ir.op.registry import REFERENCES, TYPE_RELATIONS, get_op
    >>> from relay_ir.ty import TensorType
    >>> op = get_op("dyn.reshape")
    >>> print(TYPE_RELATIONS[op]([TensorType((None, 4)), TensorType((2,), "int64")],
    ...                          op.make_attrs()))
    Tensor[(?, ?), float32]
    >>> REFERENCES[op](np.zeros((2, 3, 4)), np.array([0, -1]), attrs=op.make_attrs()).shape
    (2, 12)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.expr import Call, Expr
from relay_ir.op._common import ARG_NAMES, RelationError, make_call, product, shape_str, tensor_arg
from relay_ir.op.registry import PATTERNS, REFERENCES, TYPE_RELATIONS, OpPattern, register_op
from relay_ir.ty import ANY, TensorType, Type
from tessel_errors import RelayRuntimeError


@dataclass(frozen=True, slots=True)
class DynReshapeAttrs:
    """Attributes of dyn.reshape: `allowzero` 0 (a 0 copies the data's dim, as Relay and
    ONNX's default) or 1 (a 0 is an extent of 0)."""

    allowzero: int = 0


def _dyn_reshape_rel(types: list[Type], attrs: DynReshapeAttrs) -> Type:
    t = tensor_arg(types, 0)
    s = tensor_arg(types, 1, "a 1-D integer tensor (the new shape)")
    if attrs.allowzero not in (0, 1):
        raise RelationError(f"allowzero is 0 or 1, got {attrs.allowzero!r}")
    if s.ndim != 1 or np.dtype(s.dtype).kind != "i":
        raise RelationError(f"newshape must be a 1-D tensor of a signed integer dtype, got "
                            f"{s}", arg=1, expected="Tensor[(n,), int64]", got=s)
    rank = s.shape[0]
    if not isinstance(rank, int):
        raise RelationError(f"newshape {s} has a `?` length: the result's rank must be known "
                            "when compiling (give the new shape a static length)", arg=1, got=s)
    count = product(t.shape)
    if rank == 0 and isinstance(count, int) and count != 1:
        raise RelationError(f"newshape has 0 values (a scalar), but data {shape_str(t.shape)} "
                            f"has {count} elements", arg=0, got=t)
    if rank == 1:  # whatever the value, the one dim holds every element
        return TensorType((count,), t.dtype)
    return TensorType((ANY,) * rank, t.dtype)


def resolve_newshape(shape: Sequence[int], newshape: Any, allowzero: int) -> tuple[int, ...]:
    """The shape that `newshape` (with its 0s and -1) gives data of `shape`; a
    RelayRuntimeError naming dyn.reshape and both shapes when it cannot.

        >>> resolve_newshape((2, 3, 4), np.array([0, -1]), 0)
        (2, 12)
        >>> resolve_newshape((2, 3, 4), np.array([5, -1]), 0)
        Traceback (most recent call last):
        ...
        tessel_errors.RelayRuntimeError: dyn.reshape: cannot reshape data of shape (2, 3, 4) \
(24 elements) to newshape [5, -1]: 24 is not a multiple of 5
    """
    values = np.asarray(newshape)
    if values.ndim != 1 or values.dtype.kind not in "iu":
        raise RelayRuntimeError(f"dyn.reshape: newshape must be a 1-D integer tensor, got "
                                f"{values.dtype.name} of shape {shape_str(values.shape)}")
    want = [int(v) for v in values]
    count = math.prod(shape)

    def fail(why: str) -> RelayRuntimeError:
        return RelayRuntimeError(f"dyn.reshape: cannot reshape data of shape "
                                 f"{shape_str(shape)} ({count} elements) to newshape {want}: "
                                 f"{why}")

    if want.count(-1) > 1:
        raise fail("more than one -1 (only one dim can be inferred)")
    out: list[int] = []
    for i, v in enumerate(want):
        if v == 0 and not allowzero:
            if i >= len(shape):
                raise fail(f"the 0 at position {i} copies a dim the rank-{len(shape)} data "
                           "lacks")
            v = int(shape[i])
        elif v < -1:
            raise fail(f"{v} is not a dim (legal: an extent, 0, or -1 to infer one)")
        out.append(v)
    known = math.prod(d for d in out if d != -1)
    if -1 in out:
        if allowzero and 0 in want:
            raise fail("with allowzero=1 a 0 and a -1 cannot go together (ONNX forbids it)")
        if known == 0 or count % known:
            why = "the other dims hold 0 elements" if known == 0 else \
                f"{count} is not a multiple of {known}"
            raise fail(why)
        out[out.index(-1)] = count // known
    elif known != count:
        raise fail(f"the new shape holds {known} elements")
    return tuple(out)


def _dyn_reshape_ref(x: Any, newshape: Any, attrs: DynReshapeAttrs) -> np.ndarray:
    x = np.asarray(x)
    return np.reshape(x, resolve_newshape(x.shape, newshape, attrs.allowzero)).copy()


dyn_reshape_op = register_op("dyn.reshape", DynReshapeAttrs, 2,
                             "reshape to a shape given as a run-time tensor")
ARG_NAMES[dyn_reshape_op] = ("data", "newshape")
TYPE_RELATIONS[dyn_reshape_op] = _dyn_reshape_rel
REFERENCES[dyn_reshape_op] = _dyn_reshape_ref
PATTERNS[dyn_reshape_op] = OpPattern.OPAQUE


def dyn_reshape(data: Expr, newshape: Any, allowzero: bool = False) -> Call:
    """Reshape `data` to the shape held in the 1-D integer tensor `newshape` (0 copies a
    dim, -1 infers one; `allowzero=True`: 0 is an extent): dyn_reshape(x, shape_of(y)).

        >>> from relay_ir.builder import var
        >>> call = dyn_reshape(var("x", shape=(None, 6)), np.array([0, 2, 3]))
        >>> call.op.name, call.args[1].data.dtype
        ('dyn.reshape', dtype('int64'))
    """
    if not isinstance(newshape, Expr):
        newshape = np.asarray(newshape, dtype="int64")
    return make_call(dyn_reshape_op, [data, newshape], allowzero=int(bool(allowzero)))


__all__ = ["DynReshapeAttrs", "dyn_reshape", "dyn_reshape_op", "resolve_newshape"]
