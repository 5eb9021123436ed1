"""ONNX elementwise, shape, constant and reduction ops against onnxruntime, across opsets."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.relay_ir.frontend.onnx_helpers import check_against_ort, graph_model, randn

F32 = "float32"
I64 = "int64"


def _i64(*values: int) -> np.ndarray:
    return np.array(values, dtype="int64")


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Sum", "Mean"])
def test_binary_ops_broadcast(rng, op):
    model = graph_model([helper.make_node(op, ["a", "b"], ["y"])],
                        {"a": (F32, (2, 3, 4)), "b": (F32, (3, 1))}, ["y"], opset=13)
    check_against_ort(model, {"a": randn(rng, 2, 3, 4), "b": randn(rng, 3, 1) + 3})


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
def test_comparisons_give_bool(rng, op):
    model = graph_model([helper.make_node(op, ["a", "b"], ["y"])],
                        {"a": (I64, (2, 5)), "b": (I64, (5,))}, ["y"], opset=16)
    check_against_ort(model, {"a": rng.integers(0, 3, (2, 5)), "b": rng.integers(0, 3, 5)})


def test_pow_with_an_integer_exponent(rng):
    model = graph_model([helper.make_node("Pow", ["x", "e"], ["y"])],
                        {"x": (F32, (3, 4)), "e": (I64, (4,))}, ["y"], opset=15)
    check_against_ort(model, {"x": randn(rng, 3, 4), "e": rng.integers(0, 4, 4)})


@pytest.mark.parametrize("op", ["Sqrt", "Reciprocal", "Exp", "Log", "Abs", "Neg", "Floor",
                                "Ceil", "Identity"])
def test_unary_ops(rng, op):
    model = graph_model([helper.make_node(op, ["x"], ["y"])], {"x": (F32, (3, 4))}, ["y"],
                        opset=13)
    check_against_ort(model, {"x": np.abs(randn(rng, 3, 4)) + 0.1})


def test_where_and_not(rng):
    nodes = [helper.make_node("Not", ["c"], ["nc"]),
             helper.make_node("Where", ["nc", "a", "b"], ["y"])]
    model = graph_model(nodes, {"c": ("bool", (3, 1)), "a": (F32, (3, 4)), "b": (F32, (4,))},
                        ["y"], opset=16)
    check_against_ort(model, {"c": rng.integers(0, 2, (3, 1)).astype(bool),
                              "a": randn(rng, 3, 4), "b": randn(rng, 4)})


@pytest.mark.parametrize("to", [TensorProto.INT32, TensorProto.FLOAT16, TensorProto.DOUBLE,
                                TensorProto.BOOL])
def test_cast(rng, to):
    model = graph_model([helper.make_node("Cast", ["x"], ["y"], to=to)],
                        {"x": (F32, (3, 4))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 3, 4) * 5}, rtol=1e-3)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_flatten(rng, axis):
    model = graph_model([helper.make_node("Flatten", ["x"], ["y"], axis=axis)],
                        {"x": (F32, (2, 3, 4))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 2, 3, 4)})


@pytest.mark.parametrize("shape", [(0, -1), (4, 0, 2, -1), (-1,), (2, 12)])
def test_reshape_copies_zeros_and_infers_minus_one(rng, shape):
    model = graph_model([helper.make_node("Reshape", ["x", "s"], ["y"])],
                        {"x": (F32, (2, 3, 4))}, ["y"], opset=13,
                        initializers={"s": _i64(*shape) if shape != (4, 0, 2, -1) else
                                      _i64(1, 3, 2, -1)})
    check_against_ort(model, {"x": randn(rng, 2, 3, 4)})


@pytest.mark.parametrize("perm", [None, [0, 2, 1], [2, 0, 1]])
def test_transpose(rng, perm):
    attrs = {} if perm is None else {"perm": perm}
    model = graph_model([helper.make_node("Transpose", ["x"], ["y"], **attrs)],
                        {"x": (F32, (2, 3, 4))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 2, 3, 4)})


def test_concat(rng):
    model = graph_model([helper.make_node("Concat", ["a", "b", "c"], ["y"], axis=-2)],
                        {"a": (F32, (2, 1, 4)), "b": (F32, (2, 3, 4)), "c": (F32, (2, 2, 4))},
                        ["y"], opset=13)
    check_against_ort(model, {"a": randn(rng, 2, 1, 4), "b": randn(rng, 2, 3, 4),
                              "c": randn(rng, 2, 2, 4)})


@pytest.mark.parametrize("opset,sizes,n_out", [
    (11, None, 3), (11, [1, 4, 1], 3), (13, [2, 4], 2), (13, None, 2), (18, None, 4),
])
def test_split_sizes_attribute_input_and_num_outputs(rng, opset, sizes, n_out):
    outs = [f"y{k}" for k in range(n_out)]
    attrs: dict = {"axis": 1}
    ins, inits = ["x"], {}
    if sizes is not None and opset < 13:
        attrs["split"] = sizes
    elif sizes is not None:
        ins.append("split")
        inits["split"] = _i64(*sizes)
    if opset >= 18:
        attrs["num_outputs"] = n_out  # 6 into 4: sizes 2, 2, 2 ... the last part is smaller
    x_shape = (2, 6, 3) if opset < 18 else (2, 7, 3)
    model = graph_model([helper.make_node("Split", ins, outs, **attrs)],
                        {"x": (F32, x_shape)}, outs, opset=opset, initializers=inits)
    check_against_ort(model, {"x": randn(rng, *x_shape)})


@pytest.mark.parametrize("axis,indices", [(0, [2, 0, -1]), (1, [[1, 0], [-2, 3]]), (1, 2)])
def test_gather_static_indices(rng, axis, indices):
    model = graph_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=axis)],
                        {"x": (F32, (3, 4, 2))}, ["y"], opset=13,
                        initializers={"i": np.array(indices, "int64")})
    check_against_ort(model, {"x": randn(rng, 3, 4, 2)})


def test_gather_indices_from_a_graph_input(rng):
    model = graph_model([helper.make_node("Gather", ["x", "i"], ["y"], axis=0)],
                        {"x": (F32, (5, 3)), "i": (I64, (4,))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 5, 3), "i": np.array([4, -1, 0, -5])})


def test_slice_attribute_form_opset_9(rng):
    node = helper.make_node("Slice", ["x"], ["y"], starts=[1, 0], ends=[3, -1], axes=[0, 2])
    model = graph_model([node], {"x": (F32, (4, 3, 5))}, ["y"], opset=9)
    check_against_ort(model, {"x": randn(rng, 4, 3, 5)})


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1], [2**63 - 1], [1], None),
    ([-1, 0], [-2**63, 3], [0, 2], [-1, 2]),
    ([0, 1, 1], [10, -1, 4], None, [2, 1, 1]),
    ([3], [0], [-1], [-2]),
])
def test_slice_input_form_with_steps_and_huge_bounds(rng, starts, ends, axes, steps):
    ins, inits = ["x", "s", "e"], {"s": _i64(*starts), "e": _i64(*ends)}
    if axes is not None or steps is not None:
        ins.append("a")
        inits["a"] = _i64(*(axes if axes is not None else range(len(starts))))
    if steps is not None:
        ins.append("st")
        inits["st"] = _i64(*steps)
    model = graph_model([helper.make_node("Slice", ins, ["y"])], {"x": (F32, (4, 3, 5))},
                        ["y"], opset=13, initializers=inits)
    check_against_ort(model, {"x": randn(rng, 4, 3, 5)})


@pytest.mark.parametrize("opset", [11, 13])
def test_unsqueeze_and_squeeze_axes_attribute_then_input(rng, opset):
    if opset < 13:
        nodes = [helper.make_node("Unsqueeze", ["x"], ["u"], axes=[0, -1]),
                 helper.make_node("Squeeze", ["u"], ["y"], axes=[0])]
        inits = {}
    else:
        nodes = [helper.make_node("Unsqueeze", ["x", "ua"], ["u"]),
                 helper.make_node("Squeeze", ["u", "sa"], ["y"])]
        inits = {"ua": _i64(0, -1), "sa": _i64(0)}
    model = graph_model(nodes, {"x": (F32, (3, 4))}, ["u", "y"], opset=opset,
                        initializers=inits)
    out = check_against_ort(model, {"x": randn(rng, 3, 4)})
    assert out[0].shape == (1, 3, 4, 1) and out[1].shape == (3, 4, 1)


def test_squeeze_without_axes_drops_every_unit_dim(rng):
    model = graph_model([helper.make_node("Squeeze", ["x"], ["y"])],
                        {"x": (F32, (1, 3, 1, 2))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 1, 3, 1, 2)})


@pytest.mark.parametrize("op,opset,axes,keep", [
    ("ReduceMean", 11, [1], 1), ("ReduceMean", 13, [0, 2], 0), ("ReduceMean", 18, [-1], 1),
    ("ReduceSum", 11, [1], 0), ("ReduceSum", 13, [0, -1], 1), ("ReduceSum", 13, None, 0),
    ("ReduceMax", 13, [1], 1), ("ReduceMin", 18, [2], 0), ("ReduceProd", 13, [1], 1),
    ("ReduceL1", 13, [1], 1), ("ReduceL2", 13, [2], 0), ("ReduceSumSquare", 13, [0], 1),
    ("ReduceLogSumExp", 13, [1], 0), ("ReduceLogSum", 13, [1], 1),
])
def test_reductions_axes_attribute_or_input(rng, op, opset, axes, keep):
    as_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
    ins, inits, attrs = ["x"], {}, {"keepdims": keep}
    if axes is not None and as_input:
        ins.append("axes")
        inits["axes"] = _i64(*axes)
    elif axes is not None:
        attrs["axes"] = axes
    model = graph_model([helper.make_node(op, ins, ["y"], **attrs)],
                        {"x": (F32, (2, 3, 4))}, ["y"], opset=opset, initializers=inits)
    check_against_ort(model, {"x": np.abs(randn(rng, 2, 3, 4)) + 0.5}, rtol=1e-4)


def test_reduce_sum_noop_with_empty_axes(rng):
    node = helper.make_node("ReduceSum", ["x"], ["y"], noop_with_empty_axes=1)
    model = graph_model([node], {"x": (F32, (2, 3))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 2, 3)})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_argmax_gives_int64(rng, op):
    model = graph_model([helper.make_node(op, ["x"], ["y"], axis=1, keepdims=0)],
                        {"x": (F32, (3, 5))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 3, 5)})


def test_constant_and_constant_of_shape(rng):
    value = randn(rng, 3, 4)
    nodes = [helper.make_node("Constant", [], ["c"], value=helper.make_tensor(
                 "c", TensorProto.FLOAT, (3, 4), value.ravel())),
             helper.make_node("Constant", [], ["shape"], value_ints=[3, 4]),
             helper.make_node("ConstantOfShape", ["shape"], ["k"], value=helper.make_tensor(
                 "v", TensorProto.FLOAT, (1,), [2.5])),
             helper.make_node("Add", ["x", "c"], ["t"]),
             helper.make_node("Mul", ["t", "k"], ["y"])]
    model = graph_model(nodes, {"x": (F32, (3, 4))}, ["y"], opset=13)
    check_against_ort(model, {"x": randn(rng, 3, 4)})


def test_shape_gather_concat_reshape_chain_is_folded(rng):
    # the pattern PyTorch exports for x.view(x.size(0), -1)
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["target"], axis=0),
             helper.make_node("Reshape", ["x", "target"], ["y"])]
    inits = {"zero": np.array(0, "int64"), "ax": _i64(0), "minus1": _i64(-1)}
    model = graph_model(nodes, {"x": (F32, (2, 3, 4))}, ["y"], opset=13, initializers=inits)
    check_against_ort(model, {"x": randn(rng, 2, 3, 4)})
    from relay_ir.frontend import from_onnx

    mod, params = from_onnx(model)
    assert params == {}  # the integer initializers were folded away, not made parameters
    assert "reshape" in str(mod) and "Shape" not in str(mod)


@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-2, -1)])
def test_shape_start_end_opset_15(rng, start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    model = graph_model([helper.make_node("Shape", ["x"], ["y"], **attrs)],
                        {"x": (F32, (2, 3, 4))}, ["y"], opset=15)
    check_against_ort(model, {"x": randn(rng, 2, 3, 4)})


def test_expand_and_tile(rng):
    nodes = [helper.make_node("Expand", ["x", "shape"], ["e"]),
             helper.make_node("Tile", ["e", "reps"], ["y"])]
    model = graph_model(nodes, {"x": (F32, (3, 1))}, ["y"], opset=13,
                        initializers={"shape": _i64(2, 3, 4), "reps": _i64(1, 2, 1)})
    check_against_ort(model, {"x": randn(rng, 3, 1)})
