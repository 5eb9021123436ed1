"""relay_ir.frontend: importers from other model formats (ONNX).

    >>> from relay_ir.frontend import from_onnx
    >>> callable(from_onnx)
    True
"""

from relay_ir.frontend.onnx import OnnxImportError, UnsupportedOnnxOps, from_onnx, supported_ops

__all__ = ["OnnxImportError", "UnsupportedOnnxOps", "from_onnx", "supported_ops"]
