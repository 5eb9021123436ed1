"""The builder namespace of the nn ops: `relay_ir.nn.conv2d(x, w, padding=(1, 1))` etc.

    >>> import relay_ir
    >>> x = relay_ir.Var("x", relay_ir.TensorType((1, 8)))
    >>> relay_ir.nn.relu(x).op.name
    'nn.relu'
"""

from relay_ir.op.nn import (
    avg_pool2d,
    batch_matmul,
    conv2d,
    dense,
    global_avg_pool2d,
    max_pool2d,
)
from relay_ir.op.nn_norm import (
    batch_norm,
    bias_add,
    dropout,
    layer_norm,
    leaky_relu,
    log_softmax,
    pad,
    relu,
    softmax,
)

__all__ = [
    "avg_pool2d", "batch_matmul", "batch_norm", "bias_add", "conv2d", "dense", "dropout",
    "global_avg_pool2d", "layer_norm", "leaky_relu", "log_softmax", "max_pool2d", "pad",
    "relu", "softmax",
]
