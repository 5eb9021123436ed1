"""Hand schedules of the library's matmul and conv2d, compiled for llvm, against numpy."""

from __future__ import annotations

import pytest

import tensor_expr as te
from schedule import create_schedule
from tensor_expr import ops
from tests.rng import seeded_rng
from tests.tensor_expr import nn_ref
from tests.tensor_expr.op_check import assert_close, rand, run_compiled


@pytest.fixture
def rng():
    return seeded_rng()


def _matmul(rng, m, n, k):
    a, b = rand(rng, (m, k)), rand(rng, (k, n))
    A, B = te.placeholder(a.shape, name="A"), te.placeholder(b.shape, name="B")
    return A, B, ops.matmul(A, B), {A: a, B: b}, a @ b


@pytest.mark.parametrize("m,n,k", [(64, 64, 32), (50, 70, 19)])
def test_matmul_tiled_vectorized_parallel(rng, m, n, k):
    A, B, C, inputs, want = _matmul(rng, m, n, k)
    s = create_schedule(C)
    i, j = s[C].op.axis
    (kk,) = s[C].op.reduce_axis
    io, ii = s[C].split(i, factor=8)
    jo, ji = s[C].split(j, factor=16)
    s[C].reorder(io, jo, kk, ii, ji)
    s[C].vectorize(ji)
    s[C].parallel(io)
    (got,) = run_compiled(C, inputs, s)
    assert_close(got, want, 1e-5, 1e-5, "tiled matmul")


@pytest.mark.parametrize("m,n,k", [(64, 64, 64), (36, 40, 21)])
def test_matmul_register_block_via_cache_write(rng, m, n, k):
    A, B, C, inputs, want = _matmul(rng, m, n, k)
    s = create_schedule(C)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*s[C].op.axis, 4, 16)
    s[CC].compute_at(s[C], jo)
    ci, cj = s[CC].op.axis
    (ck,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(ck, factor=4)
    s[CC].reorder(ko, ki, ci, cj)
    s[CC].unroll(ki)
    s[CC].vectorize(cj)
    s[C].vectorize(ji)
    s[C].parallel(io)
    (got,) = run_compiled(C, inputs, s)
    assert_close(got, want, 1e-5, 1e-5, "register-blocked matmul")


def test_matmul_fused_outer_loops(rng):
    A, B, C, inputs, want = _matmul(rng, 24, 40, 16)
    s = create_schedule(C)
    i, j = s[C].op.axis
    jo, ji = s[C].split(j, factor=8)
    f = s[C].fuse(i, jo)
    s[C].parallel(f)
    s[C].vectorize(ji)
    (got,) = run_compiled(C, inputs, s)
    assert_close(got, want, 1e-5, 1e-5, "fused matmul")


def _conv(rng, stride=1, padding=1):
    x, w = rand(rng, (1, 8, 14, 14)), rand(rng, (16, 8, 3, 3))
    X, W = te.placeholder(x.shape, name="x"), te.placeholder(w.shape, name="w")
    Y = ops.conv2d_nchw(X, W, stride, padding)
    want = nn_ref.conv2d_nchw(x, w, (stride, stride), (padding,) * 4, (1, 1), 1)
    return X, W, Y, {X: x, W: w}, want.astype("float32")


@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d_pad_at_row_tiled_vectorized(rng, stride):
    X, W, Y, inputs, want = _conv(rng, stride)
    s = create_schedule(Y)
    P = Y.op.input_tensors[0]
    n, f, y, x = s[Y].op.axis
    rc, ry, rx = s[Y].op.reduce_axis
    fo, fi = s[Y].split(f, factor=4)
    xo, xi = s[Y].split(x, factor=8)
    s[Y].reorder(n, fo, y, xo, rc, ry, rx, fi, xi)
    s[Y].vectorize(xi)
    s[P].compute_at(s[Y], y)
    s[Y].parallel(fo)
    (got,) = run_compiled(Y, inputs, s)
    assert_close(got, want, 1e-4, 1e-5, "conv2d with pad at row")


def test_conv2d_inline_pad_and_cache_write(rng):
    X, W, Y, inputs, want = _conv(rng)
    s = create_schedule(Y)
    P = Y.op.input_tensors[0]
    s[P].compute_inline()
    YL = s.cache_write(Y, "local")
    n, f, y, x = s[Y].op.axis
    fo, fi = s[Y].split(f, factor=8)
    xo, xi = s[Y].split(x, factor=7)
    s[Y].reorder(n, fo, y, xo, fi, xi)
    s[YL].compute_at(s[Y], xo)
    ln, lf, ly, lx = s[YL].op.axis
    lrc, lry, lrx = s[YL].op.reduce_axis
    s[YL].reorder(ln, lrc, lry, lrx, ly, lf, lx)
    s[YL].unroll(lrx)
    s[YL].vectorize(lx)
    s[Y].parallel(s[Y].fuse(n, fo))
    (got,) = run_compiled(Y, inputs, s)
    assert_close(got, want, 1e-4, 1e-5, "conv2d with inlined pad and write cache")


def test_conv2d_root_pad_parallel_over_channels(rng):
    X, W, Y, inputs, want = _conv(rng, padding=2)
    s = create_schedule(Y)
    P = Y.op.input_tensors[0]
    pn, pc, ph, pw = s[P].op.axis
    s[P].parallel(pc)
    s[P].vectorize(pw)
    n, f, y, x = s[Y].op.axis
    s[Y].parallel(f)
    (got,) = run_compiled(Y, inputs, s)
    assert_close(got, want, 1e-4, 1e-5, "conv2d with root pad")
