"""SimplifyExpr makes a dyn.reshape whose new shape is known when compiling the static
reshape (a constant, shape_of of a static tensor, or the data's own `?` dims at their
positions, which the static reshape's 0 copies), so relay_ir.build runs programs whose
shapes are all static; it leaves the call where the shape is only known at run time or
does not fit; and drops the run-time check type inference put behind a `?` that the static
reshape makes a number. relay_ir.transform.shape_value is what it reads the shape with."""

from __future__ import annotations

import numpy as np
import pytest

import relay_ir
from relay_ir.expr import Call, Function
from relay_ir.module import IRModule
from relay_ir.op.registry import Op
from relay_ir.transform import InferType, PassContext, SimplifyExpr
from relay_ir.transform.analysis import post_order
from relay_ir.transform.shape_value import shape_value
from relay_ir.ty import ANY, TensorType
from tessel_errors import RelayError, RelayRuntimeError
from tests.relay_ir.op_helpers import rand
from tests.rng import seeded_rng


def _ops(expr) -> list[str]:
    return [e.op.name for e in post_order(expr) if isinstance(e, Call) and isinstance(e.op, Op)]


def _module(params, body) -> IRModule:
    return IRModule.from_expr(Function(tuple(params), body))


def _simplified(mod: IRModule) -> Function:
    return InferType()(SimplifyExpr()(InferType()(mod)))["main"]


def _i64(*values: int):
    return relay_ir.const(np.array(values, "int64"))


def _flatten_of(x):
    """[shape_of(x)[0], -1], as the ONNX exporters write a flatten."""
    n = relay_ir.take(relay_ir.shape_of(x), relay_ir.const(np.int64(0)), axis=0)
    return relay_ir.concatenate([relay_ir.expand_dims(n, 0), _i64(-1)], 0)


def test_a_constant_new_shape_becomes_the_static_reshape():
    x = relay_ir.var("x", shape=(2, 6))
    fn = _simplified(_module([x], relay_ir.dyn_reshape(x, _i64(3, -1))))
    assert _ops(fn.body) == ["reshape"] and fn.body.attrs.newshape == (3, -1)
    assert fn.body.checked_type == TensorType((3, 4))


def test_a_new_shape_computed_from_static_shapes_becomes_the_static_reshape():
    x, y = relay_ir.var("x", shape=(2, 6)), relay_ir.var("y", shape=(4, 3))
    fn = _simplified(_module([x, y], relay_ir.dyn_reshape(x, relay_ir.shape_of(y))))
    assert _ops(fn.body) == ["reshape"] and fn.body.attrs.newshape == (4, 3)


def test_the_flatten_of_a_question_mark_batch_becomes_a_reshape_copying_the_batch():
    x = relay_ir.var("x", shape=(None, 3, 4))
    fn = _simplified(_module([x], relay_ir.dyn_reshape(x, _flatten_of(x))))
    assert _ops(fn.body) == ["reshape"] and fn.body.attrs.newshape == (0, -1)
    assert fn.body.checked_type == TensorType((ANY, 12))
    rng = seeded_rng()
    for batch in (2, 5):
        v = rand(rng, batch, 3, 4)
        np.testing.assert_array_equal(relay_ir.interpret(IRModule.from_expr(fn), v),
                                      v.reshape(batch, 12))


def test_a_shape_read_from_another_question_mark_tensor_stays_dynamic():
    x, y = relay_ir.var("x", shape=(None, 6)), relay_ir.var("y", shape=(None, 3))
    fn = _simplified(_module([x, y], relay_ir.dyn_reshape(x, relay_ir.shape_of(y))))
    assert _ops(fn.body) == ["shape_of", "dyn.reshape"]


def test_the_datas_own_question_mark_dim_at_another_position_stays_dynamic():
    x = relay_ir.var("x", shape=(3, None))
    n = relay_ir.take(relay_ir.shape_of(x), relay_ir.const(np.int64(1)), axis=0)
    shape = relay_ir.concatenate([relay_ir.expand_dims(n, 0), _i64(-1)], 0)
    fn = _simplified(_module([x], relay_ir.dyn_reshape(x, shape)))
    assert "dyn.reshape" in _ops(fn.body)


def test_a_shape_given_as_a_parameter_stays_dynamic():
    x, s = relay_ir.var("x", shape=(2, 6)), relay_ir.var("s", shape=(2,), dtype="int64")
    fn = _simplified(_module([x, s], relay_ir.dyn_reshape(x, s)))
    assert _ops(fn.body) == ["dyn.reshape"]


def test_with_allowzero_a_constant_0_stays_dynamic_and_a_shape_without_0_does_not():
    x = relay_ir.var("x", shape=(2, 6))
    kept = _simplified(_module([x], relay_ir.dyn_reshape(x, _i64(0, 12), allowzero=True)))
    assert _ops(kept.body) == ["dyn.reshape"]  # the static reshape's 0 would copy the 2
    static = _simplified(_module([x], relay_ir.dyn_reshape(x, _i64(4, 3), allowzero=True)))
    assert _ops(static.body) == ["reshape"]


def test_a_constant_shape_that_does_not_fit_stays_and_fails_when_run_naming_dyn_reshape():
    x = relay_ir.var("x", shape=(4, 3))
    fn = _simplified(_module([x], relay_ir.dyn_reshape(x, _i64(5, -1))))
    assert _ops(fn.body) == ["dyn.reshape"]
    with pytest.raises(RelayRuntimeError, match=r"dyn.reshape: cannot reshape data of shape "
                                                 r"\(4, 3\) \(12 elements\) to newshape "
                                                 r"\[5, -1\]"):
        relay_ir.interpret(IRModule.from_expr(fn), rand(seeded_rng(), 4, 3))


def test_the_check_a_static_reshape_proves_is_dropped_and_one_still_needed_is_kept():
    x, w = relay_ir.var("x", shape=(None, 3, 4)), relay_ir.var("w", shape=(5, 12))
    flat = _module([x, w], relay_ir.nn.dense(relay_ir.dyn_reshape(x, _flatten_of(x)), w))
    assert "runtime.check_shape" in _ops(InferType()(flat)["main"].body)  # dense needs 12
    assert "runtime.check_shape" not in _ops(_simplified(flat).body)
    y, s = relay_ir.var("y", shape=(None, 3, 4)), relay_ir.var("s", shape=(2,), dtype="int64")
    dyn = _module([y, w, s], relay_ir.nn.dense(relay_ir.dyn_reshape(y, s), w))
    assert "runtime.check_shape" in _ops(_simplified(dyn).body)


def test_the_check_of_a_parameter_whose_question_mark_a_use_refined_is_kept():
    # the parameter's type says (6,) after inference, but only the check makes it so
    mod = relay_ir.parse("def @main(%x: Tensor[(?,), float32]) { reshape(%x, newshape=[2, 3]) }")
    fn = SimplifyExpr()(InferType()(mod))["main"]  # (inference again would restore a check)
    assert "runtime.check_shape" in _ops(fn.body)
    with pytest.raises(RelayRuntimeError, match=r"%x: dim 0 must be 6"):
        relay_ir.interpret(IRModule.from_expr(fn), rand(seeded_rng(), 5))


@pytest.mark.parametrize("opt_level", [2, 0])
def test_build_runs_a_program_whose_new_shape_is_static(opt_level):
    x, y = relay_ir.var("x", shape=(2, 6)), relay_ir.var("y", shape=(3, 4))
    s = relay_ir.shape_of(y)
    swapped = relay_ir.concatenate([relay_ir.strided_slice(s, (1,), (2,)),
                                    relay_ir.strided_slice(s, (0,), (1,))], 0)  # [4, 3]
    mod = _module([x, y], relay_ir.exp(relay_ir.dyn_reshape(x, swapped)))
    with PassContext(opt_level=opt_level):
        lib = relay_ir.build(mod)
    rng = seeded_rng()
    xv, yv = rand(rng, 2, 6), rand(rng, 3, 4)
    np.testing.assert_allclose(lib.run(xv, yv), np.exp(xv).reshape(4, 3), rtol=1e-6)


def test_build_of_a_shape_known_only_at_run_time_points_to_the_vm():
    x, s = relay_ir.var("x", shape=(2, 6)), relay_ir.var("s", shape=(2,), dtype="int64")
    with pytest.raises(RelayError, match=r"uses dyn.reshape, a reshape to a shape computed "
                                         r"at run time.*relay_ir.vm.compile"):
        relay_ir.build(_module([x, s], relay_ir.dyn_reshape(x, s)))


# --- shape_value ---------------------------------------------------------------------------


def _typed(params, body):
    return InferType()(_module(params, body))["main"].body


def test_shape_value_reads_numbers_and_question_mark_dims_through_take_and_slices():
    x = relay_ir.var("x", shape=(None, 3, None))
    s = relay_ir.shape_of(x)
    picked = relay_ir.take(s, relay_ir.const(np.array([-1, 1], "int64")), axis=0, mode="wrap")
    body = relay_ir.concatenate([relay_ir.strided_slice(s, (0,), (1,)), picked], 0)
    typed = _typed([x], body)
    got = shape_value(typed).elements()
    assert [d if isinstance(d, int) else d[1] for d in got] == [0, 2, 3]
    assert [isinstance(d, int) for d in got] == [False, False, True]


def test_shape_value_computes_with_numbers_and_knows_nothing_of_a_parameter():
    x, s = relay_ir.var("x", shape=(2, 6)), relay_ir.var("s", shape=(2,), dtype="int64")
    doubled = _typed([x], relay_ir.multiply(relay_ir.shape_of(x), _i64(2, 2)))
    assert shape_value(doubled).elements() == [4, 12]
    assert shape_value(_typed([s], relay_ir.add(s, _i64(1, 1)))) is None
