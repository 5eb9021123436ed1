"""benchmarks.vm_static at a tiny size: the static and the `?`-batch model on the VM and
the graph executor are checked against ORT and timed; no timing checked."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from benchmarks.vm_static import main, question_mark_batch  # noqa: E402
from tests.e2e.onnx_models import resnet18  # noqa: E402


def test_tiny_resnet18_runs_on_every_system_beside_ort(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    out = main(["--models", "resnet18", "--image", "32", "--width", "8", "--rounds", "2",
                "--repeat", "1"])
    assert set(out["resnet18"]) == {"graph", "vm static", "vm ?-batch", "onnxruntime"}
    assert all(v > 0 for v in out["resnet18"].values())
    assert "x graph" in capsys.readouterr().out


def test_the_question_mark_copy_leaves_the_model_as_it_was() -> None:
    model = resnet18(image=32, width=8, classes=10)
    dyn = question_mark_batch(model)
    assert dyn.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "N"
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 1


def test_the_question_mark_copy_keeps_weights_listed_as_inputs_and_unshaped_outputs() -> None:
    # light_resnet50 lists its initializers among the graph inputs and gives its output no
    # shape: only the data's batch becomes `?`
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(np.ones((4, 3), "float32"), "w")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    dyn = question_mark_batch(helper.make_model(graph))
    x, wi = dyn.graph.input
    assert x.type.tensor_type.shape.dim[0].dim_param == "N"
    assert [d.dim_value for d in wi.type.tensor_type.shape.dim] == [4, 3]
