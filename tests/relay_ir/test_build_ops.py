"""relay_ir.build op by op: each op strategy compiled in a one-op (or two-op) model and
compared with relay_ir.interpret on fresh random inputs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import relay_ir as R
from relay_ir import nn
from tests.relay_ir import programs as P
from tests.rng import seeded_rng

F = "float32"
# name -> (input shapes (dtype float32 unless given), body builder over the input vars)
CASES: dict[str, tuple[list[Any], Callable[..., Any]]] = {
    "exp_tanh_sigmoid": ([(4, 33)], lambda x: R.sigmoid(R.tanh(R.exp(x)))),
    "log_sqrt_abs": ([(3, 20)], lambda x: R.log(R.sqrt(R.abs(x)))),
    "erf_negative_floor": ([(2, 9)], lambda x: R.floor(R.negative(R.erf(x)))),
    "broadcast_ops": ([(4, 1, 5), (3, 1)], lambda x, y: R.maximum(
        R.divide(R.subtract(x, y), R.add(R.abs(y), P.const(1.0))), R.multiply(x, y))),
    "where_greater": ([(6, 7), (6, 7)], lambda x, y: R.where(R.greater(x, y), x, y)),
    "clip_leaky_relu": ([(5, 40)], lambda x: nn.leaky_relu(R.clip(x, -0.5, 0.7), 0.2)),
    "cast_round": ([(4, 8)], lambda x: R.cast(R.round(R.multiply(x, P.const(3.0))),
                                              "int32")),
    "power": ([(4, 8)], lambda x: R.power(R.abs(x), P.const(1.5))),
    "transpose_reshape": ([(2, 3, 4)], lambda x: R.reshape(R.transpose(x, (2, 0, 1)),
                                                           (4, 6))),
    "squeeze_expand_dims": ([(3, 1, 5)], lambda x: R.expand_dims(R.squeeze(x, (1,)), 0, 2)),
    "strided_slice": ([(6, 10)], lambda x: R.strided_slice(x, (1, 2), (5, 9), (2, 3))),
    "concatenate": ([(2, 3), (4, 3)], lambda x, y: R.concatenate([x, R.tanh(y)], axis=0)),
    "split": ([(6, 4)], lambda x: R.TupleGetItem(R.split(x, 3, axis=0), 1)),
    "take": ([(5, 4), ((3,), "int32")], lambda x, i: R.take(x, i, axis=0)),
    "pad": ([(1, 2, 3, 3)], lambda x: nn.pad(x, ((0, 0), (0, 0), (1, 2), (2, 1)), 0.5)),
    "layout_transform": ([(1, 3, 4, 5)], lambda x: R.layout_transform(x, "NCHW", "NHWC")),
    "sum_keepdims": ([(4, 6, 8)], lambda x: R.sum(x, axis=(1,), keepdims=True)),
    "mean_exclude": ([(4, 6, 8)], lambda x: R.mean(x, axis=(1,), exclude=True)),
    "max_min": ([(5, 7)], lambda x: R.add(R.max(x, axis=(1,)), R.min(x, axis=(1,)))),
    "argmax": ([(5, 7)], lambda x: R.argmax(x, axis=(1,))),
    "max_pool2d": ([(1, 3, 9, 9)], lambda x: nn.max_pool2d(x, (3, 3), (2, 2),
                                                           padding=(1, 1))),
    "avg_pool2d": ([(1, 3, 8, 8)], lambda x: nn.avg_pool2d(x, (2, 2), (2, 2))),
    "global_avg_pool2d": ([(1, 5, 6, 6)], lambda x: nn.global_avg_pool2d(x)),
    "softmax_axis0": ([(6, 5)], lambda x: nn.softmax(x, axis=0)),
    "log_softmax": ([(3, 12)], lambda x: nn.log_softmax(x, axis=-1)),
    "layer_norm": ([(4, 16), (16,), (16,)], lambda x, g, b: nn.layer_norm(x, g, b)),
    "conv2d_strided": ([(1, 4, 9, 9), (8, 4, 3, 3)], lambda x, w: nn.relu(
        nn.conv2d(x, w, strides=(2, 2), padding=(1, 1)))),
    "conv2d_depthwise": ([(1, 8, 7, 7), (8, 1, 3, 3)], lambda x, w: nn.conv2d(
        x, w, padding=(1, 1), groups=8)),
    "conv2d_grouped": ([(1, 8, 6, 6), (4, 4, 3, 3)], lambda x, w: nn.conv2d(
        x, w, padding=(1, 1), groups=2)),
    "conv2d_dilated": ([(1, 3, 10, 10), (4, 3, 3, 3)], lambda x, w: nn.conv2d(
        x, w, dilation=(2, 2))),
    "dense_clip": ([(3, 10), (7, 10)], lambda x, w: R.clip(nn.dense(x, w), -0.3, 0.3)),
    "matmul": ([(5, 6), (6, 4)], lambda a, b: R.matmul(a, b)),
    "batch_matmul": ([(2, 3, 5), (2, 4, 5)], lambda a, b: nn.batch_matmul(a, b)),
    "full_ones_like": ([(3, 4)], lambda x: R.add(R.add(x, R.full(P.const(2.5), (3, 4))),
                                                 R.ones_like(x))),
    "logical": ([(4, 5), (4, 5)], lambda x, y: R.cast(R.logical_and(
        R.less(x, y), R.logical_not(R.greater(x, P.const(0.5)))), "float32")),
    "rsqrt_ceil_copy": ([(3, 7)], lambda x: R.copy(R.ceil(R.rsqrt(R.abs(x))))),
    "prod_argmin": ([(4, 5)], lambda x: R.add(R.prod(x, axis=(1,)),
                                              R.cast(R.argmin(x, axis=(1,)), "float32"))),
    "dropout_bias_add": ([(2, 6), (6,)], lambda x, b: R.TupleGetItem(
        nn.dropout(nn.bias_add(x, b, axis=1)), 0)),
}


def _inputs(shapes: list[Any], rng: np.random.Generator) -> list[np.ndarray]:
    out = []
    for s in shapes:
        if isinstance(s[-1], str):
            out.append(rng.integers(0, s[0][0] + 2, s[0]).astype(s[1]))
        else:
            out.append(rng.standard_normal(s).astype(F))
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_compiles_to_interpreter_semantics(name: str) -> None:
    shapes, body = CASES[name]
    rng = seeded_rng()
    xs = [P.tvar(f"v{k}", s if not isinstance(s[-1], str) else s[0],
                 F if not isinstance(s[-1], str) else s[1]) for k, s in enumerate(shapes)]
    mod = P.main_module(xs, body(*xs))
    lib = R.build(mod)
    ins = _inputs(shapes, rng)
    got = lib.run(*ins)
    want = R.interpret(mod, *ins)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
