"""One int8 layer on the accelerator from plain numpy operands: the template, built.

`conv2d_kernel` / `dense_kernel` instantiate the accelerator's template
(schedule.templates.accel_conv2d: conv2d_packed.accel, dense_packed.accel) for a layer's
sizes, with an optional integer tail on the ALU (per-channel int32 bias, arithmetic shift
right, ReLU, clip to int8), and build it with lowering.build(target="accel"): the one
path from a schedule to microcode. `run_conv2d` / `run_dense` pack the operands, run
the kernel on the simulator and unpack the result; `Layer.stats()` counts a layer from the
cycle model alone, for layers too large to simulate functionally.

    >>> import numpy as np
    >>> x = np.ones((1, 16, 4, 4), "int8"); w = np.ones((16, 16, 3, 3), "int8")
    >>> y, layer = run_conv2d("accel", x, w, padding=1)
    >>> int(y[0, 0, 0, 0]), int(y[0, 0, 1, 1])   # a corner sees 4 taps, the middle 9
    (64, -112)
    >>> layer.stats().counts["GEMM"] > 0
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

import tensor_expr as te
from lowering.accel.build import AccelKernel, build
from lowering.accel.simulator import Stats
from schedule.space import ConfigEntity, FallbackConfig
from schedule.templates import config_space, input_packers
from schedule.templates.accel_conv2d import narrow, packed_layer, schedule_packed
from schedule.templates.accel_env import Env
from schedule.templates.accel_layout import pack_channels, unpack_data
from tensor_expr.intrin import shift_right
from tessel_target import Target


@dataclass(frozen=True)
class Tail:
    """The ALU's work after the GEMMs: a bias per output channel, an arithmetic shift
    right, ReLU, a clip to int8 (each optional)."""

    bias: bool = False
    shift: int = 0
    relu: bool = False
    clip: bool = False


@dataclass
class Layer:
    """A built layer: the kernel, its template and args, and the packers of its operands."""

    kernel: AccelKernel
    template: str
    args: list[tuple[tuple[int, ...], str]]
    attrs: dict[str, Any]
    packers: dict[int, Any]
    out_shape: tuple[int, ...]

    def stats(self) -> Stats:
        """Cycles, utilisation and DRAM bytes from the cycle model (no data moves)."""
        return self.kernel.stats()


def _tail(env: Env, conv: te.Tensor, tail: Tail) -> tuple[list[te.Tensor], te.Tensor]:
    ob = int(conv.shape[1].value)
    extra: list[te.Tensor] = []
    x = conv
    if tail.bias:
        bias = te.placeholder((1, ob, 1, 1, env.BATCH, env.BLOCK_OUT), env.acc_dtype,
                              name="bias")
        extra.append(bias)
        x = te.compute(x.shape, lambda *i, x=x: x[i] + bias[0, i[1], 0, 0, i[4], i[5]],
                       name="bias_add")
    if tail.shift:
        x = te.compute(x.shape, lambda *i, x=x: shift_right(x[i], tail.shift), name="shr")
    if tail.relu:
        x = te.compute(x.shape, lambda *i, x=x: te.max(x[i], 0), name="relu")
    if tail.clip:
        x = te.compute(x.shape, lambda *i, x=x: te.min(te.max(x[i], -128), 127), name="clip")
    return extra, narrow(env, x)


def layer_kernel(template: str, target: Any, args: list[tuple[tuple[int, ...], str]],
                 attrs: dict[str, Any], cfg: ConfigEntity | None = None,
                 tail: Tail = Tail()) -> Layer:
    """The built kernel of `template` for these logical args (cfg None: its fallback)."""
    t = Target.parse(target)
    env = Env(t)
    cfg = cfg if cfg is not None else FallbackConfig(t)
    ins, conv = packed_layer(template, cfg, args, attrs)
    extra, out = _tail(env, conv, tail)
    kernel = build(schedule_packed(cfg, [out]), [*ins, *extra, out], t)
    return Layer(kernel, template, args, attrs, input_packers(template, args, ins, attrs),
                 tuple(int(d.value) for d in out.shape))


def config(template: str, target: Any, args: list[tuple[tuple[int, ...], str]],
           attrs: dict[str, Any], **knobs: Any) -> ConfigEntity:
    """The template's fallback config for these args with `knobs` changed: e.g. the same
    tiles without virtual threads, `config(..., oc_nthread=1, h_nthread=1)`.

        >>> cfg = config("dense_packed.accel", "accel", [((1, 64), "int8"), ((64, 64),
        ...              "int8")], {}, oc_nthread=1)
        >>> cfg["oc_nthread"].val
        1
    """
    t = Target.parse(target)
    fallback = FallbackConfig(t)
    packed = packed_layer(template, fallback, args, attrs)[1]
    schedule_packed(fallback, [narrow(Env(t), packed)])  # declares the knobs, picks values
    space = config_space(template, args, attrs, t)
    values = {k: fallback[k].to_json() for k in space.knobs}
    return space.from_json({"knobs": {**values, **knobs}})


def conv2d_kernel(target: Any, data_shape: tuple[int, ...], kernel_shape: tuple[int, ...],
                  stride: int = 1, padding: int = 0, cfg: ConfigEntity | None = None,
                  tail: Tail = Tail()) -> Layer:
    """The conv2d layer's kernel for NCHW data and OIHW kernel shapes."""
    return layer_kernel("conv2d_packed.accel", target,
                        [(tuple(data_shape), "int8"), (tuple(kernel_shape), "int8")],
                        {"strides": stride, "padding": padding}, cfg, tail)


def _run(layer: Layer, target: Any, x: np.ndarray, w: np.ndarray, bias: np.ndarray | None,
         rows: int, cols: int) -> np.ndarray:
    env = Env(target)
    ins = [layer.packers[0](x), layer.packers[1](w)]
    if bias is not None:
        ins.append(pack_channels(env, np.asarray(bias, np.int32)))
    y = np.zeros(layer.out_shape, np.int8)
    layer.kernel(*ins, y)
    return unpack_data(env, y, rows, cols)


def run_conv2d(target: Any, x: np.ndarray, w: np.ndarray, *, stride: int = 1,
               padding: int = 0, bias: np.ndarray | None = None, shift: int = 0,
               relu: bool = False, clip: bool = False, cfg: ConfigEntity | None = None
               ) -> tuple[np.ndarray, Layer]:
    """int8 NCHW `x` conv OIHW `w` (int32 `bias` [O]) on the simulator: (NCHW int8, layer)."""
    layer = conv2d_kernel(target, x.shape, w.shape, stride, padding, cfg,
                          Tail(bias is not None, shift, relu, clip))
    return _run(layer, target, x, w, bias, x.shape[0], w.shape[0]), layer


def run_dense(target: Any, a: np.ndarray, w: np.ndarray, *, bias: np.ndarray | None = None,
              shift: int = 0, relu: bool = False, clip: bool = False,
              cfg: ConfigEntity | None = None) -> tuple[np.ndarray, Layer]:
    """int8 `a` [M, K] . `w` [N, K]^T on the simulator: (int8 [M, N], layer)."""
    layer = layer_kernel("dense_packed.accel", target, [(a.shape, "int8"), (w.shape, "int8")],
                         {}, cfg, Tail(bias is not None, shift, relu, clip))
    return _run(layer, target, a, w, bias, a.shape[0], w.shape[0])[:, :, 0, 0], layer


__all__ = ["Layer", "Tail", "config", "conv2d_kernel", "layer_kernel", "run_conv2d", "run_dense"]
