"""relay_ir.quantize: post-training int8 quantization of a float model (TVM's
relay.quantize): prepare (params bound, batch norms folded into the weights), annotate
(which conv2d / dense run in int8), calibrate (each quantized input's scale), realize
(int8 conv2d / dense accumulating in int32, int32 bias, requantization by rounding right
shifts, dequantization where the float part resumes).

    >>> import numpy as np, relay_ir as R
    >>> from relay_ir import nn
    >>> from relay_ir.quantize import quantize
    >>> x = R.Var("x", R.TensorType((1, 4), "float32"))
    >>> w = R.Var("w", R.TensorType((3, 4), "float32"))
    >>> mod = R.IRModule.from_expr(R.Function((x, w), nn.dense(x, w)))
    >>> rng = np.random.default_rng(0)
    >>> data = [{"x": rng.standard_normal((1, 4)).astype("float32")} for _ in range(4)]
    >>> qmod = quantize(mod, {"w": rng.standard_normal((3, 4)).astype("float32")}, dataset=data)
    >>> 'out_dtype="int32"' in R.astext(qmod) and [p.name_hint for p in qmod["main"].params]
    ['x']
"""

from __future__ import annotations

from typing import Any

from relay_ir import transform as T
from relay_ir.module import IRModule
from relay_ir.quantize.annotate import Annotation, annotate
from relay_ir.quantize.calibrate import input_scales
from relay_ir.quantize.config import QConfig, current_qconfig, qconfig
from relay_ir.quantize.prepare import prepare
from relay_ir.quantize.realize import realize


def quantize(mod: Any, params: dict[str, Any] | None = None, dataset: Any = None,
             **options: Any) -> IRModule:
    """The int8 model of the float `mod` (an IRModule or a function) with `params` bound
    as constants; `options` override the current qconfig (calibrate="minmax" | "kl" | a
    global scale, nbit, skip_conv_layers, requantize="shift" | "float"). minmax and kl
    run the float model on `dataset`, a list of dicts naming @main's remaining inputs.

    `qmod = quantize(mod, params, dataset=[{"data": x} for x in images], calibrate="kl")`
    """
    cfg = current_qconfig().replace(**options)
    mod = prepare(mod, params)
    fn = mod["main"]
    annotation = annotate(fn, cfg)
    scales = input_scales(fn, annotation, cfg, dataset)
    return T.InferType()(mod.with_function("main", realize(fn, annotation, scales, cfg)))


__all__ = ["Annotation", "QConfig", "annotate", "current_qconfig", "qconfig", "quantize"]
