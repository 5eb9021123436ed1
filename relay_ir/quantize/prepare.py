"""Prepare a float model for quantization: params bound as constants, batch norms turned
into arithmetic and folded, and a per-output-channel multiply right after a conv2d or
dense folded into its weight (a batch norm's scale).

The fold is relay_ir.transform.FoldScaleAxis (also through a conv's bias adds). It matters
to the integer graph: a channel scale left between a conv2d and the next one would give
the accumulator one scale per channel, and requantizing that needs a float multiply per
channel where a power-of-two shift would do.

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

from typing import Any

from relay_ir import transform as T
from relay_ir.backend.pipeline import bind_params, check_dataflow, main_of
from relay_ir.module import IRModule


def prepare(mod: Any, params: dict[str, Any] | None) -> IRModule:
    """The typed, graph-form float module that annotate / calibrate / realize work on."""
    mod = bind_params(main_of(mod), params, caller="relay_ir.quantize")
    mod = T.Sequential([T.InferType(), T.SimplifyInference(), T.Inline(),
                        T.ToGraphNormalForm(), T.DeadCodeElimination(), T.FoldConstant(),
                        T.SimplifyExpr(), T.FoldConstant()])(mod)
    check_dataflow(mod["main"])
    # called, not in the Sequential: the fold runs whatever the PassContext's opt_level
    return T.InferType()(T.FoldScaleAxis()(mod))


__all__ = ["prepare"]
