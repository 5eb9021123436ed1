"""dyn.strided_slice: numpy slicing whose begin, end and strides are 1-D integer tensors
computed at run time (as TVM's relay.dyn.strided_slice), for models whose slice bounds
change while they run, e.g. an ONNX Loop body `Slice(x, Unsqueeze(i), Unsqueeze(i + 1))`.

The bounds follow ONNX's Slice (and numpy's slicing, which agrees but in one corner): a
negative index counts from the end, an index out of range is clamped to the dim (so
INT64_MAX means "to the end"), a negative stride walks backwards; a stride of 0 is a
RelayRuntimeError when the op runs, naming the op. The corner: with a negative stride, a
begin before the first element clamps to it in ONNX (onnxruntime agrees), where numpy
takes nothing; `x[-5:-5:-1]` of 3 elements is [x0] here, as onnxruntime gives. (One
place onnxruntime leaves the specification: it reads an end of INT64_MAX or INT32_MAX
with a backward stride as "past the first element"; here, as in the specification and
numpy, it is clamped to the last index. The specification's "to the end" backwards is
INT64_MIN, where all three agree.) `axes`
(an attribute, known when compiling) names the sliced dims, the first ones by default.
The type needs only the bounds' static length: the sliced dims are `?`, the others kept.

Where begin, end and strides are constants after folding, SimplifyExpr turns the call
into the static `strided_slice` (so relay_ir.build runs it); the VM runs what remains as
a host-side kernel: the slices resolved against the data's shape, then one copy of that
strided view into a fresh array.

    >>> from relay_ir.op.registry import REFERENCES, TYPE_RELATIONS, get_op
    >>> from relay_ir.ty import TensorType
    >>> op = get_op("dyn.strided_slice")
    >>> i64 = TensorType((1,), "int64")
    >>> print(TYPE_RELATIONS[op]([TensorType((5, 4)), i64, i64, i64], op.make_attrs()))
    Tensor[(?, 4), float32]
    >>> REFERENCES[op](np.arange(5), np.array([-1]), np.array([-9]), np.array([-2]),
    ...                attrs=op.make_attrs())
    array([4, 2, 0])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.expr import Call, Expr
from relay_ir.op._common import (
    ARG_NAMES,
    RelationError,
    freeze_fields,
    make_call,
    normalize_axis,
    shape_str,
    tensor_arg,
)
from relay_ir.op.registry import PATTERNS, REFERENCES, TYPE_RELATIONS, OpPattern, register_op
from relay_ir.ty import ANY, Dim, TensorType, Type
from tessel_errors import RelayError, RelayRuntimeError

_BOUNDS = ("begin", "end", "strides")


@dataclass(frozen=True, slots=True)
class DynStridedSliceAttrs:
    """Attributes of dyn.strided_slice: the sliced `axes` (None: the first len(begin)
    dims)."""

    axes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        freeze_fields(self, "axes")


def _sliced_axes(axes: tuple[int, ...] | None, n: int, t: TensorType) -> list[int]:
    if axes is None:
        if n > t.ndim:
            raise RelationError(f"dyn.strided_slice: {n} bounds per array but data "
                                f"{shape_str(t.shape)} has rank {t.ndim} (give at most one "
                                "per dim, or name the dims in `axes`)", arg=1, got=t)
        return list(range(n))
    if len(axes) != n:
        raise RelationError(f"dyn.strided_slice: axes {list(axes)} name {len(axes)} dims but "
                            f"begin/end/strides hold {n} values (one per sliced dim)", arg=1)
    out = [normalize_axis(a, t.ndim, 0, t) for a in axes]
    if len(set(out)) != len(out):
        raise RelationError(f"dyn.strided_slice: axes {list(axes)} name a dim twice", arg=0,
                            got=t)
    return out


def _dyn_strided_slice_rel(types: list[Type], attrs: DynStridedSliceAttrs) -> Type:
    t = tensor_arg(types, 0)
    lengths = []
    for i, name in enumerate(_BOUNDS, start=1):
        b = tensor_arg(types, i, f"a 1-D integer tensor ({name})")
        if b.ndim != 1 or np.dtype(b.dtype).kind != "i":
            raise RelationError(f"dyn.strided_slice: {name} must be a 1-D tensor of a signed "
                                f"integer dtype, got {b}", arg=i,
                                expected="Tensor[(n,), int64]", got=b)
        if not isinstance(b.shape[0], int):
            raise RelationError(f"dyn.strided_slice: {name} {b} has a `?` length: which dims "
                                "are sliced must be known when compiling (give it a static "
                                "length)", arg=i, got=b)
        lengths.append(b.shape[0])
    if len(set(lengths)) != 1:
        raise RelationError(f"dyn.strided_slice: begin, end and strides must have one value "
                            f"per sliced dim, got lengths {lengths}", arg=2, got=types[2])
    shape = list(t.shape)
    for a in _sliced_axes(attrs.axes, lengths[0], t):
        shape[a] = ANY
    return TensorType(tuple(shape), t.dtype)


def _ints(name: str, v: Any) -> list[int]:
    values = np.asarray(v)
    if values.ndim != 1 or values.dtype.kind not in "iu":
        raise RelayRuntimeError(f"dyn.strided_slice: {name} must be a 1-D integer tensor, got "
                                f"{values.dtype.name} of shape {shape_str(values.shape)}")
    return values.tolist()  # Python ints: INT64_MAX + dim does not overflow


def onnx_bounds(begin: int, end: int, stride: int, dim: int) -> tuple[int, int | None]:
    """The Python slice start and stop that take what ONNX's Slice takes of a dim of
    extent `dim` (the specification's clamping: begin to [0, dim] or, striding backwards,
    [0, dim - 1]; end to [0, dim] or [-1, dim - 1], where -1 is "past the first", a None
    stop for Python).

        >>> onnx_bounds(-5, -5, -1, 3), onnx_bounds(2**63 - 1, -2**63, 1, 3)
        ((0, None), (3, 0))
    """
    begin, end = begin + dim if begin < 0 else begin, end + dim if end < 0 else end
    if stride > 0:
        return min(max(begin, 0), dim), min(max(end, 0), dim)
    end = min(max(end, -1), dim - 1)
    return min(max(begin, 0), dim - 1), None if end < 0 else end


def static_bounds(begin: int, end: int, stride: int, dim: Dim) -> tuple[int, int] | None:
    """Bounds for the static strided_slice (numpy's slicing) that take what ONNX's Slice
    takes of a dim that is `dim` when run; None where no pair can for a `?` dim (a
    backwards slice that may begin before the first element: see the module docstring).

        >>> static_bounds(-5, -5, -1, 3), static_bounds(2, -1, 1, ANY)
        ((0, -4), (2, -1))
    """
    if isinstance(dim, int):
        lo, hi = onnx_bounds(begin, end, stride, dim)
        return lo, -(dim + 1) if hi is None else hi
    if stride < 0 and begin < -1 and end < 0:
        return None  # numpy and ONNX differ when -begin exceeds the dim, unknown here
    big = 2**62  # beyond any real dim, yet small enough for a kernel's index arithmetic
    return max(-big, min(big, begin)), max(-big, min(big, end))


def resolve_slices(shape: Sequence[int], begin: Any, end: Any, strides: Any,
                   axes: Sequence[int] | None = None) -> tuple[slice, ...]:
    """One slice per dim of data of `shape` for the run-time bounds (numpy/ONNX clamping);
    a RelayRuntimeError naming dyn.strided_slice when they do not fit.

        >>> resolve_slices((4, 6), np.array([1]), np.array([99]), np.array([2]), (1,))
        (slice(None, None, None), slice(1, 6, 2))
        >>> resolve_slices((4,), np.array([0]), np.array([4]), np.array([0]))
        Traceback (most recent call last):
        ...
        tessel_errors.RelayRuntimeError: dyn.strided_slice: a stride of 0 (strides [0]) on \
data of shape (4,): a stride must be a nonzero integer
    """
    b, e, s = _ints("begin", begin), _ints("end", end), _ints("strides", strides)
    if not len(b) == len(e) == len(s):
        raise RelayRuntimeError(f"dyn.strided_slice: begin {b}, end {e} and strides {s} must "
                                "have one value per sliced dim")
    if 0 in s:
        raise RelayRuntimeError(f"dyn.strided_slice: a stride of 0 (strides {s}) on data of "
                                f"shape {shape_str(shape)}: a stride must be a nonzero "
                                "integer")
    rank = len(shape)
    dims = list(range(len(b))) if axes is None else [a % rank for a in axes]
    if len(dims) != len(b) or any(not 0 <= d < rank for d in dims):
        raise RelayRuntimeError(f"dyn.strided_slice: {len(b)} bounds for axes {dims} do not "
                                f"fit data of shape {shape_str(shape)}")
    out = [slice(None)] * rank
    for d, lo, hi, step in zip(dims, b, e, s):
        out[d] = slice(*onnx_bounds(lo, hi, step, shape[d]), step)
    return tuple(out)


def _dyn_strided_slice_ref(x: Any, begin: Any, end: Any, strides: Any,
                           attrs: DynStridedSliceAttrs) -> np.ndarray:
    x = np.asarray(x)
    # the copy of the strided view is the op's result: a fresh C-contiguous array
    return np.ascontiguousarray(x[resolve_slices(x.shape, begin, end, strides, attrs.axes)])


dyn_strided_slice_op = register_op("dyn.strided_slice", DynStridedSliceAttrs, 4,
                                   "numpy slicing with bounds given as run-time tensors")
ARG_NAMES[dyn_strided_slice_op] = ("data", *_BOUNDS)
TYPE_RELATIONS[dyn_strided_slice_op] = _dyn_strided_slice_rel
REFERENCES[dyn_strided_slice_op] = _dyn_strided_slice_ref
PATTERNS[dyn_strided_slice_op] = OpPattern.OPAQUE


def dyn_strided_slice(data: Expr, begin: Any, end: Any, strides: Any = None,
                      axes: Sequence[int] | None = None) -> Call:
    """numpy slicing data[begin:end:strides] along `axes` (default the first dims), the
    bounds 1-D integer tensors known at run time (strides default to ones; numbers and
    arrays become int64 constants): dyn_strided_slice(x, b, e, axes=[1]).

        >>> from relay_ir.builder import var
        >>> call = dyn_strided_slice(var("x", shape=(5,)), var("b", shape=(1,), dtype="int64"),
        ...                          [5])
        >>> call.op.name, call.args[3].data
        ('dyn.strided_slice', array([1]))
    """
    def tensor(v: Any) -> Any:
        return v if isinstance(v, Expr) else np.asarray(v, dtype="int64").reshape(-1)

    if strides is None:
        n = len(axes) if axes is not None else None
        if n is None:
            n = next((int(np.size(v)) for v in (begin, end) if not isinstance(v, Expr)), None)
        if n is None:
            raise RelayError("dyn_strided_slice: give strides (or axes) when begin and end "
                                "are both expressions: their length is not known here")
        strides = np.ones(n, "int64")
    return make_call(dyn_strided_slice_op, [data, tensor(begin), tensor(end), tensor(strides)],
                     axes=None if axes is None else tuple(int(a) for a in axes))


__all__ = ["DynStridedSliceAttrs", "dyn_strided_slice", "dyn_strided_slice_op",
           "onnx_bounds", "resolve_slices", "static_bounds"]
