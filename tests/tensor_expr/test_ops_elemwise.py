"""Elementwise ops against numpy: te.evaluate and the compiled default schedule."""

from __future__ import annotations

import math

import numpy as np
import pytest

import tensor_expr as te
from tensor_expr import ops
from tessel_errors import TensorExprError
from tests.rng import seeded_rng
from tests.tensor_expr.op_check import check, rand, run_compiled

_erf = np.vectorize(math.erf)

UNARY = [
    ("exp", np.exp, (-3, 3)), ("exp2", np.exp2, (-3, 3)), ("log", np.log, (0.1, 5)),
    ("log2", np.log2, (0.1, 5)), ("log10", np.log10, (0.1, 5)), ("sqrt", np.sqrt, (0, 5)),
    ("rsqrt", lambda x: 1 / np.sqrt(x), (0.1, 5)), ("tanh", np.tanh, (-4, 4)),
    ("sigmoid", lambda x: 1 / (1 + np.exp(-x)), (-6, 6)), ("erf", _erf, (-3, 3)),
    ("sin", np.sin, (-4, 4)), ("cos", np.cos, (-4, 4)), ("abs", np.abs, (-3, 3)),
    ("floor", np.floor, (-5, 5)), ("ceil", np.ceil, (-5, 5)), ("round", np.round, (-5, 5)),
    ("trunc", np.trunc, (-5, 5)), ("negative", np.negative, (-3, 3)),
    ("square", np.square, (-3, 3)), ("reciprocal", np.reciprocal, (0.5, 3)),
    ("sign", np.sign, (-2, 2)),
]


@pytest.fixture
def rng():
    return seeded_rng()


@pytest.mark.parametrize("name,ref,dom", UNARY, ids=[u[0] for u in UNARY])
def test_unary_float32(rng, name, ref, dom):
    x = te.placeholder((5, 33), "float32", name="x")
    a = rand(rng, (5, 33), "float32", *dom)
    check(getattr(ops, name)(x), {x: a}, ref(a.astype("float64")).astype("float32"),
          rtol=2e-5, atol=2e-6)


@pytest.mark.parametrize("name,ref", [("exp", np.exp), ("tanh", np.tanh), ("sqrt", np.sqrt)])
def test_unary_float64(rng, name, ref):
    x = te.placeholder((40,), "float64", name="x")
    a = rand(rng, (40,), "float64", 0.1, 3)
    check(getattr(ops, name)(x), {x: a}, ref(a), rtol=1e-12, atol=0)


def test_abs_of_signed_integers(rng):
    x = te.placeholder((50,), "int32", name="x")
    a = rand(rng, (50,), "int32", -100, 100)
    check(ops.abs(x), {x: a}, np.abs(a))


def test_gelu(rng):
    x = te.placeholder((64,), name="x")
    a = rand(rng, (64,), "float32", -3, 3)
    want = a * 0.5 * (1 + _erf(a / np.sqrt(2.0)))
    check(ops.gelu(x), {x: a}, want.astype("float32"), rtol=1e-5, atol=1e-6)


def test_relu_and_leaky_relu(rng):
    x = te.placeholder((4, 17), name="x")
    a = rand(rng, (4, 17))
    check(ops.relu(x), {x: a}, np.maximum(a, 0))
    check(ops.leaky_relu(x, 0.2), {x: a}, np.where(a > 0, a, a * np.float32(0.2)))


def test_clip(rng):
    x = te.placeholder((3, 20), name="x")
    a = rand(rng, (3, 20), "float32", -10, 10)
    check(ops.clip(x, -2.5, 6.0), {x: a}, np.clip(a, -2.5, 6.0))


def test_clip_integers(rng):
    x = te.placeholder((30,), "int16", name="x")
    a = rand(rng, (30,), "int16", -300, 300)
    check(ops.clip(x, -100, 100), {x: a}, np.clip(a, -100, 100))


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float32", "float16"),
                                     ("int32", "float64"), ("int64", "int8"),
                                     ("float64", "float32"), ("uint8", "int32")])
def test_cast(rng, src, dst):
    x = te.placeholder((6, 7), src, name="x")
    a = rand(rng, (6, 7), src, 0 if src.startswith("u") else -100, 100)
    out = ops.cast(x, dst)
    assert out.dtype == dst
    check(out, {x: a}, a.astype(dst), rtol=1e-3)


def test_isnan_and_nan_to_num(rng):
    x = te.placeholder((16,), name="x")
    a = rand(rng, (16,))
    a[::3] = np.nan
    check(ops.isnan(x), {x: a}, np.isnan(a))
    check(ops.nan_to_num(x, 5.0), {x: a}, np.where(np.isnan(a), 5.0, a).astype("float32"))


def test_pow_scalar(rng):
    x = te.placeholder((20,), name="x")
    a = rand(rng, (20,), "float32", 0.1, 4)
    check(ops.pow_scalar(x, 1.5), {x: a}, a ** np.float32(1.5), rtol=1e-5)


def test_float16_elementwise(rng):
    x = te.placeholder((32,), "float16", name="x")
    a = rand(rng, (32,), "float16", -2, 2)
    check(ops.relu(x), {x: a}, np.maximum(a, np.float16(0)))


def test_symbolic_shape_elementwise(rng):
    n = te.var("n")
    x = te.placeholder((n, 3), name="x")
    y = ops.sigmoid(x)
    a = rand(rng, (9, 3))
    want = 1 / (1 + np.exp(-a.astype("float64")))
    np.testing.assert_allclose(te.evaluate(y, {x: a}), want, rtol=1e-5)
    (got,) = run_compiled(y, {x: a}, out_shapes=[(9, 3)])
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_tags_and_names():
    x = te.placeholder((4,), name="x")
    y = ops.exp(x)
    assert (y.op.name, y.op.tag) == ("exp", "elemwise")


def test_float_op_rejects_integers():
    x = te.placeholder((4,), "int32", name="x")
    with pytest.raises(TensorExprError, match="exp: needs a float tensor, got 'x' of dtype"):
        ops.exp(x)
