"""Prepare a float model for quantization: params bound as constants, batch norms turned
into arithmetic and folded, and a per-output-channel multiply right after a conv2d or
dense folded into its weight (a batch norm's scale).

The folding matters to the integer graph: a channel scale left between a conv2d and the
next one would give the accumulator one scale per channel, and requantizing that needs a
float multiply per channel where a power-of-two shift would do.

    >>> import numpy as np, relay_ir as R
    >>> from relay_ir import nn
    >>> x = R.Var("x", R.TensorType((1, 2, 4, 4), "float32"))
    >>> w = R.Var("w", R.TensorType((3, 2, 1, 1), "float32"))
    >>> c = R.Constant(np.array([1.0, 2.0, 3.0], "float32").reshape(3, 1, 1))
    >>> mod = R.IRModule.from_expr(R.Function((x, w), R.multiply(nn.conv2d(x, w), c)))
    >>> out = prepare(mod, {"w": np.ones((3, 2, 1, 1), "float32")})
    >>> out["main"].body.op.name, out["main"].body.args[1].data[:, 0, 0, 0].tolist()
    ('nn.conv2d', [1.0, 2.0, 3.0])
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from relay_ir import transform as T
from relay_ir.backend.pipeline import bind_params, check_dataflow, main_of
from relay_ir.expr import Call, Constant, Expr
from relay_ir.module import IRModule
from relay_ir.op.registry import Op
from relay_ir.transform.analysis import use_counts
from relay_ir.transform.rewrite import rewrite
from relay_ir.ty import TensorType


def prepare(mod: Any, params: dict[str, Any] | None) -> IRModule:
    """The typed, graph-form float module that annotate / calibrate / realize work on."""
    mod = bind_params(main_of(mod), params, caller="relay_ir.quantize")
    mod = T.Sequential([T.InferType(), T.SimplifyInference(), T.Inline(),
                        T.ToGraphNormalForm(), T.DeadCodeElimination(), T.FoldConstant(),
                        T.SimplifyExpr(), T.FoldConstant()])(mod)
    check_dataflow(mod["main"])
    main = mod["main"]
    mod = mod.with_function("main", dataclasses.replace(
        main, body=fold_channel_scales(main.body), checked_type=None))
    return T.InferType()(mod)


def _op(e: Expr, *names: str) -> bool:
    return isinstance(e, Call) and isinstance(e.op, Op) and e.op.name in names


def _channel_vector(c: Expr, anchor: Call) -> np.ndarray | None:
    """The per-output-channel factors of a float constant that multiplies `anchor`'s
    result along its channel axis only (axis 1 of NCHW conv2d, the last axis of dense)."""
    t = anchor.checked_type
    if not (isinstance(c, Constant) and c.data.dtype == np.float32
            and isinstance(t, TensorType) and all(isinstance(d, int) for d in t.shape)):
        return None
    shape = tuple(int(d) for d in t.shape)
    data = c.data
    if data.ndim > len(shape):
        return None
    full = (1,) * (len(shape) - data.ndim) + data.shape
    axis = 1 if anchor.op.name == "nn.conv2d" else len(shape) - 1
    if any(n != 1 for i, n in enumerate(full) if i != axis) or full[axis] not in (1, shape[axis]):
        return None
    return np.broadcast_to(data.reshape(-1), (shape[axis],)).astype(np.float64)


def _foldable(e: Expr, uses: dict[int, int]) -> bool:
    if not (_op(e, "nn.conv2d", "nn.dense") and isinstance(e.args[1], Constant)
            and uses.get(id(e), 0) == 1):
        return False
    return e.op.name == "nn.dense" or (e.attrs.data_layout == "NCHW"
                                       and e.attrs.kernel_layout == "OIHW")


def fold_channel_scales(body: Expr) -> Expr:
    """`multiply(anchor(x, W), c)` -> `anchor(x, W * c)` for a per-output-channel constant
    c and an anchor used only there (TVM's FoldScaleAxis, the backward case)."""
    uses = use_counts(body)

    def visit(old: Expr, new: Expr) -> Expr:
        if not _op(old, "multiply"):
            return new
        for k in (0, 1):
            anchor, c = new.args[k], new.args[1 - k]
            if not _foldable(old.args[k], uses):
                continue
            vec = _channel_vector(c, old.args[k])
            if vec is None:
                continue
            w = anchor.args[1].data
            scaled = (w.astype(np.float64) * vec.reshape((-1,) + (1,) * (w.ndim - 1)))
            return dataclasses.replace(anchor, args=(anchor.args[0],
                                                     Constant(scaled.astype(w.dtype))),
                                       checked_type=None)
        return new

    return rewrite(body, visit)


__all__ = ["fold_channel_scales", "prepare"]
