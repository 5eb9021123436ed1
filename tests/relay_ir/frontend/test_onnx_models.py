"""The model graphs the onnx wheel ships (onnx/backend/test/data/light/): each converts, type
inference succeeds, and the output type is the one the model declares. SqueezeNet, with
random weights in place of its constant ones, runs through the interpreter against
onnxruntime (slow)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import relay_ir
from relay_ir.frontend import from_onnx
from relay_ir.frontend.onnx_common import onnx_dtype
from relay_ir.ty import TensorType
from relay_ir.typing import infer_type
from tests.relay_ir.frontend.onnx_helpers import run_ort

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = sorted(f[len("light_"):-len(".onnx")] for f in os.listdir(LIGHT) if f.endswith(".onnx"))


def _load(name: str) -> onnx.ModelProto:
    return onnx.load(os.path.join(LIGHT, f"light_{name}.onnx"))


def _declared(vi: onnx.ValueInfoProto) -> TensorType:
    tt = vi.type.tensor_type
    return TensorType(tuple(d.dim_value for d in tt.shape.dim), onnx_dtype(tt.elem_type))


def test_the_wheel_ships_the_expected_models():
    assert {"resnet50", "squeezenet", "densenet121", "inception_v1", "vgg19",
            "shufflenet"} <= set(MODELS)


@pytest.mark.parametrize("name", MODELS)
def test_light_model_converts_and_types(name):
    model = _load(name)
    mod, params = from_onnx(model)
    inits = {i.name for i in model.graph.initializer}
    data = [i for i in model.graph.input if i.name not in inits]
    assert [p.name_hint for p in mod["main"].params[:len(data)]] == [i.name for i in data]
    assert all(isinstance(v, np.ndarray) for v in params.values())
    typed = infer_type(mod)
    assert typed["main"].checked_type.ret_type == _declared(model.graph.output[0])


def _with_random_weights(model: onnx.ModelProto, rng: np.random.Generator) -> onnx.ModelProto:
    """The light models make every weight with ConstantOfShape(0.02); make them initializers
    with random values, so that the outputs depend on the input (SqueezeNet has no
    batch-norm variances that would need to stay positive)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    shapes = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    keep, weights = [], []
    for n in out.graph.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in shapes:
            shape = tuple(int(d) for d in shapes[n.input[0]])
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            w = (rng.standard_normal(shape) / np.sqrt(fan_in)).astype("float32")
            weights.append(numpy_helper.from_array(w, n.output[0]))
        else:
            keep.append(n)
    del out.graph.node[:]
    out.graph.node.extend(keep)
    out.graph.initializer.extend(weights)
    return out


@pytest.mark.slow
def test_squeezenet_matches_onnxruntime_through_the_interpreter(rng):
    model = _with_random_weights(_load("squeezenet"), rng)
    mod, params = from_onnx(model)
    x = rng.standard_normal((1, 3, 224, 224)).astype("float32")
    ours = relay_ir.interpret(mod, data_0=x, **params)
    (ref,) = run_ort(model, {"data_0": x})
    assert ours.shape == ref.shape == (1, 1000, 1, 1)
    rel = np.abs(ours - ref).max() / np.abs(ref).max()
    assert rel < 1e-4, f"relative error {rel:.2e}"
    assert np.abs(ref - ref.mean()).max() > 1e-4  # random weights: not a flat softmax
