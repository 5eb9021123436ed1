"""Neural-network ops, part 1: convolution, dense, matmuls and pooling.

Relations check ranks, layouts and the dims that must agree; a `?` dim that the op forces
(the reduction dim of dense, the input channels of conv2d) is refined through `Refined`.
References are exact: float64 windows and einsum, then a cast to the output dtype.

    >>> from relay_ir.op.registry import TYPE_RELATIONS, get_op
    >>> from relay_ir.ty import TensorType
    >>> rel = TYPE_RELATIONS[get_op("nn.dense")]
    >>> print(rel([TensorType((None, 3)), TensorType((16, 3))], get_op("nn.dense").make_attrs()))
    Tensor[(?, 16), float32]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.expr import Call, Expr
from relay_ir.op._common import (
    ARG_NAMES,
    Refined,
    RelationError,
    as_tuple,
    broadcast_dim,
    dim_str,
    freeze_fields,
    make_call,
    merge_dim,
    pad4,
    require_dim,
    same_dtype,
    tensor_arg,
)
from relay_ir.op.registry import PATTERNS, REFERENCES, TYPE_RELATIONS, OpPattern, register_op
from relay_ir.ty import ANY, Dim, TensorType, Type

# --- conv2d -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Conv2DAttrs:
    """Attributes of nn.conv2d (Relay's names; padding has 1, 2 or 4 values)."""

    strides: tuple[int, ...] = (1, 1)
    padding: tuple[int, ...] = (0, 0)
    dilation: tuple[int, ...] = (1, 1)
    groups: int = 1
    channels: int | None = None
    kernel_size: tuple[int, ...] | None = None
    data_layout: str = "NCHW"
    kernel_layout: str = "OIHW"
    out_dtype: str = ""

    def __post_init__(self) -> None:
        for name in ("strides", "padding", "dilation"):
            v = getattr(self, name)
            object.__setattr__(self, name, (v, v) if isinstance(v, int) else tuple(v))
        freeze_fields(self, "kernel_size")


_DATA_LAYOUTS = {"NCHW": (1, 2, 3), "NHWC": (3, 1, 2)}  # positions of C, H, W
_KERNEL_LAYOUTS = {"OIHW": (0, 1, 2, 3), "HWIO": (3, 2, 0, 1)}  # positions of O, I, H, W


def _layout(attrs: Conv2DAttrs) -> tuple[tuple[int, ...], tuple[int, ...]]:
    if attrs.data_layout not in _DATA_LAYOUTS:
        raise RelationError(
            f"data_layout {attrs.data_layout!r} is not supported; legal: NCHW, NHWC"
        )
    if attrs.kernel_layout not in _KERNEL_LAYOUTS:
        raise RelationError(
            f"kernel_layout {attrs.kernel_layout!r} is not supported; legal: OIHW, HWIO"
        )
    return _DATA_LAYOUTS[attrs.data_layout], _KERNEL_LAYOUTS[attrs.kernel_layout]


def conv_out_dim(size: Dim, k: Dim, stride: int, pad: int, dil: int, ceil: bool = False) -> Dim:
    """Output extent of a sliding window; ? when the input or kernel extent is unknown.

    >>> conv_out_dim(32, 3, 1, 2, 1), conv_out_dim(7, 2, 2, 0, 1, ceil=True)
    (32, 4)
    """
    if not isinstance(size, int) or not isinstance(k, int):
        return ANY
    num = size + pad - dil * (k - 1) - 1
    if not ceil:
        out = num // stride + 1
    else:
        out = -(-num // stride) + 1
    return out


def _check_positive(out: Dim, what: str, arg: int, t: TensorType) -> None:
    if isinstance(out, int) and out < 1:
        raise RelationError(
            f"the output {what} would be {out}: the (padded) input is smaller than the window",
            arg=arg, got=t,
        )


def _conv2d_rel(types: list[Type], attrs: Conv2DAttrs) -> Type:
    data, weight = tensor_arg(types, 0), tensor_arg(types, 1)
    (ci, hi, wi), (ko, kin, kh, kw) = _layout(attrs)
    for i, t in ((0, data), (1, weight)):
        if t.ndim != 4:
            layout = attrs.data_layout if i == 0 else attrs.kernel_layout
            raise RelationError(
                f"expected a 4-d tensor in layout {layout}, got rank {t.ndim}", arg=i, got=t
            )
    same_dtype([data, weight])
    g = attrs.groups
    if g < 1:
        raise RelationError(f"groups must be >= 1, got {g}")
    new_args: list[Type | None] = [None, None]
    types = list(types)
    cin = weight.shape[kin]
    if isinstance(cin, int):
        _, new_args[0] = require_dim(types, 0, ci, cin * g, f"weight {weight} with groups={g}")
    elif isinstance(data.shape[ci], int):
        c = data.shape[ci]
        if c % g:
            raise RelationError(f"input channels {c} are not divisible by groups={g}", arg=0,
                                got=data)
        _, new_args[1] = require_dim(types, 1, kin, c // g, f"data {data} with groups={g}")
    out_c = weight.shape[ko]
    if attrs.channels is not None:
        out_c, refined = require_dim(types, 1, ko, attrs.channels, f"channels={attrs.channels}")
        new_args[1] = refined or new_args[1]
    if isinstance(out_c, int) and out_c % g:
        raise RelationError(f"output channels {out_c} are not divisible by groups={g}",
                            arg=1, got=weight)
    if attrs.kernel_size is not None:
        ks = as_tuple(attrs.kernel_size, 2, "kernel_size")
        for axis, want in ((kh, ks[0]), (kw, ks[1])):
            cur = new_args[1] if isinstance(new_args[1], TensorType) else weight
            _, refined = require_dim([data, cur], 1, axis, want, f"kernel_size={list(ks)}")
            new_args[1] = refined or new_args[1]
    sh, sw = as_tuple(attrs.strides, 2, "strides")
    dh, dw = as_tuple(attrs.dilation, 2, "dilation")
    pt, pl, pb, pr = pad4(attrs.padding)
    oh = conv_out_dim(data.shape[hi], weight.shape[kh], sh, pt + pb, dh)
    ow = conv_out_dim(data.shape[wi], weight.shape[kw], sw, pl + pr, dw)
    _check_positive(oh, "height", 0, data)
    _check_positive(ow, "width", 0, data)
    n = data.shape[0]
    shape = (n, out_c, oh, ow) if attrs.data_layout == "NCHW" else (n, oh, ow, out_c)
    ret = TensorType(shape, attrs.out_dtype or data.dtype)
    if new_args != [None, None]:
        return Refined(ret, tuple(new_args))
    return ret


def conv2d_nchw_ref(x: np.ndarray, w: np.ndarray, strides: tuple[int, int],
                    pad: tuple[int, int, int, int], dilation: tuple[int, int],
                    groups: int) -> np.ndarray:
    """Exact float64 NCHW/OIHW grouped convolution by strided windows and einsum."""
    pt, pl, pb, pr = pad
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    o, cg, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    win = np.lib.stride_tricks.sliding_window_view(
        xp, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(2, 3)
    )[:, :, ::sh, ::sw, ::dh, ::dw]  # (N, C, OH, OW, KH, KW)
    og = o // groups
    outs = [
        np.einsum("nchwij,ocij->nohw", win[:, k * cg:(k + 1) * cg],
                  w[k * og:(k + 1) * og].astype(np.float64))
        for k in range(groups)
    ]
    return np.concatenate(outs, axis=1)


def _conv2d_ref(x: np.ndarray, w: np.ndarray, attrs: Conv2DAttrs) -> np.ndarray:
    if attrs.data_layout == "NHWC":
        x = x.transpose(0, 3, 1, 2)
    if attrs.kernel_layout == "HWIO":
        w = w.transpose(3, 2, 0, 1)
    out = conv2d_nchw_ref(x, w, as_tuple(attrs.strides, 2, "strides"), pad4(attrs.padding),
                          as_tuple(attrs.dilation, 2, "dilation"), attrs.groups)
    if attrs.data_layout == "NHWC":
        out = out.transpose(0, 2, 3, 1)
    return np.ascontiguousarray(out).astype(attrs.out_dtype or x.dtype)


conv2d_op = register_op("nn.conv2d", Conv2DAttrs, 2, "2-D convolution")
ARG_NAMES[conv2d_op] = ("data", "weight")
TYPE_RELATIONS[conv2d_op] = _conv2d_rel
REFERENCES[conv2d_op] = _conv2d_ref
PATTERNS[conv2d_op] = OpPattern.OUT_ELEMWISE_FUSABLE


# --- dense, batch_matmul, matmul ------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DenseAttrs:
    """Attributes of nn.dense: optional units (= weight rows) and out_dtype."""

    units: int | None = None
    out_dtype: str = ""


def _dense_rel(types: list[Type], attrs: DenseAttrs) -> Type:
    data, weight = tensor_arg(types, 0), tensor_arg(types, 1)
    if data.ndim < 1:
        raise RelationError("data must have rank >= 1, got a scalar", arg=0, got=data)
    if weight.ndim != 2:
        raise RelationError(
            f"weight must be 2-d (units, in_features), got rank {weight.ndim}", arg=1,
            got=weight,
        )
    same_dtype([data, weight])
    k = merge_dim(data.shape[-1], weight.shape[1])
    if k is None:
        raise RelationError(
            f"the reduction dim does not match: data's last dim is "
            f"{dim_str(data.shape[-1])}, weight's dim 1 is {dim_str(weight.shape[1])}",
            arg=1, expected=TensorType((weight.shape[0], data.shape[-1]), weight.dtype),
            got=weight,
        )
    units = weight.shape[0]
    new_w: TensorType | None = None
    if attrs.units is not None:
        units, new_w = require_dim(types, 1, 0, attrs.units, f"units={attrs.units}")
    ret = TensorType(data.shape[:-1] + (units,), attrs.out_dtype or data.dtype)
    new_d = TensorType(data.shape[:-1] + (k,), data.dtype) if k != data.shape[-1] else None
    if k != weight.shape[1] or new_w is not None:
        new_w = TensorType(((new_w or weight).shape[0], k), weight.dtype)
    if new_d is not None or new_w is not None:
        return Refined(ret, (new_d, new_w))
    return ret


def _dense_ref(x: np.ndarray, w: np.ndarray, attrs: DenseAttrs) -> np.ndarray:
    out = np.einsum("...k,nk->...n", x.astype(np.float64), w.astype(np.float64))
    return out.astype(attrs.out_dtype or x.dtype)


dense_op = register_op("nn.dense", DenseAttrs, 2, "data @ weight.T")
ARG_NAMES[dense_op] = ("data", "weight")
TYPE_RELATIONS[dense_op] = _dense_rel
REFERENCES[dense_op] = _dense_ref
PATTERNS[dense_op] = OpPattern.OUT_ELEMWISE_FUSABLE


@dataclass(frozen=True, slots=True)
class MatmulAttrs:
    """Attributes of matmul / nn.batch_matmul: transposes and out_dtype."""

    transpose_a: bool = False
    transpose_b: bool = False
    out_dtype: str = ""


@dataclass(frozen=True, slots=True)
class BatchMatmulAttrs:
    """Attributes of nn.batch_matmul; Relay's default takes y as (B, N, K)."""

    transpose_a: bool = False
    transpose_b: bool = True
    out_dtype: str = ""


def _matmul_core(types: list[Type], attrs: Any, batch_rank: int | None) -> Type:
    a, b = tensor_arg(types, 0), tensor_arg(types, 1)
    for i, t in ((0, a), (1, b)):
        if t.ndim < 2 or (batch_rank is not None and t.ndim != batch_rank + 2):
            want = "3-d (batch, rows, cols)" if batch_rank else "at least 2-d"
            raise RelationError(f"expected a {want} tensor, got rank {t.ndim}", arg=i, got=t)
    same_dtype([a, b])
    m, ka = (a.shape[-1], a.shape[-2]) if attrs.transpose_a else (a.shape[-2], a.shape[-1])
    kb, n = (b.shape[-1], b.shape[-2]) if attrs.transpose_b else (b.shape[-2], b.shape[-1])
    if merge_dim(ka, kb) is None:
        raise RelationError(
            f"the reduction dims do not match: {dim_str(ka)} (lhs) vs {dim_str(kb)} (rhs), "
            f"with transpose_a={attrs.transpose_a}, transpose_b={attrs.transpose_b}",
            arg=1, got=b,
        )
    ba, bb = a.shape[:-2], b.shape[:-2]
    nb = max(len(ba), len(bb))
    ba, bb = (1,) * (nb - len(ba)) + ba, (1,) * (nb - len(bb)) + bb
    batch = []
    for x, y in zip(ba, bb):
        d = broadcast_dim(x, y)
        if d is None:
            raise RelationError(f"batch dims {dim_str(x)} and {dim_str(y)} do not broadcast",
                                arg=1, got=b)
        batch.append(d)
    return TensorType(tuple(batch) + (m, n), attrs.out_dtype or a.dtype)


def _matmul_ref(a: np.ndarray, b: np.ndarray, attrs: Any) -> np.ndarray:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if attrs.transpose_a:
        a64 = np.swapaxes(a64, -1, -2)
    if attrs.transpose_b:
        b64 = np.swapaxes(b64, -1, -2)
    return np.matmul(a64, b64).astype(attrs.out_dtype or a.dtype)


matmul_op = register_op("matmul", MatmulAttrs, 2, "numpy-style matmul of rank >= 2 tensors")
batch_matmul_op = register_op("nn.batch_matmul", BatchMatmulAttrs, 2, "batched x @ y.T")
ARG_NAMES[matmul_op] = ("a", "b")
ARG_NAMES[batch_matmul_op] = ("x", "y")
TYPE_RELATIONS[matmul_op] = lambda types, attrs: _matmul_core(types, attrs, None)
TYPE_RELATIONS[batch_matmul_op] = lambda types, attrs: _matmul_core(types, attrs, 1)
REFERENCES[matmul_op] = REFERENCES[batch_matmul_op] = _matmul_ref
PATTERNS[matmul_op] = PATTERNS[batch_matmul_op] = OpPattern.OUT_ELEMWISE_FUSABLE


# --- pooling --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Pool2DAttrs:
    """Attributes of nn.max_pool2d / nn.avg_pool2d (count_include_pad: avg only)."""

    pool_size: tuple[int, ...] = (1, 1)
    strides: tuple[int, ...] = (1, 1)
    dilation: tuple[int, ...] = (1, 1)
    padding: tuple[int, ...] = (0, 0)
    layout: str = "NCHW"
    ceil_mode: bool = False
    count_include_pad: bool = False

    def __post_init__(self) -> None:
        for name in ("pool_size", "strides", "dilation", "padding"):
            v = getattr(self, name)
            object.__setattr__(self, name, (v, v) if isinstance(v, int) else tuple(v))


@dataclass(frozen=True, slots=True)
class GlobalPool2DAttrs:
    """Attributes of nn.global_avg_pool2d: the layout."""

    layout: str = "NCHW"


def _hw_axes(layout: str) -> tuple[int, int]:
    if layout == "NCHW":
        return 2, 3
    if layout == "NHWC":
        return 1, 2
    raise RelationError(f"layout {layout!r} is not supported; legal: NCHW, NHWC")


def pool_out_dim(size: Dim, k: int, s: int, lo: int, hi: int, d: int, ceil: bool) -> Dim:
    """Pooled extent; with ceil_mode a last window must still start inside input + low pad."""
    out = conv_out_dim(size, k, s, lo + hi, d, ceil)
    if ceil and isinstance(out, int) and isinstance(size, int) and (out - 1) * s >= size + lo:
        out -= 1
    return out


def _pool_rel(types: list[Type], attrs: Pool2DAttrs) -> Type:
    data = tensor_arg(types, 0)
    if data.ndim != 4:
        raise RelationError(f"expected a 4-d tensor ({attrs.layout}), got rank {data.ndim}",
                            arg=0, got=data)
    hi, wi = _hw_axes(attrs.layout)
    kh, kw = as_tuple(attrs.pool_size, 2, "pool_size")
    sh, sw = as_tuple(attrs.strides, 2, "strides")
    dh, dw = as_tuple(attrs.dilation, 2, "dilation")
    pt, pl, pb, pr = pad4(attrs.padding)
    shape = list(data.shape)
    shape[hi] = pool_out_dim(data.shape[hi], kh, sh, pt, pb, dh, attrs.ceil_mode)
    shape[wi] = pool_out_dim(data.shape[wi], kw, sw, pl, pr, dw, attrs.ceil_mode)
    _check_positive(shape[hi], "height", 0, data)
    _check_positive(shape[wi], "width", 0, data)
    return TensorType(tuple(shape), data.dtype)


def _pool_ref(kind: str):
    def ref(x: np.ndarray, attrs: Pool2DAttrs) -> np.ndarray:
        nchw = x.transpose(0, 3, 1, 2) if attrs.layout == "NHWC" else x
        out = pool2d_nchw_ref(nchw.astype(np.float64), kind, attrs)
        if attrs.layout == "NHWC":
            out = out.transpose(0, 2, 3, 1)
        return np.ascontiguousarray(out).astype(x.dtype)

    return ref


def pool2d_nchw_ref(x: np.ndarray, kind: str, attrs: Pool2DAttrs) -> np.ndarray:
    """Exact pooling of a float64 NCHW array, window by window (readable, not fast)."""
    n, c, h, w = x.shape
    kh, kw = as_tuple(attrs.pool_size, 2, "pool_size")
    sh, sw = as_tuple(attrs.strides, 2, "strides")
    dh, dw = as_tuple(attrs.dilation, 2, "dilation")
    pt, pl, pb, pr = pad4(attrs.padding)
    oh = pool_out_dim(h, kh, sh, pt, pb, dh, attrs.ceil_mode)
    ow = pool_out_dim(w, kw, sw, pl, pr, dw, attrs.ceil_mode)
    out = np.empty((n, c, oh, ow))
    for i in range(oh):
        rows_all = [i * sh - pt + a * dh for a in range(kh)]
        rows = [r for r in rows_all if 0 <= r < h]
        for j in range(ow):
            cols_all = [j * sw - pl + b * dw for b in range(kw)]
            cols = [q for q in cols_all if 0 <= q < w]
            window = x[:, :, rows][:, :, :, cols]
            if kind == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
                continue
            if attrs.count_include_pad:
                # padding counts, the extra cells of ceil_mode beyond it do not
                nr = sum(1 for r in rows_all if -pt <= r < h + pb)
                nc = sum(1 for q in cols_all if -pl <= q < w + pr)
                count = nr * nc
            else:
                count = len(rows) * len(cols)
            out[:, :, i, j] = window.sum(axis=(2, 3)) / count
    return out


max_pool2d_op = register_op("nn.max_pool2d", Pool2DAttrs, 1, "2-D max pooling")
avg_pool2d_op = register_op("nn.avg_pool2d", Pool2DAttrs, 1, "2-D average pooling")
for _op, _kind in ((max_pool2d_op, "max"), (avg_pool2d_op, "avg")):
    ARG_NAMES[_op] = ("data",)
    TYPE_RELATIONS[_op] = _pool_rel
    REFERENCES[_op] = _pool_ref(_kind)
    PATTERNS[_op] = OpPattern.OUT_ELEMWISE_FUSABLE


def _global_pool_rel(types: list[Type], attrs: GlobalPool2DAttrs) -> Type:
    data = tensor_arg(types, 0)
    if data.ndim != 4:
        raise RelationError(f"expected a 4-d tensor ({attrs.layout}), got rank {data.ndim}",
                            arg=0, got=data)
    hi, wi = _hw_axes(attrs.layout)
    shape = list(data.shape)
    shape[hi] = shape[wi] = 1
    return TensorType(tuple(shape), data.dtype)


def _global_pool_ref(x: np.ndarray, attrs: GlobalPool2DAttrs) -> np.ndarray:
    axes = _hw_axes(attrs.layout)
    return x.astype(np.float64).mean(axis=axes, keepdims=True).astype(x.dtype)


global_avg_pool2d_op = register_op("nn.global_avg_pool2d", GlobalPool2DAttrs, 1,
                                   "mean over the spatial dims")
ARG_NAMES[global_avg_pool2d_op] = ("data",)
TYPE_RELATIONS[global_avg_pool2d_op] = _global_pool_rel
REFERENCES[global_avg_pool2d_op] = _global_pool_ref
PATTERNS[global_avg_pool2d_op] = OpPattern.OUT_ELEMWISE_FUSABLE


# --- builders -------------------------------------------------------------------------------


def conv2d(data: Expr, weight: Expr, strides: Any = (1, 1), padding: Any = (0, 0),
           dilation: Any = (1, 1), groups: int = 1, channels: int | None = None,
           kernel_size: Any = None, data_layout: str = "NCHW", kernel_layout: str = "OIHW",
           out_dtype: str = "") -> Call:
    """2-D convolution: nn.conv2d(x, w, strides=(1, 1), padding=(1, 1))."""
    return make_call(conv2d_op, [data, weight], strides=strides, padding=padding,
                     dilation=dilation, groups=groups, channels=channels,
                     kernel_size=kernel_size, data_layout=data_layout,
                     kernel_layout=kernel_layout, out_dtype=out_dtype)


def dense(data: Expr, weight: Expr, units: int | None = None, out_dtype: str = "") -> Call:
    """data @ weight.T with weight (units, in_features): nn.dense(x, w)."""
    return make_call(dense_op, [data, weight], units=units, out_dtype=out_dtype)


def batch_matmul(x: Expr, y: Expr, transpose_a: bool = False, transpose_b: bool = True,
                 out_dtype: str = "") -> Call:
    """Batched x @ y.T for x (B, M, K), y (B, N, K): nn.batch_matmul(x, y)."""
    return make_call(batch_matmul_op, [x, y], transpose_a=transpose_a,
                     transpose_b=transpose_b, out_dtype=out_dtype)


def matmul(a: Expr, b: Expr, transpose_a: bool = False, transpose_b: bool = False,
           out_dtype: str = "") -> Call:
    """numpy-style a @ b for rank >= 2 (batch dims broadcast): matmul(a, b)."""
    return make_call(matmul_op, [a, b], transpose_a=transpose_a, transpose_b=transpose_b,
                     out_dtype=out_dtype)


def max_pool2d(data: Expr, pool_size: Any = (1, 1), strides: Any = (1, 1),
               dilation: Any = (1, 1), padding: Any = (0, 0), layout: str = "NCHW",
               ceil_mode: bool = False) -> Call:
    """2-D max pooling: nn.max_pool2d(x, pool_size=(2, 2), strides=(2, 2))."""
    return make_call(max_pool2d_op, [data], pool_size=pool_size, strides=strides,
                     dilation=dilation, padding=padding, layout=layout, ceil_mode=ceil_mode)


def avg_pool2d(data: Expr, pool_size: Any = (1, 1), strides: Any = (1, 1),
               dilation: Any = (1, 1), padding: Any = (0, 0), layout: str = "NCHW",
               ceil_mode: bool = False, count_include_pad: bool = False) -> Call:
    """2-D average pooling: nn.avg_pool2d(x, pool_size=(3, 3), padding=(1, 1))."""
    return make_call(avg_pool2d_op, [data], pool_size=pool_size, strides=strides,
                     dilation=dilation, padding=padding, layout=layout, ceil_mode=ceil_mode,
                     count_include_pad=count_include_pad)


def global_avg_pool2d(data: Expr, layout: str = "NCHW") -> Call:
    """Mean over the spatial dims, kept as size 1: nn.global_avg_pool2d(x)."""
    return make_call(global_avg_pool2d_op, [data], layout=layout)
