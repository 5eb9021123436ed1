"""tensor_expr.ops: the operator library (TVM topi-like), each op a function building TE
computes with readable names and a fusion tag ("elemwise", "broadcast", "injective",
"comm_reduce", "conv2d_nchw", "dense", ...).

    >>> import tensor_expr as te
    >>> from tensor_expr import ops
    >>> A = te.placeholder((8, 16), name="A"); B = te.placeholder((16, 4), name="B")
    >>> C = ops.relu(ops.matmul(A, B))
    >>> C.op.tag, C.op.input_tensors[0].op.tag
    ('elemwise', 'matmul')
"""

from tensor_expr.ops.broadcast import (
    add,
    broadcast_map,
    broadcast_shape,
    broadcast_to,
    divide,
    equal,
    floor_divide,
    floor_mod,
    greater,
    greater_equal,
    left_shift,
    less,
    less_equal,
    maximum,
    minimum,
    multiply,
    not_equal,
    power,
    right_shift,
    subtract,
    where,
    where_lazy,
)
from tensor_expr.ops.broadcast import logical_and_ as logical_and
from tensor_expr.ops.broadcast import logical_or_ as logical_or
from tensor_expr.ops.elemwise import (
    abs,
    ceil,
    clip,
    cos,
    elemwise,
    erf,
    exp,
    exp2,
    floor,
    gelu,
    identity,
    isnan,
    log,
    log2,
    log10,
    nan_to_num,
    negative,
    pow_scalar,
    reciprocal,
    round,
    round_half_away,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    tanh,
    trunc,
)
from tensor_expr.ops.nn import (
    batch_matmul,
    bias_add,
    conv2d_nchw,
    conv2d_nhwc,
    dense,
    depthwise_conv2d_nchw,
    leaky_relu,
    matmul,
    relu,
)
from tensor_expr.ops.norm import layer_norm, log_softmax, softmax
from tensor_expr.ops.pool import avg_pool2d, global_avg_pool2d, global_max_pool2d, max_pool2d
from tensor_expr.ops.reduction import argmax, argmin, max, mean, min, prod, sum
from tensor_expr.ops.transform import cast_op as cast
from tensor_expr.ops.transform import (
    concatenate,
    expand_dims,
    flatten,
    pad,
    pad_nd,
    reshape,
    squeeze,
    strided_slice,
    take,
    transpose,
)
