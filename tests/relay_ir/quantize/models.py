"""Small float CNNs for the quantization tests, with their params and sample inputs."""

from __future__ import annotations

from typing import Any

import numpy as np

import relay_ir as R
from relay_ir import nn

F32 = "float32"


def _var(name: str, shape: tuple[int, ...]) -> R.Var:
    return R.Var(name, R.TensorType(shape, F32))


def _he(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    fan_in = int(np.prod(shape[1:]))
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(F32)


def small_cnn(rng: np.random.Generator, image: int = 8, classes: int = 10
              ) -> tuple[R.IRModule, dict[str, np.ndarray]]:
    """x -> conv-bias-relu -> maxpool -> [conv-bias-relu -> conv-bias] + residual -> relu
    -> flatten -> dense-bias: three conv2d (indices 0, 1, 2) and one dense."""
    c = 8
    x = _var("x", (1, 3, image, image))
    shapes = {"w0": (c, 3, 3, 3), "w1": (c, c, 3, 3), "w2": (c, c, 3, 3),
              "fc": (classes, c * (image // 2) ** 2)}
    ws = {k: _var(k, s) for k, s in shapes.items()}
    bs = {f"b{k}": _var(f"b{k}", (shapes[f"w{k}"][0],)) for k in range(3)}
    bs["bfc"] = _var("bfc", (classes,))
    h = nn.relu(nn.bias_add(nn.conv2d(x, ws["w0"], padding=(1, 1)), bs["b0"]))
    h = nn.max_pool2d(h, pool_size=(2, 2), strides=(2, 2))
    r = nn.relu(nn.bias_add(nn.conv2d(h, ws["w1"], padding=(1, 1)), bs["b1"]))
    r = nn.bias_add(nn.conv2d(r, ws["w2"], padding=(1, 1)), bs["b2"])
    h = nn.relu(R.add(r, h))
    out = R.add(nn.dense(R.reshape(h, (1, -1)), ws["fc"]), bs["bfc"])
    params: dict[str, Any] = {k: _he(rng, s) for k, s in shapes.items()}
    params.update({k: (rng.standard_normal(v.type_annotation.shape) * 0.1).astype(F32)
                   for k, v in bs.items()})
    fn = R.Function((x, *ws.values(), *bs.values()), out)
    return R.IRModule.from_expr(fn), params


def images(rng: np.random.Generator, n: int, image: int = 8) -> list[dict[str, np.ndarray]]:
    """n input dicts for small_cnn, standard normal images."""
    return [{"x": rng.standard_normal((1, 3, image, image)).astype(F32)} for _ in range(n)]
