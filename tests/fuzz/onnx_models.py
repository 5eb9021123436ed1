"""Fuzz target: mutated ONNX models through from_onnx, then relay_ir.build on the CPU.

Seeds are tiny valid models built with onnx.helper (a conv net, a matmul chain, a mix of
shape ops). An input is either the serialized bytes damaged (truncated, bytes flipped,
garbage inserted) and loaded from a file, or a structured mutation of the ModelProto: an
input dropped or renamed, an attribute of the wrong type or an out-of-range value, a
cycle, nodes out of order, an initializer whose shape or data contradicts the graph, an
unknown op, a bad opset, a bad element type. A FrontendError that only wraps a converter's
own crash ("the Conv converter failed: IndexError ...") counts as a finding: it names the
node but not what is wrong.

    >>> import numpy as np
    >>> description, thunk = one_input(np.random.default_rng(0))
    >>> isinstance(description, str) and callable(thunk)
    True
"""

from __future__ import annotations

import copy
import functools
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper

import relay_ir
from relay_ir.frontend import from_onnx
from tessel_errors import FrontendError

NAME = "onnx_models"

F = TensorProto.FLOAT
I64 = TensorProto.INT64


def _init(name: str, value: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _model(nodes: list, inputs: list, outputs: list, inits: list,
           opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _conv_net() -> onnx.ModelProto:
    r = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", kernel_shape=[3, 3],
                         pads=[1, 1, 1, 1], strides=[1, 1], dilations=[1, 1], group=1),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["p"], name="pool", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("BatchNormalization", ["p", "s", "bb", "m", "v"], ["n"], name="bn",
                         epsilon=1e-5),
        helper.make_node("Flatten", ["n"], ["f"], name="flatten", axis=1),
        helper.make_node("Gemm", ["f", "w2", "b2"], ["g"], name="fc", transB=1, alpha=1.0),
        helper.make_node("Softmax", ["g"], ["y"], name="softmax", axis=-1),
    ]
    inits = [_init("w", r.standard_normal((3, 2, 3, 3)).astype(np.float32)),
             _init("b", np.zeros(3, np.float32)), _init("s", np.ones(3, np.float32)),
             _init("bb", np.zeros(3, np.float32)), _init("m", np.zeros(3, np.float32)),
             _init("v", np.ones(3, np.float32)),
             _init("w2", r.standard_normal((4, 27)).astype(np.float32)),
             _init("b2", np.zeros(4, np.float32))]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, 2, 6, 6])],
                  [helper.make_tensor_value_info("y", F, [1, 4])], inits)


def _matmul_chain() -> onnx.ModelProto:
    r = np.random.default_rng(1)
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["mm"], name="matmul"),
        helper.make_node("Add", ["mm", "b"], ["a"], name="add"),
        helper.make_node("Transpose", ["a"], ["t"], name="transpose", perm=[1, 0]),
        helper.make_node("Reshape", ["t", "shape"], ["rs"], name="reshape"),
        helper.make_node("Concat", ["rs", "rs"], ["cc"], name="concat", axis=0),
        helper.make_node("ReduceMean", ["cc"], ["rm"], name="mean", axes=[1], keepdims=1),
        helper.make_node("LeakyRelu", ["rm"], ["y"], name="leaky", alpha=0.1),
    ]
    inits = [_init("w", r.standard_normal((3, 4)).astype(np.float32)),
             _init("b", np.zeros(4, np.float32)),
             _init("shape", np.array([2, 4], np.int64))]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [2, 3])],
                  [helper.make_tensor_value_info("y", F, [4, 1])], inits)


def _shape_ops() -> onnx.ModelProto:
    nodes = [
        helper.make_node("Unsqueeze", ["x", "ax0"], ["u"], name="unsqueeze"),
        helper.make_node("Slice", ["u", "starts", "ends", "axes"], ["sl"], name="slice"),
        helper.make_node("Gather", ["sl", "idx"], ["ga"], name="gather", axis=2),
        helper.make_node("Squeeze", ["ga", "ax0"], ["sq"], name="squeeze"),
        helper.make_node("Cast", ["sq"], ["ca"], name="cast", to=TensorProto.FLOAT16),
        helper.make_node("Cast", ["ca"], ["cb"], name="cast_back", to=F),
        helper.make_node("Pad", ["cb", "pads"], ["pd"], name="pad", mode="constant"),
        helper.make_node("Clip", ["pd", "lo", "hi"], ["cl"], name="clip"),
        helper.make_node("Shape", ["cl"], ["sh"], name="shape"),
        helper.make_node("ConstantOfShape", ["sh"], ["z"], name="zeros",
                         value=helper.make_tensor("v", F, [1], [0.5])),
        helper.make_node("Add", ["cl", "z"], ["s"], name="add"),
        helper.make_node("Split", ["s"], ["y0", "y1"], name="split", axis=1),
        helper.make_node("Mul", ["y0", "y1"], ["y"], name="mul"),
    ]
    inits = [_init("ax0", np.array([0], np.int64)), _init("starts", np.array([0], np.int64)),
             _init("ends", np.array([2], np.int64)), _init("axes", np.array([1], np.int64)),
             _init("idx", np.array([0, 2], np.int64)),
             _init("pads", np.array([0, 1, 0, 1], np.int64)),
             _init("lo", np.array(-1, np.float32)), _init("hi", np.array(1, np.float32))]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [3, 4])],
                  [helper.make_tensor_value_info("y", F, None)], inits)


def _window_ops() -> onnx.ModelProto:
    r = np.random.default_rng(2)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv1d", kernel_shape=[3],
                         auto_pad="SAME_UPPER"),
        helper.make_node("InstanceNormalization", ["c", "s", "b"], ["n"], name="inorm"),
        helper.make_node("AveragePool", ["n"], ["p"], name="avg", kernel_shape=[2],
                         strides=[2], count_include_pad=0),
        helper.make_node("Unsqueeze", ["p", "ax"], ["u"], name="unsq"),
        helper.make_node("DepthToSpace", ["u"], ["d"], name="d2s", blocksize=2),
        helper.make_node("GlobalMaxPool", ["d"], ["g"], name="gmax"),
        helper.make_node("Trilu", ["g"], ["t"], name="trilu", upper=0),
        helper.make_node("Hardmax", ["t"], ["y"], name="hardmax", axis=1),
    ]
    inits = [_init("w", r.standard_normal((4, 2, 3)).astype(np.float32)),
             _init("s", np.ones(4, np.float32)), _init("b", np.zeros(4, np.float32)),
             _init("ax", np.array([3], np.int64))]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [1, 2, 8])],
                  [helper.make_tensor_value_info("y", F, None)], inits)


def _select_ops() -> onnx.ModelProto:
    nodes = [
        helper.make_node("ArgMax", ["x"], ["am"], name="argmax", axis=1, keepdims=1),
        helper.make_node("Range", ["zero", "four", "one"], ["rg"], name="range"),
        helper.make_node("Equal", ["am", "rg"], ["eq"], name="equal"),
        helper.make_node("Expand", ["x", "eshape"], ["ex"], name="expand"),
        helper.make_node("Where", ["eq", "ex", "x"], ["wh"], name="where"),
        helper.make_node("Tile", ["wh", "reps"], ["ti"], name="tile"),
        helper.make_node("Pow", ["ti", "two"], ["pw"], name="pow"),
        helper.make_node("Sqrt", ["pw"], ["sq"], name="sqrt"),
        helper.make_node("ReduceSum", ["sq", "rax"], ["rs"], name="rsum", keepdims=0),
        helper.make_node("LayerNormalization", ["rs", "g", "b"], ["y"], name="lnorm",
                         axis=-1, epsilon=1e-5),
    ]
    inits = [_init("zero", np.array(0, np.int64)), _init("four", np.array(4, np.int64)),
             _init("one", np.array(1, np.int64)), _init("eshape", np.array([3, 4], np.int64)),
             _init("reps", np.array([2, 1], np.int64)), _init("two", np.array(2, np.float32)),
             _init("rax", np.array([0], np.int64)), _init("g", np.ones(4, np.float32)),
             _init("b", np.zeros(4, np.float32))]
    return _model(nodes, [helper.make_tensor_value_info("x", F, [3, 4])],
                  [helper.make_tensor_value_info("y", F, None)], inits)


SEEDS: dict[str, Callable[[], onnx.ModelProto]] = {
    "conv_net": _conv_net, "matmul_chain": _matmul_chain, "shape_ops": _shape_ops,
    "window_ops": _window_ops, "select_ops": _select_ops}


@functools.cache
def _seed_bytes(name: str) -> bytes:
    return SEEDS[name]().SerializeToString()


@functools.cache
def _scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix="tessel-fuzz-onnx-"))


def one_input(rng: np.random.Generator) -> tuple[str, Callable[[], object]]:
    """A mutated seed model and a thunk that imports it and builds it for the CPU."""
    name = sorted(SEEDS)[int(rng.integers(len(SEEDS)))]
    if rng.random() < 0.3:
        data, what = _damage_bytes(rng, _seed_bytes(name))

        def from_file() -> object:
            path = _scratch() / "model.onnx"
            path.write_bytes(data)
            return _import_and_build(path)
        return f"{name}; {what}", from_file
    model = onnx.ModelProto()
    model.ParseFromString(_seed_bytes(name))
    steps = [name]
    for _ in range(int(rng.integers(1, 3))):
        mutate = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
        steps.append(mutate(rng, model))
    return "; ".join(steps), lambda: _import_and_build(model)


def _import_and_build(model_or_path: object) -> object:
    try:
        mod, params = from_onnx(model_or_path)
    except FrontendError as e:
        if "converter failed" in str(e) and e.__cause__ is not None:
            raise e.__cause__ from None  # a converter's own crash: a finding
        raise
    return relay_ir.build(mod, target="llvm", params=params)


# --- byte-level damage ------------------------------------------------------------------------


def _damage_bytes(rng: np.random.Generator, data: bytes) -> tuple[bytes, str]:
    kind = int(rng.integers(4))
    if kind == 0:
        cut = int(rng.integers(len(data)))
        return data[:cut], f"truncated to {cut} of {len(data)} bytes"
    buf = bytearray(data)
    if kind == 1:
        spots = [int(rng.integers(len(buf))) for _ in range(int(rng.integers(1, 6)))]
        for k in spots:
            buf[k] ^= 1 << int(rng.integers(8))
        return bytes(buf), f"bits flipped at {spots}"
    if kind == 2:
        at, n = int(rng.integers(len(buf))), int(rng.integers(1, 16))
        buf[at:at] = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        return bytes(buf), f"{n} random bytes inserted at {at}"
    return rng.integers(0, 256, int(rng.integers(0, 64)), dtype=np.uint8).tobytes(), "garbage"


# --- structured mutations (each edits the model in place and says what it did) ---------


def _node(rng: np.random.Generator, model: onnx.ModelProto) -> onnx.NodeProto:
    return model.graph.node[int(rng.integers(len(model.graph.node)))]


def drop_input(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    node = _node(rng, model)
    if not node.input:
        return f"no input to drop at {node.name}"
    k = int(rng.integers(len(node.input)))
    if rng.random() < 0.5:
        del node.input[k]
        return f"input {k} of {node.name} removed"
    node.input[k] = ""
    return f"input {k} of {node.name} left empty"


def rename_input(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    node = _node(rng, model)
    if not node.input:
        return f"no input to rename at {node.name}"
    k = int(rng.integers(len(node.input)))
    node.input[k] = "nowhere"
    return f"input {k} of {node.name} renamed to an undefined value"


_ODD_INTS = (7, -7, 0, -1, 2, 100, 2**31, -2**31, 2**63 - 1, -2**63)


def attr_wrong_type(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    node = _node(rng, model)
    if not node.attribute:
        return f"no attribute at {node.name}"
    a = node.attribute[int(rng.integers(len(node.attribute)))]
    choices = [
        helper.make_attribute(a.name, 1.5), helper.make_attribute(a.name, 3),
        helper.make_attribute(a.name, "same"), helper.make_attribute(a.name, [1, 2, 3]),
        helper.make_attribute(a.name, [0.5, 2.0]), helper.make_attribute(a.name, ["a", "b"]),
        helper.make_attribute(a.name, helper.make_tensor("t", F, [2], [1.0, 2.0])),
        AttributeProto(name=a.name, type=AttributeProto.INTS),  # an empty list
    ]
    new = choices[int(rng.integers(len(choices)))]
    if new.type == a.type:
        return f"attribute {node.name}.{a.name} kept its type"
    a.CopyFrom(new)
    return f"attribute {node.name}.{a.name} retyped to {AttributeProto.AttributeType.Name(a.type)}"


def attr_bad_value(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    node = _node(rng, model)
    ints = [a for a in node.attribute if a.type in (AttributeProto.INT, AttributeProto.INTS,
                                                    AttributeProto.FLOAT)]
    if not ints:
        return f"no numeric attribute at {node.name}"
    a = ints[int(rng.integers(len(ints)))]
    v = _ODD_INTS[int(rng.integers(len(_ODD_INTS)))]
    if a.type == AttributeProto.INT:
        a.i = v
    elif a.type == AttributeProto.FLOAT:
        a.f = float(("nan", "inf", "-inf", "-1", "0", "1e30")[int(rng.integers(6))])
        v = a.f
    elif rng.random() < 0.5 and a.ints:
        a.ints[int(rng.integers(len(a.ints)))] = v
    else:
        n = int(rng.integers(0, 6))
        del a.ints[:]
        a.ints.extend([v] * n)
        v = [v] * n
    return f"attribute {node.name}.{a.name} set to {v}"


def add_attr(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    node = _node(rng, model)
    name = ("axis", "perm", "kernel_shape", "bogus", "to", "group")[int(rng.integers(6))]
    if any(a.name == name for a in node.attribute):
        return f"{node.name} already has {name}"
    node.attribute.append(helper.make_attribute(name, _ODD_INTS[int(rng.integers(4))]))
    return f"attribute {name} added to {node.name}"


def make_cycle(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    nodes = model.graph.node
    i = int(rng.integers(len(nodes)))
    j = int(rng.integers(i, len(nodes)))
    if not nodes[i].input or not nodes[j].output:
        return f"no input at {nodes[i].name} to close a cycle"
    nodes[i].input[0] = nodes[j].output[0]
    return f"cycle: {nodes[i].name} reads the output of {nodes[j].name}"


def shuffle_nodes(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    nodes = list(model.graph.node)
    order = rng.permutation(len(nodes))
    del model.graph.node[:]
    model.graph.node.extend(nodes[k] for k in order)
    return f"nodes reordered {order.tolist()}"


def contradict_initializer(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    inits = model.graph.initializer
    init = inits[int(rng.integers(len(inits)))]
    kind = int(rng.integers(4))
    if kind == 0:  # also listed as a graph input, with another shape
        dims = [int(d) + 1 for d in init.dims] or [2]
        model.graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, dims))
        return f"initializer {init.name} also a graph input of shape {dims}"
    if kind == 1:  # dims that its data does not fill
        init.dims.append(int(rng.integers(2, 5)))
        return f"initializer {init.name} given an extra dim ({list(init.dims)})"
    if kind == 2:
        init.data_type = int((TensorProto.STRING, 0, 999, TensorProto.COMPLEX64,
                              TensorProto.INT8)[int(rng.integers(5))])
        return f"initializer {init.name} data_type set to {init.data_type}"
    del init.dims[:]
    init.dims.extend([0])
    return f"initializer {init.name} made empty-shaped but not empty"


def bad_graph_input(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    vi = model.graph.input[0]
    kind = int(rng.integers(4))
    tt = vi.type.tensor_type
    if kind == 0:
        tt.elem_type = int((TensorProto.STRING, 0, 999, TensorProto.BOOL,
                            TensorProto.INT64)[int(rng.integers(5))])
        return f"graph input elem_type set to {tt.elem_type}"
    if kind == 1:
        tt.ClearField("shape")
        return "graph input shape removed"
    if kind == 2 and tt.shape.dim:
        d = tt.shape.dim[int(rng.integers(len(tt.shape.dim)))]
        d.dim_value = int((0, 1, 7)[int(rng.integers(3))])
        return f"graph input dim set to {d.dim_value}"
    tt.shape.dim.add().dim_value = 2
    return "graph input given an extra dim"


def unknown_op(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    node = _node(rng, model)
    if rng.random() < 0.5:
        node.op_type = ("NoSuchOp", "conv", "Loop", "")[int(rng.integers(4))]
        return f"{node.name} op_type set to {node.op_type!r}"
    node.domain = "com.example"
    return f"{node.name} moved to domain com.example"


def bad_opset(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    v = int((0, 1, 7, 11, 12, 13, 18, 21, 999)[int(rng.integers(9))])
    model.opset_import[0].version = v
    return f"opset set to {v}"


def bad_outputs(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    kind = int(rng.integers(3))
    if kind == 0:
        del model.graph.output[:]
        return "graph outputs removed"
    if kind == 1 and model.graph.output:
        model.graph.output[0].name = "nowhere"
        return "graph output renamed to an undefined value"
    node = _node(rng, model)
    other = _node(rng, model)
    if not node.output or not other.output:
        return "no output to share"
    node.output[0] = other.output[0]
    return f"{node.name} writes the output of {other.name} too"


def odd_static_value(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    """An integer initializer (a shape, axes, pads, indices) given odd values or length."""
    ints = [t for t in model.graph.initializer if t.data_type == I64]
    if not ints:
        return "no integer initializer"
    init = ints[int(rng.integers(len(ints)))]
    try:
        value = numpy_helper.to_array(init).copy()
    except ValueError:  # an earlier mutation left its data and dims at odds
        value = np.zeros(0, np.int64)
    if rng.random() < 0.3 or value.size == 0:
        value = np.array([_ODD_INTS[int(rng.integers(len(_ODD_INTS)))]] *
                         int(rng.integers(0, 6)), np.int64)
    else:
        flat = value.reshape(-1)
        flat[int(rng.integers(flat.size))] = _ODD_INTS[int(rng.integers(len(_ODD_INTS)))]
    init.CopyFrom(numpy_helper.from_array(value, init.name))
    return f"initializer {init.name} set to {value.tolist()}"


def copy_node(rng: np.random.Generator, model: onnx.ModelProto) -> str:
    node = copy.deepcopy(_node(rng, model))
    at = int(rng.integers(len(model.graph.node) + 1))
    model.graph.node.insert(at, node)
    return f"{node.name} duplicated at {at}"


MUTATIONS = (drop_input, rename_input, attr_wrong_type, attr_wrong_type, attr_bad_value,
             attr_bad_value, attr_bad_value, add_attr, make_cycle, shuffle_nodes,
             contradict_initializer, contradict_initializer, bad_graph_input, unknown_op,
             bad_opset, bad_outputs, copy_node, odd_static_value, odd_static_value)
