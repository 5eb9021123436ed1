"""Realize: rewrite @main so that the annotated conv2d / dense run on integers.

Every value of the rewritten graph is either float (an ordinary expression) or an
integer tensor `q` with a scale `s` (a float64 scalar, or with requantize="float" an
array broadcasting against q: one per output channel) that stands for the real q * s:

- a quantized anchor: its float input becomes int8, cast(clip(round(x * (1/s_in)), -qmax,
  qmax), int8) (an integer input is requantized, below); its weight is quantized now, at
  quantize time, into an int8 constant with scale s_w (the power of two at or above its
  largest magnitude over 2**(nbit-1), or per output channel that channel's largest
  magnitude over qmax); the call runs int8 x int8 with out_dtype int32, and its result
  has scale s_in * s_w.
- requantize int32 (scale s) -> int8 (scale s_in of the next anchor): when s / s_in is a
  power of two 2**-k, the rounding right shift (x + 2**(k-1)) >> k, what the
  accelerator's ALU does; else (requantize="float") round(cast(x, float32) * (s / s_in)).
  Then clip to [-qmax, qmax] and cast to int8.
- a constant bias added to an integer value becomes an int32 constant at its scale;
  relu, max pooling and reshapes run on the integers; two integer values added together
  (a residual connection) are brought to the finer of their scales by a left shift when
  the scales differ by a power of two; a float value added to an integer one joins it
  as the int8 value a quantized anchor reads it as, if one does (the shortcut out of a
  float part of the graph).
- every other op stays float: its integer inputs are dequantized, cast(q, float32) * s;
  so is the output of @main.

The integer steps are exact and each float step is one IEEE operation (a multiply, a
round half away from zero), so relay_ir.build of the result equals relay_ir.interpret
bit for bit wherever the graph is integer from a quantized input to a dequantized output.

    >>> # realize(fn, annotation, scales, cfg) -> Function; see relay_ir.quantize.quantize
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from relay_ir.expr import Call, Constant, Expr, Function, Tuple, TupleGetItem, Var
from relay_ir.op.registry import REFERENCES, Op
from relay_ir.op.tensor import add, cast, clip, left_shift, multiply, right_shift, round
from relay_ir.quantize.annotate import Annotation
from relay_ir.quantize.calibrate import power2_scale
from relay_ir.quantize.config import QConfig
from relay_ir.ty import TensorType
from relay_ir.visitor import post_order
from tessel_errors import RelayError

INPUT_DTYPE = "int8"  # what the quantized anchors read
ACC_DTYPE = "int32"  # what they accumulate and the integer graph carries
LAYOUT_OPS = ("reshape", "squeeze", "expand_dims", "transpose")
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class QValue:
    """An integer tensor `expr` of `dtype` standing for expr * scale (scale broadcasts),
    whose magnitude is at most `bound` on every input (so int32 steps provably fit)."""

    expr: Expr
    scale: np.ndarray
    dtype: str
    shape: tuple[int, ...] | None
    bound: int


def _scale(s: Any) -> np.ndarray:
    a = np.asarray(s, np.float64)
    return a.reshape(()) if a.size == 1 else a


def _power_of_two(r: np.ndarray) -> int | None:
    """k when r is exactly the scalar 2**k."""
    if r.size != 1:
        return None
    mant, exp = math.frexp(float(r))
    return exp - 1 if mant == 0.5 else None


def _shape(e: Expr) -> tuple[int, ...] | None:
    t = e.checked_type
    if isinstance(t, TensorType) and all(isinstance(d, int) for d in t.shape):
        return tuple(int(d) for d in t.shape)
    return None


def _i32(v: int) -> Constant:
    return Constant(np.asarray(v, np.int32))


def _f32(v: Any) -> Constant:
    return Constant(np.asarray(v, np.float32))


def round_half_away(x: np.ndarray) -> np.ndarray:
    """numpy rounding as relay's round: half away from zero."""
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def quantize_weight(w: np.ndarray, cfg: QConfig) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weight, scale) of a float weight whose axis 0 is the output channels: one
    power-of-two scale (a 0-d array), or with requantize="float" one scale per channel
    (shape (O,))."""
    w = np.asarray(w, np.float64)
    if cfg.requantize == "shift":
        scale = np.asarray(power2_scale(float(np.max(np.abs(w), initial=0.0)), cfg.nbit))
        q = round_half_away(w / scale)
    else:
        top = np.max(np.abs(w).reshape(w.shape[0], -1), axis=1, initial=0.0)
        scale = np.where(top > 0, top, 1.0) / cfg.qmax
        q = round_half_away(w / scale.reshape((-1,) + (1,) * (w.ndim - 1)))
    return np.clip(q, -cfg.qmax, cfg.qmax).astype("int8"), scale


class Realizer:
    """One rewrite of a function: memo of the new value of every original node."""

    def __init__(self, annotation: Annotation, scales: dict[int, float], cfg: QConfig):
        self.annotation = annotation
        self.scales = scales
        # original node -> the scale it is quantized at as some anchor's data input
        self.input_scale = {id(a.args[0]): scales[id(a)] for a in annotation.anchors}
        self.cfg = cfg
        self.memo: dict[int, Any] = {}
        self.requantized: dict[tuple[int, float], Expr] = {}
        self.dequantized: dict[int, Expr] = {}

    def run(self, fn: Function) -> Function:
        """The realized function (types to be inferred again)."""
        for e in post_order(fn.body):
            if isinstance(e, Op):
                continue
            self.memo[id(e)] = self.visit(e)
        return Function(fn.params, self.to_float(self.memo[id(fn.body)]))

    # --- conversions between float and integer values ------------------------------------

    def to_float(self, v: Any) -> Expr:
        """The float expression of a value (dequantized if integer)."""
        if not isinstance(v, QValue):
            return v
        if id(v) not in self.dequantized:  # one dequantize for all the float users
            self.dequantized[id(v)] = multiply(cast(v.expr, "float32"), _f32(v.scale))
        return self.dequantized[id(v)]

    def to_input(self, v: Any, s: float) -> Expr:
        """The value as the anchor input dtype with scale s (quantized or requantized)."""
        key = (id(v), s)
        if key not in self.requantized:
            self.requantized[key] = self._to_input(v, s)
        return self.requantized[key]

    def _to_input(self, v: Any, s: float) -> Expr:
        qmax = self.cfg.qmax
        if not isinstance(v, QValue):
            x = round(multiply(v, _f32(1.0 / s)))
            return cast(clip(x, -qmax, qmax), INPUT_DTYPE)
        ratio = _scale(v.scale / s)
        if v.dtype == INPUT_DTYPE and ratio.size == 1 and float(ratio) == 1.0:
            return v.expr
        x = self.int32(v)
        k = _power_of_two(ratio)
        if k == 0:
            pass
        elif k is not None and k < 0 and v.bound + (1 << (-k - 1)) <= INT32_MAX:
            x = self.shift_right(x, -k)
        elif k is not None and k > 0:  # a finer target scale: exact, clipped before it wraps
            lim = (qmax >> k) + 1
            x = left_shift(clip(x, -lim, lim), _i32(k))
        else:  # not a power of two (or the rounding half could wrap)
            x = round(multiply(cast(x, "float32"), _f32(ratio)))
        return cast(clip(x, -qmax, qmax), INPUT_DTYPE)

    def shift_right(self, x: Expr, k: int) -> Expr:
        """x / 2**k rounded to nearest (ties upward): half added before the shift."""
        return right_shift(add(x, _i32(1 << (k - 1))), _i32(k))

    def int32(self, v: QValue) -> Expr:
        """The integer value widened to the accumulator dtype."""
        return v.expr if v.dtype == ACC_DTYPE else cast(v.expr, ACC_DTYPE)

    # --- the rules -------------------------------------------------------------------------

    def visit(self, e: Expr) -> Any:
        """The new value of node e (its inputs are in the memo)."""
        if isinstance(e, (Var, Constant)):
            return e
        if isinstance(e, Tuple):
            return Tuple(tuple(self.to_float(self.memo[id(f)]) for f in e.fields))
        if isinstance(e, TupleGetItem):
            return TupleGetItem(self.to_float(self.memo[id(e.tuple_value)]), e.index)
        if not (isinstance(e, Call) and isinstance(e.op, Op)):
            raise RelayError(f"quantize needs a dataflow @main (op calls, tuples), found a "
                             f"{type(e).__name__}; run relay_ir.transform.ToGraphNormalForm "
                             "first, and keep control flow out of the quantized model")
        args = [self.memo[id(a)] for a in e.args]
        rule = _RULES.get(e.op.name)
        if self.annotation.is_quantized(e):
            out = self.anchor(e, args)
        elif rule is not None:
            out = rule(self, e, args)
        else:
            out = None
        if out is None:  # the op stays float
            return Call(e.op, tuple(self.to_float(a) for a in args), e.attrs, e.type_args)
        return out

    def anchor(self, e: Call, args: list[Any]) -> QValue:
        """conv2d / dense on int8 data and weight, accumulating in int32."""
        s_in = self.scales[id(e)]
        data = self.to_input(args[0], s_in)
        weight = e.args[1]
        assert isinstance(weight, Constant)
        wq, s_w = quantize_weight(weight.data, self.cfg)
        attrs = dataclasses.replace(e.attrs, out_dtype=ACC_DTYPE)
        call = Call(e.op, (data, Constant(wq)), attrs, e.type_args)
        if s_w.ndim:  # the output channels are axis 1 of NCHW and the last axis of dense
            s_w = s_w.reshape(-1, 1, 1) if e.op.name == "nn.conv2d" else s_w
        # the int8 input is clipped to qmax, so no output exceeds qmax * sum |w| per channel
        bound = self.cfg.qmax * int(np.abs(wq.astype(np.int64)).reshape(len(wq), -1)
                                    .sum(axis=1).max(initial=0))
        return QValue(call, _scale(s_in * s_w), ACC_DTYPE, _shape(e), bound)


def _bias(r: Realizer, e: Call, q: QValue, c: np.ndarray) -> QValue | None:
    """q + c for a float constant c: c as an int32 constant at q's scale."""
    if q.shape is None or _shape(e) != q.shape:
        return None
    cq = round_half_away(np.asarray(c, np.float64) / q.scale)
    bound = q.bound + int(np.max(np.abs(cq), initial=0))
    if np.broadcast_shapes(cq.shape, q.shape) != q.shape or bound > INT32_MAX:
        return None
    expr = add(r.int32(q), Constant(cq.astype(ACC_DTYPE)))
    return QValue(expr, q.scale, ACC_DTYPE, q.shape, bound)


def _as_integer(r: Realizer, original: Expr, v: Any) -> Any:
    """A float value that some anchor quantizes anyway, as that int8 value (a residual
    connection from a float part: its add can stay integer); other values as they are."""
    if isinstance(v, QValue) or id(original) not in r.input_scale:
        return v
    s = r.input_scale[id(original)]
    return QValue(r.to_input(v, s), _scale(s), INPUT_DTYPE, _shape(original), r.cfg.qmax)


def _add(r: Realizer, e: Call, args: list[Any]) -> QValue | None:
    a, b = args
    if isinstance(a, QValue) != isinstance(b, QValue):
        a, b = _as_integer(r, e.args[0], a), _as_integer(r, e.args[1], b)
    if isinstance(b, QValue) and not isinstance(a, QValue):
        a, b = b, a
    if not isinstance(a, QValue):
        return None
    if isinstance(b, Constant) and b.data.dtype == np.float32:
        return _bias(r, e, a, b.data)
    if not isinstance(b, QValue) or _shape(e) != a.shape or a.shape != b.shape:
        return None
    if a.scale.shape == b.scale.shape and np.array_equal(a.scale, b.scale):
        if a.bound + b.bound > INT32_MAX:
            return None
        return QValue(add(r.int32(a), r.int32(b)), a.scale, ACC_DTYPE, a.shape,
                      a.bound + b.bound)
    k = _power_of_two(_scale(a.scale / b.scale))
    if k is None:
        return None
    fine, coarse = (b, a) if k > 0 else (a, b)  # a.scale = 2**k * b.scale
    bound = fine.bound + (coarse.bound << abs(k))
    if bound > INT32_MAX:  # the shift or the sum could wrap: add in float instead
        return None
    shifted = left_shift(r.int32(coarse), _i32(abs(k)))
    return QValue(add(r.int32(fine), shifted), fine.scale, ACC_DTYPE, a.shape, bound)


def _bias_add(r: Realizer, e: Call, args: list[Any]) -> QValue | None:
    q, bias = args[0], e.args[1]
    if not (isinstance(q, QValue) and isinstance(bias, Constant) and q.shape is not None):
        return None
    axis = e.attrs.axis % len(q.shape)
    shape = [1] * len(q.shape)
    shape[axis] = -1
    return _bias(r, e, q, np.asarray(bias.data).reshape(shape))


def _relu(r: Realizer, e: Call, args: list[Any]) -> QValue | None:
    q = args[0]
    if not isinstance(q, QValue):
        return None
    return dataclasses.replace(q, expr=Call(e.op, (q.expr,), e.attrs, e.type_args))


def _max_pool(r: Realizer, e: Call, args: list[Any]) -> QValue | None:
    q = args[0]
    if not isinstance(q, QValue) or e.attrs.layout != "NCHW":
        return None
    if q.scale.ndim >= 2 and q.scale.shape[-2:] != (1, 1):
        return None  # the scale varies inside a pooling window
    return dataclasses.replace(q, expr=Call(e.op, (q.expr,), e.attrs, e.type_args),
                               shape=_shape(e))


def _layout(r: Realizer, e: Call, args: list[Any]) -> QValue | None:
    q = args[0]
    if not isinstance(q, QValue):
        return None
    scale = q.scale
    if scale.size != 1:  # the scale moves with its elements
        if q.shape is None:
            return None
        full = np.broadcast_to(scale, q.shape)
        scale = np.asarray(REFERENCES[e.op](full, attrs=e.attrs), np.float64)
    return dataclasses.replace(q, expr=Call(e.op, (q.expr,), e.attrs, e.type_args),
                               scale=scale, shape=_shape(e))


_RULES = {"add": _add, "nn.bias_add": _bias_add, "nn.relu": _relu,
          "nn.max_pool2d": _max_pool, **{name: _layout for name in LAYOUT_OPS}}


def realize(fn: Function, annotation: Annotation, scales: dict[int, float],
            cfg: QConfig) -> Function:
    """`fn` with its annotated anchors in int8 (see the module doc)."""
    return Realizer(annotation, scales, cfg).run(fn)
