"""Elementwise ops: references against per-element Python math, relations on a few shapes."""

from __future__ import annotations

import math
import operator

import numpy as np
import pytest

import relay_ir
from relay_ir.op._common import RelationError
from relay_ir.op.registry import OPS, PATTERNS, REFERENCES, TYPE_RELATIONS, OpPattern
from relay_ir.ty import ANY, ShapeVar
from tests.relay_ir.op_helpers import T, rand, ref, rel
from tests.rng import seeded_rng

UNARY = {
    "negative": operator.neg,
    "abs": abs,
    "exp": math.exp,
    "log": math.log,
    "sqrt": math.sqrt,
    "rsqrt": lambda v: 1.0 / math.sqrt(v),
    "tanh": math.tanh,
    "sigmoid": lambda v: 1.0 / (1.0 + math.exp(-v)),
    "erf": math.erf,
    "floor": math.floor,
    "ceil": math.ceil,
    "round": lambda v: math.copysign(math.floor(abs(v) + 0.5), v),
    "copy": lambda v: v,
}
BINARY = {
    "add": operator.add,
    "subtract": operator.sub,
    "multiply": operator.mul,
    "divide": operator.truediv,
    "maximum": max,
    "minimum": min,
    "equal": operator.eq,
    "not_equal": operator.ne,
    "less": operator.lt,
    "greater": operator.gt,
    "less_equal": operator.le,
    "greater_equal": operator.ge,
}


def elementwise(fn, *arrays: np.ndarray) -> np.ndarray:
    """Apply a scalar Python function element by element after numpy broadcasting."""
    b = np.broadcast_arrays(*arrays)
    flat = [fn(*(float(a.flat[i]) for a in b)) for i in range(b[0].size)]
    return np.array(flat).reshape(b[0].shape)


def test_registry_has_at_least_55_complete_ops() -> None:
    assert len(OPS) >= 55
    for op in OPS.values():
        assert op in TYPE_RELATIONS and op in REFERENCES and op in PATTERNS, op
        if op.attrs_type is not None:
            params = op.attrs_type.__dataclass_params__
            assert params.frozen, op


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_reference_matches_python_math(name: str) -> None:
    rng = seeded_rng()
    x = rand(rng, 3, 4)
    if name in ("log", "sqrt", "rsqrt"):
        x = np.abs(x) + 0.1
    got = ref(name, x)
    want = elementwise(UNARY[name], x.astype(np.float64)).astype(np.float32)
    assert got.dtype == np.float32 and got.shape == (3, 4)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_round_is_half_away_from_zero() -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.49], "float32")
    np.testing.assert_array_equal(ref("round", x), [1, 2, 3, -1, -3, 0])


@pytest.mark.parametrize("name", sorted(BINARY))
def test_binary_reference_broadcasts_like_python(name: str) -> None:
    rng = seeded_rng()
    a, b = rand(rng, 2, 1, 4), rand(rng, 3, 1)
    if name == "divide":
        b = np.abs(b) + 0.5
    got = ref(name, a, b)
    want = elementwise(BINARY[name], a.astype(np.float64), b.astype(np.float64))
    assert got.shape == (2, 3, 4)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-6)


def test_power_and_integer_division() -> None:
    rng = seeded_rng()
    a = np.abs(rand(rng, 5)) + 0.5
    b = rand(rng, 5)
    np.testing.assert_allclose(ref("power", a, b), [x**y for x, y in zip(a.tolist(), b.tolist())],
                               rtol=1e-6)
    ai = np.array([7, -7, 7, -7], "int32")
    bi = np.array([2, 2, -2, -2], "int32")
    np.testing.assert_array_equal(ref("divide", ai, bi), [3, -3, -3, 3])  # truncation, as C


def test_logical_ops_on_bools() -> None:
    rng = seeded_rng()
    a, b = rng.random(6) > 0.5, rng.random(6) > 0.5
    np.testing.assert_array_equal(ref("logical_and", a, b), [x and y for x, y in zip(a, b)])
    np.testing.assert_array_equal(ref("logical_or", a, b), [x or y for x, y in zip(a, b)])
    np.testing.assert_array_equal(ref("logical_not", a), [not x for x in a])


def test_where_clip_cast_references() -> None:
    rng = seeded_rng()
    c = rng.random((3, 1)) > 0.5
    x, y = rand(rng, 3, 4), rand(rng, 4)
    want = np.array([[x[i, j] if c[i, 0] else y[j] for j in range(4)] for i in range(3)])
    np.testing.assert_array_equal(ref("where", c, x, y), want)
    v = rand(rng, 10)
    np.testing.assert_array_equal(ref("clip", v, a_min=-0.5, a_max=0.5),
                                  [min(max(e, -0.5), 0.5) for e in v.tolist()])
    assert ref("cast", v, dtype="int32").dtype == np.int32
    np.testing.assert_array_equal(ref("cast", v, dtype="int32"), [int(e) for e in v.tolist()])


def test_full_zeros_ones_and_like() -> None:
    rng = seeded_rng()
    x = rand(rng, 2, 3)
    assert (ref("full", np.float32(2.5), shape=(2, 2)) == 2.5).all()
    assert ref("zeros", shape=(3,), dtype="int32").tolist() == [0, 0, 0]
    assert ref("ones", shape=(2,)).tolist() == [1.0, 1.0]
    assert ref("full_like", x, np.float32(-1)).shape == (2, 3)
    assert ref("zeros_like", x).dtype == np.float32 and not ref("zeros_like", x).any()
    assert ref("ones_like", x, dtype="int64").dtype == np.int64
    assert str(rel("full", T(()), shape=(2, 5), dtype="int32")) == "Tensor[(2, 5), int32]"
    assert rel("ones_like", T((None, 3))).shape == (ANY, 3)


def test_binary_relation_broadcasts_with_gradual_dims() -> None:
    assert rel("add", T((2, 1, 4)), T((3, 1))).shape == (2, 3, 4)
    assert rel("add", T((None, 3)), T((4, 3))).shape == (4, 3)  # ? is 1 or 4: either way 4
    assert rel("add", T((None, 3)), T((1, 3))).shape == (ANY, 3)
    assert rel("multiply", T(("n", 3)), T(("n", 3))).shape == (ShapeVar("n"), 3)
    assert rel("less", T((2,)), T((2,))).dtype == "bool"


def test_binary_relation_rejects_bad_broadcast_and_dtype() -> None:
    with pytest.raises(RelationError, match=r"do not broadcast: dim 0 of argument 1 is 3"):
        rel("add", T((2, 4)), T((3, 4)))
    with pytest.raises(RelationError, match="dtype mismatch: argument 0 has dtype float32, "
                       "argument 1 has int32"):
        rel("add", T((2,)), T((2,), "int32"))
    with pytest.raises(RelationError, match="needs bool tensors"):
        rel("logical_and", T((2,)), T((2,)))


def test_unary_relations_keep_shape_and_check_dtype() -> None:
    assert rel("exp", T((None, 5))).shape == (ANY, 5)
    assert rel("abs", T((3,), "int32")).dtype == "int32"
    with pytest.raises(RelationError, match="needs a floating-point tensor, got dtype int32"):
        rel("sqrt", T((3,), "int32"))


def test_where_relation() -> None:
    out = rel("where", T((3, 1), "bool"), T((3, 4)), T((4,)))
    assert out.shape == (3, 4)
    with pytest.raises(RelationError, match="the condition must be bool"):
        rel("where", T((3,)), T((3,)), T((3,)))


def test_elementwise_patterns() -> None:
    assert PATTERNS[relay_ir.get_op("exp")] == OpPattern.ELEMWISE
    assert PATTERNS[relay_ir.get_op("add")] == OpPattern.BROADCAST


def test_builders_make_calls_with_attrs() -> None:
    x = relay_ir.var("x", shape=(2, 3))
    c = relay_ir.clip(x, 0, 6)
    assert c.op.name == "clip" and c.attrs.a_min == 0.0 and c.args == (x,)
    assert relay_ir.add(x, x).op is relay_ir.get_op("add")
    assert relay_ir.cast(x, "int8").attrs.dtype == "int8"
    assert relay_ir.zeros((2,)).args == ()
