"""from_onnx as an API: parameters, input order, shape overrides, `?` dims and their types,
multiple outputs, loading from a path, and the errors (unsupported ops, non-static values)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import relay_ir
from relay_ir.frontend import (
    FrontendError,
    NonStaticInput,
    OnnxImportError,
    UnsupportedOnnxOps,
    from_onnx,
)
from relay_ir.frontend.onnx_common import CONVERTERS
from relay_ir.ty import ANY, TensorType, TupleType
from relay_ir.typing import infer_type
from tests.relay_ir.frontend.onnx_helpers import check_against_ort, graph_model, randn
from tests.rng import seeded_rng


def _mlp(batch: object = "N") -> onnx.ModelProto:
    rng = seeded_rng()
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
             helper.make_node("Add", ["h", "b"], ["hb"], name="bias"),
             helper.make_node("Relu", ["hb"], ["y"], name="act")]
    return graph_model(nodes, {"x": ("float32", (batch, 8))}, ["y"], opset=13,
                       initializers={"w": randn(rng, 8, 16), "b": randn(rng, 16)})


def test_initializers_become_parameters_after_the_graph_inputs():
    model = _mlp()
    mod, params = from_onnx(model)
    names = [p.name_hint for p in mod["main"].params]
    assert names == ["x", "w", "b"]
    assert set(params) == {"w", "b"}
    for init in model.graph.initializer:
        np.testing.assert_array_equal(params[init.name], numpy_helper.to_array(init))
    w = mod["main"].params[1]
    assert w.type_annotation == TensorType((8, 16), "float32")


def test_dynamic_dims_become_any_and_infer_type_propagates_them():
    mod, _ = from_onnx(_mlp("N"))
    x = mod["main"].params[0]
    assert x.type_annotation.shape == (ANY, 8)
    typed = infer_type(mod)
    assert typed["main"].checked_type.ret_type == TensorType((ANY, 16), "float32")


def test_missing_dims_are_dynamic_too():
    model = _mlp(None)
    assert not model.graph.input[0].type.tensor_type.shape.dim[0].HasField("dim_value")
    mod, _ = from_onnx(model)
    assert mod["main"].params[0].type_annotation.shape == (ANY, 8)


def test_dynamic_batch_runs_for_several_batch_sizes(rng):
    model = _mlp("N")
    for n in (1, 3):
        check_against_ort(model, {"x": randn(rng, n, 8)}, rtol=1e-4)


def test_shape_override_makes_dims_static():
    mod, _ = from_onnx(_mlp("N"), shape={"x": (4, 8)})
    assert mod["main"].params[0].type_annotation.shape == (4, 8)
    assert infer_type(mod)["main"].checked_type.ret_type == TensorType((4, 16), "float32")


def test_shape_override_with_an_unknown_name_lists_the_inputs():
    with pytest.raises(OnnxImportError, match=r"shape= names \['data'\].*graph inputs are \['x'\]"):
        from_onnx(_mlp(), shape={"data": (1, 8)})


def test_dtype_dict_sets_the_input_dtype():
    model = graph_model([helper.make_node("Relu", ["x"], ["y"])], {"x": ("float32", (2,))},
                        ["y"], opset=13)
    mod, _ = from_onnx(model, dtype={"x": "float64"})
    assert mod["main"].params[0].type_annotation.dtype == "float64"
    assert infer_type(mod)["main"].checked_type.ret_type == TensorType((2,), "float64")


def test_multiple_outputs_become_a_tuple_in_graph_order(rng):
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Neg", ["x"], ["n"]),
             helper.make_node("Shape", ["x"], ["s"])]
    model = graph_model(nodes, {"x": ("float32", (2, 3))}, ["n", "s", "r"], opset=13)
    mod, _ = from_onnx(model)
    ret = infer_type(mod)["main"].checked_type.ret_type
    assert ret == TupleType((TensorType((2, 3)), TensorType((2,), "int64"), TensorType((2, 3))))
    out = check_against_ort(model, {"x": randn(rng, 2, 3)})
    np.testing.assert_array_equal(out[1], [2, 3])


def test_initializer_listed_as_graph_input_is_a_parameter():
    # IR version 3 models (the light model zoo) list every initializer as a graph input too
    model = _mlp(1)
    model.graph.input.extend([helper.make_tensor_value_info("w", TensorProto.FLOAT, (8, 16)),
                              helper.make_tensor_value_info("b", TensorProto.FLOAT, (16,))])
    mod, params = from_onnx(model)
    assert [p.name_hint for p in mod["main"].params] == ["x", "w", "b"]
    assert set(params) == {"w", "b"}


def test_load_from_a_path(tmp_path, rng):
    path = tmp_path / "mlp.onnx"
    model = _mlp(2)
    onnx.save(model, str(path))
    mod, params = from_onnx(path)
    x = randn(rng, 2, 8)
    ref = np.maximum(x @ params["w"] + params["b"], 0)
    np.testing.assert_allclose(relay_ir.interpret(mod, x=x, **params), ref, rtol=1e-5,
                               atol=1e-6)


def test_a_truncated_file_is_a_frontend_error_naming_the_file(tmp_path):
    path = tmp_path / "cut.onnx"
    data = _mlp(2).SerializeToString()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(FrontendError, match=r"cannot load ONNX model .*cut\.onnx"):
        from_onnx(path)


def test_a_file_that_is_not_onnx_is_a_frontend_error_naming_the_file(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"\xff\xfe not a protobuf " * 8)
    with pytest.raises(FrontendError, match=r"cannot load ONNX model .*junk\.onnx"):
        from_onnx(path)


def test_an_empty_file_is_a_frontend_error_saying_it_has_no_graph(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    with pytest.raises(FrontendError, match=r"empty\.onnx: it has no graph"):
        from_onnx(path)


def test_a_missing_file_is_a_frontend_error_naming_the_file(tmp_path):
    with pytest.raises(FrontendError, match=r"cannot load ONNX model .*absent\.onnx"):
        from_onnx(tmp_path / "absent.onnx")


def test_a_converter_failure_names_the_node_and_chains_the_cause(monkeypatch):
    def broken(ctx, node):
        raise KeyError("alpha")

    monkeypatch.setitem(CONVERTERS, "Relu", broken)
    with pytest.raises(FrontendError, match=r'node "act" \(Relu, index 2\): the Relu '
                                            r"converter failed: KeyError: 'alpha'") as info:
        from_onnx(_mlp(2))
    assert isinstance(info.value.__cause__, KeyError)


def test_bad_argument_type_is_an_import_error():
    with pytest.raises(OnnxImportError, match="expects an onnx.ModelProto or a path, got int"):
        from_onnx(3)


def test_unsupported_ops_are_listed_together_with_their_first_node():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r0"),
             helper.make_node("Sin", ["a"], ["b"], name="sin_first"),
             helper.make_node("Cos", ["b"], ["c"]),
             helper.make_node("Sin", ["c"], ["d"], name="sin_second"),
             helper.make_node("Relu", ["d"], ["y"], name="r1")]
    model = graph_model(nodes, {"x": ("float32", (2, 2))}, ["y"], opset=13)
    with pytest.raises(UnsupportedOnnxOps) as info:
        from_onnx(model)
    msg = str(info.value)
    assert msg.startswith("the model uses 2 unsupported ONNX op type(s):")
    assert "Sin: first at node 'sin_first' (index 1)" in msg
    assert "Cos: first at node index 2 (unnamed)" in msg
    assert "sin_second" not in msg
    assert info.value.unsupported == {"Sin": ("sin_first", 1), "Cos": ("", 2)}


def test_ops_of_other_domains_are_unsupported_with_their_domain():
    node = helper.make_node("MyOp", ["x"], ["y"], name="custom", domain="com.example")
    model = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, (2,))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (2,))]))
    with pytest.raises(UnsupportedOnnxOps, match=r"com.example::MyOp: first at node 'custom'"):
        from_onnx(model)


def test_expand_to_a_computed_shape_needs_static_values():
    # (Reshape takes a shape known only at run time: dyn.reshape; Expand needs it static)
    nodes = [helper.make_node("Expand", ["x", "s"], ["y"], name="expand_it")]
    model = graph_model(nodes, {"x": ("float32", (1, 3)), "s": ("int64", (2,))}, ["y"],
                        opset=13)
    with pytest.raises(NonStaticInput, match=r'node "expand_it" \(Expand, index 0\): input 1 '
                                             r"\(the shape\) must be known"):
        from_onnx(model)


def test_shape_of_a_dynamic_tensor_is_read_at_run_time_and_a_static_one_is_a_constant(rng):
    nodes = [helper.make_node("Shape", ["x"], ["y"], name="shape_of_x")]
    model = graph_model(nodes, {"x": ("float32", ("N", 3))}, ["y"], opset=13)
    dynamic, _ = from_onnx(model)
    assert "shape_of(%x)" in str(dynamic)
    static, _ = from_onnx(model, shape={"x": (5, 3)})
    assert "shape_of" not in str(static)
    x = randn(rng, 5, 3)
    for mod in (dynamic, static):
        np.testing.assert_array_equal(relay_ir.interpret(mod, x=x), [5, 3])


def test_type_errors_name_the_onnx_node():
    nodes = [helper.make_node("MatMul", ["a", "b"], ["y"], name="bad_mm")]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT, (2, 3)),
                     helper.make_tensor_value_info("b", TensorProto.FLOAT, (4, 5))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]))
    with pytest.raises(OnnxImportError, match=r'node "bad_mm" \(MatMul, index 0\): matmul'):
        from_onnx(model)


def test_used_but_unsupported_output_is_an_error():
    node = helper.make_node("MaxPool", ["x"], ["y", "idx"], kernel_shape=[2, 2], name="mp")
    model = graph_model([node], {"x": ("float32", (1, 1, 4, 4))}, ["y", "idx"], opset=12)
    with pytest.raises(OnnxImportError, match=r"\(MaxPool, index 0\): output 1 \('idx'\) is not"):
        from_onnx(model)


def test_supported_ops_include_everything_the_issue_names():
    from relay_ir.frontend import supported_ops

    wanted = ("Conv Gemm MatMul BatchNormalization Relu LeakyRelu Clip Sigmoid Tanh Erf Gelu "
              "MaxPool AveragePool GlobalAveragePool Add Sub Mul Div Pow Sqrt Reciprocal "
              "Flatten Reshape Transpose Softmax LayerNormalization Concat Split Gather Slice "
              "Unsqueeze Squeeze ReduceMean ReduceSum Cast Constant ConstantOfShape Shape "
              "Identity Dropout Pad LRN Sum").split()
    assert set(wanted) <= set(supported_ops())


def test_converted_module_prints_and_parses_back():
    mod, _ = from_onnx(_mlp("N"))
    again = relay_ir.parse(relay_ir.astext(mod))
    assert relay_ir.structural_equal(infer_type(again)["main"].checked_type,
                                     infer_type(mod)["main"].checked_type)
