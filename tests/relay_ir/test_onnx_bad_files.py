"""from_onnx on files that are not good ONNX models, and converters that fail inside a
node: a FrontendError naming the file or the node, never a dependency's traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from relay_ir.frontend import from_onnx
from relay_ir.frontend.onnx_common import CONVERTERS
from tessel_errors import FrontendError


def _relu_model(path: Path) -> Path:
    import onnx
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="act")], "g", [x], [y])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def test_a_truncated_file_is_a_frontend_error_naming_it(tmp_path: Path) -> None:
    good = _relu_model(tmp_path / "good.onnx").read_bytes()
    bad = tmp_path / "cut.onnx"
    bad.write_bytes(good[: len(good) // 2])
    with pytest.raises(FrontendError, match=r"cut.onnx' is not a readable ONNX model"):
        from_onnx(str(bad))


def test_a_file_of_another_format_is_a_frontend_error(tmp_path: Path) -> None:
    bad = tmp_path / "notes.onnx"
    bad.write_bytes(b"\xff\xfe this is not protobuf " * 8)
    with pytest.raises(FrontendError, match="notes.onnx' is not a readable ONNX model"):
        from_onnx(bad)


def test_an_empty_file_is_a_frontend_error(tmp_path: Path) -> None:
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(FrontendError, match="empty.onnx' holds no ONNX graph"):
        from_onnx(tmp_path / "empty.onnx")


def test_a_missing_file_is_a_frontend_error(tmp_path: Path) -> None:
    with pytest.raises(FrontendError, match="no ONNX model at .*missing.onnx"):
        from_onnx(tmp_path / "missing.onnx")


def test_a_converter_failing_inside_a_node_names_the_node(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    def broken(conv, node):
        return [][node.index + 1]  # an IndexError, as a converter bug would raise
    monkeypatch.setitem(CONVERTERS, "Relu", broken)
    with pytest.raises(FrontendError, match=r'node "act" \(Relu, index 0\): cannot convert '
                                            r"it \(IndexError: list index out of range\)"):
        from_onnx(_relu_model(tmp_path / "m.onnx"))
