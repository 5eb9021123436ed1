"""Tensors in the blocked layout NCHW[x]c inside a fused group's TE program.

A value between two groups may be stored blocked, [N, C/x, H, W, x], as the NCHWc conv
template writes it (see layout_plan): a group then computes on it in that layout where its
ops allow (elementwise and broadcast ops, bias add, pooling), and reads it through a view
in the logical NCHW layout where they do not (a reshape, a reduction over channels). The
views are inlined compute stages whose indices the simplifier folds, so a group that keeps
the layout throughout loads and stores contiguous blocks, with no copy in between.

    >>> from tensor_expr.tensor import placeholder
    >>> x = Blocked(placeholder((1, 4, 8, 8, 16), "float32"), 16)
    >>> x.logical_shape
    (1, 64, 8, 8)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from relay_ir.expr import Call
from relay_ir.strategy import strategy_of
from tensor_expr import ops
from tensor_expr.expr import const
from tensor_expr.tensor import Tensor, compute


def _dims(t: Tensor) -> tuple[int, ...]:
    return tuple(int(d.value) for d in t.shape)


@dataclass(frozen=True)
class Blocked:
    """A logical NCHW tensor held as `tensor`, [N, C/block, H, W, block]."""

    tensor: Tensor
    block: int

    @property
    def logical_shape(self) -> tuple[int, int, int, int]:
        n, co, h, w, b = _dims(self.tensor)
        return n, co * b, h, w


def blockable(shape: Sequence[int], block: int) -> bool:
    """Whether a logical shape can be held blocked by `block` (4-D, channels divide)."""
    return len(shape) == 4 and block > 0 and shape[1] % block == 0


def to_logical(x: Any) -> Any:
    """The logical NCHW view of a Blocked tensor (lists elementwise; others unchanged)."""
    if isinstance(x, list):
        return [to_logical(f) for f in x]
    if not isinstance(x, Blocked):
        return x
    t, b = x.tensor, x.block
    return compute(x.logical_shape, lambda n, c, h, w: t[n, c // b, h, w, c % b],
                   name=f"{t.name}_nchw")


def to_blocked(x: Any, block: int) -> Tensor:
    """`x` (a logical 4-D tensor or a Blocked one) as a [N, C/block, H, W, block] tensor."""
    if isinstance(x, Blocked):
        if x.block == block:
            return x.tensor
        x = to_logical(x)
    n, c, h, w = _dims(x)
    return compute((n, c // block, h, w, block),
                   lambda i, co, y, z, b: x[i, co * block + b, y, z], name=f"{x.name}_nchwc")


def _broadcast_blocked(y: Tensor, out: tuple[int, ...], block: int) -> Tensor | None:
    """A logical operand broadcast against a blocked 4-D result, as a 5-D tensor that
    broadcasts against the result's blocks (numpy rules); None where it cannot."""
    dims = _dims(y)
    if len(dims) > 4:
        return None
    full = (1,) * (4 - len(dims)) + dims
    if any(d not in (1, o) for d, o in zip(full, out)):
        return None
    lead = 4 - len(dims)
    n, c, h, w = full
    blocked_c = c != 1
    shape = (n, c // block if blocked_c else 1, h, w, block if blocked_c else 1)

    def read(i: Any, co: Any, yy: Any, z: Any, b: Any) -> Any:
        logical = (i, co * block + b if blocked_c else co, yy, z)
        idx = [const(0, "int32") if d == 1 else q for d, q in zip(full, logical)]
        return y[tuple(idx[lead:])] if dims else y[()]

    return compute(shape, read, name=f"{y.name}_nchwc")


_UNARY = {"abs", "ceil", "floor", "round", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh",
          "negative", "erf", "nn.relu", "copy", "clip", "cast", "nn.leaky_relu",
          "nn.dropout", "logical_not"}
_NARY = {"add", "subtract", "multiply", "divide", "power", "maximum", "minimum", "equal",
         "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
         "logical_or", "right_shift", "left_shift", "where"}
_POOLS = {"nn.max_pool2d", "nn.avg_pool2d"}
KEEPS_LAYOUT = _UNARY | _NARY | _POOLS | {"nn.bias_add"}
"""Ops that compute in the blocked layout when an input is blocked (the rest read views)."""


def evaluate_call(call: Call, args: list[Any]) -> Any:
    """The TE result of `call` on `args`, some of them Blocked: Blocked where the op keeps
    the layout, else the op's compute on logical views."""
    name = call.op.name
    out = _out_shape(call)
    blocks = {a.block for a in args if isinstance(a, Blocked)}
    if name in KEEPS_LAYOUT and len(blocks) == 1 and out is not None:
        b = blocks.pop()
        if blockable(out, b):
            got = _evaluate_blocked(call, args, out, b)
            if got is not None:
                return Blocked(got, b)
    return strategy_of(call.op).compute(to_logical(args), call.attrs, call.checked_type)


def _out_shape(call: Call) -> tuple[int, ...] | None:
    t = call.checked_type
    shape = getattr(t, "shape", None)
    if shape is None or not all(isinstance(d, int) for d in shape):
        return None
    return tuple(int(d) for d in shape)


def _evaluate_blocked(call: Call, args: list[Any], out: tuple[int, ...], b: int
                      ) -> Tensor | None:
    name, attrs = call.op.name, call.attrs
    if name in _POOLS:
        if tuple(attrs.dilation) != (1, 1) or attrs.layout != "NCHW":
            return None
        extra = {"count_include_pad": attrs.count_include_pad} \
            if name == "nn.avg_pool2d" else {}
        pool = ops.max_pool2d if name == "nn.max_pool2d" else ops.avg_pool2d
        return pool(args[0].tensor, tuple(attrs.pool_size), tuple(attrs.strides),
                    tuple(attrs.padding), ceil_mode=attrs.ceil_mode, layout="NCHWc", **extra)
    if name == "nn.bias_add":
        if attrs.axis not in (1, -3) or not isinstance(args[0], Blocked):
            return None
        bias = args[1]
        if isinstance(bias, Blocked):
            return None
        c = out[1]
        bias5 = compute((1, c // b, 1, 1, b), lambda i, co, y, z, k: bias[co * b + k],
                        name=f"{bias.name}_nchwc")
        return ops.add(args[0].tensor, bias5)
    operands = []
    for a in args:
        if isinstance(a, Blocked):
            if a.logical_shape != out:  # a blocked operand that broadcasts: not here
                return None
            operands.append(a.tensor)
        else:
            y = _broadcast_blocked(a, out, b)
            if y is None:
                return None
            operands.append(y)
    from relay_ir.ty import TensorType

    t = call.checked_type
    assert isinstance(t, TensorType)
    blocked_type = TensorType((out[0], out[1] // b, out[2], out[3], b), t.dtype)
    return strategy_of(call.op).compute(operands, attrs, blocked_type)
