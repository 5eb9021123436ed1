"""Broadcasting binary ops against numpy: te.evaluate and the compiled default schedule."""

from __future__ import annotations

import numpy as np
import pytest

import tensor_expr as te
from tensor_expr import ops
from tessel_errors import TensorExprError
from tests.rng import seeded_rng
from tests.tensor_expr.op_check import check, rand, run_compiled

SHAPES = [((4, 5), (4, 5)), ((4, 1, 3), (5, 1)), ((3,), (2, 3)), ((1,), (6, 2)),
          ((2, 1, 4), (1, 3, 1))]

ARITH = [("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply),
         ("maximum", np.maximum), ("minimum", np.minimum)]

CMP = [("equal", np.equal), ("not_equal", np.not_equal), ("less", np.less),
       ("less_equal", np.less_equal), ("greater", np.greater),
       ("greater_equal", np.greater_equal)]


@pytest.fixture
def rng():
    return seeded_rng()


@pytest.mark.parametrize("sa,sb", SHAPES)
@pytest.mark.parametrize("name,ref", ARITH, ids=[a[0] for a in ARITH])
def test_arith_broadcast(rng, sa, sb, name, ref):
    a_t, b_t = te.placeholder(sa, name="a"), te.placeholder(sb, name="b")
    a, b = rand(rng, sa), rand(rng, sb)
    out = getattr(ops, name)(a_t, b_t)
    assert out.op.tag == "broadcast"
    check(out, {a_t: a, b_t: b}, ref(a, b))


@pytest.mark.parametrize("name,ref", CMP, ids=[c[0] for c in CMP])
def test_comparisons_give_bool(rng, name, ref):
    a_t, b_t = te.placeholder((3, 8), "int32", name="a"), te.placeholder((8,), "int32", name="b")
    a, b = rand(rng, (3, 8), "int32", 0, 4), rand(rng, (8,), "int32", 0, 4)
    out = getattr(ops, name)(a_t, b_t)
    assert out.dtype == "bool"
    check(out, {a_t: a, b_t: b}, ref(a, b))


def test_divide_floats(rng):
    a_t, b_t = te.placeholder((4, 6), name="a"), te.placeholder((6,), name="b")
    a, b = rand(rng, (4, 6)), rand(rng, (6,), "float32", 0.5, 2)
    check(ops.divide(a_t, b_t), {a_t: a, b_t: b}, a / b)


def test_divide_integers_is_an_error():
    a = te.placeholder((4,), "int32", name="a")
    with pytest.raises(TensorExprError, match="divide: 'a' has integer dtype int32; use ops"):
        ops.divide(a, a)


def test_floor_divide_and_mod_signed(rng):
    a_t, b_t = te.placeholder((40,), "int32", name="a"), te.placeholder((40,), "int32", name="b")
    a = rand(rng, (40,), "int32", -50, 50)
    b = rand(rng, (40,), "int32", 1, 9) * rng.choice([-1, 1], 40).astype("int32")
    check(ops.floor_divide(a_t, b_t), {a_t: a, b_t: b}, np.floor_divide(a, b))
    check(ops.floor_mod(a_t, b_t), {a_t: a, b_t: b}, np.mod(a, b))


def test_power(rng):
    a_t, b_t = te.placeholder((3, 5), name="a"), te.placeholder((5,), name="b")
    a, b = rand(rng, (3, 5), "float32", 0.1, 3), rand(rng, (5,), "float32", -2, 2)
    check(ops.power(a_t, b_t), {a_t: a, b_t: b}, np.power(a, b), rtol=1e-5)


def test_scalar_operand_takes_tensor_dtype(rng):
    a_t = te.placeholder((10,), "float16", name="a")
    a = rand(rng, (10,), "float16")
    out = ops.add(a_t, 1.5)
    assert out.dtype == "float16"
    check(out, {a_t: a}, a + np.float16(1.5), rtol=1e-3)
    check(ops.multiply(3, a_t), {a_t: a}, a * np.float16(3), rtol=1e-3)


def test_mixed_dtypes_promote(rng):
    a_t = te.placeholder((6,), "int32", name="a")
    b_t = te.placeholder((6,), "float32", name="b")
    a, b = rand(rng, (6,), "int32", -5, 5), rand(rng, (6,))
    out = ops.add(a_t, b_t)
    assert out.dtype == "float32"
    check(out, {a_t: a, b_t: b}, a.astype("float32") + b)


def test_where(rng):
    c_t = te.placeholder((4, 1), "bool", name="c")
    x_t, y_t = te.placeholder((4, 5), name="x"), te.placeholder((5,), name="y")
    c, x, y = rand(rng, (4, 1), "bool"), rand(rng, (4, 5)), rand(rng, (5,))
    check(ops.where(c_t, x_t, y_t), {c_t: c, x_t: x, y_t: y}, np.where(c, x, y))


def test_where_needs_bool_condition():
    c = te.placeholder((4,), "int32", name="c")
    with pytest.raises(TensorExprError, match="where: condition 'c' has dtype int32"):
        ops.where(c, c, c)


def test_logical_ops(rng):
    a_t, b_t = te.placeholder((12,), "bool", name="a"), te.placeholder((12,), "bool", name="b")
    a, b = rand(rng, (12,), "bool"), rand(rng, (12,), "bool")
    check(ops.logical_and(a_t, b_t), {a_t: a, b_t: b}, a & b)
    check(ops.logical_or(a_t, b_t), {a_t: a, b_t: b}, a | b)


def test_broadcast_to(rng):
    b_t = te.placeholder((3, 1), name="b")
    b = rand(rng, (3, 1))
    check(ops.broadcast_to(b_t, (2, 3, 4)), {b_t: b}, np.broadcast_to(b, (2, 3, 4)))


def test_incompatible_shapes_are_an_error():
    a, b = te.placeholder((4, 3), name="a"), te.placeholder((4,), name="b")
    with pytest.raises(TensorExprError,
                       match=r"add: cannot broadcast shapes \(4, 3\) and \(4,\): dimension -1 "
                             r"is 3 vs 4"):
        ops.add(a, b)


def test_two_different_symbolic_dims_are_an_error():
    n, m = te.var("n"), te.var("m")
    a, b = te.placeholder((n,), name="a"), te.placeholder((m,), name="b")
    with pytest.raises(TensorExprError, match="dimension -1 is n vs m"):
        ops.multiply(a, b)


def test_symbolic_shapes_broadcast(rng):
    n = te.var("n")
    a_t, b_t = te.placeholder((n, 4), name="a"), te.placeholder((4,), name="b")
    out = ops.add(a_t, b_t)
    a, b = rand(rng, (7, 4)), rand(rng, (4,))
    np.testing.assert_allclose(te.evaluate(out, {a_t: a, b_t: b}), a + b)
    (got,) = run_compiled(out, {a_t: a, b_t: b}, out_shapes=[(7, 4)])
    np.testing.assert_allclose(got, a + b)


def test_same_symbolic_dim_broadcasts_with_one(rng):
    n = te.var("n")
    a_t, b_t = te.placeholder((n, 1), name="a"), te.placeholder((1, n), name="b")
    out = ops.subtract(a_t, b_t)
    a, b = rand(rng, (5, 1)), rand(rng, (1, 5))
    (got,) = run_compiled(out, {a_t: a, b_t: b}, out_shapes=[(5, 5)])
    np.testing.assert_allclose(got, a - b)
