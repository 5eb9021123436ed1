"""ONNX Slice whose starts, ends or steps are known only at run time is relay's
dyn.strided_slice: fed as graph inputs, it runs in the interpreter and on the VM as
onnxruntime runs it (random bounds, out of range, negative, backwards); a static Slice
clamps as ONNX does where numpy would not; in a Loop body whose slice bounds follow the
iteration count (as the conformance case loop11), the carried value and the scan output
get a run-time check back to their declared shapes, and a body whose slice breaks that
shape fails when run, naming the slice and both shapes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import relay_ir
from relay_ir.frontend import from_onnx
from tessel_errors import RelayRuntimeError
from tests.relay_ir.frontend.onnx_helpers import check_against_ort, graph_model, randn, run_ort
from tests.relay_ir.frontend.test_onnx_control_flow import _check, _run_vm
from tests.relay_ir.test_op_dyn_strided_slice import INT64_MAX, INT64_MIN

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _i64(*values: int) -> np.ndarray:
    return np.array(values, "int64")


def _slice_model() -> onnx.ModelProto:
    """y = Slice(x, starts, ends, axes=[2, 0], steps), starts/ends/steps graph inputs."""
    node = helper.make_node("Slice", ["x", "s", "e", "a", "k"], ["y"], name="cut")
    return graph_model([node], {"x": (np.float32, (4, 3, 5)), "s": (np.int64, (2,)),
                                "e": (np.int64, (2,)), "k": (np.int64, (2,))}, ["y"],
                       opset=13, initializers={"a": _i64(2, 0)})


def test_run_time_bounds_import_as_dyn_strided_slice_and_run_as_onnxruntime(rng):
    model = _slice_model()
    mod, _ = from_onnx(model)
    assert "dyn.strided_slice(" in relay_ir.astext(mod)
    machine = relay_ir.vm.VirtualMachine(relay_ir.vm.compile(mod))
    x = randn(rng, 4, 3, 5)
    for _ in range(12):
        steps = [int(k) for k in rng.choice([-2, -1, 1, 2, 3], size=2)]
        starts = [int(rng.choice([INT64_MAX, INT64_MIN])) if rng.random() < 0.2 else
                  int(rng.integers(-7, 8)) for _ in steps]
        # "to the end" as the specification recommends: INT64_MAX forward, INT64_MIN
        # backward (onnxruntime reads INT64_MAX backward as "to the first", the spec and
        # numpy as the last index)
        ends = [(INT64_MAX if k > 0 else INT64_MIN) if rng.random() < 0.2 else
                int(rng.integers(-7, 8)) for k in steps]
        feeds = {"x": x, "s": _i64(*starts), "e": _i64(*ends), "k": _i64(*steps)}
        (want,) = run_ort(model, feeds)
        got = machine.run(**feeds)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        (interpreted,) = check_against_ort(model, feeds)
        np.testing.assert_array_equal(interpreted, got)


def test_a_static_backwards_slice_from_before_the_first_element_clamps_as_onnx(rng):
    # numpy's x[-9:-9:-1] is empty; ONNX clamps the begin to 0 and takes x[0]
    node = helper.make_node("Slice", ["x", "s", "e", "a", "k"], ["y"])
    model = graph_model([node], {"x": (np.float32, (4, 3))}, ["y"], opset=13,
                        initializers={"s": _i64(-9), "e": _i64(-9), "a": _i64(0),
                                      "k": _i64(-1)})
    (y,) = check_against_ort(model, {"x": randn(rng, 4, 3)})
    assert y.shape == (1, 3)


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _loop11_like(width: int) -> onnx.ModelProto:
    """loop11's body: y += Slice(x, [i], [i + width]), then scan y; y is [1] float."""
    one = helper.make_tensor("one_v", I64, [], [1])
    w = helper.make_tensor("w_v", I64, [], [width])
    zero_axis = helper.make_tensor("ax_v", I64, [1], [0])
    nodes = [helper.make_node("Constant", [], ["one"], value=one),
             helper.make_node("Constant", [], ["w"], value=w),
             helper.make_node("Constant", [], ["ax"], value=zero_axis),
             helper.make_node("Add", ["i", "w"], ["i_end"]),
             helper.make_node("Unsqueeze", ["i", "ax"], ["start"]),
             helper.make_node("Unsqueeze", ["i_end", "ax"], ["end"]),
             helper.make_node("Slice", ["x", "start", "end"], ["piece"]),
             helper.make_node("Add", ["y_in", "piece"], ["y_out"]),
             helper.make_node("Identity", ["cond_in"], ["cond_out"]),
             helper.make_node("Identity", ["y_out"], ["scan_out"])]
    body = helper.make_graph(nodes, "body", [_vi("i", I64, []), _vi("cond_in",
                                                                    TensorProto.BOOL, []),
                                             _vi("y_in", F, [1])],
                             [_vi("cond_out", TensorProto.BOOL, []), _vi("y_out", F, [1]),
                              _vi("scan_out", F, [1])])
    loop = helper.make_node("Loop", ["m", "", "y0"], ["y", "ys"], body=body, name="acc")
    graph = helper.make_graph([loop], "g", [_vi("x", F, [5]), _vi("y0", F, [1]),
                                            _vi("m", I64, [])],
                              [_vi("y", F, [1]), _vi("ys", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_a_loop_whose_slice_follows_the_iteration_count_runs_on_the_vm_as_onnxruntime(rng):
    for m in (0, 3, 5):
        y, ys = _check(_loop11_like(1), {"x": randn(rng, 5), "y0": randn(rng, 1),
                                         "m": np.array(m, "int64")})
        assert y.shape == (1,) and ys.shape == (m, 1)


def test_a_loop_body_whose_slice_breaks_the_carried_shape_fails_naming_the_slice(rng):
    feeds = {"x": randn(rng, 5), "y0": randn(rng, 1), "m": np.array(2, "int64")}
    # y + piece of (1,) + (?,) is checked back to (1,): type inference carries that to the
    # slice, whose result is checked to be 1 (or 1 broadcast) long
    with pytest.raises(RelayRuntimeError, match=r"dyn.strided_slice: dim 0 must be 1 .*"
                                                 r"expected shape \(1\), got a value of "
                                                 r"shape \(2\)"):
        _run_vm(_loop11_like(2), feeds)
