"""structural_equal / structural_hash: alpha-equivalence, constants by value, DAG sharing."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir as r
from relay_ir import structural_equal, structural_hash
from relay_ir.expr import Call, Constant, Function, Let, Tuple, TupleGetItem, Var
from relay_ir.module import IRModule
from relay_ir.op.registry import get_op
from relay_ir.ty import FuncType, TensorType, TypeVar
from tests.rng import seeded_rng


def _fn_xy() -> tuple[Function, Function]:
    a, b = Var("a", TensorType((3,))), Var("b", TensorType((3,)))
    x, y = Var("x", TensorType((3,))), Var("y", TensorType((3,)))
    add = get_op("add")
    return Function((a, b), Call(add, (a, b))), Function((x, y), Call(add, (x, y)))


def test_alpha_equivalent_functions_are_equal_and_hash_alike():
    f, g = _fn_xy()
    assert structural_equal(f, g)
    assert structural_hash(f) == structural_hash(g)


def test_swapped_parameters_are_not_equal():
    a, b = Var("a"), Var("b")
    x, y = Var("x"), Var("y")
    add = get_op("add")
    f = Function((a, b), Call(add, (a, b)))
    g = Function((x, y), Call(add, (y, x)))
    assert not structural_equal(f, g)


def test_param_annotations_are_compared():
    a, b = Var("a", TensorType((3,))), Var("b", TensorType((4,)))
    assert not structural_equal(Function((a,), a), Function((b,), b))


def test_let_bound_vars_are_alpha_renamed():
    x, y = Var("x"), Var("y")
    one = Constant(np.float32(1))
    assert structural_equal(Let(x, one, Tuple((x,))), Let(y, Constant(np.float32(1)), Tuple((y,))))


def test_free_vars_must_be_the_same_objects_unless_mapped():
    x, y = Var("x"), Var("y")
    assert not structural_equal(Tuple((x,)), Tuple((y,)))
    assert structural_equal(Tuple((x,)), Tuple((y,)), map_free_vars=True)
    # a mapping is a bijection: x->y twice is fine, x->y then x->z is not
    z = Var("z")
    assert structural_equal(Tuple((x, x)), Tuple((y, y)), map_free_vars=True)
    assert not structural_equal(Tuple((x, x)), Tuple((y, z)), map_free_vars=True)


def test_constants_compare_by_dtype_shape_and_value():
    rng = seeded_rng()
    data = rng.standard_normal((2, 3)).astype("float32")
    assert structural_equal(Constant(data), Constant(data.copy()))
    assert not structural_equal(Constant(data), Constant(data.astype("float64")))
    assert not structural_equal(Constant(data), Constant(data.reshape(3, 2)))
    other = data.copy()
    other[1, 2] = np.nextafter(other[1, 2], np.float32(np.inf))
    assert not structural_equal(Constant(data), Constant(other))


def test_nan_constants_with_the_same_bits_are_equal():
    assert structural_equal(Constant(np.array([np.nan])), Constant(np.array([np.nan])))


def test_sharing_is_significant():
    x = Var("x")
    relu = get_op("nn.relu")
    shared = Call(relu, (x,))
    one_node = Tuple((shared, shared))
    two_nodes = Tuple((Call(relu, (x,)), Call(relu, (x,))))
    assert not structural_equal(one_node, two_nodes)
    assert structural_equal(one_node, Tuple((Call(relu, (x,)),) * 2))


def test_shared_constants_and_vars_are_exempt_from_sharing():
    c = Constant(np.float32(2))
    copies = Tuple((Constant(np.float32(2)), Constant(np.float32(2))))
    assert structural_equal(Tuple((c, c)), copies)


def test_type_params_are_alpha_renamed():
    a, b = TypeVar("A"), TypeVar("B")
    assert structural_equal(FuncType((a,), a, (a,)), FuncType((b,), b, (b,)))
    assert not structural_equal(FuncType((a,), a, (a,)), FuncType((b,), a, (b,)))
    x, y = Var("x", a), Var("y", b)
    assert structural_equal(Function((x,), x, a, (a,)), Function((y,), y, b, (b,)))


def test_default_attrs_equal_none_attrs():
    x = Var("x")
    conv = get_op("nn.conv2d")
    w = Var("w")
    explicit = Call(conv, (x, w), conv.make_attrs({}))
    implicit = Call(conv, (x, w))
    assert structural_equal(explicit, implicit)
    strided = Call(conv, (x, w), conv.make_attrs({"strides": (2, 2)}))
    assert not structural_equal(explicit, strided)


def test_function_attrs_are_compared():
    x, y = Var("x"), Var("y")
    assert not structural_equal(Function((x,), x, attrs=(("Primitive", 1),)), Function((y,), y))


def test_modules_compare_by_global_names_not_order():
    m1 = r.parse("def @f(%x) { %x }\ndef @main(%y) { @f(%y) }")
    m2 = r.parse("def @main(%a) { @f(%a) }\ndef @f(%b) { %b }")
    m3 = r.parse("def @main(%a) { @g(%a) }\ndef @g(%b) { %b }")
    assert structural_equal(m1, m2)
    assert structural_hash(m1) == structural_hash(m2)
    assert not structural_equal(m1, m3)
    assert not structural_equal(m1, IRModule())


def test_different_kinds_are_not_equal():
    x = Var("x")
    assert not structural_equal(x, TensorType(()))
    assert not structural_equal(IRModule(), x)


def test_deep_let_chain_compares_without_recursion_error():
    def chain(n: int) -> r.Expr:
        vs = [Var(f"v{i}") for i in range(n)]
        body: r.Expr = vs[-1]
        for i in reversed(range(n)):
            prev = vs[i - 1] if i else Constant(np.float32(0))
            body = Let(vs[i], TupleGetItem(Tuple((prev,)), 0), body)
        return body

    assert structural_equal(chain(10_000), chain(10_000))
    assert not structural_equal(chain(10_000), chain(9_999))


def test_assert_structural_equal_shows_both_programs():
    x = Var("x")
    with pytest.raises(AssertionError, match=r"(?s)left.*%x.*right.*1.0f"):
        r.assert_structural_equal(Tuple((x,)), Tuple((Constant(np.float32(1)),)))
