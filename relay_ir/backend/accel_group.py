"""One fused group as an accelerator kernel: an int8 conv2d or dense and its integer tail.

A group goes to the accelerator when its anchor is an int8 conv2d or dense with a
constant weight (relay_ir.quantize makes them). The accelerator runs the anchor and the
longest part of the tail after it that the tensor ALU does in place on the accumulators:
add, subtract, multiply by a constant, ReLU, maximum/minimum, clip with integer bounds,
right/left shift by a constant in [0, 31], a cast to int32, each other operand a scalar
constant, a constant per output channel (a bias) or an int32 tensor of the output's shape
(a residual), up to a cast to int8 (what the STORE writes) or else storing the int32
value (four byte planes). What follows (a dequantization to float, a residual that must
be widened or shifted first) is the `Remainder`, compiled for the host. A group whose
anchor cannot run there says why (`Rejected`) and runs on the host CPU.

The kernel is the anchor's template (conv2d_packed.accel / dense_packed.accel) with the
tail as its epilogue, configured by the tuning record of the logical task (the one
`tessel tune --target accel` tunes) or the template's fallback, built with
lowering.build(target="accel"). Its arguments are the group's parameters it reads, in
VTA's packed layouts (schedule.templates.accel_layout): data and residuals NCHW1n16c
(packed by the caller's graph), the weight OIHW16o16i and the per-channel constants as
accumulator elements (packed once at build, `AccelGroup.prepack`), then the packed
output.

    >>> ag = accel_group(fused_fn, const_params, "accel", tuning)   # doctest: +SKIP
    >>> ag.kernel(*packed_inputs, packed_out)                       # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

import lowering
import tensor_expr as te
from relay_ir.backend.lower_group import AnchorTask, anchor_task, group_name, group_ops
from relay_ir.backend.tuned import TuningScope
from relay_ir.expr import Call, Constant, Expr, Function, Var
from relay_ir.op.registry import Op
from relay_ir.strategy import strategy_of
from relay_ir.ty import TensorType
from relay_ir.visitor import post_order
from schedule.space import FallbackConfig
from schedule.templates.accel_conv2d import (
    narrow,
    packed_layer,
    schedule_alu_packed,
    schedule_packed,
    store_wide,
)
from schedule.templates.accel_env import Env
from schedule.templates.accel_layout import pack_channels, pack_kernel
from tensor_expr.intrin import shift_left, shift_right
from tensor_expr.tensor import Tensor
from tessel_errors import TesselError

ACC = "int32"
IMM16 = (-(1 << 15), (1 << 15) - 1)  # the ALU's signed 16-bit immediate


class Rejected(Exception):
    """Why a group does not run on the accelerator (it runs on the host CPU)."""


@dataclass
class Remainder:
    """The ops of a group after the longest prefix the accelerator runs: a function of
    (the accelerator's logical result, the group parameters `params` names), compiled
    for the host; `why` the chain stopped."""

    fn: Function
    params: list[int]
    why: str


@dataclass
class AccelGroup:
    """A group compiled for the accelerator: the kernel and what each argument is.

    `roles[k]` of group parameter k: "data" (the anchor's input, packed data), "weight"
    (the anchor's constant weight), "channels" (a per-channel constant), "tensor" (an
    int32 residual of the output's shape, packed data), None (read by the host's `rest`
    only). `prepack[k]` packs the constant
    of parameter k at build. `logical_out` is the output's logical shape."""

    name: str
    kernel: Any
    task: AnchorTask | None  # None: an ALU-only group
    roles: list[str]
    prepack: dict[int, Callable[[np.ndarray], np.ndarray]]
    out_shape: tuple[int, ...]
    logical_out: tuple[int, ...]
    schedule: str = ""
    tuned: bool = False
    in_shapes: list[tuple[int, ...]] = field(default_factory=list)
    rest: Remainder | None = None


def _shape(t: Any) -> tuple[int, ...]:
    if not isinstance(t, TensorType) or not all(isinstance(d, int) for d in t.shape):
        raise Rejected("a value without a static tensor shape")
    return tuple(int(d) for d in t.shape)


def _scalar(e: Any) -> int | None:
    """The int value of a scalar integer constant, else None."""
    if isinstance(e, Constant):
        a = np.asarray(e.data)
        if a.size == 1 and a.dtype.kind in "iu":
            return int(a.reshape(()))
    return None


def _packed_shape(env: Env, logical: tuple[int, ...]) -> tuple[int, ...]:
    """The packed shape of a logical NCHW (or [M, K]) value."""
    n, c, h, w = logical if len(logical) == 4 else (*logical, 1, 1)
    return (-(-n // env.BATCH), -(-c // env.BLOCK_OUT), h, w, env.BATCH, env.BLOCK_OUT)


def _per_channel(shape: tuple[int, ...], out: tuple[int, ...]) -> bool:
    """Whether a constant of `shape` broadcasts against `out` along the channels only."""
    if len(shape) > len(out):
        return False
    full = (1,) * (len(out) - len(shape)) + shape
    return all(d == 1 or (k == 1 and d == out[1]) for k, d in enumerate(full))


class _Builder:
    """The group's tail as TE stages on the packed accumulators."""

    def __init__(self, fn: Function, consts: frozenset[int], task: AnchorTask | None,
                 env: Env, cfg: Any, base: Var | None = None) -> None:
        self.fn, self.consts, self.task, self.env, self.cfg = fn, consts, task, env, cfg
        self.roles: dict[Var, str] = {}
        self.tensors: dict[Var, Tensor] = {}
        if task is not None:
            self.logical_out = _shape(task.anchor.checked_type)
            self.ins, self.conv = packed_layer(task.template, cfg, list(task.specs),
                                               task.attrs)
            self.start: Expr = task.anchor
            data, weight = (fn.params[k] for k in task.operands)
            self._bind(data, "data", self.ins[0])
            self._bind(weight, "weight", self.ins[1])
        else:  # an ALU-only group: the chain starts at an int32 parameter, loaded
            assert base is not None
            self.logical_out = _shape(base.checked_type)
            if base.checked_type.dtype != ACC or len(self.logical_out) not in (2, 4):
                raise Rejected("the ALU reads int32 tensors of rank 2 or 4")
            self.conv = te.placeholder(_packed_shape(env, self.logical_out), ACC,
                                       name="acc_in")
            self.start = base
            self._bind(base, "tensor", self.conv)
        self.shape = tuple(int(d.value) for d in self.conv.shape)

    def _bind(self, p: Var, role: str, t: Tensor) -> None:
        if p in self.roles and self.roles[p] != role:
            raise Rejected(f"parameter %{p.name_hint} is used both as {self.roles[p]} and "
                           f"as {role}")
        self.roles[p], self.tensors[p] = role, t

    def operand(self, e: Any) -> Any:
        """An ALU operand: an int immediate or a tensor read at the output element."""
        k = _scalar(e)
        if k is not None:
            return k
        if not isinstance(e, Var) or e not in self.fn.params:
            raise Rejected(f"an operand computed inside the group ({type(e).__name__}); "
                           "the ALU combines the accumulators with constants or loaded "
                           "tensors only")
        pos = self.fn.params.index(e)
        shape, dtype = _shape(e.checked_type), e.checked_type.dtype
        if pos in self.consts and dtype == ACC and _per_channel(shape, self.logical_out):
            if e not in self.tensors:
                ob = self.shape[1]
                b, bo = self.env.BATCH, self.env.BLOCK_OUT
                self._bind(e, "channels", te.placeholder((1, ob, 1, 1, b, bo), ACC,
                                                         name=f"chan{pos}"))
            t = self.tensors[e]
            return lambda i: t[0, i[1], 0, 0, i[4], i[5]]
        if shape == self.logical_out and dtype == ACC and pos not in self.consts:
            if e not in self.tensors:
                self._bind(e, "tensor", te.placeholder(self.shape, ACC, name=f"res{pos}"))
            t = self.tensors[e]
            return lambda i: t[i]
        raise Rejected(f"operand %{e.name_hint} ({dtype} {shape}) is neither a per-channel "
                       f"int32 constant nor an int32 tensor of the output's shape "
                       f"{self.logical_out}")

    def build(self, split: bool = False) -> tuple[Tensor, Expr, str]:
        """(the stored output, the expression it holds, why the chain stops there): the
        whole group, or with `split` the longest prefix of the anchor's chain the ALU
        runs (the rest is the host's)."""
        chain: dict[int, Tensor] = {id(self.start): self.conv}
        last: Expr = self.start
        why = ""
        for e in post_order(self.fn.body):
            if not (isinstance(e, Call) and isinstance(e.op, Op)) or e is self.start:
                continue
            saved = dict(self.roles), dict(self.tensors)
            try:
                if chain[id(last)].dtype != ACC:
                    raise Rejected("ops after the cast to int8")
                ins = [a for a in e.args if id(a) in chain]
                if len(ins) != 1:
                    raise Rejected(f"{e.op.name} does not continue the anchor's result (the "
                                   "ALU updates the accumulators in place)")
                x = chain[id(ins[0])]
                other = [a for a in e.args if id(a) not in chain]
                chain[id(e)] = self._op(e, x, [self.operand(a) for a in other],
                                        e.args[0] is ins[0])
            except Rejected as r:
                if not split:
                    raise
                self.roles, self.tensors = saved
                why = str(r)
                break
            last = e
        if not split and last is not self.fn.body:
            raise Rejected("the group's result is not the chain's end")
        out = chain[id(last)]
        return (store_wide(out) if out.dtype == ACC else out), last, why

    def _op(self, e: Call, x: Tensor, rhs: list[Any], x_first: bool) -> Tensor:
        name = e.op.name
        if name == "cast":
            if e.attrs.dtype == self.env.out_dtype:
                return narrow(self.env, x)
            if e.attrs.dtype == ACC:
                return x
            raise Rejected(f"a cast to {e.attrs.dtype}")
        if x.dtype != ACC:
            raise Rejected(f"{name} after the narrowing")

        def imm(v: Any, lo: int, hi: int, what: str) -> int:
            if not isinstance(v, int) or not lo <= v <= hi:
                raise Rejected(f"{name} by {what} outside [{lo}, {hi}]")
            return v

        def at(v: Any, i: tuple) -> Any:
            return v(i) if callable(v) else te.const(imm(v, *IMM16, "an immediate"), ACC)

        if name == "nn.relu":
            f = lambda i: te.max(x[i], te.const(0, ACC))  # noqa: E731
        elif name == "clip":
            lo, hi = e.attrs.a_min, e.attrs.a_max
            if lo != math.floor(lo) or hi != math.floor(hi):
                raise Rejected("clip with bounds that are not integers")
            lo_i, hi_i = (imm(int(v), *IMM16, "a bound") for v in (lo, hi))
            f = lambda i: te.min(te.max(x[i], te.const(lo_i, ACC)), te.const(hi_i, ACC))  # noqa
        elif name in ("right_shift", "left_shift"):
            if not x_first:
                raise Rejected(f"{name} of a constant by the accumulators")
            k = imm(rhs[0], 0, 31, "an amount")
            shift = shift_right if name == "right_shift" else shift_left
            f = lambda i: shift(x[i], te.const(k, ACC))  # noqa: E731
        elif name in ("add", "multiply", "maximum", "minimum"):
            (r,) = rhs
            if name == "multiply" and callable(r):
                raise Rejected("multiply by a tensor (the ALU multiplies by constants here)")
            op = {"add": lambda a, b: a + b, "multiply": lambda a, b: a * b,
                  "maximum": te.max, "minimum": te.min}[name]
            f = lambda i: op(x[i], at(r, i))  # noqa: E731
        elif name == "subtract":
            (r,) = rhs
            if not x_first or callable(r):
                raise Rejected("subtract other than of a constant from the accumulators")
            r = imm(r, -IMM16[1], -IMM16[0] - 1, "an immediate")  # added negated
            f = lambda i: x[i] - te.const(r, ACC)  # noqa: E731
        else:
            raise Rejected(f"{name} is not a tensor ALU operation")
        return te.compute(x.shape, lambda *i: f(i), name=name.replace(".", "_"))


def _channel_packer(env: Env, channels: int) -> Callable[[np.ndarray], np.ndarray]:
    """A per-channel constant (any shape broadcasting along the channels, or one value)
    as accumulator elements."""
    return lambda v: pack_channels(env, np.broadcast_to(np.asarray(v).reshape(-1),
                                                        (channels,)))


def accel_group(fn: Function, consts: frozenset[int], target: Any,
                tuning: TuningScope | None = None) -> AccelGroup:
    """The accelerator kernel of a fused group (Rejected, saying why, if it has none)."""
    env = Env(target)
    task = anchor_task(fn, consts, target)
    if task is None or task.template not in ("conv2d_packed.accel", "dense_packed.accel"):
        anchors = [c for c in group_ops(fn) if c.op.name in ("nn.conv2d", "nn.dense")]
        dtypes = [getattr(a.checked_type, "dtype", "?") for c in anchors[:1] for a in c.args]
        if dtypes and any(dt != "int8" for dt in dtypes):
            raise Rejected(f"the {anchors[0].op.name} reads {'/'.join(dtypes)}, not int8 x "
                           "int8")
        ops = ", ".join(sorted({c.op.name for c in group_ops(fn)}))
        raise Rejected(f"no int8 conv2d or dense anchor with its operands as parameters "
                       f"({ops})")
    if any(dt != "int8" for _, dt in task.specs):
        raise Rejected(f"the {task.anchor.op.name} reads "
                       f"{'/'.join(dt for _, dt in task.specs)}, not int8 x int8")
    if task.operands[1] not in consts:
        raise Rejected("the weight is not a constant (packed once at build)")
    try:  # what of the tail runs on the ALU, before asking for a tuned config
        _Builder(fn, consts, task, env, FallbackConfig(target)).build(split=True)
        tuned = tuning.config(task.template, list(task.specs), task.attrs, target) \
            if tuning else None
        cfg = tuned or FallbackConfig(target)
        b = _Builder(fn, consts, task, env, cfg)
        out, cut, why = b.build(split=True)
        rest = _remainder(fn, cut, task.anchor, why) if cut is not fn.body else None
        args = [b.tensors[p] for p in fn.params if p in b.roles] + [out]
        kernel = lowering.build(schedule_packed(cfg, [out]), args, target=target,
                                name=group_name(fn))
    except TesselError as e:
        raise Rejected(str(e)) from None
    prepack: dict[int, Callable[[np.ndarray], np.ndarray]] = {}
    for k, p in enumerate(fn.params):
        if b.roles.get(p) == "weight":
            prepack[k] = lambda w: pack_kernel(env, w)
        elif b.roles.get(p) == "channels":
            prepack[k] = _channel_packer(env, b.logical_out[1])
    return AccelGroup(group_name(fn), kernel, task, [b.roles.get(p) for p in fn.params],
                      prepack, b.shape, b.logical_out, task.template, tuned is not None,
                      [tuple(int(d.value) for d in t.shape) for t in args[:-1]], rest)


def _remainder(fn: Function, cut: Expr, anchor: Call, why: str) -> Remainder:
    """The host's part of a group whose tail the ALU stops running at `cut` (after it,
    `why`): a Primitive function of the accelerator's result and the parameters the
    rest reads."""
    from relay_ir import transform as T
    from relay_ir.module import IRModule
    from relay_ir.transform.rewrite import rewrite
    from relay_ir.visitor import free_vars

    acc = Var("acc", cut.checked_type)
    body = rewrite(fn.body, lambda old, new: acc if old is cut else new)
    if any(e is anchor for e in post_order(body)):
        raise Rejected(f"{why}; and the rest of the group reads more than the "
                       "accelerator's result")
    used = {id(v) for v in free_vars(body)}
    keep = [k for k, p in enumerate(fn.params) if id(p) in used]
    rest = Function((acc, *(fn.params[k] for k in keep)), body, None, (), fn.attrs)
    typed = T.InferType()(IRModule.from_expr(rest))["main"]
    return Remainder(typed, keep, why)


def accel_alu_group(fn: Function, consts: frozenset[int], target: Any) -> AccelGroup:
    """An anchor-free group of ALU operations on one int32 tensor parameter (a
    requantization after a residual add, say) as an accelerator kernel: the tensor
    loaded into the accumulators tile by tile, updated in place, stored (Rejected if the
    group is anything else)."""
    env = Env(target)
    tensors = [p for k, p in enumerate(fn.params) if k not in consts]
    if len(tensors) != 1 or group_ops(fn) == [] or any(
            strategy_of(c.op).kind == "anchor" for c in group_ops(fn)):
        raise Rejected("not an ALU chain over one tensor")
    try:
        b = _Builder(fn, consts, None, env, FallbackConfig(target), base=tensors[0])
        out, _, _ = b.build()
        unused = [p for p in fn.params if p not in b.roles]
        if unused:
            raise Rejected(f"parameter %{unused[0].name_hint} is used other than by the ALU")
        args = [b.tensors[p] for p in fn.params] + [out]
        kernel = lowering.build(schedule_alu_packed(env, [out]), args, target=target,
                                name=group_name(fn))
    except TesselError as e:
        raise Rejected(str(e)) from None
    prepack = {k: _channel_packer(env, b.logical_out[1])
               for k, p in enumerate(fn.params) if b.roles[p] == "channels"}
    return AccelGroup(group_name(fn), kernel, None, [b.roles[p] for p in fn.params],
                      prepack, b.shape, b.logical_out, "alu_packed", False,
                      [tuple(int(d.value) for d in t.shape) for t in args[:-1]])


__all__ = ["AccelGroup", "Rejected", "accel_alu_group", "accel_group"]
