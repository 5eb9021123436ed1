"""Shape ops (all injective): reshape, transpose, concatenate, split, squeeze, expand_dims,
take, strided_slice, layout_transform.

reshape follows Relay: 0 copies the input dim at that position, -1 is inferred. With gradual
shapes a relation may also refine its input: reshaping a (2, ?) tensor to (12,) proves the
`?` is 6; concatenating (?, 3) with (2, ?) proves the second `?` is 3.

    >>> from relay_ir.op.registry import TYPE_RELATIONS, get_op
    >>> from relay_ir.ty import TensorType
    >>> op = get_op("reshape")
    >>> print(TYPE_RELATIONS[op]([TensorType((None, 6))], op.make_attrs({"newshape": (-1, 3)})))
    Tensor[(?, 3), float32]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from relay_ir.expr import Call, Expr, Tuple
from relay_ir.op._common import (
    ARG_NAMES,
    Refined,
    RelationError,
    dim_str,
    freeze_fields,
    make_call,
    merge_dim,
    normalize_axis,
    require_dim,
    same_dtype,
    shape_str,
    tensor_arg,
    tuple_of_tensors,
)
from relay_ir.op.registry import PATTERNS, REFERENCES, TYPE_RELATIONS, OpPattern, register_op
from relay_ir.ty import ANY, Dim, TensorType, TupleType, Type

# --- reshape -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ReshapeAttrs:
    """Attributes of reshape: the new shape, with 0 (copy) and -1 (infer) as in Relay."""

    newshape: tuple[int, ...]

    def __post_init__(self) -> None:
        freeze_fields(self, "newshape")


def _known_product(dims: Sequence[Dim]) -> tuple[int, list[int]]:
    """Product of the int dims and the positions of the others."""
    prod, unknown = 1, []
    for i, d in enumerate(dims):
        if isinstance(d, int):
            prod *= d
        else:
            unknown.append(i)
    return prod, unknown


def _reshape_rel(types: list[Type], attrs: ReshapeAttrs) -> Type:
    t = tensor_arg(types, 0)
    out: list[Dim | None] = []  # None marks the -1
    copied: set[int] = set()
    for i, v in enumerate(attrs.newshape):
        if v == 0:
            if i >= t.ndim:
                raise RelationError(f"newshape {list(attrs.newshape)}: 0 at position {i} "
                                    f"copies a dim the rank-{t.ndim} input lacks", arg=0, got=t)
            out.append(t.shape[i])
            copied.add(i)
        elif v == -1:
            if None in out:
                raise RelationError(f"newshape {list(attrs.newshape)} has more than one -1")
            out.append(None)
        elif v > 0:
            out.append(int(v))
        else:
            raise RelationError(f"newshape {list(attrs.newshape)}: {v} is not a dim "
                                f"(legal: positive, 0 to copy, -1 to infer)")
    in_known, in_unknown = _known_product(t.shape)
    rest = [d for d in out if d is not None]
    out_known, out_unknown = _known_product(rest)
    # unknown input dims copied by 0 cancel with their copies in the output
    cancels = set(in_unknown) <= copied and len(out_unknown) == len(in_unknown)
    target = list(attrs.newshape)
    if not in_unknown or cancels:
        if None in out:
            if out_known == 0 or in_known % out_known:
                raise RelationError(f"cannot reshape {shape_str(t.shape)} to {target}: "
                                    f"{in_known} elements do not divide into {out_known}",
                                    arg=0, got=t)
            out = [in_known // out_known if d is None else d for d in out]
        elif in_known != out_known:
            raise RelationError(f"cannot reshape {shape_str(t.shape)} ({in_known} elements) "
                                f"to {target} ({out_known} elements)", arg=0, got=t)
        return TensorType(tuple(out), t.dtype)
    if None in out:
        return TensorType(tuple(ANY if d is None else d for d in out), t.dtype)
    ret = TensorType(tuple(rest), t.dtype)
    if len(in_unknown) == 1 and not out_unknown:
        # one `?` in the input and a fully known output: the `?` is determined
        if in_known == 0 or out_known % in_known:
            raise RelationError(f"cannot reshape {shape_str(t.shape)} to {target}: "
                                f"{out_known} elements are not a multiple of {in_known}",
                                arg=0, got=t)
        shape = list(t.shape)
        shape[in_unknown[0]] = out_known // in_known
        return Refined(ret, (TensorType(tuple(shape), t.dtype),))
    return ret


def _reshape_ref(x: np.ndarray, attrs: ReshapeAttrs) -> np.ndarray:
    shape = [x.shape[i] if v == 0 else v for i, v in enumerate(attrs.newshape)]
    return np.reshape(x, shape).copy()


reshape_op = register_op("reshape", ReshapeAttrs, 1, "reshape (0 copies, -1 infers)")
ARG_NAMES[reshape_op] = ("data",)
TYPE_RELATIONS[reshape_op] = _reshape_rel
REFERENCES[reshape_op] = _reshape_ref


# --- transpose, layout_transform -------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TransposeAttrs:
    """Attributes of transpose: the permutation (None reverses the dims)."""

    axes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        freeze_fields(self, "axes")


def _perm(attrs: TransposeAttrs, ndim: int, t: Type) -> list[int]:
    if attrs.axes is None:
        return list(range(ndim))[::-1]
    perm = [normalize_axis(a, ndim, 0, t) for a in attrs.axes]
    if sorted(perm) != list(range(ndim)):
        raise RelationError(f"axes {list(attrs.axes)} is not a permutation of the "
                            f"{ndim} dims", arg=0, got=t)
    return perm


def _transpose_rel(types: list[Type], attrs: TransposeAttrs) -> Type:
    t = tensor_arg(types, 0)
    return TensorType(tuple(t.shape[p] for p in _perm(attrs, t.ndim, t)), t.dtype)


transpose_op = register_op("transpose", TransposeAttrs, 1, "permute dims")
ARG_NAMES[transpose_op] = ("data",)
TYPE_RELATIONS[transpose_op] = _transpose_rel
REFERENCES[transpose_op] = lambda x, attrs: np.transpose(
    x, _perm(attrs, x.ndim, None)
).copy()


@dataclass(frozen=True, slots=True)
class LayoutTransformAttrs:
    """Attributes of layout_transform: two layouts that permute the same letters."""

    src_layout: str
    dst_layout: str


def _layout_perm(attrs: LayoutTransformAttrs) -> list[int]:
    src, dst = attrs.src_layout, attrs.dst_layout
    if sorted(src) != sorted(dst) or len(set(src)) != len(src) or not src.isalpha():
        raise RelationError(f"layout_transform {src} -> {dst}: layouts must permute the "
                            f"same letters (split layouts such as NCHW4c are not supported)")
    return [src.index(c) for c in dst]


def _layout_transform_rel(types: list[Type], attrs: LayoutTransformAttrs) -> Type:
    t = tensor_arg(types, 0)
    perm = _layout_perm(attrs)
    if len(perm) != t.ndim:
        raise RelationError(f"layout {attrs.src_layout} has {len(perm)} dims, the data has "
                            f"rank {t.ndim}", arg=0, got=t)
    return TensorType(tuple(t.shape[p] for p in perm), t.dtype)


layout_transform_op = register_op("layout_transform", LayoutTransformAttrs, 1,
                                  "change the dim order between named layouts")
ARG_NAMES[layout_transform_op] = ("data",)
TYPE_RELATIONS[layout_transform_op] = _layout_transform_rel
REFERENCES[layout_transform_op] = lambda x, attrs: np.transpose(x, _layout_perm(attrs)).copy()


# --- concatenate, split --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AxisAttrs:
    """Attributes of concatenate: the axis."""

    axis: int = 0


def _concatenate_rel(types: list[Type], attrs: AxisAttrs) -> Type:
    fields = tuple_of_tensors(types, 0)
    if not fields:
        raise RelationError("cannot concatenate an empty tuple", arg=0, got=types[0])
    ndim = fields[0].ndim
    for k, f in enumerate(fields):
        if f.ndim != ndim:
            raise RelationError(f"field {k} has rank {f.ndim}, field 0 has rank {ndim}",
                                arg=0, got=types[0])
    same_dtype(fields)
    axis = normalize_axis(attrs.axis, ndim, 0, fields[0])
    shape: list[Dim] = []
    for i in range(ndim):
        if i == axis:
            dims = [f.shape[i] for f in fields]
            shape.append(sum(dims) if all(isinstance(d, int) for d in dims) else ANY)
            continue
        d: Dim = ANY
        for k, f in enumerate(fields):
            merged = merge_dim(d, f.shape[i])
            if merged is None:
                raise RelationError(
                    f"field {k} has dim {i} = {dim_str(f.shape[i])}, an earlier field has "
                    f"{dim_str(d)} (only dim {axis}, the axis, may differ)",
                    arg=0, got=types[0],
                )
            d = merged
        shape.append(d)
    ret = TensorType(tuple(shape), fields[0].dtype)
    refined = [
        TensorType(tuple(f.shape[i] if i == axis else shape[i] for i in range(ndim)), f.dtype)
        for f in fields
    ]
    if any(r != f for r, f in zip(refined, fields)):
        return Refined(ret, (TupleType(tuple(refined)),))
    return ret


concatenate_op = register_op("concatenate", AxisAttrs, 1, "join a tuple of tensors")
ARG_NAMES[concatenate_op] = ("data",)
TYPE_RELATIONS[concatenate_op] = _concatenate_rel
REFERENCES[concatenate_op] = lambda xs, attrs: np.concatenate(list(xs), axis=attrs.axis)


@dataclass(frozen=True, slots=True)
class SplitAttrs:
    """Attributes of split: a number of equal sections, or split indices; the axis."""

    indices_or_sections: int | tuple[int, ...]
    axis: int = 0

    def __post_init__(self) -> None:
        freeze_fields(self, "indices_or_sections")


def _split_rel(types: list[Type], attrs: SplitAttrs) -> Type:
    t = tensor_arg(types, 0)
    axis = normalize_axis(attrs.axis, t.ndim, 0, t)
    d = t.shape[axis]
    ios = attrs.indices_or_sections
    if isinstance(ios, int):
        if ios < 1:
            raise RelationError(f"sections must be >= 1, got {ios}")
        if isinstance(d, int) and d % ios:
            raise RelationError(f"dim {axis} ({d}) does not split into {ios} equal sections",
                                arg=0, got=t)
        sizes: list[Dim] = [d // ios if isinstance(d, int) else ANY] * ios
    else:
        bounds = [0, *ios]
        if any(b > a for a, b in zip(ios[1:], ios)):
            raise RelationError(f"split indices {list(ios)} must be increasing")
        sizes = [b - a for a, b in zip(bounds, bounds[1:])]
        sizes.append(max(d - bounds[-1], 0) if isinstance(d, int) else ANY)
        if isinstance(d, int):
            sizes = [len(range(d)[a:b]) for a, b in zip(bounds, [*ios, d])]
    fields = []
    for s in sizes:
        shape = list(t.shape)
        shape[axis] = s
        fields.append(TensorType(tuple(shape), t.dtype))
    return TupleType(tuple(fields))


def _split_ref(x: np.ndarray, attrs: SplitAttrs) -> tuple:
    ios = attrs.indices_or_sections
    parts = np.split(x, ios if isinstance(ios, int) else list(ios), axis=attrs.axis)
    return tuple(p.copy() for p in parts)


split_op = register_op("split", SplitAttrs, 1, "split into a tuple of tensors")
ARG_NAMES[split_op] = ("data",)
TYPE_RELATIONS[split_op] = _split_rel
REFERENCES[split_op] = _split_ref


# --- squeeze, expand_dims ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SqueezeAttrs:
    """Attributes of squeeze: the size-1 axes to drop (None: every known 1)."""

    axis: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.axis, int):
            object.__setattr__(self, "axis", (self.axis,))
        freeze_fields(self, "axis")


def _squeeze_rel(types: list[Type], attrs: SqueezeAttrs) -> Type:
    t = tensor_arg(types, 0)
    if attrs.axis is None:
        # a `?` dim might be 1 at run time; it is kept (squeeze names axes to drop it)
        return TensorType(tuple(d for d in t.shape if d != 1), t.dtype)
    axes = {normalize_axis(a, t.ndim, 0, t) for a in attrs.axis}
    cur = list(types)
    for a in sorted(axes):
        _, refined = require_dim(cur, 0, a, 1, f"squeeze(axis={list(attrs.axis)})")
        if refined is not None:
            cur[0] = refined
    ret = TensorType(tuple(d for i, d in enumerate(t.shape) if i not in axes), t.dtype)
    return Refined(ret, (cur[0],)) if cur[0] is not types[0] else ret


def _squeeze_ref(x: np.ndarray, attrs: SqueezeAttrs) -> np.ndarray:
    if attrs.axis is None:
        return np.squeeze(x).copy()
    return np.squeeze(x, axis=tuple(a % x.ndim for a in attrs.axis)).copy()


squeeze_op = register_op("squeeze", SqueezeAttrs, 1, "drop size-1 dims")
ARG_NAMES[squeeze_op] = ("data",)
TYPE_RELATIONS[squeeze_op] = _squeeze_rel
REFERENCES[squeeze_op] = _squeeze_ref


@dataclass(frozen=True, slots=True)
class ExpandDimsAttrs:
    """Attributes of expand_dims: where to insert, and how many new size-1 dims."""

    axis: int
    num_newaxis: int = 1


def _expand_dims_rel(types: list[Type], attrs: ExpandDimsAttrs) -> Type:
    t = tensor_arg(types, 0)
    axis = normalize_axis(attrs.axis, t.ndim + 1, 0, t)
    if attrs.num_newaxis < 0:
        raise RelationError(f"num_newaxis must be >= 0, got {attrs.num_newaxis}")
    shape = t.shape[:axis] + (1,) * attrs.num_newaxis + t.shape[axis:]
    return TensorType(shape, t.dtype)


def _expand_dims_ref(x: np.ndarray, attrs: ExpandDimsAttrs) -> np.ndarray:
    axis = attrs.axis % (x.ndim + 1)
    return x.reshape(x.shape[:axis] + (1,) * attrs.num_newaxis + x.shape[axis:]).copy()


expand_dims_op = register_op("expand_dims", ExpandDimsAttrs, 1, "insert size-1 dims")
ARG_NAMES[expand_dims_op] = ("data",)
TYPE_RELATIONS[expand_dims_op] = _expand_dims_rel
REFERENCES[expand_dims_op] = _expand_dims_ref


# --- take, strided_slice -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TakeAttrs:
    """Attributes of take: the axis (None: of the flattened data) and the index mode."""

    axis: int | None = None
    mode: str = "clip"


def _take_rel(types: list[Type], attrs: TakeAttrs) -> Type:
    data, idx = tensor_arg(types, 0), tensor_arg(types, 1)
    if not idx.dtype.startswith(("int", "uint")):
        raise RelationError(f"indices must be integers, got dtype {idx.dtype}", arg=1,
                            expected=TensorType(idx.shape, "int32"), got=idx)
    if attrs.mode not in ("clip", "wrap", "fast"):
        raise RelationError(f"mode {attrs.mode!r} is not supported; legal: clip, wrap, fast")
    if attrs.axis is None:
        return TensorType(idx.shape, data.dtype)
    axis = normalize_axis(attrs.axis, data.ndim, 0, data)
    return TensorType(data.shape[:axis] + idx.shape + data.shape[axis + 1:], data.dtype)


def _take_ref(x: np.ndarray, idx: np.ndarray, attrs: TakeAttrs) -> np.ndarray:
    mode = "wrap" if attrs.mode == "wrap" else "clip"
    if attrs.axis is None:
        return np.take(x.reshape(-1), idx, mode=mode)
    return np.take(x, idx, axis=attrs.axis, mode=mode)


take_op = register_op("take", TakeAttrs, 2, "gather elements along an axis")
ARG_NAMES[take_op] = ("data", "indices")
TYPE_RELATIONS[take_op] = _take_rel
REFERENCES[take_op] = _take_ref


@dataclass(frozen=True, slots=True)
class StridedSliceAttrs:
    """Attributes of strided_slice: numpy slice bounds for `axes` (None: the first dims)."""

    begin: tuple[int, ...]
    end: tuple[int, ...]
    strides: tuple[int, ...] | None = None
    axes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        freeze_fields(self, "begin", "end", "strides", "axes")


def _slices(attrs: StridedSliceAttrs, ndim: int, t: Type | None) -> dict[int, slice]:
    axes = attrs.axes if attrs.axes is not None else tuple(range(len(attrs.begin)))
    strides = attrs.strides or (1,) * len(axes)
    if not len(attrs.begin) == len(attrs.end) == len(axes) or len(strides) not in (1, len(axes)):
        raise RelationError(f"strided_slice: begin {list(attrs.begin)}, end {list(attrs.end)}"
                            f" and strides must have one entry per sliced axis")
    if len(strides) == 1:
        strides = strides * len(axes)
    out = {}
    for a, b, e, s in zip(axes, attrs.begin, attrs.end, strides):
        if s == 0:
            raise RelationError("strided_slice: a stride of 0 is not allowed")
        out[normalize_axis(a, ndim, 0, t)] = slice(b, e, s)
    return out


def _strided_slice_rel(types: list[Type], attrs: StridedSliceAttrs) -> Type:
    t = tensor_arg(types, 0)
    slices = _slices(attrs, t.ndim, t)
    shape = list(t.shape)
    for a, sl in slices.items():
        shape[a] = len(range(shape[a])[sl]) if isinstance(shape[a], int) else ANY
    return TensorType(tuple(shape), t.dtype)


def _strided_slice_ref(x: np.ndarray, attrs: StridedSliceAttrs) -> np.ndarray:
    slices = _slices(attrs, x.ndim, None)
    return x[tuple(slices.get(i, slice(None)) for i in range(x.ndim))].copy()


strided_slice_op = register_op("strided_slice", StridedSliceAttrs, 1, "numpy-style slicing")
ARG_NAMES[strided_slice_op] = ("data",)
TYPE_RELATIONS[strided_slice_op] = _strided_slice_rel
REFERENCES[strided_slice_op] = _strided_slice_ref

for _op in (reshape_op, transpose_op, layout_transform_op, concatenate_op, split_op,
            squeeze_op, expand_dims_op, take_op, strided_slice_op):
    PATTERNS[_op] = OpPattern.INJECTIVE


# --- builders -------------------------------------------------------------------------------


def reshape(data: Expr, newshape: Sequence[int]) -> Call:
    """Reshape; 0 copies a dim, -1 infers one: reshape(x, (0, -1))."""
    return make_call(reshape_op, [data], newshape=tuple(newshape))


def transpose(data: Expr, axes: Sequence[int] | None = None) -> Call:
    """Permute dims (None reverses them): transpose(x, (0, 2, 1))."""
    return make_call(transpose_op, [data], axes=None if axes is None else tuple(axes))


def layout_transform(data: Expr, src_layout: str, dst_layout: str) -> Call:
    """Reorder dims between named layouts: layout_transform(x, "NCHW", "NHWC")."""
    return make_call(layout_transform_op, [data], src_layout=src_layout, dst_layout=dst_layout)


def concatenate(data: Expr | Sequence[Expr], axis: int = 0) -> Call:
    """Join tensors (a list or a tuple expression) along `axis`: concatenate([a, b], 1)."""
    if not isinstance(data, Expr):
        data = Tuple(tuple(data))
    return make_call(concatenate_op, [data], axis=axis)


def split(data: Expr, indices_or_sections: int | Sequence[int], axis: int = 0) -> Call:
    """Split into a tuple (sections, or indices as numpy): split(x, 2, axis=1)."""
    ios = indices_or_sections if isinstance(indices_or_sections, int) else tuple(
        indices_or_sections)
    return make_call(split_op, [data], indices_or_sections=ios, axis=axis)


def squeeze(data: Expr, axis: int | Sequence[int] | None = None) -> Call:
    """Drop size-1 dims: squeeze(x, axis=(0,))."""
    ax = None if axis is None else ((axis,) if isinstance(axis, int) else tuple(axis))
    return make_call(squeeze_op, [data], axis=ax)


def expand_dims(data: Expr, axis: int, num_newaxis: int = 1) -> Call:
    """Insert size-1 dims at `axis`: expand_dims(x, 0)."""
    return make_call(expand_dims_op, [data], axis=axis, num_newaxis=num_newaxis)


def take(data: Expr, indices: Expr, axis: int | None = None, mode: str = "clip") -> Call:
    """Gather along `axis` (None: flattened): take(table, ids, axis=0)."""
    return make_call(take_op, [data, indices], axis=axis, mode=mode)


def strided_slice(data: Expr, begin: Sequence[int], end: Sequence[int],
                  strides: Sequence[int] | None = None,
                  axes: Sequence[int] | None = None) -> Call:
    """numpy slicing x[b:e:s] per axis: strided_slice(x, (0, 1), (2, 3))."""
    return make_call(strided_slice_op, [data], begin=tuple(begin), end=tuple(end),
                     strides=None if strides is None else tuple(strides),
                     axes=None if axes is None else tuple(axes))
