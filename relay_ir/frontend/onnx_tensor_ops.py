"""ONNX converters, part 1: elementwise math, casts, constants, shape ops and reductions.

Each converter maps one ONNX node onto relay_ir builder calls; attribute-versus-input
changes across opsets (Squeeze/Unsqueeze/ReduceSum axes at 13, Split sizes at 13, Slice
bounds at 10, the other reductions' axes at 18) are decided by `node.opset`.

    >>> from relay_ir.frontend.onnx_common import CONVERTERS
    >>> CONVERTERS["Add"].__name__
    '_add'
"""

from __future__ import annotations

from typing import Any

import numpy as np

import relay_ir.op.reduce as red
import relay_ir.op.tensor as T
import relay_ir.op.transform as tf
from relay_ir.builder import const
from relay_ir.expr import Expr, Tuple, TupleGetItem
from relay_ir.frontend.onnx_common import OnnxNode, converter, normalize_axis, onnx_dtype
from relay_ir.op.dyn_reshape import dyn_reshape
from relay_ir.op.dyn_strided_slice import dyn_strided_slice, static_bounds
from relay_ir.op.shape_of import shape_of
from relay_ir.transform.shape_value import static_reshape

Ctx = Any  # relay_ir.frontend.onnx._GraphConverter (not imported: it imports this module)


def scalar(value: Any, dtype: str) -> Expr:
    """A 0-d constant of `dtype` (binary ops need both operands of one dtype)."""
    return const(np.array(value, dtype=dtype))


def dtype_of(ctx: Ctx, e: Expr, node: OnnxNode) -> str:
    """The dtype of a converted tensor."""
    return ctx.tensor_type(e, node).dtype


# --- elementwise --------------------------------------------------------------------------

_BINARY = {"Add": T.add, "Sub": T.subtract, "Mul": T.multiply, "Div": T.divide,
           "Equal": T.equal, "Less": T.less, "Greater": T.greater,
           "LessOrEqual": T.less_equal, "GreaterOrEqual": T.greater_equal,
           "And": T.logical_and, "Or": T.logical_or, "Xor": T.not_equal}


@converter(*_BINARY)
def _add(ctx: Ctx, node: OnnxNode) -> Expr:
    return _BINARY[node.op_type](ctx.input(node, 0), ctx.input(node, 1))


@converter("Pow")
def _pow(ctx: Ctx, node: OnnxNode) -> Expr:
    x, y = ctx.input(node, 0), ctx.input(node, 1)
    dt = dtype_of(ctx, x, node)
    if dtype_of(ctx, y, node) != dt:  # ONNX allows another exponent type; the result is x's
        y = T.cast(y, dt)
    return T.power(x, y)


_VARIADIC = {"Sum": T.add, "Max": T.maximum, "Min": T.minimum, "Mean": T.add}


@converter(*_VARIADIC)
def _variadic(ctx: Ctx, node: OnnxNode) -> Expr:
    args = [ctx.input(node, i) for i in range(len(node.inputs))]
    out = args[0]
    for a in args[1:]:
        out = _VARIADIC[node.op_type](out, a)
    if node.op_type == "Mean" and len(args) > 1:
        out = T.divide(out, scalar(len(args), dtype_of(ctx, out, node)))
    return out


_UNARY = {"Sigmoid": T.sigmoid, "Tanh": T.tanh, "Erf": T.erf, "Sqrt": T.sqrt, "Exp": T.exp,
          "Log": T.log, "Abs": T.abs, "Neg": T.negative, "Floor": T.floor, "Ceil": T.ceil,
          "Not": T.logical_not}


@converter(*_UNARY)
def _unary(ctx: Ctx, node: OnnxNode) -> Expr:
    return _UNARY[node.op_type](ctx.input(node, 0))


@converter("Reciprocal")
def _reciprocal(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    return T.divide(scalar(1, dtype_of(ctx, x, node)), x)


@converter("Identity")
def _identity(ctx: Ctx, node: OnnxNode) -> Expr:
    return ctx.input(node, 0)


@converter("Where")
def _where(ctx: Ctx, node: OnnxNode) -> Expr:
    return T.where(ctx.input(node, 0), ctx.input(node, 1), ctx.input(node, 2))


@converter("Cast")
def _cast(ctx: Ctx, node: OnnxNode) -> Expr:
    to = onnx_dtype(int(node.attr("to")), node.where())
    return T.cast(ctx.input(node, 0), to)


@converter("CastLike")
def _cast_like(ctx: Ctx, node: OnnxNode) -> Expr:
    return T.cast(ctx.input(node, 0), dtype_of(ctx, ctx.input(node, 1), node))


# --- constants ----------------------------------------------------------------------------


@converter("Constant")
def _constant(ctx: Ctx, node: OnnxNode) -> Expr:
    if "value" in node.attrs:
        return const(np.asarray(node.attrs["value"]))
    for key, dt in (("value_float", "float32"), ("value_floats", "float32"),
                    ("value_int", "int64"), ("value_ints", "int64")):
        if key in node.attrs:
            return const(np.array(node.attrs[key], dtype=dt))
    raise node.error(f"only tensor, float(s) and int(s) values are supported, got "
                     f"{sorted(node.attrs)}")


@converter("ConstantOfShape")
def _constant_of_shape(ctx: Ctx, node: OnnxNode) -> Expr:
    shape = tuple(ctx.static_ints(node, 0, "the shape"))
    value = node.attr("value")
    v = np.zeros((), "float32") if value is None else np.asarray(value).reshape(())
    if any(d == 0 for d in shape):
        raise node.error(f"empty tensors (shape {list(shape)}) are not supported")
    return T.full(const(v), shape, v.dtype.name)


@converter("Shape")
def _shape(ctx: Ctx, node: OnnxNode) -> Expr:
    # the dims asked for, when all static, are a constant (later nodes fold with it);
    # else relay's shape_of, which the VM reads at run time from the tensor
    x = ctx.input(node, 0)
    shape = ctx.shape(x, node)
    picked = range(len(shape))[slice(node.attr("start", 0), node.attr("end", None))]
    dims = [shape[i] for i in picked]
    if all(isinstance(d, int) for d in dims):
        return const(np.array(dims, dtype="int64"))
    out = shape_of(x)
    if len(picked) == len(shape):
        return out
    return tf.strided_slice(out, (picked.start,), (picked.stop,))


@converter("Size")
def _size(ctx: Ctx, node: OnnxNode) -> Expr:
    # a constant where the shape is static; else the product of shape_of, at run time
    x = ctx.input(node, 0)
    shape = ctx.shape(x, node)
    if all(isinstance(d, int) for d in shape):
        return const(np.array(int(np.prod(shape, dtype=np.int64)), dtype="int64"))
    return red.prod(shape_of(x))


@converter("Range")
def _range(ctx: Ctx, node: OnnxNode) -> Expr:
    values = []
    for i, what in enumerate(("start", "limit", "delta")):
        v = np.asarray(ctx.static(node, i, what))
        if v.ndim != 0 or v.dtype.kind not in "iuf":
            raise node.error(f"input {i} ({what}) must be a number (a 0-d tensor), got "
                             f"{v.dtype.name} of shape {list(v.shape)}")
        values.append(v)
    start, limit, delta = values
    if delta == 0:
        raise node.error("delta (input 2) must not be 0")
    count = max(0, int(np.ceil((float(limit) - float(start)) / float(delta))))
    if count > _RANGE_LIMIT:
        raise node.error(f"Range({start}, {limit}, {delta}) has {count} elements, more than "
                         f"the {_RANGE_LIMIT} a constant made at conversion time may hold")
    return const(np.arange(start, limit, delta, dtype=start.dtype))


_RANGE_LIMIT = 1 << 26


# --- shape ops ----------------------------------------------------------------------------


@converter("Reshape")
def _reshape(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    if node.opset < 5:
        shape = node.ints("shape")
        if shape is None:
            raise node.error(f"Reshape at opset {node.opset} takes its target shape from the "
                             f"'shape' attribute, which is missing")
    elif ctx.maybe_static(node, 1) is None:  # computed from `?` dims: known when run
        target, allowzero = ctx.input(node, 1), int(node.attr("allowzero", 0))
        known = static_reshape(x, target, allowzero, ctx.type_of)
        if known is not None:  # the flatten [Shape(x)[0], -1]: (0, -1) keeps static dims
            return tf.reshape(x, known[0])
        return dyn_reshape(x, target, allowzero=bool(allowzero))
    else:
        shape = ctx.static_ints(node, 1, "the target shape")
    if node.attr("allowzero", 0) and 0 in shape:
        raise node.error("allowzero=1 with a 0 in the shape makes an empty tensor, "
                         "which is not supported")
    return tf.reshape(x, shape)


@converter("Flatten")
def _flatten(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = ctx.shape(x, node)
    axis = node.attr("axis", 1)
    axis = axis + len(shape) if axis < 0 else axis
    if not 0 <= axis <= len(shape):
        raise node.error(f"axis {node.attr('axis')} is out of range for rank {len(shape)}")
    head, tail = shape[:axis], shape[axis:]
    if all(isinstance(d, int) for d in head):
        return tf.reshape(x, (int(np.prod(head, dtype=np.int64)), -1))
    if all(isinstance(d, int) for d in tail):
        return tf.reshape(x, (-1, int(np.prod(tail, dtype=np.int64))))
    if axis == 1:
        return tf.reshape(x, (0, -1))
    ctx.static_shape(x, node, f"Flatten at axis {axis}")
    raise AssertionError("unreachable")


@converter("Transpose")
def _transpose(ctx: Ctx, node: OnnxNode) -> Expr:
    return tf.transpose(ctx.input(node, 0), node.ints("perm"))


def _axes(ctx: Ctx, node: OnnxNode, input_since: int) -> list[int] | None:
    """The axes of Squeeze/Unsqueeze/Reduce*: an attribute before `input_since`, input 1 after."""
    if node.opset < input_since:
        return node.ints("axes")
    if not ctx.has(node, 1):
        return None
    return [int(a) for a in np.asarray(ctx.static(node, 1, "the axes")).reshape(-1)]


@converter("Squeeze")
def _squeeze(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    axes = _axes(ctx, node, 13)
    if axes is None:
        return tf.squeeze(x)
    ndim = len(ctx.shape(x, node))
    return tf.squeeze(x, [normalize_axis(a, ndim, node, "axes entry") for a in axes])


@converter("Unsqueeze")
def _unsqueeze(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    axes = _axes(ctx, node, 13)
    if not axes:
        raise node.error("axes are required")
    out_ndim = len(ctx.shape(x, node)) + len(axes)
    norm = sorted(normalize_axis(a, out_ndim, node, "axes entry") for a in axes)
    if len(set(norm)) != len(norm):
        raise node.error(f"axes {axes} name a dim twice")
    for a in norm:  # ascending: each axis refers to the final output positions
        x = tf.expand_dims(x, a)
    return x


@converter("Concat")
def _concat(ctx: Ctx, node: OnnxNode) -> Expr:
    args = [ctx.input(node, i) for i in range(len(node.inputs)) if ctx.has(node, i)]
    return tf.concatenate(Tuple(tuple(args)), axis=int(node.attr("axis", 0)))


@converter("Split")
def _split(ctx: Ctx, node: OnnxNode) -> list[Expr]:
    x = ctx.input(node, 0)
    shape = ctx.shape(x, node)
    axis = normalize_axis(int(node.attr("axis", 0)), len(shape), node)
    n_out = len(node.outputs)
    if node.opset < 13:
        sizes = node.ints("split")
    else:
        sizes = None if not ctx.has(node, 1) else ctx.static_ints(node, 1, "split")
    if sizes is None and node.opset >= 18 and node.attr("num_outputs") is not None:
        n_out = int(node.attr("num_outputs"))
        d = shape[axis]
        if isinstance(d, int) and d % n_out:
            chunk = -(-d // n_out)  # ceil: the last part is smaller
            sizes = [chunk] * (d // chunk) + ([d % chunk] if d % chunk else [])
    if sizes is None:
        parts = tf.split(x, n_out, axis)
        count = n_out
    else:
        bounds = np.cumsum(sizes)[:-1].tolist()
        parts = tf.split(x, [int(b) for b in bounds], axis) if bounds else None
        count = len(sizes)
        if parts is None:
            return [x]
    return [TupleGetItem(parts, k) for k in range(count)]


_BIG = 2**62  # slice bounds beyond any real dim (ONNX uses INT64_MAX/MIN for "to the end")


@converter("Slice")
def _slice(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = ctx.shape(x, node)
    if node.opset < 10:
        starts, ends = node.ints("starts"), node.ints("ends")
        axes, steps = node.ints("axes"), None
    elif any(ctx.has(node, i) and ctx.maybe_static(node, i) is None for i in (1, 2, 4)):
        return _dyn_slice(ctx, node, x, len(shape))
    else:
        starts = ctx.static_ints(node, 1, "starts")
        ends = ctx.static_ints(node, 2, "ends")
        axes = ctx.static_ints(node, 3, "axes") if ctx.has(node, 3) else None
        steps = ctx.static_ints(node, 4, "steps") if ctx.has(node, 4) else None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    axes = [normalize_axis(a, len(shape), node, "axes entry") for a in axes]

    if any(s == 0 for s in steps):
        raise node.error("a step of 0 is not allowed")
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise node.error(f"starts {starts}, ends {ends}, axes {axes} and steps {steps} must "
                         "have one value per sliced axis")
    # ONNX's clamping as the static slice's numpy bounds (they differ from numpy's own
    # when striding backwards from before the first element)
    bounds = [static_bounds(b, e, k, shape[a]) for b, e, k, a in zip(starts, ends, steps, axes)]
    if any(b is None for b in bounds):  # a `?` dim where that depends on its extent
        return dyn_strided_slice(x, starts, ends, steps, axes)
    return tf.strided_slice(x, [b[0] for b in bounds], [b[1] for b in bounds],  # type: ignore[index]
                            steps, axes)


def _dyn_slice(ctx: Ctx, node: OnnxNode, x: Expr, rank: int) -> Expr:
    """Slice whose starts, ends or steps are known only at run time (e.g. a Loop body's
    bounds from its iteration count): dyn.strided_slice, which clamps as numpy does when
    run. axes must be known now (they decide which dims of the result are `?`)."""
    starts, ends = ctx.input(node, 1), ctx.input(node, 2)
    t = ctx.tensor_type(starts, node)
    n = t.shape[0] if t.ndim == 1 else None  # (the op's relation refuses another rank)
    axes = None
    if ctx.has(node, 3):  # (NonStaticInput if not: they decide which dims are `?`)
        axes = [normalize_axis(a, rank, node, "axes entry")
                for a in ctx.static_ints(node, 3, "axes")]
        n = len(axes)
    if ctx.has(node, 4):
        steps = ctx.input(node, 4)
    elif isinstance(n, int):
        steps = const(np.ones(n, "int64"))
    else:
        raise node.error("starts must be a 1-D tensor of static length when steps are not "
                         "given")
    return dyn_strided_slice(x, starts, ends, steps, axes)


@converter("Gather")
def _gather(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = ctx.shape(x, node)
    axis = normalize_axis(int(node.attr("axis", 0)), len(shape), node)
    idx = ctx.maybe_static(node, 1)
    if idx is not None and isinstance(shape[axis], int):
        d = shape[axis]
        if np.any((idx < -d) | (idx >= d)):
            raise node.error(f"indices out of range for dim {axis} of size {d}")
        return tf.take(x, const(np.where(idx < 0, idx + d, idx).astype(idx.dtype)), axis,
                       mode="clip")
    # negative indices count from the end: "wrap" maps [-d, d) onto [0, d)
    return tf.take(x, ctx.input(node, 1), axis, mode="wrap")


@converter("Expand")
def _expand(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = tuple(ctx.static_ints(node, 1, "the shape"))
    return _broadcast(x, shape, dtype_of(ctx, x, node))


def _broadcast(x: Expr, shape: tuple[int, ...], dt: str) -> Expr:
    # broadcasting against a tensor of the target shape is exactly Expand's rule
    if dt == "bool":
        return T.logical_or(x, T.zeros(shape, "bool"))
    return T.add(x, T.zeros(shape, dt))


@converter("Tile")
def _tile(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    repeats = ctx.static_ints(node, 1, "repeats")
    if len(repeats) != len(ctx.shape(x, node)) or min(repeats, default=1) < 1:
        raise node.error(f"repeats {repeats} must have one entry >= 1 per input dim")
    shape = ctx.shape(x, node)
    if all(isinstance(d, int) for d in shape):
        # (d0, d1) -> (1, d0, 1, d1), broadcast to (r0, d0, r1, d1), then merged: one
        # broadcast whatever the counts (r copies in a concatenate would be r nodes).
        unit = [v for d in shape for v in (1, d)]
        wide = [v for d, r in zip(shape, repeats) for v in (r, d)]
        y = _broadcast(tf.reshape(x, unit), tuple(wide), dtype_of(ctx, x, node))
        return tf.reshape(y, [d * r for d, r in zip(shape, repeats)])
    if max(repeats, default=1) > _TILE_COPIES:
        raise node.error(f"repeats {repeats} on an input of dynamic shape "
                         f"{tuple(shape)}: at most {_TILE_COPIES} copies per axis")
    for axis, r in enumerate(repeats):
        if r > 1:
            x = tf.concatenate(Tuple((x,) * r), axis=axis)
    return x


_TILE_COPIES = 1024


# --- reductions ---------------------------------------------------------------------------

_REDUCE = {"ReduceSum": red.sum, "ReduceMean": red.mean, "ReduceMax": red.max,
           "ReduceMin": red.min, "ReduceProd": red.prod}
_REDUCE_COMPOSED = ("ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                    "ReduceLogSumExp")


@converter(*_REDUCE, *_REDUCE_COMPOSED)
def _reduce(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    ndim = len(ctx.shape(x, node))
    axes = _axes(ctx, node, 13 if node.op_type == "ReduceSum" else 18)
    keep = bool(node.attr("keepdims", 1))
    if not axes:
        if node.attr("noop_with_empty_axes", 0):
            return x
        axes = list(range(ndim))
    axes = sorted(normalize_axis(a, ndim, node, "axes entry") for a in axes)
    op = node.op_type
    if op in _REDUCE:
        return _REDUCE[op](x, axes, keep)
    if op == "ReduceL1":
        return red.sum(T.abs(x), axes, keep)
    if op == "ReduceL2":
        return T.sqrt(red.sum(T.multiply(x, x), axes, keep))
    if op == "ReduceSumSquare":
        return red.sum(T.multiply(x, x), axes, keep)
    if op == "ReduceLogSum":
        return T.log(red.sum(x, axes, keep))
    m = red.max(x, axes, True)  # log-sum-exp, shifted by the max for stability
    out = T.add(T.log(red.sum(T.exp(T.subtract(x, m)), axes, True)), m)
    return out if keep else tf.squeeze(out, axes)


@converter("ArgMax", "ArgMin")
def _argmax(ctx: Ctx, node: OnnxNode) -> Expr:
    x = ctx.input(node, 0)
    shape = ctx.shape(x, node)
    axis = normalize_axis(int(node.attr("axis", 0)), len(shape), node)
    fn = red.argmax if node.op_type == "ArgMax" else red.argmin
    keep = bool(node.attr("keepdims", 1))
    if not node.attr("select_last_index", 0):
        return T.cast(fn(x, [axis], keep), "int64")
    # the last extremum is the first one of the reversed axis, counted from the end
    d = shape[axis]
    if not isinstance(d, int):
        raise node.error(f"select_last_index=1 needs dim {axis} to be static")
    rev = tf.strided_slice(x, [-1], [-_BIG], [-1], [axis])
    idx = T.cast(fn(rev, [axis], keep), "int64")
    return T.subtract(scalar(d - 1, "int64"), idx)
