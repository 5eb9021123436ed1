"""benchmarks.onnx_torch: the torch port of an ONNX CNN computes what ONNX Runtime does."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from tessel_errors import TesselError
from tests.e2e.onnx_models import mobilenet_v2, resnet18

torch = pytest.importorskip("torch", reason="torch is not installed (CI does not install it)")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from benchmarks.onnx_torch import to_torch  # noqa: E402


def _check(model: object, shape: tuple[int, ...], jit: bool = False) -> None:
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    want = sess.run(None, {"input": x})[0]
    net = to_torch(model)
    with torch.no_grad():
        got = net(torch.from_numpy(x)).numpy()
        if jit:
            got_jit = torch.jit.freeze(torch.jit.trace(net, torch.from_numpy(x)))(
                torch.from_numpy(x)).numpy()
            np.testing.assert_allclose(got_jit, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")
def test_resnet18_matches_onnxruntime() -> None:
    _check(resnet18(image=32, width=8, classes=10), (1, 3, 32, 32), jit=True)


def test_mobilenet_v2_matches_onnxruntime() -> None:
    _check(mobilenet_v2(image=32, width=8, classes=10), (1, 3, 32, 32))


def _graph(nodes: list, inits: dict[str, np.ndarray], out_shape: list[int]) -> object:
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 2, 9, 9])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_asymmetric_pads_average_pool_and_plain_gemm() -> None:
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["input", "w", "b"], ["c"], kernel_shape=[2, 2],
                         pads=[0, 0, 1, 1], dilations=[1, 1]),
        helper.make_node("MaxPool", ["c"], ["m"], kernel_shape=[2, 2], strides=[2, 2],
                         pads=[1, 0, 0, 1]),
        helper.make_node("AveragePool", ["m"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Flatten", ["a"], ["f"]),
        helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], alpha=0.5, beta=2.0),
    ]
    inits = {"w": rng.standard_normal((3, 2, 2, 2)), "b": rng.standard_normal(3),
             "fw": rng.standard_normal((75, 4)), "fb": rng.standard_normal(4)}
    _check(_graph(nodes, inits, [1, 4]), (1, 2, 9, 9))


def test_unsupported_node_is_named() -> None:
    model = _graph([helper.make_node("Sigmoid", ["input"], ["y"], name="sig0")], {},
                   [1, 2, 9, 9])
    with pytest.raises(TesselError, match="unsupported node Sigmoid 'sig0'"):
        to_torch(model)


@pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")
def test_sum_of_three_inputs_as_resnet50s_export_has_it() -> None:
    nodes = [helper.make_node("Relu", ["input"], ["r"]),
             helper.make_node("Add", ["input", "r"], ["a"]),
             helper.make_node("Sum", ["input", "r", "a"], ["y"])]
    _check(_graph(nodes, {}, [1, 2, 9, 9]), (1, 2, 9, 9), jit=True)


def test_reshape_to_a_constant_shape_copies_zero_dims_and_infers_minus_one() -> None:
    nodes = [helper.make_node("Reshape", ["input", "shape"], ["r"]),
             helper.make_node("Relu", ["r"], ["y"])]
    model = _graph(nodes, {}, [1, 162])
    model.graph.initializer.append(numpy_helper.from_array(np.array([0, -1], np.int64), "shape"))
    _check(model, (1, 2, 9, 9))


@pytest.mark.filterwarnings("ignore:`torch.jit:DeprecationWarning")
def test_torch_runners_include_onednn_peer_that_matches_onnxruntime() -> None:
    from benchmarks.tuned_model import torch_runners

    model = resnet18(image=32, width=8, classes=10)
    x = np.random.default_rng(11).standard_normal((1, 3, 32, 32)).astype(np.float32)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"input": x})[0]
    runners = torch_runners(model, x, 1)
    assert set(runners) == {"torch eager", "torch jit", "torch oneDNN"}
    np.testing.assert_allclose(runners["torch oneDNN"](), want, rtol=1e-4,
                               atol=1e-4 * np.abs(want).max())
