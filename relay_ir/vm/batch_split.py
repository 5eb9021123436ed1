"""Which `?`-batch groups may run as one specialised kernel per image.

A fused group whose only `?` is the batch (axis 0 of every tensor that has a `?`), and
whose every op computes image b of its output from image b of its inputs alone (a conv,
a dense, a pool, elementwise ops, a softmax or reduction over other axes, a reshape that
keeps each image's elements together), gives the
same result run once per image with the kernel built for batch 1: the template, its
blocking and any tuning record apply as in relay_ir.build, where a symbolic-extent
kernel gets the plain, untiled schedule (20-30x slower on a small CNN, measured).

The check is on the group's ops and typed shapes, conservative: an op not listed, or an
attribute that mixes images (a softmax over axis 0, a pad of the batch axis, a reshape
that moves elements between images), keeps the symbolic kernel.

    >>> import relay_ir
    >>> from relay_ir.transform.infer_type import InferType
    >>> text = "def @main(%x: Tensor[(?, 4), float32]) { nn.softmax(%x, axis=AXIS) }"
    >>> [per_image(InferType()(relay_ir.parse(text.replace("AXIS", a)))["main"])
    ...  for a in ("1", "0")]
    [True, False]
"""

from __future__ import annotations

import math
from typing import Any

from relay_ir.backend.lower_group import flatten_types, group_ops
from relay_ir.expr import Call, Function
from relay_ir.ty import TensorType

# ops that map image b to image b whatever their attributes (the batch is axis 0 of
# their data, which the per-call check below makes sure of)
_PER_IMAGE = frozenset({
    "abs", "ceil", "floor", "round", "exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh",
    "negative", "erf", "nn.relu", "copy", "add", "subtract", "multiply", "divide", "power",
    "maximum", "minimum", "equal", "not_equal", "less", "less_equal", "greater",
    "greater_equal", "logical_and", "logical_or", "logical_not", "floor_divide",
    "floor_mod", "where", "clip", "cast", "nn.leaky_relu", "nn.dropout", "nn.conv2d",
    "nn.dense", "nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d",
    "nn.batch_flatten",
})
# ops that do when their axis attribute is not the batch
_AXIS = frozenset({"nn.bias_add", "nn.softmax", "nn.log_softmax", "concatenate", "split"})
_REDUCE = frozenset({"sum", "mean", "max", "min", "prod", "argmax", "argmin"})
# ops whose output rank differs from their batched input's by design
_RESHAPING = _REDUCE | {"nn.batch_flatten", "nn.global_avg_pool2d", "reshape"}


def _batch_only(t: Any) -> bool:
    # every dim but axis 0 is a constant (axis 0 may be `?` or constant)
    return all(isinstance(d, int) for d in t.shape[1:])


def _image_size(t: Any) -> int:
    return math.prod(int(d) for d in t.shape[1:])


def has_batch(t: Any) -> bool:
    return isinstance(t, TensorType) and len(t.shape) > 0 and not isinstance(t.shape[0], int)


def _tensors(t: Any) -> list[Any]:
    return flatten_types(t) if t is not None else []


def _axis_ok(call: Call, rank: int) -> bool:
    a = call.attrs
    name = call.op.name
    if name == "reshape":  # (checked in per_image: images of equal size in and out)
        return True
    if name in _AXIS:
        return int(a.axis) % max(rank, 1) != 0
    if name in _REDUCE:
        axes = getattr(a, "axis", None)
        if axes is None or getattr(a, "exclude", False):
            return False
        axes = [axes] if isinstance(axes, int) else list(axes)
        return all(int(x) % max(rank, 1) != 0 for x in axes)
    if name == "transpose":
        return a.axes is not None and int(a.axes[0]) == 0
    if name == "nn.pad":
        return tuple(int(x) for x in a.pad_width[0]) == (0, 0)
    if name == "layout_transform":
        return str(a.src_layout).startswith("N") and str(a.dst_layout).startswith("N")
    return name in _PER_IMAGE


def per_image(fn: Function) -> bool:
    """Whether `fn` (a typed Primitive group) may run once per image of its `?` batch
    with the batch-1 kernel: its only `?` dims are axis 0, its outputs all carry the
    batch, and each op keeps images apart."""
    params = [t for p in fn.params for t in _tensors(p.checked_type or p.type_annotation)]
    outs = _tensors(fn.body.checked_type)
    if not any(has_batch(t) for t in params) or not all(has_batch(t) for t in outs):
        return False
    if not all(_batch_only(t) for t in params + outs):
        return False
    for call in group_ops(fn):
        ins = [t for a in call.args for t in _tensors(a.checked_type)]
        out = _tensors(call.checked_type)
        if not any(has_batch(t) for t in ins):
            continue  # a computation on constants alone
        if not all(_batch_only(t) for t in ins + out) or not all(has_batch(t) for t in out):
            return False
        # broadcasting aligns from the right: a batched input of lower rank than the
        # output would put its batch at another axis
        rank = len(out[0].shape)
        if call.op.name not in _RESHAPING and any(
                has_batch(t) and len(t.shape) != rank for t in ins):
            return False
        if not _axis_ok(call, len(ins[0].shape)):
            return False
        if call.op.name == "reshape" and _image_size(ins[0]) != _image_size(out[0]):
            return False  # a batch of another extent: images mix
    return True


__all__ = ["has_batch", "per_image"]
