"""Neural-network operators: matmul, dense, batch_matmul, conv2d (NCHW, NHWC; stride,
padding, dilation, groups), depthwise conv2d, and the activations relu, leaky_relu,
bias_add. Convolutions pad in their own "pad_temp" stage (if_then_else reads), so a
schedule can compute_at or inline it.

    >>> import tensor_expr as te
    >>> from tensor_expr import ops
    >>> x = te.placeholder((1, 3, 8, 8), name="x"); w = te.placeholder((4, 3, 3, 3), name="w")
    >>> y = ops.conv2d_nchw(x, w, stride=1, padding=1)
    >>> [int(d.value) for d in y.shape], y.op.tag
    ([1, 4, 8, 8], 'conv2d_nchw')
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensor_expr.arith.structural import structural_equal
from tensor_expr.expr import IntImm, PrimExpr, as_expr, cast, const, select
from tensor_expr.expr import max as emax
from tensor_expr.ops.broadcast import broadcast_shape
from tensor_expr.ops.transform import pad_nd
from tensor_expr.tensor import Tensor, compute, reduce_axis
from tensor_expr.tensor import sum as te_sum
from tessel_errors import TensorExprError


def _pair(v: Any, what: str, op: str) -> tuple[int, int]:
    if isinstance(v, int):
        return v, v
    t = tuple(v)
    if len(t) != 2 or not all(isinstance(e, int) for e in t):
        raise TensorExprError(f"{op}: {what} must be an int or two ints, got {v!r}")
    return t  # type: ignore[return-value]


def pad4(padding: Any, op: str) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) from an int, (pad_h, pad_w) or four values."""
    if isinstance(padding, int):
        return padding, padding, padding, padding
    t = tuple(padding)
    if len(t) == 2:
        return t[0], t[1], t[0], t[1]
    if len(t) == 4:
        return t  # type: ignore[return-value]
    raise TensorExprError(
        f"{op}: padding must be an int, (pad_h, pad_w) or (top, left, bottom, right), "
        f"got {padding!r}")


def _same_dim(a: PrimExpr, b: PrimExpr, what: str, op: str) -> None:
    if isinstance(a, IntImm) and isinstance(b, IntImm) and a.value != b.value:
        raise TensorExprError(f"{op}: {what} do not match: {a.value} vs {b.value}")
    if not (isinstance(a, IntImm) or isinstance(b, IntImm)) and not structural_equal(a, b):
        raise TensorExprError(f"{op}: {what} do not match: {a} vs {b}")


def _acc(e: PrimExpr, dtype: str) -> PrimExpr:
    return cast(e, dtype)


# ---- matrix products ------------------------------------------------------------------------


def matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False,
           out_dtype: str | None = None) -> Tensor:
    """C = op(A) @ op(B) for 2-D tensors: `ops.matmul(A, B)`, tag "matmul"."""
    for t in (a, b):
        if t.ndim != 2:
            raise TensorExprError(f"matmul: '{t.name}' has {t.ndim} dims, expected 2")
    m, k = (a.shape[1], a.shape[0]) if transpose_a else (a.shape[0], a.shape[1])
    k2, n = (b.shape[1], b.shape[0]) if transpose_b else (b.shape[0], b.shape[1])
    _same_dim(k, k2, f"reduction lengths of '{a.name}' and '{b.name}'", "matmul")
    dt = out_dtype or a.dtype
    r = reduce_axis((0, k), name="k")

    def body(i: PrimExpr, j: PrimExpr) -> PrimExpr:
        x = a[r, i] if transpose_a else a[i, r]
        y = b[j, r] if transpose_b else b[r, j]
        return te_sum(_acc(x, dt) * _acc(y, dt), axis=r)

    return compute((m, n), body, name="matmul", tag="matmul")


def dense(x: Tensor, weight: Tensor, bias: Tensor | None = None, transpose_b: bool = True,
          out_dtype: str | None = None) -> Tensor:
    """y = x @ W.T (+ bias) with W of shape (units, in) (or (in, units) if not transpose_b).

    >>> import tensor_expr as te
    >>> from tensor_expr import ops
    >>> y = ops.dense(te.placeholder((2, 8), name="x"), te.placeholder((4, 8), name="w"))
    >>> y.op.tag
    'dense'
    """
    if x.ndim != 2 or weight.ndim != 2:
        raise TensorExprError(
            f"dense: expects 2-D data and weight, got {x.ndim}-D '{x.name}' and "
            f"{weight.ndim}-D '{weight.name}'")
    units = weight.shape[0] if transpose_b else weight.shape[1]
    kin = weight.shape[1] if transpose_b else weight.shape[0]
    _same_dim(x.shape[1], kin, f"input features of '{x.name}' and '{weight.name}'", "dense")
    dt = out_dtype or x.dtype
    r = reduce_axis((0, kin), name="k")

    def body(i: PrimExpr, j: PrimExpr) -> PrimExpr:
        w = weight[j, r] if transpose_b else weight[r, j]
        return te_sum(_acc(x[i, r], dt) * _acc(w, dt), axis=r)

    out = compute((x.shape[0], units), body, name="dense", tag="dense")
    if bias is None:
        return out
    if bias.ndim != 1:
        raise TensorExprError(f"dense: bias '{bias.name}' must be 1-D, got {bias.ndim} dims")
    _same_dim(bias.shape[0], units, "bias length and units", "dense")
    return compute(out.shape, lambda i, j: out[i, j] + _acc(bias[j], dt), name="dense_bias",
                   tag="broadcast")


def batch_matmul(a: Tensor, b: Tensor, transpose_a: bool = False, transpose_b: bool = False,
                 out_dtype: str | None = None) -> Tensor:
    """(batch, M, K) @ (batch, K, N); a batch of 1 broadcasts. Tag "batch_matmul"."""
    for t in (a, b):
        if t.ndim != 3:
            raise TensorExprError(f"batch_matmul: '{t.name}' has {t.ndim} dims, expected 3")
    batch = broadcast_shape(a.shape[:1], b.shape[:1], "batch_matmul")[0]
    m, k = (a.shape[2], a.shape[1]) if transpose_a else (a.shape[1], a.shape[2])
    k2, n = (b.shape[2], b.shape[1]) if transpose_b else (b.shape[1], b.shape[2])
    _same_dim(k, k2, f"reduction lengths of '{a.name}' and '{b.name}'", "batch_matmul")
    dt = out_dtype or a.dtype
    r = reduce_axis((0, k), name="k")

    def bidx(t: Tensor, q: PrimExpr) -> PrimExpr:
        d = t.shape[0]
        return IntImm(0, d.dtype) if isinstance(d, IntImm) and d.value == 1 else q

    def body(q: PrimExpr, i: PrimExpr, j: PrimExpr) -> PrimExpr:
        qa, qb = bidx(a, q), bidx(b, q)
        x = a[qa, r, i] if transpose_a else a[qa, i, r]
        y = b[qb, j, r] if transpose_b else b[qb, r, j]
        return te_sum(_acc(x, dt) * _acc(y, dt), axis=r)

    return compute((batch, m, n), body, name="batch_matmul", tag="batch_matmul")


# ---- convolutions ---------------------------------------------------------------------------


def conv_out_size(n: PrimExpr, k: PrimExpr, stride: int, dilation: int, before: int,
                  after: int) -> PrimExpr:
    """Output extent of a convolution window sliding over `n` padded by before/after."""
    return (n + before + after - ((k - 1) * dilation + 1)) // stride + 1


def conv2d_nchw(data: Tensor, kernel: Tensor, stride: Any = 1, padding: Any = 0,
                dilation: Any = 1, groups: int = 1, out_dtype: str | None = None) -> Tensor:
    """2-D convolution, data (N, C, H, W), kernel (O, C/groups, KH, KW); tag "conv2d_nchw".

    padding: an int, (pad_h, pad_w), or (top, left, bottom, right)."""
    op = "conv2d_nchw"
    _check_conv(data, kernel, op)
    n, c, h, w = data.shape
    o, cg, kh, kw = kernel.shape
    sh, sw = _pair(stride, "stride", op)
    dh, dw = _pair(dilation, "dilation", op)
    pt, pl, pb, pr = pad4(padding, op)
    _check_groups(c, cg, o, groups, data, kernel, op)
    oh = conv_out_size(h, kh, sh, dh, pt, pb)
    ow = conv_out_size(w, kw, sw, dw, pl, pr)
    padded = _pad_stage(data, [0, 0, pt, pl], [0, 0, pb, pr])
    dt = out_dtype or data.dtype
    rc = reduce_axis((0, cg), name="rc")
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    per_group = o // groups if groups > 1 else o

    def body(b: PrimExpr, f: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        ch = rc.var if groups == 1 else (f // per_group) * cg + rc.var
        v = padded[b, ch, y * sh + ry * dh, x * sw + rx * dw]
        return te_sum(_acc(v, dt) * _acc(kernel[f, rc, ry, rx], dt), axis=[rc, ry, rx])

    return compute((n, o, oh, ow), body, name=op, tag=op,
                   attrs={"stride": (sh, sw), "padding": (pt, pl, pb, pr),
                          "dilation": (dh, dw), "groups": groups})


def conv2d_nhwc(data: Tensor, kernel: Tensor, stride: Any = 1, padding: Any = 0,
                dilation: Any = 1, groups: int = 1, out_dtype: str | None = None) -> Tensor:
    """2-D convolution, data (N, H, W, C), kernel (KH, KW, C/groups, O); tag "conv2d_nhwc"."""
    op = "conv2d_nhwc"
    _check_conv(data, kernel, op)
    n, h, w, c = data.shape
    kh, kw, cg, o = kernel.shape
    sh, sw = _pair(stride, "stride", op)
    dh, dw = _pair(dilation, "dilation", op)
    pt, pl, pb, pr = pad4(padding, op)
    _check_groups(c, cg, o, groups, data, kernel, op)
    oh = conv_out_size(h, kh, sh, dh, pt, pb)
    ow = conv_out_size(w, kw, sw, dw, pl, pr)
    padded = _pad_stage(data, [0, pt, pl, 0], [0, pb, pr, 0])
    dt = out_dtype or data.dtype
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")
    rc = reduce_axis((0, cg), name="rc")
    per_group = o // groups if groups > 1 else o

    def body(b: PrimExpr, y: PrimExpr, x: PrimExpr, f: PrimExpr) -> PrimExpr:
        ch = rc.var if groups == 1 else (f // per_group) * cg + rc.var
        v = padded[b, y * sh + ry * dh, x * sw + rx * dw, ch]
        return te_sum(_acc(v, dt) * _acc(kernel[ry, rx, rc, f], dt), axis=[ry, rx, rc])

    return compute((n, oh, ow, o), body, name=op, tag=op,
                   attrs={"stride": (sh, sw), "padding": (pt, pl, pb, pr),
                          "dilation": (dh, dw), "groups": groups})


def depthwise_conv2d_nchw(data: Tensor, kernel: Tensor, stride: Any = 1, padding: Any = 0,
                          dilation: Any = 1, out_dtype: str | None = None) -> Tensor:
    """Depthwise convolution: data (N, C, H, W), kernel (C, M, KH, KW) -> (N, C*M, OH, OW)."""
    op = "depthwise_conv2d_nchw"
    _check_conv(data, kernel, op)
    n, c, h, w = data.shape
    kc, mult, kh, kw = kernel.shape
    _same_dim(c, kc, f"channels of '{data.name}' and '{kernel.name}'", op)
    sh, sw = _pair(stride, "stride", op)
    dh, dw = _pair(dilation, "dilation", op)
    pt, pl, pb, pr = pad4(padding, op)
    oh = conv_out_size(h, kh, sh, dh, pt, pb)
    ow = conv_out_size(w, kw, sw, dw, pl, pr)
    padded = _pad_stage(data, [0, 0, pt, pl], [0, 0, pb, pr])
    dt = out_dtype or data.dtype
    ry = reduce_axis((0, kh), name="ry")
    rx = reduce_axis((0, kw), name="rx")

    def body(b: PrimExpr, f: PrimExpr, y: PrimExpr, x: PrimExpr) -> PrimExpr:
        ic, m = f // mult, f % mult
        v = padded[b, ic, y * sh + ry * dh, x * sw + rx * dw]
        return te_sum(_acc(v, dt) * _acc(kernel[ic, m, ry, rx], dt), axis=[ry, rx])

    return compute((n, c * mult, oh, ow), body, name=op, tag=op,
                   attrs={"stride": (sh, sw), "padding": (pt, pl, pb, pr),
                          "dilation": (dh, dw)})


def _check_conv(data: Tensor, kernel: Tensor, op: str) -> None:
    if data.ndim != 4 or kernel.ndim != 4:
        raise TensorExprError(
            f"{op}: expects 4-D data and kernel, got '{data.name}' with {data.ndim} dims and "
            f"'{kernel.name}' with {kernel.ndim}")


def _check_groups(c: PrimExpr, cg: PrimExpr, o: PrimExpr, groups: int, data: Tensor,
                  kernel: Tensor, op: str) -> None:
    if not isinstance(groups, int) or groups < 1:
        raise TensorExprError(f"{op}: groups must be a positive int, got {groups!r}")
    if isinstance(c, IntImm) and isinstance(cg, IntImm) and c.value != cg.value * groups:
        raise TensorExprError(
            f"{op}: '{data.name}' has {c.value} channels but '{kernel.name}' expects "
            f"{cg.value} per group x {groups} groups = {cg.value * groups}")
    if isinstance(o, IntImm) and o.value % groups:
        raise TensorExprError(
            f"{op}: {o.value} output channels of '{kernel.name}' do not split into "
            f"{groups} groups")


def _pad_stage(data: Tensor, before: Sequence[int], after: Sequence[int]) -> Tensor:
    for p in list(before) + list(after):
        if not isinstance(p, int) or p < 0:
            raise TensorExprError(f"padding must be non-negative ints, got {p!r}")
    if not any(before) and not any(after):
        return data
    return pad_nd(data, before, after, 0.0 if data.dtype.startswith("float") else 0,
                  name="pad_temp")


# ---- activations ----------------------------------------------------------------------------


def relu(x: Tensor) -> Tensor:
    """max(x, 0): `ops.relu(x)`, tag "elemwise"."""
    zero = const(0, x.dtype)
    return compute(x.shape, lambda *i: emax(x[i], zero), name="relu", tag="elemwise")


def leaky_relu(x: Tensor, alpha: float = 0.01) -> Tensor:
    """x if x > 0 else alpha * x: `ops.leaky_relu(x, 0.1)`."""
    a = as_expr(alpha, x.dtype)
    zero = const(0, x.dtype)
    return compute(x.shape, lambda *i: select(x[i] > zero, x[i], x[i] * a),
                   name="leaky_relu", tag="elemwise")


def bias_add(x: Tensor, bias: Tensor, axis: int = 1) -> Tensor:
    """x + bias broadcast along `axis` (channels of NCHW by default): `ops.bias_add(x, b)`."""
    nd = x.ndim
    if not -nd <= axis < nd:
        raise TensorExprError(f"bias_add: axis {axis} is out of range for {nd} dims")
    ax = axis % nd
    if bias.ndim != 1:
        raise TensorExprError(f"bias_add: bias '{bias.name}' must be 1-D, got {bias.ndim}")
    _same_dim(bias.shape[0], x.shape[ax], f"bias length and axis {ax} of '{x.name}'",
              "bias_add")
    return compute(x.shape, lambda *i: x[i] + bias[i[ax]], name="bias_add", tag="broadcast")
