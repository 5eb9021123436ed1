"""Injective transforms against numpy: te.evaluate and the compiled default schedule."""

from __future__ import annotations

import numpy as np
import pytest

import tensor_expr as te
from tensor_expr import ops
from tessel_errors import TensorExprError
from tests.rng import seeded_rng
from tests.tensor_expr.op_check import check, rand, run_compiled


@pytest.fixture
def rng():
    return seeded_rng()


@pytest.mark.parametrize("axes", [None, (0, 2, 1), (2, 0, 1), (-1, 0, 1)])
def test_transpose(rng, axes):
    x = te.placeholder((2, 3, 4), name="x")
    a = rand(rng, (2, 3, 4))
    check(ops.transpose(x, axes), {x: a}, np.transpose(a, axes))


def test_transpose_bad_axes():
    x = te.placeholder((2, 3), name="x")
    with pytest.raises(TensorExprError, match="are not a permutation of 0..1"):
        ops.transpose(x, (0, 0))


@pytest.mark.parametrize("shape", [(6, 4), (24,), (2, -1, 3), (4, 3, 2, 1)])
def test_reshape(rng, shape):
    x = te.placeholder((2, 3, 4), name="x")
    a = rand(rng, (2, 3, 4))
    check(ops.reshape(x, shape), {x: a}, a.reshape(shape))


def test_reshape_wrong_size():
    x = te.placeholder((2, 3), name="x")
    with pytest.raises(TensorExprError, match="'x' has 6 elements, the shape"):
        ops.reshape(x, (4, 2))


def test_pad_constant(rng):
    x = te.placeholder((3, 4), name="x")
    a = rand(rng, (3, 4))
    check(ops.pad(x, ((1, 2), (0, 3)), value=-1.5), {x: a},
          np.pad(a, ((1, 2), (0, 3)), constant_values=-1.5))
    check(ops.pad(x, 2), {x: a}, np.pad(a, 2))


def test_pad_integers(rng):
    x = te.placeholder((5,), "int32", name="x")
    a = rand(rng, (5,), "int32", -9, 9)
    check(ops.pad(x, [(3, 1)], value=7), {x: a}, np.pad(a, (3, 1), constant_values=7))


def test_pad_negative_is_an_error():
    x = te.placeholder((5,), name="x")
    with pytest.raises(TensorExprError, match="padding must be non-negative, got -1"):
        ops.pad(x, [(-1, 0)])


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenate(rng, axis):
    shapes = [(2, 3), (2, 3), (2, 3)]
    shapes = [tuple(s[d] + (k if d == axis % 2 else 0) for d in range(2))
              for k, s in enumerate(shapes)]
    ts = [te.placeholder(s, name=f"x{k}") for k, s in enumerate(shapes)]
    arrays = [rand(rng, s) for s in shapes]
    check(ops.concatenate(ts, axis), dict(zip(ts, arrays)), np.concatenate(arrays, axis))


def test_concatenate_mismatch_is_an_error():
    a, b = te.placeholder((2, 3), name="a"), te.placeholder((3, 3), name="b")
    with pytest.raises(TensorExprError, match="dimension 0 of 'b' is 3, of 'a' 2"):
        ops.concatenate([a, b], axis=1)


@pytest.mark.parametrize("mode", ["clip", "wrap"])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_take(rng, mode, axis):
    x = te.placeholder((4, 5), name="x")
    ind = te.placeholder((2, 3), "int32", name="ind")
    a = rand(rng, (4, 5))
    idx = rand(rng, (2, 3), "int32", -8, 25)
    check(ops.take(x, ind, axis=axis, mode=mode), {x: a, ind: idx},
          np.take(a, idx, axis=axis, mode=mode))


def test_take_scalar_index(rng):
    x = te.placeholder((4, 5), name="x")
    a = rand(rng, (4, 5))
    check(ops.take(x, 2, axis=1), {x: a}, np.take(a, 2, axis=1))


def test_take_bad_mode():
    x = te.placeholder((4,), name="x")
    with pytest.raises(TensorExprError, match="take: mode must be 'clip', 'wrap' or 'fast'"):
        ops.take(x, 0, mode="raise")


@pytest.mark.parametrize("begin,end,strides", [
    ([1, 0], [3, 5], [1, 2]),
    ([-1, None], [None, None], [-1, -2]),
    ([0, 4], [4, -6], [2, -1]),
    ([-10, 1], [10, 2], [1, 1]),
    ([3, 0], [1, 5], [1, 1]),  # empty along axis 0, as numpy gives
])
def test_strided_slice_like_numpy(rng, begin, end, strides):
    x = te.placeholder((4, 6), name="x")
    a = rand(rng, (4, 6))
    want = a[slice(begin[0], end[0], strides[0]), slice(begin[1], end[1], strides[1])]
    if want.size == 0:
        assert te.evaluate(ops.strided_slice(x, begin, end, strides), {x: a}).shape == want.shape
        return
    check(ops.strided_slice(x, begin, end, strides), {x: a}, want)


def test_strided_slice_on_chosen_axes(rng):
    x = te.placeholder((3, 4, 5), name="x")
    a = rand(rng, (3, 4, 5))
    check(ops.strided_slice(x, [1], [None], [2], axes=[2]), {x: a}, a[:, :, 1::2])


def test_strided_slice_zero_stride_is_an_error():
    x = te.placeholder((4,), name="x")
    with pytest.raises(TensorExprError, match="a stride of 0 is not allowed"):
        ops.strided_slice(x, [0], [4], [0])


def test_expand_dims_squeeze_flatten(rng):
    x = te.placeholder((3, 1, 4), name="x")
    a = rand(rng, (3, 1, 4))
    check(ops.expand_dims(x, 1, 2), {x: a}, a[:, None, None])
    check(ops.expand_dims(x, -1), {x: a}, a[..., None])
    check(ops.squeeze(x), {x: a}, np.squeeze(a))
    check(ops.squeeze(x, axis=1), {x: a}, np.squeeze(a, axis=1))
    check(ops.flatten(x), {x: a}, a.reshape(3, -1))


def test_squeeze_non_unit_is_an_error():
    x = te.placeholder((3, 1), name="x")
    with pytest.raises(TensorExprError, match="squeeze: dimension 0 of 'x' is 3, not 1"):
        ops.squeeze(x, axis=0)


def test_transform_on_symbolic_batch(rng):
    n = te.var("n")
    x = te.placeholder((n, 2, 3), name="x")
    y = ops.transpose(ops.flatten(x))
    a = rand(rng, (5, 2, 3))
    np.testing.assert_allclose(te.evaluate(y, {x: a}), a.reshape(5, 6).T)
    (got,) = run_compiled(y, {x: a}, out_shapes=[(6, 5)])
    np.testing.assert_allclose(got, a.reshape(5, 6).T)


def test_injective_tag():
    x = te.placeholder((3, 4), name="x")
    assert ops.transpose(x).op.tag == "injective"
    assert ops.pad(x, 1).op.tag == "injective,pad"
