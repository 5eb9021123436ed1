"""Convolutions and pooling against numpy: te.evaluate and the compiled default schedule."""

from __future__ import annotations

import pytest

import tensor_expr as te
from tensor_expr import ops
from tessel_errors import TensorExprError
from tests.rng import seeded_rng
from tests.tensor_expr import nn_ref
from tests.tensor_expr.op_check import check, rand


@pytest.fixture
def rng():
    return seeded_rng()


# ---- convolutions ---------------------------------------------------------------------------

CONV_CASES = [
    # (N, C, H, W), (O, C/g, KH, KW), stride, padding, dilation, groups
    ((1, 3, 9, 9), (4, 3, 3, 3), 1, 0, 1, 1),
    ((2, 3, 8, 7), (5, 3, 3, 3), 1, 1, 1, 1),
    ((1, 4, 11, 10), (6, 4, 3, 2), (2, 1), (1, 2), 1, 1),
    ((1, 2, 10, 10), (3, 2, 3, 3), 2, (1, 0, 2, 1), 1, 1),
    ((1, 3, 12, 12), (2, 3, 3, 3), 1, 2, 2, 1),
    ((1, 4, 8, 8), (6, 2, 3, 3), 1, 1, 1, 2),
    ((1, 6, 7, 7), (6, 1, 3, 3), 2, 1, 1, 6),
]


def _pad4(p):
    if isinstance(p, int):
        return (p, p, p, p)
    return (p[0], p[1], p[0], p[1]) if len(p) == 2 else tuple(p)


def _pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


@pytest.mark.parametrize("dshape,kshape,stride,padding,dilation,groups", CONV_CASES)
def test_conv2d_nchw(rng, dshape, kshape, stride, padding, dilation, groups):
    x, w = rand(rng, dshape), rand(rng, kshape)
    X, W = te.placeholder(dshape, name="x"), te.placeholder(kshape, name="w")
    y = ops.conv2d_nchw(X, W, stride, padding, dilation, groups)
    want = nn_ref.conv2d_nchw(x, w, _pair(stride), _pad4(padding), _pair(dilation), groups)
    check(y, {X: x, W: w}, want.astype("float32"), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("dshape,kshape,stride,padding,dilation,groups", CONV_CASES[:6])
def test_conv2d_nhwc(rng, dshape, kshape, stride, padding, dilation, groups):
    x, w = rand(rng, dshape), rand(rng, kshape)
    xh, wh = x.transpose(0, 2, 3, 1).copy(), w.transpose(2, 3, 1, 0).copy()
    X, W = te.placeholder(xh.shape, name="x"), te.placeholder(wh.shape, name="w")
    y = ops.conv2d_nhwc(X, W, stride, padding, dilation, groups)
    want = nn_ref.conv2d_nchw(x, w, _pair(stride), _pad4(padding), _pair(dilation), groups)
    check(y, {X: xh, W: wh}, want.transpose(0, 2, 3, 1).astype("float32"), rtol=1e-4,
          atol=1e-5)


@pytest.mark.parametrize("mult,stride,padding", [(1, 1, 1), (2, 2, 0), (3, 1, (1, 2))])
def test_depthwise_conv2d_nchw(rng, mult, stride, padding):
    x, w = rand(rng, (2, 3, 9, 8)), rand(rng, (3, mult, 3, 3))
    X, W = te.placeholder(x.shape, name="x"), te.placeholder(w.shape, name="w")
    y = ops.depthwise_conv2d_nchw(X, W, stride, padding)
    # depthwise == grouped conv with groups=C and kernel (C*M, 1, KH, KW)
    want = nn_ref.conv2d_nchw(x, w.reshape(3 * mult, 1, 3, 3), _pair(stride), _pad4(padding),
                              (1, 1), 3)
    check(y, {X: x, W: w}, want.astype("float32"), rtol=1e-4, atol=1e-5)


def test_conv2d_channel_mismatch_is_an_error():
    X, W = te.placeholder((1, 4, 8, 8), name="x"), te.placeholder((2, 3, 3, 3), name="w")
    with pytest.raises(TensorExprError, match="'x' has 4 channels but 'w' expects 3 per group"):
        ops.conv2d_nchw(X, W)


def test_conv2d_bad_padding_is_an_error():
    X, W = te.placeholder((1, 3, 8, 8), name="x"), te.placeholder((2, 3, 3, 3), name="w")
    with pytest.raises(TensorExprError, match=r"padding must be an int, \(pad_h, pad_w\)"):
        ops.conv2d_nchw(X, W, padding=(1, 2, 3))


def test_conv2d_pads_in_its_own_stage():
    X, W = te.placeholder((1, 3, 8, 8), name="x"), te.placeholder((2, 3, 3, 3), name="w")
    y = ops.conv2d_nchw(X, W, padding=1)
    pad = y.op.input_tensors[0]
    assert pad.op.name == "pad_temp" and pad.op.tag == "injective,pad"
    assert ops.conv2d_nchw(X, W).op.input_tensors[0] is X


# ---- pooling --------------------------------------------------------------------------------

POOL_CASES = [
    # pool, stride, padding, ceil_mode
    (2, 2, 0, False), (3, 2, 1, False), (3, 2, 0, True), (3, 2, 1, True), ((2, 3), (1, 2),
                                                                             (1, 1), False),
    (3, 3, (1, 0, 1, 1), True),
]


@pytest.mark.parametrize("pool,stride,padding,ceil_mode", POOL_CASES)
def test_max_pool2d(rng, pool, stride, padding, ceil_mode):
    x = rand(rng, (2, 3, 9, 8))
    X = te.placeholder(x.shape, name="x")
    y = ops.max_pool2d(X, pool, stride, padding, ceil_mode)
    want = nn_ref.pool2d_nchw(x, _pair(pool), _pair(stride), _pad4(padding), ceil_mode, "max")
    check(y, {X: x}, want)


@pytest.mark.parametrize("include", [True, False])
@pytest.mark.parametrize("pool,stride,padding,ceil_mode", POOL_CASES)
def test_avg_pool2d(rng, pool, stride, padding, ceil_mode, include):
    x = rand(rng, (1, 2, 9, 8))
    X = te.placeholder(x.shape, name="x")
    y = ops.avg_pool2d(X, pool, stride, padding, ceil_mode, count_include_pad=include)
    want = nn_ref.pool2d_nchw(x, _pair(pool), _pair(stride), _pad4(padding), ceil_mode, "avg",
                              include)
    check(y, {X: x}, want.astype("float32"), rtol=1e-5, atol=1e-6)


def test_max_pool2d_nhwc(rng):
    x = rand(rng, (1, 3, 9, 8))
    X = te.placeholder((1, 9, 8, 3), name="x")
    y = ops.max_pool2d(X, 3, 2, 1, layout="NHWC")
    want = nn_ref.pool2d_nchw(x, (3, 3), (2, 2), (1, 1, 1, 1), False, "max")
    check(y, {X: x.transpose(0, 2, 3, 1).copy()}, want.transpose(0, 2, 3, 1))


def test_global_pools(rng):
    x = rand(rng, (2, 5, 6, 7))
    X = te.placeholder(x.shape, name="x")
    check(ops.global_avg_pool2d(X), {X: x}, x.mean(axis=(2, 3), keepdims=True), rtol=1e-5)
    check(ops.global_max_pool2d(X), {X: x}, x.max(axis=(2, 3), keepdims=True))


def test_pool_padding_larger_than_window_is_an_error():
    X = te.placeholder((1, 1, 8, 8), name="x")
    with pytest.raises(TensorExprError, match="must be smaller than the window"):
        ops.max_pool2d(X, 2, 2, 2)
