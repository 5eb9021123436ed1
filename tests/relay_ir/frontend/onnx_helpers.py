"""Shared helpers of the ONNX frontend tests: build a one-graph model, run it both ways.

    model = graph_model([helper.make_node("Relu", ["x"], ["y"])],
                        inputs={"x": ("float32", (2, 3))}, outputs=["y"], opset=13)
    ours, ref = run_both(model, {"x": rng.standard_normal((2, 3), dtype=np.float32)})
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
from onnx import helper, numpy_helper

import relay_ir
from relay_ir.frontend import from_onnx


def graph_model(nodes: Sequence[onnx.NodeProto], inputs: Mapping[str, tuple[str, Any]],
                outputs: Sequence[str], opset: int = 17,
                initializers: Mapping[str, np.ndarray] | None = None) -> onnx.ModelProto:
    """A model of `nodes`; inputs name -> (dtype, shape or None); outputs typed by inference."""
    ins = [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(np.dtype(dt)), shape) for n, (dt, shape) in
        inputs.items()]
    outs = [onnx.ValueInfoProto(name=n) for n in outputs]  # typed by shape inference below
    inits = [numpy_helper.from_array(np.asarray(v), n) for n, v in (initializers or {}).items()]
    graph = helper.make_graph(list(nodes), "test", ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset <= 17 else 10  # what onnxruntime accepts for that opset
    inferred = onnx.shape_inference.infer_shapes(model)
    del model.graph.output[:]
    model.graph.output.extend(inferred.graph.output)
    return model


def run_ours(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Convert with from_onnx and run through the relay interpreter; one array per output."""
    mod, params = from_onnx(model)
    out = relay_ir.interpret(mod, **feeds, **params)
    return [np.asarray(o) for o in (out if len(model.graph.output) > 1 else (out,))]


def run_ort(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Run the model with onnxruntime on the CPU."""
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, dict(feeds))


def run_both(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> tuple[list, list]:
    """(ours, onnxruntime's) outputs for the same feeds."""
    return run_ours(model, feeds), run_ort(model, feeds)


def check_against_ort(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray],
                      rtol: float = 1e-5, atol: float = 1e-5) -> list[np.ndarray]:
    """Assert every output matches onnxruntime (values, shape, dtype); returns ours."""
    ours, ref = run_both(model, feeds)
    assert len(ours) == len(ref)
    for k, (a, b) in enumerate(zip(ours, ref)):
        assert a.shape == b.shape, f"output {k}: shape {a.shape} vs onnxruntime {b.shape}"
        assert a.dtype == b.dtype, f"output {k}: dtype {a.dtype} vs onnxruntime {b.dtype}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=f"output {k}")
    return ours


def randn(rng: np.random.Generator, *shape: int, dtype: str = "float32") -> np.ndarray:
    """Standard normal samples of `shape`."""
    return rng.standard_normal(shape).astype(dtype)
