"""Neural-network ops, part 2: activations, normalisation, bias_add, pad and dropout.

batch_norm and dropout return tuples as in Relay: batch_norm gives (out, mean, var) and
dropout gives (out, mask); at inference dropout is the identity and batch_norm uses the
moving statistics.

    >>> from relay_ir.op.registry import TYPE_RELATIONS, get_op
    >>> from relay_ir.ty import TensorType
    >>> op = get_op("nn.dropout")
    >>> print(TYPE_RELATIONS[op]([TensorType((2, 3))], op.make_attrs()))
    (Tensor[(2, 3), float32], Tensor[(2, 3), float32])
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.expr import Call, Expr
from relay_ir.op._common import (
    ARG_NAMES,
    Refined,
    RelationError,
    freeze_fields,
    is_gradual,
    make_call,
    normalize_axis,
    require_dim,
    tensor_arg,
)
from relay_ir.op.registry import PATTERNS, REFERENCES, TYPE_RELATIONS, OpPattern, register_op
from relay_ir.ty import ANY, TensorType, TupleType, Type

# --- activations --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SoftmaxAttrs:
    """Attributes of nn.softmax / nn.log_softmax: the axis normalised over."""

    axis: int = -1


@dataclass(frozen=True, slots=True)
class LeakyReluAttrs:
    """Attributes of nn.leaky_relu: the slope below zero."""

    alpha: float = 0.01


def _same_rel(types: list[Type], attrs: Any) -> Type:
    t = tensor_arg(types, 0)
    if isinstance(attrs, SoftmaxAttrs):
        normalize_axis(attrs.axis, t.ndim, 0, t)
    return t


def _softmax_ref(x: np.ndarray, attrs: SoftmaxAttrs) -> np.ndarray:
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=attrs.axis, keepdims=True))
    return (e / e.sum(axis=attrs.axis, keepdims=True)).astype(x.dtype)


def _log_softmax_ref(x: np.ndarray, attrs: SoftmaxAttrs) -> np.ndarray:
    x64 = x.astype(np.float64)
    shifted = x64 - x64.max(axis=attrs.axis, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=attrs.axis, keepdims=True))).astype(
        x.dtype
    )


softmax_op = register_op("nn.softmax", SoftmaxAttrs, 1, "softmax along an axis")
log_softmax_op = register_op("nn.log_softmax", SoftmaxAttrs, 1, "log of softmax")
relu_op = register_op("nn.relu", None, 1, "max(x, 0)")
leaky_relu_op = register_op("nn.leaky_relu", LeakyReluAttrs, 1, "x if x > 0 else alpha * x")
for _op in (softmax_op, log_softmax_op, relu_op, leaky_relu_op):
    ARG_NAMES[_op] = ("data",)
    TYPE_RELATIONS[_op] = _same_rel
PATTERNS[softmax_op] = PATTERNS[log_softmax_op] = OpPattern.OPAQUE
PATTERNS[relu_op] = PATTERNS[leaky_relu_op] = OpPattern.ELEMWISE
REFERENCES[softmax_op] = _softmax_ref
REFERENCES[log_softmax_op] = _log_softmax_ref
REFERENCES[relu_op] = lambda x, attrs=None: np.maximum(x, np.zeros((), x.dtype))
REFERENCES[leaky_relu_op] = lambda x, attrs: np.where(
    x > 0, x.astype(np.float64), x.astype(np.float64) * attrs.alpha
).astype(x.dtype)


# --- normalisation -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchNormAttrs:
    """Attributes of nn.batch_norm (inference: moving statistics are used)."""

    axis: int = 1
    epsilon: float = 1e-5
    center: bool = True
    scale: bool = True


@dataclass(frozen=True, slots=True)
class LayerNormAttrs:
    """Attributes of nn.layer_norm."""

    axis: int = -1
    epsilon: float = 1e-5
    center: bool = True
    scale: bool = True


def _vectors_like(types: list[Type], first: int, count: int, c: Any, why: str,
                  dtype: str) -> list[Type | None]:
    """Check that args first..first+count-1 are (c,) vectors; refined types (or None)."""
    out: list[Type | None] = []
    for i in range(first, first + count):
        t = tensor_arg(types, i)
        if t.ndim != 1:
            raise RelationError(f"expected a vector of length {c} ({why}), got rank {t.ndim}",
                                arg=i, expected=TensorType((c,), dtype), got=t)
        if t.dtype != dtype:
            raise RelationError(f"dtype mismatch: expected {dtype}, got {t.dtype}", arg=i,
                                expected=TensorType(t.shape, dtype), got=t)
        _, refined = require_dim(types, i, 0, c, why)
        out.append(refined)
    return out


def _channels(types: list[Type], data: TensorType, axis: int, vectors: range) -> Any:
    """The channel count: data's dim, or the first known vector length when that is `?`."""
    c = data.shape[axis]
    for i in vectors:
        t = tensor_arg(types, i)
        if is_gradual(c) and t.ndim == 1 and isinstance(t.shape[0], int):
            c = t.shape[0]
    return c


def _batch_norm_rel(types: list[Type], attrs: BatchNormAttrs) -> Type:
    data = tensor_arg(types, 0)
    axis = normalize_axis(attrs.axis, data.ndim, 0, data)
    c = _channels(types, data, axis, range(1, 5))
    refined = _vectors_like(types, 1, 4, c, f"the channels, dim {axis} of data", data.dtype)
    _, new_data = require_dim(types, 0, axis, c, "the length of gamma, beta, mean and var")
    vec = TensorType((c,), data.dtype)
    ret = TupleType((new_data or data, vec, vec))
    if new_data is not None or any(refined):
        return Refined(ret, (new_data, *refined))
    return ret


def _bn_shape(ndim: int, axis: int) -> list[int]:
    shape = [1] * ndim
    shape[axis] = -1
    return shape


def _batch_norm_ref(x, gamma, beta, mean, var, attrs: BatchNormAttrs) -> tuple:
    axis = attrs.axis % x.ndim
    shape = _bn_shape(x.ndim, axis)
    x64 = x.astype(np.float64)
    out = (x64 - mean.astype(np.float64).reshape(shape)) / np.sqrt(
        var.astype(np.float64).reshape(shape) + attrs.epsilon
    )
    if attrs.scale:
        out = out * gamma.astype(np.float64).reshape(shape)
    if attrs.center:
        out = out + beta.astype(np.float64).reshape(shape)
    return out.astype(x.dtype), mean.copy(), var.copy()


def _layer_norm_rel(types: list[Type], attrs: LayerNormAttrs) -> Type:
    data = tensor_arg(types, 0)
    axis = normalize_axis(attrs.axis, data.ndim, 0, data)
    c = _channels(types, data, axis, range(1, 3))
    refined = _vectors_like(types, 1, 2, c, f"dim {axis} of data", data.dtype)
    _, new_data = require_dim(types, 0, axis, c, "the length of gamma and beta")
    if new_data is not None or any(refined):
        return Refined(new_data or data, (new_data, *refined))
    return data


def _layer_norm_ref(x, gamma, beta, attrs: LayerNormAttrs) -> np.ndarray:
    axis = attrs.axis % x.ndim
    shape = _bn_shape(x.ndim, axis)
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axis, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axis, keepdims=True)
    out = (x64 - mean) / np.sqrt(var + attrs.epsilon)
    if attrs.scale:
        out = out * gamma.astype(np.float64).reshape(shape)
    if attrs.center:
        out = out + beta.astype(np.float64).reshape(shape)
    return out.astype(x.dtype)


batch_norm_op = register_op("nn.batch_norm", BatchNormAttrs, 5, "batch normalisation")
layer_norm_op = register_op("nn.layer_norm", LayerNormAttrs, 3, "layer normalisation")
ARG_NAMES[batch_norm_op] = ("data", "gamma", "beta", "moving_mean", "moving_var")
ARG_NAMES[layer_norm_op] = ("data", "gamma", "beta")
TYPE_RELATIONS[batch_norm_op] = _batch_norm_rel
TYPE_RELATIONS[layer_norm_op] = _layer_norm_rel
REFERENCES[batch_norm_op] = _batch_norm_ref
REFERENCES[layer_norm_op] = _layer_norm_ref
PATTERNS[batch_norm_op] = PATTERNS[layer_norm_op] = OpPattern.OPAQUE


# --- bias_add, pad, dropout ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BiasAddAttrs:
    """Attributes of nn.bias_add: the axis the bias runs along."""

    axis: int = 1


def _bias_add_rel(types: list[Type], attrs: BiasAddAttrs) -> Type:
    data = tensor_arg(types, 0)
    axis = normalize_axis(attrs.axis, data.ndim, 0, data)
    c = _channels(types, data, axis, range(1, 2))
    (refined,) = _vectors_like(types, 1, 1, c, f"dim {axis} of data", data.dtype)
    _, new_data = require_dim(types, 0, axis, c, "the length of bias")
    if new_data is not None or refined is not None:
        return Refined(new_data or data, (new_data, refined))
    return data


def _bias_add_ref(x: np.ndarray, b: np.ndarray, attrs: BiasAddAttrs) -> np.ndarray:
    shape = _bn_shape(x.ndim, attrs.axis % x.ndim)
    return (x.astype(np.float64) + b.astype(np.float64).reshape(shape)).astype(x.dtype)


bias_add_op = register_op("nn.bias_add", BiasAddAttrs, 2, "add a bias vector along an axis")
ARG_NAMES[bias_add_op] = ("data", "bias")
TYPE_RELATIONS[bias_add_op] = _bias_add_rel
REFERENCES[bias_add_op] = _bias_add_ref
PATTERNS[bias_add_op] = OpPattern.BROADCAST


@dataclass(frozen=True, slots=True)
class PadAttrs:
    """Attributes of nn.pad: ((before, after), ...) per dim, a value and a mode."""

    pad_width: tuple[tuple[int, int], ...]
    pad_value: float = 0.0
    pad_mode: str = "constant"

    def __post_init__(self) -> None:
        freeze_fields(self, "pad_width")


_PAD_MODES = ("constant", "edge", "reflect")


def _pad_rel(types: list[Type], attrs: PadAttrs) -> Type:
    data = tensor_arg(types, 0)
    if attrs.pad_mode not in _PAD_MODES:
        raise RelationError(f"pad_mode {attrs.pad_mode!r} is not supported; legal: "
                            f"{', '.join(_PAD_MODES)}")
    if len(attrs.pad_width) != data.ndim:
        raise RelationError(
            f"pad_width has {len(attrs.pad_width)} entries, the data has rank {data.ndim}",
            arg=0, got=data,
        )
    shape = []
    for d, pw in zip(data.shape, attrs.pad_width):
        if len(pw) != 2 or min(pw) < 0:
            raise RelationError(f"each pad_width entry is (before, after) >= 0, got {pw}")
        shape.append(d + pw[0] + pw[1] if isinstance(d, int) else ANY)
    return TensorType(tuple(shape), data.dtype)


def _pad_ref(x: np.ndarray, attrs: PadAttrs) -> np.ndarray:
    widths = [tuple(p) for p in attrs.pad_width]
    if attrs.pad_mode == "constant":
        return np.pad(x, widths, mode="constant", constant_values=attrs.pad_value)
    return np.pad(x, widths, mode=attrs.pad_mode)


pad_op = register_op("nn.pad", PadAttrs, 1, "pad each dim")
ARG_NAMES[pad_op] = ("data",)
TYPE_RELATIONS[pad_op] = _pad_rel
REFERENCES[pad_op] = _pad_ref
PATTERNS[pad_op] = OpPattern.INJECTIVE


@dataclass(frozen=True, slots=True)
class DropoutAttrs:
    """Attributes of nn.dropout: the drop rate (ignored at inference)."""

    rate: float = 0.5


def _dropout_rel(types: list[Type], attrs: DropoutAttrs) -> Type:
    data = tensor_arg(types, 0)
    if not 0.0 <= attrs.rate < 1.0:
        raise RelationError(f"rate must be in [0, 1), got {attrs.rate}")
    return TupleType((data, data))


dropout_op = register_op("nn.dropout", DropoutAttrs, 1, "dropout (identity at inference)")
ARG_NAMES[dropout_op] = ("data",)
TYPE_RELATIONS[dropout_op] = _dropout_rel
REFERENCES[dropout_op] = lambda x, attrs: (x.copy(), np.ones_like(x))
PATTERNS[dropout_op] = OpPattern.OPAQUE


# --- builders -------------------------------------------------------------------------------


def relu(data: Expr) -> Call:
    """max(data, 0): nn.relu(x)."""
    return make_call(relu_op, [data])


def leaky_relu(data: Expr, alpha: float = 0.01) -> Call:
    """data if data > 0 else alpha * data: nn.leaky_relu(x, alpha=0.1)."""
    return make_call(leaky_relu_op, [data], alpha=float(alpha))


def softmax(data: Expr, axis: int = -1) -> Call:
    """Softmax along `axis`: nn.softmax(x, axis=1)."""
    return make_call(softmax_op, [data], axis=axis)


def log_softmax(data: Expr, axis: int = -1) -> Call:
    """Log of the softmax along `axis`: nn.log_softmax(x)."""
    return make_call(log_softmax_op, [data], axis=axis)


def batch_norm(data: Expr, gamma: Expr, beta: Expr, moving_mean: Expr, moving_var: Expr,
               axis: int = 1, epsilon: float = 1e-5, center: bool = True,
               scale: bool = True) -> Call:
    """Batch normalisation, a 3-tuple (out, mean, var): nn.batch_norm(x, g, b, m, v)[0]."""
    return make_call(batch_norm_op, [data, gamma, beta, moving_mean, moving_var], axis=axis,
                     epsilon=float(epsilon), center=center, scale=scale)


def layer_norm(data: Expr, gamma: Expr, beta: Expr, axis: int = -1, epsilon: float = 1e-5,
               center: bool = True, scale: bool = True) -> Call:
    """Layer normalisation over `axis`: nn.layer_norm(x, gamma, beta)."""
    return make_call(layer_norm_op, [data, gamma, beta], axis=axis, epsilon=float(epsilon),
                     center=center, scale=scale)


def bias_add(data: Expr, bias: Expr, axis: int = 1) -> Call:
    """Add a bias vector along `axis`: nn.bias_add(conv, b)."""
    return make_call(bias_add_op, [data, bias], axis=axis)


def pad(data: Expr, pad_width: Any, pad_value: float = 0.0, pad_mode: str = "constant") -> Call:
    """Pad each dim by (before, after): nn.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))."""
    return make_call(pad_op, [data], pad_width=pad_width, pad_value=float(pad_value),
                     pad_mode=pad_mode)


def dropout(data: Expr, rate: float = 0.5) -> Call:
    """Dropout, a 2-tuple (out, mask); take field 0: nn.dropout(x)."""
    return make_call(dropout_op, [data], rate=float(rate))
