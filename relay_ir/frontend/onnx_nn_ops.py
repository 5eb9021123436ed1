"""ONNX converters, part 2: convolution, dense/matmul, pooling, normalisation, activations.

1-D convolution and pooling run as their 2-D relay ops on an inserted unit height.
Opset-dependent semantics handled here: Clip's bounds (attributes before 11, inputs from
11), Softmax/LogSoftmax (the flattened "axis and after" before 13, one axis from 13).

    >>> from relay_ir.frontend.onnx_common import CONVERTERS
    >>> CONVERTERS["Conv"].__name__
    '_conv'
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

import relay_ir.op.nn as nn
import relay_ir.op.nn_norm as norm
import relay_ir.op.reduce as red
import relay_ir.op.tensor as T
import relay_ir.op.transform as tf
from relay_ir.expr import Expr, TupleGetItem
from relay_ir.frontend.onnx_common import OnnxNode, converter, normalize_axis
from relay_ir.frontend.onnx_tensor_ops import dtype_of, scalar

Ctx = Any  # relay_ir.frontend.onnx._GraphConverter


# --- windows: padding, auto_pad, 1-D as 2-D ---------------------------------------------------


def _window_pads(ctx: Ctx, node: OnnxNode, x: Expr, kernel: list[int], strides: list[int],
                 dilations: list[int]) -> list[int]:
    """ONNX pads [begin..., end...] with auto_pad resolved (SAME needs static sizes)."""
    nsp = len(kernel)
    auto = node.attr("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = node.ints("pads", [0] * (2 * nsp))
        if len(pads) != 2 * nsp or min(pads, default=0) < 0:
            raise node.error(f"pads {pads} must be {2 * nsp} integers >= 0 (the begin, then "
                             f"the end, of each spatial dim)")
        return pads
    if auto == "VALID":
        return [0] * (2 * nsp)
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise node.error(f"auto_pad {auto!r} is not supported (legal: NOTSET, VALID, "
                         f"SAME_UPPER, SAME_LOWER)")
    spatial = ctx.static_shape(x, node, f"auto_pad={auto}")[2:]
    begin, end = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begin.append(small if auto == "SAME_UPPER" else big)
        end.append(big if auto == "SAME_UPPER" else small)
    return begin + end


def _as_2d(ctx: Ctx, node: OnnxNode, x: Expr) -> tuple[Expr, int]:
    """(x with a unit height inserted if it is 1-D spatial, number of spatial dims)."""
    ndim = len(ctx.shape(x, node))
    if ndim == 3:
        return tf.expand_dims(x, 2), 1
    if ndim == 4:
        return x, 2
    raise node.error(f"only 1-D and 2-D {node.op_type} are supported, got a rank-{ndim} "
                     f"input")


def _pads4(pads: list[int], nsp: int) -> tuple[int, int, int, int]:
    """relay's (top, left, bottom, right) from ONNX [begin..., end...]."""
    if nsp == 1:
        return (0, pads[0], 0, pads[1])
    return (pads[0], pads[1], pads[2], pads[3])


def _window(node: OnnxNode, nsp: int, kernel: list[int]) -> tuple[list[int], list[int]]:
    """(strides, dilations), each checked like `kernel`: one positive entry per spatial dim."""
    strides = node.ints("strides", [1] * nsp)
    dilations = node.ints("dilations", [1] * nsp)
    for name, values in (("kernel_shape", kernel), ("strides", strides),
                         ("dilations", dilations)):
        if len(values) != nsp or not all(v >= 1 for v in values):
            raise node.error(f"{name} {values} must be {nsp} positive integer(s), one per "
                             f"spatial dim of the input")
    return strides, dilations


def _lift(values: list[int], nsp: int, fill: int) -> tuple[int, int]:
    return (fill, values[0]) if nsp == 1 else (values[0], values[1])


# --- conv, gemm, matmul -------------------------------------------------------------------


@converter("Conv")
def _conv(ctx: Ctx, node: OnnxNode) -> Expr:
    x, w = ctx.input(node, 0), ctx.input(node, 1)
    wshape = ctx.shape(w, node)
    x2, nsp = _as_2d(ctx, node, x)
    kernel = node.ints("kernel_shape") or [int(d) for d in wshape[2:]]
    if not all(isinstance(k, int) for k in kernel):
        raise node.error("the kernel shape must be known (a kernel_shape attribute or a "
                         "static weight shape)")
    strides, dilations = _window(node, nsp, kernel)
    pads = _window_pads(ctx, node, x, kernel, strides, dilations)
    w2 = tf.expand_dims(w, 2) if nsp == 1 else w
    out = nn.conv2d(x2, w2, strides=_lift(strides, nsp, 1), padding=_pads4(pads, nsp),
                    dilation=_lift(dilations, nsp, 1), groups=int(node.attr("group", 1)),
                    kernel_size=_lift(kernel, nsp, 1))
    if ctx.has(node, 2):
        out = norm.bias_add(out, ctx.input(node, 2), axis=1)
    return tf.squeeze(out, [2]) if nsp == 1 else out


@converter("Gemm")
def _gemm(ctx: Ctx, node: OnnxNode) -> Expr:
    a, b = ctx.input(node, 0), ctx.input(node, 1)
    if node.attr("transA", 0):
        a = tf.transpose(a, (1, 0))
    if not node.attr("transB", 0):
        b = tf.transpose(b, (1, 0))
    out = nn.dense(a, b)  # dense computes a @ b.T
    dt = dtype_of(ctx, out, node)
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if alpha != 1.0:
        out = T.multiply(out, scalar(alpha, dt))
    if ctx.has(node, 2) and beta != 0.0:
        c = ctx.input(node, 2)
        if beta != 1.0:
            c = T.multiply(c, scalar(beta, dt))
        out = T.add(out, c)
    return out


@converter("MatMul")
def _matmul(ctx: Ctx, node: OnnxNode) -> Expr:
    a, b = ctx.input(node, 0), ctx.input(node, 1)
    ra, rb = len(ctx.shape(a, node)), len(ctx.shape(b, node))
    # numpy's rule for 1-D operands: a unit dim is added, then removed from the result
    if ra == 1:
        a = tf.expand_dims(a, 0)
    if rb == 1:
        b = tf.expand_dims(b, 1)
    out = nn.matmul(a, b)
    if ra == 1 and rb == 1:
        return tf.reshape(out, ())
    if ra == 1:
        return tf.squeeze(out, [-2])
    if rb == 1:
        return tf.squeeze(out, [-1])
    return out


# --- pooling ------------------------------------------------------------------------------


@converter("MaxPool", "AveragePool")
def _pool(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    x2, nsp = _as_2d(ctx, node, x)
    kernel = node.ints("kernel_shape")
    if not kernel or len(kernel) != nsp:
        raise node.error(f"kernel_shape must have {nsp} entries, got {kernel}")
    if node.attr("storage_order", 0):
        raise node.error("storage_order=1 is not supported")
    strides, dilations = _window(node, nsp, kernel)
    pads = _window_pads(ctx, node, x, kernel, strides, dilations)
    common = dict(pool_size=_lift(kernel, nsp, 1), strides=_lift(strides, nsp, 1),
                  dilation=_lift(dilations, nsp, 1), padding=_pads4(pads, nsp),
                  ceil_mode=bool(node.attr("ceil_mode", 0)))
    if node.op_type == "MaxPool":
        out = nn.max_pool2d(x2, **common)
    else:
        out = nn.avg_pool2d(x2, count_include_pad=bool(node.attr("count_include_pad", 0)),
                            **common)
    return tf.squeeze(out, [2]) if nsp == 1 else out


@converter("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    ndim = len(ctx.shape(x, node))
    if ndim < 3:
        raise node.error(f"expected an (N, C, spatial...) input, got rank {ndim}")
    if node.op_type == "GlobalAveragePool":
        if ndim == 4:
            return nn.global_avg_pool2d(x)
        return red.mean(x, list(range(2, ndim)), True)
    return red.max(x, list(range(2, ndim)), True)


# --- normalisation ------------------------------------------------------------------------


@converter("BatchNormalization")
def _batch_norm(ctx: Ctx, node: OnnxNode) -> Expr:
    if node.attr("training_mode", 0):
        raise node.error("training_mode=1 is not supported (inference only)")
    args = [ctx.input(node, i) for i in range(5)]
    out = norm.batch_norm(*args, axis=1, epsilon=float(node.attr("epsilon", 1e-5)))
    return TupleGetItem(out, 0)


def normalize_over(ctx: Ctx, node: OnnxNode, x: Expr, axes: list[int],
               eps: float) -> tuple[Expr, Expr, Expr]:
    """((x - mean) * inv_std, mean, inv_std) over `axes`, kept as size-1 dims."""
    dt = dtype_of(ctx, x, node)
    mean = red.mean(x, axes, True)
    d = T.subtract(x, mean)
    inv = T.rsqrt(T.add(red.mean(T.multiply(d, d), axes, True), scalar(eps, dt)))
    return T.multiply(d, inv), mean, inv


@converter("InstanceNormalization")
def _instance_norm(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    ndim = len(ctx.shape(x, node))
    y, _, _ = normalize_over(ctx, node, x, list(range(2, ndim)), float(node.attr("epsilon", 1e-5)))
    scale = tf.expand_dims(ctx.input(node, 1), 1, ndim - 2)
    bias = tf.expand_dims(ctx.input(node, 2), 1, ndim - 2)
    return T.add(T.multiply(y, scale), bias)


@converter("LayerNormalization")
def _layer_norm(ctx: Ctx, node: OnnxNode) -> list[Expr]:
    x, scale = ctx.input(node, 0), ctx.input(node, 1)
    shape = ctx.shape(x, node)
    axis = normalize_axis(int(node.attr("axis", -1)), len(shape), node)
    eps = float(node.attr("epsilon", 1e-5))
    bias = ctx.input(node, 2) if ctx.has(node, 2) else None
    stats_used = any(o for o in node.outputs[1:])
    sshape = ctx.shape(scale, node)
    if axis == len(shape) - 1 and len(sshape) == 1 and sshape[0] == shape[-1] \
            and not stats_used:
        # relay's nn.layer_norm is exactly the last-axis case
        beta = bias if bias is not None else scale
        return [norm.layer_norm(x, scale, beta, axis=-1, epsilon=eps,
                                center=bias is not None)]
    y, mean, inv = normalize_over(ctx, node, x, list(range(axis, len(shape))), eps)
    y = T.multiply(y, scale)
    if bias is not None:
        y = T.add(y, bias)
    return [y, mean, inv]


@converter("LRN")
def _lrn(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = ctx.shape(x, node)
    size = node.attr("size")
    if size is None or int(size) < 1:
        raise node.error(f"size must be a positive int, got {size}")
    size = int(size)
    alpha, beta = float(node.attr("alpha", 1e-4)), float(node.attr("beta", 0.75))
    bias, dt = float(node.attr("bias", 1.0)), dtype_of(ctx, x, node)
    lo, hi = (size - 1) // 2, size // 2  # floor/ceil of (size-1)/2 channels each side
    sq = T.multiply(x, x)
    widths = [(0, 0)] * len(shape)
    widths[1] = (lo, hi)
    padded = norm.pad(sq, tuple(widths))
    # the channel window sum as `size` shifted slices of the padded squares
    total = None
    for i in range(size):
        end = i - (size - 1) if i < size - 1 else 2**62
        part = tf.strided_slice(padded, [i], [end], [1], [1])
        total = part if total is None else T.add(total, part)
    denom = T.power(T.add(scalar(bias, dt), T.multiply(total, scalar(alpha / size, dt))),
                    scalar(beta, dt))
    return T.divide(x, denom)


# --- softmax ------------------------------------------------------------------------------


@converter("Softmax", "LogSoftmax")
def _softmax(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    ndim = len(ctx.shape(x, node))
    log = node.op_type == "LogSoftmax"
    axis = normalize_axis(int(node.attr("axis", 1 if node.opset < 13 else -1)), ndim, node)
    if node.opset >= 13 or axis == ndim - 1:
        return (norm.log_softmax if log else norm.softmax)(x, axis=axis)
    # before opset 13: softmax over the input flattened to 2-D at `axis`
    axes = list(range(axis, ndim))
    shifted = T.subtract(x, red.max(x, axes, True))
    e = T.exp(shifted)
    s = red.sum(e, axes, True)
    return T.subtract(shifted, T.log(s)) if log else T.divide(e, s)


# --- activations ----------------------------------------------------------------------------


@converter("Relu")
def _relu(ctx: Ctx, node: OnnxNode) -> Expr:
    return norm.relu(ctx.input(node, 0))


@converter("LeakyRelu")
def _leaky_relu(ctx: Ctx, node: OnnxNode) -> Expr:
    return norm.leaky_relu(ctx.input(node, 0), float(node.attr("alpha", 0.01)))


def _bound(dt: str, low: bool) -> float:
    info = np.finfo(dt) if np.dtype(dt).kind == "f" else np.iinfo(dt)
    return float(info.min if low else info.max)


@converter("Clip")
def _clip(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    dt = dtype_of(ctx, x, node)
    if node.opset < 11:
        lo, hi = node.attr("min", _bound(dt, True)), node.attr("max", _bound(dt, False))
        return T.clip(x, float(lo), float(hi))
    lo_s, hi_s = ctx.maybe_static(node, 1), ctx.maybe_static(node, 2)
    if (lo_s is not None or not ctx.has(node, 1)) and (hi_s is not None or not ctx.has(node, 2)):
        lo = float(lo_s) if lo_s is not None else _bound(dt, True)
        hi = float(hi_s) if hi_s is not None else _bound(dt, False)
        if lo > hi:  # ONNX: every output is max when min > max
            return T.full_like(x, scalar(hi, dt))
        return T.clip(x, lo, hi)
    if ctx.has(node, 1):
        x = T.maximum(x, ctx.input(node, 1))
    if ctx.has(node, 2):
        x = T.minimum(x, ctx.input(node, 2))
    return x


@converter("Gelu")
def _gelu(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    dt = dtype_of(ctx, x, node)
    half = T.multiply(x, scalar(0.5, dt))
    if node.attr("approximate", "none") == "tanh":
        cube = T.multiply(T.multiply(x, x), x)
        inner = T.add(x, T.multiply(cube, scalar(0.044715, dt)))
        t = T.tanh(T.multiply(inner, scalar(math.sqrt(2.0 / math.pi), dt)))
    else:
        t = T.erf(T.multiply(x, scalar(1.0 / math.sqrt(2.0), dt)))
    return T.multiply(half, T.add(t, scalar(1.0, dt)))


def _elu_core(x: Expr, alpha: float, dt: str) -> Expr:
    neg = T.multiply(T.subtract(T.exp(x), scalar(1.0, dt)), scalar(alpha, dt))
    return T.where(T.greater(x, scalar(0.0, dt)), x, neg)


@converter("Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Softplus", "Softsign",
           "ThresholdedRelu", "Mish")
def _activation(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    dt = dtype_of(ctx, x, node)
    op = node.op_type
    if op == "Elu":
        return _elu_core(x, float(node.attr("alpha", 1.0)), dt)
    if op == "Selu":
        core = _elu_core(x, float(node.attr("alpha", 1.67326319217681884765625)), dt)
        return T.multiply(core, scalar(float(node.attr("gamma", 1.05070102214813232421875)),
                                       dt))
    if op == "Celu":
        alpha = float(node.attr("alpha", 1.0))
        neg = T.multiply(T.subtract(T.exp(T.divide(x, scalar(alpha, dt))), scalar(1.0, dt)),
                         scalar(alpha, dt))
        return T.where(T.greater(x, scalar(0.0, dt)), x, neg)
    if op in ("HardSigmoid", "HardSwish"):
        a = float(node.attr("alpha", 0.2 if op == "HardSigmoid" else 1.0 / 6.0))
        b = float(node.attr("beta", 0.5))
        hs = T.clip(T.add(T.multiply(x, scalar(a, dt)), scalar(b, dt)), 0.0, 1.0)
        return hs if op == "HardSigmoid" else T.multiply(x, hs)
    if op == "Softsign":
        return T.divide(x, T.add(T.abs(x), scalar(1.0, dt)))
    if op == "ThresholdedRelu":
        alpha = float(node.attr("alpha", 1.0))
        return T.where(T.greater(x, scalar(alpha, dt)), x, T.zeros_like(x))
    # log(1 + exp(x)) computed as max(x, 0) + log(1 + exp(-|x|)), which does not overflow
    softplus = T.add(norm.relu(x), T.log(T.add(T.exp(T.negative(T.abs(x))),
                                                scalar(1.0, dt))))
    return softplus if op == "Softplus" else T.multiply(x, T.tanh(softplus))


@converter("PRelu")
def _prelu(ctx: Ctx, node: OnnxNode) -> Expr:
    x, slope = ctx.input(node, 0), ctx.input(node, 1)
    dt = dtype_of(ctx, x, node)
    return T.where(T.less(x, scalar(0.0, dt)), T.multiply(x, slope), x)


@converter("Dropout")
def _dropout(ctx: Ctx, node: OnnxNode) -> list[Expr]:
    if node.opset >= 12 and ctx.has(node, 2):
        training = ctx.maybe_static(node, 2)
        if training is None or bool(np.asarray(training)):
            raise node.error("training_mode must be a constant false (inference only)")
    x = ctx.input(node, 0)
    # inference: the identity; the mask is all true (bool) from opset 10, and before that
    # x's dtype, which onnxruntime fills with zeros at inference
    return [x, T.ones_like(x, "bool") if node.opset >= 10 else T.zeros_like(x)]


@converter("Pad")
def _pad(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = ctx.shape(x, node)
    ndim = len(shape)
    mode = node.attr("mode", "constant")
    dynamic_value = None
    if node.opset < 11:
        pads, value = node.ints("pads") or node.ints("paddings"), float(node.attr("value", 0.0))
    else:
        pads = ctx.static_ints(node, 1, "pads")
        value = 0.0
        if ctx.has(node, 2) and ctx.maybe_static(node, 2) is None:
            dynamic_value = ctx.input(node, 2)
        elif ctx.has(node, 2):
            value = float(np.asarray(ctx.static(node, 2, "constant_value")).reshape(()))
    axes = list(range(ndim))
    if node.opset >= 18 and ctx.has(node, 3):
        axes = [normalize_axis(int(a), ndim, node, "axes entry")
                for a in ctx.static(node, 3, "axes")]
    if len(pads) != 2 * len(axes):
        raise node.error(f"pads {pads} must have {2 * len(axes)} entries")
    if mode not in ("constant", "edge", "reflect"):
        raise node.error(f"mode {mode!r} is not supported (legal: constant, edge, reflect)")
    widths = [[0, 0] for _ in range(ndim)]
    for k, a in enumerate(axes):
        widths[a] = [pads[k], pads[k + len(axes)]]
    crops = [(a, -w[0], -w[1]) for a, w in enumerate(widths) if min(w) < 0]
    if crops:  # negative pads remove elements
        x = tf.strided_slice(x, [max(b, 0) for _, b, _ in crops],
                             [-e if e > 0 else 2**62 for _, _, e in crops], None,
                             [a for a, _, _ in crops])
        widths = [[max(w[0], 0), max(w[1], 0)] for w in widths]
    if not any(w[0] or w[1] for w in widths):
        return x
    widths_t = tuple(tuple(w) for w in widths)
    if dynamic_value is not None and mode == "constant":
        # a value known only at run time: pad, then select the value where padding went
        inside = norm.pad(T.ones_like(x, "bool"), widths_t)
        return T.where(inside, norm.pad(x, widths_t), tf.reshape(dynamic_value, ()))
    return norm.pad(x, widths_t, value, mode)
