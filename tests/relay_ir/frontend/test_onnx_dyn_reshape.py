"""ONNX Reshape to a shape known only at run time (computed from a `?` dim, or fed as a graph
input) is relay's dyn.reshape, and Size of a tensor with `?` dims the product of shape_of:
an exported CNN with a dynamic batch and the Shape -> Gather -> Concat -> Reshape flatten
is imported, compiled for the VM once and run at two batch sizes as onnxruntime runs it,
also after save and load; a shape that does not fit fails naming dyn.reshape."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import relay_ir
import relay_ir.vm as vm
from relay_ir.frontend import from_onnx
from tessel_errors import RelayRuntimeError
from tests.relay_ir.frontend.onnx_helpers import graph_model, randn, run_ort
from tests.relay_ir.frontend.test_onnx_control_flow import _check, _run_vm

F = TensorProto.FLOAT


def _flatten_cnn(rng: np.random.Generator) -> onnx.ModelProto:
    """conv 3->4 (3x3, pad 1) + relu, 2x2 max pool, the exporters' flatten
    Reshape(p, Concat(Unsqueeze(Gather(Shape(p), 0)), [-1])), Gemm to 5 classes; batch N."""
    inits = {"w": randn(rng, 4, 3, 3, 3), "b": randn(rng, 4), "zero": np.array(0, "int64"),
             "ax": np.array([0], "int64"), "minus1": np.array([-1], "int64"),
             "gw": randn(rng, 5, 64), "gb": randn(rng, 5)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Shape", ["p"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["p", "target"], ["flat"], name="flatten"),
             helper.make_node("Gemm", ["flat", "gw", "gb"], ["y"], transB=1)]
    graph = helper.make_graph(
        nodes, "flatten_cnn", [helper.make_tensor_value_info("x", F, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", F, ["N", 5])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def _assert_like_ort(model: onnx.ModelProto, machine: vm.VirtualMachine, feeds) -> None:
    got, (want,) = machine.run(**feeds), run_ort(model, feeds)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_flatten_with_its_minus_1_in_an_initializer_imports_as_dyn_reshape(rng):
    # the initializer is a parameter of @main until bound, so its value is not known when
    # converting; vm.compile(params=...) binds it and SimplifyExpr makes the static reshape
    mod, params = from_onnx(_flatten_cnn(rng))
    assert "dyn.reshape(" in relay_ir.astext(mod) and "minus1" in params


def test_a_cnn_with_the_flatten_pattern_compiles_once_and_runs_at_two_batches_like_ort(rng):
    model = _flatten_cnn(rng)
    mod, params = from_onnx(model)
    exe = vm.compile(mod, params=params)
    machine = vm.VirtualMachine(exe)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a group compiled per input shape warns
        for batch in (2, 5):
            _assert_like_ort(model, machine, {"x": randn(rng, batch, 3, 8, 8)})
    # one kernel per group serves both batches (the batch-1 kernel, run per image); the
    # flatten is a kernel too, not a view: the pool's output is stored blocked (the batch-1
    # layout plan, relay_ir.vm.layouts) and the flatten reads it logically
    assert [len(k.by_shape) + len(k.by_pattern) for k in exe.kernels] == [1, 1, 1, 1]


def test_a_saved_and_loaded_cnn_with_the_flatten_pattern_runs_at_two_batches_like_ort(
        rng, tmp_path):
    model = _flatten_cnn(rng)
    mod, params = from_onnx(model)
    vm.compile(mod, params=params).save(str(tmp_path))
    machine = vm.VirtualMachine(vm.load(str(tmp_path)))
    for batch in (1, 3):
        _assert_like_ort(model, machine, {"x": randn(rng, batch, 3, 8, 8)})


def _const(name: str, values) -> onnx.NodeProto:
    value = numpy_helper.from_array(np.asarray(values, "int64"), name + "_v")
    return helper.make_node("Constant", [], [name], value=value)


def test_a_reshape_keeping_the_batch_with_constant_nodes_converts_to_the_static_reshape(rng):
    # Reshape(x, [Shape(x)[0], 4, -1]) with the numbers in Constant nodes: known when
    # converting, so the result keeps its static dims (?, 4, 16) and a Flatten at axis 2,
    # which needs the dims after the axis, converts
    nodes = [_const("zero", 0), _const("ax", [0]), _const("rest", [4, -1]),
             helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "rest"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["r"]),
             helper.make_node("Flatten", ["r"], ["y"], axis=2)]
    model = graph_model(nodes, {"x": ("float32", ("N", 4, 4, 4))}, ["y"], opset=13)
    mod, _ = from_onnx(model)
    assert "dyn.reshape" not in relay_ir.astext(mod)
    for batch in (2, 3):
        _check(model, {"x": randn(rng, batch, 4, 4, 4)})


def _reshape_like_model() -> onnx.ModelProto:
    """Reshape(x, Shape(y)): the new shape is another input's, both with `?` dims."""
    nodes = [helper.make_node("Shape", ["y"], ["s"]),
             helper.make_node("Reshape", ["x", "s"], ["z"])]
    return graph_model(nodes, {"x": ("float32", ("N", 6)), "y": ("float32", ("A", "B"))},
                       ["z"], opset=13)


def test_a_reshape_to_another_tensors_shape_runs_on_the_vm_like_ort(rng):
    model = _reshape_like_model()
    for batch, like in ((2, (4, 3)), (4, (3, 8))):
        _check(model, {"x": randn(rng, batch, 6), "y": randn(rng, *like)})


@pytest.mark.parametrize("allowzero", [0, 1])
def test_a_reshape_to_a_shape_fed_as_a_graph_input_runs_like_ort(rng, allowzero):
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"], allowzero=allowzero)]
    model = graph_model(nodes, {"x": ("float32", (2, 3, 4)), "s": ("int64", (3,))}, ["y"],
                        opset=14)
    for shape in ((4, 0, -1), (-1, 2, 3)) if not allowzero else ((4, 3, 2), (-1, 2, 3)):
        _check(model, {"x": randn(rng, 2, 3, 4), "s": np.array(shape, "int64")})


def test_a_shape_that_does_not_fit_fails_on_the_vm_naming_dyn_reshape_and_both_shapes(rng):
    nodes = [helper.make_node("Reshape", ["x", "s"], ["y"])]
    model = graph_model(nodes, {"x": ("float32", (2, 3, 4)), "s": ("int64", (2,))}, ["y"],
                        opset=13)
    with pytest.raises(RelayRuntimeError, match=r"dyn.reshape: cannot reshape data of shape "
                                                 r"\(2, 3, 4\) \(24 elements\) to newshape "
                                                 r"\[5, -1\]: 24 is not a multiple of 5"):
        _run_vm(model, {"x": randn(rng, 2, 3, 4), "s": np.array([5, -1], "int64")})


def _size_model() -> onnx.ModelProto:
    return graph_model([helper.make_node("Size", ["x"], ["n"])],
                       {"x": ("float32", ("N", 3, 4))}, ["n"], opset=13)


def test_size_of_a_question_mark_tensor_is_read_at_run_time_like_ort(rng):
    for batch in (2, 7):
        (n,) = _check(_size_model(), {"x": randn(rng, batch, 3, 4)})
        assert n == batch * 12


def test_size_of_a_static_tensor_stays_a_constant():
    model = graph_model([helper.make_node("Size", ["x"], ["n"])],
                        {"x": ("float32", (2, 3, 4))}, ["n"], opset=13)
    mod, _ = from_onnx(model)
    assert "shape_of" not in relay_ir.astext(mod)
    assert int(relay_ir.interpret(mod, np.zeros((2, 3, 4), "float32"))) == 24
