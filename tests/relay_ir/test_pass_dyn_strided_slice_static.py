"""SimplifyExpr makes a dyn.strided_slice whose begin, end and strides are known when
compiling (constants, or computed from static shapes) the static strided_slice, with the
bounds resolved as ONNX resolves them, so relay_ir.build runs it (results equal to the
interpreter's on the dyn op); it leaves the call where a bound is only known at run time,
a stride is 0, or a backwards slice of a `?` dim could begin before its first element."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from relay_ir.module import IRModule
from relay_ir.transform import InferType
from relay_ir.ty import ANY, TensorType
from tessel_errors import RelayError, RelayRuntimeError
from tests.relay_ir.op_helpers import rand
from tests.relay_ir.test_pass_dyn_reshape_static import _i64, _module, _ops, _simplified
from tests.rng import seeded_rng

BIG, SMALL = 2**63 - 1, -(2**63)


@pytest.mark.parametrize("shape, begin, end, strides, axes", [
    ((6, 5), (1, BIG), (SMALL, 0), (1, -2), None),
    ((6, 5), (-2,), (BIG,), (1,), (1,)),
    ((4, 3, 5), (-9, 3), (-9, 0), (-1, -1), (0, 2)),  # ONNX: [x0] along axis 0, numpy: []
    ((4, 3), (5,), (-1,), (1,), None),  # empty
], ids=["huge_and_backwards", "axes", "onnx_corner", "empty"])
def test_constant_bounds_become_the_static_slice_which_build_runs_as_the_interpreter(
        shape, begin, end, strides, axes):
    x = relay_ir.var("x", shape=shape)
    dyn = _module([x], relay_ir.dyn_strided_slice(x, _i64(*begin), _i64(*end), _i64(*strides),
                                                   axes))
    fn = _simplified(dyn)
    assert _ops(fn) == ["strided_slice"]
    xv = rand(seeded_rng(), *shape)
    want = relay_ir.interpret(InferType()(dyn), xv)
    assert fn.body.checked_type == TensorType(want.shape)
    got = relay_ir.build(IRModule.from_expr(fn)).run(xv)
    np.testing.assert_array_equal(got, want)


def test_bounds_computed_from_static_shapes_fold_too():
    x = relay_ir.var("x", shape=(6, 4))
    half = relay_ir.divide(relay_ir.shape_of(x), _i64(2))  # [3, 2]
    fn = _simplified(_module([x], relay_ir.dyn_strided_slice(x, half, _i64(BIG, BIG),
                                                             _i64(1, 1))))
    assert _ops(fn) == ["strided_slice"]
    assert fn.body.checked_type == TensorType((3, 2))


def test_a_question_mark_dim_keeps_question_mark_and_folds_where_numpy_and_onnx_agree():
    x = relay_ir.var("x", shape=(None, 4))
    fn = _simplified(_module([x], relay_ir.dyn_strided_slice(x, _i64(-1), _i64(SMALL),
                                                             _i64(-1))))
    assert _ops(fn) == ["strided_slice"] and fn.body.checked_type == TensorType((ANY, 4))
    xv = rand(seeded_rng(), 5, 4)
    np.testing.assert_array_equal(relay_ir.interpret(IRModule.from_expr(fn), xv), xv[::-1])


def test_a_backwards_slice_of_a_question_mark_dim_from_below_minus_1_stays_dynamic():
    # its result depends on whether -3 is before the first element, known only when run
    x = relay_ir.var("x", shape=(None,))
    fn = _simplified(_module([x], relay_ir.dyn_strided_slice(x, _i64(-3), _i64(SMALL),
                                                             _i64(-1))))
    assert _ops(fn) == ["dyn.strided_slice"]
    for n, want in ((5, [2, 1, 0]), (2, [0])):
        xv = np.arange(n, dtype="float32")
        np.testing.assert_array_equal(relay_ir.interpret(IRModule.from_expr(fn), xv), want)


def test_bounds_known_only_at_run_time_and_a_stride_of_0_stay():
    x, b = relay_ir.var("x", shape=(6,)), relay_ir.var("b", shape=(1,), dtype="int64")
    fn = _simplified(_module([x, b], relay_ir.dyn_strided_slice(x, b, _i64(6), _i64(1))))
    assert _ops(fn) == ["dyn.strided_slice"]
    zero = _simplified(_module([x], relay_ir.dyn_strided_slice(x, _i64(0), _i64(6), _i64(0))))
    assert _ops(zero) == ["dyn.strided_slice"]
    with pytest.raises(RelayRuntimeError, match=r"dyn.strided_slice: a stride of 0"):
        relay_ir.interpret(IRModule.from_expr(zero), np.zeros(6, "float32"))


def test_build_of_bounds_known_only_at_run_time_points_to_the_vm():
    x, b = relay_ir.var("x", shape=(6,)), relay_ir.var("b", shape=(1,), dtype="int64")
    with pytest.raises(RelayError, match=r"uses dyn.strided_slice, a slice whose bounds are "
                                         r"computed at run time.*relay_ir.vm.compile"):
        relay_ir.build(_module([x, b], relay_ir.dyn_strided_slice(x, b, _i64(6), _i64(1))))


def test_the_folded_slice_of_a_question_mark_dim_prints_and_parses_back():
    # its bound 2**62 (past int32) is an attribute: a Python int, parsed in int64's range
    x = relay_ir.var("x", shape=(None, 4))
    fn = _simplified(_module([x], relay_ir.dyn_strided_slice(x, _i64(-1), _i64(SMALL),
                                                             _i64(-1))))
    text = relay_ir.astext(IRModule.from_expr(fn))
    assert "end=[-4611686018427387904]" in text
    assert relay_ir.parse(text)["main"].body.attrs == fn.body.attrs
