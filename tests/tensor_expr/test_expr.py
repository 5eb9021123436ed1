"""Expression and tensor construction: dtypes, promotion, printing and the errors users hit."""

from __future__ import annotations

import pytest

import tensor_expr as te
from tensor_expr import expr as E
from tessel_errors import TensorExprError


def test_var_defaults_to_int32_and_prints_its_name():
    i = te.var("i")
    assert i.dtype == "int32" and str(i) == "i"


def test_operators_build_nodes():
    i, j = te.var("i"), te.var("j")
    e = (i * 4 + j) // 4 - i % 2
    assert isinstance(e, E.Sub) and isinstance(e.a, E.FloorDiv) and isinstance(e.b, E.FloorMod)
    assert str(e) == "(floordiv(((i * 4) + j), 4) - floormod(i, 2))"


def test_integer_constants_fold_at_construction():
    e = te.const(6) * 7
    assert isinstance(e, E.IntImm) and e.value == 42
    assert (te.const(-7) // 2).value == -4 and (te.const(-7) % 2).value == 1


def test_python_number_takes_dtype_of_the_other_side():
    x = te.var("x", "float16")
    e = x + 1
    assert e.dtype == "float16" and isinstance(e.b, E.FloatImm) and e.b.dtype == "float16"
    n = te.var("n", "int64")
    assert (n * 2).dtype == "int64"


def test_mixed_dtypes_promote_with_cast():
    i, x = te.var("i"), te.var("x", "float32")
    e = i + x
    assert e.dtype == "float32" and isinstance(e.a, E.Cast) and e.a.dtype == "float32"
    a8, b32 = te.var("a", "int8"), te.var("b", "int32")
    assert (a8 * b32).dtype == "int32"
    h, d = te.var("h", "float16"), te.var("d", "float64")
    assert (h - d).dtype == "float64"


def test_comparisons_are_bool_and_logic_combines_them():
    i = te.var("i")
    c = te.all(i >= 0, i < 8)
    assert c.dtype == "bool" and isinstance(c, E.And)
    assert (~(i < 3)).dtype == "bool"


def test_integer_true_division_is_an_error():
    i, j = te.var("i"), te.var("j")
    with pytest.raises(TensorExprError, match=r"'/' of integer expressions \(i / j\) is ambiguous"):
        i / j


def test_float_division_is_div():
    x = te.var("x", "float32")
    assert isinstance(x / 2.0, E.Div)


def test_integer_division_by_constant_zero_is_an_error():
    i = te.var("i")
    with pytest.raises(TensorExprError, match="integer division by zero"):
        i // 0


def test_bool_of_an_expression_is_an_error():
    i = te.var("i")
    with pytest.raises(TensorExprError, match="cannot use the symbolic expression '.*' as a "
                                              "Python bool"):
        if i < 3:
            pass


def test_unknown_dtype_is_an_error():
    with pytest.raises(TensorExprError, match="unknown dtype 'float8'; expected one of"):
        te.placeholder((4,), "float8")


def test_placeholder_and_compute_shapes():
    n = te.var("n")
    A = te.placeholder((n, 4), name="A")
    B = te.compute((n, 4), lambda i, j: A[i, j] * 2.0, name="B")
    assert B.shape[0] is n and B.ndim == 2 and B.dtype == "float32"
    assert [iv.var.name for iv in B.op.axis] == ["i", "j"]
    assert B.op.input_tensors == (A,)


def test_wrong_index_count_is_an_error():
    A = te.placeholder((4, 4), name="A")
    with pytest.raises(TensorExprError, match="tensor 'A' has 2 dimensions, indexed with 1"):
        A[0]


def test_float_index_is_an_error():
    A = te.placeholder((4,), name="A")
    x = te.var("x", "float32")
    with pytest.raises(TensorExprError, match="index 0 of tensor 'A' is x of dtype float32"):
        A[x]


def test_compute_lambda_arity_must_match_shape():
    with pytest.raises(TensorExprError, match="compute lambda takes 1 index arguments but the "
                                              "shape has 2"):
        te.compute((2, 3), lambda i: i)


def test_negative_dimension_is_an_error():
    with pytest.raises(TensorExprError, match="dimension 0 is negative"):
        te.placeholder((-1, 3))


def test_reduction_structure():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    S = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="S")
    r = S.op.body[0]
    assert isinstance(r, E.Reduce) and r.axis == (k,) and S.op.reduce_axis == (k,)
    assert str(r) == "sum(A[i, k], axis=[k in [0, 8)])"


def test_nested_reduction_is_an_error():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    with pytest.raises(TensorExprError, match="a reduction must be the whole body of a compute"):
        te.compute((4,), lambda i: te.sum(A[i, k], axis=k) + 1.0)


def test_reduction_over_a_data_axis_is_an_error():
    A = te.placeholder((4, 8), name="A")
    with pytest.raises(TensorExprError, match="axis must be reduce axes from te.reduce_axis"):
        te.compute((4,), lambda i: te.sum(A[i, 0], axis=i))


def test_max_min_dispatch_elementwise_or_reduction():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    i = te.var("i")
    assert isinstance(te.max(i, 3), E.Max)
    assert isinstance(te.max(A[0, k], axis=k), E.Reduce)
    assert isinstance(te.min(A[0, k], k), E.Reduce)


def test_user_reducer_and_tuple_argmax():
    A = te.placeholder((4, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    mul = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, t), name="mul")
    P = te.compute((4,), lambda i: mul(A[i, k], axis=k), name="P")
    assert P.op.body[0].combiner.name == "mul"
    idx, val = te.compute((4,), lambda i: te.argmax((k, A[i, k]), axis=k), name="am")
    assert idx.dtype == "int32" and val.dtype == "float32" and idx.op is val.op


def test_multi_output_compute():
    A = te.placeholder((4,), name="A")
    X, Y = te.compute((4,), lambda i: (A[i] + 1.0, A[i] > 0.0), name="XY")
    assert X.op is Y.op and Y.dtype == "bool" and Y.name == "XY.v1"


def test_if_then_else_needs_a_bool_condition():
    i = te.var("i")
    with pytest.raises(TensorExprError, match="expected a boolean condition, got 'i'"):
        te.if_then_else(i, 1, 2)
    e = te.if_then_else(i < 3, 1.0, 2)
    assert isinstance(e, E.Call) and e.name == "if_then_else" and e.dtype == "float32"


def test_intrinsics_need_floats():
    with pytest.raises(TensorExprError, match=r"exp\(\) needs a float operand"):
        te.exp(te.var("i"))
    assert te.sqrt(te.var("x", "float64")).dtype == "float64"


def test_cast_of_constant_folds():
    c = te.cast(te.const(3), "float32")
    assert isinstance(c, E.FloatImm) and c.value == 3.0
    assert te.cast(te.var("i"), "int64").dtype == "int64"


def test_non_integral_float_const_to_int_is_an_error():
    with pytest.raises(TensorExprError, match="constant 2.5 cannot be represented as int32"):
        te.const(2.5, "int32")


def test_substitute_and_collect_vars():
    i, j = te.var("i"), te.var("j")
    e = te.substitute(i * 2 + j, {i: j + 1})
    assert str(e) == "(((j + 1) * 2) + j)" and te.collect_vars(e) == [j]
