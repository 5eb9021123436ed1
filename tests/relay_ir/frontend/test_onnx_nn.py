"""ONNX nn ops (conv, gemm, matmul, pooling, normalisation, activations) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.relay_ir.frontend.onnx_helpers import check_against_ort, graph_model, randn

F32 = "float32"


@pytest.mark.parametrize("attrs", [
    {},
    {"pads": [1, 1, 1, 1], "strides": [2, 2]},
    {"pads": [0, 1, 2, 1], "dilations": [2, 1]},
    {"group": 2, "pads": [1, 1, 1, 1]},
    {"auto_pad": "SAME_UPPER", "strides": [2, 2]},
    {"auto_pad": "SAME_LOWER", "strides": [2, 2]},
    {"auto_pad": "VALID", "strides": [1, 2]},
])
def test_conv2d_matches_onnxruntime(rng, attrs):
    group = attrs.get("group", 1)
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], **attrs)
    model = graph_model([node], {"x": (F32, (1, 4, 9, 8))}, ["y"], opset=11,
                        initializers={"w": randn(rng, 6, 4 // group, 3, 3),
                                      "b": randn(rng, 6)})
    check_against_ort(model, {"x": randn(rng, 1, 4, 9, 8)}, rtol=1e-4)


def test_conv1d_runs_as_conv2d_with_unit_height(rng):
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[2, 1], strides=[2])
    model = graph_model([node], {"x": (F32, (2, 3, 11))}, ["y"], opset=13,
                        initializers={"w": randn(rng, 5, 3, 4)})
    check_against_ort(model, {"x": randn(rng, 2, 3, 11)}, rtol=1e-4)


@pytest.mark.parametrize("attrs,a_shape,b_shape,c_shape", [
    ({}, (4, 5), (5, 3), (3,)),
    ({"transA": 1}, (5, 4), (5, 3), (4, 3)),
    ({"transB": 1, "alpha": 0.5, "beta": 2.0}, (4, 5), (3, 5), (1, 3)),
    ({"transA": 1, "transB": 1}, (5, 4), (3, 5), None),
])
def test_gemm_matches_onnxruntime(rng, attrs, a_shape, b_shape, c_shape):
    ins = ["a", "b"] + (["c"] if c_shape else [])
    inits = {"b": randn(rng, *b_shape)}
    if c_shape:
        inits["c"] = randn(rng, *c_shape)
    model = graph_model([helper.make_node("Gemm", ins, ["y"], **attrs)],
                        {"a": (F32, a_shape)}, ["y"], opset=13, initializers=inits)
    check_against_ort(model, {"a": randn(rng, *a_shape)}, rtol=1e-4)


@pytest.mark.parametrize("a_shape,b_shape", [
    ((4, 5), (5, 3)), ((2, 4, 5), (5, 3)), ((5,), (5, 3)), ((4, 5), (5,)), ((5,), (5,)),
    ((2, 1, 4, 5), (3, 5, 2)),
])
def test_matmul_follows_numpy_rules(rng, a_shape, b_shape):
    model = graph_model([helper.make_node("MatMul", ["a", "b"], ["y"])],
                        {"a": (F32, a_shape), "b": (F32, b_shape)}, ["y"], opset=13)
    check_against_ort(model, {"a": randn(rng, *a_shape), "b": randn(rng, *b_shape)},
                      rtol=1e-4)


def test_batch_normalization_uses_running_statistics(rng):
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            epsilon=1e-3)
    inits = {"s": randn(rng, 3), "b": randn(rng, 3), "m": randn(rng, 3),
             "v": np.abs(randn(rng, 3)) + 0.5}
    model = graph_model([node], {"x": (F32, (2, 3, 4, 5))}, ["y"], opset=9,
                        initializers=inits)
    check_against_ort(model, {"x": randn(rng, 2, 3, 4, 5)}, rtol=1e-4)


@pytest.mark.parametrize("op,attrs,opset", [
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2]}, 9),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, 10),
    ("MaxPool", {"kernel_shape": [2, 2], "pads": [1, 1, 1, 1], "dilations": [2, 2]}, 12),
    ("MaxPool", {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]}, 11),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, 9),
    ("AveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 1}, 9),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}, 11),
])
def test_pooling_matches_onnxruntime(rng, op, attrs, opset):
    model = graph_model([helper.make_node(op, ["x"], ["y"], **attrs)],
                        {"x": (F32, (1, 2, 9, 10))}, ["y"], opset=opset)
    check_against_ort(model, {"x": randn(rng, 1, 2, 9, 10)})


def test_pooling_1d(rng):
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3], strides=[2], pads=[1, 1])
    model = graph_model([node], {"x": (F32, (2, 3, 10))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 2, 3, 10)})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5, 4), (2, 3, 7)])
def test_global_pooling(rng, op, shape):
    model = graph_model([helper.make_node(op, ["x"], ["y"])], {"x": (F32, shape)}, ["y"],
                        opset=13)
    check_against_ort(model, {"x": randn(rng, *shape)})


@pytest.mark.parametrize("opset,axis", [(11, 1), (11, -1), (13, 1), (13, -1), (9, None)])
@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
def test_softmax_axis_semantics_change_at_opset_13(rng, opset, axis, op):
    # before 13 the input is flattened to 2-D at `axis`; from 13 one axis is normalised
    attrs = {} if axis is None else {"axis": axis}
    model = graph_model([helper.make_node(op, ["x"], ["y"], **attrs)],
                        {"x": (F32, (2, 3, 4))}, ["y"], opset=opset)
    check_against_ort(model, {"x": randn(rng, 2, 3, 4)})


@pytest.mark.parametrize("axis,with_bias", [(-1, True), (-1, False), (1, True)])
def test_layer_normalization(rng, axis, with_bias):
    ins = ["x", "s"] + (["b"] if with_bias else [])
    norm_shape = (3, 4) if axis == 1 else (4,)
    inits = {"s": randn(rng, *norm_shape)}
    if with_bias:
        inits["b"] = randn(rng, *norm_shape)
    node = helper.make_node("LayerNormalization", ins, ["y"], axis=axis, epsilon=1e-3)
    model = graph_model([node], {"x": (F32, (2, 3, 4))}, ["y"], opset=17, initializers=inits)
    check_against_ort(model, {"x": randn(rng, 2, 3, 4)}, rtol=1e-4)


def test_layer_normalization_statistics_outputs(rng):
    node = helper.make_node("LayerNormalization", ["x", "s"], ["y", "mean", "inv"], axis=-1)
    model = graph_model([node], {"x": (F32, (2, 5))}, ["y", "mean", "inv"], opset=17,
                        initializers={"s": randn(rng, 5)})
    check_against_ort(model, {"x": randn(rng, 2, 5)}, rtol=1e-4)


@pytest.mark.parametrize("size", [1, 3, 5])  # onnxruntime rejects even sizes
def test_lrn_matches_onnxruntime(rng, size):
    node = helper.make_node("LRN", ["x"], ["y"], size=size, alpha=1e-2, beta=0.75, bias=2.0)
    model = graph_model([node], {"x": (F32, (1, 7, 3, 4))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 1, 7, 3, 4)})


def test_instance_normalization(rng):
    node = helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"], epsilon=1e-4)
    model = graph_model([node], {"x": (F32, (2, 3, 4, 5))}, ["y"], opset=13,
                        initializers={"s": randn(rng, 3), "b": randn(rng, 3)})
    check_against_ort(model, {"x": randn(rng, 2, 3, 4, 5)}, rtol=1e-4)


@pytest.mark.parametrize("op,attrs", [
    ("Relu", {}), ("LeakyRelu", {"alpha": 0.2}), ("Sigmoid", {}), ("Tanh", {}), ("Erf", {}),
    ("Elu", {"alpha": 0.7}), ("Selu", {}), ("Celu", {"alpha": 2.0}), ("HardSigmoid", {}),
    ("HardSwish", {}), ("Softplus", {}), ("Softsign", {}), ("ThresholdedRelu", {"alpha": 0.3}),
    ("Mish", {}),
])
def test_activations(rng, op, attrs):
    model = graph_model([helper.make_node(op, ["x"], ["y"], **attrs)],
                        {"x": (F32, (3, 7))}, ["y"], opset=18)
    check_against_ort(model, {"x": randn(rng, 3, 7) * 3})


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu_opset_20(rng, approximate):
    node = helper.make_node("Gelu", ["x"], ["y"], approximate=approximate)
    model = graph_model([node], {"x": (F32, (4, 6))}, ["y"], opset=20)
    check_against_ort(model, {"x": randn(rng, 4, 6) * 2})


def test_prelu_broadcasts_the_slope(rng):
    model = graph_model([helper.make_node("PRelu", ["x", "s"], ["y"])],
                        {"x": (F32, (2, 3, 4))}, ["y"], opset=9,
                        initializers={"s": randn(rng, 3, 1)})
    check_against_ort(model, {"x": randn(rng, 2, 3, 4)})


def test_clip_attribute_form_before_opset_11(rng):
    node = helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.7)
    model = graph_model([node], {"x": (F32, (3, 4))}, ["y"], opset=9)
    out = check_against_ort(model, {"x": randn(rng, 3, 4)})
    assert out[0].min() >= -0.5 and out[0].max() <= 0.7


@pytest.mark.parametrize("bounds", [("lo", "hi"), ("lo", ""), ("", "hi"), ()])
def test_clip_input_form_from_opset_11(rng, bounds):
    inits = {"lo": np.array(-0.3, "float32"), "hi": np.array(0.4, "float32")}
    node = helper.make_node("Clip", ["x", *bounds], ["y"])
    model = graph_model([node], {"x": (F32, (3, 4))}, ["y"], opset=13,
                        initializers={k: v for k, v in inits.items() if k in bounds})
    check_against_ort(model, {"x": randn(rng, 3, 4)})


def test_clip_with_bounds_from_graph_inputs(rng):
    node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
    model = graph_model([node], {"x": (F32, (3, 4)), "lo": (F32, ()), "hi": (F32, ())}, ["y"],
                        opset=12)
    check_against_ort(model, {"x": randn(rng, 3, 4), "lo": np.array(-0.2, "float32"),
                              "hi": np.array(0.5, "float32")})


@pytest.mark.parametrize("opset", [9, 13])
def test_dropout_is_the_identity_at_inference(rng, opset):
    node = helper.make_node("Dropout", ["x"], ["y", "mask"], ratio=0.3) if opset < 12 else \
        helper.make_node("Dropout", ["x"], ["y", "mask"])
    model = graph_model([node], {"x": (F32, (3, 4))}, ["y", "mask"], opset=opset)
    x = randn(rng, 3, 4)
    out = check_against_ort(model, {"x": x})
    np.testing.assert_array_equal(out[0], x)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_modes_opset_13(rng, mode):
    pads = np.array([0, 1, 2, 0, 2, 1], "int64")
    ins = ["x", "pads"] + (["v"] if mode == "constant" else [])
    inits = {"pads": pads, "v": np.array(1.5, "float32")}
    model = graph_model([helper.make_node("Pad", ins, ["y"], mode=mode)],
                        {"x": (F32, (2, 3, 4))}, ["y"], opset=13,
                        initializers={k: v for k, v in inits.items() if k in ins})
    check_against_ort(model, {"x": randn(rng, 2, 3, 4)})


def test_pad_attribute_form_and_negative_pads(rng):
    node = helper.make_node("Pad", ["x"], ["y"], pads=[1, -1, 0, 2], value=0.5)
    model = graph_model([node], {"x": (F32, (3, 4))}, ["y"], opset=9)
    check_against_ort(model, {"x": randn(rng, 3, 4)})
