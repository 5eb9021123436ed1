"""Reductions over any axes against numpy: te.evaluate and the compiled default schedule."""

from __future__ import annotations

import numpy as np
import pytest

import tensor_expr as te
from tensor_expr import ops
from tessel_errors import TensorExprError
from tests.rng import seeded_rng
from tests.tensor_expr.op_check import check, rand

AXES = [None, 0, 1, -1, (0, 2), (1, 2), (0, 1, 2)]


@pytest.fixture
def rng():
    return seeded_rng()


@pytest.mark.parametrize("axis", AXES)
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("name", ["sum", "max", "min", "mean"])
def test_float_reductions(rng, name, axis, keepdims):
    x = te.placeholder((3, 4, 5), name="x")
    a = rand(rng, (3, 4, 5))
    out = getattr(ops, name)(x, axis=axis, keepdims=keepdims)
    check(out, {x: a}, getattr(np, name)(a, axis=axis, keepdims=keepdims), rtol=1e-5,
          atol=1e-6)


@pytest.mark.parametrize("axis", [None, 1, (0, 1)])
def test_prod(rng, axis):
    x = te.placeholder((3, 4), name="x")
    a = rand(rng, (3, 4), "float32", 0.5, 1.5)
    check(ops.prod(x, axis=axis), {x: a}, np.prod(a, axis=axis), rtol=1e-5)


def test_integer_sum_keeps_dtype(rng):
    x = te.placeholder((6, 7), "int32", name="x")
    a = rand(rng, (6, 7), "int32", -1000, 1000)
    out = ops.sum(x, axis=1)
    assert out.dtype == "int32"
    check(out, {x: a}, a.sum(axis=1).astype("int32"))


def test_max_of_int8(rng):
    x = te.placeholder((5, 9), "int8", name="x")
    a = rand(rng, (5, 9), "int8", -128, 127)
    check(ops.max(x, axis=0), {x: a}, a.max(axis=0))


@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_reductions(rng, name, axis):
    x = te.placeholder((4, 6, 3), name="x")
    a = rng.integers(0, 3, (4, 6, 3)).astype("float32")  # ties: the first index wins
    out = getattr(ops, name)(x, axis=axis)
    assert out.dtype == "int32" and out.op.tag == "comm_reduce_idx"
    check(out, {x: a}, getattr(np, name)(a, axis=axis).astype("int32"))


def test_argmax_keepdims(rng):
    x = te.placeholder((4, 6), name="x")
    a = rand(rng, (4, 6))
    check(ops.argmax(x, axis=1, keepdims=True), {x: a},
          np.argmax(a, axis=1, keepdims=True).astype("int32"))


def test_empty_axis_tuple_is_a_copy(rng):
    x = te.placeholder((3, 2), name="x")
    a = rand(rng, (3, 2))
    check(ops.sum(x, axis=()), {x: a}, np.sum(a, axis=()))


def test_axis_out_of_range_is_an_error():
    x = te.placeholder((3, 2), name="x")
    with pytest.raises(TensorExprError, match="sum: axis 2 is out of range for 'x' with 2"):
        ops.sum(x, axis=2)


def test_repeated_axis_is_an_error():
    x = te.placeholder((3, 2), name="x")
    with pytest.raises(TensorExprError, match="axis 1 is repeated"):
        ops.max(x, axis=(1, -1))


def test_mean_of_integers_is_an_error():
    x = te.placeholder((3,), "int32", name="x")
    with pytest.raises(TensorExprError, match="mean: 'x' has dtype int32"):
        ops.mean(x)


def test_reduction_tags():
    x = te.placeholder((3, 2), name="x")
    assert ops.sum(x, axis=0).op.tag == "comm_reduce"
