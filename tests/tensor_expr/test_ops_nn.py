"""nn ops against numpy references: te.evaluate and the compiled default schedule."""

from __future__ import annotations

import numpy as np
import pytest

import tensor_expr as te
from tensor_expr import ops
from tessel_errors import TensorExprError
from tests.rng import seeded_rng
from tests.tensor_expr import nn_ref
from tests.tensor_expr.op_check import check, rand, run_compiled


@pytest.fixture
def rng():
    return seeded_rng()


# ---- matrix products ------------------------------------------------------------------------


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul(rng, ta, tb):
    a = rand(rng, (13, 7) if not ta else (7, 13))
    b = rand(rng, (7, 9) if not tb else (9, 7))
    A, B = te.placeholder(a.shape, name="A"), te.placeholder(b.shape, name="B")
    C = ops.matmul(A, B, transpose_a=ta, transpose_b=tb)
    assert C.op.tag == "matmul"
    check(C, {A: a, B: b}, (a.T if ta else a) @ (b.T if tb else b), rtol=1e-5, atol=1e-5)


def test_matmul_mismatch_is_an_error():
    A, B = te.placeholder((4, 5), name="A"), te.placeholder((6, 3), name="B")
    with pytest.raises(TensorExprError, match="reduction lengths of 'A' and 'B' do not match"):
        ops.matmul(A, B)


def test_matmul_int8_accumulates_in_int32(rng):
    a, b = rand(rng, (6, 16), "int8", -100, 100), rand(rng, (16, 5), "int8", -100, 100)
    A, B = te.placeholder(a.shape, "int8", name="A"), te.placeholder(b.shape, "int8", name="B")
    C = ops.matmul(A, B, out_dtype="int32")
    check(C, {A: a, B: b}, a.astype("int32") @ b.astype("int32"))


def test_dense_with_bias(rng):
    x, w, b = rand(rng, (5, 12)), rand(rng, (7, 12)), rand(rng, (7,))
    X, W, B = (te.placeholder(v.shape, name=n) for v, n in ((x, "x"), (w, "w"), (b, "b")))
    y = ops.dense(X, W, B)
    assert y.op.input_tensors[0].op.tag == "dense"
    check(y, {X: x, W: w, B: b}, x @ w.T + b, rtol=1e-5, atol=1e-5)


def test_dense_without_transpose(rng):
    x, w = rand(rng, (5, 12)), rand(rng, (12, 3))
    X, W = te.placeholder(x.shape, name="x"), te.placeholder(w.shape, name="w")
    check(ops.dense(X, W, transpose_b=False), {X: x, W: w}, x @ w, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("sa,sb", [((3, 4, 5), (3, 5, 6)), ((1, 4, 5), (3, 5, 6)),
                                   ((3, 4, 5), (1, 5, 6))])
def test_batch_matmul(rng, sa, sb):
    a, b = rand(rng, sa), rand(rng, sb)
    A, B = te.placeholder(sa, name="A"), te.placeholder(sb, name="B")
    check(ops.batch_matmul(A, B), {A: a, B: b}, a @ b, rtol=1e-5, atol=1e-5)


def test_batch_matmul_transpose_b(rng):
    a, b = rand(rng, (2, 4, 5)), rand(rng, (2, 6, 5))
    A, B = te.placeholder(a.shape, name="A"), te.placeholder(b.shape, name="B")
    check(ops.batch_matmul(A, B, transpose_b=True), {A: a, B: b},
          a @ b.transpose(0, 2, 1), rtol=1e-5, atol=1e-5)


# ---- normalisation and activations ------------------------------------------------------------


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax(rng, axis):
    x = rand(rng, (4, 6, 5), "float32", -20, 20)  # large values: stability matters
    X = te.placeholder(x.shape, name="x")
    y = ops.softmax(X, axis)
    assert y.op.tag == "softmax_output"
    check(y, {X: x}, nn_ref.softmax(x.astype("float64"), axis), rtol=1e-5, atol=1e-6)


def test_softmax_of_huge_logits_stays_finite(rng):
    x = rand(rng, (3, 8), "float32", 500, 1000)
    X = te.placeholder(x.shape, name="x")
    check(ops.softmax(X), {X: x}, nn_ref.softmax(x.astype("float64"), -1), rtol=1e-5,
          atol=1e-6)


@pytest.mark.parametrize("axis", [-1, 1])
def test_log_softmax(rng, axis):
    x = rand(rng, (4, 7), "float32", -10, 10)
    X = te.placeholder(x.shape, name="x")
    check(ops.log_softmax(X, axis), {X: x}, nn_ref.log_softmax(x.astype("float64"), axis),
          rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("axis", [-1, (1, 2)])
def test_layer_norm(rng, axis):
    x = rand(rng, (3, 4, 8), "float32", -3, 3)
    axes = (2,) if axis == -1 else axis
    nshape = tuple(x.shape[d] for d in axes)
    g, b = rand(rng, nshape), rand(rng, nshape)
    X = te.placeholder(x.shape, name="x")
    G, B = te.placeholder(nshape, name="g"), te.placeholder(nshape, name="b")
    y = ops.layer_norm(X, G, B, axis=axis, epsilon=1e-5)
    check(y, {X: x, G: g, B: b}, nn_ref.layer_norm(x, g, b, axes, 1e-5), rtol=1e-4,
          atol=1e-5)


def test_layer_norm_without_affine(rng):
    x = rand(rng, (5, 16))
    X = te.placeholder(x.shape, name="x")
    check(ops.layer_norm(X), {X: x}, nn_ref.layer_norm(x, None, None, (1,), 1e-5),
          rtol=1e-4, atol=1e-5)


def test_layer_norm_gamma_shape_is_checked():
    X, G = te.placeholder((5, 16), name="x"), te.placeholder((5, 16), name="g")
    with pytest.raises(TensorExprError, match="gamma 'g' has 2 dims, the normalised axes"):
        ops.layer_norm(X, G)


def test_bias_add(rng):
    x, b = rand(rng, (2, 5, 3, 3)), rand(rng, (5,))
    X, B = te.placeholder(x.shape, name="x"), te.placeholder(b.shape, name="b")
    check(ops.bias_add(X, B), {X: x, B: b}, x + b[None, :, None, None])
    x2 = rand(rng, (4, 5))
    X2 = te.placeholder(x2.shape, name="x2")
    check(ops.bias_add(X2, B, axis=-1), {X2: x2, B: b}, x2 + b)


def test_symbolic_batch_through_matmul_and_softmax(rng):
    m = te.var("m")
    A, B = te.placeholder((m, 8), name="A"), te.placeholder((8, 5), name="B")
    y = ops.softmax(ops.relu(ops.matmul(A, B)))
    a, b = rand(rng, (6, 8)), rand(rng, (8, 5))
    want = nn_ref.softmax(np.maximum(a.astype("float64") @ b, 0), -1)
    np.testing.assert_allclose(te.evaluate(y, {A: a, B: b}), want, rtol=1e-5, atol=1e-6)
    (got,) = run_compiled(y, {A: a, B: b}, out_shapes=[(6, 5)])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
