"""Shared pieces of the ONNX frontend: errors, the node view, the converter registry, dtypes.

A converter is a plain function `convert(ctx, node) -> Expr | list[Expr]` registered for one
ONNX op type with `@converter("Relu")`; it reads the node's attributes with `node.attr`,
its inputs through the conversion context (`ctx.input(node, 0)`, `ctx.static(node, 1)`)
and returns one relay expression per ONNX output it produces.

    >>> import relay_ir.frontend.onnx   # importing the frontend fills the registry
    >>> from relay_ir.frontend.onnx_common import CONVERTERS
    >>> CONVERTERS["Relu"].__module__
    'relay_ir.frontend.onnx_nn_ops'
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tessel_errors import FrontendError, RelayError


class OnnxImportError(FrontendError):
    """An ONNX model could not be converted (bad model, non-static input, bad attribute)."""


class UnsupportedOnnxOps(OnnxImportError):
    """The model uses op types the frontend has no converter for; lists each with its first node.

    `unsupported` maps each op type to (node name, node index) of its first use.
    """

    def __init__(self, message: str, unsupported: dict[str, tuple[str, int]]) -> None:
        super().__init__(message)
        self.unsupported = unsupported


class NonStaticInput(OnnxImportError):
    """A node needs an input's value at conversion time (a shape, axes, pads), but the
    value depends on graph inputs."""


# op type -> converter(ctx, node) -> Expr | list[Expr]
CONVERTERS: dict[str, Callable[..., Any]] = {}


def converter(*op_types: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a converter for one or more ONNX op types (default domain).

    >>> @converter("MyIdentityForDocs")
    ... def _conv(ctx, node):
    ...     return ctx.input(node, 0)
    >>> CONVERTERS.pop("MyIdentityForDocs") is _conv
    True
    """

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise RelayError(f"ONNX converter for {op_type} is registered twice")
            CONVERTERS[op_type] = fn
        return fn

    return register


def _attr_value(attr: Any) -> Any:
    """A Python value of an AttributeProto (tensors as numpy, strings as str)."""
    from onnx import AttributeProto, helper, numpy_helper

    if attr.type == AttributeProto.TENSOR:
        return numpy_helper.to_array(attr.t)
    if attr.type == AttributeProto.TENSORS:
        return [numpy_helper.to_array(t) for t in attr.tensors]
    value = helper.get_attribute_value(attr)
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode("utf-8") for v in value]
    return value


@dataclass(frozen=True, slots=True, eq=False)
class OnnxNode:
    """One ONNX node seen by a converter: op type, inputs/outputs by name, attrs, opset."""

    op_type: str
    name: str
    index: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    opset: int
    attrs: dict[str, Any] = field(default_factory=dict)

    @staticmethod
    def from_proto(proto: Any, index: int, opset: int) -> OnnxNode:
        """Wrap a NodeProto (attributes decoded once)."""
        node = OnnxNode(proto.op_type, proto.name, index, tuple(proto.input),
                        tuple(proto.output), opset)
        for a in proto.attribute:
            try:
                node.attrs[a.name] = _attr_value(a)
            except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
                raise node.error(f"attribute {a.name!r} cannot be read: {e}") from None
        return node

    def where(self) -> str:
        """'node "conv1" (Conv, index 3)': how errors name this node."""
        label = f'"{self.name}"' if self.name else "<unnamed>"
        return f"node {label} ({self.op_type}, index {self.index})"

    def has_subgraphs(self) -> bool:
        """Whether an attribute holds a graph (If branches, a Loop or Scan body)."""
        from onnx import GraphProto

        return any(isinstance(v, GraphProto) for v in self.attrs.values())

    def attr(self, name: str, default: Any = None) -> Any:
        """An attribute's value, or `default` when the node does not set it."""
        return self.attrs.get(name, default)

    def ints(self, name: str, default: Sequence[int] | None = None) -> list[int] | None:
        """An ints attribute as a list (or `default`)."""
        v = self.attrs.get(name)
        return list(default) if v is None and default is not None else (
            None if v is None else [int(x) for x in v])

    def error(self, message: str) -> OnnxImportError:
        """An OnnxImportError that names this node."""
        return OnnxImportError(f"{self.where()}: {message}")


def onnx_dtype(elem_type: int, where: str = "") -> str:
    """The relay dtype name of an ONNX TensorProto element type.

    >>> onnx_dtype(1), onnx_dtype(7)
    ('float32', 'int64')
    """
    from onnx import TensorProto, helper

    if elem_type == TensorProto.BFLOAT16:
        return "bfloat16"
    try:
        np_dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    except (KeyError, ValueError):
        np_dtype = None
    if np_dtype is None or np.dtype(np_dtype).kind not in "biuf":
        name = TensorProto.DataType.Name(elem_type) if elem_type in TensorProto.DataType.values() \
            else str(elem_type)
        raise OnnxImportError(f"{where}: element type {name} is not supported "
                              f"(legal: bool, integers, float16/32/64, bfloat16)")
    return np.dtype(np_dtype).name


def normalize_axis(axis: int, ndim: int, node: OnnxNode, what: str = "axis") -> int:
    """`axis` in [0, ndim), accepting negative values, or an error naming the node."""
    if not -ndim <= axis < ndim:
        raise node.error(f"{what} {axis} is out of range for rank {ndim} "
                         f"(legal: {-ndim}..{ndim - 1})")
    return axis % ndim
