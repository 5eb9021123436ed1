"""ONNX If, Loop and Scan: imported by from_onnx, compiled by relay_ir.vm.compile and run
on the VirtualMachine, checked against onnxruntime on seeded random inputs; and the
malformed control-flow nodes the importer rejects, naming the node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import relay_ir
import relay_ir.vm
from relay_ir.frontend import from_onnx
from tessel_errors import FrontendError
from tests.relay_ir.frontend.onnx_helpers import randn, run_ort

F, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def _vi(name: str, elem: int, shape: Sequence[int] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def _model(nodes: Sequence[onnx.NodeProto], inputs: Sequence[onnx.ValueInfoProto],
           outputs: Sequence[onnx.ValueInfoProto], opset: int = 13) -> onnx.ModelProto:
    graph = helper.make_graph(list(nodes), "control_flow", list(inputs), list(outputs))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _run_vm(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    mod, params = from_onnx(model)
    vm = relay_ir.vm.VirtualMachine(relay_ir.vm.compile(mod, target="llvm", params=params))
    out = vm.run(**feeds)
    return [np.asarray(o) for o in (out if len(model.graph.output) > 1 else (out,))]


def _check(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    ours, ref = _run_vm(model, feeds), run_ort(model, feeds)
    assert len(ours) == len(ref)
    for k, (a, b) in enumerate(zip(ours, ref)):
        assert a.shape == b.shape, f"output {k}: shape {a.shape} vs onnxruntime {b.shape}"
        assert a.dtype == b.dtype, f"output {k}: dtype {a.dtype} vs onnxruntime {b.dtype}"
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5, err_msg=f"output {k}")
    return ours


def _graph(nodes: Sequence[onnx.NodeProto], name: str, inputs: Sequence[onnx.ValueInfoProto],
           outputs: Sequence[onnx.ValueInfoProto]) -> onnx.GraphProto:
    return helper.make_graph(list(nodes), name, list(inputs), list(outputs))


# --- If ---------------------------------------------------------------------------------

def _if_model(outer_read: bool = False) -> onnx.ModelProto:
    """y = If(c) then x * 2 (or x * w, w an outer value) else x - 1."""
    then_nodes = [helper.make_node("Mul", ["x", "w" if outer_read else "two"], ["t"])]
    if not outer_read:
        then_nodes.insert(0, helper.make_node("Constant", [], ["two"], value=helper.make_tensor(
            "two_v", F, [], [2.0])))
    then = _graph(then_nodes, "then", [], [_vi("t", F, [3, 4])])
    other = _graph([helper.make_node("Constant", [], ["one"], value=helper.make_tensor(
        "one_v", F, [], [1.0])), helper.make_node("Sub", ["x", "one"], ["e"])], "else", [],
        [_vi("e", F, [3, 4])])
    inputs = [_vi("c", BOOL, []), _vi("x", F, [3, 4])] + ([_vi("w", F, [3, 4])]
                                                        if outer_read else [])
    return _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                  inputs, [_vi("y", F, [3, 4])])


@pytest.mark.parametrize("taken", [True, False], ids=["then", "else"])
def test_if_runs_the_branch_its_condition_picks(rng, taken):
    x = randn(rng, 3, 4)
    (y,) = _check(_if_model(), {"c": np.array(taken), "x": x})
    np.testing.assert_allclose(y, x * 2 if taken else x - 1, rtol=1e-6)


def test_if_branch_reads_an_outer_scope_value(rng):
    _check(_if_model(outer_read=True),
           {"c": np.array(True), "x": randn(rng, 3, 4), "w": randn(rng, 3, 4)})


# --- Loop -------------------------------------------------------------------------------

def _loop_body(cond_from_sum: bool = False, scan: bool = False,
               inner_if: bool = False) -> onnx.GraphProto:
    """(i, cond, s) -> (cond', s + x * i [, s]), s a [3] float; x read from outside."""
    nodes = [helper.make_node("Cast", ["i"], ["fi"], to=F),
             helper.make_node("Mul", ["x", "fi"], ["step"])]
    if inner_if:  # the step is x * i on even i, x - i on odd ones
        two = helper.make_node("Constant", [], ["two"], value=helper.make_tensor(
            "two_v", I64, [], [2]))
        zero = helper.make_node("Constant", [], ["zero"], value=helper.make_tensor(
            "zero_v", I64, [], [0]))
        nodes = [nodes[0], two, zero, helper.make_node("Mod", ["i", "two"], ["r"]),
                 helper.make_node("Equal", ["r", "zero"], ["even"]),
                 helper.make_node("If", ["even"], ["step"],
                                  then_branch=_graph([helper.make_node("Mul", ["x", "fi"],
                                                                       ["a"])], "even", [],
                                                     [_vi("a", F, [3])]),
                                  else_branch=_graph([helper.make_node("Sub", ["x", "fi"],
                                                                       ["b"])], "odd", [],
                                                     [_vi("b", F, [3])]))]
    nodes.append(helper.make_node("Add", ["s_in", "step"], ["s_out"]))
    if cond_from_sum:  # go on while sum(s) < limit
        nodes += [helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
                  helper.make_node("Less", ["total", "limit"], ["cond_out"])]
    else:
        nodes.append(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    outputs = [_vi("cond_out", BOOL, []), _vi("s_out", F, [3])]
    if scan:
        nodes.append(helper.make_node("Identity", ["s_out"], ["s_scan"]))
        outputs.append(_vi("s_scan", F, [3]))
    return _graph(nodes, "body", [_vi("i", I64, []), _vi("cond_in", BOOL, []),
                                  _vi("s_in", F, [3])], outputs)


def _loop_model(body: onnx.GraphProto, trip: bool, cond: bool, scan: bool,
                extra: Sequence[onnx.ValueInfoProto] = ()) -> onnx.ModelProto:
    inputs = [_vi("x", F, [3]), _vi("s0", F, [3])] + list(extra)
    if trip:
        inputs.append(_vi("m", I64, []))
    if cond:
        inputs.append(_vi("c", BOOL, []))
    outputs = [_vi("s", F, [3])] + ([_vi("ys", F, None)] if scan else [])
    node = helper.make_node("Loop", ["m" if trip else "", "c" if cond else "", "s0"],
                            [o.name for o in outputs], body=body)
    return _model([node], inputs, outputs)


def test_loop_ends_early_when_its_body_computes_a_false_condition(rng):
    x = np.abs(randn(rng, 3)) + 0.5
    model = _loop_model(_loop_body(cond_from_sum=True), trip=True, cond=True, scan=False,
                        extra=[_vi("limit", F, [])])
    limit = np.array(20 * x.sum(), "float32")  # reached after a handful of the 100 trips
    (s,) = _check(model, {"x": x, "s0": randn(rng, 3), "m": np.array(100, "int64"),
                          "c": np.array(True), "limit": limit})
    assert s.sum() >= limit


def test_loop_with_a_trip_count_stacks_its_scan_output_along_a_new_axis_0(rng):
    model = _loop_model(_loop_body(scan=True), trip=True, cond=False, scan=True)
    s, ys = _check(model, {"x": randn(rng, 3), "s0": randn(rng, 3),
                           "m": np.array(5, "int64")})
    assert ys.shape == (5, 3)
    np.testing.assert_allclose(ys[-1], s)


def test_loop_of_ten_thousand_iterations_runs_in_one_frame(rng):
    model = _loop_model(_loop_body(), trip=True, cond=False, scan=False)
    _check(model, {"x": randn(rng, 3) * 1e-4, "s0": randn(rng, 3),
                   "m": np.array(10_000, "int64")})


def test_loop_with_trip_count_zero_returns_the_initial_values_and_an_empty_scan(rng):
    model = _loop_model(_loop_body(scan=True), trip=True, cond=False, scan=True)
    s0 = randn(rng, 3)
    s, ys = _check(model, {"x": randn(rng, 3), "s0": s0, "m": np.array(0, "int64")})
    np.testing.assert_array_equal(s, s0)
    assert ys.shape == (0, 3)


def test_if_nested_in_a_loop_body_picks_per_iteration(rng):
    model = _loop_model(_loop_body(inner_if=True, scan=True), trip=True, cond=False,
                        scan=True)
    _check(model, {"x": randn(rng, 3), "s0": randn(rng, 3), "m": np.array(6, "int64")})


# --- Scan -------------------------------------------------------------------------------

def _scan_model(reverse: bool) -> onnx.ModelProto:
    """A running sum over the rows of xs: (acc, row) -> (acc + row, acc + row)."""
    body = _graph([helper.make_node("Add", ["acc_in", "row"], ["acc_out"]),
                   helper.make_node("Identity", ["acc_out"], ["y"])], "scan_body",
                  [_vi("acc_in", F, [4]), _vi("row", F, [4])],
                  [_vi("acc_out", F, [4]), _vi("y", F, [4])])
    node = helper.make_node("Scan", ["acc0", "xs"], ["acc", "ys"], body=body,
                            num_scan_inputs=1, scan_input_directions=[int(reverse)])
    return _model([node], [_vi("acc0", F, [4]), _vi("xs", F, [5, 4])],
                  [_vi("acc", F, [4]), _vi("ys", F, [5, 4])], opset=9)


def test_scan_runs_forward_over_its_input_rows(rng):
    acc0, xs = randn(rng, 4), randn(rng, 5, 4)
    _, ys = _check(_scan_model(reverse=False), {"acc0": acc0, "xs": xs})
    np.testing.assert_allclose(ys, acc0 + np.cumsum(xs, axis=0), rtol=1e-5, atol=1e-5)


def test_scan_input_direction_reverse_reads_rows_last_first(rng):
    acc0, xs = randn(rng, 4), randn(rng, 5, 4)
    _, ys = _check(_scan_model(reverse=True), {"acc0": acc0, "xs": xs})
    np.testing.assert_allclose(ys, acc0 + np.cumsum(xs[::-1], axis=0), rtol=1e-5,
                               atol=1e-5)


# --- malformed nodes ----------------------------------------------------------------------

def test_if_branch_with_the_wrong_number_of_outputs_is_rejected():
    model = _if_model()
    branch = next(a.g for a in model.graph.node[0].attribute if a.name == "else_branch")
    branch.output.append(_vi("x_again", F, [3, 4]))
    branch.node.append(helper.make_node("Identity", ["x"], ["x_again"]))
    model.graph.node[0].name = "pick"
    with pytest.raises(FrontendError, match=r"pick.*else_branch produces 2 outputs"):
        from_onnx(model)


def test_loop_body_with_the_wrong_arity_is_rejected():
    body = _loop_body()
    del body.input[2]  # drops the loop-carried value's input
    model = _loop_model(body, trip=True, cond=False, scan=False)
    model.graph.node[0].name = "repeat"
    with pytest.raises(FrontendError, match=r"repeat.*body takes 2 inputs"):
        from_onnx(model)


def test_loop_carried_value_that_changes_shape_is_rejected():
    body = _graph([helper.make_node("Concat", ["s_in", "s_in"], ["s_out"], axis=0),
                   helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
                  [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("s_in", F, [3])],
                  [_vi("cond_out", BOOL, []), _vi("s_out", F, [6])])
    model = _loop_model(body, trip=True, cond=False, scan=False)
    model.graph.node[0].name = "grow"
    with pytest.raises(FrontendError, match=r"grow.*loop-carried value 0 enters the body"):
        from_onnx(model)


def test_loop_carried_value_that_changes_dtype_is_rejected():
    body = _graph([helper.make_node("Cast", ["s_in"], ["s_out"], to=TensorProto.DOUBLE),
                   helper.make_node("Identity", ["cond_in"], ["cond_out"])], "body",
                  [_vi("i", I64, []), _vi("cond_in", BOOL, []), _vi("s_in", F, [3])],
                  [_vi("cond_out", BOOL, []), _vi("s_out", TensorProto.DOUBLE, [3])])
    model = _loop_model(body, trip=True, cond=False, scan=False)
    model.graph.node[0].name = "widen"
    with pytest.raises(FrontendError, match=r"widen.*loop-carried value 0 enters the body"):
        from_onnx(model)


def test_loop_with_neither_trip_count_nor_condition_is_rejected():
    model = _loop_model(_loop_body(), trip=False, cond=False, scan=False)
    model.graph.node[0].name = "forever"
    with pytest.raises(FrontendError, match=r"forever.*neither a trip count"):
        from_onnx(model)
