"""The op strategy: for each Relay op, its TE compute (tensor_expr.ops) and how a fused group
anchored on it is scheduled (a template of schedule.templates, or a group schedule).

    >>> from relay_ir.strategy import STRATEGIES
    >>> from relay_ir.op.registry import get_op
    >>> STRATEGIES[get_op("nn.conv2d")].kind
    'anchor'

`Strategy.compute(inputs, attrs, out_type)` builds the op's TE tensors from its input
tensors (list of Tensors; a tuple input arrives as a list), its attrs dataclass and its
checked output type (static shapes). `kind` says how a group is scheduled:
"injective" (fused, vectorized, parallel), "reduce" (reductions and pooling), "softmax",
or "anchor" (conv2d / dense / matmul). `template(arg_specs, attrs, target)` names the
template family, e.g. "dense", and its attrs, or returns None when no template fits (the
target, None when unknown, only where a fit depends on its vectors: grouped convs); the
target picks the family's template with `schedule.templates.template_for`. Reductions, pooling
and softmax name families too ("reduce", "pool2d", "softmax"): a group without an anchor
takes its one such op's template where the target's is tunable (the GPU's).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from relay_ir.op.registry import Op, get_op
from relay_ir.ty import TensorType, TupleType, Type
from tensor_expr import ops
from tensor_expr.dtype import is_integral, is_uint
from tensor_expr.expr import cast, const, floordiv, select
from tensor_expr.tensor import Tensor, compute, reduce_axis
from tensor_expr.tensor import sum as te_sum
from tessel_errors import RelayError

ComputeFn = Callable[[list[Any], Any, Type], "Tensor | list[Tensor]"]
ArgSpecs = Sequence[tuple[tuple[int, ...], str]]
TemplateFn = Callable[[ArgSpecs, Any, Any], "tuple[str, dict[str, Any]] | None"]


@dataclass(frozen=True)
class Strategy:
    """How one Relay op becomes TE: its compute, its group-schedule kind, its template."""

    compute: ComputeFn
    kind: str = "injective"
    template: TemplateFn | None = None


STRATEGIES: dict[Op, Strategy] = {}


def out_shape(t: Type) -> tuple[int, ...]:
    """The static shape of a tensor type (RelayError when a dim is not an int)."""
    if not isinstance(t, TensorType) or not all(isinstance(d, int) for d in t.shape):
        raise RelayError(f"relay_ir.build needs static shapes in every fused group, got {t}")
    return tuple(int(d) for d in t.shape)


def _register(name: str, fn: ComputeFn, kind: str = "injective",
              template: TemplateFn | None = None) -> None:
    STRATEGIES[get_op(name)] = Strategy(fn, kind, template)


# --- elementwise and broadcast ---------------------------------------------------------

# relay's round rounds half away from zero (the interpreter's reference), not to even
_UNARY = {"abs": ops.abs, "ceil": ops.ceil, "floor": ops.floor, "round": ops.round_half_away,
          "exp": ops.exp, "log": ops.log, "sqrt": ops.sqrt, "rsqrt": ops.rsqrt,
          "sigmoid": ops.sigmoid, "tanh": ops.tanh, "negative": ops.negative,
          "erf": ops.erf, "nn.relu": ops.relu, "copy": ops.identity}
for _name, _fn in _UNARY.items():
    _register(_name, lambda xs, a, t, _f=_fn: _f(xs[0]))

_BINARY = {"add": ops.add, "subtract": ops.subtract, "multiply": ops.multiply,
           "divide": ops.divide, "power": ops.power, "maximum": ops.maximum,
           "minimum": ops.minimum, "equal": ops.equal, "not_equal": ops.not_equal,
           "less": ops.less, "less_equal": ops.less_equal, "greater": ops.greater,
           "greater_equal": ops.greater_equal, "logical_and": ops.logical_and,
           "logical_or": ops.logical_or, "right_shift": ops.right_shift,
           "left_shift": ops.left_shift}
for _name, _fn in _BINARY.items():
    _register(_name, lambda xs, a, t, _f=_fn: _f(xs[0], xs[1]))


def _trunc_div(a: Any, b: Any) -> Any:
    # integer divide truncates toward zero (C, ONNX Div), as the interpreter does; b == 0
    # divides by 1 there, so here too
    if is_uint(a.dtype):
        return floordiv(a, select(b == 0, const(1, b.dtype), b))
    zero = const(0, a.dtype)
    q = floordiv(select(a < zero, -a, a), select(b == zero, const(1, b.dtype),
                                                 select(b < zero, -b, b)))
    return select((a < zero) != (b < zero), -q, q)


def _divide(xs: Sequence[Tensor], a: Any, t: Type) -> Tensor:
    if is_integral(xs[0].dtype):
        return ops.broadcast_map([xs[0], xs[1]], _trunc_div, "divide")
    return ops.divide(xs[0], xs[1])


_register("divide", _divide)

_register("where", lambda xs, a, t: ops.where(xs[0], xs[1], xs[2]))
_register("logical_not", lambda xs, a, t: ops.equal(xs[0], const(False, "bool")))
_register("clip", lambda xs, a, t: ops.clip(xs[0], float(a.a_min), float(a.a_max)))
_register("cast", lambda xs, a, t: ops.cast(xs[0], a.dtype))
_register("nn.leaky_relu", lambda xs, a, t: ops.leaky_relu(xs[0], float(a.alpha)))
_register("nn.bias_add", lambda xs, a, t: ops.bias_add(xs[0], xs[1], axis=a.axis))
_register("nn.dropout", lambda xs, a, t: ops.identity(xs[0]))


def _fill(t: Type, value: float) -> Tensor:
    tt = t if isinstance(t, TensorType) else None
    assert tt is not None
    return compute(out_shape(tt), lambda *i: const(value, tt.dtype), name="full")


_register("zeros", lambda xs, a, t: _fill(t, 0.0))
_register("ones", lambda xs, a, t: _fill(t, 1.0))
_register("zeros_like", lambda xs, a, t: _fill(t, 0.0))
_register("ones_like", lambda xs, a, t: _fill(t, 1.0))


def _full(xs: list[Any], a: Any, t: Type) -> Tensor:
    fill = xs[-1]
    assert isinstance(t, TensorType)
    return compute(out_shape(t), lambda *i: cast(fill[()], t.dtype), name="full")


_register("full", _full)
_register("full_like", _full)

# --- layout (injective) ----------------------------------------------------------------


def _reshape(xs: list[Any], a: Any, t: Type) -> Tensor:
    return ops.reshape(xs[0], out_shape(t))


for _name in ("reshape", "squeeze", "expand_dims"):
    _register(_name, _reshape)
_register("transpose", lambda xs, a, t: ops.transpose(xs[0], a.axes))
_register("concatenate", lambda xs, a, t: ops.concatenate(list(xs[0]), axis=a.axis))
_register("take", lambda xs, a, t: ops.take(xs[0], xs[1], axis=a.axis, mode=a.mode))
_register("strided_slice", lambda xs, a, t: ops.strided_slice(
    xs[0], list(a.begin), list(a.end), list(a.strides) if a.strides else None,
    list(a.axes) if a.axes is not None else None))


def _pad(xs: list[Any], a: Any, t: Type) -> Tensor:
    if a.pad_mode != "constant":
        raise RelayError(f"relay_ir.build: nn.pad mode {a.pad_mode!r} is not compiled "
                         "(only 'constant'); run it with relay_ir.interpret")
    return ops.pad_nd(xs[0], [p[0] for p in a.pad_width], [p[1] for p in a.pad_width],
                      float(a.pad_value))


_register("nn.pad", _pad)


def _layout_transform(xs: list[Any], a: Any, t: Type) -> Tensor:
    return ops.transpose(xs[0], [a.src_layout.index(c) for c in a.dst_layout])


_register("layout_transform", _layout_transform)


def _split(xs: list[Any], a: Any, t: Type) -> list[Tensor]:
    assert isinstance(t, TupleType)
    x = xs[0]
    axis = a.axis % x.ndim
    outs, begin = [], 0
    for f in t.fields:
        size = out_shape(f)[axis]
        outs.append(ops.strided_slice(x, [begin], [begin + size], None, [axis]))
        begin += size
    return outs


_register("split", _split)

# --- reductions, pooling, softmax ------------------------------------------------------


def _axes(a: Any, ndim: int) -> list[int]:
    if a.axis is None:
        axes = list(range(ndim))
    else:
        axes = [d % ndim for d in a.axis]
    if a.exclude:
        axes = [d for d in range(ndim) if d not in axes]
    return axes


# Reductions, pooling and softmax are scheduled by their group kind on the CPU; their
# template families ("reduce", "pool2d", "softmax") name the tunable GPU templates. A group
# takes such a template only where the target's is tunable (lower_group.anchor_task), so
# the CPU's fixed x86 namesakes do not change what the CPU builds.


def _reduce_template(name: str) -> TemplateFn:
    def template(args: ArgSpecs, a: Any, target: Any = None
                 ) -> tuple[str, dict[str, Any]] | None:
        axes = _axes(a, len(args[0][0]))
        return "reduce", {"op": name, "axis": tuple(axes), "keepdims": bool(a.keepdims)}
    return template


_REDUCE = {"sum": ops.sum, "mean": ops.mean, "max": ops.max, "min": ops.min, "prod": ops.prod}
for _name, _fn in _REDUCE.items():
    _register(_name, lambda xs, a, t, _f=_fn: _f(xs[0], axis=_axes(a, xs[0].ndim),
                                                 keepdims=a.keepdims), kind="reduce",
              template=_reduce_template(_name))
for _name, _fn in (("argmax", ops.argmax), ("argmin", ops.argmin)):
    def _arg(xs: list[Any], a: Any, t: Type, _f: Any = _fn) -> Tensor:
        axes = _axes(a, xs[0].ndim)
        if len(axes) != 1:
            raise RelayError("relay_ir.build compiles argmax/argmin over one axis")
        return _f(xs[0], axis=axes[0], keepdims=a.keepdims)
    _register(_name, _arg, kind="reduce")


def _pool(fn: Any, avg: bool) -> ComputeFn:
    def f(xs: list[Any], a: Any, t: Type) -> Tensor:
        if tuple(a.dilation) != (1, 1):
            raise RelayError("relay_ir.build compiles pooling without dilation only")
        extra = {"count_include_pad": a.count_include_pad} if avg else {}
        return fn(xs[0], tuple(a.pool_size), tuple(a.strides), tuple(a.padding),
                  ceil_mode=a.ceil_mode, layout=a.layout, **extra)
    return f


def _pool_template(kind: str) -> TemplateFn:
    def template(args: ArgSpecs, a: Any, target: Any = None
                 ) -> tuple[str, dict[str, Any]] | None:
        if tuple(a.dilation) != (1, 1) or a.layout != "NCHW":
            return None
        extra = {"count_include_pad": bool(a.count_include_pad)} if kind == "avg" else {}
        return "pool2d", {"op": kind, "pool_size": tuple(a.pool_size),
                          "strides": tuple(a.strides), "padding": tuple(a.padding),
                          "ceil_mode": bool(a.ceil_mode), **extra}
    return template


_register("nn.max_pool2d", _pool(ops.max_pool2d, False), kind="reduce",
          template=_pool_template("max"))
_register("nn.avg_pool2d", _pool(ops.avg_pool2d, True), kind="reduce",
          template=_pool_template("avg"))
_register("nn.global_avg_pool2d", lambda xs, a, t: ops.global_avg_pool2d(xs[0], a.layout),
          kind="reduce", template=lambda args, a, target=None: ("reduce", {
              "op": "mean", "axis": (2, 3), "keepdims": True}) if a.layout == "NCHW" else None)
_register("nn.softmax", lambda xs, a, t: ops.softmax(xs[0], axis=a.axis), kind="softmax",
          template=lambda args, a, target=None: ("softmax", {"axis": int(a.axis)}))
_register("nn.log_softmax", lambda xs, a, t: ops.log_softmax(xs[0], axis=a.axis),
          kind="softmax", template=lambda args, a, target=None: (
              "softmax", {"axis": int(a.axis), "log": True}))
_register("nn.layer_norm", lambda xs, a, t: ops.layer_norm(
    xs[0], xs[1] if a.scale else None, xs[2] if a.center else None, axis=a.axis,
    epsilon=float(a.epsilon)), kind="reduce")

# --- anchors: conv2d, dense, matmul ----------------------------------------------------


def _conv_ok(a: Any) -> None:
    if a.data_layout != "NCHW" or a.kernel_layout != "OIHW":
        raise RelayError(f"relay_ir.build compiles conv2d in NCHW/OIHW only, got "
                         f"{a.data_layout}/{a.kernel_layout}")


def _conv_compute(xs: list[Any], a: Any, t: Type) -> Tensor:
    _conv_ok(a)
    data, kernel = xs
    c = int(data.shape[1].value)
    if a.groups != 1 and a.groups == c and int(kernel.shape[1].value) == 1:
        return ops.depthwise_conv2d_nchw(data, kernel, tuple(a.strides), tuple(a.padding),
                                         tuple(a.dilation), out_dtype=a.out_dtype or None)
    return ops.conv2d_nchw(data, kernel, tuple(a.strides), tuple(a.padding),
                           tuple(a.dilation), a.groups, out_dtype=a.out_dtype or None)


def _widening(a: Any, args: ArgSpecs) -> dict[str, Any]:
    # an out_dtype other than the inputs' (int8 x int8 -> int32) is a template attr; the
    # same dtype is left out, so float workloads keep their tuning keys
    out = getattr(a, "out_dtype", "") or ""
    return {"out_dtype": out} if out and out != args[0][1] else {}


def _int8_dot(args: ArgSpecs, tattrs: dict[str, Any]) -> bool:
    # int8 x int8 summed in int32 (what relay_ir.quantize produces) has its own templates,
    # whose inner reduction is the CPU's 4-wide int8 dot product (VNNI's vpdpbusd)
    return [dt for _, dt in args] == ["int8", "int8"] and tattrs.get("out_dtype") == "int32"


def _tensor_core_conv(args: ArgSpecs, tattrs: dict[str, Any]) -> bool:
    # a float16 conv, any size (the template pads its implicit GEMM to tiles of 16): the
    # family "conv2d_tensorcore" (a GPU's tensor cores where it has them; other targets
    # map it back to their conv2d template)
    return [dt for _, dt in args] == ["float16", "float16"] and "out_dtype" not in tattrs


# a grouped conv takes the blocked template where each group's input and output channels
# fill at least one of the target's vectors, not only from 16 channels: AVX2's 8 lanes
# take ResNeXt-26's 256@56 -> 28 stride 2 and 256@28 3x3 convs (32 groups of 8), whose
# generic nest vectorizes the output columns and reads its input by a stride-2 gather
# there: 3284 us against ONNX Runtime's 731 in AVX2's per-layer table (benchmarks.models
# under benchmarks.avx2_host). AVX2 code, one Emerald Rapids core, CPU time, each conv in
# the model's order, two builds a side interleaved in one process (benchmarks.
# template_switch --switch relay_ir.strategy.GROUP_TEMPLATE_AT_LANES --models resnext26
# --target "llvm -mcpu=haswell", 7 and 9 rounds, load 1.7-2.5), off -> on: 256@56 -> 28
# stride 2 3037 -> 1032 and 3175 -> 1112 us, 256@28 598 -> 595, the convs in order
# 65.27 -> 62.72 and 66.95 -> 64.56 ms, the model (median) 68.47 -> 65.92 and 69.46 ->
# 67.72. AVX-512 (16 lanes) keeps 16: its template would run those groups on half vectors
GROUP_TEMPLATE_AT_LANES = True


def group_template_channels(target: Any = None) -> int:
    """The fewest channels per group (input and output) for which a grouped conv takes the
    blocked template group_conv2d on `target` (None: a target not known, 16).

        >>> group_template_channels("llvm -mcpu=haswell"), group_template_channels(
        ...     "llvm -mcpu=skylake-avx512"), group_template_channels(None)
        (8, 16, 16)
    """
    if not GROUP_TEMPLATE_AT_LANES or target is None:
        return 16
    from tessel_target import Target

    t = Target.parse(target)
    return min(16, t.fp32_lanes) if "cpu" in t.keys else 16


def _conv_template(args: ArgSpecs, a: Any, target: Any = None
                   ) -> tuple[str, dict[str, Any]] | None:
    _conv_ok(a)
    (dshape, _), (kshape, _) = args
    tattrs = {"strides": tuple(a.strides), "padding": tuple(a.padding),
              "dilation": tuple(a.dilation), "groups": a.groups, **_widening(a, args)}
    if a.groups == 1:
        if _tensor_core_conv(args, tattrs):
            return "conv2d_tensorcore", tattrs
        if _int8_dot(args, tattrs):
            return "conv2d_int8", tattrs
        # an image's few channels: read as they are, not blocked (schedule.templates.
        # x86_conv2d_stem; ResNet-18's 7x7 stem ran at 0.48 of ONNX Runtime's GFLOP/s)
        return ("conv2d_stem" if dshape[1] <= 4 else "conv2d"), tattrs
    if a.groups == dshape[1] and kshape[1] == 1 and kshape[0] == dshape[1]:
        return "depthwise_conv2d_nchw", tattrs
    # the blocked template vectorizes a group's output channels: with fewer than 16 per
    # group (ResNeXt's 32x4d has 4) its vectors are short and the generic nest was faster
    # untuned (measured on AVX-512: 4 channels 0.89 ms against 0.66, 16 alike, 80 1.1
    # against 3.1); a target of shorter vectors takes it from one vector a group
    # (GROUP_TEMPLATE_AT_LANES)
    least = group_template_channels(target)
    if kshape[0] // a.groups >= least and kshape[1] >= least:
        return "group_conv2d", tattrs
    return None


_register("nn.conv2d", _conv_compute, kind="anchor", template=_conv_template)


def _tensor_core_shapes(args: ArgSpecs, tattrs: dict[str, Any]) -> bool:
    # float16 x float16, any size (the template pads to tiles of 16): what a GPU's tensor
    # cores take (the family "dense_tensorcore"; other targets map it back to their dense
    # template, a GPU without tensor cores too)
    return [dt for _, dt in args] == ["float16", "float16"] and not tattrs


def _dense_template(args: ArgSpecs, a: Any, target: Any = None
                    ) -> tuple[str, dict[str, Any]] | None:
    if len(args[0][0]) != 2:
        return None
    tattrs = _widening(a, args)
    if _tensor_core_shapes(args, tattrs):
        return "dense_tensorcore", tattrs
    return ("dense_int8" if _int8_dot(args, tattrs) else "dense"), tattrs


_register("nn.dense", lambda xs, a, t: ops.dense(xs[0], xs[1], out_dtype=a.out_dtype or None),
          kind="anchor", template=_dense_template)


def _matmul_template(args: ArgSpecs, a: Any, target: Any = None
                     ) -> tuple[str, dict[str, Any]] | None:
    if a.transpose_a or len(args[0][0]) != 2 or len(args[1][0]) != 2:
        return None
    return "matmul", {"transpose_b": a.transpose_b}


def _matmul(xs: Sequence[Tensor], a: Any, t: Type) -> Tensor:
    x, y = xs
    if x.ndim == 2 and y.ndim == 2:
        return ops.matmul(x, y, a.transpose_a, a.transpose_b)
    # numpy-style batch dims (broadcast, right-aligned): one reduction over k per batch index
    shape = out_shape(t)
    nb = len(shape) - 2
    kdim = x.shape[-2] if a.transpose_a else x.shape[-1]
    r = reduce_axis((0, kdim), name="k")

    def batch(v: Tensor, idx: Sequence[Any]) -> list[Any]:
        dims = v.shape[:-2]
        own = idx[nb - len(dims):]
        return [const(0, "int32") if int(d.value) == 1 else q for d, q in zip(dims, own)]

    def body(*idx: Any) -> Any:
        i, j = idx[-2], idx[-1]
        xa = x[(*batch(x, idx[:nb]), r, i) if a.transpose_a else (*batch(x, idx[:nb]), i, r)]
        yb = y[(*batch(y, idx[:nb]), j, r) if a.transpose_b else (*batch(y, idx[:nb]), r, j)]
        return te_sum(cast(xa, t.dtype) * cast(yb, t.dtype), axis=r)

    return compute(shape, body, name="matmul", tag="matmul")


_register("matmul", _matmul, kind="anchor", template=_matmul_template)


def _bmm_template(args: ArgSpecs, a: Any, target: Any = None
                  ) -> tuple[str, dict[str, Any]] | None:
    if a.transpose_a or args[0][0][0] != args[1][0][0]:
        return None
    return "batch_matmul", {"transpose_b": a.transpose_b}


_register("nn.batch_matmul", lambda xs, a, t: ops.batch_matmul(
    xs[0], xs[1], a.transpose_a, a.transpose_b), kind="anchor", template=_bmm_template)


def strategy_of(op: Op) -> Strategy:
    """The strategy of `op` (a RelayError naming the op and pointing to the interpreter).

    `strategy_of(get_op("nn.relu")).kind == "injective"`
    """
    s = STRATEGIES.get(op)
    if s is None:
        raise RelayError(f"relay_ir.build has no kernel strategy for op '{op.name}'; run the "
                         "model with relay_ir.interpret, or add STRATEGIES[op] in "
                         "relay_ir/strategy.py")
    return s
