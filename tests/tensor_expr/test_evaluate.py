"""te.evaluate: the numpy oracle computed straight from compute definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensor_expr as te
from tessel_errors import TensorExprError
from tests.rng import seeded_rng


@pytest.fixture
def rng():
    return seeded_rng()


def test_elementwise_chain(rng):
    A = te.placeholder((5, 7), "float32", name="A")
    B = te.compute((5, 7), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    C = te.compute((7, 5), lambda i, j: te.tanh(B[j, i]), name="C")
    a = rng.standard_normal((5, 7)).astype("float32")
    np.testing.assert_allclose(te.evaluate(C, {A: a}), np.tanh(a * 2 + 1).T, rtol=1e-6)


def test_matmul_reduction(rng):
    A = te.placeholder((6, 9), name="A")
    B = te.placeholder((9, 4), name="B")
    k = te.reduce_axis((0, 9), name="k")
    C = te.compute((6, 4), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    a, b = rng.random((6, 9), "float32"), rng.random((9, 4), "float32")
    out = te.evaluate(C, {A: a, B: b})
    assert out.dtype == np.float32 and out.shape == (6, 4)
    np.testing.assert_allclose(out, a @ b, rtol=1e-5)


def test_two_reduce_axes_with_offset_domain(rng):
    A = te.placeholder((4, 10, 10), name="A")
    r = te.reduce_axis((2, 7), name="r")
    s = te.reduce_axis((1, 4), name="s")
    C = te.compute((4,), lambda i: te.max(A[i, r, s], axis=[r, s]), name="C")
    a = rng.standard_normal((4, 10, 10)).astype("float32")
    np.testing.assert_array_equal(te.evaluate(C, {A: a}), a[:, 2:7, 1:4].max(axis=(1, 2)))


def test_reduction_with_where_condition(rng):
    A = te.placeholder((8, 8), "int32", name="A")
    k = te.reduce_axis((0, 8), name="k")
    C = te.compute((8,), lambda i: te.sum(A[i, k], axis=k, where=k <= i), name="C")
    a = rng.integers(-50, 50, (8, 8)).astype("int32")
    np.testing.assert_array_equal(te.evaluate(C, {A: a}), np.tril(a).sum(axis=1))


def test_argmax_tuple_reduction_breaks_ties_low(rng):
    A = te.placeholder((6, 12), "float32", name="A")
    k = te.reduce_axis((0, 12), name="k")
    idx, val = te.compute(
        (6,), lambda i: te.argmax((k, A[i, k]), axis=k), name="am")
    a = rng.integers(0, 4, (6, 12)).astype("float32")  # many ties
    got_i, got_v = te.evaluate([idx, val], {A: a})
    np.testing.assert_array_equal(got_i, a.argmax(axis=1))
    np.testing.assert_array_equal(got_v, a.max(axis=1))


def test_user_comm_reducer_with_init(rng):
    sumsq = te.comm_reducer(lambda x, y: x + y * 0 + y, lambda t: te.const(0, t), name="s2")
    A = te.placeholder((3, 5), "int32", name="A")
    k = te.reduce_axis((0, 5), name="k")
    C = te.compute((3,), lambda i: sumsq(A[i, k], axis=k, init=10), name="C")
    a = rng.integers(-9, 9, (3, 5)).astype("int32")
    np.testing.assert_array_equal(te.evaluate(C, {A: a}), a.sum(axis=1) + 10)


def test_padding_read_is_masked(rng):
    A = te.placeholder((6,), name="A")
    P = te.compute((8,), lambda i: te.if_then_else(te.all(i >= 1, i < 7), A[i - 1], -1.0),
                   name="P")
    a = rng.random(6, "float32")
    np.testing.assert_array_equal(te.evaluate(P, {A: a}), np.pad(a, 1, constant_values=-1))


def test_unguarded_out_of_bounds_read_raises():
    A = te.placeholder((6,), name="A")
    P = te.compute((8,), lambda i: A[i - 1], name="P")
    with pytest.raises(TensorExprError, match=r"read of 'A' out of bounds: index 0 .* is -1"):
        te.evaluate(P, {A: np.ones(6, "float32")})


def test_select_does_not_guard_reads():
    A = te.placeholder((6,), name="A")
    P = te.compute((7,), lambda i: te.select(i < 6, A[i], 0.0), name="P")
    with pytest.raises(TensorExprError, match="out of bounds"):
        te.evaluate(P, {A: np.ones(6, "float32")})


def test_symbolic_shape_from_input(rng):
    n = te.var("n")
    A = te.placeholder((n, 3), name="A")
    B = te.compute((n, 3), lambda i, j: A[i, j] + te.cast(n, "float32"), name="B")
    a = rng.random((5, 3), "float32")
    np.testing.assert_allclose(te.evaluate(B, {A: a}), a + 5)


def test_shape_vars_given_explicitly(rng):
    n = te.var("n")
    B = te.compute((n,), lambda i: i * 3, name="B")
    np.testing.assert_array_equal(te.evaluate(B, {}, shape_vars={n: 4}), [0, 3, 6, 9])


def test_integer_floor_semantics(rng):
    A = te.placeholder((50,), "int32", name="A")
    B = te.compute((50,), lambda i: A[i] // 7 + A[i] % 7 * 100, name="B")
    a = rng.integers(-100, 100, 50).astype("int32")
    np.testing.assert_array_equal(te.evaluate(B, {A: a}), a // 7 + (a % 7) * 100)


def test_integer_wraparound_matches_numpy():
    A = te.placeholder((4,), "int8", name="A")
    B = te.compute((4,), lambda i: A[i] * 3, name="B")
    a = np.array([50, -60, 100, 7], "int8")
    np.testing.assert_array_equal(te.evaluate(B, {A: a}), (a * np.int8(3)).astype("int8"))


def test_multi_output_compute(rng):
    A = te.placeholder((4,), name="A")
    X, Y = te.compute((4,), lambda i: (A[i] + 1.0, A[i] * 2.0), name="XY")
    a = rng.random(4, "float32")
    x, y = te.evaluate([X, Y], {A: a})
    np.testing.assert_allclose(x, a + 1)
    np.testing.assert_allclose(y, a * 2)


@pytest.mark.parametrize("name,ref", [
    ("exp", np.exp), ("log", np.log), ("sqrt", np.sqrt), ("rsqrt", lambda x: 1 / np.sqrt(x)),
    ("tanh", np.tanh), ("sigmoid", lambda x: 1 / (1 + np.exp(-x))),
    ("erf", np.vectorize(math.erf)), ("abs", np.abs), ("floor", np.floor), ("ceil", np.ceil),
    ("round", np.round), ("trunc", np.trunc), ("exp2", np.exp2), ("log2", np.log2),
    ("log10", np.log10), ("sin", np.sin), ("cos", np.cos),
])
def test_unary_intrinsics(rng, name, ref):
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: getattr(te, name)(A[i]), name="B")
    a = (rng.random(64) * 4 + 0.1).astype("float32")
    np.testing.assert_allclose(te.evaluate(B, {A: a}), ref(a.astype("float64")), rtol=2e-6,
                               atol=1e-6)


def test_pow_fma_isnan(rng):
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: te.pow(A[i], 1.5) + te.fma(A[i], A[i], 1.0), name="B")
    N = te.compute((16,), lambda i: te.isnan(te.log(A[i] - 0.5)), name="N")
    a = rng.random(16, "float32")
    b, nan = te.evaluate([B, N], {A: a})
    np.testing.assert_allclose(b, a ** 1.5 + a * a + 1, rtol=1e-5)
    np.testing.assert_array_equal(nan, a < 0.5)


def test_casts_between_dtypes(rng):
    A = te.placeholder((10,), "float32", name="A")
    B = te.compute((10,), lambda i: te.cast(A[i], "int8"), name="B")
    C = te.compute((10,), lambda i: te.cast(B[i], "float16") * te.const(0.5, "float16"),
                   name="C")
    a = (rng.random(10) * 200 - 100).astype("float32")
    b, c = te.evaluate([B, C], {A: a})
    assert b.dtype == np.int8 and c.dtype == np.float16
    np.testing.assert_array_equal(b, a.astype("int8"))
    np.testing.assert_array_equal(c, a.astype("int8").astype("float16") * np.float16(0.5))


def test_large_grid_is_evaluated_in_slabs(rng):
    A = te.placeholder((160, 128), name="A")
    B = te.placeholder((128, 256), name="B")
    k = te.reduce_axis((0, 128), name="k")
    C = te.compute((160, 256), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    a, b = rng.random((160, 128), "float32"), rng.random((128, 256), "float32")
    np.testing.assert_allclose(te.evaluate(C, {A: a, B: b}), a @ b, rtol=1e-4)


def test_missing_input_is_named():
    A = te.placeholder((3,), name="A")
    B = te.compute((3,), lambda i: A[i] + 1.0, name="B")
    with pytest.raises(TensorExprError, match="placeholder 'A' has no input array"):
        te.evaluate(B, {})


def test_wrong_input_dtype_is_named():
    A = te.placeholder((3,), name="A")
    with pytest.raises(TensorExprError, match=r"input 'A' has dtype float64, expected float32"):
        te.evaluate(te.compute((3,), lambda i: A[i], name="B"), {A: np.ones(3)})


def test_wrong_input_shape_is_named():
    A = te.placeholder((3, 4), name="A")
    with pytest.raises(TensorExprError, match=r"input 'A' has shape \(3, 5\), dimension 1"):
        te.evaluate(te.compute((3,), lambda i: A[i, 0], name="B"),
                    {A: np.ones((3, 5), "float32")})


def test_unbound_shape_var_is_named():
    n = te.var("n")
    B = te.compute((n,), lambda i: i, name="B")
    with pytest.raises(TensorExprError, match="variable 'n' has no value"):
        te.evaluate(B, {})


def test_shared_subexpressions_are_evaluated_once(rng):
    A = te.placeholder((8,), name="A")

    def body(i):
        e = A[i]
        for _ in range(40):  # a DAG of depth 40: 2**40 paths if walked as a tree
            e = (e + e) * 0.5
        return e

    B = te.compute((8,), body, name="B")
    a = rng.random(8, "float32")
    np.testing.assert_allclose(te.evaluate(B, {A: a}), a, rtol=1e-6)
