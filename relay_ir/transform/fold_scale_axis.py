"""FoldScaleAxis: fold a per-channel constant scale into the weight of the conv2d or dense
that produces the scaled value (TVM's backward FoldScaleAxis), or that reads it (forward).

After SimplifyInference and FoldConstant a batch norm is `multiply(y, s)` + `add(., b)`
with per-channel constants; the multiply costs a read of `s` and a multiply per output
element in the fused kernel's epilogue. Scaling the weight once at compile time removes it
(measured on one thread of a Sapphire Rapids core: ResNet-18 / 50, MobileNetV2 and
ResNeXt-26 within 1% of the unfolded build either way, benchmarks.fold_scale_axis: the
epilogue's multiply and add are a few vector operations per 16 outputs beside the conv's
hundreds of FMAs). Backward:

- `multiply(conv2d(x, W), s)` -> `conv2d(x, W * s)`, `s` along W's output-channel axis
  (O of OIHW / HWIO: grouped and depthwise convs too, each output channel has its own
  filter); `multiply(dense(x, W), s)` -> `dense(x, W * s)` along W's rows (the units);
- through a bias: `multiply(add(conv2d(x, W), b), s)` -> `add(conv2d(x, W * s), b * s)`
  (also `nn.bias_add` and `subtract(., b)`, and chains of them), so a conv's own bias
  followed by a batch norm folds too.

Each rewrite is exact up to rounding: the scaled weight is computed in float64 and
rounded once to the weight's dtype. The pass folds only where that is the same program:
- `s` (and any bias passed through) is a float Constant of the value's dtype that
  broadcasts along the anchor's output-channel axis only (NCHW axis 1, NHWC axis 3,
  dense the last) and does not enlarge the value: a scale along H or W, or one that
  would broadcast a batch, is left alone; so is a non-finite scale (0 * inf);
- W is a Constant (params bound): scaling a weight that is a run-time input would add a
  kernel per call. The pass runs after FoldConstant, which makes a batch norm's
  `gamma / sqrt(var + eps)` one Constant; the product is computed here, not left to the
  next FoldConstant, whose size limit would leave the largest weights unscaled;
- every value on the way (the conv, each bias add) has no other consumer, which would
  read it unscaled;
- W, `s` and the result share one float dtype: integer (quantized, int8 -> int32)
  anchors and a conv with another out_dtype are left alone.

Forward (TVM's forward FoldScaleAxis, the plain case): `conv2d(multiply(x, s), W)` ->
`conv2d(x, W * s)`, `s` along the conv's input channels (the data's C; W's I axis, each
group's filters scaled by the channels that group reads); `dense(multiply(x, s), W)` ->
`dense(x, W * s)` along W's columns. A zero-padded conv is fine (0 * s = 0); the same
conditions hold (constants, one consumer of the multiply, one float dtype). The scale is
not moved through a ReLU or an add on the way (TVM does, for a positive scale): in the
models met so far a batch norm's scale sits right after its conv, where the backward
fold takes it.

    >>> import numpy as np, relay_ir as R
    >>> from relay_ir import nn
    >>> x = R.Var("x", R.TensorType((1, 2, 4, 4), "float32"))
    >>> w = R.Constant(np.ones((3, 2, 1, 1), "float32"))
    >>> s = R.Constant(np.array([1.0, 2.0, 3.0], "float32").reshape(3, 1, 1))
    >>> mod = R.IRModule.from_expr(R.Function((x,), R.multiply(nn.conv2d(x, w), s)))
    >>> body = FoldScaleAxis()(mod)["main"].body
    >>> body.op.name, body.args[1].data[:, 0, 0, 0].tolist()
    ('nn.conv2d', [1.0, 2.0, 3.0])
"""

from __future__ import annotations

import dataclasses

import numpy as np

from relay_ir.expr import Call, Constant, Expr, Function
from relay_ir.module import IRModule
from relay_ir.transform.analysis import op_name, use_counts
from relay_ir.transform.infer_type import ensure_typed
from relay_ir.transform.pass_manager import FunctionPass, PassContext
from relay_ir.transform.rewrite import rewrite
from relay_ir.ty import TensorType

# the position of the output channel in each layout the conv2d op accepts
_OUT_AXIS_OF_DATA = {"NCHW": 1, "NHWC": 3}
_OUT_AXIS_OF_KERNEL = {"OIHW": 0, "HWIO": 3}
_IN_AXIS_OF_KERNEL = {"OIHW": 1, "HWIO": 2}


def _float_type(t: object) -> TensorType | None:
    if isinstance(t, TensorType) and np.dtype(t.dtype).kind == "f":
        return t
    return None


def channel_vector(c: Expr, t: TensorType, axis: int) -> np.ndarray | None:
    """The per-channel factors (float64, one per channel of `axis`) of a constant that
    broadcasts against a value of type `t` along `axis` only without enlarging it; None
    when `c` is not such a constant.

        >>> from relay_ir.ty import TensorType
        >>> t = TensorType((1, 3, 4, 4), "float32")
        >>> channel_vector(Constant(np.ones((3, 1, 1), "float32")), t, 1).tolist()
        [1.0, 1.0, 1.0]
        >>> channel_vector(Constant(np.ones((1, 1, 4), "float32")), t, 1) is None
        True
    """
    if not isinstance(c, Constant) or c.data.dtype != np.dtype(t.dtype):
        return None
    channels = t.shape[axis]
    data = c.data
    if data.ndim > t.ndim or not isinstance(channels, int):
        return None
    full = (1,) * (t.ndim - data.ndim) + tuple(data.shape)
    if any(n != 1 for i, n in enumerate(full) if i != axis) or full[axis] not in (1, channels):
        return None
    return np.broadcast_to(data.astype(np.float64).reshape(-1), (channels,))


def _anchor_axes(call: Call, t: TensorType) -> tuple[int, int] | None:
    """(output-channel axis of the result, output-channel axis of the weight) of a conv2d
    or dense; None for another op or a layout this pass does not know."""
    name = call.op.name  # type: ignore[union-attr]
    if name == "nn.dense":
        return t.ndim - 1, 0
    if name == "nn.conv2d":
        data = _OUT_AXIS_OF_DATA.get(call.attrs.data_layout)
        kernel = _OUT_AXIS_OF_KERNEL.get(call.attrs.kernel_layout)
        if data is not None and kernel is not None:
            return data, kernel
    return None


def _along(vec: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """`vec` shaped to broadcast along `axis` of a rank-`ndim` tensor (trailing 1s only)."""
    return vec.reshape((-1,) + (1,) * (ndim - 1 - axis))


def fold_scale_axis(expr: Expr) -> Expr:
    """`expr` with per-channel constant scales folded into conv2d / dense weights (see the
    module docstring); needs checked types.

        >>> fold_scale_axis(Constant(np.float32(1))).data
        array(1., dtype=float32)
    """
    uses = use_counts(expr)

    def scaled(old: Expr, new: Expr, vec: np.ndarray, axis: int) -> Expr | None:
        """`new` times `vec` along `axis` with the scale folded into a weight (and the
        biases on the way), or None. `old` is the node `new` replaced: its type and its
        consumers are the value's."""
        t = _float_type(old.checked_type)
        if t is None or uses.get(id(old), 0) != 1 or not isinstance(new, Call) or \
                not isinstance(old, Call):
            return None
        name = op_name(new)
        if name in ("nn.conv2d", "nn.dense"):
            return _scaled_anchor(new, t, vec, axis)
        if name == "nn.bias_add":
            if new.attrs.axis % t.ndim != axis:
                return None
            inner = scaled(old.args[0], new.args[0], vec, axis)
            bias = channel_vector(new.args[1], TensorType((t.shape[axis],), t.dtype), 0)
            if inner is None or bias is None:
                return None
            return dataclasses.replace(new, args=(inner, Constant((bias * vec).astype(t.dtype))),
                                       checked_type=None)
        if name in ("add", "subtract"):
            ks = (0, 1) if name == "add" else (0,)
            for k in ks:  # the value is args[k], the bias the other argument
                value_t = old.args[k].checked_type
                if value_t != t:  # the bias would broadcast the value: not a bias
                    continue
                bias = channel_vector(new.args[1 - k], t, axis)
                if bias is None:
                    continue
                inner = scaled(old.args[k], new.args[k], vec, axis)
                if inner is None:
                    continue
                b = Constant(_along(bias * vec, t.ndim, axis).astype(t.dtype))
                return dataclasses.replace(new, args=(inner, b) if k == 0 else (b, inner),
                                           checked_type=None)
        return None

    def visit(old: Expr, new: Expr) -> Expr:
        if op_name(new) in ("nn.conv2d", "nn.dense"):
            data = old.args[0]  # type: ignore[attr-defined]
            if uses.get(id(data), 0) == 1:
                return _input_scaled(old, new) or new  # type: ignore[arg-type]
            return new
        if op_name(new) != "multiply":
            return new
        assert isinstance(old, Call) and isinstance(new, Call)
        t = _float_type(old.checked_type)
        if t is None:
            return new
        for k in (0, 1):  # the scaled value is args[k], the scale the other argument
            value = old.args[k]
            if value.checked_type != t:
                continue
            axis = _channel_axis(value)
            if axis is None:
                continue
            vec = channel_vector(new.args[1 - k], t, axis)
            if vec is None or not np.all(np.isfinite(vec)):
                continue
            out = scaled(value, new.args[k], vec, axis)
            if out is not None:
                return out
        return new

    return rewrite(expr, visit)


def _channel_axis(value: Expr) -> int | None:
    """The output-channel axis of the conv2d / dense under a chain of bias adds that
    produce `value`; None when there is none."""
    e = value
    while op_name(e) in ("add", "subtract", "nn.bias_add", "multiply"):
        # the value side of a bias add is the one of the add's own type
        args = e.args  # type: ignore[attr-defined]
        e = args[0] if args[0].checked_type == e.checked_type else args[1]
    if op_name(e) in ("nn.conv2d", "nn.dense"):
        t = _float_type(e.checked_type)
        axes = _anchor_axes(e, t) if t is not None else None  # type: ignore[arg-type]
        return axes[0] if axes else None
    return None


def _scaled_anchor(new: Call, t: TensorType, vec: np.ndarray, axis: int) -> Expr | None:
    """conv2d / dense `new` (of result type `t`) with its weight scaled by `vec` along the
    weight's output-channel axis, or None when it cannot be."""
    axes = _anchor_axes(new, t)
    w = new.args[1]
    if axes is None or axes[0] != axis or not isinstance(w, Constant) or \
            w.data.dtype != np.dtype(t.dtype) or w.data.shape[axes[1]] != vec.shape[0]:
        return None
    scaled_w = w.data.astype(np.float64) * _along(vec, w.data.ndim, axes[1])
    return dataclasses.replace(new, args=(new.args[0], Constant(scaled_w.astype(w.data.dtype))),
                               checked_type=None)


def _input_factors(call: Call, vec: np.ndarray, w: np.ndarray) -> np.ndarray | None:
    """The factor of each weight element for input-channel scale `vec` (per channel of the
    data), shaped to broadcast against `w`; None for a layout this pass does not know."""
    if call.op.name == "nn.dense":  # type: ignore[union-attr]
        return vec.reshape(1, -1) if w.ndim == 2 and w.shape[1] == vec.shape[0] else None
    o_axis = _OUT_AXIS_OF_KERNEL.get(call.attrs.kernel_layout)
    i_axis = _IN_AXIS_OF_KERNEL.get(call.attrs.kernel_layout)
    if o_axis is None or i_axis is None:
        return None
    out_c, per_group = w.shape[o_axis], w.shape[i_axis]
    groups = call.attrs.groups
    if out_c % groups or per_group * groups != vec.shape[0]:
        return None
    # output channel o of group o // (out_c / groups) reads input channels
    # [group * per_group, (group + 1) * per_group)
    group = np.arange(out_c) // (out_c // groups)
    table = vec[group[:, None] * per_group + np.arange(per_group)[None, :]]  # (O, I/g)
    shape = [1] * w.ndim
    shape[o_axis], shape[i_axis] = out_c, per_group
    if o_axis > i_axis:
        table = table.T
    return table.reshape(shape)


def _input_scaled(old: Call, new: Call) -> Expr | None:
    """conv2d / dense `new` whose data is `multiply(x, s)`, s per input channel, as the
    call on x with W scaled along its input channels; None when it cannot be."""
    scaled_x = new.args[0]
    t = _float_type(old.args[0].checked_type)
    out_t = _float_type(old.checked_type)
    w = new.args[1]
    if t is None or out_t is None or out_t.dtype != t.dtype or op_name(scaled_x) != "multiply" \
            or op_name(old.args[0]) != "multiply" or not isinstance(w, Constant) \
            or w.data.dtype != np.dtype(t.dtype):
        return None
    if new.op.name == "nn.dense":  # type: ignore[union-attr]
        axis: int | None = t.ndim - 1
    else:
        axis = _OUT_AXIS_OF_DATA.get(new.attrs.data_layout)
    if axis is None:
        return None
    old_mul = old.args[0]
    for k in (0, 1):  # the scaled value is args[k], the scale the other argument
        if old_mul.args[k].checked_type != t:  # type: ignore[attr-defined]
            continue
        vec = channel_vector(scaled_x.args[1 - k], t, axis)  # type: ignore[attr-defined]
        if vec is None or not np.all(np.isfinite(vec)):
            continue
        factors = _input_factors(new, vec, w.data)
        if factors is None:
            continue
        scaled_w = (w.data.astype(np.float64) * factors).astype(w.data.dtype)
        return dataclasses.replace(new, args=(scaled_x.args[k], Constant(scaled_w)),  # type: ignore[attr-defined]
                                   checked_type=None)
    return None


class FoldScaleAxis(FunctionPass):
    """Fold per-channel constant scales into conv2d / dense weights (module docstring).

    opt_level 2 (TVM's is 3): relay_ir.build and autotune's task extraction run under
    the default PassContext, whose level is 2, and the rewrite is exact up to rounding as
    FoldConstant's (also 2) is.

        >>> FoldScaleAxis().opt_level
        2
    """

    name = "FoldScaleAxis"
    opt_level = 2

    def transform_module(self, mod: IRModule, ctx: PassContext) -> IRModule:
        """Type the module if needed, then fold in every function."""
        return super().transform_module(ensure_typed(mod), ctx)

    def transform_function(self, fn: Function, mod: IRModule, ctx: PassContext) -> Function:
        """Fold in one function."""
        out = fold_scale_axis(fn)
        assert isinstance(out, Function)
        return out


__all__ = ["FoldScaleAxis", "channel_vector", "fold_scale_axis"]
