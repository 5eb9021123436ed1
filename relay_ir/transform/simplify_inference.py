"""SimplifyInference: rewrite training-time ops into their inference-time arithmetic.

- `nn.batch_norm(x, gamma, beta, mean, var)` becomes `x * scale + shift` with
  `scale = gamma / sqrt(var + eps)` and `shift = beta - mean * scale`, the vectors
  reshaped (expand_dims) to broadcast along the channel axis; the op's other two
  outputs (the moving mean and variance) become those arguments.
- `nn.dropout(x).0` becomes `x` (dropout is the identity at inference).
- `nn.layer_norm(x, gamma, beta)` is expanded into mean / subtract / multiply / sqrt /
  divide along its axis when `expand_layer_norm` is set (the default), so FuseOps can
  fuse it; otherwise it is left alone.

The pass needs the rank of `x`, so it runs type inference first when types are missing.

    >>> SimplifyInference().opt_level
    0
"""

from __future__ import annotations

import numpy as np

from relay_ir.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem
from relay_ir.module import IRModule
from relay_ir.transform.analysis import op_name
from relay_ir.transform.infer_type import ensure_typed
from relay_ir.transform.pass_manager import FunctionPass, PassContext
from relay_ir.transform.rewrite import op_call, rewrite
from relay_ir.ty import TensorType


def _op_is(e: Expr, name: str) -> bool:
    return op_name(e) == name


def _along(vec: Expr, ndim: int, axis: int) -> Expr:
    """Reshape a channel vector so it broadcasts along `axis` of a rank-`ndim` tensor."""
    trailing = ndim - 1 - axis
    return op_call("expand_dims", [vec], axis=1, num_newaxis=trailing) if trailing else vec


def _scalar(value: float, dtype: str) -> Constant:
    return Constant(np.asarray(value, dtype=dtype))


def expand_batch_norm(call: Call, x_type: TensorType) -> Expr:
    """The (out, mean, var) tuple of a batch_norm call, as plain arithmetic."""
    x, gamma, beta, mean, var = call.args
    attrs = call.attrs
    axis = attrs.axis % x_type.ndim
    dtype = x_type.dtype
    inv_std = op_call("divide", [_scalar(1.0, dtype),
                                 op_call("sqrt", [op_call("add", [var, _scalar(attrs.epsilon,
                                                                                dtype)])])])
    scale = op_call("multiply", [gamma, inv_std]) if attrs.scale else inv_std
    shift = op_call("negative", [op_call("multiply", [mean, scale])])
    if attrs.center:
        shift = op_call("add", [beta, shift])
    out = op_call("add", [op_call("multiply", [x, _along(scale, x_type.ndim, axis)]),
                          _along(shift, x_type.ndim, axis)])
    return Tuple((out, mean, var))


def expand_layer_norm(call: Call, x_type: TensorType) -> Expr:
    """A layer_norm call as mean / variance arithmetic along its axis."""
    x, gamma, beta = call.args
    attrs = call.attrs
    axis = attrs.axis % x_type.ndim
    dtype = x_type.dtype
    mean = op_call("mean", [x], axis=(axis,), keepdims=True)
    centred = op_call("subtract", [x, mean])
    var = op_call("mean", [op_call("multiply", [centred, centred])], axis=(axis,),
                  keepdims=True)
    std = op_call("sqrt", [op_call("add", [var, _scalar(attrs.epsilon, dtype)])])
    out = op_call("divide", [centred, std])
    if attrs.scale:
        out = op_call("multiply", [out, _along(gamma, x_type.ndim, axis)])
    if attrs.center:
        out = op_call("add", [out, _along(beta, x_type.ndim, axis)])
    return out


def simplify_inference(expr: Expr, layer_norm: bool = True) -> Expr:
    """`expr` with batch_norm / dropout (and layer_norm) rewritten; needs checked types."""

    def visit(old: Expr, new: Expr) -> Expr:
        if _op_is(new, "nn.batch_norm"):
            t = old.args[0].checked_type  # type: ignore[attr-defined]
            if isinstance(t, TensorType):
                return expand_batch_norm(new, t)  # type: ignore[arg-type]
        if layer_norm and _op_is(new, "nn.layer_norm"):
            t = old.args[0].checked_type  # type: ignore[attr-defined]
            if isinstance(t, TensorType):
                return expand_layer_norm(new, t)  # type: ignore[arg-type]
        if isinstance(new, TupleGetItem):
            tv = new.tuple_value
            if _op_is(tv, "nn.dropout") and new.index == 0:
                return tv.args[0]  # type: ignore[attr-defined]
            if isinstance(tv, Tuple) and isinstance(old, TupleGetItem) and (
                _op_is(old.tuple_value, "nn.batch_norm")
            ):
                return tv.fields[new.index]
        return new

    return rewrite(expr, visit)


class SimplifyInference(FunctionPass):
    """Replace batch_norm by scale-and-shift, drop dropout, expand layer_norm."""

    name = "SimplifyInference"
    opt_level = 0

    def __init__(self, expand_layer_norm: bool = True) -> None:
        super().__init__()
        self.expand_layer_norm = expand_layer_norm

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Type the module if needed, then simplify every function."""
        return super().transform_module(ensure_typed(mod), ctx)

    def transform_function(self, fn: Function, mod: IRModule, ctx: PassContext) -> Function:
        """Simplify one function."""
        out = simplify_inference(fn, self.expand_layer_norm)
        assert isinstance(out, Function)
        return out


__all__ = ["SimplifyInference", "expand_batch_norm", "expand_layer_norm",
           "simplify_inference"]
