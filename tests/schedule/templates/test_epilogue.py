"""Epilogue fusion: bias, relu, residual add, batch-norm scale/shift and clip computed in the
output stage of dense and conv2d, from the local accumulator tile."""

from __future__ import annotations

import numpy as np

import lowering
import tensor_expr as te
from schedule.templates import instantiate
from tests.rng import seeded_rng
from tests.schedule.templates.refs import close, conv2d_nchw, rand, run


def _bias_relu_2d(c: te.Tensor) -> tuple[list[te.Tensor], te.Tensor]:
    bias = te.placeholder((c.shape[1],), name="bias")
    add = te.compute(c.shape, lambda i, j: c[i, j] + bias[j], name="bias_add", tag="broadcast")
    return [bias], te.compute(c.shape, lambda i, j: te.max(add[i, j], 0.0), name="relu",
                              tag="elemwise")


def _bias_relu_nchw(c: te.Tensor) -> tuple[list[te.Tensor], te.Tensor]:
    bias = te.placeholder((c.shape[1],), name="bias")
    out = te.compute(c.shape, lambda n, k, h, w: te.max(c[n, k, h, w] + bias[k], 0.0),
                     name="bias_relu", tag="broadcast")
    return [bias], out


def _bn_residual_clip(c: te.Tensor) -> tuple[list[te.Tensor], te.Tensor]:
    scale = te.placeholder((c.shape[1],), name="scale")
    shift = te.placeholder((c.shape[1],), name="shift")
    res = te.placeholder(c.shape, name="residual")
    bn = te.compute(c.shape, lambda n, k, h, w: c[n, k, h, w] * scale[k] + shift[k], name="bn")
    add = te.compute(c.shape, lambda *i: bn[i] + res[i], name="add")
    return [scale, shift, res], te.compute(c.shape, lambda *i: te.min(te.max(add[i], 0.0), 6.0),
                                           name="clip")


def test_dense_bias_relu_equals_numpy() -> None:
    rng = seeded_rng()
    args = [((16, 24), "float32"), ((32, 24), "float32")]
    s, tensors = instantiate("dense.x86", args, epilogue=_bias_relu_2d)
    assert [t.name for t in tensors] == ["data", "weight", "bias", "relu"]
    x, w, b = rand(rng, (16, 24)), rand(rng, (32, 24)), rand(rng, (32,))
    close(run(s, tensors, [x, w, b]), np.maximum(x @ w.T + b, 0))


def test_dense_epilogue_reads_the_local_accumulator() -> None:
    args = [((16, 24), "float32"), ((32, 24), "float32")]
    s, tensors = instantiate("dense.x86", args, epilogue=_bias_relu_2d)
    text = str(lowering.lower(s, tensors))
    assert "in local" in text and "bias_add" not in text  # inlined into the output stage
    assert "allocate dense[" in text and "in global" not in text.split("allocate dense[")[1][:60]


def test_conv2d_nchw_bias_relu_equals_numpy() -> None:
    rng = seeded_rng()
    args = [((1, 4, 8, 8), "float32"), ((8, 4, 3, 3), "float32")]
    s, tensors = instantiate("conv2d_nchw.x86", args, {"padding": 1}, epilogue=_bias_relu_nchw)
    x, w, b = rand(rng, (1, 4, 8, 8)), rand(rng, (8, 4, 3, 3)), rand(rng, (8,))
    want = np.maximum(conv2d_nchw(x, w, 1, 1) + b[None, :, None, None], 0)
    close(run(s, tensors, [x, w, b]), want)


def test_conv2d_nchwc_bn_residual_clip_equals_numpy() -> None:
    rng = seeded_rng()
    args = [((1, 16, 6, 6), "float32"), ((16, 16, 3, 3), "float32")]
    s, tensors = instantiate("conv2d_NCHWc.x86", args, {"padding": 1},
                             epilogue=_bn_residual_clip)
    x, w = rand(rng, (1, 16, 6, 6)), rand(rng, (16, 16, 3, 3))
    sc, sh, res = rand(rng, (16,)), rand(rng, (16,)), rand(rng, (1, 16, 6, 6))
    conv = conv2d_nchw(x, w, 1, 1)
    want = np.clip(conv * sc[None, :, None, None] + sh[None, :, None, None] + res, 0, 6)
    close(run(s, tensors, [x, w, sc, sh, res]), want)


def test_depthwise_bias_relu_equals_numpy() -> None:
    from tests.schedule.templates.refs import depthwise_nchw

    rng = seeded_rng()
    args = [((1, 8, 7, 7), "float32"), ((8, 1, 3, 3), "float32")]
    s, tensors = instantiate("depthwise_conv2d_nchw.x86", args, {"padding": 1},
                             epilogue=_bias_relu_nchw)
    x, w, b = rand(rng, (1, 8, 7, 7)), rand(rng, (8, 1, 3, 3)), rand(rng, (8,))
    close(run(s, tensors, [x, w, b]),
          np.maximum(depthwise_nchw(x, w, 1, 1) + b[None, :, None, None], 0))


def test_ops_library_graph_schedules_with_the_dense_template() -> None:
    from schedule.space import FallbackConfig
    from schedule.templates import TEMPLATES
    from tensor_expr import ops

    rng = seeded_rng()
    x, w, b = te.placeholder((8, 16), name="x"), te.placeholder((24, 16), name="w"), \
        te.placeholder((24,), name="b")
    out = ops.relu(ops.bias_add(ops.dense(x, w), b, axis=1))
    s = TEMPLATES["dense.x86"].schedule(FallbackConfig(), [out])
    xa, wa, ba = rand(rng, (8, 16)), rand(rng, (24, 16)), rand(rng, (24,))
    close(run(s, [x, w, b, out], [xa, wa, ba]), np.maximum(xa @ wa.T + ba, 0))


def test_ops_library_conv_graph_schedules_with_the_nchw_template() -> None:
    from schedule.space import FallbackConfig
    from schedule.templates import TEMPLATES
    from tensor_expr import ops

    rng = seeded_rng()
    x, w = te.placeholder((1, 4, 8, 8), name="x"), te.placeholder((8, 4, 3, 3), name="w")
    b = te.placeholder((8,), name="b")
    out = ops.relu(ops.bias_add(ops.conv2d_nchw(x, w, padding=1), b, axis=1))
    s = TEMPLATES["conv2d_nchw.x86"].schedule(FallbackConfig(), [out])
    xa, wa, ba = rand(rng, (1, 4, 8, 8)), rand(rng, (8, 4, 3, 3)), rand(rng, (8,))
    want = np.maximum(conv2d_nchw(xa, wa, 1, 1) + ba[None, :, None, None], 0)
    close(run(s, [x, w, b, out], [xa, wa, ba]), want)
