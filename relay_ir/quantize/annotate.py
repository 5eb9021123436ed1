"""Annotate: which conv2d / dense calls of @main run in int8, and which stay float.

A conv2d (NCHW data, OIHW kernel) or dense whose weight is a float constant (the params
bound) is quantized, its data and weight both, unless its conv2d index (conv2d calls
counted from 0 in post order, the order the printed graph lists them) is in the config's
skip_conv_layers. The ops between quantized anchors (bias add, relu, max pooling,
reshapes, residual adds) follow their inputs into the integer domain when realize can
keep them exact there (see realize.py); everything else stays float.

    >>> import numpy as np, relay_ir as R
    >>> from relay_ir import nn
    >>> from relay_ir.quantize import qconfig
    >>> x = R.Var("x", R.TensorType((1, 3, 8, 8), "float32"))
    >>> w0, w1 = R.Constant(np.ones((4, 3, 3, 3), "float32")), R.Constant(np.ones((4, 4, 1, 1), "float32"))
    >>> fn = R.transform.InferType()(R.IRModule.from_expr(R.Function((x,), nn.conv2d(nn.conv2d(x, w0), w1))))["main"]
    >>> a = annotate(fn, qconfig(skip_conv_layers=[0]))
    >>> [c.args[1].data.shape for c in a.anchors], a.skipped
    ([(4, 4, 1, 1)], (0,))
"""  # noqa: E501

from __future__ import annotations

from dataclasses import dataclass

from relay_ir.expr import Call, Constant, Function
from relay_ir.op.registry import Op
from relay_ir.quantize.config import QConfig
from relay_ir.ty import TensorType
from relay_ir.visitor import post_order

ANCHOR_OPS = ("nn.conv2d", "nn.dense")


@dataclass(frozen=True)
class Annotation:
    """The quantized anchors (in post order) and the conv2d indices kept in float."""

    anchors: tuple[Call, ...]
    skipped: tuple[int, ...]

    def is_quantized(self, call: Call) -> bool:
        """Whether `call` is one of the anchors that run in int8."""
        return any(call is a for a in self.anchors)


def _float_tensor(e: object) -> bool:
    t = getattr(e, "checked_type", None)
    return isinstance(t, TensorType) and t.dtype == "float32"


def _quantizable(call: Call) -> bool:
    data, weight = call.args
    if not (isinstance(weight, Constant) and weight.data.dtype == "float32"
            and _float_tensor(data)):
        return False
    if call.op.name == "nn.conv2d":
        a = call.attrs
        return a.data_layout == "NCHW" and a.kernel_layout == "OIHW"
    return True


def annotate(fn: Function, cfg: QConfig) -> Annotation:
    """The anchors of the typed, params-bound `fn` that run in int8 under `cfg`."""
    anchors: list[Call] = []
    skipped: list[int] = []
    conv_index = 0
    for e in post_order(fn.body):
        if not (isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in ANCHOR_OPS):
            continue
        skip = False
        if e.op.name == "nn.conv2d":
            skip = conv_index in cfg.skip_conv_layers
            if skip:
                skipped.append(conv_index)
            conv_index += 1
        if not skip and _quantizable(e):
            anchors.append(e)
    return Annotation(tuple(anchors), tuple(skipped))
