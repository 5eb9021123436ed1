"""ONNX Shape of a tensor with `?` dims: relay's shape_of, read at run time, so a model that
computes with its batch size (a Loop whose trip count is the batch) runs on the VM at any
batch as onnxruntime does; dims asked for that are static stay a constant."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from relay_ir.frontend import from_onnx
from tests.relay_ir.frontend.onnx_helpers import randn
from tests.relay_ir.frontend.test_onnx_control_flow import _check, _graph, _model, _vi

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _shape_model(**attrs: int):
    return _model([helper.make_node("Shape", ["x"], ["s"], **attrs)],
                  [_vi("x", F, ["N", 3, 4])], [_vi("s", I64, None)], opset=15)


@pytest.mark.parametrize("attrs", [{}, {"end": 2}, {"start": -3, "end": 1}],
                         ids=["whole", "end", "start_end"])
def test_shape_of_a_question_mark_dim_is_read_at_run_time(rng, attrs):
    model = _shape_model(**attrs)
    for batch in (2, 5):
        (s,) = _check(model, {"x": randn(rng, batch, 3, 4)})
        assert s[0] == batch


def test_static_dims_of_a_dynamic_tensor_stay_a_constant(rng):
    model = _shape_model(start=1)
    mod, _ = from_onnx(model)
    assert "shape_of" not in str(mod)
    (s,) = _check(model, {"x": randn(rng, 2, 3, 4)})
    np.testing.assert_array_equal(s, [3, 4])


def _rows_loop_model():
    """The rows of x (batch N) folded by a Loop whose trip count is Gather(Shape(x), 0):
    s = s * 0.5 + x[i] for i < N."""
    half = helper.make_node("Constant", [], ["half"], value=helper.make_tensor(
        "half_v", F, [], [0.5]))
    body = _graph([half, helper.make_node("Mul", ["s_in", "half"], ["h"]),
                   helper.make_node("Gather", ["x", "i"], ["row"], axis=0),
                   helper.make_node("Add", ["h", "row"], ["s_out"]),
                   helper.make_node("Identity", ["cond_in"], ["cond_out"])],
                  "body", [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("s_in", F, [3])],
                  [_vi("cond_out", BOOL, []), _vi("s_out", F, [3])])
    zero = helper.make_node("Constant", [], ["zero"], value=helper.make_tensor(
        "zero_v", I64, [], [0]))
    nodes = [helper.make_node("Shape", ["x"], ["shape"]), zero,
             helper.make_node("Gather", ["shape", "zero"], ["n"], axis=0),
             helper.make_node("Loop", ["n", "", "s0"], ["s"], body=body)]
    return _model(nodes, [_vi("x", F, ["N", 3]), _vi("s0", F, [3])], [_vi("s", F, [3])])


def test_a_loop_whose_trip_count_is_the_batch_runs_on_the_vm_at_two_batches(rng):
    model = _rows_loop_model()
    s0 = randn(rng, 3)
    for batch in (3, 6):
        x = randn(rng, batch, 3)
        (s,) = _check(model, {"x": x, "s0": s0})
        want = s0
        for row in x:
            want = want * 0.5 + row
        np.testing.assert_allclose(s, want, rtol=1e-5, atol=1e-6)
