"""An ONNX CNN as a torch.nn.Module with the same weights, so that a benchmark can time
PyTorch on exactly the model Tessel and ONNX Runtime run.

    >>> from tests.e2e.onnx_models import resnet18
    >>> net = to_torch(resnet18(image=32, width=8, classes=10))   # doctest: +SKIP
    >>> net(torch.randn(1, 3, 32, 32)).shape                       # doctest: +SKIP
    torch.Size([1, 10])

Covers the node types of the CNN builders in tests/e2e/onnx_models.py (ResNet-18,
MobileNetV2): Conv (groups, dilations, explicit pads), BatchNormalization (inference),
Relu, Clip (constant bounds), Add, MaxPool, AveragePool, GlobalAveragePool, Flatten, Gemm.
Each node becomes the torch layer a hand-written model would use (nn.Conv2d,
nn.BatchNorm2d in eval mode, ...), and the module runs them in graph order, so it traces
with torch.jit.trace. Another node type raises a TesselError naming it and the node.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper
from torch import nn

from tessel_errors import TesselError


class Add(nn.Module):
    """Elementwise sum (numpy broadcasting, as ONNX Add)."""

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b


class Sum(nn.Module):
    """Elementwise sum of any number of inputs (numpy broadcasting, as ONNX Sum)."""

    def forward(self, first: torch.Tensor, *rest: torch.Tensor) -> torch.Tensor:
        for t in rest:
            first = first + t
        return first


class Reshape(nn.Module):
    """ONNX Reshape to a constant shape: 0 copies the input's dim (unless allowzero), -1 is
    inferred."""

    def __init__(self, shape: list[int], allowzero: bool) -> None:
        super().__init__()
        self.shape, self.allowzero = shape, allowzero

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dims = [x.shape[i] if d == 0 and not self.allowzero else d
                for i, d in enumerate(self.shape)]
        return x.reshape(dims)


class Pad(nn.Module):
    """Asymmetric spatial padding in front of a layer that only pads symmetrically."""

    def __init__(self, pads: list[int], value: float, layer: nn.Module) -> None:
        super().__init__()
        top, left, bottom, right = pads
        self.pads = (left, right, top, bottom)
        self.value = value
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(nn.functional.pad(x, self.pads, value=self.value))


class OnnxModule(nn.Module):
    """Layers in graph order; `steps` says which tensors each one reads and writes."""

    def __init__(self, layers: list[nn.Module], steps: list[tuple[list[str], str]],
                 inputs: list[str], outputs: list[str]) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.steps = steps
        self.inputs = inputs
        self.outputs = outputs

    def forward(self, *xs: torch.Tensor) -> Any:
        env = dict(zip(self.inputs, xs))
        for layer, (args, out) in zip(self.layers, self.steps):
            env[out] = layer(*(env[a] for a in args))
        res = [env[o] for o in self.outputs]
        return res[0] if len(res) == 1 else tuple(res)


def _tensor(arr: np.ndarray) -> torch.Tensor:
    return torch.tensor(np.asarray(arr, dtype=np.float32))  # a copy: initializers are read-only


def _spatial_pads(node: NodeProto, at: dict[str, Any], k: int) -> list[int]:
    if at.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise TesselError(f"onnx_to_torch: {node.op_type} node {node.name!r}: auto_pad "
                          f"{at['auto_pad']!r} is not supported; give explicit pads")
    pads = list(at.get("pads", [0] * 2 * k))
    if k != 2:
        raise TesselError(f"onnx_to_torch: {node.op_type} node {node.name!r}: only 2-D is "
                          f"supported, got {k} spatial axes")
    return pads


def _conv(node: NodeProto, at: dict[str, Any], w: np.ndarray, b: np.ndarray | None
          ) -> nn.Module:
    cout, cin_g, kh, kw = w.shape
    groups = int(at.get("group", 1))
    pads = _spatial_pads(node, at, 2)
    sym = pads[:2] == pads[2:]
    conv = nn.Conv2d(cin_g * groups, cout, (kh, kw), stride=tuple(at.get("strides", [1, 1])),
                     padding=tuple(pads[:2]) if sym else 0,
                     dilation=tuple(at.get("dilations", [1, 1])), groups=groups,
                     bias=b is not None)
    conv.weight.data = _tensor(w)
    if b is not None:
        conv.bias.data = _tensor(b)
    return conv if sym else Pad(pads, 0.0, conv)


def _batch_norm(at: dict[str, Any], scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
                var: np.ndarray) -> nn.Module:
    bn = nn.BatchNorm2d(scale.shape[0], eps=float(at.get("epsilon", 1e-5)))
    bn.weight.data, bn.bias.data = _tensor(scale), _tensor(bias)
    bn.running_mean.data, bn.running_var.data = _tensor(mean), _tensor(var)
    return bn.eval()


def _pool(node: NodeProto, at: dict[str, Any]) -> nn.Module:
    k = tuple(at["kernel_shape"])
    pads = _spatial_pads(node, at, len(k))
    sym = pads[:2] == pads[2:]
    stride = tuple(at.get("strides", [1] * len(k)))
    ceil = bool(at.get("ceil_mode", 0))
    if node.op_type == "MaxPool":
        if list(at.get("dilations", [1, 1])) != [1, 1] or len(node.output) > 1:
            raise TesselError(f"onnx_to_torch: MaxPool node {node.name!r}: dilations and "
                              "the Indices output are not supported")
        pool: nn.Module = nn.MaxPool2d(k, stride, tuple(pads[:2]) if sym else 0,
                                       ceil_mode=ceil)
        return pool if sym else Pad(pads, float("-inf"), pool)
    if not sym:
        raise TesselError(f"onnx_to_torch: AveragePool node {node.name!r}: asymmetric pads "
                          f"{pads} are not supported")
    include = bool(at.get("count_include_pad", 0))
    return nn.AvgPool2d(k, stride, tuple(pads[:2]), ceil_mode=ceil, count_include_pad=include)


def _gemm(node: NodeProto, at: dict[str, Any], w: np.ndarray, b: np.ndarray | None
          ) -> nn.Module:
    if at.get("transA", 0):
        raise TesselError(f"onnx_to_torch: Gemm node {node.name!r}: transA is not supported")
    w = w if at.get("transB", 0) else w.T
    alpha, beta = float(at.get("alpha", 1.0)), float(at.get("beta", 1.0))
    fc = nn.Linear(w.shape[1], w.shape[0], bias=b is not None)
    fc.weight.data = _tensor(alpha * w)
    if b is not None:
        fc.bias.data = _tensor(np.broadcast_to(beta * b, (w.shape[0],)))
    return fc


def _layer(node: NodeProto, consts: dict[str, np.ndarray]) -> tuple[nn.Module, list[str]]:
    """The torch layer of one node and the names of its runtime (non-constant) inputs."""
    at = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    ins = [i for i in node.input if i]
    c = [consts.get(i) for i in ins]
    op = node.op_type
    if op == "Conv":
        return _conv(node, at, c[1], c[2] if len(c) > 2 else None), ins[:1]
    if op == "BatchNormalization":
        return _batch_norm(at, *c[1:5]), ins[:1]
    if op == "Gemm":
        return _gemm(node, at, c[1], c[2] if len(c) > 2 else None), ins[:1]
    if op == "Clip":
        lo = float(c[1]) if len(c) > 1 and c[1] is not None else float(at.get("min", -np.inf))
        hi = float(c[2]) if len(c) > 2 and c[2] is not None else float(at.get("max", np.inf))
        return nn.Hardtanh(lo, hi), ins[:1]
    if op in ("MaxPool", "AveragePool"):
        return _pool(node, at), ins
    if op == "Reshape" and c[0] is None and len(c) > 1 and c[1] is not None:
        return Reshape([int(d) for d in c[1]], bool(at.get("allowzero", 0))), ins[:1]
    simple: dict[str, Any] = {
        "Relu": nn.ReLU, "Add": Add, "Sum": Sum,
        "GlobalAveragePool": lambda: nn.AdaptiveAvgPool2d(1),
        "Flatten": lambda: nn.Flatten(int(at.get("axis", 1)))}
    if op in simple and not any(x is not None for x in c):
        return simple[op](), ins
    raise TesselError(f"onnx_to_torch: unsupported node {op} {node.name!r} (supported: Conv, "
                      "BatchNormalization, Relu, Clip, Add, Sum, Reshape to a constant shape, "
                      "MaxPool, AveragePool, GlobalAveragePool, Flatten, Gemm; operands of "
                      "Relu/Add/Sum/Flatten must not be initializers)")


def to_torch(model: ModelProto) -> OnnxModule:
    """A torch module (eval mode, float32) computing the ONNX CNN `model` with its weights.

        >>> net = to_torch(model)                       # doctest: +SKIP
        >>> y = net(torch.from_numpy(x))                # doctest: +SKIP
    """
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            v = helper.get_attribute_value(n.attribute[0])
            consts[n.output[0]] = (numpy_helper.to_array(v) if isinstance(v, TensorProto)
                                   else np.asarray(v, dtype=np.float32))
    layers, steps = [], []
    for n in g.node:
        if n.op_type == "Constant":
            continue
        layer, args = _layer(n, consts)
        layers.append(layer)
        steps.append((args, n.output[0]))
    inputs = [i.name for i in g.input if i.name not in consts]
    return OnnxModule(layers, steps, inputs, [o.name for o in g.output]).eval()


__all__ = ["OnnxModule", "to_torch"]
