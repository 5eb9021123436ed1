"""ONNX converters, part 3: ops composed from several relay ops (Mod, Round, Sign, Swish,
Trilu, Hardmax, DepthToSpace/SpaceToDepth, Lp and mean-variance normalisation,
GroupNormalization).

    >>> from relay_ir.frontend.onnx_common import CONVERTERS
    >>> CONVERTERS["Mod"].__name__
    '_mod'
"""

from __future__ import annotations

from typing import Any

import numpy as np

import relay_ir.op.reduce as red
import relay_ir.op.tensor as T
import relay_ir.op.transform as tf
from relay_ir.builder import const
from relay_ir.expr import Expr
from relay_ir.frontend.onnx_common import OnnxNode, converter, normalize_axis
from relay_ir.frontend.onnx_nn_ops import normalize_over
from relay_ir.frontend.onnx_tensor_ops import dtype_of, scalar

Ctx = Any  # relay_ir.frontend.onnx._GraphConverter


def _trunc(q: Expr, dt: str) -> Expr:
    zero = scalar(0, dt)
    return T.where(T.less(q, zero), T.ceil(q), T.floor(q))


@converter("Mod")
def _mod(ctx: Ctx, node: OnnxNode) -> Expr:
    a, b = ctx.input(node, 0), ctx.input(node, 1)
    dt = dtype_of(ctx, a, node)
    if np.dtype(dt).kind == "f":
        r = T.subtract(a, T.multiply(_trunc(T.divide(a, b), dt), b))
    else:  # integer divide truncates toward zero, so this is C's remainder
        r = T.subtract(a, T.multiply(T.divide(a, b), b))
    if node.attr("fmod", 0):
        return r
    # Python's mod takes the divisor's sign: move a nonzero remainder of the other sign
    zero = scalar(0, dt)
    other_sign = T.not_equal(T.less(r, zero), T.less(b, zero))
    return T.where(T.logical_and(T.not_equal(r, zero), other_sign), T.add(r, b), r)


@converter("Round")
def _round(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    dt = dtype_of(ctx, x, node)
    fl = T.floor(x)
    diff = T.subtract(x, fl)
    up = T.add(fl, scalar(1, dt))
    half = scalar(0.5, dt)
    even = T.equal(T.subtract(fl, T.multiply(T.floor(T.multiply(fl, half)), scalar(2, dt))),
                   scalar(0, dt))
    tie = T.where(even, fl, up)  # halves go to the even neighbour
    return T.where(T.greater(diff, half), up, T.where(T.less(diff, half), fl, tie))


@converter("Sign")
def _sign(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    dt = dtype_of(ctx, x, node)
    zero = scalar(0, dt)
    neg = T.where(T.less(x, zero), T.full_like(x, scalar(-1, dt)) if np.dtype(dt).kind != "u"
                  else T.zeros_like(x), T.zeros_like(x))
    return T.where(T.greater(x, zero), T.ones_like(x), neg)


@converter("Swish")
def _swish(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    alpha = float(node.attr("alpha", 1.0))
    return T.multiply(x, T.sigmoid(T.multiply(x, scalar(alpha, dtype_of(ctx, x, node)))))


@converter("Trilu")
def _trilu(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = ctx.static_shape(x, node, "Trilu (a static mask)")
    if len(shape) < 2:
        raise node.error(f"needs rank >= 2, got {len(shape)}")
    k = int(np.asarray(ctx.static(node, 1, "k")).reshape(())) if ctx.has(node, 1) else 0
    ones = np.ones(shape[-2:], bool)
    mask = np.triu(ones, k) if node.attr("upper", 1) else np.tril(ones, k)
    return T.where(const(mask), x, T.zeros_like(x))


@converter("Hardmax")
def _hardmax(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = ctx.shape(x, node)
    axis = normalize_axis(int(node.attr("axis", 1 if node.opset < 13 else -1)), len(shape), node)
    if node.opset < 13 and axis != len(shape) - 1:
        raise node.error("before opset 13 only the last axis is supported (the flattened form)")
    d = shape[axis]
    if not isinstance(d, int):
        raise node.error(f"dim {axis} must be static")
    pos = np.arange(d, dtype="int32").reshape([d if i == axis else 1 for i in range(len(shape))])
    first = red.argmax(x, [axis], True)  # the first maximum, as ONNX asks
    return T.cast(T.equal(const(pos), first), dtype_of(ctx, x, node))


@converter("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = ctx.static_shape(x, node, node.op_type)
    if len(shape) != 4:
        raise node.error(f"{node.op_type} takes a rank-4 (N, C, H, W) input, got shape {shape}")
    n, c, h, w = shape
    b = int(node.attr("blocksize"))
    fits = b >= 1 and (
        (h % b == 0 and w % b == 0) if node.op_type == "SpaceToDepth" else c % (b * b) == 0)
    if not fits:
        what = "height and width" if node.op_type == "SpaceToDepth" else "channels"
        raise node.error(f"blocksize {b} must be >= 1 and divide the input's {what} "
                         f"(input shape {(n, c, h, w)})")
    if node.op_type == "SpaceToDepth":
        t = tf.reshape(x, (n, c, h // b, b, w // b, b))
        crd = node.attr("mode", "DCR") == "CRD"
        t = tf.transpose(t, (0, 1, 3, 5, 2, 4) if crd else (0, 3, 5, 1, 2, 4))
        return tf.reshape(t, (n, c * b * b, h // b, w // b))
    if node.attr("mode", "DCR") == "DCR":
        t = tf.transpose(tf.reshape(x, (n, b, b, c // (b * b), h, w)), (0, 3, 4, 1, 5, 2))
    else:
        t = tf.transpose(tf.reshape(x, (n, c // (b * b), b, b, h, w)), (0, 1, 4, 2, 5, 3))
    return tf.reshape(t, (n, c // (b * b), h * b, w * b))


@converter("LpNormalization")
def _lp_norm(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    axis = normalize_axis(int(node.attr("axis", -1)), len(ctx.shape(x, node)), node)
    p = int(node.attr("p", 2))
    if p == 1:
        n = red.sum(T.abs(x), [axis], True)
    elif p == 2:
        n = T.sqrt(red.sum(T.multiply(x, x), [axis], True))
    else:
        raise node.error(f"p must be 1 or 2, got {p}")
    zero = scalar(0, dtype_of(ctx, x, node))
    return T.divide(x, T.where(T.equal(n, zero), T.ones_like(n), n))  # a zero vector stays 0


@converter("MeanVarianceNormalization")
def _mvn(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    ndim = len(ctx.shape(x, node))
    axes = [normalize_axis(a, ndim, node, "axes entry") for a in node.ints("axes", [0, 2, 3])]
    return normalize_over(ctx, node, x, sorted(axes), 1e-9)[0]


@converter("GroupNormalization")
def _group_norm(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = ctx.static_shape(x, node, "GroupNormalization")
    n, c, g = shape[0], shape[1], int(node.attr("num_groups"))
    if c % g:
        raise node.error(f"{c} channels do not split into {g} groups")
    grouped = tf.reshape(x, (n, g, -1))
    y = normalize_over(ctx, node, grouped, [2], float(node.attr("epsilon", 1e-5)))[0]
    y = tf.reshape(y, shape)
    scale, bias = ctx.input(node, 1), ctx.input(node, 2)
    if ctx.shape(scale, node) == (g,) and g != c:  # opset 18: one scale per group
        scale = tf.reshape(tf.concatenate([tf.expand_dims(scale, 1)] * (c // g), 1), (c,))
        bias = tf.reshape(tf.concatenate([tf.expand_dims(bias, 1)] * (c // g), 1), (c,))
    extra = len(shape) - 2
    return T.add(T.multiply(y, tf.expand_dims(scale, 1, extra)), tf.expand_dims(bias, 1, extra))
