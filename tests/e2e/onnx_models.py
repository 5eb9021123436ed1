"""ResNet-18 and MobileNetV2 as ONNX models built with onnx.helper and random weights
(He-scaled, batch-norm statistics drawn near 1), for the end-to-end tests and benchmarks.

    >>> from tests.e2e.onnx_models import resnet18
    >>> model = resnet18(image=64, width=16)     # a narrower, smaller-input variant
    >>> model.graph.input[0].name
    'input'

`image` is the input side (224 for the real networks), `width` the channels of the first
stage (64 for ResNet-18; MobileNetV2 scales its channel table by width / 32).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13


class _Graph:
    """Collects nodes and initializers; names are generated in order."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def weight(self, prefix: str, arr: np.ndarray) -> str:
        n = self.name(prefix)
        self.inits.append(numpy_helper.from_array(arr.astype(np.float32), n))
        return n

    def node(self, op: str, inputs: list[str], **attrs: object) -> str:
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def conv_bn(self, x: str, cin: int, cout: int, k: int, stride: int, groups: int = 1,
                act: str | None = "relu") -> str:
        fan_in = cin // groups * k * k
        w = self.rng.standard_normal((cout, cin // groups, k, k)) * np.sqrt(2.0 / fan_in)
        y = self.node("Conv", [x, self.weight("w", w)], kernel_shape=[k, k],
                      strides=[stride, stride], pads=[k // 2] * 4, group=groups)
        scale = self.weight("gamma", self.rng.uniform(0.5, 1.5, cout))
        bias = self.weight("beta", self.rng.normal(0, 0.1, cout))
        mean = self.weight("mean", self.rng.normal(0, 0.1, cout))
        var = self.weight("var", self.rng.uniform(0.5, 1.5, cout))
        y = self.node("BatchNormalization", [y, scale, bias, mean, var], epsilon=1e-5)
        if act == "relu":
            y = self.node("Relu", [y])
        elif act == "relu6":
            lo = self.weight("lo", np.array(0.0))
            hi = self.weight("hi", np.array(6.0))
            y = self.node("Clip", [y, lo, hi])
        return y

    def head(self, x: str, cin: int, classes: int) -> str:
        y = self.node("GlobalAveragePool", [x])
        y = self.node("Flatten", [y], axis=1)
        w = self.weight("fc_w", self.rng.standard_normal((classes, cin)) / np.sqrt(cin))
        b = self.weight("fc_b", self.rng.normal(0, 0.1, classes))
        return self.node("Gemm", [y, w, b], transB=1)

    def model(self, name: str, out: str, image: int, classes: int) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, name,
            [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, image, image])],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, [1, classes])],
            self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        model.ir_version = 8
        onnx.checker.check_model(model)
        return model


def resnet18(image: int = 224, width: int = 64, classes: int = 1000, seed: int = 0
             ) -> onnx.ModelProto:
    """ResNet-18 (basic blocks, 2-2-2-2) with random weights."""
    g = _Graph(seed)
    x = g.conv_bn("input", 3, width, 7, 2)
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = width
    for stage, mult in enumerate((1, 2, 4, 8)):
        cout = width * mult
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = g.conv_bn(x, cin, cout, 3, stride)
            y = g.conv_bn(y, cout, cout, 3, 1, act=None)
            short = x if stride == 1 and cin == cout else \
                g.conv_bn(x, cin, cout, 1, stride, act=None)
            x = g.node("Relu", [g.node("Add", [y, short])])
            cin = cout
    return g.model("resnet18", g.head(x, cin, classes), image, classes)


def resnext26(image: int = 224, cardinality: int = 32, base_width: int = 4,
              classes: int = 1000, seed: int = 0) -> onnx.ModelProto:
    """ResNeXt-26 (bottleneck blocks 2-2-2-2 whose 3x3 conv is grouped: `cardinality`
    groups of `base_width` x 2^stage channels, as ResNeXt-50 32x4d's) with random weights."""
    g = _Graph(seed)
    x = g.conv_bn("input", 3, 64, 7, 2)
    x = g.node("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage in range(4):
        inner = cardinality * base_width * 2 ** stage
        cout = 256 * 2 ** stage
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            y = g.conv_bn(x, cin, inner, 1, 1)
            y = g.conv_bn(y, inner, inner, 3, stride, groups=cardinality)
            y = g.conv_bn(y, inner, cout, 1, 1, act=None)
            short = x if stride == 1 and cin == cout else \
                g.conv_bn(x, cin, cout, 1, stride, act=None)
            x = g.node("Relu", [g.node("Add", [y, short])])
            cin = cout
    return g.model("resnext26", g.head(x, cin, classes), image, classes)


MOBILENET_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]  # expansion t, channels c, repeats n, stride s


def mobilenet_v2(image: int = 224, width: int = 32, classes: int = 1000, seed: int = 0
                 ) -> onnx.ModelProto:
    """MobileNetV2 (inverted residuals, depthwise 3x3, ReLU6) with random weights."""
    g = _Graph(seed)

    def ch(c: int) -> int:
        return max(8, c * width // 32 // 8 * 8) if width != 32 else c

    x = g.conv_bn("input", 3, ch(32), 3, 2, act="relu6")
    cin = ch(32)
    for t, c, n, s in MOBILENET_V2:
        cout = ch(c)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = g.conv_bn(x, cin, hidden, 1, 1, act="relu6") if t != 1 else x
            y = g.conv_bn(y, hidden, hidden, 3, stride, groups=hidden, act="relu6")
            y = g.conv_bn(y, hidden, cout, 1, 1, act=None)
            x = g.node("Add", [x, y]) if stride == 1 and cin == cout else y
            cin = cout
    last = max(1280, ch(1280)) if width >= 32 else ch(1280)
    x = g.conv_bn(x, cin, last, 1, 1, act="relu6")
    return g.model("mobilenet_v2", g.head(x, last, classes), image, classes)


def randomize_constant_weights(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """A copy of a light model (weights as ConstantOfShape of one value, which makes every
    output element alike) with each such weight replaced by a random initializer:
    He-scaled normal values for rank >= 2, uniform in [0.5, 1.5] for vectors (biases,
    batch-norm statistics: variances stay positive). A final Softmax is dropped, so
    that the outputs compared are the logits (random weights often saturate the softmax
    into a one-hot vector, which would hide differences)."""
    rng = np.random.default_rng(seed)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    shapes = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    keep, new, dropped = [], [], set()
    for n in g.node:
        if n.op_type == "ConstantOfShape" and n.input[0] in shapes:
            dropped.add(n.input[0])
            shape = tuple(int(d) for d in shapes[n.input[0]])
            if len(shape) >= 2:
                fan_in = int(np.prod(shape[1:])) or 1
                arr = rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)
            else:
                arr = rng.uniform(0.5, 1.5, shape)
            new.append(numpy_helper.from_array(arr.astype(np.float32), n.output[0]))
        else:
            keep.append(n)
    dropped -= {i for n in keep for i in n.input}
    inits = [t for t in g.initializer if t.name not in dropped] + new
    inputs = [i for i in g.input if i.name not in dropped]
    if keep and keep[-1].op_type == "Softmax" and len(g.output) == 1 and \
            keep[-1].output[0] == g.output[0].name:
        logits = keep.pop().input[0]
        del g.output[:]
        g.output.append(helper.make_tensor_value_info(logits, TensorProto.FLOAT, None))
    del g.node[:], g.initializer[:], g.input[:]
    g.node.extend(keep)
    g.initializer.extend(inits)
    g.input.extend(inputs)
    return out
