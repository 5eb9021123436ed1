"""relay_ir.frontend: importers from other model formats (ONNX).

    >>> from relay_ir.frontend import from_onnx
    >>> callable(from_onnx)
    True
"""

from relay_ir.frontend.onnx import (
    NonStaticInput,
    OnnxImportError,
    UnsupportedOnnxOps,
    from_onnx,
    supported_ops,
)
from tessel_errors import FrontendError

__all__ = ["FrontendError", "NonStaticInput", "OnnxImportError", "UnsupportedOnnxOps",
           "from_onnx", "supported_ops"]
